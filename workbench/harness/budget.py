"""Budgets (B1–B4): caps on what a run or a whole thread may spend.

One ``BudgetMiddleware`` holds every configured ``BudgetLimit``; stacked budgets count the same calls
and all their limits hold together (B4). A limit caps any of ``input_tokens``, ``output_tokens``,
``thoughts_tokens``, ``total_tokens``, ``cost_usd`` and custom counters (any other name) (B1).

- Checked before each model call (B2), outside every other model wrapper, so a retry or fallback inside
  can never hide a billed call (every call a ``next`` makes is in ``ctx.usage``). At a limit the run
  stops ``aborted`` with a durable ``budget_exceeded`` (budget, scope, field, spent, limit, priced) and
  keeps its partial answer: ``BudgetExceeded`` carries ``abort_status = "aborted"``. A turn under way
  finishes, so a run can overshoot by one turn.
- ``interrupt=True`` (run scope only, B3): once the run is at its limit when its tool calls start, each
  call is held with a ``budget_hold`` question (key ``budget-<run>-<call id>``, one durable
  ``budget_hold`` event per step). If the run goes over while its tools run (a sub-agent), the check
  before the next model call asks instead (key ``budget-<run>-step<n>``). Approve → each field of the
  held budgets may spend its full limit again, counted from what the run has spent (G11: a plain
  approve of a 300-token cap held at 300 lets the run reach 600); ``allow_more: {field: amount}`` in the
  decision allows that amount more instead (held at 300, ``allow_more`` 200: held again at 500), and
  ``raise_to: {field: value}`` sets the limit the run may reach (an absolute amount over what was
  spent). Figures are absolute everywhere: ``spent`` is what the scope spent (the status bar's number),
  ``limit`` what it may reach. Any other answer refuses:
  held calls are not run (they return a "rejected" result, so the history stays valid) and the run
  stops ``aborted`` before its next model call, with the user's ``reason`` (or ``message``) in its error.
  The holds of one step share one decision: a refusal of any of them refuses them all.
- Steps (B5): ``steps`` counts the run's model calls (its steps), across its resumes: before a model
  call the steps taken so far, once it was made that call too. Unless the workspace limits ``steps``
  itself, every run has ``{scope: run, limit: {steps: 200}, interrupt: true}`` (``with_step_budget``,
  added by the stack): at 200 steps the calls of the 200th step are held ("The agent has taken 200
  steps in this run") and an approval allows 200 more. ``steps`` is a run-scope field only.
- Cost: ``cost_usd`` is what litellm priced; a model without a price adds tokens only. Events carry
  ``priced`` (False when a call in the count was unpriced) so the UI can say "tokens only".
- After each model call (and each approval) a live ``budget_updated`` event carries every budget's
  figures (``measure_budgets``): the Budget panel, the status bar and the hold dialog show those, so
  they always agree with what the engine enforces (G11).

Tool-free API for other middleware and tools (they need no ``writes`` of their own; the counts are
written on behalf of the stack's ``BudgetMiddleware``, and are no-ops without one):
- ``add_to_counter(ctx, name, amount=1)`` adds to a custom counter (run and thread totals).
- ``record_subagent_usage(ctx, usage, run_id=None)`` adds a sub-agent's usage (not already in
  ``ctx.usage``) to a run's — the run that launched it, else the run in flight — so it counts toward
  that run's budgets and the session's (B4).
- ``recheck_budgets(ctx)``: from a model wrapper inside the budget that has just counted such usage
  (delegation: a settled background task's), the check before the call (B2) runs again, so no model call
  is made once a hard limit is reached, whichever wrapper counted the spend. Background tasks still
  running are spend not counted yet: when what they hold could carry a hard limit past, delegation waits
  for them before the call, counts their spend and checks again (delegation_budget.py,
  ``_settle_holders``), so a hard limit is passed by one turn at most with background tasks too.

Placement: the stack builder puts ``BudgetMiddleware`` first (outermost); ``check_outermost(stack)``
refuses a stack where another model wrapper comes before it.
"""

from __future__ import annotations

import contextvars
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from workbench.config import BUDGET_FIELDS
from workbench.engine.messages import ModelRequest, ModelResponse, ToolCall
from workbench.engine.middleware import (
    AgentMiddleware,
    CallModel,
    CallTool,
    HookContext,
    Question,
    Suspend,
    ToolContext,
    overrides,
)
from workbench.engine.tools import Fatal, NeedsApproval, ToolOutcome
from workbench.engine.usage import Usage
from workbench.errors import BuildError

