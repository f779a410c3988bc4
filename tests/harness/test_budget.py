"""Budgets (DESIGN §4 B1–B4) through the real Engine, Store and a scripted model.

Runs stopped by a budget end ``aborted``: that relies on the engine ending a run whose exception has
``abort_status = "aborted"`` (``BudgetExceeded``) as aborted with its partial answer. Tests that assert
it say so with "ENGINE: abort_status".
"""

from __future__ import annotations

from typing import Any

import pytest

from workbench.engine.agent import Agent, Engine
from workbench.engine.middleware import AgentMiddleware, Section
from workbench.engine.models.scripted import ScriptedModel, reply, tool_reply
from workbench.engine.store import Store
from workbench.engine.tools import NeedsApproval, Tool, schema
from workbench.engine.usage import Usage
from workbench.errors import BuildError
from workbench.harness.budget import (
    BudgetExceeded,
    BudgetLimit,
    BudgetMiddleware,
    add_to_counter,
    check_outermost,
    record_subagent_usage,
)


class Probe:
    """A tool that records its calls; ``effect(args, ctx)`` runs inside it (counters, sub-agent usage)."""

    def __init__(self, name: str = "probe", effect: Any = None) -> None:
        self.calls: list[str] = []
        self.effect = effect

        async def run(args: dict[str, Any], ctx: Any) -> str:
            self.calls.append(args.get("x", ""))
            if self.effect is not None:
                self.effect(args, ctx)
            return f"ran {args.get('x', '')}"

        self.tool = Tool(name, "A probe.", schema({"x": {"type": "string"}}), run, changes_outside=False)


def make(tmp_path, model, budgets, *, tools=(), extra=()) -> Engine:
    middleware = [BudgetMiddleware(budgets), *extra]
    check_outermost(middleware)
    return Engine(Agent(model, instructions="BASE", middleware=middleware, tools=tools), Store.for_workspace(tmp_path))


def events(engine: Engine, type: str, thread: str = "t") -> list[Any]:
    return engine.store.events(thread, types={type})


def U(input: int = 0, output: int = 0, thoughts: int = 0, cost: float | None = None, cached: int = 0) -> Usage:
    return Usage(input_tokens=input, output_tokens=output, thoughts_tokens=thoughts, cached_tokens=cached,
                 cost_usd=cost, calls=1)


def assert_aborted(engine: Engine, result: Any) -> None:
    # ENGINE: abort_status — BudgetExceeded ends the run aborted, not failed (B2, R6).
    assert result.status == "aborted", result.error
    assert engine.store.run(result.run_id).status == "aborted"
    assert isinstance(result.error, str) and "budget" in result.error


# Each field's usage per call: the capped field reaches 60 (cost 0.6) per call, the others far more,
# so a budget that read the wrong field would stop after the first call instead of the second.
FIELD_CASES = {
    "input_tokens": (U(input=60, output=500, thoughts=500, cost=50.0), 100, 120),
    "output_tokens": (U(input=500, output=60, thoughts=500, cost=50.0), 100, 120),
    "thoughts_tokens": (U(input=500, output=500, thoughts=60, cost=50.0), 100, 120),
    "total_tokens": (U(input=20, output=20, thoughts=20, cached=500, cost=50.0), 100, 120),
    "cost_usd": (U(input=500, output=500, thoughts=500, cost=0.6), 1.0, 1.2),
}


# -- B1 fields and scopes ------------------------------------------------------------------------------
@pytest.mark.parametrize("scope", ["run", "session"])
@pytest.mark.parametrize("field", list(FIELD_CASES))
async def test_B1_each_usage_field_is_capped(tmp_path, field, scope):
    usage, limit, spent = FIELD_CASES[field]
    probe = Probe()
    model = ScriptedModel([tool_reply(("probe", {"x": "1"}), usage=usage),
                           tool_reply(("probe", {"x": "2"}), usage=usage), reply("never", usage=usage)])
    engine = make(tmp_path, model, [BudgetLimit(scope, {field: limit})], tools=[probe.tool])
    result = await engine.run("t", "go")
    assert model.calls == 2 and probe.calls == ["1", "2"]
    [ev] = events(engine, "budget_exceeded")
    assert ev.data["field"] == field and ev.data["scope"] == scope
    assert ev.data["spent"] == pytest.approx(spent) and ev.data["limit"] == limit
    assert ev.data["priced"] is True
    assert_aborted(engine, result)


