"""What the transcript shows, row by row, without a widget (G13).

A long thread has thousands of rows; only the few on screen have a widget (``transcript_list``). A
``Row`` holds everything its widget shows — a message's text, a tool call's arguments, status and
result, a notice's words and button — and the widget while one is built: every change goes to the row
and, when it has one, to its widget, so a row built later (scrolled to) shows what happened meanwhile.

``rows_for_page`` turns a page of committed messages into rows: messages, tool calls with their
results, and the endings of the runs among them (G10, placed by ``RunEndings``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from PySide6.QtWidgets import QWidget

    from workbench.session import Message

Ref = Callable[[int | None], "dict[str, Any] | None"]


class Row:
    """One row of the transcript: a message, a tool call or a notice (``kind``), and its widget if built."""

    # A long thread has tens of thousands of rows once scrolled through: no per-row ``__dict__``.
    __slots__ = ("kind", "widget", "role", "text", "markdown", "tag", "call_ref", "streaming", "call_id", "name",
                 "arguments", "status", "result", "edited", "expanded", "notice", "advice", "button", "live", "tip",
                 "output", "ending")

    #: What a row keeps of a command's live output (the newest), to show it again when rebuilt.
    MAX_OUTPUT_CHARS = 64_000

    def __init__(self, kind: str, **fields: Any) -> None:
        self.kind = kind  # "message" | "tool" | "notice"
        self.widget: QWidget | None = None
        # message: role, text, markdown, tag, call_ref, streaming
        self.role: str = fields.get("role", "")
        self.text: str = fields.get("text", "")
        self.markdown: bool = fields.get("markdown", True)
        self.tag: str = fields.get("tag", "")
        self.call_ref: dict[str, Any] | None = fields.get("call_ref")
        self.streaming = False
        # tool: call id, name, arguments, status, result, edited, expanded
        self.call_id: str = fields.get("call_id", "")
        self.name: str = fields.get("name", "")
        self.arguments: Any = fields.get("arguments")
        self.status: str = fields.get("status", "")
        self.result: str = fields.get("result", "")
        self.edited = False
        self.expanded = False
        self.output = ""  # E1: a running command's output so far (live only; the result holds it after)
        self.ending = ""  # E6: "exit 0 · 0.42 s"
        # notice: kind (error, info, pending), text, advice, button, whether the button still acts
        self.notice: str = fields.get("notice", "")
        self.advice: str = fields.get("advice", "")
        self.button: str = fields.get("button", "")
        self.live = True  # a Retry on a failure card that a later run replaced: False
        self.tip = ""  # the button's tooltip once it no longer acts

    def __repr__(self) -> str:
        what = self.role or self.name or self.notice
        return f"Row({self.kind}:{what}{', built' if self.widget is not None else ''})"

    # -- changes that reach the widget when there is one ---------------------------------------------
    def set_status(self, status: str) -> None:
        self.status = status
        if self.widget is not None:
            self.widget.set_status(status)  # type: ignore[attr-defined]

    def set_result(self, content: str, status: str | None = None) -> None:
        self.result = content
        if status:
            self.status = status
        if self.widget is not None:
            self.widget.set_result(content, status)  # type: ignore[attr-defined]

    def set_arguments(self, arguments: Any) -> None:
        self.arguments = arguments
        if self.widget is not None:
            self.widget.set_arguments(arguments)  # type: ignore[attr-defined]

    def append_output(self, text: str, skipped: int = 0) -> None:
        """More of a running command's output (``skipped``: characters the live view left out before it)."""
        if skipped:
            text = f"[… {skipped:,} characters not shown live …]\n{text}"
        self.output = (self.output + text)[-self.MAX_OUTPUT_CHARS:]
        if self.widget is not None:
            self.widget.append_output(text)  # type: ignore[attr-defined]

    def set_ending(self, text: str) -> None:
        self.ending = text
        if self.widget is not None:
            self.widget.set_ending(text)  # type: ignore[attr-defined]

    def mark_edited(self, arguments: Any = None) -> None:
        """P6: the person edited the call's arguments before it ran (``arguments``: what ran)."""
        self.edited = True
        if arguments is not None:
            self.arguments = arguments
        if self.widget is not None:
            self.widget.mark_edited(arguments)  # type: ignore[attr-defined]

    def mark(self, tag: str) -> None:
        self.tag = tag
        if self.widget is not None:
            self.widget.mark(tag)  # type: ignore[attr-defined]

    def append(self, text: str) -> None:
        """Streamed text for the live message (plain until ``finish``)."""
        self.streaming = True
        self.text += text
        if self.widget is not None:
            self.widget.append_stream(text)  # type: ignore[attr-defined]

    def finish(self, *, stopped: bool = False) -> None:
        """The live message is complete: rendered as markdown once (and marked stopped)."""
        self.streaming = False
        if stopped:
            self.tag = "stopped"
        if self.widget is not None:
            self.widget.finish(stopped=stopped)  # type: ignore[attr-defined]

    def retire(self, tooltip: str) -> None:
        """A failure card's Retry no longer acts (a later run replaced the run it would retry)."""
        if not self.live:
            return
        self.live = False
        self.tip = tooltip
        button = getattr(self.widget, "button", None) if self.widget is not None else None
        if button is not None and button.isEnabled():
            from workbench.ui.plain_text import plain_tooltip  # rows stay Qt-free until a widget exists

            button.setEnabled(False)
            button.setToolTip(plain_tooltip(tooltip))


