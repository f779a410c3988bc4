"""Recovery (R1, R9, E4): what a crash or a failure left of a thread's runs, a mixin of ``Engine``.

``_close_cut_off`` ends, before a new turn, the runs whose process died in flight (their calls settled,
never run again); ``_recover`` goes on with a step that failed or was in flight at a crash
(``Engine.recover``); ``_recover_tools`` re-runs only the calls of that step that neither finished nor
may have had their effect; ``_end_cut_off_calls`` lets each middleware end what its cut-off calls left
running (the shell tool's processes) before the model or the person is told.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from workbench.engine.middleware import HookContext, RunResult
from workbench.engine.runtime import MESSAGES, _blocked, _has_turn, _Runtime, unanswered_calls
from workbench.engine.store import Checkpoint, RunRecord, Store
from workbench.engine.task_store import TaskRecord, settle_cut_off
from workbench.engine.tool_calls import _UNKNOWN
from workbench.engine.tools import ToolOutcome
from workbench.engine.usage import Usage
from workbench.errors import RunError

if TYPE_CHECKING:
    from workbench.engine.agent import Agent
    from workbench.engine.messages import ToolCall

log = logging.getLogger(__name__)

CUT_OFF = "the process ended while this run was in flight"
"""The error of a run whose process died mid-run, closed when the next turn starts (R9)."""


def _task_settled(task: TaskRecord) -> dict[str, Any]:
    """A ``task_settled`` event's data (as the task runner publishes it)."""
    return {"task_id": task.id, "agent": task.agent, "status": task.status, "usage": task.usage.to_dict()}


