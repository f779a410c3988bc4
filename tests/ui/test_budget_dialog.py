"""The budget hold dialog (G3, issue 5 item 4): spent vs limit per field, the held tool calls, and
Continue / Raise the limit / Stop with a reason, answered through a real Session's resume."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import shiboken6
from PySide6.QtCore import Qt

from tests.stub_server import StubReply, StubServer
from tests.ui.helpers import button, click, find_dialog, visible_dialog
from workbench.engine.middleware import Question
from workbench.engine.models.scripted import ScriptedModel, reply, tool_reply
from workbench.engine.usage import Usage
from workbench.session import Session
from workbench.ui.budget_dialog import CLOSED_REASON, BudgetHoldDialog, ask_budget_hold, ask_budget_holds
from workbench.ui.budget_panel import BudgetPanel

DIALOG = "budgetHoldDialog"
HOLD_YAML = "budget:\n  - {scope: run, limit: {total_tokens: 100}, interrupt: true}\n"


def workspace(tmp_path: Path, yaml: str = HOLD_YAML) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    (ws / "README.md").write_text("# Project\n", encoding="utf-8")
    (ws / "notes.txt").write_text("notes\n", encoding="utf-8")
    (ws / "workbench.yaml").write_text(yaml, encoding="utf-8")
    return ws


def U(input: int, output: int = 0) -> Usage:
    return Usage(input_tokens=input, output_tokens=output, calls=1)


def hold(call: str = "c1", tool: str | None = "read_file", args: dict[str, Any] | None = None) -> Question:
    fields = {"total_tokens": {"spent": 150.0, "limit": 100.0}, "cost_usd": {"spent": 0.01, "limit": 1.0}}
    data = {"budget": 0, "scope": "run", "field": "total_tokens", "spent": 150.0, "limit": 100.0,
            "priced": False, "fields": fields}
    return Question(f"budget-r1-{call}", "budget_hold",
                    {**data, "budgets": [data], "tool": tool, "arguments": args or {"path": "/project/README.md"},
                     "reason": "run budget reached: total_tokens 150 of 100"}, call_id=call)


async def answer(qtbot: Any, coro: Any, act: Any) -> Any:
    """Run ``coro`` (which opens the dialog), act on the visible dialog, return what the coroutine gave."""
    task = asyncio.ensure_future(coro)
    dialog = await find_dialog(DIALOG)
    act(dialog)
    return await asyncio.wait_for(task, 10)


# -- the dialog itself ---------------------------------------------------------------------------------
def test_shows_the_limit_the_fields_and_the_held_calls(qtbot: Any) -> None:
    dialog = BudgetHoldDialog([hold("c1"), hold("c2", "write_file", {"path": "/project/x.txt", "content": "hi"})])
    qtbot.addWidget(dialog)
    assert "total_tokens 150 of 100" in dialog.headline.text()
    table = dialog.table
    cells = [[table.item(r, c).text() for c in range(table.columnCount())] for r in range(table.rowCount())]
    assert cells == [["run #1", "Total tokens", "150", "100", "150%"],
                     ["run #1", "Cost (USD)", "$0.0100", "$1.00", "1%"]]
    text = dialog.calls_view.toPlainText()
    assert "read_file" in text and "/project/README.md" in text and "write_file" in text and '"content": "hi"' in text
    assert not dialog.unpriced_label.isHidden()  # priced False: tokens only
    assert set(dialog.allow_spins) == {"total_tokens"}  # only the field at its limit gets an amount


def test_the_no_price_note_is_only_for_a_budget_that_caps_cost(qtbot: Any) -> None:
    """B5: the step limit held on an unpriced model says nothing about prices; a token limit without a
    cost cap neither. With cost capped (the test above) the note is there."""
    steps = {"budget": None, "scope": "run", "field": "steps", "spent": 200.0, "limit": 200.0, "priced": False,
             "fields": {"steps": {"spent": 200.0, "limit": 200.0}}}
    tokens = {**steps, "field": "total_tokens", "fields": {"total_tokens": {"spent": 150.0, "limit": 100.0}}}
    for data in (steps, tokens):
        dialog = BudgetHoldDialog(Question("budget-r1-c1", "budget_hold", {**data, "budgets": [data],
                                                                           "reason": "run budget reached"}))
        qtbot.addWidget(dialog)
        assert dialog.unpriced_label.isHidden(), data["field"]


def test_G11_allow_more_must_be_over_zero_and_says_the_total(qtbot: Any) -> None:
    dialog = BudgetHoldDialog(hold())
    qtbot.addWidget(dialog)
    spin = dialog.allow_spins["total_tokens"]
    assert spin.value() == 100  # the configured limit again (B3)
    spin.setValue(0)
    assert not dialog.continue_button.isEnabled()
    spin.setValue(400)
    assert dialog.continue_button.isEnabled() and dialog.continue_button.text() == "Allow 400 more tokens"
    assert "until 550 tokens (150 spent + 400 more)" in dialog.allow_summary.text()
    dialog.choose_continue()
    assert dialog.decision() == {"decision": "approve", "allow_more": {"total_tokens": 400}}


def test_closing_without_a_choice_fails_closed(qtbot: Any) -> None:
    dialog = BudgetHoldDialog(hold())
    qtbot.addWidget(dialog)
    assert dialog.decision() == {"decision": "reject", "reason": CLOSED_REASON, "message": CLOSED_REASON}


async def test_ask_budget_hold_allow_more_stop_and_escape(qtbot: Any) -> None:
    got = await answer(qtbot, ask_budget_hold(hold()), lambda d: click(qtbot, button(d, "budgetContinue")))
    assert got == {"decision": "approve", "allow_more": {"total_tokens": 100}}

    def allow_250(d: Any) -> None:
        d.allow_spins["total_tokens"].setValue(250)
        click(qtbot, button(d, "budgetContinue"))

    got = await answer(qtbot, ask_budget_hold(hold()), allow_250)
    assert got == {"decision": "approve", "allow_more": {"total_tokens": 250}}

    def stop(d: Any) -> None:
        qtbot.keyClicks(d.reason_edit, "too expensive")
        click(qtbot, button(d, "budgetStop"))

    got = await answer(qtbot, ask_budget_hold(hold()), stop)
    assert got == {"decision": "reject", "reason": "too expensive", "message": "too expensive"}

    got = await answer(qtbot, ask_budget_hold(hold()), lambda d: qtbot.keyClick(d, Qt.Key.Key_Escape))
    assert got["decision"] == "reject" and got["reason"] == CLOSED_REASON


async def test_one_dialog_decides_every_hold_of_the_step(qtbot: Any) -> None:
    got = await answer(qtbot, ask_budget_holds([hold("c1"), hold("c2")], None),
                       lambda d: click(qtbot, button(d, "budgetContinue")))
    d = {"decision": "approve", "allow_more": {"total_tokens": 100}}
    assert got == {"budget-r1-c1": d, "budget-r1-c2": d}


async def test_cancelling_the_ask_closes_the_dialog(qtbot: Any) -> None:
    task = asyncio.ensure_future(ask_budget_hold(hold()))
    dialog = await find_dialog(DIALOG)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not shiboken6.isValid(dialog) or not dialog.isVisible()
    assert visible_dialog(DIALOG) is None


# -- end to end: a real Session suspends on the hold, the dialog's answer resumes it ------------------
async def test_continue_finishes_the_run_through_the_stub_server(
    tmp_path: Path, qtbot: Any, stub_server: StubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    ws = workspace(tmp_path, f"model: openai/test-model\napi_base: {stub_server.url}\n" + HOLD_YAML)
    stub_server.script(
        StubReply(tool_calls=[("read_file", {"path": "/project/README.md"}, "c1"),
                              ("read_file", {"path": "/project/notes.txt"}, "c2")], usage=(120, 30)),
        StubReply(text="Both files read.", usage=(40, 10)),
    )
    session = await Session.open(ws, threaded_model=False)
    panel = BudgetPanel()
    qtbot.addWidget(panel)
    panel.set_session(session)
    unsubscribe = session.subscribe(panel.handle_event, replay=False)

    first = await session.run("read both")
    assert first.status == "interrupted", first.error
    pending = session.pending
    assert [q.kind for q in pending] == ["budget_hold", "budget_hold"]
    assert panel.meter("run", "total_tokens").text == "150 / 100 (150%) — over the limit" and "Held" in panel.status_label.text()

    def cont(d: Any) -> None:
        assert {tool for tool, _ in d.held_calls()} == {"read_file"}
        assert "/project/notes.txt" in d.calls_view.toPlainText()
        click(qtbot, button(d, "budgetContinue"))

    decisions = await answer(qtbot, ask_budget_holds(pending, None), cont)
    result = await session.resume(decisions)
    assert result.status == "done" and result.answer == "Both files read."
    assert session.status == "done" and stub_server.remaining == 0
    # The full limit again (G11, absolute): 150 spent + 100 more = 250; the run ended at 200.
    meter = panel.meter("run", "total_tokens")
    assert (meter.spent, meter.limit) == (200, 250)
    assert panel.run_usage.total_tokens == 200
    unsubscribe()
    await session.close()


async def test_stop_ends_the_run_aborted_and_keeps_the_partial_answer(tmp_path: Path, qtbot: Any) -> None:
    ws = workspace(tmp_path)
    model = ScriptedModel([
        tool_reply(("read_file", {"path": "/project/README.md"}, "c1"), text="Reading the readme first.",
                   usage=U(150)),
        reply("never said"),
    ])
    session = await Session.open(ws, model=model)
    panel = BudgetPanel()
    qtbot.addWidget(panel)
    panel.set_session(session)
    unsubscribe = session.subscribe(panel.handle_event, replay=False)
    first = await session.run("go")
    assert first.status == "interrupted"
    [q] = session.pending

    def stop(d: Any) -> None:
        d.reason_edit.setText("too expensive")
        click(qtbot, button(d, "budgetStop"))

    decision = await answer(qtbot, ask_budget_hold(q, None), stop)
    result = await session.resume({q.id: decision})
    assert result.status == "aborted" and session.status == "aborted"
    assert "too expensive" in (result.error or "")
    assert result.answer == "Reading the readme first."
    assistant = [m for m in session.messages if m.role == "assistant"]
    assert assistant[-1].content == "Reading the readme first."  # the transcript keeps the partial answer
    assert model.calls == 1
    assert "Stopped" in panel.status_label.text()
    unsubscribe()
    await session.close()


async def test_allow_more_sets_allow_more_and_the_run_goes_on(tmp_path: Path, qtbot: Any) -> None:
    ws = workspace(tmp_path)
    model = ScriptedModel([
        tool_reply(("read_file", {"path": "/project/README.md"}, "c1"), usage=U(150)),
        tool_reply(("read_file", {"path": "/project/notes.txt"}, "c2"), usage=U(150)),
        reply("done", usage=U(10)),
    ])
    session = await Session.open(ws, model=model)
    panel = BudgetPanel()
    qtbot.addWidget(panel)
    panel.set_session(session)
    unsubscribe = session.subscribe(panel.handle_event, replay=False)
    first = await session.run("go")
    [q] = first.pending

    def allow(d: Any) -> None:
        d.allow_spins["total_tokens"].setValue(400)
        click(qtbot, button(d, "budgetContinue"))

    decision = await answer(qtbot, ask_budget_hold(q, None), allow)
    assert decision == {"decision": "approve", "allow_more": {"total_tokens": 400}}
    result = await session.resume({q.id: decision})
    # 150 spent + 400 more = 550: 150 + 150 + 10 never reach it, no second hold.
    assert result.status == "done" and result.answer == "done" and model.calls == 3
    meter = panel.meter("run", "total_tokens")
    assert (meter.spent, meter.limit) == (310, 550)
    assert "more allowed" in meter.toolTip()
    unsubscribe()
    await session.close()


async def test_g7_a_double_click_on_allow_more_does_not_approve_the_next_hold(qtbot: Any) -> None:
    """G7: the next hold's dialog opens 50–100 ms after "Allow more", its button under the same pointer:
    the second press of the double click that approved the first hold must not approve the second, which
    the person never saw (found by a review). A press after the settle time decides it."""
    from tests.ui.helpers import hand_settled, wait_for

    first_task = asyncio.ensure_future(ask_budget_hold(hold("c1")))
    first = await find_dialog(DIALOG)
    where = first.geometry()
    spot = first.continue_button.mapToGlobal(first.continue_button.rect().center())
    qtbot.mouseClick(first.continue_button, Qt.MouseButton.LeftButton)  # the double click's first press
    assert (await asyncio.wait_for(first_task, 5))["decision"] == "approve"

    second_task = asyncio.ensure_future(ask_budget_hold(hold("c2")))
    second = await wait_for(lambda: visible_dialog(DIALOG), 5, "the next hold")  # no waiting: the same gesture
    second.setGeometry(where)
    local = second.continue_button.mapFromGlobal(spot)
    assert second.continue_button.rect().contains(local) or (local - second.continue_button.rect().center()
                                                             ).manhattanLength() <= 16
    qtbot.mousePress(second.continue_button, Qt.MouseButton.LeftButton, pos=local)  # its second press
    qtbot.mouseRelease(second.continue_button, Qt.MouseButton.LeftButton, pos=local)
    await asyncio.sleep(0.05)
    assert not second_task.done() and second.isVisible()  # the second hold is still asked
    await hand_settled()  # a person who looks at the new hold, then decides
    qtbot.mouseClick(second.continue_button, Qt.MouseButton.LeftButton, pos=local)
    assert (await asyncio.wait_for(second_task, 5))["decision"] == "approve"