@pytest.mark.parametrize("scope", ["run", "session"])
async def test_B1_custom_counter_from_a_tool(tmp_path, scope):
    returned: list[float] = []
    search = Probe("search", effect=lambda args, ctx: returned.append(add_to_counter(ctx, "searches")))
    model = ScriptedModel([tool_reply(("search", {"x": "a"})), reply("first run done"),
                           tool_reply(("search", {"x": "b"})), tool_reply(("search", {"x": "c"})), reply("never")])
    engine = make(tmp_path, model, [BudgetLimit(scope, {"searches": 2})], tools=[search.tool])
    first = await engine.run("t", "one")
    assert first.status == "done"
    second = await engine.run("t", "two")
    [ev] = events(engine, "budget_exceeded")
    assert ev.data["field"] == "searches" and ev.data["spent"] == 2 and ev.data["limit"] == 2
    if scope == "run":  # the count starts over with each run: run two searches twice
        assert search.calls == ["a", "b", "c"] and model.calls == 4 and returned == [1, 1, 2]
    else:  # the thread's count carries over: run two stops after one search
        assert search.calls == ["a", "b"] and model.calls == 3 and returned == [1, 1]
    counters = Store.for_workspace(tmp_path).latest_checkpoint("t").state["budget_counters"]
    assert counters["thread"]["searches"] == len(search.calls)
    assert_aborted(engine, second)


@pytest.mark.parametrize("scope", ["run", "session"])
async def test_B1_run_scope_starts_over_each_run_and_session_scope_counts_the_thread(tmp_path, scope):
    model = ScriptedModel([reply("one", usage=U(input=60)), reply("two", usage=U(input=60)),
                           reply("three", usage=U(input=60))])
    engine = make(tmp_path, model, [BudgetLimit(scope, {"total_tokens": 100})])
    results = [await engine.run("t", "go") for _ in range(3)]
    if scope == "run":
        assert [r.status for r in results] == ["done", "done", "done"] and model.calls == 3
        assert events(engine, "budget_exceeded") == []
    else:
        assert [r.status for r in results[:2]] == ["done", "done"]
        assert model.calls == 2  # the third run's check came before its model call
        [ev] = events(engine, "budget_exceeded")
        assert ev.run_id == results[2].run_id and ev.data["spent"] == 120
        assert_aborted(engine, results[2])


# -- B2 check before each model call -------------------------------------------------------------------
async def test_B2_checked_before_the_model_call_one_turn_overshoots_partial_answer_kept(tmp_path):
    probe = Probe()
    model = ScriptedModel([
        tool_reply(("probe", {"x": "1"}), text="Reading the file first.", usage=U(input=100, output=50)),
        reply("never"),
    ])
    engine = make(tmp_path, model, [BudgetLimit("run", {"total_tokens": 100})], tools=[probe.tool])
    result = await engine.run("t", "go")
    assert model.calls == 1  # over after call 1: call 2 never reaches the model
    assert probe.calls == ["1"]  # the turn under way finished (one turn of overshoot)
    [ev] = events(engine, "budget_exceeded")
    assert {k: ev.data[k] for k in ("scope", "field", "spent", "limit")} == {
        "scope": "run", "field": "total_tokens", "spent": 150, "limit": 100}
    assert ev.data["priced"] is False  # the scripted model has no price: tokens only
    assert "content" not in ev.data and ev.seq > 0  # durable, no content
    messages = Store.for_workspace(tmp_path).latest_checkpoint("t").state["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool"]
    assert_aborted(engine, result)
    assert result.answer == "Reading the file first."  # ENGINE: partial answer kept on abort
    assert "total_tokens 150 of 100" in result.error
    [finished] = events(engine, "run_finished")
    assert finished.data["status"] == "aborted"


