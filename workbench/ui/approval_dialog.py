"""Tool approval (G3, P3) and the fallback budget-hold dialog.

Both are ``open()``ed and awaited as futures (``qt_async.ask_dialog``): the loop, the streaming and the
rest of the window keep working while they are up. ``ask_decisions`` answers every pending question
of a suspended run and returns them in the ``Session.resume`` format::

    {question_id: {"decision": "approve" | "edit" | "reject" | "respond",
                   "arguments": {...}, "message": "...", "always": "session" | "project" | "user"}}

or None when the user closed a dialog without deciding (the run then stays suspended, and its
questions come back when the thread is opened again).
"""

from __future__ import annotations

import difflib
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QEvent, Qt, Signal, Slot
from PySide6.QtGui import QColor, QFont, QSyntaxHighlighter, QTextCharFormat
from PySide6.QtWidgets import (
    QDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from workbench.ui.qt_async import ask_dialog, release_dialog, start

if TYPE_CHECKING:
    from workbench.engine.middleware import Question

log = logging.getLogger(__name__)

ReadFile = Callable[[str], Awaitable[str]]
FILE_TOOLS = ("write_file", "edit_file")


def _mono() -> QFont:
    font = QFont("monospace")
    font.setStyleHint(QFont.StyleHint.TypeWriter)
    return font


#: Diff colours per theme: (foreground, background) of added, removed and hunk-header lines.
_DIFF_COLORS = {
    False: {"+": ("#14532d", "#e6ffec"), "-": ("#7f1d1d", "#ffebe9"), "@": ("#1e40af", "#eef2ff")},
    True: {"+": ("#8ddb8c", "#1b3a24"), "-": ("#f4a9a3", "#4a1f1f"), "@": ("#96c3ff", "#1f2a3d")},
}


def _dark() -> bool:
    try:
        from workbench.ui.style import is_dark

        return bool(is_dark())
    except Exception:  # noqa: BLE001 - styling must never break the dialog
        return False


class DiffHighlighter(QSyntaxHighlighter):
    """Colours a unified diff: additions green, removals red, hunk headers blue (light or dark theme)."""

    def __init__(self, document: Any, *, dark: bool | None = None) -> None:
        super().__init__(document)
        self._formats: dict[str, QTextCharFormat] = {}
        self.dark: bool | None = None
        self.set_dark(_dark() if dark is None else dark)

    def set_dark(self, dark: bool) -> None:
        if dark == self.dark:
            return
        self.dark = dark
        self._formats = {}
        for key, (fg, bg) in _DIFF_COLORS[dark].items():
            f = QTextCharFormat()
            f.setForeground(QColor(fg))
            f.setBackground(QColor(bg))
            self._formats[key] = f
        self.rehighlight()

    def highlightBlock(self, text: str) -> None:  # noqa: N802 - Qt override
        if text.startswith(("+++", "---")):
            return
        fmt = self._formats.get(text[:1])
        if fmt is not None:
            self.setFormat(0, len(text), fmt)


def unified_diff(path: str, old: str, new: str) -> str:
    """A unified diff of a file's text before and after (empty when they are equal)."""
    lines = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True),
        fromfile=f"{path} (now)" if old else "(new file)", tofile=f"{path} (after)", n=3,
    )
    out = []
    for line in lines:
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def proposed_text(tool: str, arguments: dict[str, Any], old: str) -> str | None:
    """The file's text after ``write_file``/``edit_file`` with these arguments (None: can't tell)."""
    if tool == "write_file":
        content = arguments.get("content")
        return content if isinstance(content, str) else None
    if tool == "edit_file":
        a, b = arguments.get("old_string"), arguments.get("new_string")
        if not isinstance(a, str) or not isinstance(b, str) or not a:
            return None
        if a not in old:
            return None
        return old.replace(a, b) if arguments.get("replace_all") else old.replace(a, b, 1)
    return None


