"""The agent and its run loop (R1–R6, M1–M10).

``Agent`` is the built, checked stack: model, instructions, middleware, tools. ``Engine`` runs it on
threads kept in a ``Store``: ``run`` a user turn, ``resume`` a suspended run with decisions, ``recover``
a step that failed or was in flight at a crash, ``stop`` a run in flight.

The engine's parts live next to it: the run in flight (``_Runtime``, ``CURRENT_RUN``) in runtime.py,
one model call in model_calls.py, the tool calls and their journal in tool_calls.py, what a crash left
— closing cut-off runs, recovering a step — in recovery.py (all mixins of ``Engine``), the claim
heartbeat in claims.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from workbench.engine.claims import _Heartbeat
from workbench.engine.events import Event
from workbench.engine.frozen import freeze
from workbench.engine.messages import Message, clean_text
from workbench.engine.middleware import AgentMiddleware, Block, HookContext, Question, RunResult, Suspend, overrides
from workbench.engine.model_calls import ModelCalls
from workbench.engine.recovery import Recovery
from workbench.engine.models.base import Model
from workbench.engine.runtime import CURRENT_RUN, MESSAGES, _active, _last_answer, _Runtime
from workbench.engine.store import Claim, RunRecord, Store
from workbench.engine.tool_calls import _UNKNOWN, ToolCalls, _unique_ids, check_bound
from workbench.engine.tools import Fatal, Tool, ToolOutcome, short_json
from workbench.engine.usage import Usage
from workbench.errors import BuildError, ModelError, RunError, ThreadBusyError, WorkbenchError
from workbench.redact import scrub

log = logging.getLogger(__name__)

# What the rest of the project (and its tests) import from here; CURRENT_RUN and MESSAGES live in runtime.py.
__all__ = ["CURRENT_RUN", "MESSAGES", "Agent", "Engine", "EventListener"]

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
    max_steps: int | None = 200  # a bare agent's backstop; a Session's stack holds at its step budget (B5)
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


class Engine(Recovery, ModelCalls, ToolCalls):
    """Runs an ``Agent`` on threads kept in a ``Store``; publishes events to listeners."""

    def __init__(self, agent: Agent, store: Store) -> None:
        self.agent = agent
        self.store = store
        self._listeners: list[EventListener] = []
        self._active: dict[str, _Runtime] = {}
        self._held: dict[str, Claim] = {}  # R7: the claims of this engine's runs, by thread
        self._token_cache: dict[str, int] = {}
        from workbench.engine.prompt_log import PromptLog

        self.prompt_log: PromptLog | None = PromptLog(store)  # V1: every call can be rebuilt afterwards

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
        next_seq = self._close_cut_off(thread_id, cp)
        if next_seq is not None:
            cp = self.store.latest_checkpoint(thread_id)
        state = self._initial_state(cp.state if cp else None)
        rt = _Runtime(self, thread_id, uuid.uuid4().hex[:12], state, 0, input)
        if next_seq is not None:
            rt.next_seq = next_seq  # the cut-off runs' closing events took the numbers before it
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
        # R3/Q: an answer that names the question it was given for (its fingerprint, as the CLI and the
        # window send) answers only that question: read here, under the claim, so a question another
        # process asked meanwhile under the same id (providers reuse call ids) is refused, not answered.
        bound = {k: str(d.pop("fingerprint")) for k, d in normalized.items() if d.get("fingerprint") is not None}
        normalized = {k: {f: v for f, v in d.items() if f != "fingerprint"} for k, d in normalized.items()}
        check_bound(questions, normalized, bound)
        unknown = set(normalized) - {q.id for q in questions}
        if unknown:
            raise RunError(f"no pending question with id {', '.join(sorted(unknown))} on thread {thread_id}")
        missing = [q.id for q in questions if q.id not in normalized]
        if missing:
            raise RunError(f"a decision is needed for every pending question; missing: {', '.join(missing)}")
        record = self.store.run(cp.run_id)
        rt = _Runtime(self, thread_id, cp.run_id, self._initial_state(cp.state), cp.step, record.input if record else "")
        rt.started = record.started if record else time.time()
        rt.run_usage = Usage.total(u for _, u in self.store.usage_calls(thread_id, cp.run_id))
        rt.thread_usage = self.store.thread_usage(thread_id)
        rt.turn_snapshot = dict(cp.pending.get("turn_snapshot", {}))
        rt.answers = normalized
        # Inside the guard: the thread counts as busy from here on, and the events below are stored
        # (with the next checkpoint) even when a decision hook fails.
        return await self._guard(rt, self._continue(rt, cp.pending, questions))

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

    def post_event(self, thread_id: str, type: str, **data: Any) -> Event | None:
        """An event about a thread from outside its run (a background task settling, D7).

        While this engine runs the thread, it goes with the run (a durable one is numbered in the run's
        sequence and stored with its next checkpoint, R8). Otherwise a live one is published and a
        durable one stored now — unless another process holds the thread (its run numbers the events:
        storing one beside it would break its sequence), in which case it is only published."""
        rt = self._active.get(thread_id)
        if rt is not None:
            return rt.emit(type, **data)
        event = Event(type, thread_id, "", 0, data)
        if event.durable and thread_id not in self.store.active_threads and self.store.holder(thread_id) is None:
            if self.store.thread(thread_id) is None:
                # Deleted meanwhile (from another process, D10: a task settling after its parent thread was
                # deleted): nothing is stored on a thread that is gone.
                return None
            event = self.store.append_event(event)
        return self._publish(event)

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
        usage = rt.run_usage + Usage.total(u for _, u in rt.calls)
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
            if self.agent.max_steps is not None and rt.step >= self.agent.max_steps:
                # B5: a limit, not an error: the run stops aborted with its reason, its work kept
                limit = self.agent.max_steps
                return await self._finish(rt, "aborted", error=f"the run reached the step limit ({limit} steps)")
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
            # A message whose one call changes nothing outside the run (issue 9: the usual step, an ls or a
            # read) is committed at the step's end, or once the call has run LAZY_COMMIT_SECONDS: a crash
            # before then loses the step in flight, as one in the model's stream does (R1), and the model
            # is asked again; a crash after it loses nothing more than for any other call.
            commit = functools.partial(self._checkpoint, rt, "running", {"phase": "tools"})
            if len(message.tool_calls) == 1 and self._only_reads(message.tool_calls):
                done = await self._run_tools(rt, message.tool_calls, {}, {}, late_commit=commit)
            else:
                commit()
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


    async def _suspend(self, rt: _Runtime, pending: dict[str, Any]) -> RunResult:
        questions = [Question.from_dict(q) for q in pending["questions"]]
        usage = rt.run_usage + Usage.total(u for _, u in rt.calls)
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
        usage = rt.run_usage + Usage.total(u for _, u in rt.calls)
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