async def test_B2_budget_outside_a_retrying_wrapper_counts_every_billed_call(tmp_path):
    class RetryOnce(AgentMiddleware):
        async def wrap_model_call(self, request, call_next, ctx):
            await call_next(request)  # a discarded attempt, still billed (R5)
            return await call_next(request)

    probe = Probe()
    model = ScriptedModel([reply("discarded", usage=U(input=60)), tool_reply(("probe", {"x": "1"}), usage=U(input=60)),
                           reply("never", usage=U(input=60)), reply("never", usage=U(input=60))])
    engine = make(tmp_path, model, [BudgetLimit("run", {"input_tokens": 100})], tools=[probe.tool],
                  extra=[RetryOnce()])
    result = await engine.run("t", "go")
    assert model.calls == 2 and probe.calls == ["1"]
    [ev] = events(engine, "budget_exceeded")
    assert ev.data["spent"] == 120
    assert_aborted(engine, result)


def test_B2_check_outermost_refuses_a_model_wrapper_before_the_budget():
    class Retry(AgentMiddleware):
        async def wrap_model_call(self, request, call_next, ctx):
            return await call_next(request)

    class SectionsOnly(AgentMiddleware):
        async def sections(self, ctx):
            return [Section("x", "x")]

    budget = BudgetMiddleware([BudgetLimit("run", {"total_tokens": 10})])
    with pytest.raises(BuildError) as err:
        check_outermost([Retry(), budget])
    assert "Retry" in str(err.value) and "BudgetMiddleware" in str(err.value)
    check_outermost([budget, Retry()])
    check_outermost([SectionsOnly(), budget, Retry()])  # only model wrappers matter


def test_B2_the_stack_builder_puts_the_budget_first(tmp_path):
    from workbench.config import BudgetConfig, WorkbenchConfig
    from workbench.harness.stack import build_backend, build_middleware

    config = WorkbenchConfig(budget=(BudgetConfig("run", {"total_tokens": 1000.0}, True),
                                     BudgetConfig("session", {"cost_usd": 5.0})))
    backend = build_backend(config, tmp_path, tmp_path / "store.sqlite3")
    stack = build_middleware(config, tmp_path, backend)
    assert isinstance(stack[0], BudgetMiddleware)
    # the workspace's budgets keep their numbers; B5's default step hold comes after them
    assert [b.scope for b in stack[0].limits][:2] == ["run", "session"] and stack[0].limits[0].interrupt
    assert dict(stack[0].limits[2].limit) == {"steps": 200} and stack[0].limits[2].interrupt
    assert sum(isinstance(m, BudgetMiddleware) for m in stack) == 1  # one middleware holds all budgets
    check_outermost(stack)


# -- B3 holds --------------------------------------------------------------------------------------------
async def test_B3_hold_asks_before_the_tool_calls_and_approval_renews_the_full_limit(tmp_path):
    probe = Probe()
    model = ScriptedModel([
        tool_reply(("probe", {"x": "1"}, "c1"), ("probe", {"x": "2"}, "c2"), usage=U(input=150)),
        tool_reply(("probe", {"x": "3"}, "c3"), usage=U(input=60)),
        reply("done", usage=U(input=60)),
    ])
    engine = make(tmp_path, model, [BudgetLimit("run", {"total_tokens": 100}, interrupt=True)], tools=[probe.tool])
    first = await engine.run("t", "go")
    assert first.status == "interrupted"
    assert probe.calls == [] and model.calls == 1  # the held calls did not run
    run = first.run_id
    assert [q.id for q in first.pending] == [f"budget-{run}-call-c1", f"budget-{run}-call-c2"]
    q = first.pending[0]
    assert q.kind == "budget_hold" and q.call_id == "c1"
    assert {k: q.payload[k] for k in ("scope", "field", "spent", "limit", "tool", "arguments")} == {
        "scope": "run", "field": "total_tokens", "spent": 150, "limit": 100, "tool": "probe",
        "arguments": {"x": "1"}}
    assert q.payload["fields"] == {"total_tokens": {"spent": 150, "limit": 100}}
    [hold] = events(engine, "budget_hold")  # one per step, however many calls are held
    assert hold.data["field"] == "total_tokens" and hold.data["spent"] == 150 and hold.data["limit"] == 100
    assert len(events(engine, "interrupt_raised")) == 2

    second = await engine.resume("t", {q.id: "approve" for q in first.pending})
    # Full limit again: 60 + 60 after the approval stays under 100, so no second hold.
    assert second.status == "done" and second.answer == "done"
    assert probe.calls == ["1", "2", "3"] and model.calls == 3
    assert events(engine, "budget_exceeded") == [] and len(events(engine, "budget_hold")) == 1


