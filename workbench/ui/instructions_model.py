"""The Instructions dock's table (G2, I1): the AGENTS.md files in order with their fate and tokens.

``DocumentsModel`` is a thin ``QAbstractTableModel`` over ``InstructionDoc`` rows: the configured
``memory.paths`` in order (so the files show before any run), each updated from the newest
``documents_reported`` event with source ``instructions`` (fate, tokens, reason) and from the panel's
own reads of the file (tokens on disk now).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QWidget

from workbench.engine.tokens import estimate_tokens
from workbench.ui.plain_text import plain_tooltip
from workbench.ui.style import is_dark, status_color
from workbench.ui.table_model import RowsTableModel

Index = QModelIndex | QPersistentModelIndex

__all__ = ["FATE", "FILE", "TOKENS", "DocRole", "DocumentsModel", "InstructionDoc"]

COLUMNS = ("File", "Fate", "Tokens")
FILE, FATE, TOKENS = range(len(COLUMNS))
DocRole = Qt.ItemDataRole.UserRole + 1
"""The ``InstructionDoc`` behind a row."""

FATE_LABELS = {
    "shown": "shown",
    "cut": "cut",
    "left_out": "left out",
    "skipped": "skipped",
    "refused": "refused",
}
_FATE_STATUS = {"shown": "ok", "cut": "denied", "left_out": "aborted", "skipped": "aborted", "refused": "error"}


@dataclass(frozen=True)
class InstructionDoc:
    """One configured instruction file: the last run's report and what the panel read from disk."""

    path: str
    fate: str = ""
    """The last run's fate (shown, cut, left_out, skipped, refused); "" before any run."""
    tokens: int | None = None
    """The last run's estimate of the whole file."""
    shown_tokens: int | None = None
    reason: str = ""
    disk_tokens: int | None = None
    """The file's estimate as the panel last read it (None: not read, or missing)."""
    disk_state: str = ""
    """``present``, ``missing``, ``refused`` or ``""`` (not read yet)."""
    disk_reason: str = ""

    @property
    def fate_text(self) -> str:
        if self.fate:
            label = FATE_LABELS.get(self.fate, self.fate)
            if self.fate in ("skipped", "refused", "left_out") and self.reason:
                return f"{label} ({self.reason})"
            return label
        if self.disk_state == "missing":
            return "not read yet (missing)"
        if self.disk_state == "refused":
            return "not read yet (refused)"
        return "not read yet"

    def token_count(self) -> int | None:
        """Tokens on disk now if read, else the last run's figure (None: missing, or not known)."""
        if self.disk_state in ("missing", "refused"):
            return None
        return self.disk_tokens if self.disk_tokens is not None else self.tokens


