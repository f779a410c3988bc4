"""A status-bar label for figures that change every step, without laying the whole window out again.

A ``QLabel`` whose text changes asks its parent to lay out again; in the status bar that reaches the
main window (``QLayout::activate`` ends with the status bar's ``updateGeometry``), and the main
window's layout — docks, splitters, the central area — is recomputed: 2–7 ms on the GUI thread, once
a step and twice a second while the run ticker ticks (issue 9: the window's worst frames). Qt passes
no geometry change up from a widget whose size is fixed both ways, so this label keeps a fixed size
and changes it only when its text no longer fits, or is much narrower: in steps of ``STEP`` pixels.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent
from PySide6.QtWidgets import QLabel, QWidget

from workbench.ui.plain_text import make_plain

#: Widths are rounded up to this many pixels, and shrink only when the text needs two steps less.
STEP = 24


class SteadyLabel(QLabel):
    """A ``QLabel`` of fixed size that grows to fit its text and shrinks only by whole steps."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        make_plain(self)  # its text shows as written, never as markup (plain_text)
        self._fit()

    def setText(self, text: str) -> None:  # noqa: N802 - Qt's name
        if text == self.text():
            return
        super().setText(text)
        self._fit()

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 - Qt's name
        super().changeEvent(event)
        if event.type() in (QEvent.Type.FontChange, QEvent.Type.StyleChange):
            self._fit()  # a bolder status colour or another theme can change the text's width

    def _fit(self) -> None:
        # QLabel's size hint never reports less than the minimum size, so it tells when the text needs
        # more room; the text's own width, when it needs much less.
        hint = QLabel.sizeHint(self)
        margins = self.contentsMargins()
        text_width = (self.fontMetrics().horizontalAdvance(self.text()) + margins.left() + margins.right()
                      + 2 * max(0, self.margin()))
        width, height = self.minimumWidth(), self.minimumHeight()
        fixed = width == self.maximumWidth() and height == self.maximumHeight()
        if not fixed or hint.width() > width or hint.height() > height:
            self.setFixedSize(-(-hint.width() // STEP) * STEP, hint.height())
        elif text_width < width - 2 * STEP:
            self.setFixedSize(-(-text_width // STEP) * STEP, height)


__all__ = ["STEP", "SteadyLabel"]