log = logging.getLogger(__name__)

__all__ = [
    "BudgetExceeded",
    "BudgetLimit",
    "BudgetMiddleware",
    "add_to_counter",
    "check_outermost",
    "measure_budgets",
    "record_subagent_usage",
    "recheck_budgets",
]

HOLD = "budget_hold"
COUNTERS = "budget_counters"  # {"run_id": id, "run": {name: n}, "thread": {name: n}}
LIMITS = "budget_limits"  # {run_id: {budget index: {field: the amount the run may reach}}} (G11)
BASELINES = "budget_baselines"  # legacy (read only): {run_id: {index: {field: spent at the approval}}}
RAISES = "budget_raises"  # legacy (read only): {run_id: {index: {field: limit counted from the baseline}}}
EXTRA = "budget_extra_usage"  # {run_id: usage dict of its sub-agents}
REFUSED = "budget_refused"  # {run_id: {"reason": str}}

_Fields = dict[str, dict[str, float]]  # {field: {"spent": …, "limit": …}}

# The budget middleware and its own context while its model call is under way (``recheck_budgets``).
_CHECKING: contextvars.ContextVar[tuple[BudgetMiddleware, HookContext] | None] = contextvars.ContextVar(
    "workbench_budget_checking", default=None)


class BudgetExceeded(Fatal):
    """A budget stopped the run; the engine ends such runs ``aborted`` (not ``failed``), answer kept."""

    abort_status = "aborted"

    def __init__(self, message: str, *, scope: str, field: str, spent: float, limit: float,
                 reason: str | None = None) -> None:
        super().__init__(message)
        self.scope = scope
        self.field = field
        self.spent = spent
        self.limit = limit
        self.reason = reason


@dataclass(frozen=True)
class BudgetLimit:
    """One budget: ``limit`` maps a usage field or a custom counter to its cap (B1)."""

    scope: Literal["run", "session"]
    limit: Mapping[str, float]
    interrupt: bool = False

    def describe(self) -> str:
        caps = ", ".join(f"{k}={_fmt(k, v)}" for k, v in self.limit.items())
        return f"{self.scope} budget ({caps}{', interrupt' if self.interrupt else ''})"


@dataclass(frozen=True)
class _Over:
    """A budget at or over one of its limits."""

    index: int
    budget: BudgetLimit
    field: str  # the first capped field at its limit
    spent: float  # what the scope spent (absolute)
    limit: float
    fields: dict[str, dict[str, float]]  # every capped field: {"spent", "limit"}
    raw: dict[str, float]  # every capped field's spend in the scope, approvals ignored
    priced: bool

    def data(self) -> dict[str, Any]:
        return {"budget": self.index, "scope": self.budget.scope, "field": self.field, "spent": self.spent,
                "limit": self.limit, "priced": self.priced, "fields": self.fields,
                "configured": {k: float(v) for k, v in self.budget.limit.items()}}

    def text(self) -> str:
        if self.field == "steps":  # B5: said as the person would say it
            return f"the agent has taken {_fmt('steps', self.spent)} steps in this run"
        return (f"{self.budget.scope} budget reached: {self.field} {_fmt(self.field, self.spent)}"
                f" of {_fmt(self.field, self.limit)}")


