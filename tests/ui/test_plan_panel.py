"""G2 Plan dock (issue 4 item 4, T6): the plan follows a run live, is rebuilt from the store when a
thread opens, and keeps a history of its changes; both item models pass qtmodeltester."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt

from workbench.engine.events import Event
from workbench.engine.models.scripted import ScriptedModel, reply, tool_reply
from workbench.session import Session
from workbench.ui.plan_panel import (
    GLYPHS,
    IdRole,
    PlanHistoryModel,
    PlanPanel,
    StatusRole,
    TodoListModel,
    plan_changes,
)

PLAN = ["Read the README", "Write the notes", "Tell the user"]


def todos(*statuses: str, ids: bool = True) -> dict[str, Any]:
    return {"todos": [{"content": c, "status": s, **({"id": i + 1} if ids else {})}
                      for i, (c, s) in enumerate(zip(PLAN, statuses))]}


def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "workbench.yaml").write_text(f"mounts:\n  /user: {{host: {tmp_path / 'user'}}}\n", encoding="utf-8")
    return ws


def script() -> ScriptedModel:
    return ScriptedModel([
        tool_reply(("write_todos", todos("in_progress", "pending", "pending", ids=False))),
        tool_reply(("write_todos", todos("done", "in_progress", "pending"))),
        tool_reply(("write_todos", todos("done", "done", "done"))),
        reply("All done."),
    ])


def ev(type_: str, seq: int, step: int = 1, thread: str = "t1", **data: Any) -> Event:
    return Event(type=type_, thread_id=thread, run_id="run-1", step=step, data=data, time=1_700_000_000.0 + seq, seq=seq)


def statuses(panel: PlanPanel) -> list[tuple[int, str]]:
    return [(i["id"], i["status"]) for i in panel.model.items]


@pytest.fixture
def panel(qtbot: Any) -> PlanPanel:
    p = PlanPanel()
    qtbot.addWidget(p)
    return p


async def test_follows_a_run_live_and_rebuilds_from_the_store(tmp_path: Path, qtbot: Any, panel: PlanPanel) -> None:
    model = script()
    session = await Session.open(workspace(tmp_path), model=model)
    try:
        panel.set_session(session)
        assert panel.model.rowCount() == 0 and panel.placeholder.isVisibleTo(panel)
        seen: list[list[tuple[int, str]]] = []

        def after_panel(event: Event) -> None:
            if event.type == "todos_progress":  # the panel already had it: what does it show now?
                seen.append(statuses(panel))

        unsubscribe = session.subscribe(panel.handle_event, replay=False)
        unsubscribe_probe = session.subscribe(after_panel, replay=False)
        result = await session.run("Make notes")
        unsubscribe()
        unsubscribe_probe()
        assert result.status == "done"
        model.assert_all_used()

        # Live: every write_todos showed at once, in order.
        assert seen == [
            [(1, "in_progress"), (2, "pending"), (3, "pending")],
            [(1, "done"), (2, "in_progress"), (3, "pending")],
            [(1, "done"), (2, "done"), (3, "done")],
        ]
        assert [i["content"] for i in panel.model.items] == PLAN
        assert panel.summary_label.text().startswith("3 of 3 done")
        # The history: one entry per write_todos.
        changes = panel.history_model.changes
        assert len(changes) == 3
        assert changes[0].added == ((1, "in_progress"), (2, "pending"), (3, "pending"))
        assert changes[1].changed == ((1, "in_progress", "done"), (2, "pending", "in_progress"))
        assert changes[2].changed == ((2, "in_progress", "done"), (3, "pending", "done"))
        assert panel.history_button.text() == "History (3)"
        row = panel.history_model.data(panel.history_model.index(1), Qt.ItemDataRole.DisplayRole)
        assert "#1 in progress → done" in row and "#2 pending → in progress" in row
        tip = panel.history_model.data(panel.history_model.index(0), Qt.ItemDataRole.ToolTipRole)
        assert "#1 Read the README" in tip  # item texts from the live list

        # Reopening: a new panel rebuilds the same list and history from the store.
        again = PlanPanel()
        qtbot.addWidget(again)
        again.set_session(session)
        assert again.model.items == panel.model.items
        assert again.history_model.changes == changes
        # The bridge replays durable events after set_session: no duplicate history entries.
        session.subscribe(again.handle_event, replay=True)()
        assert len(again.history_model.changes) == 3

        # Another thread: its own (empty) plan and history.
        session.new_thread()
        again.set_session(session)
        assert again.model.rowCount() == 0 and again.history_model.rowCount() == 0
        assert again.history_button.text() == "History (0)" and not again.history_button.isEnabled()
    finally:
        await session.close()


async def test_run_end_takes_the_committed_plan(tmp_path: Path, panel: PlanPanel) -> None:
    """A list shown live but not committed (e.g. a blocked output restored it, T7) is replaced at run end."""
    model = ScriptedModel([tool_reply(("write_todos", todos("pending", "pending", "pending", ids=False))), reply("ok")])
    session = await Session.open(workspace(tmp_path), model=model)
    try:
        await session.run("plan")
        panel.set_session(session)
        committed = panel.model.items
        panel.handle_event(ev("todos_progress", 0, thread=session.thread_id,
                              items=[{"id": 9, "content": "never committed", "status": "in_progress"}]))
        assert statuses(panel) == [(9, "in_progress")]
        last = session.store.events(session.thread_id)[-1].seq
        panel.handle_event(ev("run_finished", last, thread=session.thread_id, status="done"))  # a replayed one
        assert statuses(panel) == [(9, "in_progress")]
        panel.handle_event(ev("run_finished", last + 1, thread=session.thread_id, status="done"))
        assert panel.model.items == committed
    finally:
        await session.close()


async def test_icons_emphasis_and_greyed_done(panel: PlanPanel) -> None:
    panel.handle_event(ev("todos_progress", 0, thread="t1", items=[
        {"id": 1, "content": "a", "status": "done"},
        {"id": 2, "content": "b", "status": "in_progress"},
        {"id": 3, "content": "c", "status": "pending"},
        {"id": 4, "content": "d", "status": "completed"},  # alias of done
    ]))
    m = panel.model
    assert [m.data(m.index(r), Qt.ItemDataRole.DisplayRole) for r in range(4)] == ["a", "b", "c", "d"]
    for r in range(4):
        assert not m.data(m.index(r), Qt.ItemDataRole.DecorationRole).isNull()  # the status icon
    tips = [m.data(m.index(r), Qt.ItemDataRole.ToolTipRole) for r in range(4)]
    assert [t[0] for t in tips] == [GLYPHS["done"], GLYPHS["in_progress"], GLYPHS["pending"], GLYPHS["done"]]
    assert m.data(m.index(1), Qt.ItemDataRole.AccessibleTextRole) == "in progress: b"
    assert m.data(m.index(0), Qt.ItemDataRole.FontRole).strikeOut()
    assert m.data(m.index(0), Qt.ItemDataRole.ForegroundRole) is not None  # greyed
    assert m.data(m.index(1), Qt.ItemDataRole.FontRole).bold()
    assert m.data(m.index(2), Qt.ItemDataRole.FontRole) is None
    assert m.data(m.index(3), StatusRole) == "done" and m.data(m.index(3), IdRole) == 4
    assert panel.summary_label.text() == "2 of 4 done · 1 in progress · 1 pending"


async def test_durable_events_alone_keep_the_list_and_history(panel: PlanPanel) -> None:
    """Replayed (or missed-live) ``todos_updated`` events still bring the statuses and the history."""
    panel.handle_event(ev("todos_updated", 1, items=[{"id": 1, "status": "pending"}, {"id": 2, "status": "pending"}]))
    panel.handle_event(ev("todos_updated", 2, step=2, items=[{"id": 2, "status": "in_progress"}, {"id": 3, "status": "pending"}]))
    panel.handle_event(ev("todos_updated", 2, step=2, items=[{"id": 2, "status": "in_progress"}]))  # a repeat: ignored
    assert statuses(panel) == [(2, "in_progress"), (3, "pending")]
    changes = panel.history_model.changes
    assert len(changes) == 2
    assert changes[1].removed == (1,) and changes[1].added == ((3, "pending"),)
    assert changes[1].changed == ((2, "pending", "in_progress"),)
    assert changes[1].summary() == "added #3 · #2 pending → in progress · removed #1"
    # The pure function gives the same history.
    assert plan_changes([ev("todos_updated", 1, items=[{"id": 1, "status": "pending"}, {"id": 2, "status": "pending"}]),
                         ev("todos_updated", 2, step=2, items=[{"id": 2, "status": "in_progress"},
                                                             {"id": 3, "status": "pending"}])]) == changes


async def test_other_threads_events_are_ignored(tmp_path: Path, panel: PlanPanel) -> None:
    session = await Session.open(workspace(tmp_path), model=ScriptedModel([]))
    try:
        panel.set_session(session)
        panel.handle_event(ev("todos_progress", 0, thread="someone-else", items=[{"id": 1, "content": "x", "status": "pending"}]))
        assert panel.model.rowCount() == 0
    finally:
        await session.close()


async def test_history_is_collapsible(panel: PlanPanel) -> None:
    panel.handle_event(ev("todos_updated", 1, items=[{"id": 1, "status": "pending"}]))
    assert panel.history_view.isHidden()
    panel.set_history_expanded(True)
    assert not panel.history_view.isHidden() and panel.history_button.arrowType() == Qt.ArrowType.DownArrow
    panel.set_history_expanded(False)
    assert panel.history_view.isHidden()


def test_models_pass_qtmodeltester(qtmodeltester: Any) -> None:
    model = TodoListModel()
    model.set_items([{"id": 1, "content": "a", "status": "pending"}, {"id": 2, "content": "b", "status": "in_progress"}])
    qtmodeltester.check(model)
    model.set_items([{"id": 1, "content": "a", "status": "done"}, {"id": 2, "content": "b", "status": "done"}])  # in place
    model.set_items([{"id": 3, "content": "c", "status": "pending"}])  # reset
    qtmodeltester.check(model, force_py=True)

    history = PlanHistoryModel()
    history.set_changes(plan_changes([ev("todos_updated", 1, items=[{"id": 1, "status": "pending"}])]))
    history.append(plan_changes([ev("todos_updated", 2, items=[{"id": 1, "status": "done"}])])[0])
    history.set_contents({1: "a"})
    qtmodeltester.check(history)
    qtmodeltester.check(history, force_py=True)

