"""Polling helpers for async UI tests (never ``qtbot.waitSignal`` inside a coroutine)."""

from __future__ import annotations

import asyncio

from collections.abc import Callable
from typing import Any, TypeVar

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QAbstractButton, QApplication, QDialog, QWidget

T = TypeVar("T")


async def wait_for(predicate: Callable[[], T], timeout: float = 10.0, what: str = "condition") -> T:
    """Poll ``predicate`` on the loop until it is truthy; its value (``tests.fakes.until``)."""
    from tests.fakes import until

    return await until(predicate, timeout, what)


def visible_dialog(name: str) -> QDialog | None:
    for w in QApplication.topLevelWidgets():
        if isinstance(w, QDialog) and w.objectName() == name and w.isVisible():
            return w
    return None


async def find_dialog(name: str, timeout: float = 30.0) -> Any:
    """The visible top-level dialog with this object name — once a person could act on it: a decision
    dialog that opens within the settle time of the last decision ignores that gesture's second press
    (G7, ``decision_settle``), so a test, like a person, looks at the new dialog before deciding."""
    dialog = await wait_for(lambda: visible_dialog(name), timeout, f"dialog {name!r}")
    await hand_settled()
    return dialog


async def hand_settled() -> None:
    """Wait out what is left of the settle time of the last decision made in a dialog (G7)."""
    import time

    from workbench.ui import decision_settle

    last = getattr(decision_settle, "_last_decision", None)
    if last is not None:
        left = last[0] + decision_settle.settle_seconds() - time.monotonic()
        if left > 0:
            await asyncio.sleep(left + 0.02)


def button(parent: QWidget, name: str) -> QAbstractButton:
    b = parent.findChild(QAbstractButton, name)
    assert b is not None, f"no button {name!r} in {parent.objectName()}"
    return b


def click(qtbot: Any, widget: QAbstractButton) -> None:
    assert widget.isEnabled(), f"{widget.objectName()} is disabled"
    qtbot.mouseClick(widget, Qt.MouseButton.LeftButton)


def render_window(window: QWidget, path: str | None = None) -> Any:
    """The window as a QImage, with its open dialogs painted over it where they appear (centred on it,
    as window-modal dialogs are); saved as PNG to ``path`` if given."""
    from PySide6.QtGui import QPainter

    pixmap = window.grab()
    painter = QPainter(pixmap)
    for w in QApplication.topLevelWidgets():
        if isinstance(w, QDialog) and w.isVisible() and w is not window:
            shot = w.grab()
            x = (pixmap.width() - shot.width()) // 2
            y = (pixmap.height() - shot.height()) // 2
            painter.fillRect(x - 1, y - 1, shot.width() + 2, shot.height() + 2, Qt.GlobalColor.darkGray)
            painter.drawPixmap(x, y, shot)
    painter.end()
    image = pixmap.toImage()
    if path:
        assert image.save(path, "PNG"), f"could not write {path}"
    return image


def distinct_colors(image: Any, step: int = 7) -> int:
    """How many distinct colours a grid sample of the image has (a blank render has one or two)."""
    seen = set()
    for y in range(0, image.height(), step):
        for x in range(0, image.width(), step):
            seen.add(image.pixel(x, y))
    return len(seen)
