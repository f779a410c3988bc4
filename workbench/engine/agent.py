"""The agent and its run loop (R1–R6, M1–M10).

``Agent`` is the built, checked stack: model, instructions, middleware, tools. ``Engine`` runs it on
threads kept in a ``Store``: ``run`` a user turn, ``resume`` a suspended run with decisions, ``recover``
a step that failed or was in flight at a crash, ``stop`` a run in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import logging
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from workbench.engine.events import ENVELOPE, Event
from workbench.engine.frozen import ACTIVE_HOOK, freeze
from workbench.engine.frozen import append as frozen_append
from workbench.engine.messages import (
    Message,
    ModelDelta,
    ModelRequest,
    ModelResponse,
    ToolCall,
    clean_text,
    edit_note,
)
from workbench.engine.middleware import (
    AgentMiddleware,
    Block,
    HookContext,
    Question,
    RunResult,
    Section,
    Suspend,
    ToolContext,
    overrides,
)
from workbench.engine.models.base import Model
from workbench.engine import store as store_module
from workbench.engine.store import Claim, RunRecord, Store
from workbench.engine.tools import Fatal, NeedsApproval, Tool, ToolOutcome, short_json, validate_call
from workbench.engine.usage import Usage
from workbench.errors import BuildError, ModelError, RunError, ThreadBusyError, WorkbenchError
from workbench.redact import scrub

log = logging.getLogger(__name__)

MESSAGES = "messages"
CURRENT_RUN: contextvars.ContextVar[_Runtime | None] = contextvars.ContextVar("workbench_current_run", default=None)

EventListener = Callable[[Event], None]


@dataclass
class Agent:
    """A checked middleware stack around a model. Building refuses a broken stack (M7, M10, M3)."""

    model: Model
    instructions: str = ""
    middleware: Sequence[AgentMiddleware] = ()
    tools: Sequence[Tool] = ()
    backend: Any = None
    max_prompt_section_tokens: int = 24000
    max_steps: int = 200
    model_settings: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.middleware = tuple(self.middleware)
        self._check_placement()
        self.tool_map: dict[str, Tool] = {}
        owners: dict[str, str] = {}
        for tool in self.tools:
            self._add_tool(tool, "the agent", owners)
        for mw in self.middleware:
            for tool in mw.tools():
                self._add_tool(tool if tool.owner is mw else _owned(tool, mw), mw.name, owners)
        self.state_defaults: dict[str, Any] = {MESSAGES: []}
        writers: dict[str, str] = {}
        for mw in self.middleware:
            for key in mw.writes:
                if key == MESSAGES:
                    raise BuildError(f"{mw.name} declares `writes` on '{MESSAGES}', which only the engine writes")
                if key in writers:
                    raise BuildError(f"state key '{key}' is written by both {writers[key]} and {mw.name}")
                writers[key] = mw.name
            for key, value in mw.state_defaults.items():
                self.state_defaults.setdefault(key, value)
        self._model_wrappers = [m for m in self.middleware if overrides(m, "wrap_model_call")]
        self._tool_wrappers = [m for m in self.middleware if overrides(m, "wrap_tool_call")]

    def _add_tool(self, tool: Tool, source: str, owners: dict[str, str]) -> None:
        if tool.name in self.tool_map:
            raise BuildError(f"tool name '{tool.name}' is offered by both {owners[tool.name]} and {source} (M10)")
        self.tool_map[tool.name] = tool
        owners[tool.name] = source

    def _check_placement(self) -> None:
        for i, mw in enumerate(self.middleware):
            for other_type in mw.runs_outside:
                for j, other in enumerate(self.middleware):
                    if isinstance(other, other_type) and j < i:
                        raise BuildError(
                            f"{mw.name} must run outside {other.name}, but the stack has {other.name} first: "
                            f"register {mw.name} before {other.name} (M7)"
                        )


def _owned(tool: Tool, mw: AgentMiddleware) -> Tool:
    from dataclasses import replace

    return replace(tool, owner=mw)


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
        self.partial = ""
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
        pending = sum((u for _, u in self.calls), Usage())
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


class Engine:
    """Runs an ``Agent`` on threads kept in a ``Store``; publishes events to listeners."""

    def __init__(self, agent: Agent, store: Store) -> None:
        self.agent = agent
        self.store = store
        self._listeners: list[EventListener] = []
        self._active: dict[str, _Runtime] = {}
        self._held: dict[str, Claim] = {}  # R7: the claims of this engine's runs, by thread
        self._token_cache: dict[str, int] = {}

    # -- events ------------------------------------------------------------------------------------
    def subscribe(self, listener: EventListener) -> Callable[[], None]:
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def _publish(self, event: Event) -> Event:
        for listener in list(self._listeners):
            try:
                listener(event)
            except Exception:  # a broken listener must not break the run
                log.exception("event listener failed on %s", event.type)
        return event

    # -- public entry points -------------------------------------------------------------------------
    def is_running(self, thread_id: str) -> bool:
        return thread_id in self._active

    def unsaved_events(self, thread_id: str) -> list[Event]:
        """Durable events of the run in flight on a thread not stored yet (they go with its next checkpoint)."""
        rt = self._active.get(thread_id)
        return list(rt.unsaved_events) if rt is not None else []

    async def run(self, thread_id: str, input: str) -> RunResult:
        """One user turn on a thread (created when missing). Refused while another run holds it (R7)."""
        input = clean_text(input)  # R10: e.g. undecodable argv bytes (lone surrogates) are stored too
        if self.store.thread(thread_id) is None:
            self.store.create_thread(title=_title(input), thread_id=thread_id)
        async with self._claimed(thread_id):
            return await self._run(thread_id, input)

    async def resume(self, thread_id: str, decisions: Mapping[str, Any]) -> RunResult:
        """Continue a run suspended by an interrupt (R2, R3) with a decision for every pending question."""
        async with self._claimed(thread_id):
            return await self._resume(thread_id, decisions)

    async def recover(self, thread_id: str) -> RunResult:
        """Re-run the step that failed, or was in flight at a crash, from the last checkpoint (R2).

        Takes over the claim of a run whose process died; refused while the run lives (R7)."""
        async with self._claimed(thread_id):
            return await self._recover(thread_id)

    @contextlib.asynccontextmanager
    async def _claimed(self, thread_id: str) -> Any:
        """R7: hold the thread in the database while a run lives; released (and heartbeat stopped) at its end.

        Claimed before the thread's checkpoint is read, so what the run starts from is what it writes after."""
        self._check_idle(thread_id)
        claim = self.store.claim(thread_id)
        self._held[thread_id] = claim
        beat = _Heartbeat(self.store, claim)
        try:
            yield claim
        finally:
            beat.stop()
            self._held.pop(thread_id, None)
            try:
                self.store.release(claim)
            except Exception:  # the claim goes stale by itself; the run's result still counts
                log.exception("could not release the claim on thread %s", thread_id)

    async def _run(self, thread_id: str, input: str) -> RunResult:
        cp = self.store.latest_checkpoint(thread_id)
        if cp is not None and cp.status == "interrupted":
            raise RunError(
                f"thread {thread_id} has a run waiting for decisions ({len(cp.pending.get('questions', []))} pending):"
                " resume it first"
            )
        self._check_idle(thread_id)
        state = self._initial_state(cp.state if cp else None)
        rt = _Runtime(self, thread_id, uuid.uuid4().hex[:12], state, 0, input)
        rt.thread_usage = self.store.thread_usage(thread_id)
        if cp is not None and cp.status == "running" and cp.pending.get("phase") == "tools":
            # R9: a new turn after a crash mid-step: the calls that finished keep their journaled results
            # (and writes) when _start settles the cut-off message, never "not finished".
            rt.outcomes = {cid: ToolOutcome(o["status"], o["content"])
                           for cid, o in (cp.pending.get("completed") or {}).items()}
            self._replay_journal(rt, rt.outcomes, unknown=_UNKNOWN, run_id=cp.run_id, step=cp.step)
        info = self.store.thread(thread_id)
        if info is not None and not info.title:
            self.store.rename_thread(thread_id, _title(input))
        return await self._guard(rt, self._start(rt))

    async def _resume(self, thread_id: str, decisions: Mapping[str, Any]) -> RunResult:
        cp = self.store.latest_checkpoint(thread_id)
        if cp is None or cp.status != "interrupted":
            raise RunError(f"thread {thread_id} has no run waiting for decisions")
        self._check_idle(thread_id)
        questions = [Question.from_dict(q) for q in cp.pending.get("questions", [])]
        normalized = {k: _decision(v) for k, v in decisions.items()}
        unknown = set(normalized) - {q.id for q in questions}
        if unknown:
            raise RunError(f"no pending question with id {', '.join(sorted(unknown))} on thread {thread_id}")
        missing = [q.id for q in questions if q.id not in normalized]
        if missing:
            raise RunError(f"a decision is needed for every pending question; missing: {', '.join(missing)}")
        record = self.store.run(cp.run_id)
        rt = _Runtime(self, thread_id, cp.run_id, self._initial_state(cp.state), cp.step, record.input if record else "")
        rt.started = record.started if record else time.time()
        rt.run_usage = sum((u for _, u in self.store.usage_calls(thread_id, cp.run_id)), Usage())
        rt.thread_usage = self.store.thread_usage(thread_id)
        rt.turn_snapshot = dict(cp.pending.get("turn_snapshot", {}))
        rt.answers = normalized
        # Inside the guard: the thread counts as busy from here on, and the events below are stored
        # (with the next checkpoint) even when a decision hook fails.
        return await self._guard(rt, self._continue(rt, cp.pending, questions))

    async def _recover(self, thread_id: str) -> RunResult:
        cp = self.store.latest_checkpoint(thread_id)
        runs = self.store.runs(thread_id)
        newest = runs[-1] if runs else None
        if newest is not None and newest.status == "running" and (cp is None or cp.run_id != newest.id):
            # A crash cut the run off before its first checkpoint: its turn starts again from its input.
            self._check_idle(thread_id)
            rt = _Runtime(self, thread_id, newest.id, self._initial_state(cp.state if cp else None), 0, newest.input)
            rt.started = newest.started
            rt.thread_usage = self.store.thread_usage(thread_id)
            return await self._guard(rt, self._start(rt))
        if cp is None:
            raise RunError(f"thread {thread_id} has nothing to recover")
        record = self.store.run(cp.run_id)
        if cp.status not in ("running", "failed") or (record is not None and record.status == "done"):
            raise RunError(f"thread {thread_id}'s last run ended {record.status if record else cp.status}; nothing to recover")
        if _blocked(cp.state, cp.run_id):
            # The run ended on purpose: a middleware withheld its answer (M9). Re-running the step would
            # send the model a history ending in the withheld answer; a new message starts a fresh turn.
            raise RunError(f"thread {thread_id}'s last run ended on purpose: its answer was blocked "
                           f"({record.error if record and record.error else 'after_agent'}); nothing to recover "
                           "— send a new message instead")
        self._check_idle(thread_id)
        rt = _Runtime(self, thread_id, cp.run_id, self._initial_state(cp.state), cp.step, record.input if record else "")
        rt.started = record.started if record else time.time()
        rt.run_usage = sum((u for _, u in self.store.usage_calls(thread_id, cp.run_id)), Usage())
        rt.thread_usage = self.store.thread_usage(thread_id)
        rt.turn_snapshot = dict(cp.pending.get("turn_snapshot", {}))
        if record is not None and not _has_turn(rt):
            # The run failed before its first checkpoint (in before_agent): its input was never
            # committed. Re-run the turn from its start, before_agent included.
            rt.step = 0
            return await self._guard(rt, self._start(rt))
        if cp.status == "running" and cp.pending.get("phase") == "tools":
            return await self._guard(rt, self._recover_tools(rt, cp.pending))
        # A failed checkpoint written before results were settled (an older store) must not reach the provider.
        self._settle_calls(rt, "error", "the run failed before this call finished", cp.pending, emit=False)
        return await self._guard(rt, self._steps(rt))

    async def _recover_tools(self, rt: _Runtime, pending: Mapping[str, Any]) -> RunResult:
        """R9: the process died while a step's calls ran. The calls that finished keep their journaled
        results (and the state they left); a call that changes things outside and started without
        finishing is not run again (it may have had its effect); only the others run now."""
        completed = {cid: ToolOutcome(o["status"], o["content"]) for cid, o in (pending.get("completed") or {}).items()}
        before = set(completed)
        self._replay_journal(rt, completed, unknown=_UNKNOWN)
        last = rt.messages()[-1]
        for call in last.tool_calls:
            outcome = completed.get(call.id)
            if outcome is not None and call.id not in before and outcome.status == "error" \
                    and outcome.content.startswith("Not finished: the process"):
                self._finish_tool(rt, call, outcome)
        done = await self._run_tools(rt, last.tool_calls, completed, {})
        if done is not None:
            return done
        self._checkpoint(rt, "running")
        return await self._steps(rt)

    def stop(self, thread_id: str) -> bool:
        """Stop the run in flight on a thread: it ends ``aborted`` with its partial answer kept (R6)."""
        rt = self._active.get(thread_id)
        if rt is None:
            return False
        rt.stop_requested = True
        if rt.model_task is not None and not rt.model_task.done():
            rt.model_task.cancel()
        for task in rt.tool_tasks:  # a tool call in flight ends now; its result says it was stopped
            if not task.done():
                task.cancel()
        return True

    # -- the loop ----------------------------------------------------------------------------------------
    def _check_idle(self, thread_id: str) -> None:
        # Also through another Engine on this store: their events and messages would collide.
        if thread_id in self._active or thread_id in self.store.active_threads:
            raise RunError(f"thread {thread_id} already has a run in flight")

    def _initial_state(self, stored: Mapping[str, Any] | None) -> dict[str, Any]:
        state = {k: _copy(v) for k, v in self.agent.state_defaults.items()}
        if stored:
            state.update(stored)
        return {k: freeze(v, k) for k, v in state.items()}  # M3: hooks get read-only values

    async def _guard(self, rt: _Runtime, body: Any) -> RunResult:
        """Run a loop body; every way it can end becomes a RunResult, and the thread stays usable."""
        self._active[rt.thread_id] = rt
        self.store.active_threads.add(rt.thread_id)
        token = CURRENT_RUN.set(rt)
        try:
            return await body
        except asyncio.CancelledError:
            return await self._finish(rt, "aborted", answer=rt.partial, error="the run was cancelled")
        except ThreadBusyError:
            raise  # R7: another process took the thread over; this run may write nothing more
        except Exception as e:
            if getattr(e, "abort_status", None) == "aborted":
                # A hook ended the run on purpose (a budget reached, B2): aborted, partial answer kept.
                return await self._finish(rt, "aborted", answer=rt.partial or _last_answer(rt), error=str(e))
            if not isinstance(e, (WorkbenchError, Fatal)):  # a bug in a middleware or tool
                log.exception("run %s failed", rt.run_id)
                return await self._fail(rt, f"{type(e).__name__}: {e}")
            return await self._fail(rt, str(e))
        finally:
            if rt.unsaved_events:  # an ending that bypassed _finish must not lose its durable events
                try:
                    self.store.append_events(rt.take_events(), claim=rt.claim.token if rt.claim else None)
                except WorkbenchError as e:  # the claim was taken over: its events are not ours to store
                    log.warning("events of run %s not stored: %s", rt.run_id, e)
            CURRENT_RUN.reset(token)
            self._active.pop(rt.thread_id, None)
            self.store.active_threads.discard(rt.thread_id)

    async def _start(self, rt: _Runtime) -> RunResult:
        rt.emit("run_started", input_chars=len(rt.input))
        self.store.save_run(RunRecord(rt.run_id, rt.thread_id, "running", rt.input, "", None, Usage(), rt.started, None))
        rt.turn_snapshot = {k: _copy(rt.state.get(k)) for mw in self.agent.middleware for k in mw.restore_on_block}
        text = rt.input
        for mw in self.agent.middleware:
            if overrides(mw, "before_agent"):
                with _active(mw.name):
                    out = await mw.before_agent(text, HookContext(rt, mw))
                if isinstance(out, Block):
                    return await self._finish(rt, "failed", error=f"{mw.name} blocked the input: {out.reason}")
                if isinstance(out, str):
                    text = out
        # A history saved before results were settled (an older store) must not reach the provider.
        self._settle_calls(rt, "stopped", "the run ended before this call finished", emit=False)
        rt.append(Message.user(text, run=rt.run_id))
        self._checkpoint(rt, "running")
        return await self._steps(rt)

    async def _continue(self, rt: _Runtime, pending: Mapping[str, Any], questions: list[Question]) -> RunResult:
        completed = {cid: ToolOutcome(o["status"], o["content"]) for cid, o in pending.get("completed", {}).items()}
        if pending.get("phase") != "model":
            rt.outcomes = completed  # kept if the run is stopped before the calls run
        for q in questions:
            rt.emit("interrupt_answered", id=q.id, kind=q.kind, decision=rt.answers[q.id]["decision"])
            for mw in self.agent.middleware:
                with _active(mw.name):
                    await mw.on_decision(q, rt.answers[q.id], HookContext(rt, mw))
        if pending.get("phase") == "model":
            rt.step -= 1  # the suspended step re-runs from its model call, now with the answers in
            return await self._steps(rt)
        # phase "tools": the assistant message is committed; run the calls that have no result yet.
        last = rt.messages()[-1]
        by_call = {q.call_id: q for q in questions if q.call_id}
        # R9: running again, committed before the calls run: a crash from here on recovers this step's
        # calls (the answered approvals are asked again), never the suspended checkpoint's questions.
        usage = rt.run_usage + sum((u for _, u in rt.calls), Usage())
        self._checkpoint(rt, "running", {"phase": "tools", "completed": {c: {"status": o.status, "content": o.content}
                                                                         for c, o in completed.items()}},
                         RunRecord(rt.run_id, rt.thread_id, "running", rt.input, "", None, usage, rt.started, None))
        done = await self._run_tools(rt, last.tool_calls, completed, by_call)
        if done is not None:
            return done
        self._checkpoint(rt, "running")
        rt.answers = {}  # the answers were for the suspended step (see _steps)
        return await self._steps(rt)

    async def _steps(self, rt: _Runtime) -> RunResult:
        while True:
            if rt.stop_requested:
                return await self._finish(rt, "aborted", error="stopped by the user")
            if rt.step >= self.agent.max_steps:
                return await self._fail(rt, f"the run reached the step limit ({self.agent.max_steps} steps)")
            rt.step += 1
            rt.partial = ""
            rt.emit("step_started")
            try:
                response = await self._model_step(rt)
            except Suspend as s:
                if rt.stop_requested:
                    return await self._finish(rt, "aborted", error="stopped by the user")
                return await self._suspend(rt, {"phase": "model", "questions": [s.question.to_dict()]})
            except asyncio.CancelledError:
                if not rt.stop_requested:
                    raise
                if rt.partial:
                    rt.append(Message.assistant(rt.partial, partial=True, run=rt.run_id))
                return await self._finish(rt, "aborted", error="stopped by the user")
            except ModelError as e:
                return await self._fail(rt, str(e))
            # R10: model output is data. Stored as it will be answered: text storable as UTF-8, and
            # each call its own id (a later duplicate is renamed here, before anything runs).
            message = response.message.cleaned()
            message = Message(role="assistant", content=message.content, tool_calls=_unique_ids(message.tool_calls),
                              meta={"run": rt.run_id, "model": response.model})
            rt.append(message)
            if rt.stop_requested:
                return await self._finish(rt, "aborted", error="stopped by the user")
            if not message.tool_calls:
                return await self._complete(rt, message.content)
            # R9: the message and its calls are committed before any of them runs: after a crash from
            # here on, recovery replays the finished calls from the journal, never asks the model again.
            self._checkpoint(rt, "running", {"phase": "tools"})
            done = await self._run_tools(rt, message.tool_calls, {}, {})
            if done is not None:
                return done
            self._checkpoint(rt, "running")
            # A resume's answers were for the step that was suspended: a later step asking with the
            # same key (providers may reuse call ids) is asked again, not answered from the old decision.
            rt.answers = {}

    async def _complete(self, rt: _Runtime, answer: str) -> RunResult:
        for mw in reversed(self.agent.middleware):
            if overrides(mw, "after_agent"):
                with _active(mw.name):
                    out = await mw.after_agent(answer, HookContext(rt, mw))
                if isinstance(out, Block):
                    for key, value in rt.turn_snapshot.items():  # M9/T7: restore keys that ask for it
                        owner = next(m for m in self.agent.middleware if key in m.restore_on_block)
                        rt.write_state(key, owner.on_restore(key, value, rt.state.get(key)))
                    # The blocked answer must not be shown nor sent back on the next turn. It is not
                    # committed yet (the step's checkpoint comes with _finish): replaced, not rewritten.
                    history = rt.state[MESSAGES]
                    last = history[-1]
                    if last.get("role") == "assistant":
                        withheld = {**last, "content": f"[answer withheld: {out.reason}]",
                                    "meta": {**(last.get("meta") or {}), "blocked": True}}
                        list.__setitem__(history, -1, freeze(withheld, MESSAGES))
                        rt._parsed = None
                    return await self._finish(rt, "failed", answer="", keep_state=True,
                                              error=f"{mw.name} blocked the output: {out.reason}")
        return await self._finish(rt, "done", answer=answer)

    # -- one model call ----------------------------------------------------------------------------------
    async def _system_prompt(self, rt: _Runtime) -> str:
        cacheable: list[Section] = []
        others: list[Section] = []
        for mw in self.agent.middleware:
            if overrides(mw, "sections"):
                with _active(mw.name):
                    found = await mw.sections(HookContext(rt, mw))
                for s in found:
                    (cacheable if s.cacheable else others).append(s)
        sections = cacheable + others
        limit = self.agent.max_prompt_section_tokens
        sizes = [(s.name, self._tokens(s.text)) for s in sections]
        total = sum(n for _, n in sizes)
        if total > limit:
            biggest = ", ".join(f"{n} ({t} tokens)" for n, t in sorted(sizes, key=lambda x: -x[1])[:5])
            raise RunError(
                f"the prompt sections take {total} tokens, over max_prompt_section_tokens={limit}: {biggest}"
            )
        parts = [self.agent.instructions] if self.agent.instructions else []
        parts.extend(s.text for s in sections if s.text)
        return "\n\n".join(parts)

    def _tokens(self, text: str) -> int:
        n = self._token_cache.get(text)
        if n is None:
            from workbench.engine.tokens import estimate_tokens

            n = estimate_tokens(text)
            if len(self._token_cache) > 256:
                self._token_cache.clear()
            self._token_cache[text] = n
        return n

    async def _model_step(self, rt: _Runtime) -> ModelResponse:
        system = await self._system_prompt(rt)
        if rt.stop_requested:  # R6: stopped while the prompt was built: no call is made (nor billed)
            raise asyncio.CancelledError()
        tools = tuple(t.spec for t in self.agent.tool_map.values())
        request = ModelRequest(system=system, messages=tuple(rt.messages()), tools=tools,
                               settings=dict(self.agent.model_settings))
        chain = self._model_chain(rt)
        return await chain(request)

    def _model_chain(self, rt: _Runtime) -> Callable[[ModelRequest], Any]:
        async def innermost(request: ModelRequest) -> ModelResponse:
            if rt.stop_requested:  # R6: a wrapper calling `next` again after a stop makes no call
                raise asyncio.CancelledError()
            rt.partial = ""  # R6: a cut call's partial answer is its own text, never a discarded retry's
            task = asyncio.ensure_future(self._stream(rt, request))
            rt.model_task = task
            try:
                response = await task
            finally:
                rt.model_task = None
            self._count(rt, response)
            return response

        call = innermost
        for mw in reversed(self.agent._model_wrappers):
            call = _bind_model(mw, call, HookContext(rt, mw))
        return call

    async def _stream(self, rt: _Runtime, request: ModelRequest) -> ModelResponse:
        final: ModelResponse | None = None
        async for item in self.agent.model.stream(request):
            if isinstance(item, ModelDelta):
                if item.text:
                    rt.partial += item.text
                    rt.emit("model_delta", text=clean_text(item.text))  # R10: listeners get storable text
            else:
                final = item
        if final is None:
            raise ModelError(f"model {self.agent.model.name!r} ended its stream without a response")
        return final

    def _count(self, rt: _Runtime, response: ModelResponse) -> None:
        """R5: every call a `next` makes is counted, whatever the wrapper returns."""
        usage = _with_call(response.usage)
        model = response.model or self.agent.model.name
        rt.calls.append((model, usage))
        rt.emit("model_call_finished", model=model, usage=usage.to_dict())
        view = rt.usage_view()
        rt.emit("usage_updated", run_usage=view["run"].to_dict(), thread_usage=view["thread"].to_dict(), model=model,
                call=usage.to_dict())

    # -- tool calls ------------------------------------------------------------------------------------------
    async def _run_tools(
        self,
        rt: _Runtime,
        calls: Sequence[ToolCall],
        completed: dict[str, ToolOutcome],
        resumed: dict[str, Question],
    ) -> RunResult | None:
        """Run a message's calls (R4); append their results in order, or suspend with the questions."""
        locks: dict[str, asyncio.Lock] = {}
        questions: dict[str, Question] = {}
        fatal: list[Exception] = []
        held: set[str] = set()  # locks whose earlier call waits for an answer
        rt.outcomes = completed  # what an abort keeps of this message (see _settle_calls)
        if rt.stop_requested:
            return await self._finish(rt, "aborted", error="stopped by the user")

        async def one(call: ToolCall) -> None:
            tool = self.agent.tool_map.get(call.name)
            name = tool.lock if tool is not None and tool.lock else None
            lock = locks.setdefault(name, asyncio.Lock()) if name else None
            acquired = False
            try:
                if lock is not None:
                    await lock.acquire()
                    acquired = True
                # R4: when an earlier call on this lock waits for the user, this one may still ask (the
                # questions of a message come together) but may not run before it: it runs on resume.
                completed[call.id] = await self._one_tool(rt, call, tool, resumed.get(call.id), name in held)
                self._journal(rt, call, completed[call.id])  # R9: stored the moment it finished
            except _Held:
                pass  # neither a result nor a question until the earlier call is answered
            except Suspend as s:
                questions[call.id] = Question(s.question.id, s.question.kind, s.question.payload, call.id)
                if name:
                    held.add(name)
            except Fatal as e:
                fatal.append(e)
            except asyncio.CancelledError:
                if not rt.stop_requested:
                    raise
                # stop(): this call has no result; _finish says it was stopped
            finally:
                if acquired:
                    assert lock is not None
                    lock.release()

        todo = [c for c in calls if c.id not in completed]
        # Tasks start in message order and asyncio.Lock is fair, so same-lock calls run in order (R4).
        tasks = [asyncio.ensure_future(one(c)) for c in todo]
        rt.tool_tasks = tasks
        try:
            # Wait for every call, even when one fails: none may keep running after the run ended.
            results = await asyncio.gather(*tasks, return_exceptions=True)
        finally:
            rt.tool_tasks = []
        if fatal:
            raise fatal[0]
        for r in results:
            if isinstance(r, BaseException) and not isinstance(r, asyncio.CancelledError):
                raise r
        if rt.stop_requested:  # stopped while the calls ran: no question is asked any more
            return await self._finish(rt, "aborted", error="stopped by the user")
        if any(isinstance(r, asyncio.CancelledError) for r in results):
            raise asyncio.CancelledError()
        if questions:
            ordered = [questions[c.id].to_dict() for c in calls if c.id in questions]
            return await self._suspend(
                rt,
                {
                    "phase": "tools",
                    "questions": ordered,
                    "completed": {cid: {"status": o.status, "content": o.content} for cid, o in completed.items()},
                },
            )
        for call in calls:
            outcome = completed[call.id]
            rt.append(Message.tool(call, outcome.content, status=outcome.status))
        rt.outcomes = None
        return None

    async def _one_tool(self, rt: _Runtime, call: ToolCall, tool: Tool | None, resumed: Question | None,
                        held: bool = False) -> ToolOutcome:
        approved = edited = False
        if resumed is not None and resumed.kind == "tool_approval":
            decision = rt.answers[resumed.id]
            kind = decision["decision"]
            if kind == "reject":
                self._remember_rejection(rt, call)
                message = decision.get("message") or "no reason given"
                return self._finish_tool(rt, call, ToolOutcome("rejected", f"Rejected by the user: {message}. "
                                                              "Do not try this exact call again; ask or do something else."))
            if kind == "respond":
                return self._finish_tool(rt, call, ToolOutcome.ok(str(decision.get("message", ""))))
            if kind == "edit":
                # P6: runs with the person's arguments; the committed assistant message keeps the
                # model's (never rewritten), the result records the edit (see _finish_tool).
                call = ToolCall.parse(call.id, call.name, decision.get("arguments") or {}).cleaned()
                edited = True
            approved = True
        error = validate_call(tool, call, list(self.agent.tool_map))
        rt.emit("tool_call_started", call_id=call.id, name=call.name, arguments=call.arguments or {})
        if error is not None:
            return self._finish_tool(rt, call, ToolOutcome.error(error), edited)
        assert tool is not None
        ctx = ToolContext(rt, None, call, tool, approved)
        chain = self._tool_chain(tool, held)
        try:
            outcome = await chain(call, ctx)
        except (Suspend, Fatal, RunError):  # RunError: a broken contract (M3, M4) fails the run
            raise
        except WorkbenchError as e:
            outcome = ToolOutcome.error(f"Error: {e}")
        if isinstance(outcome, NeedsApproval):
            signature = _signature(call)
            if signature in rt.state.get("_rejected", {}).get(rt.run_id, []):
                # P4: the user rejected this exact call in this run; refuse without asking again.
                return self._finish_tool(rt, call, ToolOutcome(
                    "rejected", "Rejected: the user already rejected this exact call in this run. Do not retry it."),
                    edited)
            raise Suspend(Question(
                id=f"approval-{call.id}",
                kind="tool_approval",
                payload={"tool": call.name, "arguments": call.arguments or {}, "reason": outcome.reason,
                         "rule": outcome.rule},
            ))
        return self._finish_tool(rt, call, outcome, edited)

    def _finish_tool(self, rt: _Runtime, call: ToolCall, outcome: ToolOutcome, edited: bool = False) -> ToolOutcome:
        if edited:  # P6: the event says so (no content); the result's first line says what ran
            rt.emit("tool_call_finished", call_id=call.id, name=call.name, status=outcome.status, edited=True)
            return ToolOutcome(outcome.status, outcome.content + edit_note(call.arguments or {}))
        rt.emit("tool_call_finished", call_id=call.id, name=call.name, status=outcome.status)
        return outcome

    def _remember_rejection(self, rt: _Runtime, call: ToolCall) -> None:
        rejected = dict(rt.state.get("_rejected", {}))
        rejected = {rt.run_id: [*rejected.get(rt.run_id, []), _signature(call)]}  # only this run's matter
        rt.write_state("_rejected", rejected)

    def _tool_chain(self, tool: Tool, held: bool = False) -> Callable[[ToolCall, ToolContext], Any]:
        async def innermost(call: ToolCall, ctx: ToolContext) -> ToolOutcome | NeedsApproval:
            if held:
                raise _Held()
            rt = CURRENT_RUN.get()
            if tool.changes_outside and rt is not None:  # R9: never run twice after a crash (see _recover_tools)
                self.store.journal_start(rt.thread_id, rt.run_id, rt.step, call.id,
                                         claim=rt.claim.token if rt.claim else None)
            try:
                with _active(f"{tool.owner.name} (tool {tool.name})" if tool.owner else f"tool {tool.name}"):
                    result = await tool.func(call.arguments or {}, ctx.bound(tool.owner))
            except (Fatal, Suspend, RunError):
                raise
            except WorkbenchError as e:
                return ToolOutcome.error(f"Error: {e}")
            except Exception as e:  # a tool's bug is the model's error message, not a crash (M5)
                log.exception("tool %s failed", tool.name)
                return ToolOutcome.error(f"Error: {tool.name} failed: {type(e).__name__}: {e}")
            return ToolOutcome.ok(result) if isinstance(result, str) else result

        call = innermost
        for mw in reversed(self.agent._tool_wrappers):
            call = _bind_tool(mw, call)
        return call

    # -- ends ------------------------------------------------------------------------------------------------
    def _checkpoint(self, rt: _Runtime, status: str, pending: dict[str, Any] | None = None,
                    record: RunRecord | None = None) -> None:
        """R1, R8: state, messages, this step's usage, the run record and the events so far in one transaction."""
        pending = dict(pending or {})
        if rt.turn_snapshot:
            pending["turn_snapshot"] = rt.turn_snapshot
        events = list(rt.unsaved_events)
        self.store.save_checkpoint(rt.thread_id, rt.run_id, rt.step, status, rt.state, pending,
                                   calls=rt.calls, run=record, thread_status=status, events=events,
                                   claim=rt.claim.token if rt.claim else None)
        del rt.unsaved_events[:len(events)]  # only once written: a failed checkpoint loses no event
        for _, u in rt.calls:
            rt.run_usage = rt.run_usage + u
            rt.thread_usage = rt.thread_usage + u
        rt.calls = []

    def _close(self, rt: _Runtime, status: str, pending: dict[str, Any] | None, record: RunRecord,
               closing: Sequence[tuple[str, dict[str, Any]]]) -> None:
        """R8: the checkpoint, the run record and the events the run closes with commit as ONE transaction;
        the closing events are published only once stored. If it fails they are withdrawn (the ending
        that follows closes the run instead) and nothing of it landed."""
        mark, seq = len(rt.unsaved_events), rt.next_seq
        staged = [rt.stage(type, **data) for type, data in closing]
        try:
            self._checkpoint(rt, status, pending, record)
        except BaseException:
            del rt.unsaved_events[mark:]
            rt.next_seq = seq
            raise
        for event in staged:
            self._publish(event)

    def _journal(self, rt: _Runtime, call: ToolCall, outcome: ToolOutcome) -> None:
        """R9: a finished call's result, the state its writes left and the events so far, stored now."""
        events = list(rt.unsaved_events)
        self.store.journal_finish(rt.thread_id, rt.run_id, rt.step, call.id, outcome.status, outcome.content,
                                  rt.state, events=events, claim=rt.claim.token if rt.claim else None)
        del rt.unsaved_events[:len(events)]

    def _replay_journal(self, rt: _Runtime, completed: dict[str, ToolOutcome], *, unknown: str | None,
                        run_id: str | None = None, step: int | None = None) -> None:
        """R9: the calls of the step in flight that finished before the run ended keep their results
        and the state they left; with ``unknown``, a call that changes things outside and started but
        never finished gets that as an error result (it may have had its effect: never run twice)."""
        last: dict[str, Any] | None = None
        for entry in self.store.journal(rt.thread_id, run_id or rt.run_id, rt.step if step is None else step):
            if entry.status == "started":
                if unknown is not None and entry.call_id not in completed:
                    completed[entry.call_id] = ToolOutcome("error", unknown)
                continue
            completed[entry.call_id] = ToolOutcome(entry.status, entry.content)  # type: ignore[arg-type]
            last = entry.state
        if last is not None:
            for key, value in last.items():
                rt.state[key] = freeze(value, key)

    def _settle_calls(self, rt: _Runtime, status: str, why: str, pending: Mapping[str, Any] | None = None,
                      emit: bool = True) -> None:
        """Give every call of the last assistant message a result, so the history stays valid.

        A provider rejects a history where an assistant's tool calls are not each followed by a tool
        result. A run that ends between the two (stopped, cancelled, aborted, failed after a resume)
        keeps the results of the calls that ran and says the others did not finish.
        """
        messages = rt.state[MESSAGES]
        last = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].get("role") == "assistant"), None)
        if last is None or not messages[last].get("tool_calls"):
            return
        answered = {m.get("tool_call_id") for m in messages[last + 1:] if m.get("role") == "tool"}
        known = dict(rt.outcomes or {})
        for cid, o in ((pending or {}).get("completed") or {}).items():
            known.setdefault(cid, ToolOutcome(o["status"], o["content"]))
        for raw in messages[last]["tool_calls"]:
            call = ToolCall.from_dict(raw)
            if call.id in answered:
                continue
            outcome = known.get(call.id)
            if outcome is None:
                outcome = ToolOutcome(status, f"Not finished: {why}.")  # type: ignore[arg-type]
                if emit:
                    self._finish_tool(rt, call, outcome)
            rt.append(Message.tool(call, outcome.content, status=outcome.status))
        rt.outcomes = None

    async def _suspend(self, rt: _Runtime, pending: dict[str, Any]) -> RunResult:
        questions = [Question.from_dict(q) for q in pending["questions"]]
        usage = rt.run_usage + sum((u for _, u in rt.calls), Usage())
        record = RunRecord(rt.run_id, rt.thread_id, "interrupted", rt.input, "", None, usage, rt.started, None)
        closing: list[tuple[str, dict[str, Any]]] = [
            ("interrupt_raised", {"id": q.id, "kind": q.kind, "call_id": q.call_id, "tool": q.payload.get("tool"),
                                  "reason": q.payload.get("reason")}) for q in questions]
        closing.append(("run_finished", {"status": "interrupted", "usage": usage.to_dict(), "pending": len(questions)}))
        self._close(rt, "interrupted", pending, record, closing)
        return RunResult("interrupted", "", rt.run_usage, tuple(questions), None, rt.thread_id, rt.run_id)

    async def _fail(self, rt: _Runtime, error: str) -> RunResult:
        error = scrub(error, getattr(self.agent.model, "api_key", None))  # R10: provider bodies echo keys
        rt.emit("run_error", error=error[:500])
        return await self._finish(rt, "failed", error=error)

    async def _finish(self, rt: _Runtime, status: str, answer: str = "", error: str | None = None,
                      keep_state: bool = False) -> RunResult:
        if status == "aborted" and not answer:
            answer = rt.partial
        answer = clean_text(answer)  # R10: a partial answer may end in half a surrogate pair
        if error:  # R10: stored and shown only scrubbed (a hook's or tool's error may quote a key too)
            error = scrub(error, getattr(self.agent.model, "api_key", None))
        ended = "stopped by the user" if status == "aborted" and error == "stopped by the user" else \
            f"the run {'was stopped' if status == 'aborted' else 'failed'}: {error or status}"
        if status == "failed" and not keep_state:
            # Keep the last committed state: recover() re-runs the failed step from there (R2).
            # Before the run's first checkpoint (in before_agent) that is the thread's state before the turn.
            cp = self.store.latest_checkpoint(rt.thread_id)
            same = cp is not None and cp.run_id == rt.run_id
            state = {k: freeze(v, k) for k, v in cp.state.items()} if cp is not None else self._initial_state(None)
            step = cp.step if same else rt.step
            if same and cp.status == "interrupted" and cp.pending.get("phase") == "model":
                step -= 1  # the suspended step never ended: recover() runs it again under its number
            saved_state, saved_step = rt.state, rt.step
            rt.state, rt.step = state, step
            # Failed after a resume, the calls of the committed message may lack results: those that
            # ran before the suspension keep theirs (their writes are in this state), the others did not run.
            # R9: so do the calls of this step that finished (journaled) before it failed.
            rt.outcomes = None
            completed = {cid: ToolOutcome(o["status"], o["content"])
                         for cid, o in ((cp.pending if same else {}).get("completed") or {}).items()}
            if same:
                self._replay_journal(rt, completed, unknown=None)
            self._settle_calls(rt, "error", ended, {"completed": {c: {"status": o.status, "content": o.content}
                                                                   for c, o in completed.items()}})
            ending = "failed"
        else:
            self._settle_calls(rt, "stopped" if status == "aborted" else "error", ended)
            ending = status
        usage = rt.run_usage + sum((u for _, u in rt.calls), Usage())
        record = RunRecord(rt.run_id, rt.thread_id, status, rt.input, answer, error, usage, rt.started, time.time())
        for mw in self.agent.middleware:  # before the closing transaction: events they emit close with it
            if overrides(mw, "on_run_end"):
                try:
                    await mw.on_run_end(status, HookContext(rt, mw))
                except Exception:
                    log.exception("%s.on_run_end failed", mw.name)
        data: dict[str, Any] = {"status": status, "usage": usage.to_dict()}
        if error:
            data["error"] = error[:500]
        try:
            self._close(rt, ending, None, record, [("run_finished", data)])
        finally:
            if status == "failed" and not keep_state:
                rt.state, rt.step = saved_state, saved_step
        return RunResult(status, answer, rt.run_usage, (), error, rt.thread_id, rt.run_id)


