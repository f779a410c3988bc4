"""D9, D10, Q1 (issue 11 item 5): the Tasks board, sub-agent decisions in the window, a task's transcript.

Real windows on a workspace whose workbench.yaml declares two sub-agents; the loopback stub answers
the parent (``openai/parent``) and each sub-agent (``openai/researcher``, ``openai/writer``) by model
name, through litellm, as in tests/harness/test_delegation.py.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from tests.stub_server import StubReply, StubServer
from tests.ui.helpers import button, click, distinct_colors, find_dialog, render_window, visible_dialog, wait_for
from tests.ui.pending import decisions_panel, warmed

ASK = "{default: ask, rules: [{allow: invoke, tool: delegate_to_*}]}"


@pytest.fixture
def tasks_workspace(tmp_path: Path, stub_server: StubServer, monkeypatch: pytest.MonkeyPatch) -> Any:
    """``make(permissions=…)``: a workspace on the stub with the researcher and writer sub-agents."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")

    def make(permissions: str = "{default: allow}") -> Path:
        ws = tmp_path / "ws"
        ws.mkdir(exist_ok=True)
        (ws / "README.md").write_text("# Stub project\n", encoding="utf-8")
        (ws / "workbench.yaml").write_text(
            f"model: openai/parent\napi_base: {stub_server.url}\npermissions: {permissions}\n"
            "subagents:\n  async: true\n  max_wait_seconds: 5\n  agents:\n"
            "    - {name: researcher, description: Reads and summarises., model: openai/researcher}\n"
            "    - {name: writer, description: Writes reports., model: openai/writer}\n", encoding="utf-8")
        return ws

    return make


def spy_answers(window: Any) -> list[tuple[str, dict[str, Any]]]:
    """Record what the window hands ``Session.answer_task`` (the real call still runs)."""
    session = window.session
    sent: list[tuple[str, dict[str, Any]]] = []
    answer = session.answer_task

    def recording(task_id: str, decisions: dict[str, Any]) -> None:
        sent.append((task_id, {k: dict(v) for k, v in decisions.items()}))
        answer(task_id, decisions)

    session.answer_task = recording
    return sent


def bound_to_waiting(window: Any, task_id: str) -> dict[str, str]:
    """R3/Q: each waiting question of the task by id, with the fingerprint an answer to it must carry."""
    from workbench.decisions import question_fingerprint

    return {d.id: question_fingerprint(d.question) for d in window.session.pending_decisions() if d.task_id == task_id}


def board(window: Any) -> Any:
    """The window's Tasks board, tabbed with the Decisions inbox (and a stand-in "Other" dock)."""
    from workbench.ui import panels

    decisions_panel(window)
    if window.dock("Tasks") is None:
        panels.install_tasks_panel(window, tab_with=window.dock("Other"))
    return window.dock("Tasks").widget()


async def open_window(windows: Any, workspace: Path) -> Any:
    window = await windows()
    board(window)
    await window.open_workspace(workspace)
    await warmed(window)
    return window


def cells(panel: Any, row: int = 0) -> list[str]:
    model = panel.model
    return [str(model.data(model.index(row, c)) or "") for c in range(model.columnCount())]


def script_research(stub: StubServer, launched: str, *, delays: tuple[float, float]) -> None:
    """The parent launches the researcher in the background ("Dig into the logs") and answers
    ``launched``; the researcher lists /project, then reports, each reply after its delay."""
    stub.script_for("parent", StubReply(tool_calls=[("delegate_to_researcher",
                                                     {"task": "Dig into the logs", "background": True})]),
                    StubReply(text=launched))
    stub.script_for("researcher",
                    StubReply(tool_calls=[("ls", {"path": "/project"})], usage=(30, 7), delay=delays[0]),
                    StubReply(text="Found it: the disk was full.", usage=(20, 5), delay=delays[1]))


