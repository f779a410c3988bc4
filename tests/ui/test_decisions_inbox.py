"""Q1: one inbox of every pending decision in the workspace (issue 10, build "Decision inbox").

The Decisions dock lists the tool approvals and budget holds of this thread and of the workspace's
other threads, with source and age; the status bar says "N decisions waiting" and opens it;
answering there is the same Session call as in the approval dialog.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt

from tests.stub_server import StubReply, StubServer
from tests.ui.helpers import button, click, find_dialog, visible_dialog, wait_for
from tests.ui.pending import open_window, decisions_panel, leave_pending, warmed
from workbench.errors import RunError


async def test_q1_session_lists_pending_decisions_across_threads(stub_workspace: Path) -> None:
    """Session.pending_decisions: this thread's first, then the others', each with its thread, agent,
    age and place in its batch; record_decision keeps a decision for one call of a batch (Q2)."""
    from workbench.session import Session

    a, b = await leave_pending(stub_workspace, ["a.txt", "b.txt"], ["c.txt"])
    session = await Session.open(stub_workspace, b)
    try:
        items = session.pending_decisions()
        assert [(i.thread_id, i.summary(), i.index, i.count, i.current) for i in items] == [
            (b, "write_file /project/c.txt", 0, 1, True),
            (a, "write_file /project/a.txt", 0, 2, False),
            (a, "write_file /project/b.txt", 1, 2, False),
        ]
        assert all(i.source == "thread" and i.agent == "main" and i.kind == "tool_approval" for i in items)
        assert items[1].thread_title.startswith("Write a.txt and b.txt")
        assert 0 <= items[0].age(time.time()) < 60
        session.record_decision(items[1].id, {"decision": "reject", "message": "no"}, thread_id=a)
        assert session.decided(a) == {items[1].id: {"decision": "reject", "message": "no"}}
        assert session.pending_decisions()[1].draft == {"decision": "reject", "message": "no"}
        try:
            session.record_decision("approval-nope", {"decision": "approve"}, thread_id=a)
        except RunError as e:
            assert "approval-nope" in str(e)
        else:
            raise AssertionError("an unknown question was recorded")
    finally:
        await session.close()


async def test_q1_status_bar_counts_the_workspace_and_opens_the_inbox(windows: Any, stub_workspace: Path,
                                                                      qtbot: Any) -> None:
    a, b = await leave_pending(stub_workspace, ["a.txt", "b.txt"], ["c.txt"])
    window = await open_window(windows, stub_workspace, thread_id=b)
    panel = decisions_panel(window)
    await find_dialog("approval_dialog")  # this thread's call is asked in the (modeless) dialog too
    status = window.status
    await wait_for(lambda: status.decisions_button.isVisible(), 5, "the decisions count")
    assert status.decisions_button.text() == "3 decisions waiting"
    window.dock("Other").raise_()  # another tab in front: the click must bring the inbox up
    assert panel.visibleRegion().isEmpty()
    click(qtbot, status.decisions_button)
    await wait_for(lambda: not panel.visibleRegion().isEmpty(), 5, "the Decisions panel in sight")
    rows = [[panel.tree.topLevelItem(i).text(c) for c in range(3)] for i in range(panel.tree.topLevelItemCount())]
    assert [r[0] for r in rows] == ["write_file /project/c.txt", "write_file /project/a.txt",
                                    "write_file /project/b.txt"]
    assert rows[0][1] == "This thread" and rows[1][1].startswith("1/2 · “Write a.txt and b.txt")
    assert rows[2][1].startswith("2/2 · ")
    assert all(r[2] in ("just now",) or r[2].endswith((" s", " min")) for r in rows)
    assert "3 decisions waiting in 2 threads" in panel.summary.text()


async def test_q1_approving_in_the_inbox_resumes_the_run_as_the_dialog_would(
        windows: Any, stub_workspace: Path, stub_server: StubServer, qtbot: Any) -> None:
    """The same call: the inbox's Approve records the decision, the open dialog takes it and closes,
    and the run resumes (the file is written)."""
    (tid,) = await leave_pending(stub_workspace, ["a.txt"])
    stub_server.script(StubReply(text="Written."))
    window = await open_window(windows, stub_workspace, thread_id=tid)
    panel = decisions_panel(window)
    await find_dialog("approval_dialog")
    await wait_for(lambda: panel.tree.topLevelItemCount() == 1, 5, "the inbox row")
    click(qtbot, panel.approve_button)
    await wait_for(lambda: visible_dialog("approval_dialog") is None, 5, "the dialog to take the inbox's decision")
    await wait_for(lambda: window.session.status == "done", 20, "the run to finish")
    assert (stub_workspace / "a.txt").read_text() == "a.txt"
    await wait_for(lambda: panel.tree.topLevelItemCount() == 0, 5, "an empty inbox")
    assert not window.status.decisions_button.isVisible()
    assert "Nothing waits" in panel.summary.text()


async def test_q1_rejecting_another_threads_call_with_enter_in_the_message(
        windows: Any, stub_workspace: Path, stub_server: StubServer, qtbot: Any) -> None:
    """A decision of another thread: the window opens that thread and its run resumes there; Enter in
    the message rejects with the message (G7), never approves."""
    (other,) = await leave_pending(stub_workspace, ["secret.txt"])
    stub_server.script(StubReply(text="Understood, not writing it."))
    window = await open_window(windows, stub_workspace, thread_id=other)
    await find_dialog("approval_dialog")
    await window.new_thread()  # the person moved on to a new thread; the other one still waits
    here = window.session.thread_id
    panel = decisions_panel(window)
    await wait_for(lambda: panel.tree.topLevelItemCount() == 1 and not panel.items[0].current, 5,
                   "the other thread's decision")
    click(qtbot, window.status.decisions_button)
    assert panel.selected().thread_id == other and panel.open_button.isVisible()
    panel.message.setFocus()
    qtbot.keyClicks(panel.message, "not that file")
    qtbot.keyClick(panel.message, Qt.Key.Key_Return)
    await wait_for(lambda: window.session.thread_id == other, 5, "the window to open the other thread")
    await wait_for(lambda: window.session.status == "done", 20, "the resumed run to finish")
    assert here != other and not (stub_workspace / "secret.txt").exists()
    results = [m for m in window.session.messages if m.role == "tool"]
    assert results and "not that file" in results[-1].content
    assert visible_dialog("approval_dialog") is None


async def test_q1_a_budget_hold_waits_in_the_inbox_and_continues(windows: Any, stub_workspace: Path,
                                                                 stub_server: StubServer, qtbot: Any) -> None:
    with (stub_workspace / "workbench.yaml").open("a") as f:
        f.write("budget:\n  - {scope: run, limit: {total_tokens: 100}, interrupt: true}\n"
                "permissions:\n  rules:\n    - {allow: read, path: '/**'}\n")
    stub_server.script(StubReply(tool_calls=[("read_file", {"path": "/project/README.md"})], usage=(150, 10)),
                       StubReply(text="Read it.", usage=(160, 5)))
    window = await open_window(windows, stub_workspace)
    panel = decisions_panel(window)
    window.input.setPlainText("Read the README")
    click(qtbot, window.send_button)
    await find_dialog("budgetHoldDialog")
    await wait_for(lambda: panel.tree.topLevelItemCount() == 1, 10, "the hold in the inbox")
    assert panel.selected().kind == "budget_hold" and panel.continue_button.isVisible()
    # G11: the inbox speaks in amounts, as the hold dialog does: Continue allows the limit again
    assert panel.continue_button.text() == "Allow 100 more tokens", panel.continue_button.text()
    assert "may go on until" in panel.reason.text() and "spent + 100 more" in panel.reason.text()
    assert not panel.approve_button.isVisible() and panel.stop_hold_button.isVisible()
    assert window.status.decisions_button.text() == "1 decision waiting"
    click(qtbot, panel.continue_button)
    assert await asyncio.wait_for(window.wait_settled(), 20) in ("done", "interrupted", "")
    await wait_for(lambda: window.session.status == "done", 20, "the run to go on past the hold")
    assert window.transcript.messages()[-1].text == "Read it."


async def test_q1_stop_this_run_from_the_inbox(windows: Any, stub_workspace: Path, qtbot: Any) -> None:
    """G12/Q1: "Stop this run" abandons a run waiting for decisions: it ends aborted, no call runs."""
    (tid,) = await leave_pending(stub_workspace, ["a.txt", "b.txt"])
    window = await open_window(windows, stub_workspace, thread_id=tid)
    panel = decisions_panel(window)
    await find_dialog("approval_dialog")
    await wait_for(lambda: panel.tree.topLevelItemCount() == 2, 5, "the inbox rows")
    click(qtbot, panel.stop_run_button)
    await wait_for(lambda: window.session.status == "aborted", 10, "the run to end aborted")
    assert not (stub_workspace / "a.txt").exists() and not (stub_workspace / "b.txt").exists()
    await wait_for(lambda: panel.tree.topLevelItemCount() == 0, 5, "an empty inbox")
    await wait_for(lambda: visible_dialog("approval_dialog") is None, 5, "the dialog to close")
    assert window.session.last_run.status == "aborted"


async def test_q1_render_the_inbox(windows: Any, stub_workspace: Path, qtbot: Any, tmp_path: Path) -> None:
    """The inbox as the person sees it (saved for a look; docs/inbox.png is made the same way)."""
    from tests.ui.helpers import distinct_colors, render_window

    await leave_pending(stub_workspace, ["notes.md", "plan.md", "todo.txt"], ["README.md"], title="Tidy")
    window = await open_window(windows, stub_workspace)
    panel = decisions_panel(window)
    dialog = await find_dialog("approval_dialog")
    dialog.reject()  # left for later: the inbox keeps it
    window.status.decisions_button.click()
    await wait_for(lambda: panel.tree.topLevelItemCount() == 4, 5, "four rows")
    await asyncio.sleep(0.1)
    image = render_window(window, os.environ.get("INBOX_PNG") or str(tmp_path / "inbox.png"))
    assert distinct_colors(image) > 8
    assert button(panel, "decisionStopRun").isVisible()


async def test_q1_stop_this_run_on_a_budget_hold(windows: Any, stub_workspace: Path, stub_server: StubServer,
                                                 qtbot: Any) -> None:
    """G12: a run held at its budget is abandoned from the inbox: aborted, the held call never runs."""
    with (stub_workspace / "workbench.yaml").open("a") as f:
        f.write("budget:\n  - {scope: run, limit: {total_tokens: 100}, interrupt: true}\n")
    stub_server.script(StubReply(tool_calls=[("write_file", {"path": "/project/x.txt", "content": "x"})],
                                 usage=(150, 10)))
    window = await open_window(windows, stub_workspace)
    panel = decisions_panel(window)
    window.input.setPlainText("Write x")
    click(qtbot, window.send_button)
    await find_dialog("budgetHoldDialog")
    await wait_for(lambda: panel.tree.topLevelItemCount() == 1, 10, "the hold in the inbox")
    click(qtbot, window.status.decisions_button)
    assert panel.selected().kind == "budget_hold" and "total_tokens" in panel.reason.text()
    click(qtbot, panel.stop_run_button)
    await wait_for(lambda: window.session.status == "aborted" and not window.busy, 10, "the run to end aborted")
    assert not (stub_workspace / "x.txt").exists()
    await wait_for(lambda: panel.tree.topLevelItemCount() == 0, 5, "an empty inbox")


async def test_q1_a_deleted_threads_decisions_leave_the_inbox(windows: Any, stub_workspace: Path, qtbot: Any) -> None:
    (other,) = await leave_pending(stub_workspace, ["a.txt"])
    window = await open_window(windows, stub_workspace)
    await find_dialog("approval_dialog")
    await window.new_thread()
    panel = decisions_panel(window)
    await wait_for(lambda: panel.tree.topLevelItemCount() == 1, 5, "the other thread's decision")
    threads = window.threads_panel
    threads.select(other)
    click(qtbot, threads.delete_button)
    box = await find_dialog("delete_thread_dialog")
    click(qtbot, box.button(box.StandardButton.Yes))
    await wait_for(lambda: panel.tree.topLevelItemCount() == 0, 5, "the deleted thread's decision to go")
    assert not window.status.decisions_button.isVisible()


async def test_q1_g7_enter_in_the_inbox_never_approves(windows: Any, stub_workspace: Path, qtbot: Any) -> None:
    """Enter on the list, in the arguments, or on a focused Approve decides nothing; Space approves."""
    (tid,) = await leave_pending(stub_workspace, ["a.txt", "b.txt"])
    window = await open_window(windows, stub_workspace, thread_id=tid)
    panel = decisions_panel(window)
    await find_dialog("approval_dialog")
    click(qtbot, window.status.decisions_button)
    await wait_for(lambda: panel.tree.topLevelItemCount() == 2, 5, "the inbox rows")
    for widget in (panel.tree, panel.args, panel.approve_button, panel.continue_button, panel.stop_run_button):
        widget.setFocus()
        for key in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            qtbot.keyClick(widget, key)
    await asyncio.sleep(0.1)
    assert window.session.decided() == {} and window.session.status == "interrupted"
    first = panel.selected().id
    panel.approve_button.setFocus()
    qtbot.keyClick(panel.approve_button, Qt.Key.Key_Space)
    await wait_for(lambda: window.session.decided() == {first: {"decision": "approve"}}, 5, "Space to approve")
    await wait_for(lambda: panel.tree.topLevelItemCount() == 2 and panel.items[0].draft is not None, 5,
                   "the inbox to show the first call decided")
    assert "approved, waiting for the rest" in panel.tree.topLevelItem(0).text(0)


async def test_q1_stop_this_run_on_a_stale_row_never_stops_a_later_run(
        windows: Any, stub_workspace: Path, stub_server: StubServer, qtbot: Any) -> None:
    """A row whose run was answered meanwhile: Stop this run does nothing, and the next run that asks
    is asked (it was abandoned unasked by a leftover stop request)."""
    (tid,) = await leave_pending(stub_workspace, ["a.txt"])
    stub_server.script(StubReply(text="Written."),
                       StubReply(tool_calls=[("write_file", {"path": "/project/b.txt", "content": "b"})]),
                       StubReply(text="b written."))
    window = await open_window(windows, stub_workspace, thread_id=tid)
    panel = decisions_panel(window)
    dialog = await find_dialog("approval_dialog")
    await wait_for(lambda: panel.tree.topLevelItemCount() == 1, 5, "the inbox row")
    stale = panel.selected()
    click(qtbot, button(dialog, "approve_once"))
    await wait_for(lambda: window.session.status == "done" and not window.busy, 20, "the run to finish")
    await window.desk.stop_run(stale)  # the row as it was before the refresh
    window.input.setPlainText("Write b")
    click(qtbot, window.send_button)
    dialog = await find_dialog("approval_dialog")  # asked, not abandoned
    click(qtbot, button(dialog, "approve_once"))
    await wait_for(lambda: window.session.status == "done" and not window.busy, 20, "the second run")
    assert (stub_workspace / "b.txt").read_text() == "b"


async def test_q1_g7_a_double_click_on_approve_never_approves_the_row_that_takes_its_place(
        windows: Any, stub_workspace: Path, stub_server: StubServer, qtbot: Any) -> None:
    """Two threads wait. The person approves the call they read; the second press of a double click
    (150 ms later, within the double-click interval) must not approve the other thread's call, which
    the list used to select by itself in the answered row's place (a review found it)."""
    first, second = await leave_pending(stub_workspace, ["first.txt"], ["second.txt"])
    stub_server.script(StubReply(text="Written."), StubReply(text="Written."))
    window = await open_window(windows, stub_workspace, thread_id=first)
    panel = decisions_panel(window)
    await find_dialog("approval_dialog")
    await wait_for(lambda: panel.tree.topLevelItemCount() == 2, 5, "two rows")
    window.dock("Decisions").raise_()
    panel.select(next(i.id for i in panel.items if i.thread_id == first))
    assert "first.txt" in panel.title.text()
    qtbot.mouseClick(panel.approve_button, Qt.MouseButton.LeftButton)
    await asyncio.sleep(0.15)
    qtbot.mouseClick(panel.approve_button, Qt.MouseButton.LeftButton)
    await wait_for(lambda: (stub_workspace / "first.txt").exists(), 20, "the approved call")
    await asyncio.sleep(1.0)
    assert not (stub_workspace / "second.txt").exists()
    assert [i.thread_id for i in panel.items] == [second] and panel.selected() is None  # the person picks next
    await asyncio.sleep(panel.settle.seconds)
    panel.select(panel.items[0].id)  # a deliberate choice, then a press: it approves
    click(qtbot, panel.approve_button)
    await wait_for(lambda: (stub_workspace / "second.txt").exists(), 20, "the second call, approved on purpose")