_UNKNOWN = ("Not finished: the process running this call stopped before it returned, so it may or may not have "
            "taken effect. Check before trying it again.")


class _Heartbeat:
    """R7: refreshes a run's claim from a thread of its own, so a long model or tool call (or a busy
    event loop) does not make a live run look dead."""

    def __init__(self, store: Store, claim: Claim) -> None:
        import threading

        self._stop = threading.Event()
        self._store, self._claim = store, claim
        self._thread = threading.Thread(target=self._beat, name=f"claim-{claim.thread_id}", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        while not self._stop.wait(store_module.HEARTBEAT_EVERY):
            try:
                if not self._store.heartbeat(self._claim):
                    return  # taken over: the run's next write is refused
            except Exception:  # a busy or closed store: the next beat tries again
                log.debug("claim heartbeat failed", exc_info=True)

    def stop(self) -> None:
        self._stop.set()


class _Held(Suspend):
    """A call that would run while an earlier call on its lock waits for the user (R4): it waits too."""

    def __init__(self) -> None:
        super().__init__(Question(id="", kind="held", payload={}))


def _bind_model(mw: AgentMiddleware, call_next: Any, ctx: HookContext) -> Any:
    async def call(request: ModelRequest) -> ModelResponse:
        with _active(mw.name):
            return await mw.wrap_model_call(request, call_next, ctx)

    return call


def _bind_tool(mw: AgentMiddleware, call_next: Any) -> Any:
    async def call(tool_call: ToolCall, ctx: ToolContext) -> Any:
        with _active(mw.name):
            return await mw.wrap_tool_call(tool_call, ctx.bound(mw), call_next)

    return call


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


def _unique_ids(calls: tuple[ToolCall, ...]) -> tuple[ToolCall, ...]:
    """The calls with unique, non-empty ids (R10): a repeated id gets a suffix, so every call gets its
    own result (and journal entry). Suffixes use [A-Za-z0-9_-], which every provider accepts."""
    seen: set[str] = set()
    out: list[ToolCall] = []
    changed = False
    for i, call in enumerate(calls):
        cid = call.id or f"call_{i}"
        if cid in seen:
            n = 2
            while f"{cid}_{n}" in seen:
                n += 1
            cid = f"{cid}_{n}"
        seen.add(cid)
        if cid != call.id:
            changed = True
            call = ToolCall(cid, call.name, call.arguments, call.raw_arguments)
        out.append(call)
    return tuple(out) if changed else calls


def _with_call(usage: Usage) -> Usage:
    from dataclasses import replace

    return usage if usage.calls else replace(usage, calls=1)


def _last_answer(rt: _Runtime) -> str:
    """The newest assistant text of this run (what a stopped run keeps as its partial answer)."""
    for m in reversed(rt.state[MESSAGES]):
        if m.get("role") == "user":
            break
        if m.get("role") == "assistant" and m.get("content"):
            return str(m["content"])
    return ""


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


def _signature(call: ToolCall) -> str:
    return call.name + ":" + json.dumps(call.arguments, sort_keys=True)


def _decision(value: Any) -> dict[str, Any]:
    """Accept "approve" or {"decision": "approve", ...}; names as in DESIGN P3 and B3."""
    if isinstance(value, str):
        value = {"decision": value}
    if not isinstance(value, Mapping) or "decision" not in value:
        raise RunError(f"a decision must be a string or a mapping with 'decision', got {short_json(value)}")
    d = dict(value)
    aliases = {"yes": "approve", "continue": "approve", "no": "reject", "deny": "reject", "refuse": "reject",
               "stop": "reject"}
    d["decision"] = aliases.get(d["decision"], d["decision"])
    if d["decision"] not in ("approve", "edit", "reject", "respond"):
        raise RunError(f"unknown decision {d['decision']!r}: use approve, edit, reject or respond")
    return d


def _copy(value: Any) -> Any:
    return json.loads(json.dumps(value)) if isinstance(value, (dict, list)) else value


def _title(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else "New thread"
    return line[:60] + ("…" if len(line) > 60 else "")