class BudgetMiddleware(AgentMiddleware):
    """Every configured budget, checked before each model call and when tool calls start (B1–B4)."""

    writes = frozenset({COUNTERS, LIMITS, BASELINES, RAISES, EXTRA, REFUSED})
    lends = frozenset({COUNTERS, EXTRA})  # M3: add_to_counter / record_subagent_usage, from any hook or tool
    state_defaults = {COUNTERS: {}, LIMITS: {}, BASELINES: {}, RAISES: {}, EXTRA: {}, REFUSED: {}}
    asks = True  # budget holds (B3)

    def __init__(self, limits: Sequence[BudgetLimit]) -> None:
        self.limits: tuple[BudgetLimit, ...] = tuple(limits)
        for i, b in enumerate(self.limits):
            _validate(i, b)
        self._holds = any(b.interrupt for b in self.limits)
        self._announced: set[tuple[str, str, int]] = set()  # (thread, run, step) with a budget_hold event

    # -- what has been spent -------------------------------------------------------------------------
    def _measure(self, ctx: HookContext, index: int, b: BudgetLimit,
                 before_call: bool = False) -> tuple[_Fields, dict[str, float], bool]:
        """Per capped field: what the scope spent and the amount it may reach; raw spend; priced.
        ``before_call``: in ``wrap_model_call`` before the call (its step is not taken yet, B5)."""
        usage = _scope_usage(ctx, b.scope)
        fields = _fields(b, index, usage, _counters(ctx, b.scope), ctx.state, ctx.run_id,
                         steps=max(0, ctx.step - (1 if before_call else 0)))
        return fields, {name: v["spent"] for name, v in fields.items()}, _priced(usage)

    def figures(self, ctx: HookContext, before_call: bool = False) -> list[dict[str, Any]]:
        """Every budget's figures now (``measure_budgets``' shape), from the run in flight."""
        out = []
        for i, b in enumerate(self.limits):
            fields, _raw, priced = self._measure(ctx, i, b, before_call)
            out.append(_figure(i, b, fields, priced))
        return out

    def _over(self, ctx: HookContext, before_call: bool = False) -> list[_Over]:
        out = []
        for i, b in enumerate(self.limits):
            fields, raw, priced = self._measure(ctx, i, b, before_call)
            for name, v in fields.items():
                if v["spent"] >= v["limit"]:
                    out.append(_Over(i, b, name, v["spent"], v["limit"], fields, raw, priced))
                    break
        return out

    # -- hooks ---------------------------------------------------------------------------------------
    async def before_agent(self, input: str, ctx: HookContext) -> None:
        """G11: a new run starts its run budgets from nothing: say so before its first call."""
        ctx.emit("budget_updated", budgets=self.figures(ctx))
        return None

    async def wrap_model_call(self, request: ModelRequest, call_next: CallModel, ctx: HookContext) -> ModelResponse:
        """B2: before the call; a hard limit stops the run, an interrupting one asks (the backstop).
        Inner wrappers that count spend made elsewhere (a settled background task's, B4/D7) call
        ``recheck_budgets`` before the call goes out, which runs this same check again."""
        self._check_before_call(ctx)
        token = _CHECKING.set((self, ctx))
        try:
            return await call_next(request)
        finally:  # G11: the figures the panel, status bar and dialog show, after every billed call
            _CHECKING.reset(token)
            try:
                ctx.emit("budget_updated", budgets=self.figures(ctx))
            except Exception:  # noqa: BLE001 - a live display event must never change how the call ends
                log.debug("budget_updated not published", exc_info=True)

    def _check_before_call(self, ctx: HookContext) -> None:
        """B2/B3: a refused hold or a hard limit reached stops the run; an interrupting one asks."""
        over = self._over(ctx, before_call=True)
        refusal = _run_entry(ctx, REFUSED)
        if refusal:
            self._stop(ctx, over, refused=str(refusal.get("reason") or "no reason given"))
        hard = [o for o in over if not o.budget.interrupt]
        if hard:
            self._stop(ctx, hard)
        if over:  # only interrupting run budgets are at their limit: hold the next model call
            # the key spaces of step holds and call holds never meet: a call the model names "step2" is no
            # step (its hold was answered by step 2's before-call hold, a review found)
            decision = self._ask(ctx, over, f"budget-{ctx.run_id}-step-{ctx.step}", None)
            if not _approved(decision):
                self._refuse(ctx, decision)
                self._stop(ctx, over, refused=_reason(decision))
            self._renew(ctx, over, decision, before_call=True)

    async def wrap_tool_call(
        self, call: ToolCall, ctx: ToolContext, call_next: CallTool
    ) -> ToolOutcome | NeedsApproval:
        """B3: a run over an interrupting budget holds the tool calls that would lead to the next turn."""
        if not self._holds:
            return await call_next(call, ctx)
        refusal = _run_entry(ctx, REFUSED)
        if refusal:
            return _refused_outcome(str(refusal.get("reason") or "no reason given"))
        over = self._over(ctx)
        if over and all(o.budget.interrupt for o in over):  # a hard limit stops the run at the next call
            decision = self._ask(ctx, over, f"budget-{ctx.run_id}-call-{call.id}", call)
            if not _approved(decision):
                self._refuse(ctx, decision)
                return _refused_outcome(_reason(decision))
            self._renew(ctx, over, decision)
        return await call_next(call, ctx)

    async def on_decision(self, question: Question, decision: dict[str, Any], ctx: HookContext) -> None:
        """The holds of one step share one decision: a refusal of any refuses the run."""
        if question.kind == HOLD and question.id.startswith(f"budget-{ctx.run_id}-") and not _approved(decision):
            self._refuse(ctx, decision)

    # -- holds, approvals, stops ----------------------------------------------------------------------
    def _ask(self, ctx: HookContext, over: list[_Over], key: str, call: ToolCall | None) -> dict[str, Any]:
        first = over[0]
        payload = {
            **first.data(),
            "budgets": [o.data() for o in over],
            "tool": call.name if call is not None else None,
            "arguments": (call.arguments or {}) if call is not None else {},
            "reason": first.text() + ("" if first.priced or first.field != "cost_usd"
                                      else " (a model in this run has no price: tokens only)"),
        }
        try:
            return dict(ctx.ask(HOLD, payload, key))
        except Suspend:
            mark = (ctx.thread_id, ctx.run_id, ctx.step)
            if mark not in self._announced:
                if len(self._announced) > 1024:
                    self._announced.clear()
                self._announced.add(mark)
                ctx.emit(HOLD, **first.data(), budgets=payload["budgets"], reason=payload["reason"], question=key)
            raise

    def _renew(self, ctx: HookContext, over: list[_Over], decision: Mapping[str, Any],
               before_call: bool = False) -> None:
        """Approve (B3, G11): each field of a held budget may reach what the run has spent plus
        ``allow_more[field]`` (default: its configured limit again), or ``raise_to[field]`` when that is
        over what was spent. The new limits are absolute and stored for the rest of the run."""
        limits = dict(_run_entry(ctx, LIMITS))
        allow_more = decision.get("allow_more") if isinstance(decision.get("allow_more"), Mapping) else {}
        raise_to = decision.get("raise_to") if isinstance(decision.get("raise_to"), Mapping) else {}
        for o in over:
            mine: dict[str, float] = {}
            for name, cap in o.budget.limit.items():
                spent = o.raw[name]
                more, to = allow_more.get(name), raise_to.get(name)
                if to is not None and _number(to) and to > spent:
                    mine[name] = _round(float(to))
                elif more is not None and _number(more) and more > 0:
                    mine[name] = _round(spent + float(more))
                else:
                    if more is not None or to is not None:
                        log.warning("budget hold: ignored allow_more/raise_to for %s (%r/%r): not a positive "
                                    "amount over what was spent; allowing the full limit again", name, more, to)
                    mine[name] = _round(spent + float(cap))
            limits[str(o.index)] = mine
        ctx.write(LIMITS, {ctx.run_id: limits})
        ctx.emit("budget_updated", budgets=self.figures(ctx, before_call))

    def _refuse(self, ctx: HookContext, decision: Mapping[str, Any]) -> None:
        if not _run_entry(ctx, REFUSED):
            ctx.write(REFUSED, {ctx.run_id: {"reason": _reason(decision)}})

    def _stop(self, ctx: HookContext, over: list[_Over], refused: str | None = None) -> None:
        """Emit ``budget_exceeded`` and end the run aborted (the engine keeps the partial answer)."""
        if over:
            first = over[0]
            data, message = {**first.data(), "budgets": [o.data() for o in over]}, first.text()
        else:  # refused, and nothing is over any more (a counter went down): say so plainly
            data = {"budget": None, "scope": "run", "field": None, "spent": None, "limit": None, "priced": True,
                    "fields": {}, "budgets": []}
            message = "run budget hold"
        if refused is not None:
            data["refused"] = True
            message += f"; the user refused to continue: {refused}"
        ctx.emit("budget_exceeded", **data)
        raise BudgetExceeded(message, scope=data["scope"], field=data["field"] or "", spent=data["spent"] or 0.0,
                             limit=data["limit"] or 0.0, reason=refused)


