"""G2 Events dock: the durable event log, filterable by type and text; the model passes qtmodeltester."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from workbench.engine.events import Event
from workbench.ui.events_panel import ALL_TYPES, COLUMNS, EventRole, EventsModel, EventsPanel, summarize


@pytest.fixture(autouse=True)
def _qt_app(qapp):
    qapp.setQuitOnLastWindowClosed(False)
    return qapp


def ev(type_: str, seq: int, step: int = 0, run: str = "run-0123456789", thread: str = "t1", **data) -> Event:
    return Event(type=type_, thread_id=thread, run_id=run, step=step, data=data, time=1_700_000_000.0 + seq, seq=seq)


def session_events() -> list[Event]:
    usage = {"input_tokens": 120, "output_tokens": 30, "thoughts_tokens": 0, "cost_usd": 0.0012, "calls": 1}
    return [
        ev("run_started", 1, input_chars=12),
        ev("model_call_finished", 2, step=1, model="openai/test-model", usage=usage),
        ev("tool_call_finished", 3, step=1, call_id="c1", name="read_file", status="ok"),
        ev("tool_call_finished", 4, step=1, call_id="c2", name="write_file", status="denied"),
        ev("todos_updated", 5, step=1, count=3),
        ev("run_finished", 6, step=2, status="done", usage=usage),
    ]


@pytest.fixture
def panel(qtbot) -> EventsPanel:
    p = EventsPanel()
    qtbot.addWidget(p)
    return p


def test_model_passes_qtmodeltester(qtmodeltester):
    model = EventsModel()
    model.reset(session_events())
    qtmodeltester.check(model)  # Qt's QAbstractItemModelTester
    model.append(ev("artifact_written", 7, path="/artifacts/summary.md"))
    qtmodeltester.check(model, force_py=True)  # pytest-qt's Python port (checks roles' types too)


def test_proxy_passes_qtmodeltester(qtmodeltester, panel):
    panel.load(session_events())
    panel.set_type_filter("tool_call_finished")
    panel.set_text_filter("write")
    qtmodeltester.check(panel.proxy)
    qtmodeltester.check(panel.proxy, force_py=True)


def test_columns_and_summary(panel):
    panel.load(session_events())
    model = panel.model
    assert [model.headerData(i, Qt.Orientation.Horizontal) for i in range(5)] == list(COLUMNS)
    row = [model.data(model.index(2, c)) for c in range(len(COLUMNS))]
    assert row[1:4] == ["tool_call_finished", "1", "run-0123"]
    assert row[4] == "call_id=c1  name=read_file  status=ok"
    assert model.data(model.index(2, 0), EventRole) is model.events[2]
    assert model.data(model.index(2, 3), Qt.ItemDataRole.ToolTipRole) == "run-0123456789"
    assert "120 in/30 out $0.0012" in model.data(model.index(1, 4))


def test_summary_cuts_long_values():
    text = summarize({"error": "x" * 1000, "items": list(range(500))})
    assert len(text) <= 300 and text.startswith("error=xxx") and "…" in text


def test_filter_by_type(panel):
    panel.load(session_events())
    assert panel.type_combo.itemText(0) == ALL_TYPES
    assert panel.types() == sorted({e.type for e in session_events()})
    assert len(panel.visible_events()) == 6 and panel.count_label.text() == "6 events"

    panel.type_combo.setCurrentIndex(panel.type_combo.findData("tool_call_finished"))
    assert [e.seq for e in panel.visible_events()] == [3, 4]
    assert panel.count_label.text() == "2 of 6 events"

    # New events of the chosen type appear; others are kept but hidden; new types join the chooser.
    panel.add_event(ev("tool_call_finished", 7, step=2, call_id="c3", name="edit_file", status="error"))
    panel.add_event(ev("artifact_written", 8, step=2, path="/artifacts/a.md"))
    assert [e.seq for e in panel.visible_events()] == [3, 4, 7]
    assert "artifact_written" in panel.types() and panel.selected_type() == "tool_call_finished"

    panel.set_type_filter(None)
    assert len(panel.visible_events()) == 8 and panel.type_combo.currentText() == ALL_TYPES


def test_filter_by_text_and_type_together(panel):
    panel.load(session_events())
    panel.set_text_filter("WRITE_FILE")
    assert [e.seq for e in panel.visible_events()] == [4]
    panel.set_text_filter("denied")
    assert [e.seq for e in panel.visible_events()] == [4]
    panel.set_type_filter("run_finished")
    assert panel.visible_events() == []
    panel.set_text_filter("")
    assert [e.seq for e in panel.visible_events()] == [6]


def test_live_events_and_repeats_are_ignored(panel):
    panel.add_event(ev("run_started", 1))
    panel.add_event(Event("model_delta", "t1", "r", 1, {"text": "Hel"}))
    panel.add_event(Event("usage_updated", "t1", "r", 1, {"run_usage": {}, "thread_usage": {}}))
    panel.add_event(ev("run_started", 1))  # the same durable event replayed
    assert [e.type for e in panel.model.events] == ["run_started"]
    assert panel.types() == ["run_started"]


def test_load_replaces_and_clear_empties(panel):
    panel.load(session_events())
    panel.set_type_filter("todos_updated")
    panel.load([ev("run_started", 1, thread="t2"), ev("todos_updated", 2, thread="t2", count=1)])
    assert [e.thread_id for e in panel.model.events] == ["t2", "t2"]
    assert panel.selected_type() == "todos_updated" and [e.seq for e in panel.visible_events()] == [2]
    panel.clear()
    assert panel.model.rowCount() == 0 and panel.visible_events() == []
    assert panel.count_label.text() == "0 events"


def test_activating_a_row_reports_its_event(panel, qtbot):
    panel.load(session_events())
    index = panel.proxy.index(5, 1)
    with qtbot.waitSignal(panel.sig_event_activated, timeout=1000) as blocker:
        panel.view.activated.emit(index)
    assert blocker.args[0].type == "run_finished"


# -- G2: the Events dock in the real window, fed by the real bridge ---------------------------------------
async def test_G2_the_events_dock_is_connected_to_the_bridge_live_replayed_and_cleared(
        windows, stub_workspace, stub_server, qtbot):
    """Fails if ``plug_panels`` stopped connecting the Events panel (live events, replay or clear)."""
    from tests.stub_server import StubReply
    from tests.ui.helpers import wait_for
    from workbench.app import plug_panels

    window = await windows(stub_workspace)
    plug_panels(window)
    panel = window.dock("Events").widget()
    assert isinstance(panel, EventsPanel)
    stub_server.script(StubReply(text="Hello back."))
    assert await window.send("hello") == "done"
    thread = window.session.thread_id

    def types(p: EventsPanel) -> list[str]:
        return [e.type for e in p.model.events if e.thread_id == thread]

    await wait_for(lambda: "run_finished" in types(panel), 5, "run_finished in the Events dock")
    shown = types(panel)
    assert shown[0] == "run_started" and "model_call_finished" in shown and shown[-1] == "run_finished"
    assert all(e.durable for e in panel.model.events)  # live deltas are not listed

    # A new thread: the dock clears (sig_thread_attached), nothing of the old thread stays.
    await window.new_thread()
    await wait_for(lambda: not types(panel), 5, "the Events dock to clear on a new thread")

    # Another window on the same thread: the stored events replay into its dock.
    reopened = await windows(stub_workspace)
    plug_panels(reopened)
    await reopened.switch_thread(thread)
    again = reopened.dock("Events").widget()
    await wait_for(lambda: types(again) == shown, 5, "the thread's events replayed into the Events dock")
    for w in (window, reopened):  # their panels' file reads finish inside the test's loop
        await w._settle_panels()