def show(panel: Any) -> None:
    dock = panel.parentWidget()
    while dock is not None and dock.metaObject().className() != "QDockWidget":
        dock = dock.parentWidget()
    dock.show()
    dock.raise_()


async def launch_running(windows: Any, workspace: Path, prompt: str) -> tuple[Any, Any, Any]:
    """The window on ``workspace``, its Tasks board in sight, after ``prompt`` launched one background
    task that is still running: ``(window, board, the task)``."""
    window = await open_window(windows, workspace)
    panel = board(window)
    show(panel)
    assert await asyncio.wait_for(window.send(prompt), 30) == "done"
    await wait_for(lambda: panel.model.rowCount() == 1 and panel.model.rows[0].status == "pending", 10, "running")
    [task] = window.session.tasks()
    return window, panel, task


async def test_d10_the_board_follows_a_background_task_live(windows: Any, tasks_workspace: Any,
                                                             stub_server: StubServer) -> None:
    """Launched in the background: the row appears, runs (elapsed ticking, "1 task running" in the
    status bar), and settles completed with its tokens, cost and last tool — from the bridge's signals."""
    from workbench.ui.tasks_panel import LAST_TOOL, STATUS, TASK, USAGE

    script_research(stub_server, "Launched; I will tell you.", delays=(1.2, 1.2))
    window = await open_window(windows, tasks_workspace())
    panel = board(window)
    show(panel)
    seen: list[str] = []
    panel.model.dataChanged.connect(lambda *_: seen.extend(r.status for r in panel.model.rows))
    assert "No sub-agent tasks" in panel.summary.text()
    assert await asyncio.wait_for(window.send("Research the logs"), 30) == "done"
    await wait_for(lambda: panel.model.rowCount() == 1, 10, "the task's row")
    row = cells(panel)
    assert row[TASK] == "researcher\nDig into the logs"  # the agent over the short description
    await wait_for(lambda: panel.model.rows[0].status == "pending", 10, "the task running")
    assert cells(panel)[STATUS].startswith("◐ running\n")  # the status over the elapsed time
    status = window.status
    await wait_for(lambda: status.tasks_button.isVisible(), 5, "the status bar's task count")
    assert status.tasks_button.text() == "1 task running"
    first = cells(panel)[STATUS]
    await wait_for(lambda: cells(panel)[STATUS] != first, 5, "the elapsed time to tick")
    await wait_for(lambda: panel.model.rows[0].status == "completed", 20, "the task to settle")
    row = cells(panel)
    assert row[STATUS].startswith("✓ completed\n") and row[LAST_TOOL] == "ls"
    assert row[USAGE] == "62 tokens\nn/a"  # the stub's model has no price
    assert "pending" in seen  # pending → completed, live
    await wait_for(lambda: "Found it" in panel.details.toPlainText(), 5, "the outcome in the details")
    assert not status.tasks_button.isVisible()
    assert "1 settled" in panel.summary.text()
    # the buttons follow the selected task: a settled one can be continued, not aborted or answered
    assert panel.continue_button.isEnabled() and panel.open_button.isEnabled()
    assert not panel.abort_button.isEnabled() and not panel.answer_button.isEnabled()


