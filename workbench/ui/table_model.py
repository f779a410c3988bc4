"""The one base for the panels' table models: a thin Qt adapter over a Python list (CONVENTIONS 4)."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt
from PySide6.QtWidgets import QAbstractItemView, QTableView, QWidget

Index = QModelIndex | QPersistentModelIndex


class RowsTableModel(QAbstractTableModel):
    """Rows live in ``self._rows``; subclasses name their ``COLUMNS`` and implement ``data``."""

    COLUMNS: tuple[str, ...] = ()

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self._rows: list[Any] = []

    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008, N802 - Qt's signature
        return 0 if parent.isValid() else len(self._rows)

    def columnCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008, N802
        return 0 if parent.isValid() else len(self.COLUMNS)

    def headerData(  # noqa: N802 - Qt override
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> Any:
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal:
            if 0 <= section < len(self.COLUMNS):
                return self.COLUMNS[section]
        return None

    def row_at(self, index: Index) -> Any | None:
        """The row behind a valid index, or None."""
        if not index.isValid() or not 0 <= index.row() < len(self._rows):
            return None
        return self._rows[index.row()]


def two_line_table(parent: QWidget, model: QAbstractTableModel, name: str, accessible_name: str,
                   description: str) -> QTableView:
    """A read-only table of whole rows, one selected at a time, two-line cells elided on the right (no
    row numbers): the Tasks board's and the Servers panel's list."""
    view = QTableView(parent)
    view.setObjectName(name)
    view.setAccessibleName(accessible_name)
    view.setAccessibleDescription(description)
    view.setModel(model)
    view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    view.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
    view.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    view.setAlternatingRowColors(True)
    view.setWordWrap(False)
    view.setTextElideMode(Qt.TextElideMode.ElideRight)
    view.verticalHeader().setVisible(False)
    view.verticalHeader().setDefaultSectionSize(2 * parent.fontMetrics().height() + 12)  # two-line cells
    return view

