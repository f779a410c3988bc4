"""A push button Enter never presses (G7): autoDefault and default off, so Enter in a field of the same
dialog or panel can never approve, abort or compact anything; the slot gets no ``checked`` argument."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtWidgets import QPushButton, QWidget

from workbench.ui.plain_text import plain_tooltip


def quiet_button(parent: QWidget, text: str, name: str, slot: Callable[[], Any], tip: str = "") -> QPushButton:
    """A button named ``name`` (object name: tests and style sheets find it) that calls ``slot()`` on a
    click and is never pressed by Enter."""
    b = QPushButton(text, parent)
    b.setObjectName(name)
    if tip:
        b.setToolTip(plain_tooltip(tip))
    b.setAutoDefault(False)
    b.setDefault(False)
    b.clicked.connect(lambda _checked=False: slot())
    return b


__all__ = ["quiet_button"]
