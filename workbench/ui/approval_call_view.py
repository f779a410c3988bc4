"""What the approval dialog shows of the call being decided (G3, D9, E2, E5): the headline, the sub-agent
that asks, the tool line with its file, a command's line, folder and sandbox (and the prefix-level rules
proposed for it), and — for a file tool — the change it would make as a diff, over the file's text read
through the session (``proposed_diff``). A mixin of ``ApprovalDialog`` (``approval_dialog.py``), which
builds the widgets these fill.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from workbench.ui.plain_text import escape, visible_text
from workbench.ui.plain_text import escape_visible as _html  # the model's text: one line, nothing hidden
from workbench.ui.proposed_diff import FILE_TOOLS, proposed_text, unified_diff

if TYPE_CHECKING:
    from PySide6.QtWidgets import QComboBox, QLabel, QPlainTextEdit, QWidget

    from workbench.session import Question

__all__ = ["CallView", "ReadFile", "sub_agent"]

ReadFile = Callable[[str], Awaitable[str]]
"""Reads a file's text through the session's backend (the diff's "now" side)."""


class CallView:
    """The current call in words and as a diff (see the module)."""

    if TYPE_CHECKING:
        questions: list[Question]
        agent_label: QLabel
        tool_label: QLabel
        command_label: QLabel
        command_box: QWidget
        command_rule_combo: QComboBox
        diff_view: QPlainTextEdit
        _old_text: dict[str, str | None]
        _read_errors: dict[str, str]
        _editing: bool

        @property
        def current(self) -> Question | None: ...

        def _args(self, q: Question) -> dict[str, Any]: ...

        def _edited_args(self) -> dict[str, Any] | None: ...

    def _show_command(self, q: Question) -> None:
        """E2, E5: the command, its folder and the sandbox's state; the prefix-level rule proposals."""
        p = q.payload
        is_command = p.get("tool") == "execute"
        self.command_box.setVisible(is_command)
        self.command_rule_combo.blockSignals(True)
        self.command_rule_combo.clear()
        proposals = [str(x) for x in p.get("proposals") or [] if isinstance(x, str)] if is_command else []
        if proposals:
            self.command_rule_combo.addItem("Always: exactly what asked", None)
            for pattern in proposals:
                self.command_rule_combo.addItem(f"Always: {pattern}", pattern)
        self.command_rule_combo.blockSignals(False)
        self.command_rule_combo.setVisible(bool(proposals))
        if not is_command:
            self.command_label.setText("")
            return
        command = str(p.get("command") or self._args(q).get("command") or "")
        folder = str(p.get("folder") or self._args(q).get("cwd") or "")
        host = str(p.get("host_folder") or "")
        where = _html(folder) + (f" <span style='opacity:0.7'>({_html(host)})</span>" if host and host != folder else "")
        if p.get("folder_error"):
            where += f" — {_html(str(p['folder_error']))}"
        sandbox = str(p.get("sandbox") or "not known (asked before the sandbox was checked)")
        if p.get("sandboxed"):
            shown = f"Sandbox: {_html(sandbox)}"
        else:  # said in bold words, not by colour alone (G14)
            head, _, rest = sandbox.partition(" — ")
            shown = f"<b>Sandbox: {_html(head)}</b>" + (f" — {_html(rest)}" if rest else "")
        lines = [f"Command: <code style='white-space:pre-wrap'>{escape(visible_text(command))}</code>",
                 f"Folder: {where}", shown]
        self.command_label.setText("<br>".join(lines))
        plain = f"Command: {command}. Folder: {folder}. Sandbox: {sandbox}"
        self.command_label.setAccessibleName(plain)

    def _headline(self, tool: str) -> str:
        q = self.current
        path = self._args(q).get("path") if q is not None else None
        agent = sub_agent(q)
        who = f"The sub-agent {agent}" if agent else "The agent"
        if tool == "execute":
            return f"{who} wants to run a command"
        if tool in FILE_TOOLS and isinstance(path, str) and path:
            return f"{who} wants to edit a file" if tool == "edit_file" else f"{who} wants to write a file"
        return f"{who} wants to run a tool"

    def _show_agent(self, q: Question) -> None:
        """D9: "Sub-agent writer (task writer:ab12cd34) asks to write /project/notes.md" for a sub-agent's
        call (its question's payload names the agent and the task); hidden for the thread's own agent."""
        agent = sub_agent(q)
        self.agent_label.setVisible(bool(agent))
        if not agent:
            self.agent_label.setText("")
            return
        task = str(q.payload.get("task_id") or "")
        tool = str(q.payload.get("tool") or "a tool")
        path = self._args(q).get("path")
        if tool in FILE_TOOLS and isinstance(path, str) and path:
            action = f"{'edit' if tool == 'edit_file' else 'write'} {path}"
        else:
            action = f"run {tool}"
        self.agent_label.setText(f"Sub-agent <b>{_html(agent)}</b>" + (f" (task {_html(task)})" if task else "")
                                 + f" asks to {_html(action)}.")
        self.agent_label.setAccessibleName(self.agent_label.text().replace("<b>", "").replace("</b>", ""))

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
        from workbench.errors import FileNotFound

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


def sub_agent(q: Question | None) -> str:
    """The sub-agent a question comes from (its payload's ``agent``), "" for the thread's own agent."""
    agent = q.payload.get("agent") if q is not None else None
    return str(agent) if isinstance(agent, str) and agent and agent != "main" else ""
