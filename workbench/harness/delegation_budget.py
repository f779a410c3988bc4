"""The money side of delegation (B1, B4, D8): what each sub-agent task spent and which run it counts
toward, and the envelopes tasks are handed — what is left of this thread's budgets once what running
tasks hold is reserved. A mixin of ``DelegationMiddleware`` (delegation.py, which says what the rules
are), with the state keys it keeps.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from workbench.config import BUDGET_FIELDS, SubagentConfig, SubagentsConfig
from workbench.engine.middleware import HookContext
from workbench.engine.task_store import SETTLED, SqliteTaskStore, TaskRecord, task_spend
from workbench.engine.usage import Usage

if TYPE_CHECKING:
    from workbench.engine.agent import Engine
    from workbench.harness.task_runner import TaskRunner

_USAGE_FIELDS = frozenset(BUDGET_FIELDS) - {"steps"}  # what a task's usage carries (not its counters)

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
        run_usage = sum((u for _, u in store.usage_calls(task.parent_thread, run)), Usage())
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
        from workbench.harness.budget import _usage_field

        held: dict[str, float] = {}
        for task in self.tasks.tasks(thread_id):
            done = task.status in SETTLED
            if done and counted.get(task.id) == task.usage.to_dict():
                continue  # settled and counted: it holds nothing
            spent = _minus(self._spend(task), Usage.from_dict(counted.get(task.id)))
            envelope = dict(task.envelope or {})
            for name in fields:
                uncounted = _usage_field(spent, name) if name in _USAGE_FIELDS else 0.0
                hold = uncounted if done else max(uncounted, float(envelope.get(name, 0.0) or 0.0))
                if hold > 0:
                    held[name] = held.get(name, 0.0) + hold
        return held


# -- helpers ------------------------------------------------------------------------------------------------


def _left(ctx: HookContext) -> dict[str, float] | None:
    """What is left of this thread's budgets — run and session scope alike (B1: a session limit bounds
    a sub-agent as a run limit does) — per field, the smallest over budgets, before any task's holding
    (``DelegationMiddleware._left``); None without one. ``steps`` is the run's own (B5)."""
    from workbench.harness.budget import BudgetMiddleware, measure_budgets

    bctx = ctx.context_for(BudgetMiddleware)
    if bctx is None or not isinstance(bctx.owner, BudgetMiddleware):
        return None
    usage = ctx.usage
    figures = measure_budgets(bctx.owner.limits, run_usage=usage["run"], thread_usage=usage["thread"],
                              state=ctx.state, run_id=ctx.run_id)
    return _least_left(figures)[0] or None


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