async def test_d9_a_foreground_sub_agents_approval_in_the_window_names_it(windows: Any, tasks_workspace: Any,
                                                                          stub_server: StubServer,
                                                                          qtbot: Any) -> None:
    """The parent suspends; the dialog says which sub-agent (and task) asks; Enter decides nothing,
    Space on Approve once does; the run completes and the board shows the task completed."""
    ws = tasks_workspace(ASK)
    stub_server.script_for("parent", StubReply(tool_calls=[("delegate_to_writer", {"task": "Write notes.md"})]),
                           StubReply(text="The writer wrote it."))
    stub_server.script_for("writer",
                           StubReply(tool_calls=[("write_file", {"path": "/project/notes.md", "content": "hi"})]),
                           StubReply(text="Wrote notes.md."))
    window = await open_window(windows, ws)
    panel = board(window)
    window.input.setPlainText("Have the writer write notes")
    click(qtbot, window.send_button)
    dialog = await find_dialog("approval_dialog")
    [task] = window.session.tasks()
    agent = dialog.findChild(type(dialog.header), "approval_agent")
    assert agent.isVisible()
    assert agent.text() == f"Sub-agent <b>writer</b> (task {task.id}) asks to write /project/notes.md."
    assert dialog.header.text() == "The sub-agent writer wants to write a file"
    await wait_for(lambda: panel.model.rowCount() == 1 and panel.model.rows[0].status == "awaiting_decision", 10,
                   "the board to show the task waiting")
    assert window.status.tasks_button.text() == "1 task waits for you"
    approve = button(dialog, "approve_once")
    for widget in (dialog, approve):  # G7: Enter approves nothing, even on a focused Approve
        widget.setFocus()
        for key in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            qtbot.keyClick(widget, key)
    await asyncio.sleep(0.1)
    assert dialog.isVisible() and not (ws / "notes.md").exists()
    approve.setFocus()
    qtbot.keyClick(approve, Qt.Key.Key_Space)
    assert await asyncio.wait_for(window.wait_settled(), 30) == "done"
    assert (ws / "notes.md").read_text() == "hi"
    assert window.transcript.messages()[-1].text == "The writer wrote it."
    await wait_for(lambda: panel.model.rows[0].status == "completed", 10, "the task completed on the board")
    assert not window.status.tasks_button.isVisible()


async def _background_waiting(windows: Any, ws: Path, stub_server: StubServer, *, writer_after: str) -> Any:
    """A window whose thread launched a background writer task that now waits for its write_file call."""
    stub_server.script_for("parent",
                           StubReply(tool_calls=[("delegate_to_writer", {"task": "Write y", "background": True})]),
                           StubReply(text="Launched; I go on."))
    stub_server.script_for("writer", StubReply(tool_calls=[("write_file", {"path": "/project/y", "content": "y"})]),
                           StubReply(text=writer_after))
    window = await open_window(windows, ws)
    assert await asyncio.wait_for(window.send("Have the writer write y"), 30) == "done"  # the parent goes on
    panel = board(window)
    await wait_for(lambda: panel.model.rowCount() == 1 and panel.model.rows[0].status == "awaiting_decision", 15,
                   "the task to wait for a decision")
    return window


async def test_d9_q1_a_background_tasks_approval_answered_from_the_inbox(windows: Any, tasks_workspace: Any,
                                                                         stub_server: StubServer,
                                                                         qtbot: Any) -> None:
    """The inbox shows the task's call with its agent and task id; the status bar counts it (and the
    task); Enter approves nothing; Approve resumes the task through Session.answer_task (the window
    stays on the parent's thread), the file is written, the task completes and the item leaves."""
    ws = tasks_workspace(ASK)
    window = await _background_waiting(windows, ws, stub_server, writer_after="Wrote y.")
    parent = window.session.thread_id
    [task] = window.session.tasks()
    inbox = decisions_panel(window)
    status = window.status
    await wait_for(lambda: inbox.tree.topLevelItemCount() == 1, 10, "the task's decision in the inbox")
    assert status.decisions_button.text() == "1 decision waiting"
    assert status.tasks_button.text() == "1 task waits for you"
    click(qtbot, status.decisions_button)
    item = inbox.tree.topLevelItem(0)
    assert item.text(0) == "write_file /project/y" and item.text(1) == f"task {task.id}"  # "task writer:…"
    assert task.id.startswith("writer:") and "sub-agent writer" in item.toolTip(1)
    assert inbox.selected().source == "task" and inbox.open_button.text() == "Open transcript"
    assert inbox.stop_run_button.text() == "Abort task"
    click(qtbot, inbox.open_button)  # a task's "thread" is its transcript, read-only
    await wait_for(lambda: window.reading_task, 5, "the task's transcript")
    view = window.task_mode.view
    assert view.title.text().endswith("(read-only)") and "⚑ waiting" in view.status.text()
    assert [r.status for r in view.view.tool_rows()] == ["waiting"] and view.view.notices("pending")
    click(qtbot, view.back_button)
    assert not window.reading_task and window.session.thread_id == parent
    for widget in (inbox.tree, inbox.approve_button):  # G7
        widget.setFocus()
        qtbot.keyClick(widget, Qt.Key.Key_Return)
    await asyncio.sleep(0.1)
    assert window.session.task(task.id).status == "awaiting_decision" and not (ws / "y").exists()
    shown = bound_to_waiting(window, task.id)
    sent = spy_answers(window)
    inbox.approve_button.setFocus()
    qtbot.keyClick(inbox.approve_button, Qt.Key.Key_Space)
    await wait_for(lambda: window.session.task(task.id).status == "completed", 20, "the task to complete")
    # R3/Q: the answer names the question the inbox showed, so a task asking another by then refuses it
    assert [(t, {k: d["fingerprint"] for k, d in ds.items()}) for t, ds in sent] == [(task.id, shown)]
    assert (ws / "y").read_text() == "y"
    assert window.session.thread_id == parent  # never switched to the task's thread
    await wait_for(lambda: inbox.tree.topLevelItemCount() == 0, 10, "the item to leave the inbox")
    assert not status.decisions_button.isVisible()
    panel = board(window)
    await wait_for(lambda: panel.model.rows[0].status == "completed", 10, "the board to show it completed")
    await wait_for(lambda: not status.tasks_button.isVisible(), 5, "the task count to go")


