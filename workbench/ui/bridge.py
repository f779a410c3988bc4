"""The one bridge from engine events to Qt signals (CONVENTIONS 3).

A ``Bridge`` subscribes to the ``Session`` (``session.subscribe``) and re-emits each event as a Qt
signal named ``sig_<noun>_<past-verb>``; panels connect to those and render what they receive, they
never poll the engine. Streamed text is gathered and handed on every ~30 ms by a ``QTimer``: per-chunk
inserts into a text view froze a test window for seconds.

Replayed durable events (those stored before the bridge subscribed, e.g. when a thread is opened)
only go out as ``sig_event_received`` with ``replaying`` True; then ``sig_thread_loaded`` tells panels
to take the committed state (messages, todos, pending questions) from what it carries.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, QTimer, Signal, Slot

if TYPE_CHECKING:
    from workbench.session import Event
    from workbench.session import Session

log = logging.getLogger(__name__)

#: How long streamed text is gathered before it is handed to the view (DESIGN §2: ~30 ms).
TEXT_BATCH_MS = 30
#: The most of one command's output handed on at once (E6): the newest is kept, ``skipped`` counts the
#: rest, so a burst never costs the view more than one batch's worth of text.
COMMAND_BATCH_CHARS = 8 * 1024

#: G13: of a thread's stored durable events the window replays its newest this many in full (before
#: them, all but the per-call ones: ``Session.replay_events``); a 10,000-message thread has ~10,000.
REPLAY_RECENT = 300

#: G13: what ``sig_thread_loaded`` carries of a thread's history: its newest turns (and at least the
#: newest TAIL_AT_LEAST messages: a short thread whole), at most TAIL_MESSAGES; the transcript reads
#: earlier pages as the person scrolls (``Session.history_before``).
TAIL_TURNS, TAIL_AT_LEAST, TAIL_MESSAGES = 2, 200, 400


class Bridge(QObject):
    """Turns one Session's events into Qt signals. Lives on the GUI thread."""

    sig_event_received = Signal(object)
    """Every event (``workbench.engine.events.Event``), live and replayed, in order (Events dock)."""

    sig_text_streamed = Signal(str)
    """A batch of streamed answer text (all ``model_delta`` text of the last ~30 ms)."""

    sig_step_started = Signal(int)
    """A model step began (the step number)."""

    sig_run_started = Signal(str)
    """A run began (its run id)."""

    sig_run_finished = Signal(dict)
    """A run ended: ``{"status": done|failed|aborted|interrupted, "error"?: str, "usage": dict, ...}``."""

    sig_run_failed = Signal(str)
    """A run failed with this error message (``run_error``)."""

    sig_tool_started = Signal(dict)
    """A tool call began: ``{"call_id", "name", "arguments"}``."""

    sig_tool_finished = Signal(dict)
    """A tool call ended: ``{"call_id", "name", "status"}`` (ok, error, rejected, ...)."""

    sig_command_output = Signal(dict)
    """A running command printed (E6, live ``command_output``), gathered per call over ~30 ms like the
    answer text: ``{"call_id", "text", "skipped"}`` — ``skipped`` counts characters left out before
    ``text`` (a command printing faster than it can be shown keeps the newest). Its end is the call's
    ``sig_tool_finished``, whose dict then holds ``exit_code``, ``duration_seconds``, ``timed_out``,
    ``output_chars`` and ``sandboxed``."""

    sig_tool_results_committed = Signal(dict)
    """Results of finished tool calls, from the committed history: ``{call_id: {"status", "content"}}``."""

    sig_usage_updated = Signal(dict)
    """Usage so far: ``{"run": Usage dict, "thread": Usage dict, "model": str, "call": Usage dict}``."""

    sig_todos_changed = Signal(list)
    """The whole plan after a change (``todos_progress``): a list of ``{"id", "content", "status"}``."""

    sig_interrupt_raised = Signal(dict)
    """The run suspended on a question: ``{"id", "kind", "call_id", "tool", "reason"}``."""

    sig_interrupt_answered = Signal(dict)
    """A pending question got its decision: ``{"id", "kind", "decision"}``."""

    sig_documents_reported = Signal(dict)
    """Instruction files or skills were read: the ``documents_reported`` event's data."""

    sig_artifact_written = Signal(dict)
    """An artifact was written: the ``artifact_written`` event's data."""

    sig_budget_exceeded = Signal(dict)
    """A budget stopped the run: ``budget_exceeded`` data (field, spent, limit)."""

    sig_budget_held = Signal(dict)
    """A budget hold asks the user: ``budget_hold`` data."""

    sig_task_started = Signal(dict)
    """A sub-agent task was launched from this thread (D5): ``task_started`` data ``{"task_id", "agent",
    "background", "child_thread"}``."""

    sig_task_progressed = Signal(dict)
    """A task of this thread moved on (live ``task_progress``): ``{"task_id", "agent", "status",
    "description", "last_tool", "tokens", "cost_usd", "elapsed", "child_thread"}``."""

    sig_task_settled = Signal(dict)
    """A task of this thread settled: ``task_settled`` data ``{"task_id", "agent", "status", "usage"}``."""

    sig_context_measured = Signal(dict)
    """The size of the request a model call just sent (live ``context_measured``, C9): ``{"tokens",
    "trigger", "window", "messages", "parts": {"system_prompt", "messages", "tool_results",
    "tool_schemas"}}``."""

    sig_context_warned = Signal(dict)
    """The thread's context nears its compaction trigger for the first time (live ``context_warning``,
    C7): ``{"tokens", "trigger", "text"}``."""

    sig_compression_applied = Signal(dict)
    """The thread's history was compressed (``compression_applied``, C6): ``{"compression", "trigger",
    "tokens_before", "tokens_after", "strategies", "note"?}``."""

    sig_status_changed = Signal(str)
    """The thread's run status: running, done, failed, aborted, interrupted."""

    sig_thread_attached = Signal(str)
    """The bridge now follows this thread (its durable events replay next): panels clear themselves."""

    sig_thread_loaded = Signal(dict)
    """A thread was (re)opened: ``{"thread_id", "messages", "first_index", "message_count", "pending",
    "status", "usage", "model", "error"}`` from the committed state, after its durable events were
    replayed. ``messages`` are the newest turns only (G13): stored messages ``first_index`` on, of
    ``message_count``."""

    # Events from another thread (should one ever arrive there) cross to the GUI thread through this
    # queued signal; events on the GUI thread are dispatched directly.
    _forward = Signal(object)

    def __init__(self, session: Session | None = None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._session: Session | None = None
        self._unsubscribe: Callable[[], None] | None = None
        self._text: list[str] = []
        self._output: dict[str, list[Any]] = {}  # call id -> [texts, skipped] gathered for sig_command_output
        self._pending_results: set[str] = set()
        self._gui_thread = threading.get_ident()
        self.replaying = False
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(TEXT_BATCH_MS)
        self._timer.timeout.connect(self.flush_text)
        self._results_timer = QTimer(self)
        self._results_timer.setSingleShot(True)
        self._results_timer.setInterval(0)
        self._results_timer.timeout.connect(self._emit_committed_results)
        self._forward.connect(self._dispatch)
        if session is not None:
            self.attach(session)

    @property
    def session(self) -> Session | None:
        return self._session

    def attach(self, session: Session | None) -> None:
        """Follow ``session`` (None: follow nothing): replay its thread's durable events, then live ones."""
        self.detach()
        self._session = session
        if session is None:
            return
        self.sig_thread_attached.emit(session.thread_id)
        self.replaying = True
        try:
            self._unsubscribe = session.subscribe(self._on_event, replay=True, recent=REPLAY_RECENT)
        finally:
            self.replaying = False
        self.emit_thread_loaded()

    def reload(self) -> None:
        """Re-attach to the same session (after ``switch_thread``/``new_thread``)."""
        self.attach(self._session)

    def detach(self) -> None:
        self.flush_text()
        if self._unsubscribe is not None:
            try:
                self._unsubscribe()
            except Exception:  # noqa: BLE001 - unsubscribing twice is harmless
                log.debug("unsubscribe failed", exc_info=True)
        self._unsubscribe = None
        self._pending_results.clear()

    def emit_thread_loaded(self) -> None:
        """Tell panels the current thread's committed state (messages, pending questions, usage)."""
        s = self._session
        if s is None:
            return
        try:
            usage = s.usage.to_dict()
        except Exception:  # noqa: BLE001 - a thread deleted under us
            usage = {}
        page = s.history_tail(TAIL_TURNS, limit=TAIL_MESSAGES, at_least=TAIL_AT_LEAST)  # G13: not the history
        self.sig_thread_loaded.emit(
            {
                "thread_id": s.thread_id,
                "messages": list(page.messages),
                "first_index": page.start,
                "message_count": page.total,
                "pending": list(s.pending),
                "status": s.status,
                "usage": usage,
                "model": s.model_name,
                "error": s.last_error(),
            }
        )

    # -- events ---------------------------------------------------------------------------------------
    def _on_event(self, event: Event) -> None:
        if threading.get_ident() == self._gui_thread:
            self._dispatch(event)
        else:
            self._forward.emit(event)

    @Slot(object)
    def _dispatch(self, event: Event) -> None:
        t = event.type
        if t == "command_output":  # E6: like streamed text, gathered and handed on every ~30 ms
            d = event.data
            entry = self._output.setdefault(str(d.get("call_id") or ""), [[], 0])
            entry[0].append(str(d.get("text") or ""))
            entry[1] += int(d.get("skipped") or 0)
            if not self._timer.isActive():
                self._timer.start()
            return
        if t == "model_delta":
            text = event.data.get("text") or ""
            if text:
                self._text.append(text)
                if not self._timer.isActive():
                    self._timer.start()
            return
        # Anything else comes after the text streamed so far: hand that over first, in order.
        self.flush_text()
        self.sig_event_received.emit(event)
        if self.replaying:
            return
        d = event.data
        if t == "step_started":
            self._schedule_results()
            self.sig_step_started.emit(int(event.step))
        elif t == "run_started":
            self.sig_run_started.emit(event.run_id)
            self.sig_status_changed.emit("running")
        elif t == "run_finished":
            self._emit_committed_results()
            self.sig_run_finished.emit(dict(d))
            self.sig_status_changed.emit(str(d.get("status", "")))
        elif t == "run_error":
            self.sig_run_failed.emit(str(d.get("error", "")))
        elif t == "tool_call_started":
            self.sig_tool_started.emit(dict(d))
        elif t == "tool_call_finished":
            cid = d.get("call_id")
            if cid:
                self._pending_results.add(str(cid))
            self.sig_tool_finished.emit(dict(d))
        elif t == "usage_updated":
            self.sig_usage_updated.emit(dict(d))
        elif t == "todos_progress":
            self.sig_todos_changed.emit(list(d.get("todos") or d.get("items") or []))
        elif t == "interrupt_raised":
            self.sig_interrupt_raised.emit(dict(d))
        elif t == "interrupt_answered":
            self.sig_interrupt_answered.emit(dict(d))
        elif t == "documents_reported":
            self.sig_documents_reported.emit(dict(d))
        elif t == "artifact_written":
            self.sig_artifact_written.emit(dict(d))
        elif t == "budget_exceeded":
            self.sig_budget_exceeded.emit(dict(d))
        elif t == "budget_hold":
            self.sig_budget_held.emit(dict(d))
        elif t == "task_started":
            self.sig_task_started.emit(dict(d))
        elif t == "task_progress":
            self.sig_task_progressed.emit(dict(d))
        elif t == "task_settled":
            self.sig_task_settled.emit(dict(d))
        elif t == "context_measured":
            self.sig_context_measured.emit(dict(d))
        elif t == "context_warning":
            self.sig_context_warned.emit(dict(d))
        elif t == "compression_applied":
            self.sig_compression_applied.emit(dict(d))

    @Slot()
    def flush_text(self) -> None:
        """Hand the gathered streamed text (and commands' output) to the view now."""
        self._timer.stop()
        if self._output:
            gathered, self._output = self._output, {}
            for call_id, (texts, skipped) in gathered.items():
                text = "".join(texts)
                if len(text) > COMMAND_BATCH_CHARS:
                    skipped += len(text) - COMMAND_BATCH_CHARS
                    text = text[-COMMAND_BATCH_CHARS:]
                self.sig_command_output.emit({"call_id": call_id, "text": text, "skipped": skipped})
        if self._text:
            text = "".join(self._text)
            self._text.clear()
            self.sig_text_streamed.emit(text)

    def _schedule_results(self) -> None:
        """Read the results on a later turn of the loop: a step boundary already does a lot on this
        thread (the engine's checkpoint, the transcript's new rows), and a stall is the sum of a turn."""
        if self._pending_results and not self._results_timer.isActive():
            self._results_timer.start()

    @Slot()
    def _emit_committed_results(self) -> None:
        """Tool results are not in the events (durable events carry no content, M8): once a step is
        committed, read the finished calls' results from the thread's messages."""
        self._results_timer.stop()
        if not self._pending_results or self._session is None:
            return
        wanted = set(self._pending_results)
        found: dict[str, dict[str, Any]] = {}
        try:  # G13: the newest messages only (the results follow their step's call), never the history
            page = self._session.history_tail(None, limit=2 * len(wanted) + 16)
            if not {m.tool_call_id for m in page.messages if m.role == "tool"} >= wanted and not page.at_start:
                page = self._session.history_tail(None, limit=max(400, 8 * len(wanted)))
            messages = page.messages
        except Exception:  # noqa: BLE001 - the store is gone (window closing)
            log.debug("could not read committed messages", exc_info=True)
            return
        for m in reversed(messages):
            if m.role == "tool" and m.tool_call_id in wanted and m.tool_call_id not in found:
                found[m.tool_call_id] = {"status": m.meta.get("status", "ok"), "content": m.content}
                if len(found) == len(wanted):
                    break
        self._pending_results -= set(found)
        if found:
            self.sig_tool_results_committed.emit(found)


__all__ = ["COMMAND_BATCH_CHARS", "Bridge", "TEXT_BATCH_MS"]
