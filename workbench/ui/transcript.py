"""The transcript (G1, issue 3 item 3): user and assistant messages, the streamed answer, tool calls.

It renders what the bridge sends and never asks the engine for anything but pages of a long thread's
history (``Session.history_before``, G13). Streamed text arrives in batches (``Bridge.sig_text_streamed``,
~30 ms) and is appended as plain text; when the message is complete it is rendered once as markdown.
Each tool call is a collapsible row with its arguments, result and status. Errors are shown in plain
words with what to do next; the partial answer of a stopped run is kept and marked "stopped".

G13: a thread is shown from its newest turns (``sig_thread_loaded`` carries only those); earlier pages
are read as the person scrolls up. Every message, tool call and notice is a ``Row`` (data,
``transcript_rows``); only the rows around the viewport have a widget (``transcript_list.RowList``), so
a 10,000-message thread opens as fast as a short one. ``blocks()`` and friends return the widgets built
now.

``TranscriptView`` is what it does with the bridge's signals; the blocks are in ``transcript_blocks``,
their colours in ``transcript_style``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QEvent, Qt, Signal, Slot
from PySide6.QtWidgets import QWidget

from workbench.ui.plain_text import plain_tooltip, rich_label
from workbench.ui.run_activity import ThinkingRow
from workbench.ui.transcript_blocks import MessageBlock, NoticeBlock, ToolCallRow
from workbench.ui.transcript_endings import RunEndings
from workbench.ui.transcript_list import RowList
from workbench.ui.transcript_rows import Row, message_row, notice_row, rows_for_page, tool_row
from workbench.ui.transcript_style import palette, transcript_style_sheet

if TYPE_CHECKING:
    from workbench.session import HistoryPage, Message
    from workbench.ui.bridge import Bridge

log = logging.getLogger(__name__)

#: Messages read per earlier page as the person scrolls up (G13).
PAGE_MESSAGES = 200

NO_RETRY_TIP = "A later run replaced this one: only the latest failed run can be retried"


def advice_for(error: str) -> str:
    """What to do next about a run's error, in plain words."""
    e = error.lower()
    if "api key" in e or "401" in e or "authentication" in e or "unauthorized" in e:
        return "Open Settings and check the API key."
    if "unknown model" in e or "model name" in e or "404" in e:
        return "Open Settings and check the model name."
    if "connect" in e or "api base" in e:
        return "Check the API base in Settings and that the server is running, then send again."
    if "rate limit" in e:
        return "Wait a minute, then send your message again."
    if "did not answer" in e or "timeout" in e or "timed out" in e:
        return "Send your message again; if the model keeps timing out, try a smaller request."
    if "context window" in e or "too long" in e:
        return "Start a new thread, or shorten the conversation."
    if "step limit" in e:
        return "Send \"continue\" to let the agent go on, or split the task into smaller ones."
    if "workbench.yaml" in e:
        return "Fix workbench.yaml as the message says, then send again."
    if "budget" in e:
        return "Raise the budget in workbench.yaml, or start a new thread."
    if "server error" in e or "5xx" in e:
        return "The provider had a problem: try again in a moment."
    if "blocked" in e:
        return "Rephrase your request, or check the rules that blocked it."
    return "Send your message again; if it keeps failing, check Settings and the Events panel."


def _waiting_status(kind: str) -> str:
    """How a tool row shows a pending question about its call: a budget hold is not an approval."""
    return "held" if kind == "budget_hold" else "waiting"


def _stopped_text(error: str) -> str:
    """The notice of a stopped run: the user's own Stop says just that; another reason is shown."""
    error = error.strip().rstrip(".")
    if not error or error == "stopped by the user":
        return "Stopped."
    if error.lower().startswith("stopped"):
        return error[:1].upper() + error[1:] + "."
    return f"Stopped: {error}."


