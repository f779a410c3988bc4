"""The Budget dock (G2, issue 5 item 3): meters per capped field, run and session side by side, cost
with a per-model breakdown, live from ``usage_updated`` and rebuilt from the store on ``set_session``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.stub_server import StubReply, StubServer
from workbench.engine.events import Event
from workbench.engine.models.scripted import ScriptedModel, reply, tool_reply
from workbench.engine.usage import Usage
from workbench.session import Session
from workbench.ui.budget_panel import LEVEL_COLORS, BudgetPanel, ModelUsageModel, level_for


def workspace(tmp_path: Path, yaml: str = "") -> Path:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    (ws / "README.md").write_text("# Project\n", encoding="utf-8")
    (ws / "workbench.yaml").write_text(yaml, encoding="utf-8")
    return ws


BUDGETS = (
    "budget:\n"
    "  - {scope: run, limit: {total_tokens: 1000, cost_usd: 0.10}}\n"
    "  - {scope: session, limit: {input_tokens: 500}}\n"
)


async def open_with_panel(ws: Path, model: Any, qtbot: Any, **kw: Any) -> tuple[Session, BudgetPanel, Any]:
    session = await Session.open(ws, model=model, **kw)
    panel = BudgetPanel()
    qtbot.addWidget(panel)
    panel.set_session(session)
    unsubscribe = session.subscribe(panel.handle_event, replay=False)
    return session, panel, unsubscribe


def test_level_thresholds() -> None:
    assert level_for(0, 100) == "ok" and level_for(74.9, 100) == "ok"
    assert level_for(75, 100) == "warn" and level_for(99.9, 100) == "warn"
    assert level_for(100, 100) == "over" and level_for(150, 100) == "over" and level_for(0, 0) == "over"


def test_model_usage_model_passes_qtmodeltester(qtmodeltester: Any) -> None:
    model = ModelUsageModel()
    model.set_rows({
        "gpt-x": Usage(input_tokens=100, output_tokens=20, cost_usd=0.01, calls=2),
        "local": Usage(input_tokens=5, output_tokens=1, calls=1, unpriced_calls=1),
    })
    qtmodeltester.check(model)
    assert model.index(1, ModelUsageModel.COST).data() == "n/a"
    assert model.index(0, ModelUsageModel.COST).data() == "$0.0100"


async def test_meters_follow_usage_updated_and_rebuild_from_the_store(tmp_path: Path, qtbot: Any) -> None:
    ws = workspace(tmp_path, BUDGETS)
    model = ScriptedModel([
        tool_reply(("read_file", {"path": "/project/README.md"}),
                   usage=Usage(input_tokens=200, output_tokens=100, cost_usd=0.02, calls=1), model="gpt-a"),
        reply("All read.", usage=Usage(input_tokens=200, output_tokens=300, cost_usd=0.06, calls=1), model="gpt-b"),
    ])
    session, panel, unsubscribe = await open_with_panel(ws, model, qtbot)
    seen: list[tuple[float, float]] = []
    session.subscribe(lambda e: e.type == "budget_updated" and e.step > 0 and seen.append(
        (panel.meter("run", "total_tokens").spent, panel.meter("session", "input_tokens").spent)), replay=False)

    result = await session.run("read the readme")
    assert result.status == "done"
    assert seen == [(300, 200), (800, 400)]  # moved after every model call, not only at the end

    total = panel.meter("run", "total_tokens")
    assert (total.spent, total.limit) == (800, 1000)
    assert total.text == "800 / 1,000 (80%) — near the limit" and total.level == "warn"
    assert LEVEL_COLORS["warn"] in total.bar.styleSheet()
    cost = panel.meter("run", "cost_usd")
    assert cost.spent == pytest.approx(0.08) and cost.text == "$0.0800 / $0.1000 (80%) — near the limit"
    session_input = panel.meter("session", "input_tokens")
    assert (session_input.spent, session_input.limit, session_input.level) == (400, 500, "warn")
    assert panel.meter("session", "total_tokens") is None  # only capped fields get a meter
    assert panel.hint_label.isHidden()

    rows = {m: u for m, u in panel.models.rows()}
    assert rows["gpt-a"].calls == 1 and rows["gpt-b"].output_tokens == 300
    assert "$0.0800" in panel.cost_label.text()
    assert panel.unpriced_label.isHidden()

    # A second run: the run meter starts over, the session meter keeps counting.
    model.add(reply("Again.", usage=Usage(input_tokens=200, output_tokens=0, cost_usd=0.01, calls=1), model="gpt-a"))
    await session.run("again")
    assert panel.meter("run", "total_tokens").spent == 200
    assert panel.meter("session", "input_tokens").spent == 600
    assert panel.meter("session", "input_tokens").level == "over"
    assert LEVEL_COLORS["over"] in panel.meter("session", "input_tokens").bar.styleSheet()

    # A fresh panel rebuilt from the store shows the same: thread usage, and the last run's.
    fresh = BudgetPanel()
    qtbot.addWidget(fresh)
    fresh.set_session(session)
    assert fresh.meter("run", "total_tokens").spent == 200
    assert fresh.meter("session", "input_tokens").spent == 600
    assert {m: u.calls for m, u in fresh.models.rows()} == {"gpt-a": 2, "gpt-b": 1}
    fresh.breakdown_scope.setCurrentIndex(fresh.breakdown_scope.findData("run"))
    assert {m: u.calls for m, u in fresh.models.rows()} == {"gpt-a": 1}
    unsubscribe()
    await session.close()


async def test_stub_server_usage_through_litellm_shows_in_the_meters(
    tmp_path: Path, qtbot: Any, stub_server: StubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    ws = workspace(tmp_path, f"model: openai/test-model\napi_base: {stub_server.url}\n"
                             "budget:\n  - {scope: run, limit: {total_tokens: 1000, cost_usd: 1.0}}\n"
                             "  - {scope: session, limit: {output_tokens: 100}}\n")
    stub_server.script(StubReply(text="Hello from the stub.", usage=(120, 30)))
    session, panel, unsubscribe = await open_with_panel(ws, None, qtbot, threaded_model=False)
    result = await session.run("hi")
    assert result.status == "done", result.error
    total = panel.meter("run", "total_tokens")
    assert (total.spent, total.limit, total.level) == (150, 1000, "ok")
    assert total.text == "150 / 1,000 (15%)"
    out = panel.meter("session", "output_tokens")
    assert (out.spent, out.limit) == (30, 100)
    # The stub's model has no price in litellm: tokens only, and the panel says so.
    [(name, usage)] = panel.models.rows()
    assert usage.input_tokens == 120 and usage.output_tokens == 30 and usage.cost_usd is None
    assert panel.models.index(0, ModelUsageModel.COST).data() == "n/a"
    assert not panel.unpriced_label.isHidden()
    assert panel.unpriced_label.text() == f"tokens only — {name} has no price in litellm"
    assert "tokens only" in panel.run_box.usage_label.text()
    assert "no price" in panel.meter("run", "cost_usd").toolTip()
    unsubscribe()
    await session.close()


async def test_without_a_budget_usage_alone_and_a_hint(tmp_path: Path, qtbot: Any) -> None:
    ws = workspace(tmp_path)
    model = ScriptedModel([reply("ok", usage=Usage(input_tokens=42, output_tokens=8, cost_usd=0.001, calls=1))])
    session, panel, unsubscribe = await open_with_panel(ws, model, qtbot)
    panel.show()
    await session.run("hi")
    assert panel.hint_label.isVisible() and "workbench.yaml" in panel.hint_label.text()
    assert "budget:" in panel.hint_label.text()
    # B5: no budget of its own, yet every run holds at its step limit: the run's step meter, nothing else
    assert list(panel.run_box.meters) == [(0, "steps")] and panel.session_box.meters == {}
    steps = panel.meter("run", "steps")
    assert (steps.spent, steps.limit) == (1, 200) and steps.text.startswith("1 / 200")
    assert panel.run_box.usage_label.text().startswith("42 in · 8 out · 1 call")
    assert "$0.0010" in panel.session_box.usage_label.text()
    unsubscribe()
    await session.close()


async def test_hold_and_exceeded_events_show_the_middlewares_figures_and_custom_counters(
    tmp_path: Path, qtbot: Any
) -> None:
    ws = workspace(tmp_path, "budget:\n  - {scope: run, limit: {total_tokens: 100, searches: 5}, interrupt: true}\n")
    session, panel, unsubscribe = await open_with_panel(ws, ScriptedModel([]), qtbot)
    panel.show()
    searches = panel.meter("run", "searches")
    assert searches is not None and searches.name_label.text() == "searches (counter)"
    tid = session.thread_id
    fields = {"total_tokens": {"spent": 150, "limit": 100}, "searches": {"spent": 4, "limit": 5}}
    panel.handle_event(Event("budget_hold", tid, "r1", 1, {"budget": 0, "scope": "run", "field": "total_tokens",
                                                            "spent": 150, "limit": 100, "priced": True,
                                                            "fields": fields, "question": "budget-r1-c1"}))
    assert panel.meter("run", "total_tokens").text == "150 / 100 (150%) — over the limit"
    assert panel.meter("run", "total_tokens").level == "over"
    assert (searches.spent, searches.level) == (4, "warn")
    assert panel.status_label.isVisible() and "Held" in panel.status_label.text()
    panel.handle_event(Event("budget_exceeded", tid, "r1", 2, {"budget": 0, "scope": "run", "field": "total_tokens",
                                                                "spent": 150, "limit": 100, "priced": True,
                                                                "fields": fields, "refused": True}))
    assert "Stopped" in panel.status_label.text() and "you chose to stop" in panel.status_label.text()
    # Events of another thread are not this panel's business.
    panel.handle_event(Event("usage_updated", "other", "r9", 1, {"run_usage": {"total_tokens": 1}, "thread_usage": {}}))
    assert panel.meter("run", "total_tokens").spent == 150
    unsubscribe()
    await session.close()