async def test_B3_approval_may_raise_the_limit_for_the_run(tmp_path):
    probe = Probe()
    model = ScriptedModel([tool_reply(("probe", {"x": str(i)}, f"c{i}"), usage=U(input=150)) for i in (1, 2, 3)])
    engine = make(tmp_path, model, [BudgetLimit("run", {"total_tokens": 100}, interrupt=True)], tools=[probe.tool])
    first = await engine.run("t", "go")
    [q] = first.pending
    second = await engine.resume("t", {q.id: {"decision": "approve", "allow_more": {"total_tokens": 300}}})
    assert second.status == "interrupted"
    # G11: 150 spent + 300 more = 450: the second call's tools ran (300 < 450); the third reached 450.
    assert probe.calls == ["1", "2"] and model.calls == 3
    [q3] = second.pending
    assert q3.id == f"budget-{first.run_id}-call-c3"
    assert q3.payload["spent"] == 450 and q3.payload["limit"] == 450


async def test_B3_refusing_a_hold_stops_the_run_aborted_with_the_reason(tmp_path):
    probe = Probe()
    model = ScriptedModel([
        tool_reply(("probe", {"x": "1"}, "c1"), ("probe", {"x": "2"}, "c2"), text="Planning.", usage=U(input=150)),
        reply("never"),
    ])
    engine = make(tmp_path, model, [BudgetLimit("run", {"total_tokens": 100}, interrupt=True)], tools=[probe.tool])
    first = await engine.run("t", "go")
    ids = [q.id for q in first.pending]
    # The holds of one step share one decision: refusing one refuses all.
    result = await engine.resume("t", {ids[0]: "approve", ids[1]: {"decision": "reject", "reason": "too expensive"}})
    assert probe.calls == [] and model.calls == 1
    [ev] = events(engine, "budget_exceeded")
    assert ev.data["refused"] is True and ev.data["field"] == "total_tokens"
    messages = Store.for_workspace(tmp_path).latest_checkpoint("t").state["messages"]
    tool_results = [m for m in messages if m["role"] == "tool"]
    assert [m["meta"]["status"] for m in tool_results] == ["rejected", "rejected"]  # the history stays valid
    assert_aborted(engine, result)
    assert "too expensive" in result.error
    assert result.answer == "Planning."


@pytest.mark.parametrize("decision", ["approve", "reject"])
async def test_B3_over_during_tools_asks_before_the_next_model_call(tmp_path, decision):
    delegate = Probe("delegate", effect=lambda args, ctx: record_subagent_usage(ctx, U(input=150)))
    model = ScriptedModel([tool_reply(("delegate", {"x": "a"}), usage=U(input=10)), reply("after", usage=U(input=10))])
    engine = make(tmp_path, model, [BudgetLimit("run", {"total_tokens": 100}, interrupt=True)], tools=[delegate.tool])
    first = await engine.run("t", "go")
    assert first.status == "interrupted" and delegate.calls == ["a"]  # under the limit when the tools started
    [q] = first.pending
    assert q.id == f"budget-{first.run_id}-step-2" and q.kind == "budget_hold"
    assert q.payload["tool"] is None and q.payload["spent"] == 160  # the sub-agent's usage counts (B4)
    assert model.calls == 1
    result = await engine.resume("t", {q.id: decision})
    if decision == "approve":
        assert result.status == "done" and result.answer == "after" and model.calls == 2
    else:
        assert model.calls == 1
        assert_aborted(engine, result)


