"""G14: ordering the window's Tab chain (ui/focus_order.py) must not break the Python side of the
window. Walking the chain with ``nextInFocusChain`` made PySide record each widget under the one
before it; deleting one of those (a transcript notice) then invalidated the menu bar's menus, and the
File, View and Run menus raised "Internal C++ object already deleted"."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import shiboken6
from PySide6.QtWidgets import QLabel, QMainWindow, QPushButton, QVBoxLayout, QWidget

from tests.ui.pending import leave_pending, open_window
from workbench.ui.focus_order import focusables, order_window_focus


def _invalid_attributes(obj: Any) -> list[str]:
    return [name for name, value in vars(obj).items()
            if isinstance(value, shiboken6.Shiboken.Object) and not shiboken6.isValid(value)]


def test_g14_walking_the_chain_then_deleting_a_widget_keeps_the_menus(qtbot: Any) -> None:
    window = QMainWindow()
    qtbot.addWidget(window)
    centre = QWidget()
    lay = QVBoxLayout(centre)
    block = QWidget()
    QVBoxLayout(block).addWidget(QPushButton("Review…", block))
    lay.addWidget(block)
    lay.addWidget(QLabel("after"))
    window.setCentralWidget(centre)
    view_menu = window.menuBar().addMenu("&View")
    action = view_menu.addAction("Threads")
    window.show()
    qtbot.waitExposed(window)

    order_window_focus(window)
    assert len(focusables(centre)) == 1  # the button
    block.deleteLater()
    qtbot.waitUntil(lambda: centre.findChildren(QPushButton) == [])

    assert shiboken6.isValid(view_menu) and shiboken6.isValid(action)
    assert view_menu.title() == "&View" and action.text() == "Threads"


async def test_g14_a_thread_waiting_for_a_decision_keeps_the_window_whole(windows: Any, stub_workspace: Path,
                                                                          qtbot: Any) -> None:
    await leave_pending(stub_workspace, ["a.txt"])
    window = await open_window(windows, stub_workspace)  # shows the "waiting" notice, then the dialog
    await asyncio.sleep(0.3)  # the notice is replaced and deleted on the loop
    assert _invalid_attributes(window) == []
    titles = [a.text() for a in window.menuBar().actions()]
    assert [window.file_menu.title(), window.view_menu.title(), window.run_menu.title()] == \
        [t for t in titles if t in ("&File", "&View", "&Run")]
    assert window.view_menu.actions(), "the View menu still lists its panels"