async def test_d10_abort_task_from_the_inbox(windows: Any, tasks_workspace: Any, stub_server: StubServer,
                                             qtbot: Any) -> None:
    """"Abort task" on a task's decision in the inbox: the task ends aborted, its call never runs, the
    item leaves; the window stays on the parent's thread."""
    ws = tasks_workspace(ASK)
    window = await _background_waiting(windows, ws, stub_server, writer_after="never asked")
    parent = window.session.thread_id
    [task] = window.session.tasks()
    inbox = decisions_panel(window)
    await wait_for(lambda: inbox.tree.topLevelItemCount() == 1, 10, "the task's decision in the inbox")
    click(qtbot, window.status.decisions_button)
    click(qtbot, inbox.stop_run_button)
    await wait_for(lambda: window.session.task(task.id).status == "aborted", 15, "the task aborted")
    await wait_for(lambda: inbox.tree.topLevelItemCount() == 0, 10, "the item to leave the inbox")
    assert not (ws / "y").exists() and window.session.thread_id == parent
    panel = board(window)
    await wait_for(lambda: panel.model.rows[0].status == "aborted", 10, "the board to show it aborted")


async def test_d10_answer_decision_from_the_board_rejects_with_enter_in_the_message(
        windows: Any, tasks_workspace: Any, stub_server: StubServer, qtbot: Any) -> None:
    """"1 task waits for you" opens the board; Answer decision… opens the approval dialog naming the
    sub-agent; Enter in its message rejects (G7); the sub-agent sees the reason and the task completes."""
    ws = tasks_workspace(ASK)
    window = await _background_waiting(windows, ws, stub_server, writer_after="I was not allowed to write y.")
    [task] = window.session.tasks()
    panel = board(window)
    window.dock("Other").raise_()
    await wait_for(lambda: window.status.tasks_button.isVisible(), 5, "the status bar's count")
    click(qtbot, window.status.tasks_button)
    await wait_for(lambda: not panel.visibleRegion().isEmpty(), 5, "the board in sight")
    panel.select(task.id)
    assert panel.answer_button.isEnabled() and panel.abort_button.isEnabled()
    click(qtbot, panel.answer_button)
    dialog = await find_dialog("approval_dialog")
    agent = dialog.findChild(type(dialog.header), "approval_agent")
    assert f"Sub-agent <b>writer</b> (task {task.id}) asks to write /project/y" in agent.text()
    assert button(dialog, "stop_run").text() == "Abort task"  # for a background task's call
    shown = bound_to_waiting(window, task.id)
    sent = spy_answers(window)
    dialog.reject_message.setFocus()
    qtbot.keyClicks(dialog.reject_message, "not now")
    qtbot.keyClick(dialog.reject_message, Qt.Key.Key_Return)
    await wait_for(lambda: window.session.task(task.id).status == "completed", 20, "the task to go on and finish")
    # R3/Q: the dialog's answer names the question it showed
    assert [(t, {k: d["fingerprint"] for k, d in ds.items()}) for t, ds in sent] == [(task.id, shown)]
    assert not (ws / "y").exists()
    assert visible_dialog("approval_dialog") is None
    writer_last = [r for r in stub_server.requests if r["model"] == "writer"][-1]
    assert "not now" in str(writer_last["messages"])
    await wait_for(lambda: "I was not allowed" in panel.details.toPlainText(), 10, "the outcome on the board")