async def test_q1_a_refresh_keeps_an_argument_edit_and_a_message_being_typed(
        windows: Any, stub_workspace: Path, qtbot: Any) -> None:
    """The inbox refreshes itself (every 15 s, and when another thread or task changes): it rebuilt the
    details, so "Run edited" became "Approve" of the model's arguments, and a half-typed reason was cut."""
    (tid,) = await leave_pending(stub_workspace, ["a.txt", "b.txt"])
    window = await open_window(windows, stub_workspace, thread_id=tid)
    panel = decisions_panel(window)
    await find_dialog("approval_dialog")
    await wait_for(lambda: panel.tree.topLevelItemCount() == 2, 5, "the inbox rows")
    window.dock("Decisions").raise_()
    first = panel.selected().id
    click(qtbot, panel.edit_button)
    panel.args.selectAll()
    qtbot.keyClicks(panel.args, '{"path": "/project/a.txt", "content": "SAFE"}')
    panel.message.setFocus()
    qtbot.keyClicks(panel.message, "write notes.md inst")
    refreshed = len(window.desk.items)
    window.desk.items = []  # the next refresh rebuilds the list from the store
    window.desk.refresh_soon()
    await wait_for(lambda: len(window.desk.items) == refreshed, 5, "a refresh of the inbox")
    await asyncio.sleep(0.1)
    assert panel.approve_button.text() == "Run edited" and '"SAFE"' in panel.args.toPlainText()
    qtbot.keyClicks(panel.message, "ead")
    assert panel.message.text() == "write notes.md instead"
    click(qtbot, panel.approve_button)
    await wait_for(lambda: first in window.session.decided(), 5, "the edited decision")
    assert window.session.decided()[first] == {"decision": "edit",
                                               "arguments": {"path": "/project/a.txt", "content": "SAFE"}}


