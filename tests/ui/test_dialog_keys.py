"""G7 in every dialog: Enter in a text field never approves anything, the default button is never the
riskiest choice, and Enter in a rejection/stop message rejects/stops with that message (issue 10 item 1).

Keys go through the real keyboard path (``qtbot.keyClick``/``keyClicks`` on the dialog's widgets); a
QPushButton in a QDialog is autoDefault unless told otherwise, so every button is checked.
"""

from __future__ import annotations

import asyncio
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QPushButton

from tests.ui.helpers import button, click, find_dialog, visible_dialog
from workbench.engine.middleware import Question
from workbench.ui import decision_dialogs
from workbench.ui.decision_dialogs import ask_approvals

ENTER_KEYS = (Qt.Key.Key_Return, Qt.Key.Key_Enter)


def _call(n: int) -> Question:
    return Question(f"approval-c{n}", "tool_approval",
                    {"tool": "write_file", "arguments": {"path": f"/project/f{n}.txt", "content": f"text {n}\n"},
                     "reason": "write: ask", "rule": "default: ask"}, call_id=f"c{n}")


def _hold(n: int = 1) -> Question:
    return Question(f"budget-r1-c{n}", "budget_hold",
                    {"tool": "write_file", "arguments": {"path": "/project/x"}, "scope": "run",
                     "field": "total_tokens", "spent": 120, "limit": 100,
                     "fields": {"total_tokens": {"spent": 120, "limit": 100}}}, call_id=f"c{n}")


def _defaults(dialog: Any) -> list[str]:
    """Names of the buttons Enter could press: default, or autoDefault (default while focused)."""
    return [b.objectName() or b.text() for b in dialog.findChildren(QPushButton)
            if b.isDefault() or b.autoDefault()]


async def _settle() -> None:
    for _ in range(3):
        await asyncio.sleep(0.01)


async def test_g7_enter_in_the_reject_message_rejects_that_call_with_the_message(qtbot: Any) -> None:
    """Typing a reason and pressing Enter rejected nothing: it *approved* the write and dropped the reason."""
    task = asyncio.ensure_future(ask_approvals(None, [_call(1), _call(2)]))
    dialog = await find_dialog("approval_dialog")
    dialog.reject_message.setFocus()
    qtbot.keyClicks(dialog.reject_message, "use notes.md instead")
    qtbot.keyClick(dialog.reject_message, Qt.Key.Key_Return)
    await _settle()
    assert dialog.decisions == {"approval-c1": {"decision": "reject", "message": "use notes.md instead"}}
    assert "call 2 of 2" in dialog.header.text() and dialog.reject_message.text() == ""
    # The keypad Enter in the (now empty) message rejects the second call with the default message.
    qtbot.keyClick(dialog.reject_message, Qt.Key.Key_Enter, Qt.KeyboardModifier.KeypadModifier)
    decisions = await asyncio.wait_for(task, 5)
    assert decisions == {"approval-c1": {"decision": "reject", "message": "use notes.md instead"},
                         "approval-c2": {"decision": "reject", "message": "The user rejected this call."}}


async def test_g7_enter_on_a_fresh_approval_dialog_approves_nothing(qtbot: Any) -> None:
    """Enter on the dialog, in its arguments view, and with the focus on any approve button decides
    nothing; no button is (auto)default. Space on a button still presses it."""
    task = asyncio.ensure_future(ask_approvals(None, [_call(1), _call(2)]))
    dialog = await find_dialog("approval_dialog")
    assert _defaults(dialog) == []
    for key in ENTER_KEYS:
        qtbot.keyClick(dialog, key)
        qtbot.keyClick(dialog.args_edit, key)
        for name in ("approve_once", "always_session", "always_project", "always_user", "approve_all"):
            b = button(dialog, name)
            b.setFocus()
            qtbot.keyClick(b, key)
    await _settle()
    assert dialog.decisions == {} and dialog.isVisible() and not task.done()
    assert "call 1 of 2" in dialog.header.text()
    qtbot.keyClick(button(dialog, "approve_once"), Qt.Key.Key_Space)
    assert dialog.decisions == {"approval-c1": {"decision": "approve"}}
    qtbot.keyClick(dialog, Qt.Key.Key_Escape)  # closed without deciding the rest: the run stays suspended
    assert await asyncio.wait_for(task, 5) is None


