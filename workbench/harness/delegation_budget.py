"""The money side of delegation (B1, B2, B4, D8): what each sub-agent task spent and which run it counts
toward, and the envelopes tasks are handed — what is left of this thread's budgets once what running
tasks hold is reserved. A mixin of ``DelegationMiddleware`` (delegation.py, which says what the rules
are), with the state keys it keeps.

A hard limit holds with background tasks running too (B2, B4, D8): before each of the parent's model
calls, when what was counted plus what this thread's unfinished background tasks still hold (the same
reservation a launch counts: ``_hold``) reaches a hard run or session limit, the call waits for those
tasks to settle (``_settle_holders``), their spend is counted, and the budget's check runs again with the
real figures. Interrupting budgets (B3) do not wait; a task whose own ``budget:`` leaves room makes no
call wait. While it waits, a live ``budget_updated`` event carries ``waiting`` (the tasks and why).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from workbench.config import BUDGET_FIELDS, SubagentConfig, SubagentsConfig
from workbench.engine.middleware import HookContext
from workbench.engine.task_store import SETTLED, SqliteTaskStore, TaskRecord, task_spend
from workbench.engine.usage import Usage

if TYPE_CHECKING:
    from workbench.engine.agent import Engine
    from workbench.harness.task_runner import TaskRunner

log = logging.getLogger(__name__)

_USAGE_FIELDS = frozenset(BUDGET_FIELDS) - {"steps"}  # what a task's usage carries (not its counters)
#: How often a wait for background tasks before a model call looks again (at a task's status, and at a
#: Stop): it also wakes as soon as a task it waits for changes.
HOLD_POLL_SECONDS = 0.2
#: How long past its wall-clock limit a running task the parent waits for may take to be expired by its
#: runner before the wait aborts it itself (no one drives it any more).
OVERDUE_GRACE_SECONDS = 30.0

COUNTED = "task_usage_counted"  # {task_id: usage dict already counted toward this thread's runs (B4)}
#: {task_id: run id}: the run a task's spend not yet counted counts toward, when not the run that launched
#: it (``parent_run``): the run whose ``continue_task`` gave it its further turn (B4, D8).
CHARGED = "task_usage_run"


class TaskSpending:
    """Counting tasks' spend and reserving their envelopes (see the module)."""

    if TYPE_CHECKING:
        tasks: SqliteTaskStore
        runner: TaskRunner | None
        sub: SubagentsConfig
        _parent: Engine
        _agents: dict[str, SubagentConfig]
        _engines: dict[str, Engine]
        _engines_lock: threading.Lock

    # -- usage (B4, D8) ----------------------------------------------------------------------------------------
    def _count_usage(self, ctx: HookContext, task: TaskRecord) -> bool:
        """B4: count toward this thread's budgets what the task spent (its own sub-agents' included) that
        is not counted yet, toward the run it is charged to (``_charged_run``). True when it added any."""
        from workbench.harness.budget import record_subagent_usage

        counted = dict(ctx.get(COUNTED) or {})
        before = Usage.from_dict(counted.get(task.id))
        now = self._spend(task)
        delta = _minus(now, before)
        if delta.total_tokens or delta.calls or (delta.cost_usd or 0):
            record_subagent_usage(ctx, delta, run_id=self._charged_run(ctx, task))
            counted[task.id] = now.to_dict()
            ctx.write(COUNTED, counted)
            return True
        return False

    def _count_settled(self, ctx: HookContext) -> bool:
        """B1, B4: before this thread's model call, count every settled task's spend not counted yet — a
        foreground task whose delegation call never returned (its process killed: ``settle_cut_off``
        ended it; or stopped before its result) counts here, once. True when any was added."""
        counted = dict(ctx.get(COUNTED) or {})
        added = False
        for task in self.tasks.tasks(ctx.thread_id):
            if task.status in SETTLED and counted.get(task.id) != task.usage.to_dict():
                added = self._count_usage(ctx, task) or added
        return added

    def _spend(self, task: TaskRecord) -> Usage:
        """Everything the task spent so far: its thread's usage and its own sub-agents' (B4, any depth)."""
        try:
            return task_spend(self.tasks, task)
        except Exception:  # noqa: BLE001 - a thread gone: what its record says
            return task.usage

    def _charged_run(self, ctx: HookContext, task: TaskRecord) -> str:
        """The run a task's spend counts toward (B4): the run that launched it — whichever run is in
        flight when it is counted — or the run whose ``continue_task`` gave it a further turn."""
        return str((ctx.get(CHARGED) or {}).get(task.id) or task.parent_run)

    def continue_for_person(self, task_id: str, instructions: str) -> TaskRecord:
        """D8, B1, D10: the person continues a settled task (the Tasks board's "Continue…",
        ``Session.continue_task``). The further turn is a launch, as the model's ``continue_task`` is: a
        fresh envelope bounded by what is left of the parent thread's budgets now — the task's run (its
        further spend counts toward the run that launched it, B4) and the session — never its old one
        granted again. The person asking is the person who would be asked, so an agent's own ``budget:``
        larger than what is left is cut to what is left rather than asked about; with nothing left of a
        budget the task is not continued (``RunError`` naming the budget and field)."""
        from workbench.errors import RunError

        if self.runner is None:
            raise RunError("delegation is not available in this session (no task runner)")
        task = self.tasks.task(task_id)
        if task is None:
            raise RunError(f"no task {task_id!r} in this workspace")
        if task.status not in SETTLED:
            raise RunError(f"task {task_id} is {task.status}; only a settled task can be continued")
        cfg = self._agents.get(task.agent)
        if cfg is None:
            raise RunError(f"sub-agent {task.agent!r} is not configured in workbench.yaml any more")
        left, scopes = self._left_outside_a_run(task)
        empty = {k: v for k, v in left.items() if v <= 0}
        if empty:
            what = ", ".join(f"the {scopes[k]} budget's {k} ({v:g} left)" for k, v in empty.items())
            raise RunError(f"task {task_id} was not continued: nothing is left of {what}, counting what this "
                           "conversation's unfinished tasks hold. Wait for them to settle, or raise the budget "
                           "in workbench.yaml.")
        envelope = {k: float(v) for k, v in (cfg.budget or {}).items()}
        for name, amount in left.items():
            envelope[name] = min(envelope.get(name, amount), amount)
        if envelope != dict(task.envelope or {}):
            self.tasks.update_task(task.id, envelope=envelope)
            with self._engines_lock:  # its engine was built with the old envelope: the next one gets the new
                self._engines.pop(task.id, None)
        self.runner.continue_task(task.id, instructions)
        return self.tasks.task(task.id) or task

    def _left_outside_a_run(self, task: TaskRecord) -> tuple[dict[str, float], dict[str, str]]:
        """What is left of the parent thread's budgets for ``task``'s further turn, read from the store
        (no run in flight: ``_left``'s figures, for the run the task's spend counts toward), less what the
        thread's tasks hold; and per field the scope of the budget that leaves the least."""
        from workbench.harness.budget import BudgetMiddleware, _round, measure_budgets

        budget = next((m for m in self._parent.agent.middleware if isinstance(m, BudgetMiddleware)), None)
        if budget is None:
            return {}, {}
        store = self._parent.store
        cp = store.latest_checkpoint(task.parent_thread, messages=False)
        state = dict(cp.state) if cp is not None else {}
        run = str((state.get(CHARGED) or {}).get(task.id) or task.parent_run)
        run_usage = Usage.total(u for _, u in store.usage_calls(task.parent_thread, run))
        figures = measure_budgets(budget.limits, run_usage=run_usage,
                                  thread_usage=store.thread_usage(task.parent_thread), state=state, run_id=run)
        left, scopes = _least_left(figures)
        held = self._held_by(task.parent_thread, dict(state.get(COUNTED) or {}), left.keys())
        return {k: _round(max(0.0, v - held.get(k, 0.0))) for k, v in left.items()}, scopes

    # -- D8: envelopes, and what is left once they are reserved ---------------------------------------------
    def _envelope(self, ctx: HookContext, cfg: SubagentConfig, *, approved: bool) -> tuple[dict[str, float], str]:
        """A launch's envelope (D8) and, when it may not launch, why. A configured ``budget:`` is the
        envelope (the launch asked first when it exceeds what is left), with every field the parent's
        budgets cap and it leaves out bounded by what is left of it; without one, what is left — and
        nothing left refuses the launch (an envelope of nothing buys nothing)."""
        left = self._left(ctx) or {}
        if cfg.budget:
            envelope = {k: float(v) for k, v in cfg.budget.items()}
            for name, amount in left.items():
                if name not in envelope:
                    if amount <= 0 and not approved:
                        return {}, _nothing_left({name: amount})
                    if amount > 0:
                        envelope[name] = amount
            return envelope, ""
        empty = {k: v for k, v in left.items() if v <= 0}
        if empty:
            return {}, _nothing_left(empty)
        return dict(left), ""

    def _left(self, ctx: HookContext) -> dict[str, float] | None:
        """What is left for a new envelope of this thread's budgets (run and session scope, B1, D8), per
        field, the smallest over budgets; None without a budget. Each limit less what was spent (counted)
        less what this thread's tasks not yet counted hold (``_held``)."""
        from workbench.harness.budget import _round

        left = _left(ctx)
        if not left or self.runner is None:
            return left
        held = self._held(ctx, left.keys())
        return {k: _round(max(0.0, v - held.get(k, 0.0))) for k, v in left.items()}

    def _held(self, ctx: HookContext, fields: Any) -> dict[str, float]:
        """Per field, what this thread's tasks hold that the parent's counts do not have yet (``_held_by``)."""
        return self._held_by(ctx.thread_id, dict(ctx.get(COUNTED) or {}), fields)

    def _held_by(self, thread_id: str, counted: Mapping[str, Any], fields: Any) -> dict[str, float]:
        """Per field, what ``thread_id``'s tasks hold that its counts (``counted``) do not have yet: a task
        not settled (queued, running, waiting for a decision) the larger of its envelope and its uncounted
        spend — it may spend up to its envelope, and all of it will count toward this thread (B4); a
        settled one its uncounted spend."""
        held: dict[str, float] = {}
        for task in self.tasks.tasks(thread_id):
            for name, hold in self._hold(task, counted, fields).items():
                held[name] = held.get(name, 0.0) + hold
        return held

    def _hold(self, task: TaskRecord, counted: Mapping[str, Any], fields: Any) -> dict[str, float]:
        """Per field (those it holds any of), what one task holds that the counts (``counted``) do not have
        yet: not settled, the larger of its envelope and its uncounted spend; settled, its uncounted spend."""
        from workbench.harness.budget import _usage_field

        done = task.status in SETTLED
        if done and counted.get(task.id) == task.usage.to_dict():
            return {}  # settled and counted: it holds nothing
        spent = _minus(self._spend(task), Usage.from_dict(counted.get(task.id)))
        envelope = dict(task.envelope or {})
        out: dict[str, float] = {}
        for name in fields:
            uncounted = _usage_field(spent, name) if name in _USAGE_FIELDS else 0.0
            hold = uncounted if done else max(uncounted, float(envelope.get(name, 0.0) or 0.0))
            if hold > 0:
                out[name] = hold
        return out

    # -- B2, B4, D8: no model call that what running tasks hold could carry past a hard limit --------------------
    def _hard_holders(self, ctx: HookContext) -> tuple[list[TaskRecord], dict[str, Any]] | None:
        """The unfinished background tasks (queued, running, waiting for a decision) whose holds, with what
        was counted, reach a hard limit of this thread's budgets (run or session scope, not ``interrupt``),
        and the first such limit (``budget``, ``scope``, ``field``, ``spent``, ``held``, ``limit``); None when
        the parent's next model call could not pass a hard limit through them. A run-scope budget counts the
        tasks whose spend counts toward this run (``_charged_run``), a session budget every task."""
        figures = _figures(ctx)
        hard = [f for f in figures or () if not f.get("interrupt")]
        if not hard:
            return None
        unsettled = [t for t in self.tasks.tasks(ctx.thread_id) if t.background and t.status not in SETTLED]
        if not unsettled:
            return None
        counted = dict(ctx.get(COUNTED) or {})
        fields = {name for f in hard for name in (f.get("fields") or {})}
        holds = {t.id: self._hold(t, counted, fields) for t in unsettled}
        waiting: dict[str, TaskRecord] = {}
        first: dict[str, Any] | None = None
        for fig in hard:
            mine = [t for t in unsettled if fig.get("scope") == "session" or self._charged_run(ctx, t) == ctx.run_id]
            left, _scopes = _least_left([fig])
            for name, remaining in left.items():
                holding = [t for t in mine if holds[t.id].get(name, 0.0) > 0]
                held = sum(holds[t.id][name] for t in holding)
                if not holding or remaining - held > 0:
                    continue
                waiting.update((t.id, t) for t in holding)
                if first is None:
                    f = fig["fields"][name]
                    first = {"budget": fig.get("budget"), "scope": fig.get("scope"), "field": name,
                             "spent": float(f["spent"]), "held": held, "limit": float(f["limit"])}
        if first is None:
            return None
        return list(waiting.values()), first

    async def _settle_holders(self, ctx: HookContext) -> bool:
        """B2, B4, D8: before this model call, while what the thread's unfinished background tasks hold could
        carry a hard limit past (``_hard_holders``), wait for them to settle — as ``wait_for_background_tasks``
        waits, bounded by each task's wall-clock limit, and ended by a Stop (the run ends ``aborted``, as a
        stop ends it) — count what they spent (B4, once) and run the budget's check again with the real
        figures: at a limit the run stops (``budget_exceeded``), under it the call goes ahead. A task waiting
        for the person's decision is waited for too (the person answers it from the Tasks board or the
        inbox); once past its own wall-clock limit (``timeout_seconds``: answered, it would expire at once)
        it is aborted (``_end_overdue``). True when any spend was counted here.

        While it waits, a live ``budget_updated`` event carries ``waiting`` (``tasks``, the limit, ``reason``
        in words); one with ``waiting: None`` ends it."""
        if self.runner is None:
            return False
        found = self._hard_holders(ctx)
        if found is None:
            return False
        _recheck(ctx)  # over already with what is counted: the run stops now, with no wait
        counted_any = False
        shown: tuple[tuple[str, str], ...] | None = None
        try:
            while found is not None:
                tasks, reach = found
                ids = tuple((t.id, t.status) for t in tasks)
                if ids != shown:  # say it again when the tasks waited for, or their statuses, change
                    shown = ids
                    self._say_waiting(ctx, tasks, reach)
                if _stop_requested(ctx):
                    raise asyncio.CancelledError()  # R6: as the engine's own model call does after a Stop
                running = [t.id for t in tasks if t.status != "awaiting_decision"]
                if running:
                    await self.runner.wait(running, HOLD_POLL_SECONDS)  # back at once when one settles
                else:
                    await asyncio.sleep(HOLD_POLL_SECONDS)
                if _stop_requested(ctx):
                    raise asyncio.CancelledError()
                await self._end_overdue(tasks)
                if self._count_settled(ctx):
                    counted_any = True
                    _recheck(ctx)  # the real figures: at a hard limit the run stops here
                found = self._hard_holders(ctx)
        finally:
            if shown is not None:
                self._say_waiting(ctx, [], None)
        return counted_any

    async def _end_overdue(self, tasks: Sequence[TaskRecord]) -> None:
        """D7: the wait is bounded by the tasks' wall-clock limits. A task it waits for that waits for a
        decision past its limit is aborted (answered, it would expire at once); one still running
        ``OVERDUE_GRACE_SECONDS`` past it (its runner expires it at the limit: nobody drives it) too."""
        assert self.runner is not None
        now = time.time()
        for task in tasks:
            fresh = self.tasks.task(task.id)
            if fresh is None or fresh.status in SETTLED or not fresh.started:
                continue
            grace = 0.0 if fresh.status == "awaiting_decision" else OVERDUE_GRACE_SECONDS
            if now - fresh.started >= self.sub.timeout_seconds + grace:
                log.info("task %s (%s) is past its %g s limit while its parent waits for it before a model "
                         "call (a hard budget): aborted", task.id, fresh.status, self.sub.timeout_seconds)
                try:
                    await self.runner.abort(task.id)
                except Exception:  # noqa: BLE001 - the wait goes on; Stop still ends it
                    log.warning("task %s: not aborted", task.id, exc_info=True)

    def _say_waiting(self, ctx: HookContext, tasks: Sequence[TaskRecord], reach: Mapping[str, Any] | None) -> None:
        """The live ``budget_updated`` event (the budget's own figures, G11) with ``waiting``: what the run
        waits for before its next model call, and why; ``waiting: None`` when the wait is over."""
        from workbench.harness.budget import BudgetMiddleware

        try:
            bctx = ctx.context_for(BudgetMiddleware)
            figures = bctx.owner.figures(bctx, before_call=True) if bctx is not None and \
                isinstance(bctx.owner, BudgetMiddleware) else []
            waiting = None
            if reach is not None:
                waiting = {"tasks": [t.id for t in tasks], **dict(reach), "reason": _waiting_text(tasks, reach)}
            ctx.emit("budget_updated", budgets=figures, waiting=waiting)
        except Exception:  # noqa: BLE001 - a live display event must never change how the call ends
            log.debug("budget_updated (waiting) not published", exc_info=True)


