"""A decision means what it says (G7, Q2): the gesture that decided one call never decides the next —
in the same dialog, or in the next decision dialog that opens under the same hand (a budget hold right
after "Allow more": found by a review, a double click approved two holds).

When a decision moves the approval dialog on to another call, the focus leaves the decision buttons
(a second Space or Enter lands on the list of calls and decides nothing), and for a settle time a second
press of the same gesture — a double click, a key pressed twice or bouncing, a held key's repeats — is
swallowed. A deliberate press after that decides the new call. Found by a review: Space pressed twice on
"Approve once" approved a write and then the ``rm -rf`` after it, which the person never looked at.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from PySide6.QtCore import QEvent, QObject, QPoint, Qt
from PySide6.QtGui import QGuiApplication, QKeyEvent, QMouseEvent
from PySide6.QtWidgets import QWidget

SETTLE_SECONDS = 0.4
"""After a decision moves the dialog on, for this long (or the desktop's double-click interval if
longer, at most ``SETTLE_MAX_SECONDS``) the decision's gesture is not taken as a decision on the call that
just appeared."""
SETTLE_MAX_SECONDS = 1.0
_NEAR_PX = 16
"""A second click this close (in screen pixels) to the one that decided is the same double click, even
on another button (a button's text, hence its width, changes with the call)."""
_ACTIVATING_KEYS = (Qt.Key.Key_Space, Qt.Key.Key_Select, Qt.Key.Key_Return, Qt.Key.Key_Enter)

Gesture = tuple[str, QObject | None, QPoint | None]
"""What decided: its kind (``mouse``, ``key``, or ``any``: the call changed under the person's hand), the
control, and the click's screen position."""

_last_decision: tuple[float, Gesture] | None = None
"""The latest decision made in any decision dialog of this app, and when (``time.monotonic``): a dialog
that opens within the settle time after it — the next budget hold, 50–100 ms after "Allow more", with its
button under the same pointer — does not take that gesture's second press as its own decision."""


def note_decision(source: Gesture | None) -> None:
    """Remember the gesture that just decided (see ``_last_decision``)."""
    global _last_decision
    if source is not None:
        _last_decision = (time.monotonic(), source)


def settle_seconds() -> float:
    """How long a decision's gesture may carry over: ``SETTLE_SECONDS`` or the double-click interval."""
    hints = QGuiApplication.styleHints() if QGuiApplication.instance() is not None else None
    interval = hints.mouseDoubleClickInterval() / 1000 if hints is not None else 0.0
    return min(max(SETTLE_SECONDS, interval), SETTLE_MAX_SECONDS)


class DecisionSettle(QObject):
    """The event filter on a dialog's decision controls: remembers the gesture that decided, and swallows
    its carry-over for ``seconds`` after the dialog moved on (``moved_on``).

    ``exempt``: a control whose Enter decides again on purpose (the rejection message: rejecting is the
    safe choice); only its key repeats are swallowed. ``focus_off`` moves the focus off the controls.
    """

    def __init__(self, parent: QObject, controls: Sequence[QWidget], *, exempt: QWidget | None = None,
                 focus_off: Callable[[], None]) -> None:
        super().__init__(parent)
        self.clock: Callable[[], float] = time.monotonic
        self.seconds = settle_seconds()
        self._controls = tuple(controls)
        self._exempt = exempt
        self._focus_off = focus_off
        self._until = 0.0
        self._source: Gesture | None = None
        self._input: Gesture | None = None
        self._swallowed: set[tuple[str, int]] = set()
        for w in self._controls:
            w.installEventFilter(self)
        if _last_decision is not None:  # a dialog opening under the hand that just decided in another one
            when, source = _last_decision
            left = when + self.seconds - time.monotonic()
            if left > 0:
                self._until = self.clock() + left
                self._source = source

    def decided(self) -> Gesture | None:
        """A decision is being made now: the gesture that made it (``take_input``), remembered for the
        dialogs that open after this one, too (``note_decision``)."""
        source = self.take_input()
        note_decision(source)
        return source

    def take_input(self) -> Gesture | None:
        """The gesture that is deciding now (the press the filter just let through), once."""
        source, self._input = self._input, None
        return source

    def moved_on(self, source: Gesture | None, *, move_focus: bool = True) -> None:
        """The dialog shows another call: for ``seconds`` a second press of ``source`` is ignored."""
        self._until = self.clock() + self.seconds
        self._source = source
        if move_focus:
            self._focus_off()

    def has_focus(self) -> bool:
        """Whether a decision control has the focus (a press would land on one)."""
        parent = self.parent()
        focus = parent.focusWidget() if isinstance(parent, QWidget) else None
        return any(focus is w for w in self._controls)

    def _carries_over(self, kind: str, control: QObject, pos: QPoint | None) -> bool:
        """Whether this press belongs to the gesture that made the last decision (within the settle time)."""
        source = self._source
        if source is None or self.clock() >= self._until:
            return False
        last_kind, last_control, last_pos = source
        if last_kind == "any":  # the call changed under the person's hand (decided elsewhere)
            return True
        if kind != last_kind:
            return False
        if kind == "key":  # pressed again, bounced, or repeated: whichever control it reaches
            return True
        near = pos is not None and last_pos is not None and (pos - last_pos).manhattanLength() <= _NEAR_PX
        return control is last_control or near

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt override
        """The decision controls' presses: remembered (what decided), or swallowed while they carry over."""
        kind = event.type()
        if not any(obj is w for w in self._controls):
            return super().eventFilter(obj, event)
        if kind in (QEvent.Type.MouseButtonPress, QEvent.Type.MouseButtonDblClick) and isinstance(event, QMouseEvent):
            if event.button() == Qt.MouseButton.LeftButton:
                pos = event.globalPosition().toPoint()
                if self._carries_over("mouse", obj, pos):
                    self._swallowed.add(("mouse", id(obj)))
                    self._focus_off()  # Qt gave the button the focus before this filter ran
                    return True
                self._input = ("mouse", obj, pos)
        elif kind == QEvent.Type.MouseButtonRelease and isinstance(event, QMouseEvent):
            if ("mouse", id(obj)) in self._swallowed and event.button() == Qt.MouseButton.LeftButton:
                self._swallowed.discard(("mouse", id(obj)))
                return True
        elif kind == QEvent.Type.KeyPress and isinstance(event, QKeyEvent) and event.key() in _ACTIVATING_KEYS:
            if event.isAutoRepeat():  # a held key's repeats never decide (a held Enter rejected call after call)
                return True
            # Enter in the rejection message only ever rejects (the safe choice, G7): pressed again there
            # on purpose it rejects the next call; a double press elsewhere lands on the list.
            if obj is not self._exempt and self._carries_over("key", obj, None):
                self._swallowed.add(("key", id(obj)))  # and its release: Space clicks on release
                return True
            self._input = ("key", obj, None)
        elif kind == QEvent.Type.KeyRelease and isinstance(event, QKeyEvent) and event.key() in _ACTIVATING_KEYS:
            if ("key", id(obj)) in self._swallowed and not event.isAutoRepeat():
                self._swallowed.discard(("key", id(obj)))
                return True
        return super().eventFilter(obj, event)