# -- the tool-free API ------------------------------------------------------------------------------------
def add_to_counter(ctx: HookContext, name: str, amount: float = 1) -> float:
    """Add ``amount`` to custom counter ``name`` for this run and thread; returns the run's total.

    Any hook or tool context works; the write is made on behalf of the stack's BudgetMiddleware.
    Without one in the stack nothing is counted and 0 is returned.
    """
    if name in BUDGET_FIELDS:
        raise ValueError(f"'{name}' is a usage field the engine counts itself, not a custom counter")
    if not _number(amount):
        raise ValueError(f"counter '{name}': amount must be a number, got {amount!r}")
    bctx = _budget_context(ctx)
    if bctx is None:
        return 0.0
    state = dict(bctx.get(COUNTERS) or {})
    run = dict(state.get("run") or {}) if state.get("run_id") == bctx.run_id else {}
    thread = dict(state.get("thread") or {})
    run[name] = _round(float(run.get(name, 0)) + amount)
    thread[name] = _round(float(thread.get(name, 0)) + amount)
    bctx.write(COUNTERS, {"run_id": bctx.run_id, "run": run, "thread": thread})
    return run[name]


def record_subagent_usage(ctx: HookContext, usage: Usage | Mapping[str, Any], *, run_id: str | None = None) -> bool:
    """Count a sub-agent's usage toward a run of this thread (and so the thread) for budgets (B4).

    Only for usage not already in ``ctx.usage`` (a sub-agent run by its own engine). ``run_id``: the run
    it counts toward — the run that launched the task, which may have ended (a background task settling
    later) — else the run in flight. Returns False when the stack has no BudgetMiddleware (nothing to
    count for).
    """
    bctx = _budget_context(ctx)
    if bctx is None:
        return False
    add = usage if isinstance(usage, Usage) else Usage.from_dict(dict(usage))
    run = run_id or bctx.run_id
    extra = dict(bctx.get(EXTRA) or {})
    extra[run] = (Usage.from_dict(extra.get(run)) + add).to_dict()
    bctx.write(EXTRA, extra)
    return True