async def test_g7_enter_in_the_simple_budget_dialog_stops_with_the_reason(qtbot: Any, monkeypatch: Any) -> None:
    """The stand-in budget dialog (used when budget_dialog can't load, and for unknown question kinds):
    its Continue was autoDefault, so Enter in "Reason if you stop" continued."""
    monkeypatch.setattr(decision_dialogs, "_budget_module", lambda: None)
    task = asyncio.ensure_future(decision_dialogs.ask_budget_holds(None, [_hold()]))
    dialog = await find_dialog("budget_hold_dialog")
    assert _defaults(dialog) == []
    qtbot.keyClick(dialog, Qt.Key.Key_Return)
    await _settle()
    assert dialog.isVisible() and dialog.decision is None
    qtbot.keyClicks(dialog.reason, "too expensive")
    qtbot.keyClick(dialog.reason, Qt.Key.Key_Return)
    got = await asyncio.wait_for(task, 5)
    assert got == {"budget-r1-c1": {"decision": "reject", "message": "too expensive"}}


async def test_g7_enter_in_the_generic_question_dialog_never_approves(qtbot: Any) -> None:
    question = Question("q1", "something_new", {"what": "x"})
    task = asyncio.ensure_future(decision_dialogs.ask_decisions(None, [question]))
    dialog = await find_dialog("budget_hold_dialog")
    qtbot.keyClick(dialog, Qt.Key.Key_Return)
    await _settle()
    assert dialog.isVisible() and dialog.decision is None
    qtbot.keyClicks(dialog.reason, "no")
    qtbot.keyClick(dialog.reason, Qt.Key.Key_Return)
    assert await asyncio.wait_for(task, 5) == {"q1": {"decision": "reject", "message": "no"}}


async def test_g7_budget_hold_dialog_enter_never_continues_or_raises(qtbot: Any) -> None:
    """workbench.ui.budget_dialog: Enter on the dialog or in the raise field decides nothing; Enter in
    the reason field stops with the reason."""
    from workbench.ui.budget_dialog import ask_budget_hold

    task = asyncio.ensure_future(ask_budget_hold(_hold()))
    dialog = await find_dialog("budgetHoldDialog")
    assert _defaults(dialog) == []
    qtbot.keyClick(dialog, Qt.Key.Key_Return)
    for spin in dialog.allow_spins.values():
        spin.setFocus()
        qtbot.keyClick(spin, Qt.Key.Key_Up)
        qtbot.keyClick(spin, Qt.Key.Key_Return)
    for b in (dialog.continue_button,):
        b.setFocus()
        qtbot.keyClick(b, Qt.Key.Key_Return)
    await _settle()
    assert dialog.isVisible() and not task.done()
    qtbot.keyClicks(dialog.reason_edit, "too expensive")
    qtbot.keyClick(dialog.reason_edit, Qt.Key.Key_Return)
    got = await asyncio.wait_for(task, 5)
    assert got == {"decision": "reject", "reason": "too expensive", "message": "too expensive"}


async def test_g7_settings_enter_in_a_field_only_saves(qtbot: Any, tmp_path: Any) -> None:
    """Settings: Save is the one default (it changes nothing the person did not type); Enter in a field
    never presses Forget saved key, Browse or Test connection."""
    from workbench.config import UserSettings
    from workbench.ui.settings_dialog import SettingsDialog

    dialog = SettingsDialog(UserSettings(), tmp_path)
    qtbot.addWidget(dialog)
    dialog.show()
    save = dialog.buttons.button(dialog.buttons.StandardButton.Save)
    others = [b for b in dialog.findChildren(QPushButton)
              if b is not save and b is not dialog.buttons.button(dialog.buttons.StandardButton.Cancel)]
    assert others and not [b.objectName() or b.text() for b in others if b.isDefault() or b.autoDefault()]
    assert save.isDefault()
    assert visible_dialog("settingsDialog") is dialog


async def test_g7_enter_in_the_delete_thread_box_keeps_the_thread(windows: Any, demo_workspace: Any,
                                                                  qtbot: Any) -> None:
    window = await windows(demo_workspace)
    panel = window.threads_panel
    tid = window.session.thread_id
    panel.select(tid)
    click(qtbot, panel.delete_button)
    box = await find_dialog("delete_thread_dialog")
    qtbot.keyClick(box, Qt.Key.Key_Return)
    await _settle()
    assert tid in [t.id for t in window.session.threads()]