def test_B3_session_budget_with_interrupt_is_refused_at_build():
    with pytest.raises(BuildError) as err:
        BudgetMiddleware([BudgetLimit("run", {"total_tokens": 10}),
                          BudgetLimit("session", {"cost_usd": 5.0}, interrupt=True)])
    assert "budget[1]" in str(err.value) and "session" in str(err.value) and "interrupt" in str(err.value)
    for bad in ({}, {"total_tokens": -1}, {"total_tokens": "lots"}):
        with pytest.raises(BuildError):
            BudgetMiddleware([BudgetLimit("run", bad)])


# -- B4 stacking and sub-agents ----------------------------------------------------------------------------
async def test_B4_stacked_budgets_all_hold_and_the_tighter_one_fires(tmp_path):
    probe = Probe()
    usage = U(input=10, output=60, cost=0.01)
    model = ScriptedModel([tool_reply(("probe", {"x": "1"}), usage=usage),
                           tool_reply(("probe", {"x": "2"}), usage=usage), reply("never", usage=usage)])
    budgets = [BudgetLimit("run", {"total_tokens": 10_000}), BudgetLimit("run", {"output_tokens": 100}),
               BudgetLimit("session", {"cost_usd": 100.0})]
    engine = make(tmp_path, model, budgets, tools=[probe.tool])
    result = await engine.run("t", "go")
    assert model.calls == 2
    [ev] = events(engine, "budget_exceeded")
    assert ev.data["budget"] == 1 and ev.data["field"] == "output_tokens" and ev.data["spent"] == 120
    assert_aborted(engine, result)


async def test_B4_a_hard_limit_beats_a_hold(tmp_path):
    probe = Probe()
    model = ScriptedModel([tool_reply(("probe", {"x": "1"}), usage=U(input=100, output=60)), reply("never")])
    budgets = [BudgetLimit("run", {"total_tokens": 100}, interrupt=True), BudgetLimit("run", {"output_tokens": 50})]
    engine = make(tmp_path, model, budgets, tools=[probe.tool])
    result = await engine.run("t", "go")
    assert result.pending == () and probe.calls == ["1"] and model.calls == 1
    [ev] = events(engine, "budget_exceeded")
    assert ev.data["budget"] == 1 and ev.data["field"] == "output_tokens"
    assert_aborted(engine, result)


async def test_B4_stacked_holds_are_one_question_and_one_approval_renews_them_all(tmp_path):
    probe = Probe()
    model = ScriptedModel([tool_reply(("probe", {"x": "1"}, "c1"), usage=U(input=100, output=60)),
                           reply("done", usage=U(input=10, output=10))])
    budgets = [BudgetLimit("run", {"total_tokens": 100}, interrupt=True),
               BudgetLimit("run", {"output_tokens": 50}, interrupt=True)]
    engine = make(tmp_path, model, budgets, tools=[probe.tool])
    first = await engine.run("t", "go")
    [q] = first.pending
    assert [(b["budget"], b["field"]) for b in q.payload["budgets"]] == [(0, "total_tokens"), (1, "output_tokens")]
    [hold] = events(engine, "budget_hold")
    assert [b["budget"] for b in hold.data["budgets"]] == [0, 1]
    result = await engine.resume("t", {q.id: "approve"})
    assert result.status == "done" and probe.calls == ["1"] and model.calls == 2


