"""G7 keyboard in the main window (issue 10 items 2 and 7): the prompt box has the focus when the window
opens and when a run ends; Tab leaves it; Ctrl+Enter sends, Esc stops the run, Ctrl+N new thread, F2
renames the current thread, Ctrl+, opens Settings — each listed in a menu.

Keys go through the real path: to the window (``windowHandle()``: Qt delivers them to the focus widget,
as a keyboard does) or to the focused widget, never by calling the slots.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import QApplication, QLineEdit

from tests.stub_server import StubReply, StubServer
from tests.ui.helpers import click, find_dialog, visible_dialog, wait_for

CTRL = Qt.KeyboardModifier.ControlModifier


def type_into_window(qtbot: Any, window: Any, text: str) -> None:
    """Type as a keyboard does: key events to the window, delivered to whatever has the focus."""
    for ch in text:
        qtbot.keyClick(window.windowHandle(), ch)


def press(qtbot: Any, window: Any, key: Any, modifier: Any = Qt.KeyboardModifier.NoModifier) -> None:
    qtbot.keyClick(QApplication.focusWidget() or window, key, modifier)  # the widget with the focus gets it


async def _shown(window: Any) -> None:
    window.activateWindow()
    await wait_for(lambda: QApplication.activeWindow() is window, 5, "the window to be active")


async def test_g7_the_prompt_box_has_the_focus_when_the_window_opens(windows: Any, demo_workspace: Path,
                                                                     qtbot: Any) -> None:
    window = await windows(demo_workspace)
    await _shown(window)
    assert window.focusWidget() is window.input
    type_into_window(qtbot, window, "hello")
    assert window.input.toPlainText() == "hello"


async def test_g7_tab_leaves_the_prompt_box(windows: Any, demo_workspace: Path, qtbot: Any) -> None:
    window = await windows(demo_workspace)
    await _shown(window)
    window.input.setFocus()
    qtbot.keyClicks(window.input, "ab")
    qtbot.keyClick(window.input, Qt.Key.Key_Tab)
    assert window.input.toPlainText() == "ab"  # no tab character
    assert not window.input.hasFocus()
    qtbot.keyClick(QApplication.focusWidget(), Qt.Key.Key_Backtab, Qt.KeyboardModifier.ShiftModifier)
    assert window.input.hasFocus()


async def test_g7_ctrl_enter_sends_and_the_focus_returns_when_the_run_ends(
        windows: Any, stub_workspace: Path, stub_server: StubServer, qtbot: Any) -> None:
    stub_server.script(StubReply(text="Hi there."))
    window = await windows(stub_workspace)
    await _shown(window)
    type_into_window(qtbot, window, "Say hi")
    click(qtbot, window.send_button)  # a click takes the focus to Send ...
    assert window.focusWidget() is window.send_button
    await asyncio.wait_for(window.wait_settled(), 20)
    assert window.focusWidget() is window.input  # ... and it comes back when the run ends
    stub_server.script(StubReply(text="Again."))
    type_into_window(qtbot, window, "Once more")
    press(qtbot, window, Qt.Key.Key_Return, CTRL)
    assert window.busy
    assert await asyncio.wait_for(window.wait_settled(), 20) == "done"
    assert len(stub_server.requests) == 2 and window.input.toPlainText() == ""
    assert window.focusWidget() is window.input


async def test_g7_esc_stops_the_run_in_flight(windows: Any, stub_workspace: Path, stub_server: StubServer,
                                              qtbot: Any) -> None:
    stub_server.script(StubReply(text="word " * 40, chunks=40, chunk_delay=0.1))
    window = await windows(stub_workspace)
    await _shown(window)
    type_into_window(qtbot, window, "Talk a lot")
    press(qtbot, window, Qt.Key.Key_Return, CTRL)
    await wait_for(lambda: window.session.running, 10, "the run to start")
    press(qtbot, window, Qt.Key.Key_Escape)
    status = await asyncio.wait_for(window.wait_settled(), 10)
    assert status == "aborted" and window.session.status == "aborted"
    assert window.focusWidget() is window.input


async def test_g7_ctrl_n_starts_a_new_thread(windows: Any, demo_workspace: Path, qtbot: Any) -> None:
    window = await windows(demo_workspace)
    await _shown(window)
    first = window.session.thread_id
    before = {t.id for t in window.session.threads()}
    press(qtbot, window, Qt.Key.Key_N, CTRL)
    await wait_for(lambda: window.session.thread_id != first, 5, "a new thread")
    assert window.session.thread_id not in before
    assert window.focusWidget() is window.input


async def test_g7_f2_renames_the_current_thread(windows: Any, demo_workspace: Path, qtbot: Any) -> None:
    window = await windows(demo_workspace)
    await _shown(window)
    tid = window.session.thread_id
    press(qtbot, window, Qt.Key.Key_F2)
    dialog = await find_dialog("rename_thread_dialog", 5)
    field = dialog.findChild(QLineEdit)
    field.selectAll()
    qtbot.keyClicks(field, "Renamed by F2")
    qtbot.keyClick(field, Qt.Key.Key_Return)
    await wait_for(lambda: visible_dialog("rename_thread_dialog") is None, 5, "the rename dialog to close")
    await wait_for(lambda: {t.id: t.title for t in window.session.threads()}[tid] == "Renamed by F2", 5,
                   "the new title")


async def test_g7_ctrl_comma_opens_settings(windows: Any, demo_workspace: Path, qtbot: Any) -> None:
    window = await windows(demo_workspace)
    await _shown(window)
    press(qtbot, window, Qt.Key.Key_Comma, CTRL)
    dialog = await find_dialog("settingsDialog", 5)
    qtbot.keyClick(dialog, Qt.Key.Key_Escape)
    await wait_for(lambda: visible_dialog("settingsDialog") is None, 5, "Settings to close")


async def test_g7_the_shortcuts_are_listed_in_the_menus(windows: Any) -> None:
    window = await windows()
    shortcuts = {a.text().replace("&", ""): {s.toString() for s in a.shortcuts()}
                 for menu in (window.file_menu, window.view_menu, window.run_menu) for a in menu.actions()}
    assert "Ctrl+N" in shortcuts["New thread"]
    assert "F2" in shortcuts["Rename thread…"]
    assert "Ctrl+," in shortcuts["Settings…"]
    assert "Ctrl+Return" in shortcuts["Send"] and "Ctrl+Enter" in shortcuts["Send"]
    assert "Esc" in shortcuts["Stop"]
    assert QKeySequence("F2").toString() == "F2"