class DocumentsModel(RowsTableModel):
    """Rows are the instruction files in config order: path, fate, tokens against the per-file limit."""

    COLUMNS = COLUMNS

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._rows: list[InstructionDoc] = []
        self._configured: tuple[str, ...] = ()
        self.max_file_tokens = 4000

    @property
    def docs(self) -> list[InstructionDoc]:
        return list(self._rows)

    def doc(self, path: str) -> InstructionDoc | None:
        return next((d for d in self._rows if d.path == path), None)

    def row_of(self, path: str) -> int:
        return next((i for i, d in enumerate(self._rows) if d.path == path), -1)

    def set_paths(self, paths: Sequence[str], max_file_tokens: int) -> None:
        self.beginResetModel()
        self.max_file_tokens = max_file_tokens
        self._configured = tuple(dict.fromkeys(paths))
        self._rows = [InstructionDoc(p) for p in self._configured]
        self.endResetModel()

    def apply_report(self, documents: Iterable[Mapping[str, Any]]) -> None:
        """The fates of a ``documents_reported`` (instructions) event; paths not configured are added."""
        docs = list(self._rows)
        for d in documents:
            path = str(d.get("path") or "")
            if not path:
                continue
            fields = {
                "fate": str(d.get("fate") or ""),
                "tokens": _int(d.get("tokens")),
                "shown_tokens": _int(d.get("shown_tokens")),
                "reason": str(d.get("reason") or ""),
            }
            row = next((i for i, x in enumerate(docs) if x.path == path), -1)
            if row >= 0:
                docs[row] = replace(docs[row], **fields)
            else:
                docs.append(InstructionDoc(path, **fields))
        if [d.path for d in docs] == [d.path for d in self._rows]:
            self._rows = docs  # same rows: update in place (the selection stays)
            if docs:
                self.dataChanged.emit(self.index(0, 0), self.index(len(docs) - 1, len(COLUMNS) - 1))
            return
        self.beginResetModel()
        self._rows = docs
        self.endResetModel()

    def clear_reports(self) -> None:
        """Forget the last run's fates (another thread), keeping what was read from disk."""
        docs = [InstructionDoc(d.path, disk_tokens=d.disk_tokens, disk_state=d.disk_state, disk_reason=d.disk_reason)
                for d in self._rows if d.path in self._configured]
        if len(docs) != len(self._rows):
            self.beginResetModel()
            self._rows = docs
            self.endResetModel()
        elif docs:
            self._rows = docs
            self.dataChanged.emit(self.index(0, 0), self.index(len(docs) - 1, len(COLUMNS) - 1))

    def set_disk(self, path: str, text: str | None, state: str, reason: str = "") -> None:
        """What the panel read from disk for ``path`` (text None: missing or unreadable)."""
        row = self.row_of(path)
        if row < 0:
            return
        tokens = estimate_tokens(text) if text is not None and text.strip() else (0 if text is not None else None)
        self._rows[row] = replace(self._rows[row], disk_tokens=tokens, disk_state=state, disk_reason=reason)
        self.dataChanged.emit(self.index(row, 0), self.index(row, len(COLUMNS) - 1))

    def section_tokens(self) -> int | None:
        """Tokens of the files the last run showed (None before any run)."""
        reported = [d for d in self._rows if d.fate]
        if not reported:
            return None
        return sum(d.shown_tokens or 0 for d in reported if d.fate in ("shown", "cut"))

    # -- Qt model API ---------------------------------------------------------------------------------
    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or index.parent().isValid() or not 0 <= index.row() < len(self._rows):
            return None
        d = self._rows[index.row()]
        col = index.column()
        tokens = d.token_count()
        if role == Qt.ItemDataRole.DisplayRole:
            if col == FILE:
                return d.path
            if col == FATE:
                return d.fate_text
            if col == TOKENS:
                return "—" if tokens is None else f"{tokens:,} / {self.max_file_tokens:,}"
            return None
        if role == Qt.ItemDataRole.ToolTipRole:
            lines = [d.path, f"Last run: {d.fate_text}"]
            if d.reason:
                lines.append(f"Reason: {d.reason}")
            if d.tokens is not None:
                shown = f", {d.shown_tokens:,} shown" if d.shown_tokens is not None and d.fate in ("shown", "cut") else ""
                lines.append(f"Last run: {d.tokens:,} tokens{shown}")
            if d.disk_tokens is not None:
                lines.append(f"On disk now: {d.disk_tokens:,} tokens (limit {self.max_file_tokens:,} per file)")
            elif d.disk_state in ("missing", "refused"):
                lines.append(f"On disk now: {d.disk_state}" + (f" ({d.disk_reason})" if d.disk_reason else ""))
            return plain_tooltip("\n".join(lines))
        if role == Qt.ItemDataRole.ForegroundRole:
            if col == FATE:
                if d.fate:
                    return QColor(status_color(_FATE_STATUS.get(d.fate, "aborted"), is_dark()))
                return QColor(status_color("aborted", is_dark()))
            if col == TOKENS and tokens is not None and tokens > self.max_file_tokens:
                return QColor(status_color("denied", is_dark()))
            if col == FILE and d.disk_state == "missing":
                return QColor(status_color("aborted", is_dark()))
            return None
        if role == Qt.ItemDataRole.TextAlignmentRole and col == TOKENS:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == DocRole:
            return d
        return None

    def flags(self, index: Index) -> Qt.ItemFlag:
        if not index.isValid():
            return Qt.ItemFlag.NoItemFlags
        return Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable | Qt.ItemFlag.ItemNeverHasChildren


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