# -- with a desk of our own: what a press answers ----------------------------------------------------------

def _pending(qid: str, thread: str, path: str, content: str = "x", title: str = "T") -> Any:
    from workbench.decisions import PendingDecision
    from workbench.engine.middleware import Question

    q = Question(qid, "tool_approval", {"tool": "write_file", "arguments": {"path": path, "content": content},
                                        "reason": "asks"}, qid.removeprefix("approval-"))
    return PendingDecision(q, thread, title, time.time())


def _panel_on(qtbot: Any, items: list[Any]) -> tuple[Any, Any]:
    from PySide6.QtCore import QObject, Signal

    from workbench.ui.decisions_panel import DecisionsPanel

    class Desk(QObject):
        sig_changed = Signal(list)

        def __init__(self) -> None:
            super().__init__()
            self.items, self.answers = list(items), []

        async def answer(self, item: Any, decision: dict[str, Any]) -> None:
            self.answers.append((item.thread_id, item.id, decision))
            self.items = [i for i in self.items if i is not item]
            self.sig_changed.emit(list(self.items))

        def refresh_soon(self) -> None:
            self.sig_changed.emit(list(self.items))

    desk = Desk()
    panel = DecisionsPanel(desk=desk)
    qtbot.addWidget(panel)
    panel.resize(500, 600)
    panel.show()
    return desk, panel


