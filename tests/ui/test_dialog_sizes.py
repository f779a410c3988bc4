"""Issue 10 item 11: no text is clipped in Settings or in the rename dialog — a wrapped label always has
the height its text needs, even after a longer message arrives; the rename field shows a long title."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QLabel, QLineEdit

from tests.ui.helpers import click, find_dialog, visible_dialog, wait_for

LONG_ERROR = ("Could not connect to http://127.0.0.1:9/v1 (connection refused): check the API base in "
              "Settings and that the server is running, then try again.")


def clipped_labels(dialog: Any) -> list[str]:
    """Visible wrapped labels shorter than their text needs at their width."""
    out = []
    for label in dialog.findChildren(QLabel):
        if label.isVisible() and label.wordWrap() and label.text():
            need = label.heightForWidth(label.width())
            if label.height() < need:
                out.append(f"{label.objectName() or label.text()[:30]!r}: {label.height()} < {need}")
    return out


async def test_settings_grows_with_a_long_test_result_instead_of_clipping(windows: Any, demo_workspace: Path,
                                                                         qtbot: Any, tmp_path: Path) -> None:
    window = await windows(demo_workspace)
    window.settings_action.trigger()
    dialog = await find_dialog("settingsDialog", 10)
    await asyncio.sleep(0.05)
    assert not clipped_labels(dialog)
    dialog.model_combo.setCurrentText("openai/gpt-4.1-mini")  # a key source that wraps
    dialog._show_result(LONG_ERROR, "error")
    dialog._show_error("API base: 'localhost:8000' is not a URL — it should start with http:// or https://")
    await wait_for(lambda: not clipped_labels(dialog), 5, f"no clipped label ({clipped_labels(dialog)})")
    dialog.grab().save(str(tmp_path / "settings.png"))
    dialog.reject()
    await wait_for(lambda: visible_dialog("settingsDialog") is None, 5, "Settings to close")


async def test_rename_dialog_shows_a_long_title_whole(windows: Any, demo_workspace: Path, qtbot: Any,
                                                      tmp_path: Path) -> None:
    title = "Refactor the settings dialog so that each value shows where it comes from"
    window = await windows(demo_workspace)
    window.session.rename_thread(window.session.thread_id, title)
    window.threads_panel.refresh()
    click(qtbot, window.threads_panel.rename_button)
    dialog = await find_dialog("rename_thread_dialog", 5)
    await asyncio.sleep(0.05)
    field = dialog.findChild(QLineEdit)
    assert field.text() == title
    dialog.grab().save(str(tmp_path / "rename.png"))
    room = field.width() - 12  # frame and text margins
    assert field.fontMetrics().horizontalAdvance(title) <= room, "the whole title is visible"
    assert not clipped_labels(dialog)
    qtbot.keyClick(field, Qt.Key.Key_Escape)
    await wait_for(lambda: visible_dialog("rename_thread_dialog") is None, 5, "the rename dialog to close")
    assert QApplication.activeModalWidget() is None