class TranscriptView(RowList):
    """The centre of the window: renders a thread's messages and its live run from bridge signals."""

    sig_decisions_requested = Signal()
    """The user asked to review the pending decisions of a suspended run."""

    sig_retry_requested = Signal()
    """The user asked to run a failed run's step again (Retry)."""

    sig_prompt_requested = Signal(dict)
    """"Inspect prompt" on an assistant message or a tool call (V2): the model call that made it, as
    ``{"message": stored index}`` or ``{"run": run id, "step": n}`` (``prompt_inspector.call_for``)."""

    def __init__(self, bridge: Bridge, parent: QWidget | None = None, *, inspect_prompts: bool = True) -> None:
        super().__init__(parent)
        self.inspect_prompts = inspect_prompts  # V2: assistant messages offer "Inspect prompt"
        self._live_step: tuple[str, int] | None = None  # (run id, step) of the model call under way
        self.setObjectName("transcript")
        self._content.setObjectName("transcript_content")
        self._palette = palette()
        self._content.setStyleSheet(transcript_style_sheet(self._palette))
        # What an empty thread shows instead of a blank area (not one of the blocks).
        self.empty_hint = rich_label(self._content)  # static text of ours (task_transcript's too)
        self.empty_hint.setObjectName("transcript_empty")
        self.empty_hint.setWordWrap(True)
        self.empty_hint.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self._set_empty_hint(demo=False)
        self.add_head(self.empty_hint)
        # G1: "Thinking…" while the model has not answered; always the last row (rows go above it).
        self.thinking_row = ThinkingRow(self._content)
        self.add_tail(self.thinking_row)
        self._calls: dict[str, Row] = {}  # tool rows by call id (a reused id: the newest call)
        self._errors: list[Row] = []  # failure cards (only the newest offers Retry)
        self._current: Row | None = None  # the message streaming in
        self._pending_notice: Row | None = None
        # G13: paging — the stored index of the first loaded message, the run it belongs to, and a
        # generation that tells a page read for a thread shown before from one for this thread
        self._first_index = 0
        self._first_run: str | None = None
        self._generation = 0
        self._loading = False
        self._bridge = bridge
        bridge.sig_thread_loaded.connect(self.load_thread)
        bridge.sig_text_streamed.connect(self.append_text)
        bridge.sig_step_started.connect(self.end_message)
        bridge.sig_tool_started.connect(self.on_tool_started)
        bridge.sig_tool_finished.connect(self.on_tool_finished)
        bridge.sig_command_output.connect(self.on_command_output)
        bridge.sig_tool_results_committed.connect(self.on_tool_results)
        bridge.sig_interrupt_raised.connect(self.on_interrupt)
        bridge.sig_run_finished.connect(self.on_run_finished)
        bridge.sig_interrupt_answered.connect(self._clear_pending_notice)
        # G10: how each run ended, from the durable events replayed when a thread is attached
        self.endings = RunEndings()
        bridge.sig_thread_attached.connect(lambda _tid: self.endings.reset())
        bridge.sig_event_received.connect(self.endings.add)
        bridge.sig_run_started.connect(self._retire_retry)  # only the latest failed run offers Retry
        bridge.sig_step_started.connect(self._start_thinking)
        bridge.sig_event_received.connect(self._follow_step)
        for sig in (bridge.sig_text_streamed, bridge.sig_tool_started, bridge.sig_usage_updated,
                    bridge.sig_interrupt_raised, bridge.sig_run_finished, bridge.sig_thread_attached):
            sig.connect(self._stop_thinking)

    # -- queries (for tests and other panels): the blocks built now -----------------------------------
    def blocks(self) -> list[QWidget]:
        return [r.widget for r in self.built_rows() if r.widget is not None]

    def messages(self) -> list[MessageBlock]:
        return [w for w in self.blocks() if isinstance(w, MessageBlock)]

    def tool_rows(self) -> list[ToolCallRow]:
        return [w for w in self.blocks() if isinstance(w, ToolCallRow)]

    def tool_row(self, call_id: str) -> ToolCallRow | None:
        row = self._calls.get(call_id)
        return row.widget if row is not None and isinstance(row.widget, ToolCallRow) else None

    def notices(self, kind: str | None = None) -> list[NoticeBlock]:
        return [w for w in self.blocks() if isinstance(w, NoticeBlock) and (kind is None or w.kind == kind)]

    @property
    def first_index(self) -> int:
        """The stored index of the oldest message loaded (0: the thread's start is loaded)."""
        return self._first_index

    # -- building -------------------------------------------------------------------------------------
    def clear(self) -> None:
        self.clear_rows()
        self._calls.clear()
        self._errors.clear()
        self._current = None
        self._pending_notice = None
        self._first_index, self._first_run = 0, None
        self._generation += 1
        self._loading = False
        self.thinking_row.stop()
        self.empty_hint.show()

    def build_row(self, row: Row) -> QWidget:
        """The widget of a row (``RowList`` builds it when the row comes near the viewport)."""
        if row.kind == "message":
            block = MessageBlock(row.role, "" if row.streaming else row.text, markdown=row.markdown,
                                 call_ref=row.call_ref)
            if row.streaming:
                block.append_stream(row.text)
            if row.tag:
                block.mark(row.tag)
            self._inspectable(block)
            return block
        if row.kind == "tool":
            tool = ToolCallRow(row.call_id, row.name, row.arguments, status=row.status or "running",
                               call_ref=row.call_ref)
            if row.edited:
                tool.mark_edited()
            if row.result:
                tool.set_result(row.result)
            if row.expanded:
                tool.set_expanded(True)
            tool.set_output(row.output)
            tool.set_ending(row.ending)
            self._inspectable(tool)
            return tool
        notice = NoticeBlock(row.notice, row.text, row.advice, button=row.button)
        if notice.button is not None and row.notice == "error":
            notice.button.setObjectName("retry_run")
            notice.button.setToolTip("Run the failed step again from the last checkpoint")
            notice.button.clicked.connect(self.sig_retry_requested)
            if not row.live:
                notice.button.setEnabled(False)
                notice.button.setToolTip(plain_tooltip(row.tip))
        elif notice.button is not None and row.notice == "pending":
            notice.button.setObjectName("review_pending")
            notice.button.setAccessibleDescription(row.tip)  # G14
            notice.button.clicked.connect(self.sig_decisions_requested)
        return notice

    def pool_key(self, row: Row) -> str | None:
        """Blocks a row may take over from rows scrolled out of sight (notices are few: never)."""
        if row.kind == "message" and not row.streaming:
            return f"message:{row.role}:{row.call_ref is not None}"
        return "tool" if row.kind == "tool" else None

    def reuse_row(self, row: Row, widget: QWidget) -> None:
        if isinstance(widget, MessageBlock):
            widget.reuse(row.text, markdown=row.markdown, call_ref=row.call_ref, tag=row.tag)
        elif isinstance(widget, ToolCallRow):
            widget.reuse(row.call_id, row.name, row.arguments, row.status or "running", row.result,
                         edited=row.edited, expanded=row.expanded, call_ref=row.call_ref, output=row.output,
                         ending=row.ending)

    def spare_row(self, key: str) -> Row | None:
        """Spares for what a live run adds at the end: its answers' blocks and its tool calls' rows."""
        ref = {"message": -1} if self.inspect_prompts else None  # the reuse sets the real one
        if key == "tool":
            return tool_row("", "", {}, call_ref=ref)
        if key == f"message:assistant:{ref is not None}":
            return message_row("assistant", "", call_ref=ref)
        return None

    def forget_widget(self, row: Row, widget: QWidget) -> None:
        if isinstance(widget, ToolCallRow):
            row.expanded = widget.expanded  # opened again when scrolled back to

    def _add(self, row: Row) -> QWidget | None:
        """Append a row at the end (built when the newest rows are); its widget, if built."""
        self.empty_hint.hide()
        self.append_row(row)
        return row.widget

    @Slot(object)
    def _follow_step(self, event: Any) -> None:
        """The run and step of the model call under way: the live blocks' ``call_ref``; and, while the run
        waits for background tasks before that call (B2, D8: a hard budget they could carry past its
        limit), why — in the row that says "Thinking…" otherwise."""
        if event.type == "step_started" and not self._bridge.replaying:
            self._live_step = (str(event.run_id), int(event.step))
        elif event.type == "budget_updated" and "waiting" in (event.data or {}):
            waiting = event.data.get("waiting")
            self.thinking_row.set_waiting(str(waiting.get("reason") or "") if isinstance(waiting, dict) else None)

    def _ref(self, message: int | None = None) -> dict[str, Any] | None:
        """What names a block's model call: its stored message index, else the live run and step."""
        if not self.inspect_prompts:
            return None
        if message is not None:
            return {"message": message}
        if self._live_step is not None:
            return {"run": self._live_step[0], "step": self._live_step[1]}
        return None

    def _inspectable(self, block: MessageBlock | ToolCallRow) -> None:
        if block.call_ref is not None:
            block.sig_inspect_requested.connect(self.sig_prompt_requested)

    @Slot()
    def _start_thinking(self, *_: Any) -> None:
        self.thinking_row.start()

    @Slot()
    def _stop_thinking(self, *_: Any) -> None:
        self.thinking_row.stop()

    def _set_empty_hint(self, *, demo: bool) -> None:
        text = ("<p><b>No messages in this thread yet.</b></p>"
                "<p>Type a task in the box below and press <b>Send</b> (Ctrl+Enter).<br>"
                "The agent's answer streams in here, with each tool call it makes;"
                " calls that need your approval open a dialog first.</p>")
        if demo:
            text += ("<p>This is the offline <i>demo</i> model: send anything (for example"
                     " <i>Show me around this project</i>) to watch a whole scripted session.<br>"
                     "Choose a real model and API key in File → Settings.</p>")
        self.empty_hint.setText(text)

    def _update_empty_hint(self) -> None:
        self.empty_hint.setVisible(not self.rows)

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 - Qt override
        """Follow a change of the light/dark theme (the blocks' colours come from one sheet)."""
        super().changeEvent(event)
        if event.type() in (QEvent.Type.StyleChange, QEvent.Type.PaletteChange):
            colors = palette()
            if colors != self._palette:
                self._palette = colors
                self._content.setStyleSheet(transcript_style_sheet(colors))
                for m in self.messages():  # tables and code boxes carry the theme's colours
                    if m.role != "user" and not m.streaming and m.text:
                        m.set_text(m.text)

    def add_user_message(self, text: str) -> MessageBlock:
        self.end_message()
        self._clear_pending_notice()
        self.jump_to_end()  # the person was maybe reading far above: their message is at the end
        block = self._add(message_row("user", text, markdown=False))
        self.scroll_to_end()
        assert isinstance(block, MessageBlock)
        return block

    def add_error(self, error: str, *, retry: bool = True) -> NoticeBlock | None:
        """A failed run: the error in plain words, what to do next, and Retry (re-runs the failed step).
        Only the newest card offers Retry; ``retry`` False: a card of a run that later runs replaced.
        Returns the card (None when the newest rows are not built: the person reads far above)."""
        self.end_message()
        self._retire_retry()
        block = self._add(self._error_row(error, retry=retry))
        return block if isinstance(block, NoticeBlock) else None

    def _error_row(self, error: str, *, retry: bool) -> Row:
        row = notice_row("error", f"The run failed: {error}", advice_for(error), button="Retry")
        if not retry:
            row.live, row.tip = False, NO_RETRY_TIP
        self._errors.append(row)
        return row

    @Slot()
    @Slot(str)
    def _retire_retry(self, *_: Any) -> None:
        """A later run started or a retry succeeded: the failure cards shown so far no longer offer Retry."""
        for row in self._errors:
            row.retire(NO_RETRY_TIP)

    def add_info(self, text: str) -> NoticeBlock | None:
        block = self._add(notice_row("info", text))
        return block if isinstance(block, NoticeBlock) else None

    def _pending_row(self, count: int) -> Row:
        noun = "decision" if count == 1 else "decisions"
        row = notice_row("pending", f"The run is waiting for {count} {noun}.", "Nothing runs until you decide.",
                         button="Review…")
        row.tip = f"Open the {noun} the run is waiting for"
        return row

    def show_pending_notice(self, count: int) -> NoticeBlock | None:
        """The run waits for decisions: say so, with a button that opens the approval dialog again."""
        self._clear_pending_notice()
        row = self._pending_row(count)
        self._pending_notice = row
        block = self._add(row)
        return block if isinstance(block, NoticeBlock) else None

    @Slot()
    @Slot(dict)
    def _clear_pending_notice(self, *_: Any) -> None:
        if self._pending_notice is not None:
            self.remove_row(self._pending_notice)
            self._pending_notice = None
            self._update_empty_hint()

    @Slot(dict)
    def load_thread(self, info: dict[str, Any]) -> None:
        """Show a thread from its committed messages (the newest turns: ``first_index`` on, of
        ``message_count``), its pending questions and its last error."""
        self.setUpdatesEnabled(False)
        try:
            self.clear()
            self._set_empty_hint(demo=info.get("model") == "demo")
            messages = list(info.get("messages") or [])
            self._first_index = int(info.get("first_index") or 0)
            self._first_run = _first_run(messages)
            placed = self.endings.place(messages, at_start=self._first_index == 0)  # G10: each run's ending too
            rows, calls = rows_for_page(messages, self._first_index, placed, self.endings.last_run,
                                        ref=self._ref, ending_rows=self._ending_rows)
            self._calls.update(calls)
            self.set_rows(rows)
            self._update_empty_hint()
            pending = list(info.get("pending") or [])
            for q in pending:
                if q.call_id and q.call_id in self._calls:
                    self._calls[q.call_id].set_status(_waiting_status(getattr(q, "kind", "")))
            status = info.get("status")
            if status == "failed" and info.get("error") and self.endings.last_run not in self.endings.endings:
                self.add_error(str(info["error"]))  # the last run never ended (cut off): last_error says so
            if pending:
                self.show_pending_notice(len(pending))
        finally:
            self.setUpdatesEnabled(True)
        self.scroll_to_end()

    def render_messages(self, messages: Sequence[Message],
                        endings: dict[int, list[tuple[str, dict[str, Any]]]] | None = None) -> None:
        """Append committed messages as rows; ``endings`` (``RunEndings.place``): run endings shown before
        message i (after the last one at ``len(messages)``), as they were shown live (G10)."""
        rows, calls = rows_for_page(messages, 0, endings or {}, self.endings.last_run, ref=self._ref,
                                    ending_rows=self._ending_rows)
        self._calls.update(calls)
        for row in rows:
            self._add(row)
        self._settle(None)  # laid out now: the newest rows' heights follow the width they get

    # -- earlier pages (G13) --------------------------------------------------------------------------
    def more_above(self) -> bool:
        return self._first_index > 0

    def fetch_earlier(self) -> None:
        """Read the page before the oldest loaded message, off the GUI thread, and put its rows above."""
        session = self._bridge.session
        if self._loading or self._first_index <= 0 or session is None:
            return
        self._loading = True
        generation, thread_id, before = self._generation, session.thread_id, self._first_index

        def read() -> HistoryPage:
            return session.history_before(before, limit=PAGE_MESSAGES, thread_id=thread_id)

        try:
            asyncio.get_running_loop()
        except RuntimeError:  # no loop (a plain script): read it here
            self._take_page(generation, read())
            return
        from workbench.ui.qt_async import start

        start(self._read_page(generation, read), name="transcript-page")

    async def _read_page(self, generation: int, read: Any) -> None:
        try:
            page = await asyncio.to_thread(read)
        except Exception as e:  # noqa: BLE001 - a store closing under a workspace switch: nothing to show
            log.debug("transcript: an earlier page was not read: %s", e)
            if generation == self._generation:
                self._loading = False
            return
        self._take_page(generation, page)

    def _take_page(self, generation: int, page: HistoryPage) -> None:
        """Rows of an earlier page above the loaded ones (dropped if another thread was shown since)."""
        if generation != self._generation:
            return
        self._loading = False
        messages = list(page.messages)
        if not messages or page.start >= self._first_index:
            self._first_index = min(self._first_index, page.start) if messages else 0
            self.prepend_rows([])
            return
        placed = self.endings.place(messages, at_start=page.start == 0, tail=False, next_run=self._first_run)
        rows, calls = rows_for_page(messages, page.start, placed, self.endings.last_run, ref=self._ref,
                                    ending_rows=self._ending_rows)
        for cid, row in calls.items():
            self._calls.setdefault(cid, row)  # a later call reusing the id stays the one live events reach
        self._first_index = page.start
        self._first_run = _first_run(messages) or self._first_run
        self.prepend_rows(rows)

    # -- live -----------------------------------------------------------------------------------------
    @Slot(str)
    def append_text(self, text: str) -> None:
        if self._current is None:
            self._current = message_row("assistant", "", call_ref=self._ref())
            self._add(self._current)
        self._current.append(text)

    @Slot()
    @Slot(int)
    def end_message(self, *_: Any) -> None:
        """The streamed message is complete: render it as markdown."""
        if self._current is not None:
            self._current.finish()
            self._current = None

    @Slot(dict)
    def on_tool_started(self, data: dict[str, Any]) -> None:
        self.end_message()
        cid = str(data.get("call_id", ""))
        row = self._calls.get(cid)
        if row is not None and row.status in ("waiting", "held", "running", "stopped"):
            # a resumed (maybe edited) call runs again
            row.set_arguments(data.get("arguments", row.arguments))
            row.set_status("running")
            return
        # a new call (some providers reuse ids across steps: a finished row is never reused)
        row = tool_row(cid, str(data.get("name", "")), data.get("arguments", {}), call_ref=self._ref())
        self._calls[cid] = row
        self._add(row)

    @Slot(dict)
    def on_tool_finished(self, data: dict[str, Any]) -> None:
        cid = str(data.get("call_id", ""))
        row = self._calls.get(cid)
        if row is None:
            row = tool_row(cid, str(data.get("name", "")), {})
            self._calls[cid] = row
            self._add(row)
        row.set_status(str(data.get("status", "ok")))
        if data.get("edited"):  # P6: tool_call_started already carried the edited arguments
            row.mark_edited()
        if "exit_code" in data:  # E6: a command ended
            row.set_ending(command_ending(data))

    @Slot(dict)
    def on_command_output(self, data: dict[str, Any]) -> None:
        """E1: a running command's output, batched by the bridge, into its tool row."""
        row = self._calls.get(str(data.get("call_id", "")))
        if row is not None:
            row.append_output(str(data.get("text", "")), int(data.get("skipped") or 0))

    @Slot(dict)
    def on_tool_results(self, results: dict[str, dict[str, Any]]) -> None:
        for cid, r in results.items():
            row = self._calls.get(cid)
            if row is not None:
                row.set_result(str(r.get("content", "")), str(r.get("status") or row.status))

    @Slot(dict)
    def on_interrupt(self, data: dict[str, Any]) -> None:
        row = self._calls.get(str(data.get("call_id") or ""))
        if row is not None:
            row.set_status(_waiting_status(str(data.get("kind") or "")))

    @Slot(dict)
    def on_run_finished(self, data: dict[str, Any]) -> None:
        status = data.get("status")
        stopped = status == "aborted"
        if self._current is not None:
            self._current.finish(stopped=stopped)
            self._current = None
        if status in ("aborted", "failed"):
            for row in self._calls.values():
                if row.status == "running":
                    row.set_status("stopped" if stopped else "error")
        self.show_ending(data)

    def show_ending(self, data: dict[str, Any], *, latest: bool = True) -> None:
        """How a run ended (``run_finished`` data), live or rebuilt after a reload (G10): a failure card
        (Retry only on the ``latest`` run), "Stopped…" (with the budget's field, spent and limit when a
        budget stopped it), or the pending notice; a run that is done shows its answer only."""
        self._retire_retry()  # a new ending: no earlier failure is left to retry
        for row in self._ending_rows(data, latest):
            if row is self._pending_notice:
                self._pending_notice = None
                self.show_pending_notice(int(data.get("pending") or 1))
            else:
                self._add(row)

    def _ending_rows(self, data: dict[str, Any], latest: bool) -> list[Row]:
        """The rows that say how a run ended (see ``show_ending``)."""
        status = data.get("status")
        if status == "failed":
            return [self._error_row(str(data.get("error") or "unknown error"), retry=latest)]
        if status == "aborted":
            return [notice_row("info", _stopped_text(str(data.get("error") or "")))]
        if status == "interrupted" and latest:
            row = self._pending_row(int(data.get("pending") or 1))
            self._pending_notice = row
            return [row]
        if status == "interrupted":  # left undecided, and a later run went on
            n = int(data.get("pending") or 1)
            return [notice_row("info", f"This run was left waiting for {n} decision{'s' if n != 1 else ''}.")]
        return []

    # -- scrolling ------------------------------------------------------------------------------------
    def _scroll_to_end(self) -> None:
        self.scroll_to_end()


def _first_run(messages: Sequence[Message]) -> str | None:
    """The run of the first of ``messages`` that names one."""
    return next((str(m.meta["run"]) for m in messages if m.meta.get("run")), None)


__all__ = ["PAGE_MESSAGES", "TranscriptView", "advice_for"]


def command_ending(data: dict[str, Any]) -> str:
    """"exit 0 · 0.42 s", "killed (signal 9) · 3.1 s", "timed out · 120 s" from ``tool_call_finished``."""
    code = data.get("exit_code")
    seconds = data.get("duration_seconds")
    took = f" · {float(seconds):.2f} s" if isinstance(seconds, (int, float)) else ""
    if data.get("timed_out"):
        return f"timed out{took}"
    if isinstance(code, int) and code < 0:
        return f"killed (signal {-code}){took}"
    return f"exit {code}{took}" if code is not None else took.lstrip(" ·")

