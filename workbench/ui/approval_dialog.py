"""The tool approval dialog (G3, P3): decide one step's pending tool calls.

G12: the dialog is modeless and placed beside the transcript (``dialog_placement``), so the transcript
and the panels stay readable and scrollable while deciding. Q2: several calls of one step are one list
with per-item approve / edit / reject and "Approve the rest"; the decisions already made (``decided``)
are kept when the dialog is left part-way, and the next opening starts at the first undecided call.
A file tool's call shows what it would change as a diff (``proposed_diff``). The dialog is opened and
awaited by ``decision_dialogs.ask_approvals``.

Here: the layout (object names, focus order, no default button: G7), moving between the calls, and the
decisions with their settle (``decision_settle``). What is shown of the current call — headline, who
asks, tool line, command, diff — is ``approval_call_view.CallView``; what "Always" saves and "Make a
rule…" is ``approval_rules.AlwaysRules`` (Q3): mixins of the dialog.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QEvent, QObject, QSize, Qt, Signal, Slot
from PySide6.QtGui import QFont
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from workbench.ui.approval_call_view import CallView
from workbench.ui.approval_rules import AlwaysRules
from workbench.ui.buttons import quiet_button
from workbench.ui.decision_settle import DecisionSettle
from workbench.ui.plain_text import plain_label, plain_tooltip, rich_label, visible_json, visible_line
from workbench.ui.proposed_diff import FILE_TOOLS, DiffHighlighter
from workbench.ui.qt_async import start
from workbench.ui.style import safe_is_dark

if TYPE_CHECKING:
    from workbench.session import Question


class _Bounded(QScrollArea):
    """A label in a frameless scroll area as high as its text, up to ``lines`` lines, that never widens the
    dialog: a model's command of 20,000 characters or 120 lines scrolls there, where it pushed the dialog
    past the screen and Reject out of reach while Approve stayed on it (a review found it)."""

    def __init__(self, label: QLabel, lines: int, parent: QWidget) -> None:
        super().__init__(parent)
        self.setObjectName(f"{label.objectName()}_box")
        label.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        self.setWidget(label)
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Maximum)
        self._most = label.fontMetrics().lineSpacing() * lines + 2 * label.margin()
        label.installEventFilter(self)  # its text changed: so may the height it needs

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt override
        if event.type() == QEvent.Type.LayoutRequest:
            self.updateGeometry()
        return super().eventFilter(obj, event)

    def resizeEvent(self, event: Any) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        if event.oldSize().width() != event.size().width():
            self.updateGeometry()  # the text wraps otherwise at the new width: its height follows

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt override
        label = self.widget()
        parent = self.parentWidget()
        width = self.viewport().width() if self.isVisible() else (parent.width() - 24 if parent else 600)
        width = max(width, 200)
        need = label.heightForWidth(width) if label.hasHeightForWidth() else -1
        need = need if need > 0 else label.sizeHint().height()
        scrollbar = self.horizontalScrollBar().sizeHint().height() if label.minimumSizeHint().width() > width else 0
        return QSize(super().sizeHint().width(), min(need, self._most) + scrollbar)

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt override
        return QSize(0, min(self.sizeHint().height(), self.widget().fontMetrics().lineSpacing() * 2))


STOP_RUN = "stop-run"
"""What ``decision_dialogs.ask_decisions`` returns when the person chose "Stop this run" (G12)."""
STOP_CODE = 2
"""The dialog's result code for "Stop this run"."""


def _mono() -> QFont:
    font = QFont("monospace")
    font.setStyleHint(QFont.StyleHint.TypeWriter)
    return font


