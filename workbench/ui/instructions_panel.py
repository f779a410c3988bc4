"""The Instructions dock (G2, I1–I5): the AGENTS.md files in order with their fate, and an editor.

``DocumentsModel`` is a thin ``QAbstractTableModel`` over ``InstructionDoc`` rows: the configured
``memory.paths`` in order (so the files show before any run), each updated from the newest
``documents_reported`` event with source ``instructions`` (fate, tokens, reason) and from the panel's
own reads of the file (tokens on disk now).

The editor (monospace, markdown highlighting) edits one file in place:

- Save goes through ``Session.write_document``: the agent's backend and permission rules, so a denied
  path or a read-only mount cannot be saved. The panel asks ``Session.write_verdict`` when a file opens
  and disables Save with the reason; a refused save says why and writes nothing.
- Revert reads the file again and drops the edits.
- A live token count (``estimate_tokens``, debounced) warns past ``max_file_tokens``.
- A change on disk is noticed by reading the file again (async, through the backend) every
  ``DISK_CHECK_MS`` and when the window regains focus: an unedited editor reloads silently, an edited
  one shows a bar "AGENTS.md changed on disk — Reload / Keep mine".

When the agent changes one of the files (``edit_file`` / ``write_file``: the live
``tool_call_started`` names the path, the ``tool_call_finished`` with status ok says it happened),
the panel reads it again and shows the change as a unified diff under "Last change by the agent".
"""

from __future__ import annotations

import difflib
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import (
    QEvent,
    QModelIndex,
    QPersistentModelIndex,
    Qt,
    QTimer,
    Signal,
    Slot,
)
from PySide6.QtGui import QColor, QFontDatabase, QGuiApplication, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFrame,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QTreeView,
    QVBoxLayout,
    QWidget,
)

from workbench.backends.base import normalize
from workbench.engine.tokens import estimate_tokens
from workbench.errors import BackendIOError, BackendRefusal, FileNotFound, WorkbenchError
from workbench.ui.markdown_highlighter import DiffHighlighter, MarkdownHighlighter
from workbench.ui.panel_tasks import PanelTasks, Start
from workbench.ui.style import is_dark, set_status_property, status_color
from workbench.ui.table_model import RowsTableModel

if TYPE_CHECKING:
    from workbench.engine.events import Event
    from workbench.session import Session

log = logging.getLogger(__name__)

Index = QModelIndex | QPersistentModelIndex

__all__ = ["DISK_CHECK_MS", "DocumentsModel", "InstructionDoc", "InstructionsPanel", "unified_diff"]

#: How often the open file is compared with the disk (ms).
DISK_CHECK_MS = 2000
#: The token count waits this long after the last keystroke (ms).
TOKEN_DEBOUNCE_MS = 300
#: The most of an AGENTS.md the panel reads (F3); a larger file is not opened for editing.
EDITOR_MAX_BYTES = 1024 * 1024
AGENT_WRITE_TOOLS = frozenset({"edit_file", "write_file"})

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


def unified_diff(before: str | None, after: str | None, path: str) -> str:
    """A unified diff of a file's text (None: the file did not exist)."""
    a = (before or "").splitlines(keepends=True)
    b = (after or "").splitlines(keepends=True)
    lines = difflib.unified_diff(a, b, fromfile=f"{path} (before)" if before is not None else "/dev/null",
                                 tofile=f"{path} (after)" if after is not None else "/dev/null")
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


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
            return "\n".join(lines)
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


def _canonical(path: Any) -> str | None:
    if not isinstance(path, str):
        return None
    try:
        return normalize(path)
    except BackendRefusal:
        return None


