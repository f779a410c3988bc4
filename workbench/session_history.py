"""The ``Session`` facade's paged reads of a thread's history (G13): a long thread is read a page at a
time, never whole.

- ``history_tail(turns, limit)``: the newest turns (a turn starts at a user message), at most ``limit``
  messages — what the window shows first when a thread opens;
- ``history_before(index, limit)``: the page of messages before stored message ``index`` — what the
  transcript reads as the person scrolls up;
- ``history_since(index)``: the messages from ``index`` on (a run's new results);
- ``message_count()``, ``last_event_seq()``, ``usage_by_model(run_id)`` (summed by the store);
- ``replay_events(recent)``: the durable events a late subscriber of a long thread needs (its newest in
  full, before them all but the per-call ones).

A page never begins with a tool result: it starts at the assistant message that asked for the call, so
each page shows its tool calls with their results. Reads go through the store's indexes (the messages'
key, the index on user messages): their cost is the page's, however long the thread.

A mixin of ``workbench.session.Session`` (one facade; split along its seams to keep files short).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from workbench.engine.events import Event
from workbench.engine.messages import Message
from workbench.engine.usage import Usage

if TYPE_CHECKING:
    from workbench.engine.store import Store

#: Durable event types emitted once per model or tool call: a late subscriber gets only the newest of
#: these (``replay_events``); every other type (runs, holds, documents, tasks, …) is replayed whole.
BULK_EVENT_TYPES: tuple[str, ...] = ("model_call_finished", "tool_call_finished")

#: How many of a thread's newest durable events a late subscriber gets in full (``replay_events``).
REPLAY_RECENT = 300

#: How far back a page start moves, at most, to reach the assistant message of the tool results it
#: would begin with (a reply may ask for hundreds of calls, R10).
_BACK_STEP = 64


@dataclass(frozen=True)
class HistoryPage:
    """Committed messages ``start`` to ``end`` of a thread that has ``total``: ``messages[i]`` is stored
    message ``start + i`` (the index the prompt inspector and ``history_before`` take)."""

    start: int
    messages: tuple[Message, ...]
    total: int

    @property
    def end(self) -> int:
        return self.start + len(self.messages)

    @property
    def at_start(self) -> bool:
        """Nothing is stored before this page."""
        return self.start == 0


class HistoryCalls:
    """Paged reads of the session's thread (see the module)."""

    if TYPE_CHECKING:
        store: Store
        thread_id: str

    def message_count(self, thread_id: str | None = None) -> int:
        """How many messages the thread has committed."""
        return self.store.message_count(thread_id or self.thread_id)

    def history_tail(self, turns: int | None = 2, *, limit: int = 400, at_least: int = 0,
                     thread_id: str | None = None) -> HistoryPage:
        """The thread's newest ``turns`` turns (None: no turn boundary), at least ``at_least`` and at most
        ``limit`` messages (moved back past tool results to the message that asked for them)."""
        tid = thread_id or self.thread_id
        total = self.store.message_count(tid)
        start = max(0, total - max(1, limit))
        if turns:
            starts = self.store.turn_starts(tid, total, turns)
            turn_start = starts[0] if len(starts) >= turns else 0
            start = max(start, min(turn_start, total - at_least))
        return self._page(tid, max(0, start), total, total)

    def history_before(self, index: int, *, limit: int = 200, thread_id: str | None = None) -> HistoryPage:
        """The page of at most ``limit`` messages before stored message ``index`` (more when tool results
        at its start need the message that asked for them); empty at the thread's start."""
        tid = thread_id or self.thread_id
        total = self.store.message_count(tid)
        end = max(0, min(index, total))
        return self._page(tid, max(0, end - max(1, limit)), end, total)

    def history_since(self, index: int, *, thread_id: str | None = None) -> HistoryPage:
        """The messages from stored message ``index`` to the newest (as stored, tool results included)."""
        tid = thread_id or self.thread_id
        total = self.store.message_count(tid)
        start = max(0, min(index, total))
        return HistoryPage(start, tuple(Message.from_dict(m) for m in self.store.messages(tid, start, total)), total)

    def _page(self, tid: str, start: int, end: int, total: int) -> HistoryPage:
        raw = self.store.messages(tid, start, end)
        while raw and start > 0 and raw[0].get("role") == "tool":
            earlier = self.store.messages(tid, max(0, start - _BACK_STEP), start)
            cut = len(earlier)
            while cut > 0 and earlier[cut - 1].get("role") == "tool":
                cut -= 1
            if cut > 0:
                cut -= 1  # the assistant message (or whatever came) before the results
            raw = earlier[cut:] + raw
            start -= len(earlier) - cut
        return HistoryPage(start, tuple(Message.from_dict(m) for m in raw), total)

    def usage_by_model(self, run_id: str | None = None, *, thread_id: str | None = None) -> dict[str, Usage]:
        """The thread's usage (or one run's) per model, summed by the store (not a row per call here)."""
        return self.store.usage_by_model(thread_id or self.thread_id, run_id)

    def last_event_seq(self, thread_id: str | None = None) -> int:
        """The number of the thread's newest durable event (0 when it has none)."""
        return self.store.next_event_seq(thread_id or self.thread_id) - 1

    def replay_events(self, recent: int = REPLAY_RECENT, *, thread_id: str | None = None) -> list[Event]:
        """What a late subscriber of the thread is told first: its newest ``recent`` durable events and,
        before them, every event that is not one of ``BULK_EVENT_TYPES`` (run starts and ends, holds,
        documents, todos, artifacts, compressions, tasks), in order."""
        return self.store.recent_events(thread_id or self.thread_id, recent, BULK_EVENT_TYPES)


__all__ = ["BULK_EVENT_TYPES", "REPLAY_RECENT", "HistoryCalls", "HistoryPage"]