class Recovery:
    """The engine's recovery, over its store and its run loop (``Engine`` supplies both)."""

    agent: Agent
    store: Store

    if TYPE_CHECKING:
        def _initial_state(self, stored: Mapping[str, Any] | None) -> dict[str, Any]: ...

        def _check_idle(self, thread_id: str) -> None: ...

        async def _guard(self, rt: _Runtime, body: Any) -> RunResult: ...

        async def _start(self, rt: _Runtime) -> RunResult: ...

        async def _steps(self, rt: _Runtime) -> RunResult: ...

        def _checkpoint(self, rt: _Runtime, status: str, pending: dict[str, Any] | None = None,
                        record: RunRecord | None = None) -> None: ...

        def _replay_journal(self, rt: _Runtime, completed: dict[str, ToolOutcome], *, unknown: str | None,
                            run_id: str | None = None, step: int | None = None) -> None: ...

        def _settle_calls(self, rt: _Runtime, status: str, why: str, pending: Mapping[str, Any] | None = None,
                          emit: bool = True) -> None: ...

        async def _run_tools(self, rt: _Runtime, calls: Sequence[ToolCall], completed: dict[str, ToolOutcome],
                             resumed: dict[str, Any]) -> RunResult | None: ...

        def _finish_tool(self, rt: _Runtime, call: ToolCall, outcome: ToolOutcome,
                         edited: bool = False) -> ToolOutcome: ...

    def _close_cut_off(self, thread_id: str, cp: Checkpoint | None) -> int | None:
        """R9, R1, G10: before a new turn, end the runs of this thread whose process died in flight.

        This engine holds the thread's claim (R7), so a run still recorded ``running`` (or a ``running``
        checkpoint) lives nowhere: it was cut off (kill -9, power loss). It ends ``failed`` like any
        failed run — its record, its cut calls' ``tool_call_finished``, ``run_error`` and ``run_finished`` —
        so ``runs``, ``show`` and the reloaded transcript say how it ended (never "running" for good, nor
        the "left waiting" of an earlier suspension). Its last message's calls get their results in the
        same transaction (R8): those that finished keep their journaled results and writes, a call that
        started without finishing says it may have taken effect, the others that they did not run.
        Returns the next event number (None when nothing was cut off)."""
        records = self.store.runs(thread_id, status="running")
        if cp is not None and cp.status == "running" and cp.run_id not in {r.id for r in records}:
            found = self.store.run(cp.run_id)
            if found is None or found.status != "done":  # e.g. a recover (record still "failed") killed mid-step
                records.append(found or RunRecord(cp.run_id, thread_id, "running", "", "", None, Usage(),
                                                  cp.created, None))
        next_seq: int | None = None
        for record in records:
            own = cp is not None and cp.run_id == record.id and cp.status == "running"
            rt = _Runtime(self, thread_id, record.id, self._initial_state(cp.state if cp else None),
                          cp.step if own and cp is not None else 0, record.input)
            rt.started = record.started
            if next_seq is not None:
                rt.next_seq = next_seq
            usage = Usage.total(u for _, u in self.store.usage_calls(thread_id, record.id))
            closing: list[tuple[str, dict[str, Any]]] = []
            if own and cp is not None:
                before = {cid: ToolOutcome(o["status"], o["content"])
                          for cid, o in (cp.pending.get("completed") or {}).items()}
                completed = dict(before)
                if cp.pending.get("phase") == "tools":
                    self._replay_journal(rt, completed, unknown=_UNKNOWN)
                messages = rt.messages()
                at = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].role == "assistant"), None)
                calls = messages[at].tool_calls if at is not None else ()
                answered = {m.tool_call_id for m in messages[(at or 0) + 1:] if m.role == "tool"}
                for call in calls:
                    outcome = completed.get(call.id)
                    if call.id in answered or call.id in before or \
                            (outcome is not None and outcome.content != _UNKNOWN):
                        continue  # its tool_call_finished is stored already (with its result)
                    closing.append(("tool_call_finished", {"call_id": call.id, "name": call.name,
                                                           "status": outcome.status if outcome else "error"}))
                unanswered = [c.id for c in calls if c.id not in answered]
                self._end_cut_off_calls(rt, unanswered)
                # D5, D7: a foreground sub-agent task a cut call drove died with that process: it ends too
                # (the Tasks board and delete_thread read it right), told with the run's closing events.
                for task in self._settle_cut_off_tasks(thread_id, unanswered):
                    closing.append(("task_settled", _task_settled(task)))
                rt.outcomes = completed
                self._settle_calls(rt, "error", CUT_OFF, emit=False)
            closing.append(("run_error", {"error": CUT_OFF}))
            closing.append(("run_finished", {"status": "failed", "usage": usage.to_dict(), "error": CUT_OFF}))
            ended = RunRecord(record.id, thread_id, "failed", record.input, "", CUT_OFF, usage, record.started,
                              time.time())
            events = [rt.stage(type, **data) for type, data in closing]
            if own:
                # one transaction: the settled message, the run record and its closing events (R8)
                self._checkpoint(rt, "failed", None, ended)
            else:  # cut off before its first checkpoint: nothing of its turn was committed to settle
                self.store.append_events(events, claim=rt.claim.token if rt.claim else None)
                rt.unsaved_events.clear()
                self.store.save_run(ended)
            next_seq = rt.next_seq
            log.info("run %s on thread %s was cut off by its process's end: closed failed", record.id, thread_id)
        return next_seq

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
        rt.run_usage = Usage.total(u for _, u in self.store.usage_calls(thread_id, cp.run_id))
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
        cut: list[str] = []
        for call in last.tool_calls:
            outcome = completed.get(call.id)
            if outcome is not None and call.id not in before and outcome.status == "error" \
                    and outcome.content.startswith("Not finished: the process"):
                self._finish_tool(rt, call, outcome)
                cut.append(call.id)
        self._end_cut_off_calls(rt, cut)
        # D5, D7: a foreground sub-agent task a cut call drove is not run again with it (R9): it ends.
        for task in self._settle_cut_off_tasks(rt.thread_id, cut):
            rt.emit("task_settled", **_task_settled(task))
        done = await self._run_tools(rt, last.tool_calls, completed, {})
        if done is not None:
            return done
        self._checkpoint(rt, "running")
        return await self._steps(rt)

    def _settle_cut_off_tasks(self, thread_id: str, call_ids: Sequence[str]) -> list[TaskRecord]:
        """``settle_cut_off``, and E4 for each task it settles: the sub-agent ran its own calls in the process
        that died — what they left running (a command's children) is ended by the same hooks, on the
        task's thread and run (a review found a foreground sub-agent's command still running after the
        parent was recovered), down through the tasks those calls drove in turn."""
        settled = settle_cut_off(self.store, thread_id, call_ids)
        for task in settled:
            cp = self.store.latest_checkpoint(task.child_thread)
            if cp is None or cp.status != "running":
                continue
            cut = [str(c.get("id")) for c in unanswered_calls(cp.state.get(MESSAGES) or [])]
            self._end_cut_off_calls(SimpleNamespace(thread_id=task.child_thread, run_id=cp.run_id,  # type: ignore[arg-type]
                                                    step=cp.step), cut)
            self._settle_cut_off_tasks(task.child_thread, cut)
        return settled

    def _end_cut_off_calls(self, rt: _Runtime, call_ids: Sequence[str]) -> None:
        """R9, E4: calls the dead process started without finishing are settled, never run again — but what
        they started may still run (a command's children outlive the workbench that was killed). Before
        the model or the person is told, each middleware with an ``on_calls_cut_off(call_ids, ctx)`` hook
        ends what its calls left (the shell tool: the processes carrying the call's marker). A hook the
        middleware owns, so the engine knows nothing of processes; a failing hook is logged, the
        recovery goes on."""
        if not call_ids:
            return
        for mw in self.agent.middleware:
            hook = getattr(mw, "on_calls_cut_off", None)
            if hook is None:
                continue
            try:
                hook(list(call_ids), HookContext(rt, mw))
            except Exception:
                log.exception("%s.on_calls_cut_off failed", mw.name)
