"""The main window's own small widgets: the input box (Ctrl+Enter sends), the dismissible error bar
above the transcript, and the status bar (``status_bar.RunStatusBar``, or a plain fallback).

Kept out of ``main_window`` so that module holds the window's behaviour only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QPlainTextEdit,
    QPushButton,
    QStatusBar,
    QVBoxLayout,
    QWidget,
)

from workbench.ui.plain_text import plain_label
from workbench.ui.transcript_style import palette as transcript_palette


class PromptEdit(QPlainTextEdit):
    """The input box: Ctrl+Enter sends; Tab moves the focus on (G7), it types no tab character."""

    sig_prompt_submitted = Signal()
    """Ctrl+Enter was pressed."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setTabChangesFocus(True)

    def keyPressEvent(self, event: QKeyEvent) -> None:  # noqa: N802 - Qt override
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter) and (
            event.modifiers() & Qt.KeyboardModifier.ControlModifier
        ):
            self.sig_prompt_submitted.emit()
            return
        super().keyPressEvent(event)


class ErrorBar(QFrame):
    """A dismissible bar above the transcript for failures that are not a run's own error."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("error_bar")
        self._colors: tuple[str, str, str] | None = None
        self._apply_colors()
        lay = QHBoxLayout(self)
        lay.setContentsMargins(8, 4, 8, 4)
        self.label = plain_label(self)
        self.label.setObjectName("error_text")
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        # G9: actions offered with the message (Edit workbench.yaml, Try again, …), in a row under it
        col = QVBoxLayout()
        col.setSpacing(4)
        col.addWidget(self.label)
        self._actions = QHBoxLayout()
        self._actions.setSpacing(6)
        self._actions.addStretch(1)
        col.addLayout(self._actions)
        lay.addLayout(col, 1)
        self.action_buttons: list[QPushButton] = []
        close = QPushButton("Dismiss", self)
        close.setObjectName("dismiss_error")
        close.setAutoDefault(False)
        close.clicked.connect(self.clear)
        lay.addWidget(close, 0, Qt.AlignmentFlag.AlignTop)
        self.messages: list[str] = []
        self.tag = ""
        """What the message is about ("open": a workspace failed to open), "" for anything else."""
        self.hide()

    def _apply_colors(self) -> None:
        colors = tuple(transcript_palette()["error"])
        if colors == self._colors:
            return
        self._colors = colors  # type: ignore[assignment]
        bg, border, fg = colors
        self.setStyleSheet(f"QFrame#error_bar {{ background: {bg}; border: 1px solid {border}; border-radius: 4px; }}"
                           f" QFrame#error_bar QLabel {{ color: {fg}; }}")

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 - Qt override
        """Follow a change of the light/dark theme."""
        super().changeEvent(event)
        if event.type() in (QEvent.Type.StyleChange, QEvent.Type.PaletteChange):
            self._apply_colors()

    def show_message(self, text: str, *, actions: Sequence[tuple[str, str, Callable[[], Any]]] = (),
                     tag: str = "") -> None:
        """Show ``text`` (replacing what was shown) with a button per action: (object name, label, callback)."""
        self.messages.append(text)
        self.label.setText(text)
        self._set_actions(actions)
        self.tag = tag
        self.show()

    def clear(self) -> None:
        """Hide the bar and forget its actions."""
        self._set_actions(())
        self.tag = ""
        self.hide()

    def _set_actions(self, actions: Sequence[tuple[str, str, Callable[[], Any]]]) -> None:
        for b in self.action_buttons:
            self._actions.removeWidget(b)
            b.deleteLater()
        self.action_buttons = []
        for name, label, callback in actions:
            b = QPushButton(label, self)
            b.setObjectName(name)
            b.setAccessibleName(label.rstrip("…"))
            b.setAutoDefault(False)
            b.clicked.connect(lambda _=False, cb=callback: cb())
            self._actions.insertWidget(self._actions.count() - 1, b)  # before the stretch: left-aligned
            self.action_buttons.append(b)


def _status_bar(parent: QWidget) -> QStatusBar:
    """``workbench.ui.status_bar.RunStatusBar`` (model, run status, tokens, cost), or a plain fallback."""
    try:
        from workbench.ui.status_bar import RunStatusBar

        return RunStatusBar(parent)
    except ImportError:
        return _FallbackStatusBar(parent)


class _FallbackStatusBar(QStatusBar):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model_label, self.status_label, self.usage_label = plain_label(self), plain_label(self), plain_label(self)
        for label in (self.model_label, self.status_label, self.usage_label):
            self.addPermanentWidget(label)

    def set_model(self, name: str | None) -> None:
        self.model_label.setText(name or "no model")

    def set_status(self, status: str | None) -> None:
        self.status_label.setText(status or "ready")

    def set_usage(self, run: dict[str, Any] | None, thread: dict[str, Any] | None) -> None:
        t = thread or {}
        cost = t.get("cost_usd")
        self.usage_label.setText(f"{int(t.get('input_tokens') or 0):,} in / {int(t.get('output_tokens') or 0):,} out"
                                 f" · {'$%.4f' % cost if cost is not None else 'cost n/a'}")