async def test_d10_abort_from_the_board_asks_first(windows: Any, tasks_workspace: Any, stub_server: StubServer,
                                                   qtbot: Any) -> None:
    """Abort… asks; Enter keeps the task running (the default); "Abort task" ends it aborted."""
    stub_server.script_for("parent", StubReply(tool_calls=[("delegate_to_researcher",
                                                            {"task": "Read everything", "background": True})]),
                           StubReply(text="Launched."))
    stub_server.script_for("researcher", StubReply(text="too late", delay=8))
    window, panel, task = await launch_running(windows, tasks_workspace(), "Go")
    panel.select(task.id)
    click(qtbot, panel.abort_button)
    box = await find_dialog("abort_task_confirm")
    assert task.id in box.text()
    qtbot.keyClick(box, Qt.Key.Key_Return)  # the default: keep it running
    await wait_for(lambda: visible_dialog("abort_task_confirm") is None, 5, "the question to close")
    await asyncio.sleep(0.1)
    assert window.session.task(task.id).status == "pending"
    click(qtbot, panel.abort_button)
    box = await find_dialog("abort_task_confirm")
    click(qtbot, button(box, "abort_task_yes"))
    await wait_for(lambda: panel.model.rows[0].status == "aborted", 15, "the task aborted on the board")
    assert window.session.task(task.id).status == "aborted"
    assert panel.model.data(panel.model.index(0, 1)).startswith("⊘ aborted\n")
    assert not panel.abort_button.isEnabled() and panel.continue_button.isEnabled()


async def test_d10_open_a_tasks_transcript_read_only_and_go_back(windows: Any, tasks_workspace: Any,
                                                                 stub_server: StubServer, qtbot: Any) -> None:
    """Open transcript shows the sub-agent's conversation in the centre with a read-only bar; the
    prompt box and Send write nothing (to the task or the thread); Back to the thread restores both."""
    stub_server.script_for("parent", StubReply(tool_calls=[("delegate_to_researcher",
                                                            {"task": "Summarise the README", "background": True})]),
                           StubReply(text="Launched."))
    stub_server.script_for("researcher", StubReply(tool_calls=[("read_file", {"path": "/project/README.md"})]),
                           StubReply(text="It is a stub project."))
    window = await open_window(windows, tasks_workspace())
    panel = board(window)
    show(panel)
    assert await asyncio.wait_for(window.send("Summarise it"), 30) == "done"
    await wait_for(lambda: panel.model.rowCount() == 1 and panel.model.rows[0].status == "completed", 20, "settled")
    [task] = window.session.tasks()
    panel.select(task.id)
    window.input.setPlainText("a draft of mine")
    requests = len(stub_server.requests)
    click(qtbot, panel.open_button)
    mode = window.task_mode
    await wait_for(lambda: mode.is_open, 5, "the task's transcript")
    view = mode.view
    assert mode.stack.currentWidget() is view and view.isVisible() and not window.transcript.isVisible()
    assert view.title.text() == f"Sub-agent task {task.id} — researcher (read-only)"
    assert "✓ completed" in view.status.text()
    texts = [m.text for m in view.view.messages()]
    assert texts[0].endswith("Your task:\nSummarise the README") and texts[-1] == "It is a stub project."
    assert [r.name for r in view.view.tool_rows()] == ["read_file"]
    assert not window.input.isEnabled() and not window.send_button.isEnabled()
    assert "read-only" in window.input.placeholderText()
    window.on_send()  # as Ctrl+Enter or the Run menu would
    await asyncio.sleep(0.2)
    assert len(stub_server.requests) == requests and window.session.messages[-1].content == "Launched."
    assert QApplication.focusWidget() is view.back_button
    qtbot.keyClick(view.back_button, Qt.Key.Key_Space)
    assert not mode.is_open and window.transcript.isVisible() and not view.isVisible()
    assert window.input.isEnabled() and window.send_button.isEnabled()
    assert window.input.toPlainText() == "a draft of mine"
    assert window.transcript.messages()[-1].text == "Launched."