@pytest.mark.parametrize("scope", ["run", "session"])
async def test_B4_subagent_usage_counts_toward_the_run(tmp_path, scope):
    recorded: list[bool] = []
    delegate = Probe("delegate", effect=lambda a, ctx: recorded.append(record_subagent_usage(ctx, U(input=500))))
    model = ScriptedModel([tool_reply(("delegate", {"x": "a"}), usage=U(input=10)), reply("never")])
    engine = make(tmp_path, model, [BudgetLimit(scope, {"input_tokens": 100})], tools=[delegate.tool])
    result = await engine.run("t", "go")
    assert recorded == [True] and model.calls == 1
    [ev] = events(engine, "budget_exceeded")
    assert ev.data["spent"] == 510
    assert_aborted(engine, result)


async def test_run_scope_counts_one_run_across_a_resume_of_another_interrupt(tmp_path):
    class AskFor(AgentMiddleware):
        async def wrap_tool_call(self, call, ctx, call_next):
            if call.arguments.get("x") == "ask" and not ctx.approved:
                return NeedsApproval("check this one")
            return await call_next(call, ctx)

    probe = Probe()
    model = ScriptedModel([tool_reply(("probe", {"x": "ask"}, "c1"), usage=U(input=60)),
                           tool_reply(("probe", {"x": "b"}, "c2"), usage=U(input=60)), reply("never")])
    engine = make(tmp_path, model, [BudgetLimit("run", {"total_tokens": 100})], tools=[probe.tool], extra=[AskFor()])
    first = await engine.run("t", "go")
    assert first.status == "interrupted" and [q.kind for q in first.pending] == ["tool_approval"]
    result = await engine.resume("t", {"approval-c1": "approve"})
    # Answering another middleware's interrupt does not renew the limit: 60 before + 60 after = 120.
    assert probe.calls == ["ask", "b"] and model.calls == 2
    [ev] = events(engine, "budget_exceeded")
    assert ev.data["spent"] == 120 and ev.run_id == first.run_id
    assert_aborted(engine, result)


def test_budget_exceeded_is_marked_for_an_aborted_end():
    e = BudgetExceeded("run budget reached", scope="run", field="total_tokens", spent=150, limit=100)
    assert e.abort_status == "aborted" and e.field == "total_tokens"


async def test_counting_helpers_are_noops_without_a_budget(tmp_path):
    seen: list[Any] = []
    probe = Probe(effect=lambda a, ctx: seen.extend([add_to_counter(ctx, "n"), record_subagent_usage(ctx, U(input=5))]))
    model = ScriptedModel([tool_reply(("probe", {"x": "1"})), reply("ok")])
    engine = Engine(Agent(model, tools=[probe.tool]), Store.for_workspace(tmp_path))
    result = await engine.run("t", "go")
    assert result.status == "done" and seen == [0.0, False]
    with pytest.raises(ValueError):
        add_to_counter(None, "total_tokens")  # type: ignore[arg-type]


async def test_B3_a_call_the_model_names_like_a_step_gets_its_own_hold(tmp_path):
    """The hold before step 2's model call and the hold of a tool call with the id "step2" had one key
    (``budget-RUN-step2``): approving the first answered the second, and the call ran unheld (a review
    found it). Their keys now never meet."""
    delegate = Probe("delegate", effect=lambda args, ctx: record_subagent_usage(ctx, U(input=150)))
    probe = Probe("probe")
    model = ScriptedModel([tool_reply(("delegate", {"x": "a"}), usage=U(input=10)),
                           tool_reply(("probe", {"x": "b"}, "step2"), usage=U(input=500)),
                           reply("after", usage=U(input=10))])
    engine = make(tmp_path, model, [BudgetLimit("run", {"total_tokens": 100}, interrupt=True)],
                  tools=[delegate.tool, probe.tool])
    first = await engine.run("t", "go")
    [before_step] = first.pending
    assert before_step.payload["tool"] is None  # the hold before step 2's model call
    second = await engine.resume("t", {before_step.id: "approve"})
    assert second.status == "interrupted" and probe.calls == []  # held, not run on step 2's answer
    [held] = second.pending
    assert held.payload["tool"] == "probe" and held.id != before_step.id