class InstructionsPanel(QWidget):
    """The AGENTS.md files with their fate and tokens, an in-place editor, and the agent's last change."""

    sig_file_saved = Signal(str)
    """The user saved an instruction file (its virtual path)."""

    sig_disk_changed = Signal(str)
    """The open file changed on disk: ``reloaded`` (silently) or ``conflict`` (the bar shows)."""

    sig_agent_changed = Signal(str)
    """The agent changed an instruction file (its virtual path); the diff shows."""

    def __init__(self, start: Start | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("instructionsPanel")
        self.tasks = PanelTasks(start, self._show_failure)
        self._session: Session | None = None
        self._generation = 0
        self._paths: tuple[str, ...] = ()
        self.max_file_tokens = 4000
        self.max_total_tokens = 8000
        # The open file
        self.open_path: str | None = None
        self._baseline: str | None = None
        """The disk text the editor is based on (None: the file did not exist)."""
        self._conflict_text: str | None = None
        self._conflict = False
        self._can_save = False
        self._why_not = ""
        self._checking = False
        self._saving = False
        self._loading = False
        # Every configured file's last known disk text, for the agent's diffs.
        self._known: dict[str, str | None] = {}
        self._agent_calls: dict[str, tuple[str, str | None, bool]] = {}
        """call_id -> (path, its text before the call, whether that text was known)."""
        self.last_agent_diff = ""
        """The newest change by the agent as a unified diff ("" before one)."""

        self.model = DocumentsModel(self)

        # -- the file list --------------------------------------------------------------------------------
        self.view = QTreeView(self)
        self.view.setObjectName("instructionsView")
        self.view.setAccessibleName("Instruction files")  # G14
        self.view.setAccessibleDescription("The AGENTS.md files in the order the agent reads them, with their fate and tokens")
        self.view.setModel(self.model)
        self.view.setRootIsDecorated(False)
        self.view.setUniformRowHeights(True)
        self.view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.view.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.view.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        header = self.view.header()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(FILE, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(FATE, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(TOKENS, QHeaderView.ResizeMode.ResizeToContents)
        self.view.selectionModel().currentRowChanged.connect(self._on_current_changed)
        self.model.modelReset.connect(self._reselect_open)
        self.section_label = QLabel(self)
        self.section_label.setObjectName("instructionsSection")
        self.section_label.setProperty("role", "muted")
        self.section_label.setWordWrap(True)

        # -- the editor -----------------------------------------------------------------------------------
        self.path_label = QLabel("No file open", self)
        self.path_label.setObjectName("instructionsPath")
        font = self.path_label.font()
        font.setBold(True)
        self.path_label.setFont(font)
        self.save_button = QPushButton("Save", self)
        self.save_button.setObjectName("instructionsSave")
        self.save_button.setEnabled(False)
        self.save_button.clicked.connect(lambda: self.tasks.run(self.save()))
        self.revert_button = QPushButton("Revert", self)
        self.revert_button.setObjectName("instructionsRevert")
        self.revert_button.setToolTip("Drop your edits and read the file again")
        self.revert_button.setEnabled(False)
        self.revert_button.clicked.connect(lambda: self.tasks.run(self.revert()))

        self.verdict_label = QLabel(self)
        self.verdict_label.setObjectName("instructionsVerdict")
        self.verdict_label.setWordWrap(True)
        self.verdict_label.setVisible(False)

        self.conflict_bar = QFrame(self)
        self.conflict_bar.setObjectName("instructionsConflictBar")
        self.conflict_bar.setFrameShape(QFrame.Shape.StyledPanel)
        self.conflict_label = QLabel(self.conflict_bar)
        self.conflict_label.setObjectName("instructionsConflictText")
        self.conflict_label.setWordWrap(True)
        set_status_property(self.conflict_label, "denied")
        self.conflict_reload = QPushButton("Reload", self.conflict_bar)
        self.conflict_reload.setObjectName("instructionsConflictReload")
        self.conflict_reload.setToolTip("Drop your edits and take the file as it is on disk")
        self.conflict_reload.clicked.connect(self.take_disk_version)
        self.conflict_keep = QPushButton("Keep mine", self.conflict_bar)
        self.conflict_keep.setObjectName("instructionsConflictKeep")
        self.conflict_keep.setToolTip("Keep your edits; saving replaces the file on disk")
        self.conflict_keep.clicked.connect(self.keep_mine)
        bar = QHBoxLayout(self.conflict_bar)
        bar.setContentsMargins(6, 3, 6, 3)
        bar.addWidget(self.conflict_label, 1)
        bar.addWidget(self.conflict_reload)
        bar.addWidget(self.conflict_keep)
        self.conflict_bar.setVisible(False)

        self.editor = QPlainTextEdit(self)
        self.editor.setObjectName("instructionsEditor")
        self.editor.setAccessibleName("Instruction file editor")
        self.editor.setProperty("role", "code")
        self.editor.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.editor.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        self.editor.setTabChangesFocus(False)
        self.editor.setReadOnly(True)
        self.editor.setPlaceholderText("Select an instruction file above to edit it.")
        self.highlighter = MarkdownHighlighter(self.editor.document())
        self.editor.textChanged.connect(self._on_text_changed)

        self.token_label = QLabel(self)
        self.token_label.setObjectName("instructionsTokens")
        self.token_label.setWordWrap(True)
        self.message_label = QLabel(self)
        self.message_label.setObjectName("instructionsMessage")
        self.message_label.setWordWrap(True)
        self.message_label.setProperty("role", "muted")

        self._token_timer = QTimer(self)
        self._token_timer.setSingleShot(True)
        self._token_timer.setInterval(TOKEN_DEBOUNCE_MS)
        self._token_timer.timeout.connect(self.update_token_count)

        self.disk_timer = QTimer(self)
        self.disk_timer.setInterval(DISK_CHECK_MS)
        self.disk_timer.timeout.connect(self._schedule_disk_check)

        save_shortcut = QShortcut(QKeySequence.StandardKey.Save, self.editor)
        save_shortcut.setContext(Qt.ShortcutContext.WidgetShortcut)
        save_shortcut.activated.connect(self._save_if_enabled)

        # -- the agent's last change ----------------------------------------------------------------------
        self.agent_title = QLabel("Last change by the agent", self)
        self.agent_title.setObjectName("instructionsAgentTitle")
        self.agent_title.setFont(font)
        self.agent_label = QLabel("None in this session yet: when the agent edits one of these files, the diff shows here.", self)
        self.agent_label.setObjectName("instructionsAgentInfo")
        self.agent_label.setProperty("role", "muted")
        self.agent_label.setWordWrap(True)
        self.diff_view = QPlainTextEdit(self)
        self.diff_view.setObjectName("instructionsAgentDiff")
        self.diff_view.setAccessibleName("The agent's change to this file")
        self.diff_view.setReadOnly(True)
        self.diff_view.setProperty("role", "code")
        self.diff_view.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.diff_view.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.diff_view.setVisible(False)
        self.diff_highlighter = DiffHighlighter(self.diff_view.document())
        self._dark = is_dark()

        # -- layout ---------------------------------------------------------------------------------------
        top = QWidget(self)
        top_layout = QVBoxLayout(top)
        top_layout.setContentsMargins(0, 0, 0, 0)
        top_layout.setSpacing(2)
        top_layout.addWidget(self.view)
        top_layout.addWidget(self.section_label)

        middle = QWidget(self)
        head = QHBoxLayout()
        head.setContentsMargins(0, 0, 0, 0)
        head.addWidget(self.path_label, 1)
        head.addWidget(self.save_button)
        head.addWidget(self.revert_button)
        middle_layout = QVBoxLayout(middle)
        middle_layout.setContentsMargins(0, 0, 0, 0)
        middle_layout.setSpacing(3)
        middle_layout.addLayout(head)
        middle_layout.addWidget(self.verdict_label)
        middle_layout.addWidget(self.conflict_bar)
        middle_layout.addWidget(self.editor, 1)
        foot = QHBoxLayout()
        foot.setContentsMargins(0, 0, 0, 0)
        foot.addWidget(self.token_label)
        foot.addStretch(1)
        middle_layout.addLayout(foot)
        middle_layout.addWidget(self.message_label)

        bottom = QWidget(self)
        bottom_layout = QVBoxLayout(bottom)
        bottom_layout.setContentsMargins(0, 0, 0, 0)
        bottom_layout.setSpacing(2)
        bottom_layout.addWidget(self.agent_title)
        bottom_layout.addWidget(self.agent_label)
        bottom_layout.addWidget(self.diff_view, 1)

        self.splitter = QSplitter(Qt.Orientation.Vertical, self)
        self.splitter.addWidget(top)
        self.splitter.addWidget(middle)
        self.splitter.addWidget(bottom)
        self.splitter.setStretchFactor(0, 1)
        self.splitter.setStretchFactor(1, 3)
        self.splitter.setStretchFactor(2, 2)
        self.splitter.setChildrenCollapsible(False)
        self.splitter.setSizes([110, 420, 200])

        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.addWidget(self.splitter)

        app = QGuiApplication.instance()
        if isinstance(app, QGuiApplication):
            app.applicationStateChanged.connect(self._on_application_state)
        self._refresh_section()
        self._refresh_buttons()

    # -- the contract -----------------------------------------------------------------------------------
    @property
    def session(self) -> Session | None:
        return self._session

    def set_session(self, session: Session | None) -> None:
        """Show ``session``'s instruction files: config order, the newest report, then the disk.

        The same session again (another thread of the workspace) keeps the editor and its unsaved
        edits: the files belong to the workspace, only the last run's fates belong to the thread.
        """
        same_workspace = session is not None and session is self._session
        self._session = session
        self._agent_calls.clear()
        if same_workspace and session is not None:
            self.model.clear_reports()
            self._apply_latest_report(session)
            return
        self._generation += 1
        self._known.clear()
        self._close_editor()
        if session is None:
            self._paths = ()
            self.model.set_paths([], self.max_file_tokens)
            self._refresh_section()
            return
        memory = session.config.memory
        self._paths = tuple(_canonical(p) or p for p in memory.paths)
        self.max_file_tokens = memory.max_file_tokens
        self.max_total_tokens = memory.max_total_tokens
        self.model.set_paths(self._paths, self.max_file_tokens)
        self._apply_latest_report(session)
        self.tasks.run(self._load_all(self._generation))

    def _apply_latest_report(self, session: Session) -> None:
        latest = None
        for e in session.store.events(session.thread_id, types={"documents_reported"}):
            if e.data.get("source") == "instructions":
                latest = e
        if latest is not None:
            self.model.apply_report(latest.data.get("documents") or [])
        self._refresh_section()

    def handle_event(self, event: Event) -> None:
        """Render one engine event (durable or live), on the GUI thread."""
        try:
            self._handle(event)
        except Exception:  # noqa: BLE001 - a bad payload must not break the bridge
            log.exception("instructions panel could not handle %s", event.type)

    # -- public actions (async; slots start them through ``tasks``) ----------------------------------------
    @property
    def dirty(self) -> bool:
        """The editor holds text that differs from the file it is based on."""
        return self.open_path is not None and self.editor.toPlainText() != (self._baseline or "")

    @property
    def can_save(self) -> tuple[bool, str]:
        return self._can_save, self._why_not

    @property
    def conflict_visible(self) -> bool:
        return self._conflict

    async def open_file(self, path: str) -> bool:
        """Load ``path`` into the editor (a missing file opens empty, to be created by Save)."""
        s = self._session
        if s is None:
            return False
        generation = self._generation
        self._loading = True
        try:
            text, state, why = await self._read(path)
        finally:
            self._loading = False
        if generation != self._generation:
            return False
        self._remember_disk(path, text, state, why)
        if state == "refused" or state == "error":
            self._close_editor()
            self.path_label.setText(path)
            self._show_verdict(f"Cannot open {path}: {why}")
            return False
        self.open_path = path
        self._baseline = text
        self._hide_conflict()
        self._set_editor_text(text or "")
        self._apply_verdict(*s.write_verdict(path))
        self.path_label.setText(path + ("" if text is not None else "  (new file)"))
        self._message("")
        self._select_row(path)
        self.update_token_count()
        self._refresh_buttons()
        self.disk_timer.start()
        return True

    async def save(self) -> bool:
        """Write the editor's text through the session (same backend and rules as the agent)."""
        s, path = self._session, self.open_path
        if s is None or path is None:
            return False
        generation = self._generation
        text = self.editor.toPlainText()
        self._saving = True
        self._refresh_buttons()
        try:
            await s.write_document(path, text)
        except BackendRefusal as e:
            if generation == self._generation:
                self._message(f"Not saved: {e.reason or e}. Nothing was written.", error=True)
            return False
        except (BackendIOError, WorkbenchError, OSError) as e:
            if generation == self._generation:
                self._message(f"Not saved: {e}. Nothing was written.", error=True)
            return False
        finally:
            self._saving = False
            if generation == self._generation:
                self._refresh_buttons()
        if generation != self._generation or path != self.open_path:
            return True
        self._baseline = text
        self._hide_conflict()
        self._remember_disk(path, text, "present")
        self.path_label.setText(path)
        self._message(f"Saved {path} at {time.strftime('%H:%M:%S')}. The agent sees it from the next run.")
        self._refresh_buttons()
        self.sig_file_saved.emit(path)
        return True

    async def revert(self) -> bool:
        """Drop the edits: read the file again into the editor."""
        path = self.open_path
        if path is None:
            return False
        opened = await self.open_file(path)
        if opened:
            self._message("Reverted to the file on disk.")
        return opened

    async def check_disk(self) -> str:
        """Compare the open file with the disk: ``unchanged``, ``reloaded``, ``conflict`` or ``skipped``."""
        s, path = self._session, self.open_path
        if s is None or path is None or self._checking or self._saving or self._loading:
            return "skipped"
        generation = self._generation
        self._checking = True
        try:
            text, state, _why = await self._read(path)
        finally:
            self._checking = False
        if generation != self._generation or path != self.open_path or self._saving or state in ("refused", "error"):
            return "skipped"
        compare_to = self._conflict_text if self._conflict else self._baseline
        if text == compare_to:
            return "unchanged"
        self._remember_disk(path, text, state)
        return self._disk_changed(path, text)

    @Slot()
    def take_disk_version(self) -> None:
        """The conflict bar's Reload: replace the edits with the file on disk."""
        if self.open_path is None:
            return
        text = self._conflict_text if self._conflict else self._baseline
        self._baseline = text
        self._set_editor_text(text or "")
        self._hide_conflict()
        self._message("Reloaded from disk; your edits were dropped.")
        self._refresh_buttons()

    @Slot()
    def keep_mine(self) -> None:
        """The conflict bar's Keep mine: keep the edits (saving will replace the file on disk)."""
        if not self._conflict:
            return
        self._baseline = self._conflict_text
        self._hide_conflict()
        self._message("Kept your edits; Save replaces the file on disk.")
        self._refresh_buttons()

    @Slot()
    def update_token_count(self) -> int:
        """Count the editor's tokens now and warn past ``max_file_tokens``."""
        self._token_timer.stop()
        if self.open_path is None:
            self.token_label.setText("")
            set_status_property(self.token_label, None)
            return 0
        n = estimate_tokens(self.editor.toPlainText())
        limit = self.max_file_tokens
        if n > limit:
            self.token_label.setText(f"⚠ {n:,} tokens — over max_file_tokens ({limit:,}): the agent sees this file cut")
            set_status_property(self.token_label, "denied")
        else:
            self.token_label.setText(f"{n:,} / {limit:,} tokens")
            set_status_property(self.token_label, None)
        self.token_label.setToolTip(f"Estimated tokens of the editor's text; the whole instructions section "
                                    f"is at most {self.max_total_tokens:,}.")
        return n

    @property
    def token_warning(self) -> bool:
        return self.token_label.property("status") == "denied"

    # -- events -----------------------------------------------------------------------------------------
    def _handle(self, event: Event) -> None:
        s = self._session
        if s is not None and event.thread_id != s.thread_id:
            return
        t, d = event.type, event.data
        if t == "documents_reported" and d.get("source") == "instructions":
            self.model.apply_report(d.get("documents") or [])
            self._refresh_section()
        elif t == "tool_call_started" and d.get("name") in AGENT_WRITE_TOOLS:
            args = d.get("arguments") or {}
            path = _canonical(args.get("path")) if isinstance(args, Mapping) else None
            call_id = str(d.get("call_id") or "")
            if path and call_id and (path in self._paths or path == self.open_path):
                self._agent_calls[call_id] = (path, self._known.get(path), path in self._known)
        elif t == "tool_call_finished":
            entry = self._agent_calls.pop(str(d.get("call_id") or ""), None)
            if entry is not None and d.get("status") == "ok":
                self.tasks.run(self._agent_changed(*entry))
        elif t == "run_finished" and s is not None and self.open_path is not None:
            verdict = s.write_verdict(self.open_path)
            if verdict != (self._can_save, self._why_not):
                self._apply_verdict(*verdict)
                self._refresh_buttons()

    async def _agent_changed(self, path: str, before: str | None, known: bool) -> None:
        generation = self._generation
        text, state, why = await self._read(path)
        if generation != self._generation:
            return
        self._remember_disk(path, text, state, why)
        stamp = time.strftime("%H:%M:%S")
        if not known:
            diff = ""
            info = f"{path} at {stamp} — the text before the change was not known; the file now:"
            body = text or ""
        else:
            diff = unified_diff(before, text, path)
            info = f"{path} at {stamp}"
            body = diff or "(the file's text did not change)"
        self.agent_label.setText(info)
        set_status_property(self.agent_label, None)
        self.diff_view.setPlainText(body)
        self.diff_view.setVisible(True)
        self.last_agent_diff = diff
        if path == self.open_path and state == "present":
            compare_to = self._conflict_text if self._conflict else self._baseline
            if text != compare_to:
                self._disk_changed(path, text)
        self.sig_agent_changed.emit(path)

    # -- internals --------------------------------------------------------------------------------------
    async def _read(self, path: str) -> tuple[str | None, str, str]:
        """(text or None, state, reason): state is present, missing, refused or error."""
        s = self._session
        if s is None:
            return None, "error", "no session"
        try:
            text, cut = await s.read_document_head(path, EDITOR_MAX_BYTES)
        except FileNotFound:
            return None, "missing", ""
        except BackendRefusal as e:
            return None, "refused", e.reason or str(e)
        except BackendIOError as e:
            return None, "error", str(e)
        if cut:  # never a cut copy in the editor: saving it would destroy the rest of the file
            return None, "error", (f"too large to edit here (over {EDITOR_MAX_BYTES // 1024 // 1024} MB; runs "
                                   "show it cut to max_file_tokens): edit it in a text editor")
        return text, "present", ""

    async def _load_all(self, generation: int) -> None:
        """Read every configured file (tokens on disk, texts for diffs), then open the default one."""
        for path in self._paths:
            text, state, why = await self._read(path)
            if generation != self._generation:
                return
            self._remember_disk(path, text, state, why)
        if self.open_path is None and self._paths:
            # The last configured file that exists (the project's, usually), else the last one (to create it).
            present = [d.path for d in self.model.docs if d.path in self._paths and d.disk_state == "present"]
            await self.open_file(present[-1] if present else self._paths[-1])

    def _apply_verdict(self, allowed: bool, reason: str) -> None:
        """Whether the open file may be saved; if not, the editor is read-only and the panel says why."""
        self._can_save, self._why_not = allowed, reason
        self.editor.setReadOnly(not allowed)
        if allowed:
            self._show_verdict("")
        else:
            self._show_verdict(f"You cannot save this file: {reason}. The agent's permission rules and read-only "
                               "mounts apply to you too (see workbench.yaml).")

    def _remember_disk(self, path: str, text: str | None, state: str, reason: str = "") -> None:
        if state in ("present", "missing"):
            self._known[path] = text
        self.model.set_disk(path, text, state, reason)

    def _disk_changed(self, path: str, text: str | None) -> str:
        """The open file's disk text changed: reload silently, or show the bar if the editor is edited."""
        name = PurePosixPath(path).name or path
        if not self.dirty and not self._conflict:
            self._baseline = text
            self._set_editor_text(text or "", keep_cursor=True)
            self.path_label.setText(path + ("" if text is not None else "  (deleted on disk)"))
            self._message(f"Reloaded {name}: it changed on disk ({time.strftime('%H:%M:%S')}).")
            self._refresh_buttons()
            self.sig_disk_changed.emit("reloaded")
            return "reloaded"
        self._conflict = True
        self._conflict_text = text
        what = "was deleted on disk" if text is None else "changed on disk"
        self.conflict_label.setText(f"{name} {what} — Reload to take that version, or Keep mine to keep your edits.")
        self.conflict_bar.setVisible(True)
        self._message("")
        self._refresh_buttons()
        self.sig_disk_changed.emit("conflict")
        return "conflict"

    def _hide_conflict(self) -> None:
        self._conflict = False
        self._conflict_text = None
        self.conflict_bar.setVisible(False)

    def _set_editor_text(self, text: str, *, keep_cursor: bool = False) -> None:
        if self.editor.toPlainText() == text:
            return
        position = self.editor.textCursor().position()
        scroll = self.editor.verticalScrollBar().value()
        self.editor.setPlainText(text)
        if keep_cursor:
            cursor = self.editor.textCursor()
            cursor.setPosition(min(position, len(text)))
            self.editor.setTextCursor(cursor)
            self.editor.verticalScrollBar().setValue(scroll)

    def _close_editor(self) -> None:
        self.disk_timer.stop()
        self._token_timer.stop()
        self.open_path = None
        self._baseline = None
        self._hide_conflict()
        self._can_save, self._why_not = False, ""
        self.editor.setReadOnly(True)
        self.editor.clear()
        self.path_label.setText("No file open")
        self._show_verdict("")
        self._message("")
        self.token_label.setText("")
        self._refresh_buttons()

    def _select_row(self, path: str) -> None:
        row = self.model.row_of(path)
        if row >= 0 and self.view.currentIndex().row() != row:
            self._selecting = True
            try:
                self.view.setCurrentIndex(self.model.index(row, 0))
            finally:
                self._selecting = False

    _selecting = False

    @Slot()
    def _reselect_open(self) -> None:
        """After the rows were rebuilt, the open file's row is the current one again (never another file)."""
        if self.open_path is not None:
            self._select_row(self.open_path)

    @Slot(QModelIndex, QModelIndex)
    def _on_current_changed(self, current: QModelIndex, _previous: QModelIndex) -> None:
        if self._selecting or not current.isValid():
            return
        doc = self.model.data(self.model.index(current.row(), 0), DocRole)
        if not isinstance(doc, InstructionDoc) or doc.path == self.open_path:
            return
        if self.dirty:
            self._message(f"Save or revert your edits to {self.open_path} before opening another file.", error=True)
            if self.open_path is not None:
                self._select_row(self.open_path)
            return
        self.tasks.run(self.open_file(doc.path))

    @Slot()
    def _on_text_changed(self) -> None:
        if self.open_path is None:
            return
        self._token_timer.start()
        self._refresh_buttons()

    @Slot()
    def _schedule_disk_check(self) -> None:
        """Start a disk check unless one runs, a save runs, or the panel is not on screen (its dock closed)."""
        if (self.open_path is not None and not self._checking and not self._saving and self._session is not None
                and self.isVisible()):
            self.tasks.run(self.check_disk())

    def showEvent(self, event: Any) -> None:  # noqa: N802 - Qt's name
        super().showEvent(event)
        self._schedule_disk_check()  # shown again (its dock reopened): the file may have changed meanwhile

    @Slot(Qt.ApplicationState)
    def _on_application_state(self, state: Qt.ApplicationState) -> None:
        if state == Qt.ApplicationState.ApplicationActive:
            self._schedule_disk_check()

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 - Qt's name
        kind = event.type()
        if kind == QEvent.Type.ActivationChange and self.isActiveWindow():
            self._schedule_disk_check()  # the window regained focus: the file may have changed meanwhile
        elif kind in (QEvent.Type.StyleChange, QEvent.Type.PaletteChange):
            dark = is_dark()
            if dark != self._dark:
                self._dark = dark
                self.highlighter.set_theme(dark)
                self.diff_highlighter.set_theme(dark)
        super().changeEvent(event)

    @Slot()
    def _save_if_enabled(self) -> None:
        if self.save_button.isEnabled():
            self.tasks.run(self.save())

    def _refresh_buttons(self) -> None:
        is_open = self.open_path is not None
        dirty = self.dirty
        self.save_button.setEnabled(is_open and self._can_save and not self._saving and dirty)
        if is_open and not self._can_save and self._why_not:
            self.save_button.setToolTip(f"Cannot save: {self._why_not}")
        else:
            self.save_button.setToolTip("Save the file (Ctrl+S); the agent sees it from the next run")
        self.revert_button.setEnabled(is_open and (dirty or self._conflict))
        if is_open:
            base = self.path_label.text().removesuffix(" •")
            self.path_label.setText(base + (" •" if dirty else ""))

    def _refresh_section(self) -> None:
        used = self.model.section_tokens()
        limits = f"per file ≤ {self.max_file_tokens:,} tokens, the whole section ≤ {self.max_total_tokens:,}"
        if used is None:
            self.section_label.setText(f"Not read by a run yet · {limits}")
        else:
            self.section_label.setText(f"Last run: {used:,} tokens of instructions shown · {limits}")

    def _show_verdict(self, text: str) -> None:
        self.verdict_label.setText(text)
        set_status_property(self.verdict_label, "error" if text else None)
        self.verdict_label.setVisible(bool(text))

    def _message(self, text: str, *, error: bool = False) -> None:
        self.message_label.setText(text)
        set_status_property(self.message_label, "error" if error else None)

    def _show_failure(self, exc: BaseException) -> None:
        self._message(f"Something went wrong: {exc}", error=True)
