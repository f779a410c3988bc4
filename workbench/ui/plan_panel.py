"""The Plan dock (G2, T6): the thread's todo list, live during a run, and the history of its changes.

``TodoListModel`` is a thin ``QAbstractListModel`` over a Python list of ``{"id", "content",
"status"}`` dicts; ``PlanHistoryModel`` is one over ``PlanChange`` values computed from the thread's
durable ``todos_updated`` events by ``plan_changes`` (a pure function). The panel renders what it
receives:

- ``todos_progress`` (live: the whole list) replaces the list during a run;
- ``todos_updated`` (durable: ids and statuses) adds a history entry, and brings the list's statuses
  in line when no live event came (e.g. events replayed from the store);
- ``run_finished`` takes the committed list (a blocked output may have restored it, T7);
- ``set_session`` rebuilds both from the store when a thread is opened or switched.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QAbstractListModel, QModelIndex, QPersistentModelIndex, QSize, Qt, Slot
from PySide6.QtGui import QColor, QFont, QIcon, QPainter, QPixmap
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QListView,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from workbench.ui.plain_text import plain_label, plain_tooltip
from workbench.ui.style import is_dark, status_color

if TYPE_CHECKING:
    from workbench.session import Event
    from workbench.session import Session

log = logging.getLogger(__name__)

Index = QModelIndex | QPersistentModelIndex

__all__ = [
    "GLYPHS",
    "PlanChange",
    "PlanHistoryModel",
    "PlanPanel",
    "TodoListModel",
    "normalize_items",
    "plan_changes",
    "status_icon",
]

STATUSES = ("pending", "in_progress", "done")
GLYPHS = {"pending": "○", "in_progress": "◐", "done": "✓"}
LABELS = {"pending": "pending", "in_progress": "in progress", "done": "done"}
_ALIASES = {"completed": "done"}

#: Custom roles of both models.
ItemRole = Qt.ItemDataRole.UserRole + 1
"""The row's Python value (a todo dict, or a ``PlanChange``)."""
StatusRole = Qt.ItemDataRole.UserRole + 2
"""A todo's status (``pending``, ``in_progress``, ``done``)."""
IdRole = Qt.ItemDataRole.UserRole + 3
"""A todo's id."""


_ICON_COLORS = {"pending": "aborted", "in_progress": "running", "done": "ok"}
_icons: dict[tuple[str, bool], QIcon] = {}


def status_icon(status: str, dark: bool | None = None) -> QIcon:
    """The status glyph (○ ◐ ✓) drawn in its colour, as an icon (cached per theme)."""
    dark = is_dark() if dark is None else dark
    key = (status, dark)
    icon = _icons.get(key)
    if icon is None:
        size = 32
        pixmap = QPixmap(size, size)
        pixmap.fill(Qt.GlobalColor.transparent)
        painter = QPainter(pixmap)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setRenderHint(QPainter.RenderHint.TextAntialiasing)
        font = QFont()
        font.setPixelSize(24)
        font.setBold(status != "pending")
        painter.setFont(font)
        painter.setPen(QColor(status_color(_ICON_COLORS.get(status, "aborted"), dark)))
        painter.drawText(pixmap.rect(), int(Qt.AlignmentFlag.AlignCenter), GLYPHS.get(status, "○"))
        painter.end()
        icon = _icons[key] = QIcon(pixmap)
    return icon


def _status(value: Any) -> str:
    value = _ALIASES.get(value, value) if isinstance(value, str) else value
    return value if value in STATUSES else "pending"


def normalize_items(items: Iterable[Any]) -> list[dict[str, Any]]:
    """Todo dicts as the panel shows them: an int id, a content string, a known status."""
    out: list[dict[str, Any]] = []
    for item in items or ():
        if not isinstance(item, Mapping):
            continue
        id_ = item.get("id")
        if not isinstance(id_, int) or isinstance(id_, bool):
            continue
        content = item.get("content")
        out.append({"id": id_, "content": content if isinstance(content, str) else "", "status": _status(item.get("status"))})
    return out


# ---------------------------------------------------------------------------------------------- the list