# -- helpers ------------------------------------------------------------------------------------------------


def _left(ctx: HookContext) -> dict[str, float] | None:
    """What is left of this thread's budgets — run and session scope alike (B1: a session limit bounds
    a sub-agent as a run limit does) — per field, the smallest over budgets, before any task's holding
    (``DelegationMiddleware._left``); None without one. ``steps`` is the run's own (B5)."""
    figures = _figures(ctx)
    if figures is None:
        return None
    return _least_left(figures)[0] or None


def _figures(ctx: HookContext) -> list[dict[str, Any]] | None:
    """Every budget's figures for the run in flight (``measure_budgets``: what the budget enforces, with
    ``scope`` and ``interrupt``); None without a budget."""
    from workbench.harness.budget import BudgetMiddleware, measure_budgets

    bctx = ctx.context_for(BudgetMiddleware)
    if bctx is None or not isinstance(bctx.owner, BudgetMiddleware):
        return None
    usage = ctx.usage
    return measure_budgets(bctx.owner.limits, run_usage=usage["run"], thread_usage=usage["thread"],
                           state=ctx.state, run_id=ctx.run_id)


def _least_left(figures: Sequence[Mapping[str, Any]]) -> tuple[dict[str, float], dict[str, str]]:
    """Per budget field (steps aside: a run's own), the least any budget has left, and that budget's scope."""
    left: dict[str, float] = {}
    scopes: dict[str, str] = {}
    for fig in figures:
        for name, f in (fig.get("fields") or {}).items():
            if name == "steps":
                continue
            remaining = max(0.0, float(f["limit"]) - float(f["spent"]))
            if name not in left or remaining < left[name]:
                left[name], scopes[name] = remaining, str(fig.get("scope"))
    return left, scopes