def recheck_budgets(ctx: HookContext) -> None:
    """Run the check before this model call (B2/B3) again, now: for a model wrapper inside the budget
    that has just counted spend made elsewhere (a settled background task's usage, B4, D7), so the call
    it is about to make is never one past a hard limit. A hard limit reached stops the run
    (``BudgetExceeded``); an interrupting one asks (key ``budget-<run>-step<n>``, as the outer check
    would). A no-op outside a model call of a stack with a ``BudgetMiddleware`` or from another run."""
    current = _CHECKING.get()
    if current is None:
        return
    owner, own = current
    if own.run_id != ctx.run_id or own.thread_id != ctx.thread_id:
        return
    owner._check_before_call(own)


def check_outermost(middleware: Sequence[AgentMiddleware]) -> None:
    """Refuse a stack where a model wrapper runs outside the budget (its retries would go unchecked)."""
    before: list[str] = []
    for mw in middleware:
        if isinstance(mw, BudgetMiddleware):
            if before:
                raise BuildError(
                    f"{mw.name} must run outside every other model wrapper, but {', '.join(before)} "
                    f"come(s) before it: register {mw.name} first (B2, M7)"
                )
            return
        if overrides(mw, "wrap_model_call"):
            before.append(mw.name)


# -- helpers ------------------------------------------------------------------------------------------------
def _validate(index: int, b: BudgetLimit) -> None:
    where = f"budget[{index}]"
    if b.scope not in ("run", "session"):
        raise BuildError(f"{where}: scope must be 'run' or 'session', got {b.scope!r}")
    if not b.limit:
        raise BuildError(f"{where} ({b.scope}): the limit caps nothing; set at least one field or counter")
    for name, value in b.limit.items():
        if not isinstance(name, str) or not name:
            raise BuildError(f"{where}: limit keys must be field or counter names, got {name!r}")
        if not _number(value) or value < 0:
            raise BuildError(f"{where}: limit.{name} must be a number ≥ 0, got {value!r}")
    if b.interrupt and b.scope == "session":
        raise BuildError(
            f"{where} {b.describe()}: interrupt is allowed only with scope run: a session budget cannot pause, "
            "since every later turn would start over its limit (B3)"
        )
    if "steps" in b.limit and b.scope != "run":
        raise BuildError(f"{where} {b.describe()}: steps counts one run's model calls: put it in a budget "
                         "with scope: run (B5)")


def measure_budgets(limits: Sequence[Any], *, run_usage: Usage, thread_usage: Usage, state: Mapping[str, Any],
                    run_id: str, run_steps: int = 0) -> list[dict[str, Any]]:
    """Every budget's figures from committed values (a reopened thread, a finished run): the same
    computation the middleware enforces, so what the window shows after a reload is what it showed live.

    ``limits``: ``BudgetLimit``s or ``BudgetConfig``s in the stack's order; ``state``: the thread's
    checkpointed state; ``run_id``: the run whose run-scope budgets are meant (its usage is
    ``run_usage``, the steps it has taken ``run_steps``, B5). Each entry: ``{"budget", "scope",
    "interrupt", "priced", "fields": {field: {"spent", "limit"}}}``.
    """
    out = []
    extra = state.get(EXTRA) or {}
    for i, b in enumerate(limits):
        budget = b if isinstance(b, BudgetLimit) else BudgetLimit(b.scope, dict(b.limit), bool(b.interrupt))
        if budget.scope == "run":
            usage = run_usage + Usage.from_dict(extra.get(run_id))
        else:
            usage = thread_usage
            for value in extra.values():
                usage = usage + Usage.from_dict(value)
        cstate = state.get(COUNTERS) or {}
        if budget.scope == "session":
            counters = cstate.get("thread") or {}
        else:
            counters = (cstate.get("run") or {}) if cstate.get("run_id") == run_id else {}
        out.append(_figure(i, budget, _fields(budget, i, usage, counters, state, run_id, steps=run_steps),
                           _priced(usage)))
    return out