async def test_d10_continue_a_settled_task_with_further_instructions(windows: Any, tasks_workspace: Any,
                                                                    stub_server: StubServer, qtbot: Any) -> None:
    """Continue… asks for instructions (Enter types a new line, sends nothing; named controls, Tab in
    layout order); "Continue task" gives them to the sub-agent, which runs again in the background."""
    from tests.ui.test_accessibility import focus_out_of_order, unnamed

    stub_server.script_for("parent", StubReply(tool_calls=[("delegate_to_researcher",
                                                            {"task": "Outline the README", "background": True})]),
                           StubReply(text="Launched."))
    stub_server.script_for("researcher", StubReply(text="First outline."), StubReply(text="Shorter outline."))
    window = await open_window(windows, tasks_workspace())
    panel = board(window)
    show(panel)
    assert await asyncio.wait_for(window.send("Outline it"), 30) == "done"
    await wait_for(lambda: panel.model.rowCount() == 1 and panel.model.rows[0].status == "completed", 20, "settled")
    [task] = window.session.tasks()
    panel.select(task.id)
    click(qtbot, panel.continue_button)
    dialog = await find_dialog("continue_task_dialog")
    send = button(dialog, "continue_task_send")
    assert not send.isEnabled()  # nothing to send yet
    assert not unnamed([dialog]) and not focus_out_of_order(dialog)
    dialog.instructions.setFocus()
    qtbot.keyClicks(dialog.instructions, "Make it shorter")
    qtbot.keyClick(dialog.instructions, Qt.Key.Key_Return)  # a new line, not a send (G7)
    assert dialog.isVisible() and dialog.instructions.toPlainText() == "Make it shorter\n"
    click(qtbot, send)
    await wait_for(lambda: window.session.task(task.id).outcome == "Shorter outline.", 20, "the further turn")
    await wait_for(lambda: panel.model.rows[0].status == "completed" and "Shorter outline." in
                   panel.details.toPlainText(), 10, "the board to follow")
    researcher_last = [r for r in stub_server.requests if r["model"] == "researcher"][-1]
    assert "Make it shorter" in str(researcher_last["messages"])


