"""G11, B3: what a person allows at a budget hold is exactly what the engine enforces, in amounts.

Each scripted model call spends a fixed number of tokens, so the step at which a run is held again
is known exactly. Figures are absolute: ``spent`` is what the run spent (the same number the status
bar shows), ``limit`` the amount the run may reach (the configured cap, or what was spent at an
approval plus what was allowed more).
"""

from __future__ import annotations

from typing import Any

from tests.harness.test_budget import U, Probe, make
from workbench.engine.models.scripted import ScriptedModel, reply, tool_reply
from workbench.engine.store import Store
from workbench.harness.budget import BudgetLimit, measure_budgets


def _calls(n: int, usage: Any) -> ScriptedModel:
    return ScriptedModel([tool_reply(("probe", {"x": str(i)}, f"c{i}"), usage=usage) for i in range(1, n + 1)]
                         + [reply("done", usage=usage)])


async def test_G11_B3_allow_more_holds_again_at_exactly_spent_plus_the_amount(tmp_path: Any) -> None:
    probe = Probe()
    engine = make(tmp_path, _calls(9, U(input=100)), [BudgetLimit("run", {"total_tokens": 300}, interrupt=True)],
                  tools=[probe.tool])
    first = await engine.run("t", "go")
    [q] = first.pending
    assert (q.payload["spent"], q.payload["limit"]) == (300, 300)
    second = await engine.resume("t", {q.id: {"decision": "approve", "allow_more": {"total_tokens": 200}}})
    [q2] = second.pending
    # 300 spent + 200 more: held again when the run has spent 500, not 700 and not 800.
    assert q2.payload["fields"] == {"total_tokens": {"spent": 500, "limit": 500}}
    assert engine.store.runs("t")[-1].id == first.run_id
    assert Store.for_workspace(tmp_path).usage_calls("t", first.run_id) and sum(
        u.total_tokens for _, u in engine.store.usage_calls("t", first.run_id)) == 500


async def test_G11_B3_plain_approve_allows_the_full_limit_again(tmp_path: Any) -> None:
    probe = Probe()
    engine = make(tmp_path, _calls(9, U(input=100)), [BudgetLimit("run", {"total_tokens": 300}, interrupt=True)],
                  tools=[probe.tool])
    first = await engine.run("t", "go")
    second = await engine.resume("t", {q.id: "approve" for q in first.pending})
    [q2] = second.pending
    assert (q2.payload["spent"], q2.payload["limit"]) == (600, 600)  # 300 spent + the full 300 again


async def test_G11_B3_raise_to_is_an_absolute_limit_not_an_amount_more(tmp_path: Any) -> None:
    """The old dialog's "Raise to 700" allowed 700 *more* (the run reached 1,000 with no second hold)."""
    probe = Probe()
    engine = make(tmp_path, _calls(12, U(input=100)), [BudgetLimit("run", {"total_tokens": 300}, interrupt=True)],
                  tools=[probe.tool])
    first = await engine.run("t", "go")
    [q] = first.pending
    second = await engine.resume("t", {q.id: {"decision": "approve", "raise_to": {"total_tokens": 700}}})
    [q2] = second.pending
    assert (q2.payload["spent"], q2.payload["limit"]) == (700, 700)


async def test_G11_B3_cost_allow_more_in_dollars(tmp_path: Any) -> None:
    probe = Probe()
    engine = make(tmp_path, _calls(9, U(input=10, cost=0.004)), [BudgetLimit("run", {"cost_usd": 0.01}, interrupt=True)],
                  tools=[probe.tool])
    first = await engine.run("t", "go")
    [q] = first.pending
    assert abs(q.payload["spent"] - 0.012) < 1e-9 and q.payload["limit"] == 0.01
    second = await engine.resume("t", {q.id: {"decision": "approve", "allow_more": {"cost_usd": 0.01}}})
    [q2] = second.pending
    # 0.012 + 0.01 = 0.022: held at 0.024 (the first check at or over it), never counted from zero.
    assert abs(q2.payload["spent"] - 0.024) < 1e-9 and abs(q2.payload["limit"] - 0.022) < 1e-9


async def test_G11_budget_updated_after_each_call_carries_the_engine_figures(tmp_path: Any) -> None:
    """One source of truth: after every model call the middleware publishes its own spent/limit."""
    probe = Probe()
    engine = make(tmp_path, _calls(9, U(input=100)), [BudgetLimit("run", {"total_tokens": 300}, interrupt=True)],
                  tools=[probe.tool])
    seen: list[Any] = []
    engine.subscribe(lambda e: seen.append(e) if e.type in ("budget_updated", "usage_updated") else None)
    first = await engine.run("t", "go")
    await engine.resume("t", {q.id: {"decision": "approve", "allow_more": {"total_tokens": 200}} for q in first.pending})
    updates = [e for e in seen if e.type == "budget_updated"]
    usage = [e for e in seen if e.type == "usage_updated"]
    assert len(updates) >= len(usage) == 5
    for u in usage:  # each usage event is followed by the budget figures for the same spend
        after = next(e for e in updates if seen.index(e) > seen.index(u))
        [b] = after.data["budgets"]
        assert b["fields"]["total_tokens"]["spent"] == u.data["run_usage"]["input_tokens"]
    last = updates[-1].data["budgets"][0]["fields"]["total_tokens"]
    assert last == {"spent": 500, "limit": 500}
    assert first.run_id == updates[-1].run_id


def test_G11_measure_budgets_reads_legacy_baselines_as_absolute_limits() -> None:
    """A thread held and approved before this change (baseline + raised limit) keeps its meaning."""
    from workbench.engine.usage import Usage

    state = {"budget_baselines": {"r1": {"0": {"total_tokens": 300}}}, "budget_raises": {"r1": {"0": {"total_tokens": 700}}}}
    [b] = measure_budgets([BudgetLimit("run", {"total_tokens": 300}, interrupt=True)], run_usage=Usage(input_tokens=400),
                          thread_usage=Usage(input_tokens=400), state=state, run_id="r1")
    assert b["fields"] == {"total_tokens": {"spent": 400, "limit": 1000}}
