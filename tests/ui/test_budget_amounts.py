"""G11, B3: budget holds speak in amounts, and the hold dialog, the Budget panel and the status bar
show the same spent and limit — live after every usage event, after the run finishes and after a reload.

The issue's defects: "Raise to 700" allowed 700 *more* (the run reached 1,000 tokens with no second
hold); the panel then said 600/700 while the status bar said 1,000; a priced run showed a red
$0.0122/$0.0100 after finishing at $0.0243; the default raise for a $0.01 cap was $1.0122.
Answers go through the dialog with the keyboard and the mouse.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt

from tests.ui.helpers import button, click, find_dialog
from workbench.engine.models.scripted import ScriptedModel, reply, tool_reply
from workbench.engine.usage import Usage
from workbench.session import Session
from workbench.ui.budget_dialog import ask_budget_holds
from workbench.ui.budget_panel import BudgetPanel
from workbench.ui.status_bar import RunStatusBar

DIALOG = "budgetHoldDialog"


def workspace(tmp_path: Path, limit: str) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    (ws / "README.md").write_text("# Project\n", encoding="utf-8")
    (ws / "workbench.yaml").write_text(f"budget:\n  - {{scope: run, limit: {{{limit}}}, interrupt: true}}\n",
                                       encoding="utf-8")
    return ws


def calls(n: int, usage: Usage) -> ScriptedModel:
    return ScriptedModel([tool_reply(("read_file", {"path": "/project/README.md"}, f"c{i}"), usage=usage)
                          for i in range(1, n + 1)] + [reply("done", usage=usage)])


class Views:
    """The Budget panel and the status bar, both fed from the session's events as the window feeds them."""

    def __init__(self, session: Session, qtbot: Any) -> None:
        self.panel = BudgetPanel()
        self.bar = RunStatusBar()
        qtbot.addWidget(self.panel)
        qtbot.addWidget(self.bar)
        self.panel.set_session(session)
        self.bar.set_budgets(session.budget_figures())
        self.mismatches: list[str] = []
        self._unsubscribe = session.subscribe(self._on_event, replay=False)

    def _on_event(self, event: Any) -> None:
        self.panel.handle_event(event)
        self.bar.handle_event(event)
        if event.type in ("budget_updated", "usage_updated", "run_finished"):
            if self.panel_figures() != self.bar_figures():  # after every usage event, not only at the end
                self.mismatches.append(f"{event.type}: panel {self.panel_figures()} bar {self.bar_figures()}")

    def panel_figures(self) -> dict[str, tuple[float, float]]:
        m = self.panel.meter("run", self.field)
        return {self.field: (round(m.spent, 9), round(m.limit, 9))}

    def bar_figures(self) -> dict[str, tuple[float, float]]:
        v = self.bar.budgets[0]["fields"][self.field]
        return {self.field: (round(float(v["spent"]), 9), round(float(v["limit"]), 9))}

    field = "total_tokens"

    def close(self) -> None:
        self._unsubscribe()


async def decide(qtbot: Any, session: Session, act: Any) -> tuple[dict[str, Any], list[tuple[str, str, str]]]:
    """Open the hold dialog on the session's pending holds, act on it; the decisions and its table."""
    task = asyncio.ensure_future(ask_budget_holds(session.pending, None))
    dialog = await find_dialog(DIALOG)
    table = dialog.table
    rows = [tuple(table.item(r, c).text() for c in (1, 2, 3)) for r in range(table.rowCount())]
    act(dialog)
    return await asyncio.wait_for(task, 10), rows


async def test_G11_allowed_amount_is_enforced_and_every_view_agrees(tmp_path: Path, qtbot: Any) -> None:
    session = await Session.open(workspace(tmp_path, "total_tokens: 300"), model=calls(12, Usage(input_tokens=100, calls=1)))
    views = Views(session, qtbot)
    first = await session.run("go")
    assert first.status == "interrupted"

    def allow_200(d: Any) -> None:
        spin = d.allow_spins["total_tokens"]
        assert spin.value() == 300  # the default is the configured limit again, not 2x or spent + limit
        spin.selectAll()
        qtbot.keyClicks(spin, "200")
        assert d.continue_button.text() == "Allow 200 more tokens"
        assert "until 500 tokens (300 spent + 200 more)" in d.allow_summary.text()
        click(qtbot, button(d, "budgetContinue"))

    decisions, rows = await decide(qtbot, session, allow_200)
    assert rows == [("Total tokens", "300", "300")]
    assert views.panel_figures() == views.bar_figures() == {"total_tokens": (300, 300)}
    assert set(d["allow_more"]["total_tokens"] for d in decisions.values()) == {200}

    second = await session.resume(decisions)
    # Held again at exactly 300 + 200 = 500 (the old dialog let the run reach 1,000 with no second hold).
    assert second.status == "interrupted"
    assert sum(u.total_tokens for _, u in session.store.usage_calls(session.thread_id, first.run_id)) == 500
    assert views.panel_figures() == views.bar_figures() == {"total_tokens": (500, 500)}
    assert "500 / 500" in views.bar.budget_label.text() and "reached" in views.bar.budget_label.text()

    def stop(d: Any) -> None:
        qtbot.keyClicks(d.reason_edit, "enough")
        qtbot.keyClick(d.reason_edit, Qt.Key.Key_Return)

    decisions, rows = await decide(qtbot, session, stop)
    assert rows == [("Total tokens", "500", "500")]  # the dialog's figures are the panel's and the bar's
    third = await session.resume(decisions)
    assert third.status == "aborted"
    assert views.mismatches == []
    after = views.panel_figures()
    views.close()

    # After a reload: the same figures from the store.
    await session.close()
    reopened = await Session.open(session.workspace, session.thread_id, model=ScriptedModel([]))
    again = Views(reopened, qtbot)
    assert again.panel_figures() == again.bar_figures() == after == {"total_tokens": (500, 500)}
    again.close()
    await reopened.close()


async def test_G11_cost_hold_defaults_to_the_cap_again_and_figures_agree_after_finishing(
    tmp_path: Path, qtbot: Any
) -> None:
    """A $0.01 cap: the default amount is $0.01 more (it was $1.0122); after the run the views agree."""
    ws = workspace(tmp_path, "cost_usd: 0.01")
    session = await Session.open(ws, model=calls(3, Usage(input_tokens=10, cost_usd=0.0061, calls=1)))
    views = Views(session, qtbot)
    views.field = "cost_usd"
    first = await session.run("go")
    assert first.status == "interrupted"

    def allow_default(d: Any) -> None:
        spin = d.allow_spins["cost_usd"]
        assert abs(spin.value() - 0.01) < 1e-9
        assert d.continue_button.text() == "Allow $0.0100 more"
        assert "until $0.0222 ($0.0122 spent + $0.0100 more)" in d.allow_summary.text()
        click(qtbot, button(d, "budgetContinue"))

    decisions, rows = await decide(qtbot, session, allow_default)
    assert rows == [("Cost (USD)", "$0.0122", "$0.0100")]
    result = await session.resume(decisions)
    # 0.0122 + 0.0061 = 0.0183 < 0.0222: the tool calls ran; the last turn overshoots by one call (B2).
    assert result.status == "done", result.error
    assert views.mismatches == []
    spent, limit = views.panel_figures()["cost_usd"]
    assert abs(spent - 0.0244) < 1e-9 and abs(limit - 0.0222) < 1e-9  # never $0.0122/$0.0100 after the run
    meter = views.panel.meter("run", "cost_usd")
    assert meter.text.startswith("$0.0244 / $0.0222")
    views.close()
    await session.close()