class TodoListModel(QAbstractListModel):
    """Rows are the plan's todos, in the plan's order."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._items: list[dict[str, Any]] = []

    @property
    def items(self) -> list[dict[str, Any]]:
        """A copy of the rows."""
        return [dict(i) for i in self._items]

    def set_items(self, items: Iterable[Any]) -> None:
        """Show ``items``: same ids in the same order update in place, anything else resets."""
        new = normalize_items(items)
        if [i["id"] for i in new] == [i["id"] for i in self._items]:
            old, self._items = self._items, new
            changed = [r for r, (a, b) in enumerate(zip(old, new)) if a != b]
            for first, last in _ranges(changed):
                self.dataChanged.emit(self.index(first), self.index(last))
            return
        self.beginResetModel()
        self._items = new
        self.endResetModel()

    def counts(self) -> dict[str, int]:
        return {s: sum(1 for i in self._items if i["status"] == s) for s in STATUSES}

    # -- Qt model API ---------------------------------------------------------------------------------
    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008, N802 - Qt's signature
        return 0 if parent.isValid() else len(self._items)

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or index.parent().isValid() or not 0 <= index.row() < len(self._items):
            return None
        item = self._items[index.row()]
        status = item["status"]
        if role == Qt.ItemDataRole.DisplayRole:
            return item["content"]
        if role == Qt.ItemDataRole.DecorationRole:
            return status_icon(status)
        if role == Qt.ItemDataRole.ToolTipRole:
            return plain_tooltip(f"{GLYPHS[status]} #{item['id']} · {LABELS[status]}\n{item['content']}")
        if role == Qt.ItemDataRole.AccessibleTextRole:
            return f"{LABELS[status]}: {item['content']}"
        if role == Qt.ItemDataRole.FontRole:
            if status == "in_progress":
                font = QFont()
                font.setBold(True)
                return font
            if status == "done":
                font = QFont()
                font.setStrikeOut(True)
                return font
            return None
        if role == Qt.ItemDataRole.ForegroundRole:
            if status == "done":
                return QColor(status_color("aborted", is_dark()))
            if status == "in_progress":
                return QColor(status_color("running", is_dark()))
            return None
        if role == ItemRole:
            return dict(item)
        if role == StatusRole:
            return status
        if role == IdRole:
            return item["id"]
        return None

    def flags(self, index: Index) -> Qt.ItemFlag:
        if not index.isValid():
            return Qt.ItemFlag.NoItemFlags
        return Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable | Qt.ItemFlag.ItemNeverHasChildren


def _ranges(rows: Sequence[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for r in rows:
        if out and out[-1][1] == r - 1:
            out[-1] = (out[-1][0], r)
        else:
            out.append((r, r))
    return out


# ---------------------------------------------------------------------------------------------- history


@dataclass(frozen=True)
class PlanChange:
    """One ``todos_updated``: what changed against the list before it."""

    seq: int
    time: float
    step: int
    run_id: str
    added: tuple[tuple[int, str], ...]
    """(id, status) of items that were not in the previous list."""
    removed: tuple[int, ...]
    changed: tuple[tuple[int, str, str], ...]
    """(id, old status, new status)."""
    reordered: bool
    count: int
    """Items in the list after the change."""

    def summary(self, contents: Mapping[int, str] | None = None) -> str:
        """One line: ``added #1, #2 · #1 pending → in progress · removed #3``."""
        parts: list[str] = []
        if self.added:
            parts.append("added " + ", ".join(f"#{i}" for i, _ in self.added))
        for id_, old, new in self.changed:
            parts.append(f"#{id_} {LABELS.get(old, old)} → {LABELS.get(new, new)}")
        if self.removed:
            parts.append("removed " + ", ".join(f"#{i}" for i in self.removed))
        if self.reordered and not (self.added or self.removed):
            parts.append("reordered")
        if not parts:
            parts.append("no change" if self.count else "cleared")
        return " · ".join(parts)

    def details(self, contents: Mapping[int, str] | None = None) -> str:
        """Several lines, naming each item's content where it is known."""
        contents = contents or {}

        def name(i: int) -> str:
            text = contents.get(i)
            return f"#{i} {text}" if text else f"#{i}"

        lines = [f"+ {name(i)} ({LABELS.get(s, s)})" for i, s in self.added]
        lines += [f"~ {name(i)}: {LABELS.get(o, o)} → {LABELS.get(n, n)}" for i, o, n in self.changed]
        lines += [f"− {name(i)}" for i in self.removed]
        if self.reordered:
            lines.append("↕ the order changed")
        return "\n".join(lines) or self.summary()


def plan_changes(events: Iterable[Event]) -> list[PlanChange]:
    """The plan's history from its durable ``todos_updated`` events, oldest first."""
    out: list[PlanChange] = []
    before: dict[int, str] = {}
    order: list[int] = []
    for e in sorted((e for e in events if e.type == "todos_updated"), key=lambda e: (e.seq, e.time)):
        change = _change(e, before, order)
        out.append(change)
        items = normalize_items(e.data.get("items") or [])
        before = {i["id"]: i["status"] for i in items}
        order = [i["id"] for i in items]
    return out


