"""The transcript (G1, issue 3 item 3): user and assistant messages, the streamed answer, tool calls.

It renders what the bridge sends and never asks the engine for anything. Streamed text arrives in
batches (``Bridge.sig_text_streamed``, ~30 ms) and is appended as plain text; when the message is
complete it is rendered once as markdown. Each tool call is a collapsible row with its arguments,
result and status. Errors are shown in plain words with what to do next; the partial answer of a
stopped run is kept and marked "stopped".

``TranscriptView`` is the scroll area and what it does with the bridge's signals; the blocks it is
made of are in ``transcript_blocks``, their colours in ``transcript_style``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QEvent, Qt, QTimer, Signal, Slot
from PySide6.QtWidgets import QLabel, QScrollArea, QVBoxLayout, QWidget

from workbench.ui.focus_order import chain_after, parts_of
from workbench.ui.run_activity import ThinkingRow
from workbench.ui.transcript_blocks import MessageBlock, NoticeBlock, ToolCallRow
from workbench.ui.transcript_endings import RunEndings
from workbench.ui.transcript_style import palette, transcript_style_sheet

if TYPE_CHECKING:
    from workbench.engine.messages import Message
    from workbench.ui.bridge import Bridge


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


def _no_retry(block: NoticeBlock) -> None:
    if block.button is not None and block.button.isEnabled():
        block.button.setEnabled(False)
        block.button.setToolTip("A later run replaced this one: only the latest failed run can be retried")


class TranscriptView(QScrollArea):
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
        self.setWidgetResizable(True)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self._content = QWidget()
        self._content.setObjectName("transcript_content")
        self._palette = palette()
        self._content.setStyleSheet(transcript_style_sheet(self._palette))
        self._layout = QVBoxLayout(self._content)
        self._layout.setContentsMargins(10, 10, 10, 10)
        self._layout.setSpacing(6)
        # What an empty thread shows instead of a blank area (not one of the blocks).
        self.empty_hint = QLabel(self._content)
        self.empty_hint.setObjectName("transcript_empty")
        self.empty_hint.setWordWrap(True)
        self.empty_hint.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty_hint.setTextFormat(Qt.TextFormat.RichText)
        self._set_empty_hint(demo=False)
        self._layout.addWidget(self.empty_hint)
        # G1: "Thinking…" while the model has not answered; always the last row (``_add`` inserts above it).
        self.thinking_row = ThinkingRow(self._content)
        self._layout.addWidget(self.thinking_row)
        self._layout.addStretch(1)
        self.setWidget(self._content)
        self._rows: dict[str, ToolCallRow] = {}
        self._current: MessageBlock | None = None
        self._pending_notice: NoticeBlock | None = None
        self._stick = True
        bar = self.verticalScrollBar()
        bar.rangeChanged.connect(self._on_range)
        bar.valueChanged.connect(self._on_scrolled)
        self._bridge = bridge
        bridge.sig_thread_loaded.connect(self.load_thread)
        bridge.sig_text_streamed.connect(self.append_text)
        bridge.sig_step_started.connect(self.end_message)
        bridge.sig_tool_started.connect(self.on_tool_started)
        bridge.sig_tool_finished.connect(self.on_tool_finished)
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

    # -- queries (for tests and other panels) ---------------------------------------------------------
    def blocks(self) -> list[QWidget]:
        out = []
        for i in range(self._layout.count()):
            w = self._layout.itemAt(i).widget()
            if w is not None and w is not self.empty_hint and w is not self.thinking_row:
                out.append(w)
        return out

    def messages(self) -> list[MessageBlock]:
        return [w for w in self.blocks() if isinstance(w, MessageBlock)]

    def tool_rows(self) -> list[ToolCallRow]:
        return [w for w in self.blocks() if isinstance(w, ToolCallRow)]

    def tool_row(self, call_id: str) -> ToolCallRow | None:
        return self._rows.get(call_id)

    def notices(self, kind: str | None = None) -> list[NoticeBlock]:
        return [w for w in self.blocks() if isinstance(w, NoticeBlock) and (kind is None or w.kind == kind)]

    # -- building -------------------------------------------------------------------------------------
    def clear(self) -> None:
        for w in self.blocks():
            self._layout.removeWidget(w)
            w.deleteLater()
        self._rows.clear()
        self._current = None
        self._pending_notice = None
        self._stick = True
        self.thinking_row.stop()
        self.empty_hint.show()

    def _add(self, widget: QWidget) -> None:
        self.empty_hint.hide()
        index = self._layout.count() - 2
        self._layout.insertWidget(index, widget)  # above the thinking row and the stretch
        # G14: Tab reaches the new block after the one above it (Qt would put it after every dock)
        anchor: QWidget = self
        for i in range(index - 1, -1, -1):
            above = self._layout.itemAt(i).widget()
            parts = parts_of(above) if above is not None else []
            if parts:
                anchor = parts[-1]
                break
        chain_after(anchor, widget)

    @Slot(object)
    def _follow_step(self, event: Any) -> None:
        """The run and step of the model call under way: the live blocks' ``call_ref``."""
        if event.type == "step_started" and not self._bridge.replaying:
            self._live_step = (str(event.run_id), int(event.step))

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
        self.empty_hint.setVisible(not self.blocks())

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
        block = MessageBlock("user", text, markdown=False)
        self._add(block)
        self._stick = True
        return block

    def add_error(self, error: str, *, retry: bool = True) -> NoticeBlock:
        """A failed run: the error in plain words, what to do next, and Retry (re-runs the failed step).
        Only the newest card offers Retry; ``retry`` False: a card of a run that later runs replaced."""
        self.end_message()
        self._retire_retry()
        block = NoticeBlock("error", f"The run failed: {error}", advice_for(error), button="Retry")
        assert block.button is not None
        block.button.setObjectName("retry_run")
        block.button.setToolTip("Run the failed step again from the last checkpoint")
        block.button.clicked.connect(self.sig_retry_requested)
        if not retry:
            _no_retry(block)
        self._add(block)
        return block

    @Slot()
    @Slot(str)
    def _retire_retry(self, *_: Any) -> None:
        """A later run started or a retry succeeded: the failure cards shown so far no longer offer Retry."""
        for block in self.notices("error"):
            _no_retry(block)

    def add_info(self, text: str) -> NoticeBlock:
        block = NoticeBlock("info", text)
        self._add(block)
        return block

    def show_pending_notice(self, count: int) -> NoticeBlock:
        """The run waits for decisions: say so, with a button that opens the approval dialog again."""
        self._clear_pending_notice()
        noun = "decision" if count == 1 else "decisions"
        block = NoticeBlock("pending", f"The run is waiting for {count} {noun}.",
                            "Nothing runs until you decide.", button="Review…")
        assert block.button is not None
        block.button.setObjectName("review_pending")
        block.button.setAccessibleDescription(f"Open the {noun} the run is waiting for")  # G14
        block.button.clicked.connect(self.sig_decisions_requested)
        self._pending_notice = block
        self._add(block)
        return block

    @Slot()
    @Slot(dict)
    def _clear_pending_notice(self, *_: Any) -> None:
        if self._pending_notice is not None:
            self._layout.removeWidget(self._pending_notice)
            self._pending_notice.deleteLater()
            self._pending_notice = None
            self._update_empty_hint()

    @Slot(dict)
    def load_thread(self, info: dict[str, Any]) -> None:
        """Show a thread from its committed messages, its pending questions and its last error."""
        self.setUpdatesEnabled(False)
        try:
            self.clear()
            self._set_empty_hint(demo=info.get("model") == "demo")
            messages = info.get("messages") or []
            self.render_messages(messages, self.endings.place(messages))  # G10: each run's ending too
            pending = list(info.get("pending") or [])
            for q in pending:
                if q.call_id and q.call_id in self._rows:
                    self._rows[q.call_id].set_status(_waiting_status(getattr(q, "kind", "")))
            status = info.get("status")
            if status == "failed" and info.get("error") and self.endings.last_run not in self.endings.endings:
                self.add_error(str(info["error"]))  # the last run never ended (cut off): last_error says so
            if pending:
                self.show_pending_notice(len(pending))
        finally:
            self.setUpdatesEnabled(True)
        self._scroll_to_end()

    def render_messages(self, messages: Sequence[Message],
                        endings: dict[int, list[tuple[str, dict[str, Any]]]] | None = None) -> None:
        """Committed messages as blocks; ``endings`` (``RunEndings.place``): run endings shown before
        message i (after the last one at ``len(messages)``), as they were shown live (G10)."""
        endings = endings or {}
        for i, m in enumerate(messages):
            for run_id, ending in endings.get(i, ()):
                self.show_ending(ending, latest=run_id == self.endings.last_run)
            if m.role == "user":
                self._add(MessageBlock("user", m.content, markdown=False))
            elif m.role == "assistant":
                ref = self._ref(i)
                if m.content:
                    block = MessageBlock("assistant", m.content, call_ref=ref)
                    self._inspectable(block)
                    if m.meta.get("partial"):
                        block.mark("stopped")
                    self._add(block)
                for call in m.tool_calls:
                    row = ToolCallRow(call.id, call.name, call.arguments if call.arguments is not None
                                      else call.raw_arguments, status="running", call_ref=ref)
                    self._inspectable(row)
                    self._rows[call.id] = row
                    self._add(row)
            elif m.role == "tool" and m.tool_call_id:
                row = self._rows.get(m.tool_call_id)
                if row is not None:
                    row.set_result(m.content, str(m.meta.get("status", "ok")))
                    if m.meta.get("edited"):  # P6: the model's call is kept; show what ran
                        row.mark_edited(m.meta.get("arguments"))
        for run_id, ending in endings.get(len(messages), ()):
            self.show_ending(ending, latest=run_id == self.endings.last_run)
        for row in self._rows.values():  # calls of an interrupted step that never got a result
            if row.status == "running":
                row.set_status("stopped")

    # -- live -----------------------------------------------------------------------------------------
    @Slot(str)
    def append_text(self, text: str) -> None:
        if self._current is None:
            self._current = MessageBlock("assistant", call_ref=self._ref())
            self._inspectable(self._current)
            self._add(self._current)
        self._current.append_stream(text)

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
        row = self._rows.get(cid)
        if row is not None and row.status in ("waiting", "held", "running", "stopped"):
            # a resumed (maybe edited) call runs again
            row.set_arguments(data.get("arguments", row.arguments))
            row.set_status("running")
            return
        # a new call (some providers reuse ids across steps: a finished row is never reused)
        row = ToolCallRow(cid, str(data.get("name", "")), data.get("arguments", {}), call_ref=self._ref())
        self._inspectable(row)
        self._rows[cid] = row
        self._add(row)

    @Slot(dict)
    def on_tool_finished(self, data: dict[str, Any]) -> None:
        cid = str(data.get("call_id", ""))
        row = self._rows.get(cid)
        if row is None:
            row = ToolCallRow(cid, str(data.get("name", "")), {})
            self._rows[cid] = row
            self._add(row)
        row.set_status(str(data.get("status", "ok")))
        if data.get("edited"):  # P6: tool_call_started already carried the edited arguments
            row.mark_edited()

    @Slot(dict)
    def on_tool_results(self, results: dict[str, dict[str, Any]]) -> None:
        for cid, r in results.items():
            row = self._rows.get(cid)
            if row is not None:
                row.set_result(str(r.get("content", "")), str(r.get("status") or row.status))

    @Slot(dict)
    def on_interrupt(self, data: dict[str, Any]) -> None:
        row = self._rows.get(str(data.get("call_id") or ""))
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
            for row in self._rows.values():
                if row.status == "running":
                    row.set_status("stopped" if stopped else "error")
        self.show_ending(data)

    def show_ending(self, data: dict[str, Any], *, latest: bool = True) -> None:
        """How a run ended (``run_finished`` data), live or rebuilt after a reload (G10): a failure card
        (Retry only on the ``latest`` run), "Stopped…" (with the budget's field, spent and limit when a
        budget stopped it), or the pending notice; a run that is done shows its answer only."""
        status = data.get("status")
        if status != "failed":
            self._retire_retry()  # e.g. a retry that went through: nothing is left to retry
        if status == "failed":
            self.add_error(str(data.get("error") or "unknown error"), retry=latest)
        elif status == "aborted":
            self.add_info(_stopped_text(str(data.get("error") or "")))
        elif status == "interrupted" and latest:
            self.show_pending_notice(int(data.get("pending") or 1))
        elif status == "interrupted":  # left undecided, and a later run went on
            n = int(data.get("pending") or 1)
            self.add_info(f"This run was left waiting for {n} decision{'s' if n != 1 else ''}.")

    # -- scrolling ------------------------------------------------------------------------------------
    @Slot(int, int)
    def _on_range(self, _min: int, maximum: int) -> None:
        if self._stick:
            self.verticalScrollBar().setValue(maximum)

    @Slot(int)
    def _on_scrolled(self, value: int) -> None:
        self._stick = value >= self.verticalScrollBar().maximum() - 8

    def _scroll_to_end(self) -> None:
        self._stick = True
        QTimer.singleShot(0, self, self._to_bottom)

    @Slot()
    def _to_bottom(self) -> None:
        self.verticalScrollBar().setValue(self.verticalScrollBar().maximum())


__all__ = ["TranscriptView", "advice_for"]
