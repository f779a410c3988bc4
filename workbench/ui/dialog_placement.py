"""Where a modeless dialog goes (G12): beside the window's transcript, not over it.

``beside_rect`` is the rule (pure geometry, tested on its own); ``place_beside_transcript`` applies it
to a dialog and the window it belongs to. The approval dialog is placed this way so the transcript and
the panels stay readable while the person decides.
"""

from __future__ import annotations

from PySide6.QtCore import QPoint, QRect
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QWidget


def beside_rect(transcript: QRect, window: QRect, screen: QRect, width: int, height: int) -> QRect:
    """G12: where a modeless dialog of this size goes so the transcript stays in sight (global
    coordinates): right of the window when the screen has room; else over the right-hand docks; else
    left of the window; else right-aligned, covering the docks first and as little of the transcript as
    it must. Its top is the transcript's; its height at most the transcript's (360 px at least)."""
    height = max(360, min(height, transcript.height()))
    left, right = min(screen.left(), window.left()), max(screen.right(), window.right())
    if screen.right() - window.right() >= width:
        x = window.right() + 1
    elif transcript.right() + width <= right:
        x = transcript.right() + 1
    elif window.left() - screen.left() >= width:
        x = window.left() - width
    else:
        x = max(left, right - width + 1)
    return QRect(x, transcript.top(), width, height)


def place_beside_transcript(dialog: QWidget, window: QWidget | None) -> None:
    """G12: put a modeless dialog beside the window's transcript, not over it (``beside_rect``)."""
    transcript = getattr(window, "transcript", None)
    if window is None or not isinstance(transcript, QWidget) or not transcript.isVisible():
        return
    screen_obj = window.screen() or QGuiApplication.primaryScreen()
    screen = screen_obj.availableGeometry() if screen_obj is not None else window.frameGeometry()
    width = max(dialog.width(), dialog.minimumSizeHint().width())
    rect = beside_rect(QRect(transcript.mapToGlobal(QPoint(0, 0)), transcript.size()), window.frameGeometry(),
                       screen, width, dialog.height())
    dialog.setGeometry(rect)


__all__ = ["beside_rect", "place_beside_transcript"]