async def test_q1_two_threads_waiting_on_the_same_call_id_are_two_questions(qtbot: Any) -> None:
    """Providers number calls call_0 in every message: two threads each wait on 'approval-call_0'. The
    inbox told rows apart by that id alone: row 2 showed row 1's details, and after row 1 was answered
    with an edit, row 2 took its place with 'Run edited' and row 1's arguments (a review found it)."""
    one = _pending("approval-call_0", "t1", "/project/one.txt", "A", "Thread one")
    two = _pending("approval-call_0", "t2", "/project/two.txt", "B", "Thread two")
    desk, panel = _panel_on(qtbot, [one, two])
    panel.tree.setCurrentItem(panel.tree.topLevelItem(1))
    assert "two.txt" in panel.title.text() and panel.selected() is two
    panel.tree.setCurrentItem(panel.tree.topLevelItem(0))
    click(qtbot, panel.edit_button)
    panel.args.setPlainText('{"path": "/project/one.txt", "content": "EDITED"}')
    click(qtbot, panel.approve_button)
    await asyncio.sleep(0.1)
    assert desk.answers == [("t1", "approval-call_0", {"decision": "edit",
                                                        "arguments": {"path": "/project/one.txt", "content": "EDITED"}})]
    assert panel.selected() is None and not panel.approve_button.isVisible()
    panel.tree.setCurrentItem(panel.tree.topLevelItem(0))  # the person picks thread two's call
    assert "two.txt" in panel.title.text() and panel.approve_button.text() == "Approve"
    assert json.loads(panel.args.toPlainText()) == {"path": "/project/two.txt", "content": "B"}


async def test_q1_an_unchanged_edit_of_arguments_with_no_break_spaces_is_an_approval(qtbot: Any) -> None:
    """The text box reads a no-break space back as a plain space: Edit arguments, change nothing, Run
    edited recorded an edit with every U+00A0 replaced (a review found it, French text: 'Prix : 10 €')."""
    desk, panel = _panel_on(qtbot, [_pending("approval-c1", "t1", "/project/a.txt", "Prix\u00a0: 10\u00a0€")])
    click(qtbot, panel.edit_button)
    assert panel.approve_button.text() == "Run edited"
    click(qtbot, panel.approve_button)
    await asyncio.sleep(0.1)
    assert desk.answers == [("t1", "approval-c1", {"decision": "approve"})]
