"""The rule builder (Q3): from an approval, make a permission rule and see what it would have done.

Opened with "Make a rule…" in the approval dialog. The person chooses the effect (allow / ask /
deny), what the rule is about (one of the paths the call touches, at file / folder / tree level, or
the tool: exactly this one or a glob), and where it is kept (this session, the project's
workbench.yaml, or their own permissions.yaml). The dialog shows the rule's text, the line it is
saved as, and a preview of the earlier calls in this workspace's threads that the rule matches, with
what each would do now and with the rule. Everything goes through the Session (``rule_subjects``,
``build_rule``, ``rule_history``, ``preview_rule``, ``save_rule``): the preview is judged by the
engine's own rules, so it cannot promise what the run will not do.

G7: no button is the default, so Enter in the glob field never saves; Esc cancels.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QFont
from PySide6.QtWidgets import (
    QButtonGroup,
    QComboBox,
    QDialog,
    QFormLayout,
    QHBoxLayout,
    QLineEdit,
    QPushButton,
    QRadioButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from workbench.ui import qt_async
from workbench.ui.plain_text import escape as _html, literal_ampersands, plain_label, plain_tooltip, rich_label

if TYPE_CHECKING:
    from workbench.session import Question

log = logging.getLogger(__name__)

EFFECT_WORDS = {"allow": "Allow (don't ask)", "ask": "Ask first", "deny": "Refuse (deny)"}
OUTCOME_WORDS = {"allow": "runs", "ask": "asks", "deny": "refused"}
LEVEL_WORDS = {
    "file": "This file only",
    "folder": "Files in this folder",
    "tree": "This folder and everything under it",
}
#: The same three levels for a command (E2): the builder maps them to command, sub-command, program.
COMMAND_LEVEL_WORDS = {
    "file": "Exactly this command",
    "folder": "This program and sub-command, any arguments",
    "tree": "This program, any arguments",
}
SCOPE_WORDS = {
    "session": "This session only (until Workbench quits)",
    "project": "This project",
    "user": "All my workspaces",
}


def _mono() -> QFont:
    font = QFont("monospace")
    font.setStyleHint(QFont.StyleHint.TypeWriter)
    return font


class RuleBuilderDialog(QDialog):
    """Build one permission rule from a pending tool call; ``saved`` holds the result once saved."""

    def __init__(self, session: Any, question: Question, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("rule_builder")
        self.setWindowTitle("Make a rule")
        self.resize(760, 600)
        self.session = session
        self.question = question
        self.tool = str(question.payload.get("tool", ""))
        args = question.payload.get("arguments")
        self.arguments: dict[str, Any] = dict(args) if isinstance(args, dict) else {}
        self.rule: Any = None
        self.saved: Any = None
        self.entries: list[Any] = []
        self._history: list[Any] | None = None
        self._generation = 0
        try:
            self.subjects: list[tuple[str, str, str]] = list(session.rule_subjects(self.tool, self.arguments))
        except Exception as e:  # noqa: BLE001 - the tool alone can still be the subject
            log.warning("could not list what %s touches: %s", self.tool, e)
            self.subjects = [("invoke", self.tool, "ask")]

        lay = QVBoxLayout(self)
        head = rich_label(f"Make a rule from this call: <b>{_html(self.tool)}</b>"  # the tool and path escaped
                          + (f" · {_html(str(self.arguments['path']))}" if isinstance(self.arguments.get("path"), str)
                             else ""))
        head.setObjectName("rule_header")
        head.setWordWrap(True)
        lay.addWidget(head)

        self.form = form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        self.effect_combo = QComboBox(self)
        self.effect_combo.setObjectName("rule_effect")
        self.effect_combo.setAccessibleName("What the rule does")
        for effect, words in EFFECT_WORDS.items():
            self.effect_combo.addItem(words, effect)
        form.addRow("The rule:", self.effect_combo)

        self.subject_combo = QComboBox(self)
        self.subject_combo.setObjectName("rule_subject")
        self.subject_combo.setAccessibleName("What the rule is about")
        for action, target, effect in self.subjects:
            text = f"the tool {target}" if action == "invoke" else f"{action} {target}"
            self.subject_combo.addItem(f"{text}  (now: {OUTCOME_WORDS.get(effect, effect)})", (action, target))
        form.addRow("About:", self.subject_combo)

        # Path level: file / folder / tree, each showing the pattern it saves.
        self.level_box = QWidget(self)
        level_lay = QVBoxLayout(self.level_box)
        level_lay.setContentsMargins(0, 0, 0, 0)
        self.level_group = QButtonGroup(self)
        self.level_buttons: dict[str, QRadioButton] = {}
        for level in ("file", "folder", "tree"):
            b = QRadioButton(LEVEL_WORDS[level], self.level_box)
            b.setObjectName(f"level_{level}")
            self.level_group.addButton(b)
            self.level_buttons[level] = b
            level_lay.addWidget(b, 0, Qt.AlignmentFlag.AlignLeft)  # a click beside the text does nothing
        self.level_buttons["file"].setChecked(True)
        self.level_label = plain_label("Paths:", self)
        form.addRow(self.level_label, self.level_box)

        # Tool: exactly this one, or a glob.
        self.tool_box = QWidget(self)
        tool_lay = QHBoxLayout(self.tool_box)
        tool_lay.setContentsMargins(0, 0, 0, 0)
        self.tool_group = QButtonGroup(self)
        self.tool_exact = QRadioButton(literal_ampersands(f"Only {self.tool}"), self.tool_box)
        self.tool_exact.setObjectName("tool_exact")
        self.tool_glob = QRadioButton("Tools matching:", self.tool_box)
        self.tool_glob.setObjectName("tool_glob")
        for b in (self.tool_exact, self.tool_glob):
            self.tool_group.addButton(b)
            tool_lay.addWidget(b)
        self.glob_edit = QLineEdit(self.tool_box)
        self.glob_edit.setObjectName("tool_glob_edit")
        self.glob_edit.setAccessibleName("Tool name pattern")
        self.glob_edit.setPlaceholderText("e.g. mcp_docs_* (* any text, ? one character)")
        self.glob_edit.setText(self.tool)
        tool_lay.addWidget(self.glob_edit, 1)
        self.tool_exact.setChecked(True)
        form.addRow("Tools:", self.tool_box)

        self.scope_box = QWidget(self)
        scope_lay = QVBoxLayout(self.scope_box)
        scope_lay.setContentsMargins(0, 0, 0, 0)
        self.scope_group = QButtonGroup(self)
        self.scope_buttons: dict[str, QRadioButton] = {}
        perms_files = self._rule_files()
        for scope in ("session", "project", "user"):
            text = SCOPE_WORDS[scope] + (f" — {perms_files[scope]}" if perms_files.get(scope) else "")
            b = QRadioButton(literal_ampersands(text), self.scope_box)
            b.setObjectName(f"scope_{scope}")
            b.setToolTip({"session": "Kept in memory for every thread of this workspace until Workbench quits",
                          "project": "Added to the workspace's workbench.yaml (its comments are kept)",
                          "user": "Added to your own permissions.yaml; applies in every workspace, below "
                                  "each workspace's deny and ask rules"}[scope])
            self.scope_group.addButton(b)
            self.scope_buttons[scope] = b
            scope_lay.addWidget(b, 0, Qt.AlignmentFlag.AlignLeft)
        self.scope_buttons["session"].setChecked(True)
        form.addRow("Keep it for:", self.scope_box)
        lay.addLayout(form)

        self.rule_text = plain_label(self)
        self.rule_text.setObjectName("rule_text")
        self.rule_text.setFont(_mono())
        self.rule_text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.rule_text.setWordWrap(True)
        lay.addWidget(self.rule_text)
        self.error_label = plain_label(self)
        self.error_label.setObjectName("rule_error")
        self.error_label.setProperty("status", "error")
        self.error_label.setWordWrap(True)
        self.error_label.hide()
        lay.addWidget(self.error_label)

        self.preview_summary = plain_label("Looking through this workspace's threads…", self)
        self.preview_summary.setObjectName("rule_preview_summary")
        self.preview_summary.setWordWrap(True)
        lay.addWidget(self.preview_summary)
        self.preview_list = QTreeWidget(self)
        self.preview_list.setObjectName("rule_preview")
        self.preview_list.setAccessibleName("Earlier calls this rule matches")
        self.preview_list.setRootIsDecorated(False)
        self.preview_list.setHeaderLabels(["Thread", "Call", "Now", "With this rule"])
        self.preview_list.setColumnWidth(0, 150)
        self.preview_list.setColumnWidth(1, 340)
        self.preview_list.setColumnWidth(2, 70)
        lay.addWidget(self.preview_list, 1)

        buttons = QHBoxLayout()
        buttons.addStretch(1)
        self.cancel_button = QPushButton("Cancel", self)
        self.cancel_button.setObjectName("rule_cancel")
        self.save_button = QPushButton("Save rule", self)
        self.save_button.setObjectName("rule_save")
        for b in (self.cancel_button, self.save_button):
            b.setAutoDefault(False)  # G7: Enter (in the glob field) never saves a rule
            b.setDefault(False)
            buttons.addWidget(b)
        self.cancel_button.clicked.connect(lambda _=False: self.reject())
        self.save_button.clicked.connect(lambda _=False: qt_async.start(self.save(), name="rule-save"))
        lay.addLayout(buttons)

        for signal in (self.effect_combo.currentIndexChanged, self.subject_combo.currentIndexChanged,
                       self.level_group.buttonToggled, self.tool_group.buttonToggled,
                       self.scope_group.buttonToggled):
            signal.connect(lambda *_: self._changed())
        self.glob_edit.textChanged.connect(lambda _text: self._changed())
        self.glob_edit.returnPressed.connect(self._changed)  # G7: Enter re-checks, never saves
        self._changed()
        self._loader = qt_async.start(self._load_history(), name="rule-history")

    def _rule_files(self) -> dict[str, str]:
        """Where project and user rules go, for the scope labels (empty when unknown)."""
        try:
            files = self.session.rule_files()
        except Exception:  # noqa: BLE001 - only a label
            return {}
        return {k: _tilde(str(v)) for k, v in files.items() if v is not None}

    # -- choices --------------------------------------------------------------------------------------
    @property
    def subject(self) -> tuple[str, str]:
        data = self.subject_combo.currentData()
        return tuple(data) if data else ("invoke", self.tool)  # type: ignore[return-value]

    @property
    def effect(self) -> str:
        return str(self.effect_combo.currentData())

    @property
    def level(self) -> str:
        if self.subject[0] == "invoke":
            return "glob" if self.tool_glob.isChecked() else "tool"
        return next(k for k, b in self.level_buttons.items() if b.isChecked())

    @property
    def scope(self) -> str:
        return next(k for k, b in self.scope_buttons.items() if b.isChecked())

    def _changed(self) -> None:
        """Rebuild the rule from the choices, show its text, and preview it again."""
        action, target = self.subject
        is_tool = action == "invoke"
        self.form.setRowVisible(self.level_box, not is_tool)  # the row's label too
        self.form.setRowVisible(self.tool_box, is_tool)
        self.glob_edit.setEnabled(self.tool_glob.isChecked())
        if not is_tool:
            words = COMMAND_LEVEL_WORDS if action == "execute" else LEVEL_WORDS
            self.level_label.setText("Commands:" if action == "execute" else "Paths:")
            for level, b in self.level_buttons.items():
                try:
                    pattern = self.session.build_rule("allow", action, target, level).pattern
                except ValueError:
                    pattern = "?"
                b.setText(literal_ampersands(f"{words[level]} — {pattern}"))
        try:
            glob = self.glob_edit.text() if is_tool and self.tool_glob.isChecked() else target
            self.rule = self.session.build_rule(self.effect, action, glob, self.level)
        except ValueError as e:
            self.rule = None
            self._show_error(str(e))
        else:
            self._show_error("")
        self.save_button.setEnabled(self.rule is not None)
        if self.rule is not None:
            self.rule_text.setText(f"Rule: {self.rule}\nSaved as:  - {self.session.rule_line(self.rule)}")
        else:
            self.rule_text.setText("Rule: (none yet)")
        self._refresh_preview()

    def _show_error(self, text: str) -> None:
        self.error_label.setText(text)
        self.error_label.setVisible(bool(text))

    # -- preview --------------------------------------------------------------------------------------
    async def _load_history(self) -> None:
        try:
            history = await self.session.rule_history()
        except Exception as e:  # noqa: BLE001 - shown; the rule can still be saved
            if alive(self):
                self._history = []
                self.preview_summary.setText(f"Could not read this workspace's threads: {e}")
            return
        if alive(self):
            self._history = history
            self._refresh_preview()

    def _refresh_preview(self) -> None:
        self._generation += 1
        if self._history is None:
            return
        if self.rule is None:
            self._fill([], "")
            return
        qt_async.start(self._preview(self._generation, self.rule, self.scope), name="rule-preview")

    async def _preview(self, generation: int, rule: Any, scope: str) -> None:
        try:
            entries = await self.session.preview_rule(rule, scope, self._history)
        except Exception as e:  # noqa: BLE001 - shown in the dialog
            if generation == self._generation and alive(self):
                self.preview_summary.setText(f"Could not preview the rule: {e}")
            return
        # A newer choice is being previewed (drop this one), or the dialog is gone.
        if generation == self._generation and alive(self):
            self._fill(entries, scope)

    def _fill(self, entries: list[Any], scope: str) -> None:
        self.entries = list(entries)
        self.preview_list.clear()
        for e in entries:
            call = e.call
            what = call.tool + "  " + ", ".join(t for a, t in e.matched if a != "invoke")
            item = QTreeWidgetItem([call.thread_title, what.strip() + ("  (edited)" if call.edited else ""),
                                    OUTCOME_WORDS.get(e.before, e.before), OUTCOME_WORDS.get(e.after, e.after)])
            item.setToolTip(1, plain_tooltip(f"{call.tool} {call.arguments}"))
            if e.changes:
                font = item.font(3)
                font.setBold(True)
                item.setFont(3, font)
            self.preview_list.addTopLevelItem(item)
        n = len(entries)
        total = len(self._history or [])
        if self.rule is None:
            self.preview_summary.setText("Choose a valid rule to see which earlier calls it matches.")
            return
        changed = {k: sum(1 for e in entries if e.changes and e.after == k) for k in ("allow", "ask", "deny")}
        parts = []
        if changed["allow"]:
            parts.append(f"{changed['allow']} would now run without asking")
        if changed["ask"]:
            parts.append(f"{changed['ask']} would now ask")
        if changed["deny"]:
            parts.append(f"{changed['deny']} would now be refused")
        if n and not parts:
            parts.append("none would change: other rules decide them" if self.effect == "allow" or scope != "session"
                         else "none would change")
        calls = "call" if n == 1 else "calls"
        self.preview_summary.setText(f"{n} earlier {calls} in this workspace's threads (of {total}) match this rule"
                                     + (": " + "; ".join(parts) if parts else "") + ".")

    # -- save -----------------------------------------------------------------------------------------
    async def save(self) -> None:
        """Save the rule to the chosen place; the dialog closes on success, else shows why."""
        if self.rule is None:
            return
        self.save_button.setEnabled(False)
        try:
            self.saved = await self.session.save_rule(self.rule, self.scope)
        except Exception as e:  # noqa: BLE001 - ConfigError/OSError name the file; shown, nothing saved
            if alive(self):
                self._show_error(f"Not saved: {e}")
                self.save_button.setEnabled(True)
            return
        if alive(self):
            self.accept()

    def done(self, code: int) -> None:  # noqa: D102 - Qt override: stop loading when closed
        loader = getattr(self, "_loader", None)
        if loader is not None and not loader.done():
            loader.cancel()
        super().done(code)


def alive(widget: QWidget) -> bool:
    """Whether the widget's C++ object still exists (its dialog may be deleted while a task awaits)."""
    import shiboken6

    return bool(shiboken6.isValid(widget))


def _tilde(path: str) -> str:
    """``~/…`` for a path in the home folder (shorter labels)."""
    import os

    home = os.path.expanduser("~")
    return "~" + path[len(home):] if home not in ("", "/") and path.startswith(home + os.sep) else path


def describe_saved(saved: Any) -> str:
    """One line for the approval dialog after a save: the rule and where it went."""
    where = {"session": "for this session", "project": f"in {saved.file}", "user": f"in {saved.file}"}
    text = f"Saved: {saved.rule} ({where.get(saved.scope, saved.scope)}"
    text += f", line {saved.line})" if saved.line else ")"
    return text + (f". {saved.notice}" if saved.notice else "")


async def open_rule_builder(session: Any, question: Question, parent: QWidget | None = None) -> Any:
    """Open the rule builder for one pending call; the ``SavedRule``, or None when cancelled."""
    dialog = RuleBuilderDialog(session, question, parent)
    try:
        code = await qt_async.ask_dialog(dialog)
    finally:
        qt_async.release_dialog(dialog)
    return dialog.saved if code == QDialog.DialogCode.Accepted else None


__all__ = ["RuleBuilderDialog", "alive", "describe_saved", "open_rule_builder"]
