"""What "Always" saves in the approval dialog, and the rules made from it (Q3, E2): the line above the
Always buttons that says exactly what they allow and where, a command's prefix-level rule (``pytest *``)
chosen instead of the exact line and saved through the session, and "Make a rule…", which opens the rule
builder (``rule_builder``) for the current call — the call itself is still decided in the dialog. A mixin
of ``ApprovalDialog`` (``approval_dialog.py``), which builds the widgets and applies the choice when the
person approves.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Slot

from workbench.ui.plain_text import escape_visible as _html, plain_tooltip  # rules hold the model's text
from workbench.ui.qt_async import start

if TYPE_CHECKING:
    from PySide6.QtWidgets import QComboBox, QLabel, QPushButton, QWidget

    from workbench.session import Question

log = logging.getLogger(__name__)

__all__ = ["AlwaysRules"]


class AlwaysRules:
    """The Always buttons' scope, the command-rule choice and "Make a rule…" (see the module)."""

    if TYPE_CHECKING:
        _session: Any
        always_scope: QLabel
        always_session_button: QPushButton
        always_project_button: QPushButton
        always_user_button: QPushButton
        command_rule_combo: QComboBox
        make_rule_button: QPushButton

        @property
        def current(self) -> Question | None: ...

        def parentWidget(self) -> QWidget: ...  # noqa: N802 - Qt's

    def _show_always_scope(self, q: Question) -> None:
        """Q3: the Always buttons and the line above them say exactly what "Always" saves (one file,
        one tool) and where, from the question's ``always`` list (older questions lack it)."""
        rules = [str(r) for r in q.payload.get("always") or [] if isinstance(r, str)]
        paths = [r.split(" ", 2)[2] for r in rules
                 if len(r.split(" ", 2)) == 3 and r.split(" ", 2)[1] not in ("invoke", "execute")]
        tools = [r.split(" ", 2)[2] for r in rules if len(r.split(" ", 2)) == 3 and r.split(" ", 2)[1] == "invoke"]
        commands = [r for r in rules if len(r.split(" ", 2)) == 3 and r.split(" ", 2)[1] == "execute"]
        if len(rules) == 1 and commands:
            noun = "this command"
        elif len(rules) == 1 and paths:
            noun = "this file"
        elif len(rules) == 1 and tools:
            noun = "this tool"
        else:
            noun = "these" if rules else "this"
        for b, where, file in ((self.always_session_button, "session", "kept in this thread"),
                               (self.always_project_button, "project", "saved in this workspace's workbench.yaml"),
                               (self.always_user_button, "everywhere", "saved in your own permissions.yaml, for every "
                                                                     "workspace below its deny and ask rules")):
            b.setText(f"Always {noun} ({where})")
            what = "; ".join(rules) if rules else "exact allow rules for what asked"
            b.setToolTip(plain_tooltip(f"Approve, and allow exactly this from now on: {what} — {file}. "
                                       "For a folder, a tree or a tool, use Make a rule…"))
        if rules:
            self.always_scope.setText("“Always” allows exactly: <b>" + _html("; ".join(rules)) + "</b>"
                                      + (" (this file only)" if noun == "this file" else
                                         " (this tool only)" if noun == "this tool" else
                                         " (this command only)" if noun == "this command" else ""))
        else:
            self.always_scope.setText("“Always” allows exactly what asked for this call, nothing wider.")

    def _chosen_proposal(self) -> str | None:
        q = self.current
        if q is None or q.payload.get("tool") != "execute" or self.command_rule_combo.isHidden():
            return None
        data = self.command_rule_combo.currentData()
        return str(data) if isinstance(data, str) else None

    @Slot(int)
    def _command_rule_changed(self, _index: int) -> None:
        pattern = self._chosen_proposal()
        q = self.current
        if q is None:
            return
        if pattern is None:
            self._show_always_scope(q)
            return
        several = len(q.payload.get("always") or []) > 1
        self.always_scope.setText(f"“Always” allows every command matching: <b>{_html(pattern)}</b>"
                                  + (" (the line's other parts are judged on their own)" if several else ""))
        for b, where in ((self.always_session_button, "session"), (self.always_project_button, "project"),
                         (self.always_user_button, "everywhere")):
            b.setText(f"Always ({where})")
            b.setToolTip(plain_tooltip(f"Approve, and allow from now on: allow execute {pattern}"))

    async def _save_command_rule(self, session: Any, pattern: str, scope: str) -> None:
        """E2: the prefix-level rule chosen for "Always", saved through the session (Q3's save_rule)."""
        try:
            rule = session.build_rule("allow", "execute", pattern, "glob")
            saved = await session.save_rule(rule, scope)
        except Exception as e:  # noqa: BLE001 - the call is approved anyway; say the rule was not kept
            log.warning("the rule allow execute %s was not saved: %s", pattern, e)
            return
        notice = getattr(saved, "notice", "")
        if notice:
            log.warning("%s", notice)

    def _current_session(self) -> Any:
        return self._session if self._session is not None else getattr(self.parentWidget(), "session", None)

    def make_rule(self) -> None:
        """Q3: open the rule builder for the current call (the call itself is still decided here)."""
        q, session = self.current, self._current_session()
        if q is None:
            return
        if session is None:
            self.always_scope.setText("No workspace is open to make a rule for.")
            return
        start(self._make_rule(session, q), name="rule-builder")

    async def _make_rule(self, session: Any, q: Question) -> None:
        from workbench.ui.rule_builder import alive, describe_saved, open_rule_builder

        self.make_rule_button.setEnabled(False)
        try:
            saved = await open_rule_builder(session, q, self)
        finally:
            if alive(self):
                self.make_rule_button.setEnabled(True)
        if saved is not None and alive(self) and self.current is q:
            self.always_scope.setText(_html(describe_saved(saved)) + ". Decide this call here.")
