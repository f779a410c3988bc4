"""A scrolling list of rows that builds widgets only around what is on screen (G13).

The transcript of a long thread has thousands of rows (``transcript_rows.Row``); a widget each would
take seconds and hundreds of MB to build. ``RowList`` keeps every row as data and builds widgets for
one contiguous window of them, ``rows[lo:hi]``:

- a thread opens with its newest rows built (all of them when it is short: ``SMALL``), the last one in
  sight at once;
- as the person scrolls towards the top of what is built, rows above are built, a few per turn of the
  event loop (``FILL_BUDGET`` each), keeping what they read where it is on screen (an anchor row keeps
  its place); near the oldest loaded row the subclass reads an earlier page (``fetch_earlier``);
- scrolling back down builds the rows below again; rows far out of sight are dropped once more than
  ``MAX_BUILT`` are built, so memory and layout stay bounded however far the person scrolls;
- a dropped row's widget is kept for reuse (``POOL`` of each kind): the next row of that kind takes it
  over (``reuse_row``) instead of building and styling a new one — three times cheaper;
- the newest row streams as before: appending to a list built to its end builds the new row at once —
  from a spare when one is kept: after each row added at the end, a spare widget of its kind is built
  and styled a moment later (``spare_row``), between streamed batches, so a step's boundary (a new
  tool call row, then the next answer's block, with the engine's own work) does not also build and
  style widgets (issue 9: the window's worst frames were there).

The subclass builds a row's widget (``build_row``), says which rows may share widgets (``pool_key``)
and fits a kept widget to another row (``reuse_row``), and says whether an earlier page exists
(``more_above``). Layout changes are applied at once (``_settle``), not on a later turn of the loop, so
a row built above the viewport never makes the view jump.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from PySide6.QtCore import QEvent, Qt, QTimer, Slot
from PySide6.QtWidgets import QApplication, QScrollArea, QVBoxLayout, QWidget

from workbench.ui.focus_order import chain_after, parts_of
from workbench.ui.plain_text import plain_label
from workbench.ui.transcript_rows import Row

#: A thread of at most this many rows is built whole (as before: every block there at once).
SMALL = 150
#: How many of a long thread's newest rows are built when it opens.
INITIAL = 30
#: Rows far out of sight are dropped once more than this many are built.
MAX_BUILT = 200
#: Seconds of building (and of dropping) per turn of the event loop while scrolling (a frame is ~16 ms).
FILL_BUDGET, TRIM_BUDGET = 0.005, 0.002
#: Rows are built this many screens ahead of the viewport, and kept this many screens away from it.
AHEAD_SCREENS, KEEP_SCREENS = 1.5, 3.0
#: The subclass is asked for an earlier page when fewer rows than this are left above what is built.
PREFETCH_ROWS = 80
#: Widgets kept for reuse, per kind (``pool_key``); more are deleted.
POOL = 80
#: After a row is added at the end, a spare widget of its kind is built this many ms later (see
#: ``_make_spare``), so that the next such row takes it over instead of being built then.
SPARE_DELAY_MS = 40


class RowList(QScrollArea):
    """A vertical list of ``Row``s over a scroll area, built lazily around the viewport (see the module)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWidgetResizable(True)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self._content = QWidget()
        self._layout = QVBoxLayout(self._content)
        self._layout.setContentsMargins(10, 10, 10, 10)
        self._layout.setSpacing(6)
        # Shown at the top while earlier rows exist but are not built yet (a fast scroll gets there first).
        self.history_hint = plain_label("Loading earlier messages…", self._content)
        self.history_hint.setObjectName("transcript_history_hint")
        self.history_hint.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.history_hint.hide()
        self._layout.addWidget(self.history_hint)
        self._head = 1  # widgets above the rows (the subclass may add more: ``add_head``)
        self._layout.addStretch(1)
        self.setWidget(self._content)
        self._rows: list[Row] = []
        self._lo = self._hi = 0
        self._pool: dict[str, list[QWidget]] = {}
        self._fresh: list[QWidget] = []  # built since the list was last laid out (``_settle``)
        self._cost = 0.001  # seconds a row takes to build, on average (a frame builds what fits)
        self._stick = True
        self._filling = QTimer(self)
        self._filling.setSingleShot(True)
        self._filling.setInterval(0)
        self._filling.timeout.connect(self._fill)
        self._spare_keys: list[str] = []  # kinds a spare is wanted for, oldest first
        self._spares = QTimer(self)
        self._spares.setSingleShot(True)
        self._spares.setInterval(SPARE_DELAY_MS)
        self._spares.timeout.connect(self._make_spare)
        bar = self.verticalScrollBar()
        bar.rangeChanged.connect(self._on_range)
        bar.valueChanged.connect(self._on_scrolled)

    # -- what the subclass provides ------------------------------------------------------------------
    def build_row(self, row: Row) -> QWidget:  # pragma: no cover - abstract
        raise NotImplementedError

    def more_above(self) -> bool:
        """Whether rows older than the first one loaded exist (an earlier page to read)."""
        return False

    def fetch_earlier(self) -> None:
        """Read the page before the first row (then ``prepend_rows``); called when the person nears it."""

    def pool_key(self, row: Row) -> str | None:
        """Rows with the same key may take over each other's widgets (None: never reused)."""
        return None

    def reuse_row(self, row: Row, widget: QWidget) -> None:
        """Make a kept widget show ``row`` (as ``build_row(row)`` would have built it)."""

    def spare_row(self, key: str) -> Row | None:
        """A placeholder row to build a spare widget of kind ``key`` from (None: no spares of it)."""
        return None

    def add_head(self, widget: QWidget) -> None:
        """A fixed widget above the rows (below the earlier-messages hint)."""
        self._layout.insertWidget(self._head, widget)
        self._head += 1

    def add_tail(self, widget: QWidget) -> None:
        """A fixed widget below the rows (above the stretch)."""
        self._layout.insertWidget(self._layout.count() - 1, widget)  # the stretch stays last

    # -- the rows --------------------------------------------------------------------------------------
    @property
    def rows(self) -> list[Row]:
        """Every loaded row, oldest first (built or not)."""
        return self._rows

    def built_rows(self) -> list[Row]:
        """The rows that have a widget now, in order."""
        return self._rows[self._lo:self._hi]

    @property
    def built_range(self) -> tuple[int, int]:
        return self._lo, self._hi

    def at_end(self) -> bool:
        """Whether the newest row is built (new rows are built as they come)."""
        return self._hi == len(self._rows)

    def set_rows(self, rows: Sequence[Row]) -> None:
        """Show these rows instead, the newest in sight (all built when few)."""
        self._drop_all()
        self._rows = list(rows)
        self._lo = self._hi = len(self._rows)
        self._stick = True
        first = 0 if len(self._rows) <= SMALL else len(self._rows) - INITIAL
        for i in range(len(self._rows) - 1, first - 1, -1):
            self._build(i, above=True)
        self._settle(None)
        self._update_hint()
        self.scroll_to_end()

    def append_row(self, row: Row) -> None:
        """A new newest row: built at once when the list is built to its end."""
        built = self.at_end()
        self._rows.append(row)
        if built:
            self._build(len(self._rows) - 1, above=False)
            key = self.pool_key(row)
            if key is not None and not self._pool.get(key) and key not in self._spare_keys:
                self._spare_keys.append(key)
                self._spares.start()

    def prepend_rows(self, rows: Sequence[Row]) -> None:
        """Older rows (an earlier page) above the first; built as the person scrolls up to them."""
        if not rows:
            self._update_hint()
            return
        self._rows[0:0] = list(rows)
        self._lo += len(rows)
        self._hi += len(rows)
        self._update_hint()
        self._schedule()

    def remove_row(self, row: Row) -> None:
        try:
            i = self._rows.index(row)
        except ValueError:
            return
        if self._lo <= i < self._hi:
            self._unbuild(row)
            self._hi -= 1
        elif i < self._lo:
            self._lo -= 1
            self._hi -= 1
        del self._rows[i]

    def clear_rows(self) -> None:
        self._drop_all()
        self._rows = []
        self._lo = self._hi = 0
        self._stick = True
        self._update_hint()

    def jump_to_end(self) -> None:
        """Show the newest rows (the person sent a message while reading far above)."""
        if not self.at_end():
            self._drop_all()
            self._lo = self._hi = len(self._rows)
            for i in range(len(self._rows) - 1, max(0, len(self._rows) - INITIAL) - 1, -1):
                self._build(i, above=True)
            self._settle(None)
            self._update_hint()
        self.scroll_to_end()

    # -- building ----------------------------------------------------------------------------------------
    def _build(self, i: int, *, above: bool) -> QWidget:
        """Build row ``i`` (just above ``lo`` or just below ``hi``) into the layout."""
        row = self._rows[i]
        key = self.pool_key(row)
        kept = self._pool.get(key) if key is not None else None
        if kept:
            widget = kept.pop()
            self.reuse_row(row, widget)
        else:
            widget = self.build_row(row)
        row.widget = widget
        self._fresh.append(widget)
        if above:
            assert i == self._lo - 1 or self._lo == self._hi == i + 1
            self._lo = i
            if self._hi < self._lo + 1:
                self._hi = self._lo + 1
            index = self._head
        else:
            assert i == self._hi
            self._hi = i + 1
            index = self._head + (i - self._lo)
        self._layout.insertWidget(index, widget)
        widget.show()  # now, not on a later turn: its height is known before the layout settles
        # G14: Tab reaches the new row after the built row above it (Qt would put it after every dock)
        anchor: QWidget = self
        for j in range(i - 1, self._lo - 1, -1):
            above_widget = self._rows[j].widget
            parts = parts_of(above_widget) if above_widget is not None else []
            if parts:
                anchor = parts[-1]
                break
        chain_after(anchor, widget)
        return widget

    @Slot()
    def _make_spare(self) -> None:
        """Build one wanted spare (one a turn: each is a few ms) and keep it, hidden, in the pool.

        It is parented to the list's container and polished now, so the container's style sheet is
        applied here rather than when it is first shown."""
        while self._spare_keys:
            key = self._spare_keys.pop(0)
            if self._pool.get(key):
                continue
            row = self.spare_row(key)
            if row is None:
                continue
            widget = self.build_row(row)
            widget.setParent(self._content)
            widget.hide()
            widget.ensurePolished()
            self._pool.setdefault(key, []).append(widget)
            break
        if self._spare_keys:
            self._spares.start()

    def _unbuild(self, row: Row) -> None:
        widget, row.widget = row.widget, None
        if widget is None:
            return
        self.forget_widget(row, widget)
        if widget in self._fresh:
            self._fresh.remove(widget)
        self._layout.removeWidget(widget)
        widget.hide()
        key = self.pool_key(row)
        kept = self._pool.setdefault(key, []) if key is not None else None
        if kept is not None and len(kept) < POOL:
            kept.append(widget)
        else:
            widget.deleteLater()

    def forget_widget(self, row: Row, widget: QWidget) -> None:
        """The subclass keeps what the row's widget shows that the row does not know (e.g. expanded)."""

    def _drop_all(self) -> None:
        for row in self._rows[self._lo:self._hi]:
            self._unbuild(row)
        self._lo = self._hi = 0
        self._fresh.clear()

    def _settle(self, anchor: tuple[QWidget, int] | None) -> None:
        """Lay the list out now (new rows' heights, the scroll range) and put ``anchor`` — a widget and its
        distance from the top of the viewport — back where it was, so nothing on screen moves."""
        fresh, self._fresh = self._fresh, []
        for _ in range(4):
            self._layout.activate()
            # A new row's height follows the width the list just gave it: its own layout would learn so
            # on a later turn (a posted event); activated here, it tells the list now, and a next pass
            # lays the list out again with the heights the rows really have.
            changed = False
            for widget in fresh:
                inner = widget.layout()
                if inner is not None and inner.activate():
                    changed = True
            QApplication.sendEvent(self, QEvent(QEvent.Type.LayoutRequest))  # the area sizes its content now
            if not changed:
                break
        bar = self.verticalScrollBar()
        if self._stick:
            bar.setValue(bar.maximum())
        elif anchor is not None:
            widget, offset = anchor
            bar.setValue(widget.y() - offset)

    def _first_visible(self) -> tuple[QWidget, int] | None:
        """The first built widget whose bottom is in or below the viewport, with its offset from its top."""
        top = self.verticalScrollBar().value()
        for row in self._rows[self._lo:self._hi]:
            w = row.widget
            if w is not None and w.y() + w.height() >= top:
                return w, w.y() - top
        return None

    # -- filling as the person scrolls -------------------------------------------------------------------------
    def _schedule(self) -> None:
        if not self._filling.isActive():
            self._filling.start()

    @Slot()
    def _fill(self) -> None:
        """Build rows the viewport is about to reach and drop those far out of sight, within one turn's
        budget; goes on next turn if there is more to do."""
        if not self._rows:
            return
        deadline = time.perf_counter() + FILL_BUDGET
        bar = self.verticalScrollBar()
        screen = max(self.viewport().height(), 1)
        more = False
        # above: the viewport is less than AHEAD_SCREENS below the top of what is built
        if bar.value() < AHEAD_SCREENS * screen and self._lo > 0:
            anchor = self._first_visible()
            added = 0
            while self._lo > 0 and added < AHEAD_SCREENS * screen and (not added or self._fits(deadline)):
                began = time.perf_counter()
                added += self._build(self._lo - 1, above=True).sizeHint().height() + self._layout.spacing()
                self._learn(time.perf_counter() - began)
            self._settle(anchor)
            more = bar.value() < AHEAD_SCREENS * screen and self._lo > 0
        # below: the viewport is near the bottom of what is built, and newer rows are not
        elif bar.maximum() - bar.value() < AHEAD_SCREENS * screen and not self.at_end():
            anchor = self._first_visible()
            built = 0
            while not self.at_end() and (not built or self._fits(deadline)):
                built += 1
                began = time.perf_counter()
                self._build(self._hi, above=False)
                self._learn(time.perf_counter() - began)
            self._settle(anchor)
            more = bar.maximum() - bar.value() < AHEAD_SCREENS * screen and not self.at_end()
        # and drop what is far out of sight (a row dropped costs little: its own small budget)
        more = self._trim(time.perf_counter() + TRIM_BUDGET, screen) or more
        if self._lo < PREFETCH_ROWS and self.more_above():
            self.fetch_earlier()
        self._update_hint()
        if more:
            self._schedule()

    def _fits(self, deadline: float) -> bool:
        """Whether one more row is likely to be built before ``deadline`` (a frame stays short)."""
        return time.perf_counter() + self._cost < deadline

    def _learn(self, cost: float) -> None:
        self._cost = 0.8 * self._cost + 0.2 * cost

    def _trim(self, deadline: float, screen: int) -> bool:
        """Drop rows more than KEEP_SCREENS out of sight once more than MAX_BUILT are built (below first:
        nothing on screen moves for those); True if more are to go."""
        if self._hi - self._lo <= MAX_BUILT:
            return False
        bar = self.verticalScrollBar()
        top, bottom = bar.value() - KEEP_SCREENS * screen, bar.value() + (1 + KEEP_SCREENS) * screen
        anchor = self._first_visible()
        dropped = False
        while self._hi - self._lo > MAX_BUILT and time.perf_counter() < deadline:
            w = self._rows[self._hi - 1].widget
            if w is None or w.y() <= bottom:
                break
            self._unbuild(self._rows[self._hi - 1])
            self._hi -= 1
            self._stick = False
            dropped = True
        while self._hi - self._lo > MAX_BUILT and time.perf_counter() < deadline:
            w = self._rows[self._lo].widget
            if w is None or w.y() + w.height() >= top:
                break
            self._unbuild(self._rows[self._lo])
            self._lo += 1
            dropped = True
        if dropped:
            self._settle(anchor)
        return dropped and self._hi - self._lo > MAX_BUILT

    def _update_hint(self) -> None:
        self.history_hint.setVisible(self._lo > 0 or self.more_above())

    # -- scrolling ------------------------------------------------------------------------------------------
    @Slot(int, int)
    def _on_range(self, _min: int, maximum: int) -> None:
        if self._stick and self.at_end():
            self.verticalScrollBar().setValue(maximum)

    @Slot(int)
    def _on_scrolled(self, value: int) -> None:
        self._stick = self.at_end() and value >= self.verticalScrollBar().maximum() - 8
        self._schedule()

    def scroll_to_end(self) -> None:
        self._stick = True
        bar = self.verticalScrollBar()
        bar.setValue(bar.maximum())
        QTimer.singleShot(0, self, self._to_bottom)

    @Slot()
    def _to_bottom(self) -> None:
        if self._stick:
            self.verticalScrollBar().setValue(self.verticalScrollBar().maximum())

    def resizeEvent(self, event: Any) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        self._schedule()


__all__ = ["INITIAL", "MAX_BUILT", "SMALL", "RowList"]
