"""The Events dock (G2): the thread's durable event log, filterable by type and text.

``EventsModel`` is a thin ``QAbstractTableModel`` over a Python list of engine ``Event``s; the panel
adds a filter proxy, a type chooser ("All types" + each type seen) and a text filter. The bridge feeds
``add_event`` (live events are ignored: the log is the durable one) and ``load`` when a thread opens.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from typing import Any

from PySide6.QtCore import (
    QModelIndex,
    QPersistentModelIndex,
    QSortFilterProxyModel,
    Qt,
    Signal,
    Slot,
)
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLineEdit,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from workbench.session import Event
from workbench.ui.plain_text import plain_label, plain_tooltip
from workbench.ui.style import is_dark, status_class, status_color
from workbench.ui.table_model import RowsTableModel

Index = QModelIndex | QPersistentModelIndex

COLUMNS = ("Time", "Type", "Step", "Run", "Summary")
TIME, TYPE, STEP, RUN, SUMMARY = range(len(COLUMNS))

#: The role that returns the ``Event`` behind a row.
EventRole = Qt.ItemDataRole.UserRole + 1

ALL_TYPES = "All types"
_MAX_VALUE_CHARS = 80
_MAX_SUMMARY_CHARS = 300


def _usage_text(usage: dict[str, Any]) -> str:
    tokens_in = int(usage.get("input_tokens") or 0)
    tokens_out = int(usage.get("output_tokens") or 0) + int(usage.get("thoughts_tokens") or 0)
    cost = usage.get("cost_usd")
    return f"{tokens_in} in/{tokens_out} out" + (f" ${float(cost):.4f}" if isinstance(cost, (int, float)) else "")


def _value_text(key: str, value: Any) -> str:
    if key == "usage" and isinstance(value, dict):
        return _usage_text(value)
    if isinstance(value, str):
        text = value
    else:
        try:
            text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
        except (TypeError, ValueError):
            text = repr(value)
    text = " ".join(text.split())
    return text if len(text) <= _MAX_VALUE_CHARS else text[: _MAX_VALUE_CHARS - 1] + "…"


def summarize(data: dict[str, Any]) -> str:
    """One line from an event's payload: ``key=value`` pairs, long values cut."""
    text = "  ".join(f"{k}={_value_text(k, v)}" for k, v in data.items())
    return text if len(text) <= _MAX_SUMMARY_CHARS else text[: _MAX_SUMMARY_CHARS - 1] + "…"


class EventsModel(RowsTableModel):
    """Rows are durable events, in arrival order."""

    COLUMNS = COLUMNS

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._rows: list[Event] = []
        self._seen: set[tuple[str, int]] = set()

    # -- the list ------------------------------------------------------------------------------------
    @property
    def events(self) -> list[Event]:
        """A copy of the rows' events."""
        return list(self._rows)

    def _is_new(self, event: Event) -> bool:
        if event.seq <= 0:
            return True
        key = (event.thread_id, event.seq)
        if key in self._seen:
            return False
        self._seen.add(key)
        return True

    def append(self, event: Event) -> bool:
        """Add one durable event; False if it is live or already shown (same thread and seq)."""
        if not event.durable or not self._is_new(event):
            return False
        row = len(self._rows)
        self.beginInsertRows(QModelIndex(), row, row)
        self._rows.append(event)
        self.endInsertRows()
        return True

    def reset(self, events: Iterable[Event] = ()) -> None:
        """Replace every row (live events and repeats dropped)."""
        self.beginResetModel()
        self._seen = set()
        self._rows = [e for e in events if e.durable and self._is_new(e)]
        self.endResetModel()

    def event_at(self, row: int) -> Event | None:
        return self._rows[row] if 0 <= row < len(self._rows) else None

    # -- Qt model API ---------------------------------------------------------------------------------
    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or index.parent().isValid():
            return None
        event = self.event_at(index.row())
        if event is None:
            return None
        col = index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            if col == TIME:
                return time.strftime("%H:%M:%S", time.localtime(event.time))
            if col == TYPE:
                return event.type
            if col == STEP:
                return str(event.step)
            if col == RUN:
                return event.run_id[:8]
            if col == SUMMARY:
                return summarize(event.data)
            return None
        if role == Qt.ItemDataRole.ToolTipRole:
            if col == TIME:
                stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(event.time))
                return plain_tooltip(f"{stamp} (#{event.seq})")
            if col == RUN:
                return plain_tooltip(event.run_id)
            if col == SUMMARY:
                return plain_tooltip(json.dumps(event.data, indent=2, ensure_ascii=False, default=str)[:4000])
            return None
        if role == Qt.ItemDataRole.TextAlignmentRole and col == STEP:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.ForegroundRole and col in (TYPE, SUMMARY):
            status = event.data.get("status") if event.type != "run_error" else "error"
            if isinstance(status, str) and status_class(status) in ("error", "denied", "aborted"):
                return QColor(status_color(status, is_dark()))
            return None
        if role == EventRole:
            return event
        return None

    def flags(self, index: Index) -> Qt.ItemFlag:
        if not index.isValid():
            return Qt.ItemFlag.NoItemFlags
        return Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable


class EventsFilter(QSortFilterProxyModel):
    """Keeps rows of one type (or all) whose time, type, run or summary contains the text."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._type: str | None = None
        self._text = ""

    def set_type(self, event_type: str | None) -> None:
        """Keep only ``event_type`` (None: every type)."""
        self._begin()
        self._type = event_type or None
        self._end()

    def set_text(self, text: str) -> None:
        """Keep rows containing ``text`` (case-insensitive; empty: every row)."""
        self._begin()
        self._text = text.strip().lower()
        self._end()

    def _begin(self) -> None:
        if hasattr(self, "endFilterChange"):  # Qt 6.10+: begin/end bracket the change
            self.beginFilterChange()

    def _end(self) -> None:
        if hasattr(self, "endFilterChange"):
            self.endFilterChange(QSortFilterProxyModel.Direction.Rows)
        else:  # pragma: no cover - older Qt
            self.invalidateFilter()

    def filterAcceptsRow(self, source_row: int, source_parent: Index) -> bool:
        model = self.sourceModel()
        if not isinstance(model, EventsModel):
            return True
        event = model.event_at(source_row)
        if event is None:
            return False
        if self._type is not None and event.type != self._type:
            return False
        if self._text:
            haystack = " ".join(
                str(model.data(model.index(source_row, col)) or "") for col in range(len(COLUMNS))
            ) + " " + event.run_id
            return self._text in haystack.lower()
        return True


class EventsPanel(QWidget):
    """The durable event log of the current thread, with a type chooser and a text filter."""

    sig_event_activated = Signal(object)
    """An event row was double-clicked or activated (the ``Event``)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("eventsPanel")
        self.model = EventsModel(self)
        self.proxy = EventsFilter(self)
        self.proxy.setSourceModel(self.model)

        self.type_combo = QComboBox(self)
        self.type_combo.setObjectName("eventsTypeFilter")
        self.type_combo.setAccessibleName("Event type")  # G14
        self.type_combo.addItem(ALL_TYPES, "")
        self.type_combo.setToolTip("Show events of one type")
        self.type_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.text_filter = QLineEdit(self)
        self.text_filter.setObjectName("eventsTextFilter")
        self.text_filter.setAccessibleName("Filter events")
        self.text_filter.setPlaceholderText("Filter events…")
        self.text_filter.setClearButtonEnabled(True)
        self.count_label = plain_label(self)
        self.count_label.setProperty("role", "muted")

        self.view = QTableView(self)
        self.view.setObjectName("eventsView")
        self.view.setAccessibleName("Events")
        self.view.setAccessibleDescription("The thread's durable event log, oldest first")
        self.view.setModel(self.proxy)
        self.view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.view.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.view.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.view.setAlternatingRowColors(True)
        self.view.setWordWrap(False)
        self.view.verticalHeader().setVisible(False)
        self.view.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 6)
        header = self.view.horizontalHeader()
        header.setStretchLastSection(True)
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        for col, chars in ((TIME, 10), (TYPE, 22), (STEP, 5), (RUN, 10)):
            self.view.setColumnWidth(col, self.fontMetrics().horizontalAdvance("M" * chars) * 2 // 3 + 12)

        top = QHBoxLayout()
        top.setContentsMargins(0, 0, 0, 0)
        top.addWidget(self.type_combo)
        top.addWidget(self.text_filter, 1)
        top.addWidget(self.count_label)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.setSpacing(4)
        layout.addLayout(top)
        layout.addWidget(self.view, 1)

        self.type_combo.currentIndexChanged.connect(self._on_type_changed)
        self.text_filter.textChanged.connect(self._on_text_changed)
        self.view.activated.connect(self._on_activated)
        self._update_count()

    # -- feeding -----------------------------------------------------------------------------------------
    @Slot(object)
    def add_event(self, event: Event) -> None:
        """Append a durable event (live ones are ignored); follows the end if the view was there."""
        bar = self.view.verticalScrollBar()
        at_end = bar.value() >= bar.maximum()
        if not self.model.append(event):
            return
        self._note_type(event.type)
        self._update_count()
        if at_end:
            self.view.scrollToBottom()

    def load(self, events: Iterable[Event]) -> None:
        """Show these events instead (a thread was opened); the filters stay as set where they still apply."""
        self.model.reset(events)
        chosen = self.selected_type()
        self._rebuild_types(chosen)
        self._update_count()
        self.view.scrollToBottom()

    @Slot()
    def clear(self) -> None:
        self.model.reset(())
        self._rebuild_types(self.selected_type())
        self._update_count()

    # -- filters -------------------------------------------------------------------------------------------
    def selected_type(self) -> str | None:
        """The type chosen in the chooser, None for all."""
        return self.type_combo.currentData() or None

    def set_type_filter(self, event_type: str | None) -> None:
        """Choose a type (None or ``""`` for all); a type not seen yet is added to the chooser."""
        if event_type:
            self._note_type(event_type)
        index = self.type_combo.findData(event_type or "")
        self.type_combo.setCurrentIndex(max(index, 0))

    def set_text_filter(self, text: str) -> None:
        self.text_filter.setText(text)

    def visible_events(self) -> list[Event]:
        """The events the view shows now, top to bottom."""
        out = []
        for row in range(self.proxy.rowCount()):
            event = self.proxy.data(self.proxy.index(row, 0), EventRole)
            if event is not None:
                out.append(event)
        return out

    def types(self) -> list[str]:
        """The types in the chooser, without "All types"."""
        return [self.type_combo.itemData(i) for i in range(1, self.type_combo.count())]

    # -- internals -------------------------------------------------------------------------------------------
    def _note_type(self, event_type: str) -> None:
        if self.type_combo.findData(event_type) >= 0:
            return
        existing = self.types()
        position = 1 + sum(1 for t in existing if t < event_type)
        self.type_combo.blockSignals(True)
        self.type_combo.insertItem(position, event_type, event_type)
        self.type_combo.blockSignals(False)

    def _rebuild_types(self, keep: str | None) -> None:
        self.type_combo.blockSignals(True)
        while self.type_combo.count() > 1:
            self.type_combo.removeItem(1)
        for t in sorted({e.type for e in self.model.events} | ({keep} if keep else set())):
            self.type_combo.addItem(t, t)
        index = self.type_combo.findData(keep or "")
        self.type_combo.setCurrentIndex(max(index, 0))
        self.type_combo.blockSignals(False)
        self.proxy.set_type(self.selected_type())

    @Slot(int)
    def _on_type_changed(self, _index: int) -> None:
        self.proxy.set_type(self.selected_type())
        self._update_count()

    @Slot(str)
    def _on_text_changed(self, text: str) -> None:
        self.proxy.set_text(text)
        self._update_count()

    @Slot(QModelIndex)
    def _on_activated(self, index: QModelIndex) -> None:
        event = self.proxy.data(index, EventRole)
        if event is not None:
            self.sig_event_activated.emit(event)

    def _update_count(self) -> None:
        total, shown = self.model.rowCount(), self.proxy.rowCount()
        noun = "event" if total == 1 else "events"
        self.count_label.setText(f"{total} {noun}" if shown == total else f"{shown} of {total} {noun}")