def message_row(role: str, text: str, *, markdown: bool = True, call_ref: dict[str, Any] | None = None,
                tag: str = "") -> Row:
    return Row("message", role=role, text=text, markdown=markdown, call_ref=call_ref, tag=tag)


def tool_row(call_id: str, name: str, arguments: Any, status: str = "running",
             call_ref: dict[str, Any] | None = None) -> Row:
    return Row("tool", call_id=call_id, name=name, arguments=arguments, status=status, call_ref=call_ref)


def notice_row(kind: str, text: str, advice: str = "", button: str = "") -> Row:
    return Row("notice", notice=kind, text=text, advice=advice, button=button)


def rows_for_page(messages: Sequence[Message], first: int, placed: Mapping[int, Sequence[tuple[str, Any]]],
                  last_run: str | None, *, ref: Ref,
                  ending_rows: Callable[[dict[str, Any], bool], list[Row]]) -> tuple[list[Row], dict[str, Row]]:
    """The rows of stored messages ``first`` … ``first + len(messages) - 1``, with the endings of runs
    ``placed`` before message i (``RunEndings.place``; rows from ``ending_rows(ending, latest)``, latest:
    the run is ``last_run``), and the page's tool rows by call id (a later call reusing an id wins:
    providers reuse ids across steps). Calls that never got a result are ``stopped`` (the step was cut)."""
    rows: list[Row] = []
    calls: dict[str, Row] = {}

    def put_endings(i: int) -> None:
        for run_id, ending in placed.get(i, ()):
            rows.extend(ending_rows(ending, run_id == last_run))

    for i, m in enumerate(messages):
        put_endings(i)
        if m.role == "user":
            rows.append(message_row("user", m.content, markdown=False))
        elif m.role == "assistant":
            call_ref = ref(first + i)
            if m.content:
                rows.append(message_row("assistant", m.content, call_ref=call_ref,
                                        tag="stopped" if m.meta.get("partial") else ""))
            for call in m.tool_calls:
                row = tool_row(call.id, call.name, call.arguments if call.arguments is not None else call.raw_arguments,
                               call_ref=call_ref)
                calls[call.id] = row
                rows.append(row)
        elif m.role == "tool" and m.tool_call_id:
            row = calls.get(m.tool_call_id)
            if row is not None:
                row.result, row.status = m.content, str(m.meta.get("status", "ok"))
                if m.meta.get("edited"):  # P6: the model's call is kept; show what ran
                    row.mark_edited(m.meta.get("arguments"))
    put_endings(len(messages))
    for row in calls.values():  # calls of an interrupted step that never got a result
        if row.status == "running":
            row.status = "stopped"
    return rows, calls


__all__ = ["Row", "message_row", "notice_row", "rows_for_page", "tool_row"]