class ApprovalDialog(QDialog):
    """Decide one step's pending tool calls, in order or all at once."""

    sig_call_decided = Signal(str, dict)
    """A call was decided: the question id and its decision (Session.resume format)."""

    def __init__(self, questions: Sequence[Question], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("approval_dialog")
        self.setWindowTitle("Approve tool call")
        self.setModal(True)
        self.resize(780, 520)
        self.questions = list(questions)
        self.decisions: dict[str, dict[str, Any]] = {}
        self.index = 0
        self._old_text: dict[str, str | None] = {}  # path -> current text (None: unreadable)
        self._read_errors: dict[str, str] = {}
        self._editing = False
        self._edit_error = ""

        lay = QVBoxLayout(self)
        self.header = QLabel()
        self.header.setObjectName("approval_header")
        self.header.setStyleSheet("font-size: 15px; font-weight: 600;")
        lay.addWidget(self.header)
        self.tool_label = QLabel()
        self.tool_label.setObjectName("approval_tool")
        self.tool_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addWidget(self.tool_label)
        self.reason_label = QLabel()
        self.reason_label.setObjectName("approval_reason")
        self.reason_label.setWordWrap(True)
        self.reason_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.reason_label.setProperty("role", "muted")  # the theme's secondary text colour
        lay.addWidget(self.reason_label)

        self.tabs = QTabWidget(self)
        self.diff_view = QPlainTextEdit(self)
        self.diff_view.setObjectName("approval_diff")
        self.diff_view.setReadOnly(True)
        self.diff_view.setFont(_mono())
        self.diff_view.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)  # every line readable
        self._highlighter = DiffHighlighter(self.diff_view.document())
        self.args_edit = QPlainTextEdit(self)
        self.args_edit.setObjectName("approval_arguments")
        self.args_edit.setFont(_mono())
        self.args_edit.setReadOnly(True)
        self.args_edit.textChanged.connect(self._validate)
        self.tabs.addTab(self.args_edit, "Arguments")
        self.tabs.addTab(self.diff_view, "Changes")
        lay.addWidget(self.tabs, 1)
        self.edit_error = QLabel()
        self.edit_error.setObjectName("approval_edit_error")
        self.edit_error.setProperty("status", "error")  # the theme's error colour
        self.edit_error.hide()
        lay.addWidget(self.edit_error)

        reject_row = QHBoxLayout()
        reject_row.addWidget(QLabel("Message if you reject:"))
        self.reject_message = QLineEdit(self)
        self.reject_message.setObjectName("reject_message")
        self.reject_message.setPlaceholderText("Tell the agent why, or what to do instead (Enter rejects)")
        # G7: Enter in the rejection message rejects, with the message (it used to approve).
        self.reject_message.returnPressed.connect(self.reject_call)
        reject_row.addWidget(self.reject_message, 1)
        lay.addLayout(reject_row)

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
        self.approve_all_button = self._button("Approve all", "approve_all", self.approve_all)
        for b in (self.approve_button, self.always_session_button, self.always_project_button,
                  self.always_user_button):
            buttons.addWidget(b)
        buttons.addStretch(1)
        for b in (self.edit_button, self.reject_button, self.approve_all_button):
            buttons.addWidget(b)
        lay.addLayout(buttons)
        self._show_current()

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 - Qt override
        super().changeEvent(event)
        if event.type() in (QEvent.Type.StyleChange, QEvent.Type.PaletteChange):
            self._highlighter.set_dark(_dark())

    def _button(self, text: str, name: str, slot: Callable[[], Any]) -> QPushButton:
        b = QPushButton(text, self)
        b.setObjectName(name)
        b.setAutoDefault(False)  # G7: Enter never presses a button here (autoDefault is on in a QDialog)
        b.setDefault(False)
        b.clicked.connect(lambda _checked=False: slot())
        return b

    # -- the current call -----------------------------------------------------------------------------
    @property
    def current(self) -> Question | None:
        return self.questions[self.index] if self.index < len(self.questions) else None

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
        self._show_tool_line()
        reason = str(q.payload.get("reason") or "")
        rule = q.payload.get("rule")
        parts = [f"Why it asks: {reason}" if reason else "Why it asks: your permission rules ask before this call."]
        if rule:
            parts.append(f"Rule: {rule}")
        self.reason_label.setText("\n".join(parts))
        self._editing = False
        self.args_edit.setReadOnly(True)
        self.args_edit.setPlainText(json.dumps(self._args(q), indent=2, ensure_ascii=False))
        self.edit_button.setText("Edit arguments")
        self.approve_button.setText("Approve once")
        self.reject_message.clear()
        self.approve_all_button.setVisible(n - self.index > 1)
        is_file = tool in FILE_TOOLS
        self.tabs.setTabVisible(1, is_file)
        self.tabs.setCurrentIndex(1 if is_file else 0)
        self._refresh_diff()
        self._validate()

    def _headline(self, tool: str) -> str:
        q = self.current
        path = self._args(q).get("path") if q is not None else None
        if tool in FILE_TOOLS and isinstance(path, str) and path:
            return "The agent wants to edit a file" if tool == "edit_file" else "The agent wants to write a file"
        return "The agent wants to run a tool"

    def _show_tool_line(self) -> None:
        """``Tool: write_file · /project/notes.md (new file)``: the tool and, for a file tool, which file."""
        q = self.current
        if q is None:
            return
        tool = str(q.payload.get("tool", "?"))
        text = f"Tool: <b>{_html(tool)}</b>"
        path = self._args(q).get("path")
        if tool in FILE_TOOLS and isinstance(path, str) and path:
            text += f" · {_html(path)}"
            old = self._old_text.get(path, "?")
            if old == "":
                text += " <i>(a new file)</i>"
            elif old is not None and old != "?" and tool == "write_file":
                text += " <i>(replaces the whole file)</i>"
        self.tool_label.setText(text)

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

    def _refresh_diff(self) -> None:
        q = self.current
        if q is None:
            return
        tool = str(q.payload.get("tool", ""))
        if tool not in FILE_TOOLS:
            return
        args = (self._edited_args() if self._editing else None) or self._args(q)
        path = str(args.get("path", ""))
        if path not in self._old_text:
            self.diff_view.setPlainText(f"Reading {path} …")
            return
        old = self._old_text[path]
        if old is None:
            self.diff_view.setPlainText(f"Could not read {path}: {self._read_errors.get(path, 'unknown error')}")
            return
        new = proposed_text(tool, args, old)
        if new is None:
            self.diff_view.setPlainText(
                "The text to replace was not found in the file: the call will fail as it stands."
                if tool == "edit_file" else "No content to write.")
            return
        diff = unified_diff(path, old, new)
        self.diff_view.setPlainText(diff or "No change to the file.")

    async def load_files(self, read: ReadFile) -> None:
        """Read the files the calls would change (through the session's backend) to show diffs."""
        from workbench.backends.base import FileNotFound

        paths = []
        for q in self.questions:
            if q.payload.get("tool") in FILE_TOOLS:
                p = self._args(q).get("path")
                if isinstance(p, str) and p not in paths:
                    paths.append(p)
        for p in paths:
            try:
                self._old_text[p] = await read(p)
            except FileNotFound:
                self._old_text[p] = ""  # a new file
            except Exception as e:  # noqa: BLE001 - shown in the dialog, the decision is still possible
                self._old_text[p] = None
                self._read_errors[p] = str(e)
            self._refresh_diff()
            self._show_tool_line()

    # -- decisions ------------------------------------------------------------------------------------
    def _decide(self, decision: dict[str, Any]) -> None:
        q = self.current
        if q is None:
            return
        self.decisions[q.id] = decision
        self.sig_call_decided.emit(q.id, decision)
        self.index += 1
        if self.current is None:
            self.accept()
        else:
            self._show_current()

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
            self.args_edit.setPlainText(json.dumps(self._args(q), indent=2, ensure_ascii=False))
        else:
            self.tabs.setCurrentIndex(0)
            self.args_edit.setFocus()
        self._validate()

    def reject_call(self) -> None:
        """Reject the current call; the agent sees the message."""
        message = self.reject_message.text().strip()
        self._decide({"decision": "reject", "message": message or "The user rejected this call."})

    def approve_all(self) -> None:
        """Approve the current call and every one after it."""
        while self.current is not None:
            q = self.current
            self.decisions[q.id] = {"decision": "approve"}
            self.sig_call_decided.emit(q.id, self.decisions[q.id])
            self.index += 1
        self.accept()


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