def _change(e: Event, before: Mapping[int, str], order: Sequence[int]) -> PlanChange:
    items = normalize_items(e.data.get("items") or [])
    after = {i["id"]: i["status"] for i in items}
    added = tuple((i["id"], i["status"]) for i in items if i["id"] not in before)
    removed = tuple(i for i in order if i not in after)
    changed = tuple((i["id"], before[i["id"]], i["status"]) for i in items
                    if i["id"] in before and before[i["id"]] != i["status"])
    kept_before = [i for i in order if i in after]
    kept_after = [i["id"] for i in items if i["id"] in before]
    return PlanChange(e.seq, e.time, e.step, e.run_id, added, removed, changed, kept_before != kept_after, len(items))


class PlanHistoryModel(QAbstractListModel):
    """Rows are the plan's changes, oldest first."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._changes: list[PlanChange] = []
        self._contents: dict[int, str] = {}

    @property
    def changes(self) -> list[PlanChange]:
        return list(self._changes)

    def set_changes(self, changes: Iterable[PlanChange]) -> None:
        self.beginResetModel()
        self._changes = list(changes)
        self.endResetModel()

    def append(self, change: PlanChange) -> None:
        row = len(self._changes)
        self.beginInsertRows(QModelIndex(), row, row)
        self._changes.append(change)
        self.endInsertRows()

    def set_contents(self, contents: Mapping[int, str]) -> None:
        """Item texts known so far (ids are never reused, so a text stays right); tooltips use them."""
        self._contents = dict(contents)
        if self._changes:
            self.dataChanged.emit(self.index(0), self.index(len(self._changes) - 1), [Qt.ItemDataRole.ToolTipRole])

    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008, N802
        return 0 if parent.isValid() else len(self._changes)

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or index.parent().isValid() or not 0 <= index.row() < len(self._changes):
            return None
        c = self._changes[index.row()]
        if role == Qt.ItemDataRole.DisplayRole:
            return f"{time.strftime('%H:%M:%S', time.localtime(c.time))}  step {c.step}  —  {c.summary()}"
        if role == Qt.ItemDataRole.ToolTipRole:
            stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(c.time))
            return plain_tooltip(f"{stamp} · run {c.run_id[:8]} · step {c.step} · {c.count} item(s)\n"
                                 f"{c.details(self._contents)}")
        if role == ItemRole:
            return c
        return None

    def flags(self, index: Index) -> Qt.ItemFlag:
        if not index.isValid():
            return Qt.ItemFlag.NoItemFlags
        return Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable | Qt.ItemFlag.ItemNeverHasChildren


# ---------------------------------------------------------------------------------------------- the panel


class PlanPanel(QWidget):
    """The thread's plan (live) and the history of its changes (collapsible)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("planPanel")
        self._session: Session | None = None
        self._seen: set[int] = set()
        self._contents: dict[int, str] = {}
        self._finished_upto = 0
        """The newest ``run_finished`` already reflected in the list (replayed ones are older)."""
        self._after_last: list[tuple[int, str]] = []
        """(id, status) of the list after the newest ``todos_updated`` (the next change's "before")."""

        self.model = TodoListModel(self)
        self.history_model = PlanHistoryModel(self)

        self.summary_label = plain_label(self)
        self.summary_label.setObjectName("planSummary")
        self.summary_label.setProperty("role", "muted")

        self.view = QListView(self)
        self.view.setObjectName("planView")
        self.view.setAccessibleName("Plan")  # G14
        self.view.setAccessibleDescription("The agent's todos; each says its status in words and a mark")
        self.view.setModel(self.model)
        self.view.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.view.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.view.setWordWrap(True)
        self.view.setUniformItemSizes(False)
        self.view.setSpacing(2)
        self.view.setIconSize(QSize(16, 16))

        self.placeholder = plain_label(
            "No plan yet. For a task with several steps the agent writes one with write_todos; it shows here live.",
            self,
        )
        self.placeholder.setObjectName("planPlaceholder")
        self.placeholder.setProperty("role", "muted")
        self.placeholder.setWordWrap(True)
        self.placeholder.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)

        self.history_button = QToolButton(self)
        self.history_button.setObjectName("planHistoryToggle")
        self.history_button.setCheckable(True)
        self.history_button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.history_button.setArrowType(Qt.ArrowType.RightArrow)
        self.history_button.setAutoRaise(True)
        self.history_button.setToolTip("Show or hide the plan's changes")
        self.history_button.toggled.connect(self._on_history_toggled)

        self.history_view = QListView(self)
        self.history_view.setObjectName("planHistoryView")
        self.history_view.setModel(self.history_model)
        self.history_view.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.history_view.setWordWrap(True)
        self.history_view.setAlternatingRowColors(True)
        self.history_view.setSpacing(1)
        self.history_view.setVisible(False)

        header = QHBoxLayout()
        header.setContentsMargins(0, 0, 0, 0)
        header.addWidget(self.history_button)
        header.addStretch(1)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.setSpacing(4)
        layout.addWidget(self.summary_label)
        layout.addWidget(self.placeholder, 3)  # takes the list's room while there is no plan (aligned top)
        layout.addWidget(self.view, 3)
        layout.addLayout(header)
        layout.addWidget(self.history_view, 2)

        self.model.modelReset.connect(self._refresh)
        self.model.dataChanged.connect(self._refresh)
        self.history_model.modelReset.connect(self._refresh_history)
        self.history_model.rowsInserted.connect(self._refresh_history)
        self._refresh()
        self._refresh_history()

    # -- the contract -----------------------------------------------------------------------------------
    @property
    def session(self) -> Session | None:
        return self._session

    def set_session(self, session: Session | None) -> None:
        """Show ``session``'s current thread: the committed plan and its history, from the store."""
        self._session = session
        self._seen = set()
        self._contents = {}
        self._after_last = []
        self._finished_upto = 0
        if session is None:
            self.model.set_items([])
            self.history_model.set_changes([])
            return
        items = normalize_items(session.todos)
        events = session.store.events(session.thread_id, types={"todos_updated"})
        self._seen = {e.seq for e in events if e.seq > 0}
        finished = session.store.events(session.thread_id, types={"run_finished"})
        self._finished_upto = finished[-1].seq if finished else 0
        if events:
            self._after_last = [(i["id"], i["status"]) for i in normalize_items(events[-1].data.get("items") or [])]
        self._remember(items)
        self.history_model.set_changes(plan_changes(events))
        self.model.set_items(items)

    def handle_event(self, event: Event) -> None:
        """Render one engine event (durable or live), on the GUI thread."""
        try:
            self._handle(event)
        except Exception:  # noqa: BLE001 - a bad payload must not break the bridge
            log.exception("plan panel could not handle %s", event.type)

    # -- events -----------------------------------------------------------------------------------------
    def _handle(self, event: Event) -> None:
        s = self._session
        if s is not None and event.thread_id != s.thread_id:
            return
        t = event.type
        if t == "todos_progress":
            items = normalize_items(event.data.get("items") or event.data.get("todos") or [])
            self._remember(items)
            self.model.set_items(items)
        elif t == "todos_updated":
            self._on_updated(event)
        elif t == "run_finished" and s is not None and event.seq > self._finished_upto:
            # The committed list (a blocked output may have restored it, T7); replays of older runs are skipped.
            self._finished_upto = event.seq
            items = normalize_items(s.todos)
            self._remember(items)
            self.model.set_items(items)

    def _on_updated(self, event: Event) -> None:
        if event.seq > 0:
            if event.seq in self._seen:
                return
            self._seen.add(event.seq)
        before = dict(self._after_last)
        order = [i for i, _ in self._after_last]
        self.history_model.append(_change(event, before, order))
        items = normalize_items(event.data.get("items") or [])
        self._after_last = [(i["id"], i["status"]) for i in items]
        # Durable events carry ids and statuses only: align the list if the live event did not come.
        if [(i["id"], i["status"]) for i in self.model.items] != self._after_last:
            self.model.set_items([{"id": i["id"], "status": i["status"],
                                   "content": self._contents.get(i["id"], f"(item #{i['id']})")} for i in items])

    def _remember(self, items: Iterable[Mapping[str, Any]]) -> None:
        for i in items:
            if i.get("content"):
                self._contents[int(i["id"])] = str(i["content"])
        self.history_model.set_contents(self._contents)

    # -- rendering --------------------------------------------------------------------------------------
    @Slot()
    def _refresh(self) -> None:
        n = self.model.rowCount()
        self.placeholder.setVisible(n == 0)
        self.view.setVisible(n > 0)
        if n == 0:
            self.summary_label.setText("Plan: empty")
            return
        c = self.model.counts()
        text = f"{c['done']} of {n} done"
        if c["in_progress"]:
            text += f" · {c['in_progress']} in progress"
        if c["pending"]:
            text += f" · {c['pending']} pending"
        self.summary_label.setText(text)

    @Slot()
    def _refresh_history(self) -> None:
        n = self.history_model.rowCount()
        self.history_button.setText(f"History ({n})")
        self.history_button.setEnabled(n > 0)
        if n and self.history_view.isVisible():
            self.history_view.scrollToBottom()

    @Slot(bool)
    def _on_history_toggled(self, shown: bool) -> None:
        self.history_button.setArrowType(Qt.ArrowType.DownArrow if shown else Qt.ArrowType.RightArrow)
        self.history_view.setVisible(shown)
        if shown:
            self.history_view.scrollToBottom()

    def set_history_expanded(self, shown: bool) -> None:
        """Open or close the history list."""
        self.history_button.setChecked(shown)
