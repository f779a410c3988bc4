"""The run in flight (R1–R10): ``_Runtime`` holds one run's ids, working state, usage, questions and
answers, and stages its events; ``CURRENT_RUN`` names it to code running inside it (a tool, a backend).

Also the small reads of a run's history the engine's entry points make, and ``_active``, which names
the hook running now around every hook and tool call (M3).
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from workbench.engine.events import ENVELOPE, Event
from workbench.engine.frozen import ACTIVE_HOOK, freeze
from workbench.engine.frozen import append as frozen_append
from workbench.engine.messages import Message
from workbench.engine.middleware import Invocation, Question, Suspend
from workbench.engine.store import Claim
from workbench.engine.tools import ToolOutcome
from workbench.engine.usage import Usage
from workbench.errors import RunError

if TYPE_CHECKING:
    from workbench.engine.agent import Engine

MESSAGES = "messages"
CURRENT_RUN: contextvars.ContextVar[_Runtime | None] = contextvars.ContextVar("workbench_current_run", default=None)


class _Runtime:
    """One run in flight: ids, the working state, usage, questions and answers."""

    def __init__(self, engine: Engine, thread_id: str, run_id: str, state: dict[str, Any], step: int, input: str) -> None:
        self.engine = engine
        self.agent = engine.agent
        self.thread_id = thread_id
        self.run_id = run_id
        self.state = state
        self.step = step
        self.input = input
        self.started = time.time()
        self.answers: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, Usage]] = []  # model calls of the step in flight, not yet committed
        self.run_usage = Usage()
        self.thread_usage = Usage()
        self._pieces: list[str] = []  # the streamed answer so far (``partial``)
        self.stop_requested = False
        self.model_task: asyncio.Task[Any] | None = None
        self.turn_snapshot: dict[str, Any] = {}
        self._parsed: tuple[list[Any], list[Message]] | None = None
        self.next_seq: int | None = None
        self.unsaved_events: list[Event] = []
        self.tool_tasks: list[asyncio.Task[Any]] = []  # the calls in flight, cancelled by stop()
        self.outcomes: dict[str, ToolOutcome] | None = None  # finished calls of the message in flight
        self._view: tuple[dict[str, Any], Mapping[str, Any]] | None = None
        self.claim: Claim | None = engine._held.get(thread_id)  # R7: every write checks it is still ours
        self.invocation = Invocation()  # what hooks see of this runtime as a cache key (M3, I2)
        self.prompt_parts: list[Any] = []  # V1: the labelled parts of the last system prompt built

    @property
    def backend(self) -> Any:
        return self.agent.backend

    def state_view(self) -> Mapping[str, Any]:
        # M3: a read-only view; the values in it are frozen as they enter the state (write_state,
        # append, _initial_state), so a read costs nothing however long the history is.
        view = self._view
        if view is None or view[0] is not self.state:
            view = self._view = (self.state, MappingProxyType(self.state))
        return view[1]

    def usage_view(self) -> dict[str, Usage]:
        if not self.calls:  # between a checkpoint and the next call (budget checks ask every step)
            return {"run": self.run_usage, "thread": self.thread_usage}
        pending = Usage.total(u for _, u in self.calls)
        return {"run": self.run_usage + pending, "thread": self.thread_usage + pending}

    def write_state(self, key: str, value: Any) -> None:
        self.state[key] = freeze(value, key)

    def emit(self, type: str, **data: Any) -> Event:
        """Publish an event now; a durable one is numbered now and stored with the next checkpoint."""
        return self.engine._publish(self.stage(type, **data))

    def stage(self, type: str, **data: Any) -> Event:
        """An event numbered and queued for the next checkpoint, not published yet (R8: a run's closing
        events are published once the transaction that stores them committed)."""
        clash = ENVELOPE.intersection(data)
        if clash:  # would be hidden behind the envelope in --json lines and to_dict()
            raise RunError(f"event {type!r} uses reserved field names: {', '.join(sorted(clash))}")
        event = Event(type, self.thread_id, self.run_id, self.step, data)
        if event.durable:
            if self.next_seq is None:
                # R8: numbered from the count read inside the claim's transaction; each checkpoint
                # verifies, inside its own, that the numbers continue the stored sequence.
                self.next_seq = self.claim.next_event_seq if self.claim else \
                    self.engine.store.next_event_seq(self.thread_id)
            event = Event(type, self.thread_id, self.run_id, self.step, data, event.time, self.next_seq)
            self.next_seq += 1
            self.unsaved_events.append(event)
        return event

    @property
    def partial(self) -> str:
        """The text streamed so far by the model call in flight (R6: a stopped run keeps it)."""
        if len(self._pieces) > 1:
            self._pieces = ["".join(self._pieces)]
        return self._pieces[0] if self._pieces else ""

    @partial.setter
    def partial(self, text: str) -> None:
        self._pieces = [text] if text else []

    def add_partial(self, text: str) -> None:
        """One streamed piece: kept as a piece, joined when read — ``partial += text`` on an attribute
        copied the whole answer per chunk (8 MB in 80,000 chunks took 130 s, a review found)."""
        self._pieces.append(text)

    def take_events(self) -> list[Event]:
        events, self.unsaved_events = self.unsaved_events, []
        return events

    def ask(self, kind: str, payload: dict[str, Any], key: str) -> Any:
        if key in self.answers:
            return self.answers[key]
        raise Suspend(Question(id=key, kind=kind, payload=payload))

    def messages(self) -> list[Message]:
        # The stored dicts are the truth; the parsed list is cached because it is rebuilt every step.
        stored = self.state[MESSAGES]
        cache = self._parsed
        if cache is None or cache[0] is not stored or len(cache[1]) > len(stored):
            cache = (stored, [])
        parsed = cache[1]
        parsed.extend(Message.from_dict(m) for m in stored[len(parsed):])
        self._parsed = cache
        return list(parsed)

    def append(self, message: Message) -> None:
        frozen_append(self.state[MESSAGES], message.cleaned().to_dict(), MESSAGES)  # R10: always storable


class _active:  # noqa: N801 - used like a function: ``with _active(name):``
    """Name the hook running now (M3: a read-only state error names it); nested wrappers stack.
    A class, not @contextmanager: it runs around every hook call (a third of the cost)."""

    __slots__ = ("name", "token")

    def __init__(self, name: str) -> None:
        self.name = name

    def __enter__(self) -> None:
        self.token = ACTIVE_HOOK.set(self.name)

    def __exit__(self, *exc: object) -> None:
        ACTIVE_HOOK.reset(self.token)


def _last_answer(rt: _Runtime) -> str:
    """The newest assistant text of this run (what a stopped run keeps as its partial answer)."""
    for m in reversed(rt.state[MESSAGES]):
        if m.get("role") == "user":
            break
        if m.get("role") == "assistant" and m.get("content"):
            return str(m["content"])
    return ""


def unanswered_calls(messages: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The tool calls (as stored) of the last assistant message in ``messages`` that no tool result after
    it answers: what a run cut off between a step's calls and their results left without one."""
    last = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].get("role") == "assistant"), None)
    if last is None:
        return []
    answered = {m.get("tool_call_id") for m in messages[last + 1:] if m.get("role") == "tool"}
    return [c for c in messages[last].get("tool_calls") or () if c.get("id") not in answered]


def _blocked(state: Mapping[str, Any], run_id: str) -> bool:
    """Whether the run ended with its answer withheld by after_agent (the last message says so)."""
    messages = state.get(MESSAGES) or []
    last = messages[-1] if messages else {}
    meta = last.get("meta") or {}
    return last.get("role") == "assistant" and bool(meta.get("blocked")) and meta.get("run", run_id) == run_id


def _has_turn(rt: _Runtime) -> bool:
    """Whether the run's user message is in the history (its first checkpoint was written)."""
    for m in reversed(rt.state[MESSAGES]):
        if m.get("role") == "user":
            meta = m.get("meta") or {}
            return "run" not in meta or meta["run"] == rt.run_id  # no run id: an older store, assume so
    return False
