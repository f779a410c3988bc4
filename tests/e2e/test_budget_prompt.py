"""G11, B3: the CLI's budget hold prompt and ``--budget-approve yes`` speak in the same amounts as the
window's dialog ("allow 300 more tokens", "$0.0100 more"), and what they allow is what the engine
enforces (the decision carries ``allow_more``)."""

from __future__ import annotations

import io
import sys
from typing import Any

import pytest

from tests.harness.test_budget import U, Probe, make
from workbench.cli.decide import _Decider
from workbench.cli.output import _Output
from workbench.engine.models.scripted import ScriptedModel, reply, tool_reply
from workbench.harness.budget import BudgetLimit


async def _held(tmp_path: Any, cap: dict[str, float], usage: Any) -> tuple[Any, Any]:
    probe = Probe()
    model = ScriptedModel([tool_reply(("probe", {"x": str(i)}, f"c{i}"), usage=usage) for i in range(1, 12)]
                          + [reply("done", usage=usage)])
    engine = make(tmp_path, model, [BudgetLimit("run", cap, interrupt=True)], tools=[probe.tool])
    result = await engine.run("t", "go")
    assert result.status == "interrupted"
    return engine, result


def _decider(monkeypatch: pytest.MonkeyPatch, answers: str, budget: str = "ask") -> tuple[_Decider, io.StringIO]:
    err = io.StringIO()
    monkeypatch.setattr(sys, "stdin", io.StringIO(answers))
    monkeypatch.setattr(sys, "stderr", err)
    return _Decider("ask", budget, interactive=True, output=_Output(False, io.StringIO(), err)), err


async def test_G11_prompt_offers_the_limit_again_in_amounts_and_a_typed_amount_is_enforced(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine, first = await _held(tmp_path, {"total_tokens": 300}, U(input=100))
    [q] = first.pending
    decider, err = _decider(monkeypatch, "200\n")
    decision = decider.decide(q)
    text = err.getvalue()
    assert "allow 300 more tokens (the run may go on until 600 tokens (300 spent + 300 more))?" in text
    assert "total_tokens: spent 300 of 300" in text
    assert decision == {"decision": "approve", "allow_more": {"total_tokens": 200}}
    assert "allowing 200 more tokens: the run may go on until 500 tokens" in text
    second = await engine.resume("t", {q.id: decision})
    [q2] = second.pending
    assert (q2.payload["spent"], q2.payload["limit"]) == (500, 500)  # held again at exactly 300 + 200

    decider, err = _decider(monkeypatch, "y\n")
    assert decider.decide(q2) == {"decision": "approve", "allow_more": {"total_tokens": 300}}


async def test_G11_budget_approve_yes_says_the_amount_for_a_cost_cap(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    engine, first = await _held(tmp_path, {"cost_usd": 0.01}, U(input=10, cost=0.0061))
    [q] = first.pending
    decider, err = _decider(monkeypatch, "", budget="yes")
    decision = decider.decide(q)
    assert decision == {"decision": "approve", "allow_more": {"cost_usd": 0.01}}  # the cap again, not a dollar
    assert "allowed $0.0100 more by --budget-approve yes: the run may go on until $0.0222" in err.getvalue()


async def test_G11_prompt_rejects_a_nonsense_amount_and_asks_again(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    _engine, first = await _held(tmp_path, {"total_tokens": 300}, U(input=100))
    [q] = first.pending
    decider, err = _decider(monkeypatch, "-5\nlots\nn\ntoo much\n")
    assert decider.decide(q) == {"decision": "reject", "message": "too much"}
    assert "an amount over 0" in err.getvalue()