class ApprovalDialog(QDialog, CallView, AlwaysRules):
    """Decide one step's pending tool calls: one list (Q2), each call approved, edited or rejected, or
    the rest approved at once. Modeless (G12); ``decided`` are decisions made earlier (kept, Q2)."""

    sig_call_decided = Signal(str, dict)
    """A call was decided: the question id and its decision (Session.resume format)."""

    def __init__(self, questions: Sequence[Question], parent: QWidget | None = None, *,
                 decided: dict[str, dict[str, Any]] | None = None, session: Any = None) -> None:
        super().__init__(parent)
        self._session = session  # Q3: for "Make a rule…" (else the parent window's current session)
        self.setObjectName("approval_dialog")
        self.setWindowTitle("Approve tool call")
        self.setModal(False)  # G12: the transcript and the panels stay usable while deciding
        self.resize(780, 520)
        self.questions = list(questions)
        ids = {q.id for q in self.questions}
        self.decisions: dict[str, dict[str, Any]] = {k: dict(v) for k, v in (decided or {}).items() if k in ids}
        self.index = self._next_undecided(0)
        self._old_text: dict[str, str | None] = {}  # path -> current text (None: unreadable)
        self._read_errors: dict[str, str] = {}
        self._editing = False
        self._edit_error = ""

        outer = QVBoxLayout(self)
        self.header = plain_label()
        self.header.setObjectName("approval_header")
        self.header.setStyleSheet("font-size: 15px; font-weight: 600;")
        outer.addWidget(self.header)
        # D9: a sub-agent's call names the sub-agent and its task ("Sub-agent writer (task writer:ab12cd34)
        # asks to write /project/notes.md").
        self.agent_label = rich_label()  # our markup; the agent, task and action escaped (approval_call_view)
        self.agent_label.setObjectName("approval_agent")
        self.agent_label.setWordWrap(True)
        self.agent_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.agent_label.hide()
        outer.addWidget(self.agent_label)
        body = QHBoxLayout()
        outer.addLayout(body, 1)
        # Q2: the step's calls as one list; "Approve the rest" sits under it, far from Reject.
        self.batch = QWidget(self)
        self.batch.setObjectName("approval_batch_column")
        batch_lay = QVBoxLayout(self.batch)
        batch_lay.setContentsMargins(0, 0, 0, 0)
        self.batch_list = QListWidget(self.batch)
        self.batch_list.setObjectName("approval_batch")
        self.batch_list.setAccessibleName("Calls to decide")
        self.batch_list.setMinimumWidth(220)
        self.batch_list.setMaximumWidth(300)
        self.batch_list.setTextElideMode(Qt.TextElideMode.ElideMiddle)  # the file name stays in sight
        self.batch_list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.batch_list.setSpacing(2)
        self.batch_list.currentRowChanged.connect(self._select_row)
        batch_lay.addWidget(self.batch_list, 1)
        self.approve_all_button = self._button("Approve the rest", "approve_all", self.approve_all)
        self.approve_all_button.setToolTip("Approve every call not decided yet (the ones decided keep their decision)")
        batch_lay.addWidget(self.approve_all_button)
        body.addWidget(self.batch)
        detail = QWidget(self)
        lay = QVBoxLayout(detail)
        lay.setContentsMargins(0, 0, 0, 0)
        body.addWidget(detail, 1)
        self.tool_label = rich_label()  # our markup; the tool and path escaped (approval_call_view)
        self.tool_label.setObjectName("approval_tool")
        self.tool_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addWidget(_Bounded(self.tool_label, 2, self))
        self.reason_label = plain_label()
        self.reason_label.setObjectName("approval_reason")
        self.reason_label.setWordWrap(True)
        self.reason_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.reason_label.setProperty("role", "muted")  # the theme's secondary text colour
        lay.addWidget(_Bounded(self.reason_label, 4, self))
        # E2, E5: a command's line, folder and whether a sandbox holds it, in words (G14: not by colour).
        self.command_label = rich_label()  # our markup; command, folder and sandbox escaped (approval_call_view)
        self.command_label.setObjectName("approval_command")
        self.command_label.setWordWrap(True)
        self.command_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.command_box = _Bounded(self.command_label, 10, self)
        self.command_box.hide()
        lay.addWidget(self.command_box)

        self.tabs = QTabWidget(self)
        self.diff_view = QPlainTextEdit(self)
        self.diff_view.setObjectName("approval_diff")
        self.diff_view.setAccessibleName("Changes to the file")  # G14
        self.diff_view.setReadOnly(True)
        self.diff_view.setFont(_mono())
        self.diff_view.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)  # every line readable
        self._highlighter = DiffHighlighter(self.diff_view.document())
        self.args_edit = QPlainTextEdit(self)
        self.args_edit.setObjectName("approval_arguments")
        self.args_edit.setAccessibleName("Arguments of the call")  # G14
        self.args_edit.setFont(_mono())
        self.args_edit.setReadOnly(True)
        self.args_edit.textChanged.connect(self._validate)
        self.tabs.addTab(self.args_edit, "Arguments")
        self.tabs.addTab(self.diff_view, "Changes")
        lay.addWidget(self.tabs, 1)
        self.edit_error = plain_label()
        self.edit_error.setObjectName("approval_edit_error")
        self.edit_error.setProperty("status", "error")  # the theme's error colour
        self.edit_error.hide()
        lay.addWidget(self.edit_error)

        reject_row = QHBoxLayout()
        reject_row.addWidget(plain_label("Message if you reject:"))
        self.reject_message = QLineEdit(self)
        self.reject_message.setObjectName("reject_message")
        self.reject_message.setAccessibleName("Message if you reject")  # G14
        self.reject_message.setPlaceholderText("Tell the agent why, or what to do instead (Enter rejects)")
        # G7: Enter in the rejection message rejects, with the message (it used to approve).
        self.reject_message.returnPressed.connect(self.reject_call)
        reject_row.addWidget(self.reject_message, 1)
        outer.addLayout(reject_row)

        # Q3: what "Always" saves, said before it is chosen; "Make a rule…" for a folder, a tree or a tool.
        scope_row = QHBoxLayout()
        self.always_scope = rich_label(self)  # our markup; the rules escaped (approval_rules)
        self.always_scope.setObjectName("approval_always_scope")
        self.always_scope.setWordWrap(True)
        self.always_scope.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        scope_row.addWidget(self.always_scope, 1)
        # E2: for a command, "Always" may save a rule at prefix level (`pytest *`) instead of the exact line.
        self.command_rule_combo = QComboBox(self)
        self.command_rule_combo.setObjectName("approval_command_rule")
        self.command_rule_combo.setAccessibleName("Rule the Always buttons save")
        self.command_rule_combo.setToolTip("What the Always buttons allow from now on: exactly what asked, or "
                                           "every command starting like this one")
        self.command_rule_combo.currentIndexChanged.connect(self._command_rule_changed)
        self.command_rule_combo.hide()
        scope_row.addWidget(self.command_rule_combo)
        self.make_rule_button = self._button("Make a rule…", "make_rule", self.make_rule)
        self.make_rule_button.setToolTip("Build a rule for this file's folder, a whole tree or the tool, see which "
                                         "earlier calls it matches, and save it for the session, the project or you")
        scope_row.addWidget(self.make_rule_button)
        outer.addLayout(scope_row)

        buttons = QHBoxLayout()
        # G7: no default button. Enter on the dialog decides nothing; Space or a click on a button does.
        self.approve_button = self._button("Approve once", "approve_once", self.approve)
        self.always_session_button = self._button("Always (this session)", "always_session",
                                                  lambda: self.approve(always="session"))
        self.always_project_button = self._button("Always (this project)", "always_project",
                                                  lambda: self.approve(always="project"))
        self.always_user_button = self._button("Always (all my workspaces)", "always_user",
                                               lambda: self.approve(always="user"))
        self.always_user_button.setToolTip("Save an allow rule in your own permissions.yaml; it applies in every "
                                           "workspace, below that workspace's deny and ask rules")
        self.edit_button = self._button("Edit arguments", "edit_arguments", self.toggle_edit)
        self.reject_button = self._button("Reject", "reject", self.reject_call)
        for b in (self.approve_button, self.always_session_button, self.always_project_button,
                  self.always_user_button):
            buttons.addWidget(b)
        buttons.addStretch(1)
        for b in (self.edit_button, self.reject_button):
            buttons.addWidget(b)
        outer.addLayout(buttons)
        stop_row = QHBoxLayout()
        self.stop_run_button = self._button("Stop this run", "stop_run", self.stop_run)
        self.stop_run_button.setToolTip("Abandon the run: no call of it runs, it ends stopped (aborted)")
        stop_row.addWidget(self.stop_run_button)
        self.batch_note = plain_label(self)
        self.batch_note.setObjectName("approval_batch_note")
        self.batch_note.setProperty("role", "muted")
        stop_row.addWidget(self.batch_note, 1)
        outer.addLayout(stop_row)
        # G7, Q2: a decision's gesture never decides the call that appears after it (decision_settle.py).
        self.settle = DecisionSettle(self, (self.approve_button, self.always_session_button,
                                            self.always_project_button, self.always_user_button,
                                            self.reject_button, self.approve_all_button, self.reject_message),
                                     exempt=self.reject_message, focus_off=self._focus_off_decisions)
        self._fill_batch()
        self._show_current()
        self._show_stop()

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 - Qt override
        super().changeEvent(event)
        if event.type() in (QEvent.Type.StyleChange, QEvent.Type.PaletteChange):
            self._highlighter.set_dark(safe_is_dark())

    def _button(self, text: str, name: str, slot: Callable[[], Any]) -> QPushButton:
        return quiet_button(self, text, name, slot)  # G7: autoDefault is on in a QDialog; not on these

    # -- the current call -----------------------------------------------------------------------------
    @property
    def current(self) -> Question | None:
        return self.questions[self.index] if self.index < len(self.questions) else None

    def _next_undecided(self, start: int) -> int:
        """The first undecided call from ``start`` on (wrapping), else ``len(questions)``."""
        n = len(self.questions)
        for k in range(n):
            i = (start + k) % n
            if self.questions[i].id not in self.decisions:
                return i
        return n

    @property
    def undecided(self) -> list[Question]:
        return [q for q in self.questions if q.id not in self.decisions]

    def _fill_batch(self) -> None:
        """The list of the step's calls with what was decided for each (Q2)."""
        self.batch.setVisible(len(self.questions) > 1)
        self.batch_list.blockSignals(True)
        try:
            self.batch_list.clear()
            for i, q in enumerate(self.questions):
                d = self.decisions.get(q.id)
                state = _DECIDED_WORDS.get(str(d.get("decision")), "decided") if d else "to decide"
                args = self._args(q)
                # one line each, nothing hidden: a path with a line break faked a row ("2. Rejected") below
                what = visible_line(str(q.payload.get("tool", "?")) + (f" {args['path']}" if isinstance(args.get("path"), str)
                                                                       else ""))
                # The state in words first (G14: not told by colour alone), the call below it.
                item = QListWidgetItem(f"{i + 1}. {state.capitalize()}\n{what}")
                item.setToolTip(plain_tooltip(f"{what}: {state}"))
                if d is not None:
                    font = item.font()
                    font.setItalic(True)
                    item.setFont(font)
                self.batch_list.addItem(item)
            if self.index < len(self.questions):
                self.batch_list.setCurrentRow(self.index)
        finally:
            self.batch_list.blockSignals(False)
        left = len(self.undecided)
        self.approve_all_button.setText(f"Approve the rest ({left})")
        self.approve_all_button.setVisible(left > 1)
        done = len(self.questions) - left
        self.batch_note.setText(f"{done} of {len(self.questions)} decided; closing keeps them" if done else "")

    @Slot(int)
    def _select_row(self, row: int) -> None:
        if 0 <= row < len(self.questions) and row != self.index:
            self.index = row
            self._show_current()

    def sync(self, decided: dict[str, dict[str, Any]]) -> None:
        """Take decisions made elsewhere (the inbox, Q1); done when every call is decided."""
        ids = {q.id for q in self.questions}
        self.decisions.update({k: dict(v) for k, v in decided.items() if k in ids})
        if not self.undecided:
            self.accept()
            return
        q = self.current
        if q is None or q.id in self.decisions:
            self.index = self._next_undecided(self.index)
            self._show_current()
            # Decided in the inbox: a press meant for the call that was shown must not decide this one.
            self.settle.moved_on(("any", None, None), move_focus=self.settle.has_focus())
        self._fill_batch()

    def _args(self, q: Question) -> dict[str, Any]:
        args = q.payload.get("arguments")
        return dict(args) if isinstance(args, dict) else {}

    def _show_current(self) -> None:
        q = self.current
        if q is None:
            return
        n = len(self.questions)
        tool = str(q.payload.get("tool", "?"))
        self.header.setText(self._headline(tool) + (f" — call {self.index + 1} of {n}" if n > 1 else ""))
        if self.batch_list.currentRow() != self.index:
            self.batch_list.blockSignals(True)
            self.batch_list.setCurrentRow(self.index)
            self.batch_list.blockSignals(False)
        self._show_tool_line()
        self._show_agent(q)
        reason = str(q.payload.get("reason") or "")
        rule = q.payload.get("rule")
        parts = [f"Why it asks: {visible_line(reason)}" if reason else
                 "Why it asks: your permission rules ask before this call."]
        if rule:
            parts.append(f"Rule: {visible_line(rule)}")
        self.reason_label.setText("\n".join(parts))
        self._editing = False
        self.args_edit.setReadOnly(True)
        self.args_edit.setPlainText(visible_json(self._args(q)))
        self.edit_button.setText("Edit arguments")
        self.approve_button.setText("Approve once")
        self.reject_message.clear()
        self._show_always_scope(q)
        self._show_command(q)
        is_file = tool in FILE_TOOLS
        self.tabs.setTabVisible(1, is_file)
        self.tabs.setCurrentIndex(1 if is_file else 0)
        self._refresh_diff()
        self._validate()

    def _show_stop(self) -> None:
        """A background task's calls (asked from the Tasks board): "Stop this run" aborts the task."""
        task = bool(self.questions) and all(q.payload.get("background") and q.payload.get("task_id")
                                            for q in self.questions)
        self.stop_run_button.setText("Abort task" if task else "Stop this run")
        self.stop_run_button.setToolTip("Abort the background task: no call of it runs, it ends aborted" if task else
                                        "Abandon the run: no call of it runs, it ends stopped (aborted)")

    def _edited_args(self) -> dict[str, Any] | None:
        try:
            value = json.loads(self.args_edit.toPlainText())
        except json.JSONDecodeError as e:
            self._edit_error = f"Not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})"
            return None
        if not isinstance(value, dict):
            self._edit_error = "The arguments must be a JSON object ({ … })"
            return None
        self._edit_error = ""
        return value

    @Slot()
    def _validate(self) -> None:
        ok = True
        if self._editing:
            ok = self._edited_args() is not None
        self.edit_error.setText(self._edit_error if not ok else "")
        self.edit_error.setVisible(not ok)
        for b in (self.approve_button, self.always_session_button, self.always_project_button,
                  self.always_user_button):
            b.setEnabled(ok)
        if self._editing and ok:
            self._refresh_diff()

    # -- decisions ------------------------------------------------------------------------------------
    def _decide(self, decision: dict[str, Any]) -> None:
        q = self.current
        if q is None:
            return
        self.decisions[q.id] = decision
        self.sig_call_decided.emit(q.id, decision)
        source = self.settle.decided()
        self.index = self._next_undecided(self.index + 1)
        if self.current is None:
            self.accept()
        else:
            self._show_current()
            self._fill_batch()
            self.settle.moved_on(source)

    def _focus_off_decisions(self) -> None:
        """The focus on the list of calls (its current row is the call shown; Space or Enter there decides
        nothing), else on the call's arguments or changes."""
        target = self.batch_list if not self.batch.isHidden() else self.tabs.currentWidget()
        if target is not None:
            target.setFocus(Qt.FocusReason.OtherFocusReason)

    @property
    def clock(self) -> Callable[[], float]:
        """The settle time's clock (tests put a fake one here)."""
        return self.settle.clock

    @clock.setter
    def clock(self, value: Callable[[], float]) -> None:
        self.settle.clock = value

    @property
    def settle_seconds(self) -> float:
        return self.settle.seconds

    def approve(self, always: str | None = None) -> None:
        """Approve the current call (with the edited arguments when editing)."""
        q = self.current
        if q is None:
            return
        decision: dict[str, Any] = {"decision": "approve"}
        if self._editing:
            args = self._edited_args()
            if args is None:
                self._validate()
                return
            if args != self._args(q):
                decision = {"decision": "edit", "arguments": args}
        pattern = self._chosen_proposal() if always else None
        session = self._current_session() if pattern is not None else None
        if pattern is not None and session is not None:
            # E2: the wider rule the person chose is saved instead of the exact one; this call runs once.
            start(self._save_command_rule(session, pattern, always), name="command-rule")  # type: ignore[arg-type]
            always = None
        if always:
            decision["always"] = always
        self._decide(decision)

    def toggle_edit(self) -> None:
        """Switch the arguments between read-only and an editable, validated JSON editor."""
        q = self.current
        if q is None:
            return
        self._editing = not self._editing
        self.args_edit.setReadOnly(not self._editing)
        self.edit_button.setText("Cancel edit" if self._editing else "Edit arguments")
        self.approve_button.setText("Run edited" if self._editing else "Approve once")
        if not self._editing:
            self.args_edit.setPlainText(visible_json(self._args(q)))
        else:
            self.tabs.setCurrentIndex(0)
            self.args_edit.setFocus()
        self._validate()

    def reject_call(self) -> None:
        """Reject the current call; the agent sees the message."""
        message = self.reject_message.text().strip()
        self._decide({"decision": "reject", "message": message or "The user rejected this call."})

    def approve_all(self) -> None:
        """Approve the rest: every call not decided yet (decided ones keep their decision)."""
        for q in self.undecided:
            self.decisions[q.id] = {"decision": "approve"}
            self.sig_call_decided.emit(q.id, self.decisions[q.id])
        self.index = len(self.questions)
        self.accept()

    def stop_run(self) -> None:
        """G12: abandon the run (the caller ends it aborted); nothing more is decided here."""
        self.done(STOP_CODE)


_DECIDED_WORDS = {"approve": "approved", "edit": "edited", "reject": "rejected", "respond": "answered"}


__all__ = ["STOP_CODE", "STOP_RUN", "ApprovalDialog"]

