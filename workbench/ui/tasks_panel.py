"""The Tasks board (D10, G2): the current thread's sub-agent tasks, live, with what can be done to them.

One row per task the thread launched (``Session.tasks()``, oldest first), in two-line cells (the
right-hand dock is narrow): the agent over a short description; the status in words with a glyph
(◷ queued, ◐ running, ⚑ waiting for you, ✓ completed, ✗ failed, ⊘ aborted, ⌛ expired — never colour
alone, G14) over the elapsed time (ticking while the task is not settled); tokens over cost; the last
tool it called. Under the table the selected task's id,
whole description and outcome or error, and its actions:

- **Open transcript**: the task's conversation, read-only, in the window's centre (``sig_transcript_requested``;
  the window shows it with a "Back to the thread" bar, ``task_transcript``).
- **Answer decision…** (a task that waits for you): the approval dialog for its pending calls, through
  the window's ``DecisionDesk`` — the same path as the Decisions inbox; the task resumes with
  ``Session.answer_task`` once its batch is decided (D9).
- **Abort…** (a background task not settled yet): asks first (the default keeps it running), then
  ``Session.abort_task``. A foreground task stops with its parent's run (Stop).
- **Continue…** (a settled task): asks for further instructions, then ``Session.continue_task``.

It follows the bridge's ``sig_task_started`` / ``sig_task_progressed`` / ``sig_task_settled`` signals
(live figures come from ``task_progress``) and reads ``Session.tasks()`` when a thread is attached or
reloaded, or a task it does not know appears; it never polls. ``sig_counts_changed(running, waiting)``
feeds the status bar's "N tasks running" / "1 task waits for you".
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, Qt, QTimer, Signal, Slot
from PySide6.QtGui import QColor, QFont
from PySide6.QtWidgets import (
    QDialog,
    QHBoxLayout,
    QHeaderView,
    QMessageBox,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from workbench.ui.buttons import quiet_button
from workbench.ui import qt_async
from workbench.ui.plain_text import escape as _html, plain_label, plain_message_box, plain_tooltip, rich_label
from workbench.ui.style import is_dark, status_color
from workbench.ui.safe_choice import ROLE, safe_choice_box
from workbench.ui.table_model import RowsTableModel, two_line_table

if TYPE_CHECKING:
    from workbench.session import Session, TaskRecord

log = logging.getLogger(__name__)

Index = QModelIndex | QPersistentModelIndex

SETTLED = frozenset({"completed", "failed", "aborted", "expired"})
RUNNING = frozenset({"queued", "pending"})
WAITING = "awaiting_decision"

STATUS_WORDS = {
    "queued": "queued",
    "pending": "running",
    "awaiting_decision": "waiting",
    "completed": "completed",
    "failed": "failed",
    "aborted": "aborted",
    "expired": "expired",
}
GLYPHS = {
    "queued": "◷",
    "pending": "◐",
    "awaiting_decision": "⚑",
    "completed": "✓",
    "failed": "✗",
    "aborted": "⊘",
    "expired": "⌛",
}
STATUS_HELP = {
    "queued": "queued: waiting for a free slot (subagents.max_concurrent)",
    "pending": "running: the sub-agent is working",
    "awaiting_decision": "waiting for you: a decision of the sub-agent waits (Answer decision…, or the Decisions "
                         "panel)",
    "completed": "completed: the sub-agent answered",
    "failed": "failed",
    "aborted": "aborted: stopped before it finished",
    "expired": "expired: it ran past its time limit (subagents.timeout_seconds)",
}
_STYLE_CLASS = {"queued": "aborted", "pending": "running", "awaiting_decision": "waiting", "completed": "ok",
                "failed": "error", "aborted": "aborted", "expired": "denied"}

COLUMNS = ("Task", "Status", "Usage", "Last tool")
TASK, STATUS, USAGE, LAST_TOOL = range(len(COLUMNS))
HEADER_TIPS = ("The sub-agent over the task it was given", "The task's status over its elapsed time",
               "Tokens over cost", "The last tool the sub-agent called")
MAX_TOOL_CHARS = 16
"""A longer last tool name is cut in its cell (whole in the tooltip and the details)."""

TaskIdRole = Qt.ItemDataRole.UserRole + 1
"""The task id behind a row."""
StatusRole = Qt.ItemDataRole.UserRole + 2
"""The task's status (the engine's word: ``pending``, ``awaiting_decision``, …)."""

TICK_MS = 1000
"""How often the elapsed times of unsettled tasks move on."""


def status_text(status: str) -> str:
    """``◐ running``: the glyph and the word (G14: never a colour alone)."""
    return f"{GLYPHS.get(status, '·')} {STATUS_WORDS.get(status, status or 'unknown')}"


def format_elapsed(seconds: float) -> str:
    """``4 s``, ``2m 05s``, ``1h 02m``."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    return f"{s // 3600}h {(s % 3600) // 60:02d}m"


def format_task_cost(cost: float | None, tokens: int) -> str:
    """``$0.0012`` (``$1.23`` from a dollar up); ``n/a`` when its calls were not priced."""
    if cost is None:
        return "n/a" if tokens else "$0.0000"
    return f"${cost:,.2f}" if cost >= 1 else f"${cost:.4f}"


@dataclass(frozen=True)
class TaskRow:
    """What the board shows of one task: the stored record's fields with the live figures over them."""

    id: str
    agent: str
    description: str
    status: str
    background: bool
    child_thread: str
    tokens: int = 0
    cost_usd: float | None = None
    last_tool: str = ""
    since: float = 0.0  # when its elapsed time counts from (wall clock), while it is not settled
    took: float | None = None  # its elapsed time once settled
    outcome: str = ""
    error: str | None = None

    @property
    def settled(self) -> bool:
        return self.status in SETTLED

    def elapsed(self, now: float | None = None) -> float:
        if self.took is not None:
            return self.took
        return max(0.0, (time.time() if now is None else now) - self.since)

    @classmethod
    def from_record(cls, task: TaskRecord) -> TaskRow:
        settled = task.status in SETTLED
        return cls(task.id, task.agent, task.description, task.status, task.background, task.child_thread,
                   task.usage.total_tokens, task.usage.cost_usd, task.last_tool,
                   task.started or task.created, task.elapsed() if settled else None, task.outcome, task.error)

    def with_progress(self, data: Mapping[str, Any], now: float | None = None) -> TaskRow:
        """The row after a ``task_progress`` event (its figures are the live ones)."""
        status = str(data.get("status") or self.status)
        elapsed = _float(data.get("elapsed"))
        now = time.time() if now is None else now
        tokens = data.get("tokens")
        cost = data.get("cost_usd", self.cost_usd)
        return replace(
            self, status=status, description=str(data.get("description") or self.description),
            last_tool=str(data.get("last_tool") or self.last_tool),
            tokens=int(tokens) if isinstance(tokens, (int, float)) else self.tokens,
            cost_usd=float(cost) if isinstance(cost, (int, float)) else None,
            since=now - elapsed if elapsed is not None else self.since,
            took=(elapsed if elapsed is not None else self.elapsed(now)) if status in SETTLED else None)


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


class TasksModel(RowsTableModel):
    """Rows are ``TaskRow``s, oldest task first."""

    COLUMNS = COLUMNS

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self._rows: list[TaskRow] = []

    @property
    def rows(self) -> list[TaskRow]:
        return list(self._rows)

    def row_of(self, task_id: str) -> int:
        return next((i for i, r in enumerate(self._rows) if r.id == task_id), -1)

    def task(self, task_id: str) -> TaskRow | None:
        i = self.row_of(task_id)
        return self._rows[i] if i >= 0 else None

    def set_rows(self, rows: Iterable[TaskRow]) -> None:
        new = list(rows)
        if [r.id for r in new] == [r.id for r in self._rows]:
            old, self._rows = self._rows, new
            for i, (a, b) in enumerate(zip(old, new)):
                if a != b:
                    self.dataChanged.emit(self.index(i, 0), self.index(i, len(COLUMNS) - 1))
            return
        self.beginResetModel()
        self._rows = new
        self.endResetModel()

    def put(self, row: TaskRow) -> None:
        """Replace the row of the same task, or add it at the end."""
        i = self.row_of(row.id)
        if i < 0:
            n = len(self._rows)
            self.beginInsertRows(QModelIndex(), n, n)
            self._rows.append(row)
            self.endInsertRows()
        elif self._rows[i] != row:
            self._rows[i] = row
            self.dataChanged.emit(self.index(i, 0), self.index(i, len(COLUMNS) - 1))

    def tick(self) -> None:
        """The elapsed times of the unsettled rows move on (the status cells, display only)."""
        for i, r in enumerate(self._rows):
            if not r.settled:
                self.dataChanged.emit(self.index(i, STATUS), self.index(i, STATUS), [Qt.ItemDataRole.DisplayRole])

    def headerData(  # noqa: N802 - Qt override
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> Any:
        if role == Qt.ItemDataRole.ToolTipRole and orientation == Qt.Orientation.Horizontal \
                and 0 <= section < len(HEADER_TIPS):
            return HEADER_TIPS[section]
        return super().headerData(section, orientation, role)

    def counts(self) -> tuple[int, int]:
        """(queued or running, waiting for a decision)."""
        return (sum(1 for r in self._rows if r.status in RUNNING),
                sum(1 for r in self._rows if r.status == WAITING))

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        row = self.row_at(index)
        if row is None:
            return None
        col = index.column()
        if role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.AccessibleTextRole):
            display = role == Qt.ItemDataRole.DisplayRole
            if col == TASK:
                return f"{row.agent}\n{row.description}" if display else f"{row.agent}: {row.description}"
            if col == STATUS:
                elapsed = format_elapsed(row.elapsed())
                return (f"{status_text(row.status)}\n{elapsed}" if display
                        else f"{STATUS_WORDS.get(row.status, row.status)}, {elapsed}")
            if col == USAGE:
                cost = format_task_cost(row.cost_usd, row.tokens)
                return f"{row.tokens:,} tokens\n{cost}" if display else f"{row.tokens:,} tokens, cost {cost}"
            if col == LAST_TOOL:
                tool = row.last_tool or "—"
                return tool if len(tool) <= MAX_TOOL_CHARS or not display else tool[:MAX_TOOL_CHARS - 1] + "…"
            return None
        if role == Qt.ItemDataRole.ToolTipRole:
            if col == STATUS:
                return plain_tooltip(STATUS_HELP.get(row.status, row.status) + (f"\n{row.error}" if row.error else ""))
            if col == USAGE and row.cost_usd is None and row.tokens:
                return "Not priced: litellm has no price for this sub-agent's model"
            if col == LAST_TOOL and row.last_tool:
                return plain_tooltip(f"The last tool the sub-agent called: {row.last_tool}")
            kind = "background" if row.background else "foreground (the thread's run waits for it)"
            return plain_tooltip(f"Task {row.id} — sub-agent {row.agent}, {kind}\n{row.description}")
        if role == Qt.ItemDataRole.TextAlignmentRole and col == USAGE:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.ForegroundRole and col == STATUS:
            return QColor(status_color(_STYLE_CLASS.get(row.status, "aborted"), is_dark()))
        if role == Qt.ItemDataRole.FontRole and col == STATUS and row.status == WAITING:
            font = QFont()
            font.setBold(True)
            return font
        if role == TaskIdRole:
            return row.id
        if role == StatusRole:
            return row.status
        return None

    def flags(self, index: Index) -> Qt.ItemFlag:
        if not index.isValid():
            return Qt.ItemFlag.NoItemFlags
        return Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable | Qt.ItemFlag.ItemNeverHasChildren


class ContinueDialog(QDialog):
    """Further instructions for a settled task (D5 ``continue_task``). Enter types a new line; only a
    click (or Space) on "Continue task" sends them (G7)."""

    def __init__(self, task: TaskRow, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("continue_task_dialog")
        self.setWindowTitle("Continue task")
        self.resize(480, 240)
        lay = QVBoxLayout(self)
        intro = rich_label(  # our bold; the agent, task and status escaped
            f"Further instructions for the sub-agent <b>{_html(task.agent)}</b> (task {_html(task.id)}, "
            f"{_html(STATUS_WORDS.get(task.status, task.status))}). It goes on in the background, on its own "
            "conversation; the thread's agent is told when it settles again.", self)
        intro.setObjectName("continue_task_intro")
        intro.setWordWrap(True)
        lay.addWidget(intro)
        self.instructions = QPlainTextEdit(self)
        self.instructions.setObjectName("continue_task_instructions")
        self.instructions.setAccessibleName("Instructions for the sub-agent")
        self.instructions.setPlaceholderText("What should it do next?")
        self.instructions.setTabChangesFocus(True)
        self.instructions.textChanged.connect(self._validate)
        lay.addWidget(self.instructions, 1)
        row = QHBoxLayout()
        row.addStretch(1)
        self.continue_button = QPushButton("Continue task", self)
        self.continue_button.setObjectName("continue_task_send")
        self.cancel_button = QPushButton("Cancel", self)
        self.cancel_button.setObjectName("continue_task_cancel")
        for b in (self.continue_button, self.cancel_button):
            b.setAutoDefault(False)
            b.setDefault(False)
            row.addWidget(b)
        self.continue_button.clicked.connect(lambda _=False: self.accept())
        self.cancel_button.clicked.connect(lambda _=False: self.reject())
        lay.addLayout(row)
        self._validate()

    @property
    def text(self) -> str:
        return self.instructions.toPlainText().strip()

    def _validate(self) -> None:
        self.continue_button.setEnabled(bool(self.text))


class TasksPanel(QWidget):
    """The Tasks board (see the module)."""

    sig_counts_changed = Signal(int, int)
    """(tasks queued or running, tasks waiting for a decision) of the current thread."""

    sig_transcript_requested = Signal(str)
    """Open transcript: show this task's conversation read-only."""

    def __init__(self, parent: QWidget | None = None, *, bridge: Any = None, desk: Any = None,
                 start: Callable[..., Any] = qt_async.start) -> None:
        super().__init__(parent)
        self.setObjectName("tasksPanel")
        self.desk = desk if desk is not None else getattr(parent, "desk", None)
        self._start = start
        self._session: Session | None = None
        self._soon = QTimer(self)  # re-read the thread's tasks once a burst of events is handled
        self._soon.setSingleShot(True)
        self._soon.setInterval(0)
        self._soon.timeout.connect(self.reload)

        lay = QVBoxLayout(self)
        lay.setContentsMargins(6, 6, 6, 6)
        self.summary = plain_label(self)
        self.summary.setObjectName("tasksSummary")
        self.summary.setWordWrap(True)
        lay.addWidget(self.summary)

        split = QSplitter(Qt.Orientation.Vertical, self)
        split.setChildrenCollapsible(False)
        lay.addWidget(split, 1)
        self.model = TasksModel(self)
        self.view = two_line_table(self, self.model, "tasksView", "Sub-agent tasks",
                                   "This thread's sub-agent tasks: agent, task, status, elapsed time, "
                                   "tokens, cost and last tool")
        # Every column as wide as its contents, the task (agent over description) takes the rest: the
        # right-hand dock is narrow, the figures must not be cut; the description is elided (whole in
        # the tooltip and the details).
        header = self.view.horizontalHeader()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(TASK, QHeaderView.ResizeMode.Stretch)
        header.setMinimumSectionSize(3 * self.fontMetrics().averageCharWidth())
        self.view.selectionModel().currentRowChanged.connect(lambda *_: self._show_selected())
        self.view.doubleClicked.connect(lambda *_: self.open_transcript())
        split.addWidget(self.view)

        detail = QWidget(self)
        dl = QVBoxLayout(detail)
        dl.setContentsMargins(0, 0, 0, 0)
        self.title = plain_label(detail)
        self.title.setObjectName("taskTitle")
        self.title.setWordWrap(True)
        self.title.setStyleSheet("font-weight: 600;")
        self.title.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        dl.addWidget(self.title)
        self.details = QPlainTextEdit(detail)
        self.details.setObjectName("taskDetails")
        self.details.setAccessibleName("The task and its outcome")
        self.details.setReadOnly(True)
        self.details.setMinimumHeight(48)
        dl.addWidget(self.details, 1)
        # Two rows: one of four buttons made the dock wider than the right-hand column (PANELS_WIDTH).
        row = QHBoxLayout()
        self.open_button = self._button("Open transcript", "taskOpenTranscript", self.open_transcript, detail,
                                        "Show the sub-agent's conversation, read-only, in place of the thread's")
        self.answer_button = self._button("Answer decision…", "taskAnswer", self.answer_decision, detail,
                                          "Decide what the sub-agent waits for (the approval dialog)")
        self.continue_button = self._button("Continue…", "taskContinue", self.continue_task, detail,
                                            "Send the sub-agent further instructions; it goes on in the background")
        self.abort_button = self._button("Abort…", "taskAbort", self.abort_task, detail,
                                         "Stop the task: it ends aborted, its work so far is kept")
        for b in (self.open_button, self.answer_button):
            row.addWidget(b)
        row.addStretch(1)
        dl.addLayout(row)
        row2 = QHBoxLayout()
        row2.addWidget(self.continue_button)
        row2.addStretch(1)
        row2.addWidget(self.abort_button)
        dl.addLayout(row2)
        split.addWidget(detail)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        split.setSizes([300, 140])
        self.detail = detail

        self._ticker = QTimer(self)
        self._ticker.setInterval(TICK_MS)
        self._ticker.timeout.connect(self._tick)
        self.model.modelReset.connect(self._changed)
        self.model.rowsInserted.connect(lambda *_: self._changed())
        self.model.dataChanged.connect(self._data_changed)
        if bridge is not None:
            bridge.sig_task_started.connect(self.on_task_started)
            bridge.sig_task_progressed.connect(self.on_task_progress)
            bridge.sig_task_settled.connect(self.on_task_settled)
        self._changed()

    @staticmethod
    def _button(text: str, name: str, slot: Callable[[], Any], parent: QWidget, tip: str) -> QPushButton:
        return quiet_button(parent, text, name, slot, tip)  # G7: Enter presses nothing here

    # -- the panel contract ---------------------------------------------------------------------------
    def set_session(self, session: Session | None) -> None:
        """A thread was attached (opened, switched, reloaded): its tasks from the store."""
        self._session = session
        self.reload()

    def handle_event(self, event: Any) -> None:
        """Task events come through the bridge's task signals (``sig_task_*``); nothing per event here."""

    # -- live -----------------------------------------------------------------------------------------
    @Slot(dict)
    def on_task_started(self, data: dict[str, Any]) -> None:
        self.reload_soon()  # its description and times are in the store

    @Slot(dict)
    def on_task_progress(self, data: dict[str, Any]) -> None:
        row = self.model.task(str(data.get("task_id") or ""))
        if row is None:
            self.reload_soon()  # launched before this board knew of it
            return
        self.model.put(row.with_progress(data))

    @Slot(dict)
    def on_task_settled(self, data: dict[str, Any]) -> None:
        row = self.model.task(str(data.get("task_id") or ""))
        if row is not None:
            usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
            tokens = usage.get("total_tokens")
            if not isinstance(tokens, int):
                tokens = int(usage.get("input_tokens") or 0) + int(usage.get("output_tokens") or 0) \
                    + int(usage.get("thoughts_tokens") or 0)
            self.model.put(replace(row, status=str(data.get("status") or row.status), tokens=tokens or row.tokens,
                                   cost_usd=usage.get("cost_usd", row.cost_usd), took=row.elapsed()))
        self.reload_soon()  # the outcome and error are in the store

    def reload_soon(self) -> None:
        self._soon.start()

    def reload(self) -> None:
        """The thread's tasks from the store; the live figures of unsettled ones are kept."""
        session = self._session
        records: list[TaskRecord] = []
        if session is not None:
            try:
                records = session.tasks()
            except Exception as e:  # noqa: BLE001 - a store closing under a workspace switch
                log.debug("tasks not read: %s", e)
                records = []
        rows = []
        for record in records:
            row = TaskRow.from_record(record)
            live = self.model.task(record.id)
            if live is not None and not row.settled and live.status == row.status:
                row = replace(row, tokens=max(row.tokens, live.tokens), cost_usd=live.cost_usd or row.cost_usd,
                              last_tool=live.last_tool or row.last_tool)
            rows.append(row)
        keep = self.selected()
        self.model.set_rows(rows)
        if keep is not None and self.model.row_of(keep.id) >= 0:
            self.select(keep.id)
        elif rows and self.selected() is None:
            self.select(rows[-1].id)
        self._show_selected()

    # -- selection ------------------------------------------------------------------------------------
    def selected(self) -> TaskRow | None:
        index = self.view.currentIndex()
        return self.model.row_at(index) if index.isValid() else None

    def select(self, task_id: str) -> None:
        i = self.model.row_of(task_id)
        if i >= 0:
            self.view.setCurrentIndex(self.model.index(i, TASK))
            self.view.selectRow(i)

    def _changed(self) -> None:
        rows = self.model.rows
        running, waiting = self.model.counts()
        if rows:
            settled = sum(1 for r in rows if r.settled)
            parts = [f"{running} running" if running else "", f"{waiting} waiting for you" if waiting else "",
                     f"{settled} settled" if settled else ""]
            self.summary.setText(f"{len(rows)} sub-agent task{'s' if len(rows) != 1 else ''} in this thread: "
                                 + ", ".join(p for p in parts if p) + ".")
        else:
            self.summary.setText("No sub-agent tasks in this thread. They appear here when the agent delegates "
                                 "to a sub-agent (subagents in workbench.yaml).")
        if running or waiting or any(not r.settled for r in rows):
            if not self._ticker.isActive():
                self._ticker.start()
        else:
            self._ticker.stop()
        self.sig_counts_changed.emit(running, waiting)
        self._show_selected()

    def _data_changed(self, top: Any, bottom: Any, roles: Any = ()) -> None:
        if list(roles or ()) == [Qt.ItemDataRole.DisplayRole] and top.column() == bottom.column() == STATUS:
            return  # the clock's tick: nothing else changed
        self._changed()

    def _tick(self) -> None:
        if self.isVisible():
            self.model.tick()
        self._show_title()

    def _show_selected(self) -> None:
        row = self.selected()
        self.detail.setEnabled(row is not None)
        if row is None:
            self.title.setText("")
            self.details.setPlainText("")
            for b in (self.open_button, self.answer_button, self.continue_button, self.abort_button):
                b.setEnabled(False)
            return
        self._show_title()
        text = row.description
        if row.outcome:
            text += f"\n\nOutcome:\n{row.outcome}"
        if row.error:
            text += f"\n\nError: {row.error}"
        if self.details.toPlainText() != text:
            self.details.setPlainText(text)
        self.open_button.setEnabled(True)
        self.answer_button.setEnabled(row.status == WAITING)
        self.answer_button.setToolTip(
            "Decide what the sub-agent waits for (the approval dialog)" if row.background else
            "The thread's run asks for it (the approval dialog names the sub-agent)")
        self.continue_button.setEnabled(row.settled)
        self.abort_button.setEnabled(row.background and not row.settled)
        self.abort_button.setToolTip("Stop the task: it ends aborted, its work so far is kept" if row.background
                                     else "A foreground task stops with the thread's run: use Stop (Esc)")

    def _show_title(self) -> None:
        row = self.selected()
        if row is None:
            return
        kind = "background" if row.background else "foreground"
        self.title.setText(f"{row.agent} · task {row.id} · {kind} · {status_text(row.status)} · "
                           f"{format_elapsed(row.elapsed())}")

    # -- actions --------------------------------------------------------------------------------------
    def open_transcript(self) -> None:
        row = self.selected()
        if row is not None:
            self.sig_transcript_requested.emit(row.id)

    def answer_decision(self) -> None:
        row = self.selected()
        if row is None or row.status != WAITING or self.desk is None:
            return
        self._start(self.desk.ask_task(row.id), name="task-answer")

    def abort_task(self) -> None:
        row = self.selected()
        if row is None or row.settled or not row.background:
            return
        self._start(self._abort(row), name="task-abort")

    async def _abort(self, row: TaskRow) -> None:
        box, buttons = safe_choice_box(  # G7: Enter keeps the task
            self, "abort_task_confirm", "Abort task?",
            f"Abort the sub-agent {row.agent}'s task {row.id}?\n\nIt stops now and ends aborted; "
            "its conversation so far is kept, and the thread's agent is told.",
            [("abort_task_yes", "Abort task", ROLE.DestructiveRole), ("abort_task_no", "Keep it running", ROLE.RejectRole)],
            safe="abort_task_no")
        abort = buttons["abort_task_yes"]
        try:
            await qt_async.ask_dialog(box)
            chosen = box.clickedButton() is abort
        finally:
            qt_async.release_dialog(box)
        session = self._session
        if chosen and session is not None:
            await session.abort_task(row.id)
            self.reload()

    def continue_task(self) -> None:
        row = self.selected()
        if row is None or not row.settled:
            return
        self._start(self._continue(row), name="task-continue")

    async def _continue(self, row: TaskRow) -> None:
        dialog = ContinueDialog(row, self)
        try:
            code = await qt_async.ask_dialog(dialog)
            text = dialog.text
        finally:
            qt_async.release_dialog(dialog)
        session = self._session
        if code == QDialog.DialogCode.Accepted and text and session is not None:
            from workbench.errors import WorkbenchError

            try:
                session.continue_task(row.id, text)
            except WorkbenchError as e:  # D8: nothing left of a budget, or the task changed meanwhile
                await self._refused("Task not continued", str(e))
            self.reload()

    async def _refused(self, title: str, text: str) -> None:
        """Say why a request on a task was refused (the panel goes on)."""
        box = plain_message_box(QMessageBox(QMessageBox.Icon.Information, title, text, QMessageBox.StandardButton.Ok,
                                            self))  # the refusal quotes stored data: shown as written
        box.setObjectName("task_refused")
        try:
            await qt_async.ask_dialog(box)
        finally:
            qt_async.release_dialog(box)


__all__ = ["COLUMNS", "GLYPHS", "STATUS_WORDS", "ContinueDialog", "TaskRow", "TasksModel", "TasksPanel",
           "format_elapsed", "status_text"]