def _fields(b: BudgetLimit, index: int, usage: Usage, counters: Mapping[str, Any], state: Mapping[str, Any],
            run_id: str, *, steps: int = 0) -> _Fields:
    """``{field: {"spent", "limit"}}``, both absolute: spent in the scope, and the amount it may reach —
    the approved limit of this run (``LIMITS``), a legacy baseline + raised limit, else the cap."""
    def entry(key: str) -> Mapping[str, Any]:
        if b.scope != "run":
            return {}
        return ((state.get(key) or {}).get(run_id) or {}).get(str(index)) or {}

    approved, baseline, raised = entry(LIMITS), entry(BASELINES), entry(RAISES)
    fields: _Fields = {}
    for name, cap in b.limit.items():
        if name == "steps":
            spent = float(steps)  # B5: the run's model calls (not its sub-agents': their own runs)
        else:
            spent = _usage_field(usage, name) if name in BUDGET_FIELDS else float(counters.get(name, 0))
        if name in approved:
            limit = float(approved[name])
        elif baseline:
            limit = float(baseline.get(name, 0)) + float(raised.get(name, cap))
        else:
            limit = float(cap)
        fields[name] = {"spent": _round(spent), "limit": _round(limit)}
    return fields


def _figure(index: int, b: BudgetLimit, fields: _Fields, priced: bool) -> dict[str, Any]:
    return {"budget": index, "scope": b.scope, "interrupt": b.interrupt, "priced": priced,
            "configured": {k: float(v) for k, v in b.limit.items()}, "fields": fields}


def _budget_context(ctx: HookContext) -> HookContext | None:
    """A context owned by the stack's BudgetMiddleware, whoever's context ``ctx`` is."""
    return ctx.context_for(BudgetMiddleware)


def _scope_usage(ctx: HookContext, scope: str) -> Usage:
    usage: Usage = ctx.usage["run" if scope == "run" else "thread"]
    extra = ctx.get(EXTRA) or {}
    if scope == "run":
        spent_elsewhere = extra.get(ctx.run_id)
        return usage + Usage.from_dict(spent_elsewhere) if spent_elsewhere else usage
    for value in extra.values():
        usage = usage + Usage.from_dict(value)
    return usage


def _counters(ctx: HookContext, scope: str) -> Mapping[str, Any]:
    state = ctx.get(COUNTERS) or {}
    if scope == "session":
        return state.get("thread") or {}
    return (state.get("run") or {}) if state.get("run_id") == ctx.run_id else {}


def _run_entry(ctx: HookContext, key: str) -> dict[str, Any]:
    return dict((ctx.get(key) or {}).get(ctx.run_id) or {})


def _usage_field(usage: Usage, name: str) -> float:
    if name == "total_tokens":
        return float(usage.total_tokens)
    if name == "cost_usd":
        return float(usage.cost_usd or 0.0)
    return float(getattr(usage, name))


def _priced(usage: Usage) -> bool:
    return usage.unpriced_calls == 0 and (usage.cost_usd is not None or usage.calls == 0)


def _approved(decision: Mapping[str, Any]) -> bool:
    return decision.get("decision") == "approve"  # fail closed: anything else refuses


def _reason(decision: Mapping[str, Any]) -> str:
    return str(decision.get("reason") or decision.get("message") or "no reason given")


def _refused_outcome(reason: str) -> ToolOutcome:
    return ToolOutcome("rejected", f"Not run: the run's budget is spent and the user refused to continue ({reason}).")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _round(value: float) -> float:
    return round(value, 9)


def _fmt(name: str, value: float) -> str:
    if name == "cost_usd":
        return f"${value:.4f}"
    return str(int(value)) if float(value).is_integer() else f"{value:g}"
