"""G7, Q2 (G3): every decision in the approval dialog means what it says. After a decision moves the
dialog on to the next call of a batch, the gesture that decided — Space pressed twice, a double click, a
held key — never decides the call that just appeared (the reviewer's case: a write approved, then
``execute rm -rf dir2`` approved by the second Space). A deliberate press once the dialog has settled
decides the new call; Enter still never approves.

Keys and clicks go through the real input path (``qtbot.keyClick``/``mouseClick``/``mouseDClick`` on
the dialog's widgets). The settle time's clock is the dialog's ``clock`` attribute: a fake one here, so
no test sleeps for it except the one checking the real clock.
"""

from __future__ import annotations

import asyncio
from typing import Any

from PySide6.QtCore import QEvent, Qt
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QApplication

from tests.ui.helpers import button, click, find_dialog
from workbench.engine.middleware import Question
from workbench.ui.decision_settle import SETTLE_MAX_SECONDS, SETTLE_SECONDS
from workbench.ui.decision_dialogs import ask_approvals

ENTER_KEYS = (Qt.Key.Key_Return, Qt.Key.Key_Enter)
APPROVE_BUTTONS = ("approve_once", "always_session", "always_project", "always_user")


def _call(n: int, tool: str = "write_file") -> Question:
    args = ({"path": f"/project/f{n}.txt", "content": f"text {n}\n"} if tool == "write_file"
            else {"command": f"rm -rf dir{n}"})
    return Question(f"approval-c{n}", "tool_approval", {"tool": tool, "arguments": args, "reason": "ask"},
                    call_id=f"c{n}")


BATCH = [_call(1), _call(2, "execute"), _call(3, "execute")]


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def _open(calls: list[Question] = BATCH) -> tuple[Any, asyncio.Future[Any], FakeClock]:
    task = asyncio.ensure_future(ask_approvals(None, calls))
    dialog = await find_dialog("approval_dialog")
    clock = FakeClock()
    dialog.clock = clock
    return dialog, task, clock


async def _spin() -> None:
    for _ in range(3):
        await asyncio.sleep(0.01)


def double_click(qtbot: Any, widget: Any) -> None:
    """A real double click as a widget receives it: press, release, then the double-click event (Qt
    delivers it in place of the second press) and its release. ``qtbot.mouseDClick`` alone sends only
    the double-click event."""
    qtbot.mouseClick(widget, Qt.MouseButton.LeftButton)
    qtbot.mouseDClick(widget, Qt.MouseButton.LeftButton)
    qtbot.mouseRelease(widget, Qt.MouseButton.LeftButton)


async def _close(dialog: Any, task: asyncio.Future[Any]) -> None:
    if dialog.isVisible():
        dialog.reject()
    await asyncio.wait_for(task, 5)


def test_the_settle_time_is_a_few_hundred_ms() -> None:
    assert 0.3 <= SETTLE_SECONDS <= 0.5 and SETTLE_MAX_SECONDS <= 1.0


async def test_g7_q2_space_twice_on_approve_once_decides_only_the_first_call(qtbot: Any) -> None:
    """G7/Q2: Space, Space on "Approve once" approved the write AND the `rm -rf` shown after it. Now the
    second press decides nothing, the focus is on the list of calls, and a deliberate press after the
    settle time approves call 2."""
    dialog, task, clock = await _open()
    approve = button(dialog, "approve_once")
    approve.setFocus()
    await _spin()
    qtbot.keyClick(approve, Qt.Key.Key_Space)
    assert dialog.decisions == {"approval-c1": {"decision": "approve"}}
    assert "call 2 of 3" in dialog.header.text() and "rm -rf dir2" in dialog.command_label.text()
    assert QApplication.focusWidget() is dialog.batch_list  # off the decision buttons
    qtbot.keyClick(approve, Qt.Key.Key_Space)  # the double press, on the button itself
    qtbot.keyClick(QApplication.focusWidget(), Qt.Key.Key_Space)  # and where the focus really is
    await _spin()
    assert dialog.decisions == {"approval-c1": {"decision": "approve"}}
    clock.now += dialog.settle_seconds / 2
    qtbot.keyClick(approve, Qt.Key.Key_Space)  # still within the settle time
    assert dialog.decisions == {"approval-c1": {"decision": "approve"}}
    clock.now += dialog.settle_seconds  # the person looked at call 2 and decides it
    qtbot.keyClick(approve, Qt.Key.Key_Space)
    assert dialog.decisions == {"approval-c1": {"decision": "approve"}, "approval-c2": {"decision": "approve"}}
    assert "call 3 of 3" in dialog.header.text()
    await _close(dialog, task)


async def test_g7_q2_a_double_click_on_approve_decides_only_the_first_call(qtbot: Any) -> None:
    """G7/Q2: a double click on "Approve once" (or on an Always button, whose width changes with the
    call) approves one call; a click after the settle time decides the next."""
    dialog, task, clock = await _open()
    double_click(qtbot, button(dialog, "approve_once"))
    await _spin()
    assert dialog.decisions == {"approval-c1": {"decision": "approve"}}
    assert QApplication.focusWidget() is not button(dialog, "approve_once")
    clock.now += dialog.settle_seconds + 0.01
    double_click(qtbot, button(dialog, "always_session"))
    await _spin()
    assert dialog.decisions == {"approval-c1": {"decision": "approve"},
                                "approval-c2": {"decision": "approve", "always": "session"}}
    assert "call 3 of 3" in dialog.header.text()
    clock.now += dialog.settle_seconds + 0.01
    click(qtbot, button(dialog, "approve_once"))
    assert await asyncio.wait_for(task, 5) == {
        "approval-c1": {"decision": "approve"},
        "approval-c2": {"decision": "approve", "always": "session"},
        "approval-c3": {"decision": "approve"},
    }


