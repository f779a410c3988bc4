"""G12: dialogs don't hide the work (issue 10, defects 8 and 10).

The approval dialog is modeless and placed beside the transcript: while a decision is pending the
transcript scrolls and the other docks work. A pending decision has "Stop this run". Quitting with a
run in flight, or with decisions waiting, asks first, and the box's default button keeps the window.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from PySide6.QtCore import QRect, Qt
from PySide6.QtWidgets import QApplication

from tests.stub_server import StubReply, StubServer
from tests.ui.helpers import button, click, find_dialog, visible_dialog, wait_for
from tests.ui.pending import open_window, decisions_panel, global_rect, leave_pending, warmed
from workbench.ui.dialog_placement import beside_rect


async def test_g12_approval_is_modeless_beside_the_transcript_which_scrolls_and_docks_work(
        windows: Any, stub_workspace: Path, qtbot: Any, tmp_path: Path) -> None:
    (tid,) = await leave_pending(stub_workspace, ["a.txt", "b.txt"])
    await leave_pending(stub_workspace, ["other.txt"], title="Another")
    window = await open_window(windows, stub_workspace, thread_id=tid)
    panel = decisions_panel(window)
    click(qtbot, window.status.decisions_button)
    for n in range(80):  # a long transcript to scroll
        window.transcript.add_info(f"Earlier note {n}")
    dialog = await find_dialog("approval_dialog")
    await asyncio.sleep(0.05)
    assert not dialog.isModal() and dialog.windowModality() == Qt.WindowModality.NonModal
    assert QApplication.activeModalWidget() is None  # nothing blocks the window
    # Placed by the rule (beside_rect): this offscreen screen (800 px) is narrower than the window, so
    # it is right-aligned over the docks; on a desktop with room it sits beside (next test).
    screen = window.screen().availableGeometry()
    width = max(dialog.width(), dialog.minimumSizeHint().width())
    expected = beside_rect(global_rect(window.transcript), window.frameGeometry(), screen, width, dialog.height())
    assert global_rect(dialog).topLeft() == expected.topLeft()

    bar = window.transcript.verticalScrollBar()
    await wait_for(lambda: bar.maximum() > 0, 5, "a transcript taller than its view")
    bar.setValue(bar.maximum())
    before = bar.value()
    window.transcript.setFocus()
    qtbot.keyClick(window.transcript, Qt.Key.Key_PageUp)
    assert bar.value() < before, "the transcript did not scroll while the approval was pending"

    # Another dock works: the Decisions panel's list takes a click and shows the other thread's call.
    await wait_for(lambda: panel.tree.topLevelItemCount() == 3, 5, "three decisions in the inbox")
    rect = panel.tree.visualItemRect(panel.tree.topLevelItem(2))
    qtbot.mouseClick(panel.tree.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert panel.selected().thread_title.startswith("Another")
    assert "other.txt" in panel.title.text()
    # ... and the prompt box takes typing.
    window.input.setFocus()
    qtbot.keyClicks(window.input, "meanwhile")
    assert window.input.toPlainText() == "meanwhile"
    assert dialog.isVisible() and dialog.decisions == {}


def test_g12_beside_the_transcript_on_a_desktop() -> None:
    """The placement rule on real desktop sizes: the dialog never covers the transcript when the screen
    has room right of the window, or right of the transcript (over the docks)."""
    transcript = QRect(340, 130, 520, 640)  # a 1200x800 window at (100, 100) on a 1920x1080 screen
    window, screen = QRect(100, 100, 1200, 800), QRect(0, 0, 1920, 1080)
    rect = beside_rect(transcript, window, screen, 600, 520)
    assert rect.left() == window.right() + 1 and not rect.intersects(transcript)
    # A window filling the left of the screen: the dialog goes over the docks, still beside the transcript.
    window, transcript = QRect(0, 0, 1600, 1000), QRect(240, 30, 700, 900)
    rect = beside_rect(transcript, window, screen, 600, 520)
    assert rect.left() == transcript.right() + 1 and not rect.intersects(transcript) and rect.right() <= 1919
    # No room anywhere (a maximised window, a wide dialog): right-aligned, the transcript's left stays in sight.
    window, transcript = QRect(0, 0, 1920, 1080), QRect(240, 30, 1200, 1000)
    rect = beside_rect(transcript, window, screen, 900, 520)
    assert rect.right() == 1919 and rect.left() > transcript.left()


async def test_g12_stop_this_run_in_the_dialog_abandons_it(windows: Any, stub_workspace: Path, qtbot: Any) -> None:
    (tid,) = await leave_pending(stub_workspace, ["a.txt", "b.txt"])
    window = await open_window(windows, stub_workspace, thread_id=tid)
    dialog = await find_dialog("approval_dialog")
    click(qtbot, button(dialog, "approve_once"))  # one decided, then the person gives up on the run
    stop = button(dialog, "stop_run")
    assert not stop.isDefault() and not stop.autoDefault()
    click(qtbot, stop)
    await wait_for(lambda: window.session.status == "aborted" and not window.busy, 10, "the run to end aborted")
    assert visible_dialog("approval_dialog") is None
    assert not (stub_workspace / "a.txt").exists() and not (stub_workspace / "b.txt").exists()
    assert window.session.pending == () and window.session.last_run.status == "aborted"
    assert window.send_button.isEnabled()


async def test_g12_quitting_during_a_run_asks_and_enter_keeps_the_window(
        windows: Any, stub_workspace: Path, stub_server: StubServer, qtbot: Any) -> None:
    stub_server.script(StubReply(text="slow answer " * 20, chunks=20, chunk_delay=0.3))
    window = await open_window(windows, stub_workspace)
    window.input.setPlainText("Take your time")
    click(qtbot, window.send_button)
    await wait_for(lambda: window.session.running, 10, "the run to start")
    window.close()  # the real close path: File → Quit and the title bar's close button both land here
    box = await find_dialog("quit_confirm", 5)
    assert "run is in flight" in box.text()
    default = box.defaultButton()
    assert default is not None and default.objectName() == "quit_confirm_stay"
    assert not button(box, "quit_confirm_quit").isDefault()
    qtbot.keyClick(box, Qt.Key.Key_Return)
    await wait_for(lambda: visible_dialog("quit_confirm") is None, 5, "the box to close")
    await asyncio.sleep(0.05)
    assert window.isVisible() and window.session is not None and window.session.running
    await window.stop()
    assert await asyncio.wait_for(window.wait_settled(), 10) == "aborted"


async def test_g12_quitting_with_decisions_waiting_asks_and_quit_closes(windows: Any, stub_workspace: Path,
                                                                        qtbot: Any) -> None:
    (tid,) = await leave_pending(stub_workspace, ["a.txt"])
    window = await open_window(windows, stub_workspace, thread_id=tid)
    await find_dialog("approval_dialog")
    window.quit_action.trigger()
    box = await find_dialog("quit_confirm", 5)
    assert "1 decision waiting" in box.text()
    qtbot.keyClick(box, Qt.Key.Key_Escape)  # Esc keeps working too
    await wait_for(lambda: visible_dialog("quit_confirm") is None, 5, "the box to close")
    assert window.isVisible()
    window.quit_action.trigger()
    box = await find_dialog("quit_confirm", 5)
    click(qtbot, button(box, "quit_confirm_quit"))
    await wait_for(lambda: not window.isVisible(), 5, "the window to close")
    await wait_for(lambda: window.session is None, 10, "the session to close")


async def test_g12_quitting_an_idle_window_asks_nothing(windows: Any, stub_workspace: Path) -> None:
    window = await open_window(windows, stub_workspace)
    window.close()
    await wait_for(lambda: not window.isVisible(), 5, "the window to close")
    assert visible_dialog("quit_confirm") is None


@settings(max_examples=300, deadline=None)
@given(sw=st.integers(800, 4000), wx=st.integers(0, 1500), ww=st.integers(600, 3000), tl=st.integers(0, 800),
       tw=st.integers(200, 1500), dw=st.integers(300, 1200))
def test_g12_beside_rect_never_covers_the_transcript_when_there_is_room(sw: int, wx: int, ww: int, tl: int,
                                                                       tw: int, dw: int) -> None:
    """Property: whenever some place right of the window, right of the transcript or left of the window
    holds the dialog, the dialog does not cover the transcript; otherwise it still leaves the
    transcript's left edge in sight when the transcript is wider than the dialog's overlap."""
    screen = QRect(0, 0, sw, 1000)
    window = QRect(wx, 50, ww, 800)
    transcript = QRect(wx + min(tl, ww - 100), 80, min(tw, ww - min(tl, ww - 100)), 700)
    rect = beside_rect(transcript, window, screen, dw, 500)
    extent_right = max(screen.right(), window.right())
    room = (screen.right() - window.right() >= dw or transcript.right() + dw <= extent_right
            or window.left() - screen.left() >= dw)
    assert rect.width() == dw and rect.top() == transcript.top()
    if room:
        assert not rect.intersects(transcript)
    else:
        assert rect.right() == extent_right or rect.left() == min(screen.left(), window.left())