async def test_d8_a_continue_the_budget_refuses_is_said_in_the_panel(windows: Any, tasks_workspace: Any,
                                                                     stub_server: StubServer, qtbot: Any) -> None:
    """D8: Continue… when nothing is left of a budget: the refusal (Session.continue_task's RunError,
    naming the budget) is shown in a message, OK closes it, the task stays settled (it reached the
    window's error hook as a failure)."""
    from workbench.errors import RunError

    stub_server.script_for("parent", StubReply(tool_calls=[("delegate_to_researcher",
                                                            {"task": "Outline the README", "background": True})]),
                           StubReply(text="Launched."))
    stub_server.script_for("researcher", StubReply(text="First outline."))
    window = await open_window(windows, tasks_workspace())
    panel = board(window)
    show(panel)
    assert await asyncio.wait_for(window.send("Outline it"), 30) == "done"
    await wait_for(lambda: panel.model.rowCount() == 1 and panel.model.rows[0].status == "completed", 20, "settled")
    [task] = window.session.tasks()

    def refuse(task_id: str, instructions: str) -> None:
        raise RunError(f"task {task_id} was not continued: nothing is left of the session budget's total_tokens")

    window.session.continue_task = refuse
    panel.select(task.id)
    click(qtbot, panel.continue_button)
    dialog = await find_dialog("continue_task_dialog")
    qtbot.keyClicks(dialog.instructions, "More")
    click(qtbot, button(dialog, "continue_task_send"))
    box = await find_dialog("task_refused")
    assert "nothing is left of the session budget" in box.text()
    qtbot.keyClick(box, Qt.Key.Key_Return)
    await wait_for(lambda: visible_dialog("task_refused") is None, 5, "the message to close")
    assert window.session.task(task.id).status == "completed"


def test_d10_the_bridge_turns_task_events_into_signals(qtbot: Any) -> None:
    from workbench.engine.events import Event
    from workbench.ui.bridge import Bridge

    bridge = Bridge()
    got: list[tuple[str, dict[str, Any]]] = []
    for name in ("sig_task_started", "sig_task_progressed", "sig_task_settled"):
        getattr(bridge, name).connect(lambda d, n=name: got.append((n, d)))
    started = {"task_id": "writer:ab12cd34", "agent": "writer", "background": True, "child_thread": "t2"}
    progress = {"task_id": "writer:ab12cd34", "agent": "writer", "status": "pending", "last_tool": "ls",
                "tokens": 12, "cost_usd": None, "elapsed": 1.5, "description": "Write", "child_thread": "t2"}
    settled = {"task_id": "writer:ab12cd34", "agent": "writer", "status": "completed", "usage": {}}
    bridge.replaying = True  # a replayed durable event only goes out as sig_event_received
    bridge._dispatch(Event("task_started", "t1", "r1", 1, started, seq=3))
    bridge.replaying = False
    for type_, data in (("task_started", started), ("task_progress", progress), ("task_settled", settled)):
        bridge._dispatch(Event(type_, "t1", "r1", 1, data))
    assert got == [("sig_task_started", started), ("sig_task_progressed", progress), ("sig_task_settled", settled)]


async def test_d10_the_status_bar_counts_running_and_waiting_tasks(qtbot: Any) -> None:
    from workbench.ui.status_bar import RunStatusBar, tasks_text

    assert tasks_text(0, 0) == ""
    assert tasks_text(1, 0) == "1 task running" and tasks_text(3, 0) == "3 tasks running"
    assert tasks_text(0, 1) == "1 task waits for you" and tasks_text(0, 2) == "2 tasks wait for you"
    assert tasks_text(2, 1) == "2 tasks running · 1 waits for you"
    bar = RunStatusBar()
    qtbot.addWidget(bar)
    bar.show()
    bar.set_tasks(2, 1)
    assert bar.tasks_button.isVisible() and bar.tasks_button.accessibleName() == "2 tasks running · 1 waits for you"
    assert bar.tasks_button.property("status") == "waiting"  # and in words, not colour alone
    clicks: list[bool] = []
    bar.sig_tasks_clicked.connect(lambda: clicks.append(True))
    click(qtbot, bar.tasks_button)
    assert clicks == [True]
    bar.set_tasks(0, 0)
    assert not bar.tasks_button.isVisible()


