"""P6 in the window: a tool row shows the arguments that ran and that the person edited them."""

from __future__ import annotations

from typing import Any

from workbench.engine.messages import Message, ToolCall, edit_note


def _transcript(qtbot: Any) -> Any:
    from workbench.ui.bridge import Bridge
    from workbench.ui.transcript import TranscriptView

    bridge = Bridge()
    view = TranscriptView(bridge)
    qtbot.addWidget(view)
    return view


def test_P6_history_shows_the_edited_arguments_not_the_models(qtbot: Any) -> None:
    view = _transcript(qtbot)
    call = ToolCall.parse("c1", "write_file", {"path": "/project/model.txt"})
    ran = {"path": "/project/person.txt"}
    view.render_messages([
        Message.user("go"),
        Message.assistant("", (call,)),
        Message.tool(call, "Wrote /project/person.txt" + edit_note(ran)),
    ])
    row = view.tool_row("c1")
    assert row is not None and row.edited and row.arguments == ran
    assert "person.txt" in row.summary.text() and "edited" in row.summary.text()
    assert "model.txt" not in row.summary.text()


def test_P6_a_live_edited_call_is_marked_when_it_finishes(qtbot: Any) -> None:
    view = _transcript(qtbot)
    view.on_tool_started({"call_id": "c1", "name": "write_file", "arguments": {"path": "/project/model.txt"}})
    view.on_interrupt({"call_id": "c1", "kind": "tool_approval"})
    view.on_tool_started({"call_id": "c1", "name": "write_file", "arguments": {"path": "/project/person.txt"}})
    view.on_tool_finished({"call_id": "c1", "name": "write_file", "status": "ok", "edited": True})
    row = view.tool_row("c1")
    assert row.edited and row.arguments == {"path": "/project/person.txt"} and "edited" in row.summary.text()
    plain = _transcript(qtbot)
    plain.on_tool_started({"call_id": "c2", "name": "ls", "arguments": {"path": "/project"}})
    plain.on_tool_finished({"call_id": "c2", "name": "ls", "status": "ok"})
    assert not plain.tool_row("c2").edited and "edited" not in plain.tool_row("c2").summary.text()