def _recheck(ctx: HookContext) -> None:
    """B2, B4: tasks' usage was counted just now, after the budget's check of this model call: check
    again, so no model call goes out once a hard limit is reached."""
    from workbench.harness.budget import recheck_budgets

    recheck_budgets(ctx)


def _stop_requested(ctx: HookContext) -> bool:
    """A Stop was asked for the run in flight on ``ctx``'s thread (R6: ``Engine.stop``)."""
    from workbench.engine.agent import CURRENT_RUN

    rt = CURRENT_RUN.get()
    return bool(rt is not None and rt.thread_id == ctx.thread_id and rt.stop_requested)


def _waiting_text(tasks: Sequence[TaskRecord], reach: Mapping[str, Any]) -> str:
    """Why the run waits before its next model call, in words (the CLI's line, the window's status)."""
    from workbench.harness.budget import _fmt

    field = str(reach["field"])
    words = {"pending": "running", "awaiting_decision": "waiting for your decision"}
    names = ", ".join(f"{t.id} ({words.get(t.status, t.status)})" for t in tasks)
    what = "background task" if len(tasks) == 1 else "background tasks"
    return (f"waiting for {what} {names} to settle before the next model call: with what "
            f"{'it' if len(tasks) == 1 else 'they'} may still spend ({field} {_fmt(field, reach['held'])}), "
            f"the {reach['scope']} budget's hard limit of {field} {_fmt(field, reach['limit'])} could be passed "
            f"({_fmt(field, reach['spent'])} spent)")


def _nothing_left(empty: Mapping[str, float]) -> str:
    fields = ", ".join(f"{k} {v:g} left" for k, v in empty.items())
    return (f"nothing is left of this conversation's budget for a new envelope ({fields}, counting what the "
            "tasks still running or not yet counted hold). Wait for running tasks to settle, or finish without it.")


def _exceeds(envelope: Mapping[str, float] | None, left: Mapping[str, float] | None) -> str:
    """How an agent's envelope goes over what is left ("" when it does not)."""
    if not envelope or not left:
        return ""
    over = [f"{k} {v:g} > {left[k]:g} left" for k, v in envelope.items() if k in left and v > left[k]]
    return ", ".join(over)


def _minus(a: Usage, b: Usage) -> Usage:
    cost = None if a.cost_usd is None else a.cost_usd - (b.cost_usd or 0.0)
    return Usage(max(0, a.input_tokens - b.input_tokens), max(0, a.output_tokens - b.output_tokens),
                 max(0, a.thoughts_tokens - b.thoughts_tokens), max(0, a.cached_tokens - b.cached_tokens),
                 cost, max(0, a.calls - b.calls), max(0, a.unpriced_calls - b.unpriced_calls))