async def test_g7_q2_the_real_clock_a_deliberate_press_after_the_settle_time_decides(qtbot: Any) -> None:
    """The settle time on the real monotonic clock: a press right after is ignored, one after it decides."""
    task = asyncio.ensure_future(ask_approvals(None, BATCH))
    dialog = await find_dialog("approval_dialog")
    assert SETTLE_SECONDS <= dialog.settle_seconds <= SETTLE_MAX_SECONDS
    approve = button(dialog, "approve_once")
    qtbot.keyClick(approve, Qt.Key.Key_Space)
    qtbot.keyClick(approve, Qt.Key.Key_Space)
    assert list(dialog.decisions) == ["approval-c1"]
    await asyncio.sleep(dialog.settle_seconds + 0.05)
    qtbot.keyClick(approve, Qt.Key.Key_Space)
    assert list(dialog.decisions) == ["approval-c1", "approval-c2"]
    await _close(dialog, task)


async def test_g7_holding_space_approves_one_call(qtbot: Any) -> None:
    """G7: a held Space (press, auto-repeats, release) approves the one call it was pressed on."""
    dialog, task, clock = await _open()
    approve = button(dialog, "approve_once")
    approve.setFocus()
    await _spin()

    def send(kind: QEvent.Type, repeat: bool) -> None:
        target = QApplication.focusWidget() or approve
        QApplication.sendEvent(target, QKeyEvent(kind, Qt.Key.Key_Space, Qt.KeyboardModifier.NoModifier, " ",
                                                 repeat))

    send(QEvent.Type.KeyPress, False)
    for _ in range(5):
        send(QEvent.Type.KeyRelease, True)
        send(QEvent.Type.KeyPress, True)
    send(QEvent.Type.KeyRelease, False)
    await _spin()
    assert dialog.decisions == {"approval-c1": {"decision": "approve"}}
    await _close(dialog, task)


async def test_g7_a_held_enter_in_the_reject_message_rejects_one_call(qtbot: Any) -> None:
    """G7: Enter in the rejection message rejects; held down, its repeats do not reject call after call."""
    dialog, task, clock = await _open()
    field = dialog.reject_message
    field.setFocus()
    await _spin()
    QApplication.sendEvent(field, QKeyEvent(QEvent.Type.KeyPress, Qt.Key.Key_Return,
                                            Qt.KeyboardModifier.NoModifier, "\r", False))
    for _ in range(5):
        QApplication.sendEvent(field, QKeyEvent(QEvent.Type.KeyPress, Qt.Key.Key_Return,
                                                Qt.KeyboardModifier.NoModifier, "\r", True))
    QApplication.sendEvent(field, QKeyEvent(QEvent.Type.KeyRelease, Qt.Key.Key_Return,
                                            Qt.KeyboardModifier.NoModifier, "\r", False))
    await _spin()
    assert dialog.decisions == {"approval-c1": {"decision": "reject", "message": "The user rejected this call."}}
    await _close(dialog, task)


async def test_g7_enter_never_approves_before_or_after_the_settle_time(qtbot: Any) -> None:
    """G7: after a decision, Return/Enter on every approve button and on the list decides nothing — at
    once, and once the dialog has settled."""
    dialog, task, clock = await _open()
    qtbot.keyClick(button(dialog, "approve_once"), Qt.Key.Key_Space)
    assert list(dialog.decisions) == ["approval-c1"]
    for later in (0.0, dialog.settle_seconds + 0.01):
        clock.now += later
        for key in ENTER_KEYS:
            qtbot.keyClick(dialog.batch_list, key)
            qtbot.keyClick(dialog, key)
            for name in APPROVE_BUTTONS + ("approve_all",):
                b = button(dialog, name)
                if b.isVisible():
                    b.setFocus()
                    qtbot.keyClick(b, key)
        await _spin()
        assert list(dialog.decisions) == ["approval-c1"] and "call 2 of 3" in dialog.header.text()
    await _close(dialog, task)


async def test_q1_a_call_decided_in_the_inbox_is_not_replaced_under_the_persons_click(qtbot: Any) -> None:
    """Q1/Q2: when the shown call is decided elsewhere (the inbox) and the dialog moves on, a click
    already on its way to "Approve once" does not approve the call that just appeared."""
    dialog, task, clock = await _open()
    approve = button(dialog, "approve_once")
    approve.setFocus()
    dialog.sync({"approval-c1": {"decision": "reject", "message": "no"}})
    assert "call 2 of 3" in dialog.header.text()
    click(qtbot, approve)
    qtbot.keyClick(approve, Qt.Key.Key_Space)
    assert dialog.decisions == {"approval-c1": {"decision": "reject", "message": "no"}}
    clock.now += dialog.settle_seconds + 0.01
    click(qtbot, approve)
    assert list(dialog.decisions) == ["approval-c1", "approval-c2"]
    await _close(dialog, task)