class BudgetHoldDialog(QDialog):
    """A budget hold (B3): spent vs limit, Continue or Stop with a reason."""

    def __init__(self, question: Question, parent: QWidget | None = None, load_error: str | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("budget_hold_dialog")
        self.setWindowTitle("Budget reached")
        self.setModal(True)
        self.question = question
        self.decision: dict[str, Any] | None = None
        lay = QVBoxLayout(self)
        title = QLabel("The run reached its budget. Continue with the full limit again, or stop?")
        title.setWordWrap(True)
        title.setStyleSheet("font-weight: 600;")
        lay.addWidget(title)
        if load_error:
            note = QLabel(f"The full budget dialog (workbench.ui.budget_dialog) could not be loaded: {load_error}. "
                          "This simple dialog decides instead; see the log for the traceback.", self)
            note.setObjectName("budget_dialog_error")
            note.setWordWrap(True)
            note.setStyleSheet("color: #c0392b;")
            lay.addWidget(note)
        details = QLabel(self._describe(question.payload))
        details.setObjectName("budget_details")
        details.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addWidget(details)
        row = QHBoxLayout()
        row.addWidget(QLabel("Reason if you stop:"))
        self.reason = QLineEdit(self)
        self.reason.setObjectName("budget_reason")
        row.addWidget(self.reason, 1)
        lay.addLayout(row)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        self.continue_button = QPushButton("Continue", self)
        self.continue_button.setObjectName("budget_continue")
        self.continue_button.clicked.connect(self._continue)
        self.stop_button = QPushButton("Stop", self)
        self.stop_button.setObjectName("budget_stop")
        self.stop_button.clicked.connect(self._stop)
        buttons.addWidget(self.continue_button)
        buttons.addWidget(self.stop_button)
        lay.addLayout(buttons)
        for b in (self.continue_button, self.stop_button):
            b.setAutoDefault(False)  # G7: Enter never continues (nor approves an unknown question)
            b.setDefault(False)
        self.reason.returnPressed.connect(self._stop)  # G7: Enter in the reason stops, with the reason

    @staticmethod
    def _describe(payload: dict[str, Any]) -> str:
        lines = []
        fields = payload.get("fields") or payload.get("limits") or payload.get("exceeded")
        if isinstance(fields, list):
            for f in fields:
                if isinstance(f, dict):
                    lines.append(f"{f.get('field', '?')}: {f.get('spent', '?')} of {f.get('limit', '?')}")
        spent, limit = payload.get("spent"), payload.get("limit")
        if isinstance(spent, dict) and isinstance(limit, dict):
            for k, v in limit.items():
                lines.append(f"{k}: {spent.get(k, '?')} of {v}")
        elif "field" in payload:
            lines.append(f"{payload.get('field')}: {spent} of {limit}")
        if not lines:
            lines = [f"{k}: {v}" for k, v in payload.items()]
        return "\n".join(lines) or "(no details)"

    @Slot()
    def _continue(self) -> None:
        self.decision = {"decision": "approve"}
        self.accept()

    @Slot()
    def _stop(self) -> None:
        reason = self.reason.text().strip()
        self.decision = {"decision": "reject", "message": reason or "Stopped at the budget limit."}
        self.accept()


async def _await_dialog(dialog: QDialog) -> int:
    try:
        return await ask_dialog(dialog)
    finally:
        release_dialog(dialog)


async def ask_approvals(parent: QWidget | None, questions: Sequence[Question],
                        read: ReadFile | None = None) -> dict[str, dict[str, Any]] | None:
    """Open the approval dialog for these tool calls; their decisions, or None if it was closed."""
    dialog = ApprovalDialog(questions, parent)
    loader = start(dialog.load_files(read), name="approval-diffs") if read is not None else None
    try:
        code = await _await_dialog(dialog)
    finally:
        if loader is not None and not loader.done():
            loader.cancel()
    if code != QDialog.DialogCode.Accepted:
        return None
    return dict(dialog.decisions)


_budget_error: str | None = None
"""Why ``workbench.ui.budget_dialog`` did not load (shown in the simple dialog), else None."""


def _budget_module() -> Any:
    """``workbench.ui.budget_dialog`` (the full budget-hold dialog), else None — never silently: a module
    that fails to import is logged with its traceback and named in the simple dialog that stands in."""
    global _budget_error
    try:
        from workbench.ui import budget_dialog
    except Exception as error:  # noqa: BLE001 - shown and logged, the simple dialog still decides
        _budget_error = f"{type(error).__name__}: {error}"
        log.error("The budget dialog (workbench.ui.budget_dialog) could not be loaded: %s; using the simple "
                  "Continue/Stop dialog instead", _budget_error, exc_info=True)
        return None
    if not hasattr(budget_dialog, "ask_budget_holds"):
        _budget_error = "it has no ask_budget_holds()"
        log.error("The budget dialog (workbench.ui.budget_dialog) could not be used: %s", _budget_error)
        return None
    _budget_error = None
    return budget_dialog


async def ask_budget_holds(parent: QWidget | None, questions: Sequence[Question]) -> dict[str, dict[str, Any]] | None:
    """One step's budget holds: ``workbench.ui.budget_dialog`` decides them when that module exists
    (one dialog; closing it stops the run), else this module's simple Continue/Stop dialog, one each."""
    if not questions:
        return {}
    module = _budget_module()
    if module is not None:
        return dict(await module.ask_budget_holds(list(questions), parent))
    decisions: dict[str, dict[str, Any]] = {}
    for q in questions:
        d = await ask_budget_hold(parent, q)
        if d is None:
            return None
        decisions[q.id] = d
    return decisions


async def ask_budget_hold(parent: QWidget | None, question: Question) -> dict[str, Any] | None:
    """The simple budget-hold dialog: Continue → approve, Stop → reject with the reason; None if closed."""
    dialog = BudgetHoldDialog(question, parent, load_error=_budget_error)
    code = await _await_dialog(dialog)
    return dialog.decision if code == QDialog.DialogCode.Accepted else None


async def ask_decisions(parent: QWidget | None, questions: Sequence[Question],
                        read: ReadFile | None = None) -> dict[str, dict[str, Any]] | None:
    """Every pending question's decision (tool approvals first, in order, then budget holds, then any
    other kind), or None when the user closed a dialog without deciding."""
    decisions: dict[str, dict[str, Any]] = {}
    approvals = [q for q in questions if q.kind == "tool_approval"]
    if approvals:
        got = await ask_approvals(parent, approvals, read)
        if got is None:
            return None
        decisions.update(got)
    holds = await ask_budget_holds(parent, [q for q in questions if q.kind == "budget_hold"])
    if holds is None:
        return None
    decisions.update(holds)
    for q in questions:
        if q.kind in ("tool_approval", "budget_hold"):
            continue
        d = await _ask_generic(parent, q)
        if d is None:
            return None
        decisions[q.id] = d
    return decisions


async def _ask_generic(parent: QWidget | None, question: Question) -> dict[str, Any] | None:
    """A question of a kind this window does not know: show the payload, approve or reject."""
    dialog = BudgetHoldDialog(question, parent)
    dialog.setWindowTitle(f"Question: {question.kind}")
    dialog.continue_button.setText("Approve")
    dialog.stop_button.setText("Reject")
    code = await _await_dialog(dialog)
    return dialog.decision if code == QDialog.DialogCode.Accepted else None


__all__ = [
    "ApprovalDialog",
    "BudgetHoldDialog",
    "ask_approvals",
    "ask_budget_hold",
    "ask_budget_holds",
    "ask_decisions",
    "proposed_text",
    "unified_diff",
]