async def test_d10_render_the_board(windows: Any, tasks_workspace: Any, stub_server: StubServer, qtbot: Any,
                                    tmp_path: Path, light_style: Any) -> None:
    """The board as the person sees it, among the window's real panels: one task completed, one running,
    one waiting for a decision (saved for a look; ``TASKS_PNG=docs/tasks.png`` refreshes the docs' picture)."""
    from workbench.app import plug_panels

    ws = tasks_workspace("{default: ask, rules: [{allow: invoke, tool: delegate_to_*}, {allow: read, path: '/**'}]}")
    stub_server.script_for("parent", StubReply(tool_calls=[
        ("delegate_to_researcher", {"task": "Summarise the README for the release notes", "background": True}),
        ("delegate_to_writer", {"task": "Write the changelog entry", "background": True}),
        ("delegate_to_researcher", {"task": "Survey the open issues about the store", "background": True})]),
        StubReply(text="Three sub-agents are on it; I will report when they are done."))
    stub_server.script_for("researcher",
                           StubReply(tool_calls=[("read_file", {"path": "/project/README.md"})], usage=(420, 60)),
                           StubReply(text="A stub project with one README.", usage=(510, 40)),
                           StubReply(tool_calls=[("ls", {"path": "/project"})], usage=(300, 20), delay=0.3),
                           StubReply(text="never seen", delay=6))
    stub_server.script_for("writer", StubReply(tool_calls=[("write_file", {"path": "/project/CHANGELOG.md",
                                                                           "content": "## 0.2\n"})], usage=(350, 80)))
    window = await windows()
    plug_panels(window)
    window.resize(1200, 800)  # G2: the size the panels must not be cramped at
    await window.open_workspace(ws)
    await warmed(window)
    panel = board(window)
    show(panel)
    assert await asyncio.wait_for(window.send("Prepare the release"), 30) == "done"
    await wait_for(lambda: sorted(r.status for r in panel.model.rows) == ["awaiting_decision", "completed", "pending"]
                   and any(r.last_tool == "ls" for r in panel.model.rows), 20, "one of each")
    waiting = next(r for r in panel.model.rows if r.status == "awaiting_decision")
    panel.select(waiting.id)
    await asyncio.sleep(2.2)  # the elapsed times tick
    # G2: seven panels share the right-hand group: whole names (scroll arrows where they do not fit)
    from PySide6.QtWidgets import QTabBar

    bars = [b for b in window.findChildren(QTabBar) if b.parentWidget() is window and b.isVisible()]
    assert bars and all(b.elideMode() == Qt.TextElideMode.ElideNone for b in bars)
    path = os.environ.get("TASKS_PNG") or str(tmp_path / "tasks.png")
    image = render_window(window, path)
    assert distinct_colors(image) > 8
    assert window.status.tasks_button.text() == "1 task running · 1 waits for you"
    [aborting] = [r for r in panel.model.rows if r.status == "pending"]
    await window.session.abort_task(aborting.id)


async def test_d10_an_open_task_transcript_follows_the_running_task_read_off_the_gui_thread(
        windows: Any, tasks_workspace: Any, stub_server: StubServer, qtbot: Any) -> None:
    """Opened while the task runs: the transcript shows each new step as it is committed (its tool call,
    then its answer), and those re-reads happen on a worker thread — a long task's conversation must not
    stall the window every time it makes progress (G13)."""
    import threading

    script_research(stub_server, "Launched.", delays=(1.0, 1.5))
    window, panel, task = await launch_running(windows, tasks_workspace(), "Research the logs")
    readers: list[str] = []
    messages_of = window.session.task_messages
    window.session.task_messages = lambda tid: readers.append(threading.current_thread().name) or messages_of(tid)
    panel.select(task.id)
    click(qtbot, panel.open_button)
    mode = window.task_mode
    await wait_for(lambda: mode.is_open, 5, "the task's transcript")
    view = mode.view.view
    await wait_for(lambda: [r.name for r in view.tool_rows()] == ["ls"], 15, "the task's tool call, live")
    await wait_for(lambda: view.messages() and view.messages()[-1].text == "Found it: the disk was full.", 15,
                   "the task's answer, live")
    del window.session.task_messages
    refreshes = readers[1:]  # the first read is the click's own
    assert refreshes and threading.main_thread().name not in refreshes, readers
