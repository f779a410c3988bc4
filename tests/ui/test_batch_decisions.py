"""Q2: several pending calls of one turn are one list (issue 10, defect 9 and build "Batch decisions").

Per-item approve / edit / reject and "Approve the rest"; leaving part-way (Esc, closing) keeps what
was decided and the next opening starts at the first undecided call (it restarted at "call 1 of 3",
throwing the earlier decisions away); "Approve the rest" sits apart from Reject and is never default.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QPushButton

from tests.stub_server import StubReply, StubServer
from tests.ui.helpers import button, click, find_dialog, visible_dialog, wait_for
from tests.ui.pending import open_window, global_rect, leave_pending, warmed
from workbench.engine.middleware import Question
from workbench.ui.decision_dialogs import ask_approvals


def _q(n: int) -> Question:
    return Question(f"approval-c{n}", "tool_approval",
                    {"tool": "write_file", "arguments": {"path": f"/project/f{n}.txt", "content": f"{n}"},
                     "reason": "write: ask"}, call_id=f"c{n}")


def _rows(dialog: Any) -> list[str]:
    return [dialog.batch_list.item(i).text().split("\n")[0] for i in range(dialog.batch_list.count())]


async def test_q2_esc_part_way_keeps_the_decisions_and_reopens_at_the_first_undecided(
        windows: Any, stub_workspace: Path, stub_server: StubServer, qtbot: Any) -> None:
    """Through the window: approve call 1, reject call 2 with a message (Enter), Esc; the decisions are
    kept (Session.decided), the next opening shows "call 3 of 3", and the run resumes with all three."""
    (tid,) = await leave_pending(stub_workspace, ["a.txt", "b.txt", "c.txt"])
    stub_server.script(StubReply(text="Done with the three."))
    window = await open_window(windows, stub_workspace, thread_id=tid)
    dialog = await find_dialog("approval_dialog")
    assert "call 1 of 3" in dialog.header.text()
    assert _rows(dialog) == ["1. To decide", "2. To decide", "3. To decide"]
    click(qtbot, button(dialog, "approve_once"))
    assert "call 2 of 3" in dialog.header.text()
    dialog.reject_message.setFocus()
    qtbot.keyClicks(dialog.reject_message, "not b")
    qtbot.keyClick(dialog.reject_message, Qt.Key.Key_Return)
    assert "call 3 of 3" in dialog.header.text()
    qtbot.keyClick(dialog, Qt.Key.Key_Escape)  # leave part-way
    await wait_for(lambda: visible_dialog("approval_dialog") is None, 5, "the dialog to close")
    assert window.session.status == "interrupted"
    kept = window.session.decided()
    assert sorted(d["decision"] for d in kept.values()) == ["approve", "reject"]
    assert {"decision": "reject", "message": "not b"} in kept.values()

    await wait_for(lambda: not window.busy, 5, "the run loop to leave the decisions")
    review = await wait_for(lambda: window.transcript.findChild(QPushButton, "review_pending"), 5, "Review…")
    click(qtbot, review)  # the transcript's "Review…" opens the dialog again
    dialog = await find_dialog("approval_dialog")
    assert "call 3 of 3" in dialog.header.text(), dialog.header.text()
    assert _rows(dialog) == ["1. Approved", "2. Rejected", "3. To decide"]
    assert "2 of 3 decided" in dialog.batch_note.text()
    click(qtbot, button(dialog, "approve_once"))
    await wait_for(lambda: window.session.status == "done", 20, "the run to resume and finish")
    assert (stub_workspace / "a.txt").read_text() == "a.txt"
    assert not (stub_workspace / "b.txt").exists()
    assert (stub_workspace / "c.txt").read_text() == "c.txt"
    tool_results = [m.content for m in window.session.messages if m.role == "tool"]
    assert any("not b" in r for r in tool_results)
    assert window.session.decided() == {}


async def test_q2_approve_the_rest_keeps_earlier_decisions_and_sits_apart_from_reject(qtbot: Any) -> None:
    task = asyncio.ensure_future(ask_approvals(None, [_q(1), _q(2), _q(3)]))
    dialog = await find_dialog("approval_dialog")
    rest, reject = button(dialog, "approve_all"), button(dialog, "reject")
    assert not rest.isDefault() and not rest.autoDefault()
    # Apart: not in Reject's row, nor beside it (Reject ends the action row; "Approve the rest" is
    # under the list of calls, on the other side of the dialog).
    r, j = global_rect(rest), global_rect(reject)
    assert not r.intersects(j.adjusted(-40, -40, 40, 40))
    assert abs(r.center().x() - j.center().x()) > dialog.width() // 3
    assert rest.text() == "Approve the rest (3)"
    dialog.reject_message.setText("no")
    click(qtbot, reject)
    assert rest.text() == "Approve the rest (2)"
    click(qtbot, rest)
    assert await asyncio.wait_for(task, 5) == {
        "approval-c1": {"decision": "reject", "message": "no"},
        "approval-c2": {"decision": "approve"},
        "approval-c3": {"decision": "approve"},
    }


async def test_q2_pick_any_call_of_the_list_with_the_keyboard(qtbot: Any) -> None:
    """Per-item: the list's Down key selects call 2, which is decided first; the dialog then goes on to
    the first call still undecided (call 1), not past it."""
    task = asyncio.ensure_future(ask_approvals(None, [_q(1), _q(2), _q(3)]))
    dialog = await find_dialog("approval_dialog")
    dialog.batch_list.setFocus()
    qtbot.keyClick(dialog.batch_list, Qt.Key.Key_Down)
    assert "call 2 of 3" in dialog.header.text() and '"/project/f2.txt"' in dialog.args_edit.toPlainText()
    qtbot.keyClick(dialog.batch_list, Qt.Key.Key_Return)  # G7: Enter in the list decides nothing
    assert dialog.decisions == {}
    click(qtbot, button(dialog, "approve_once"))
    assert "call 3 of 3" in dialog.header.text()
    click(qtbot, button(dialog, "reject"))
    assert "call 1 of 3" in dialog.header.text()
    click(qtbot, button(dialog, "approve_once"))
    assert set(await asyncio.wait_for(task, 5)) == {"approval-c1", "approval-c2", "approval-c3"}


async def test_q2_a_dialog_opened_with_decisions_starts_at_the_first_undecided(qtbot: Any) -> None:
    decided = {"approval-c1": {"decision": "approve"}, "approval-c3": {"decision": "reject", "message": "x"}}
    heard: list[tuple[str, dict[str, Any]]] = []
    task = asyncio.ensure_future(ask_approvals(None, [_q(1), _q(2), _q(3)], decided=decided,
                                               on_decided=lambda q, d: heard.append((q, d))))
    dialog = await find_dialog("approval_dialog")
    assert "call 2 of 3" in dialog.header.text()
    assert not button(dialog, "approve_all").isVisible()  # one call left: nothing "rest" to approve
    click(qtbot, button(dialog, "approve_once"))
    assert await asyncio.wait_for(task, 5) == {**decided, "approval-c2": {"decision": "approve"}}
    assert heard == [("approval-c2", {"decision": "approve"})]


async def test_q2_render_the_batch_list(qtbot: Any, tmp_path: Path) -> None:
    from tests.ui.helpers import distinct_colors

    task = asyncio.ensure_future(ask_approvals(None, [_q(1), _q(2), _q(3), _q(4)]))
    dialog = await find_dialog("approval_dialog")
    click(qtbot, button(dialog, "approve_once"))
    await asyncio.sleep(0.05)
    image = dialog.grab().toImage()
    assert image.save(str(tmp_path / "batch.png"), "PNG")
    assert distinct_colors(image) > 8
    assert dialog.batch_list.isVisible() and _rows(dialog)[0] == "1. Approved"
    dialog.reject()
    assert await asyncio.wait_for(task, 5) is None
