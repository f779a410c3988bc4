"""The rows a live run adds take over spare widgets built a moment earlier (G13; issue 9: UI latency).

A step's boundary already does the most on the GUI thread (the engine's step, the tool call's row,
the next answer's block, a repaint). A new block or row costs 1.5–3 ms to build and style there; so after
each one is added, a spare of its kind is built and styled ~40 ms later, hidden, and the next row of
that kind takes it over. These tests drive the transcript through the bridge's signals, as a run does.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt

from workbench.engine.events import Event


def _transcript(qtbot: Any) -> tuple[Any, Any]:
    from workbench.ui.bridge import Bridge
    from workbench.ui.transcript import TranscriptView

    bridge = Bridge()
    view = TranscriptView(bridge)
    qtbot.addWidget(view)
    view.resize(800, 600)
    view.show()
    return bridge, view


def _step(bridge: Any, step: int) -> None:
    bridge.sig_event_received.emit(Event(type="step_started", thread_id="t", run_id="r1", step=step, seq=step))


def _spares(view: Any) -> tuple[Any, Any] | None:
    tools, blocks = view._pool.get("tool"), view._pool.get("message:assistant:True")
    return (tools[-1], blocks[-1]) if tools and blocks else None


def test_G13_rows_added_live_take_over_the_spares_and_show_their_own_call(qtbot: Any) -> None:
    bridge, view = _transcript(qtbot)
    _step(bridge, 1)
    bridge.sig_text_streamed.emit("Reading part one. ")
    view.on_tool_started({"call_id": "c1", "name": "read_file", "arguments": {"path": "/project/a.md"}})
    first_block, first_row = view.messages()[-1], view.tool_row("c1")

    qtbot.waitUntil(lambda: _spares(view) is not None, timeout=3000)
    spare_row, spare_block = _spares(view)  # type: ignore[misc]
    assert not spare_row.isVisible() and not spare_block.isVisible()
    assert spare_row not in view.blocks() and spare_block not in view.blocks()
    assert spare_row.parent() is first_row.parent()  # styled by the transcript's sheet, like the rows

    view.on_tool_finished({"call_id": "c1", "name": "read_file", "status": "ok"})
    _step(bridge, 2)
    bridge.sig_text_streamed.emit("Reading part two.")
    block = view.messages()[-1]
    assert block is spare_block and block.isVisible()
    assert block.text == "Reading part two."
    view.on_tool_started({"call_id": "c2", "name": "grep", "arguments": {"pattern": "TODO", "path": "/project/src"}})
    row = view.tool_row("c2")
    assert row is spare_row and row.isVisible()
    assert row.call_id == "c2" and row.toggle.text() == "grep" and "/project/src" in row.summary.text()
    assert row.status_label.text() != "" and "a.md" not in row.summary.text()

    # Step 1's rows keep their own widgets and calls.
    assert view.tool_row("c1") is first_row and first_row.call_id == "c1" and "a.md" in first_row.summary.text()
    assert view.messages()[0] is first_block and first_block.text == "Reading part one. "

    # The taken-over block names the live step's prompt, not the spare's placeholder.
    with qtbot.waitSignal(view.sig_prompt_requested, timeout=2000) as asked:
        qtbot.mouseClick(block.inspect_button, Qt.MouseButton.LeftButton)
    assert asked.args == [{"run": "r1", "step": 2}]


def test_G13_spares_only_for_what_a_run_adds_and_only_once_rows_are_added(qtbot: Any) -> None:
    bridge, view = _transcript(qtbot)
    qtbot.wait(200)
    assert not any(view._pool.values())  # nothing is built before a row is added
    view.add_user_message("Read the docs.")
    qtbot.wait(200)
    assert not any(view._pool.values())  # the person's own messages: one a turn, no spare
    _step(bridge, 1)
    bridge.sig_text_streamed.emit("On it.")
    qtbot.waitUntil(lambda: bool(view._pool.get("message:assistant:True")), timeout=3000)
    qtbot.wait(200)
    assert len(view._pool["message:assistant:True"]) == 1  # one spare of a kind, not one per batch
    assert not view._pool.get("tool")
