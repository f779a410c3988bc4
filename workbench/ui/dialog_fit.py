"""Dialogs that grow with their text instead of clipping it (issue 10 item 11).

A dialog is sized once, when it is shown; a wrapped label that gets a longer text later (a connection
test's error, where a key comes from) makes the layout want more height, but the dialog keeps its size
and Qt squeezes the labels, cutting lines in half. ``grow_with_contents(dialog)`` watches the dialog's
layout requests and makes it tall enough for its layout at its current width (never shorter: a person's
own resize is kept).
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, QTimer, Slot
from PySide6.QtWidgets import QWidget


def needed_height(widget: QWidget) -> int:
    """The height ``widget``'s layout needs at its current width (wrapped labels included)."""
    lay = widget.layout()
    if lay is None:
        return widget.height()
    lay.activate()
    need = lay.totalMinimumSize().height()
    if lay.hasHeightForWidth():
        need = max(need, lay.totalHeightForWidth(widget.width()))
    return need


class _GrowToFit(QObject):
    def __init__(self, widget: QWidget) -> None:
        super().__init__(widget)
        self._widget = widget
        self._queued = False
        widget.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt override
        if event.type() in (QEvent.Type.LayoutRequest, QEvent.Type.Show) and not self._queued:
            self._queued = True
            QTimer.singleShot(0, self, self.fit)  # once the layout has taken the new text in
        return False

    @Slot()
    def fit(self) -> None:
        self._queued = False
        w = self._widget
        if not w.isVisible():
            return
        need = needed_height(w)
        if need > w.height():
            w.resize(w.width(), need)


def grow_with_contents(widget: QWidget) -> None:
    """Keep ``widget`` (a dialog) tall enough for its text as that text changes."""
    _GrowToFit(widget)


__all__ = ["grow_with_contents", "needed_height"]
