"""The Instructions dock (G2, I1–I5): the AGENTS.md files in order with their fate, and an editor.

Three parts, top to bottom:

- The file list: ``DocumentsModel`` (``instructions_model.py``) over the configured ``memory.paths``,
  with each file's fate in the last run and its tokens.
- The editor (``instructions_editor.py``): the selected file edited in place, saved through the
  agent's backend and rules, with a live token count and a bar when the file changes on disk.
- The agent's last change: when the agent changes one of the files (``edit_file`` / ``write_file``:
  the live ``tool_call_started`` names the path, the ``tool_call_finished`` with status ok says it
  happened), the panel reads it again and shows the change as a unified diff under "Last change by
  the agent".
"""

from __future__ import annotations

import difflib
import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QEvent, QModelIndex, Qt, Signal, Slot
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QPlainTextEdit,
    QSplitter,
    QTreeView,
    QVBoxLayout,
    QWidget,
)

from workbench.backends.base import normalize
from workbench.errors import BackendRefusal
from workbench.ui.instructions_editor import InstructionsEditor, read_instruction_file
from workbench.ui.instructions_model import FATE, FILE, TOKENS, DocRole, DocumentsModel, InstructionDoc
from workbench.ui.markdown_highlighter import DiffHighlighter
from workbench.ui.panel_tasks import PanelTasks, Start
from workbench.ui.plain_text import plain_label
from workbench.ui.style import is_dark, set_status_property

if TYPE_CHECKING:
    from workbench.session import Event
    from workbench.session import Session

log = logging.getLogger(__name__)

__all__ = ["InstructionsPanel", "unified_diff"]

AGENT_WRITE_TOOLS = frozenset({"edit_file", "write_file"})


def unified_diff(before: str | None, after: str | None, path: str) -> str:
    """A unified diff of a file's text (None: the file did not exist)."""
    a = (before or "").splitlines(keepends=True)
    b = (after or "").splitlines(keepends=True)
    lines = difflib.unified_diff(a, b, fromfile=f"{path} (before)" if before is not None else "/dev/null",
                                 tofile=f"{path} (after)" if after is not None else "/dev/null")
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def _canonical(path: Any) -> str | None:
    if not isinstance(path, str):
        return None
    try:
        return normalize(path)
    except BackendRefusal:
        return None


class InstructionsPanel(QWidget):
    """The AGENTS.md files with their fate and tokens, an in-place editor, and the agent's last change."""

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
        self.section_label = plain_label(self)
        self.section_label.setObjectName("instructionsSection")
        self.section_label.setProperty("role", "muted")
        self.section_label.setWordWrap(True)

        # -- the editor (made here, between the list and the diff, so Tab reaches it in that order) ---------
        self.editor = InstructionsEditor(self.tasks, self)
        self.editor.sig_file_read.connect(self._remember_disk)
        self.editor.sig_file_opened.connect(self._select_row)

        # -- the agent's last change ----------------------------------------------------------------------
        self.agent_title = plain_label("Last change by the agent", self)
        self.agent_title.setObjectName("instructionsAgentTitle")
        self.agent_title.setFont(self.editor.path_label.font())
        self.agent_label = plain_label("None in this session yet: when the agent edits one of these files, the diff shows here.", self)
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

        bottom = QWidget(self)
        bottom_layout = QVBoxLayout(bottom)
        bottom_layout.setContentsMargins(0, 0, 0, 0)
        bottom_layout.setSpacing(2)
        bottom_layout.addWidget(self.agent_title)
        bottom_layout.addWidget(self.agent_label)
        bottom_layout.addWidget(self.diff_view, 1)

        self.splitter = QSplitter(Qt.Orientation.Vertical, self)
        self.splitter.addWidget(top)
        self.splitter.addWidget(self.editor)
        self.splitter.addWidget(bottom)
        self.splitter.setStretchFactor(0, 1)
        self.splitter.setStretchFactor(1, 3)
        self.splitter.setStretchFactor(2, 2)
        self.splitter.setChildrenCollapsible(False)
        self.splitter.setSizes([110, 420, 200])

        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.addWidget(self.splitter)

        self._refresh_section()

    # -- the contract -----------------------------------------------------------------------------------
    @property
    def session(self) -> Session | None:
        return self._session

    def set_session(self, session: Session | None) -> None:
        """Show ``session``'s instruction files: config order, the newest report, then the disk.

        The same session again (another thread of the workspace) keeps the editor and its unsaved
        edits: the files belong to the workspace, only the last run's fates belong to the thread. A new
        session of the same workspace (``workbench.yaml`` reloaded, Settings applied, G9) reads the list
        again but the editor keeps its open file and unsaved edits (``InstructionsEditor.set_session``).
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
        self.editor.set_session(session)
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
            if path and call_id and (path in self._paths or path == self.editor.open_path):
                self._agent_calls[call_id] = (path, self._known.get(path), path in self._known)
        elif t == "tool_call_finished":
            entry = self._agent_calls.pop(str(d.get("call_id") or ""), None)
            if entry is not None and d.get("status") == "ok":
                self.tasks.run(self._agent_changed(*entry))
        elif t == "run_finished" and s is not None:
            self.editor.refresh_verdict()  # the run may have changed the rules (a rule added for the session)

    async def _agent_changed(self, path: str, before: str | None, known: bool) -> None:
        generation = self._generation
        text, state, why = await read_instruction_file(self._session, path)
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
        if state == "present":
            self.editor.follow_disk(path, text)
        self.sig_agent_changed.emit(path)

    # -- internals --------------------------------------------------------------------------------------
    async def _load_all(self, generation: int) -> None:
        """Read every configured file (tokens on disk, texts for diffs), then open the default one."""
        for path in self._paths:
            text, state, why = await read_instruction_file(self._session, path)
            if generation != self._generation:
                return
            self._remember_disk(path, text, state, why)
        if self.editor.open_path is None and self._paths:
            # The last configured file that exists (the project's, usually), else the last one (to create it).
            present = [d.path for d in self.model.docs if d.path in self._paths and d.disk_state == "present"]
            await self.editor.open_file(present[-1] if present else self._paths[-1])

    @Slot(str, object, str, str)
    def _remember_disk(self, path: str, text: str | None, state: str, reason: str) -> None:
        if state in ("present", "missing"):
            self._known[path] = text
        self.model.set_disk(path, text, state, reason)

    @Slot(str)
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
        if self.editor.open_path is not None:
            self._select_row(self.editor.open_path)

    @Slot(QModelIndex, QModelIndex)
    def _on_current_changed(self, current: QModelIndex, _previous: QModelIndex) -> None:
        if self._selecting or not current.isValid():
            return
        doc = self.model.data(self.model.index(current.row(), 0), DocRole)
        open_path = self.editor.open_path
        if not isinstance(doc, InstructionDoc) or doc.path == open_path:
            return
        if self.editor.dirty:
            self.editor.show_message(f"Save or revert your edits to {open_path} before opening another file.",
                                     error=True)
            if open_path is not None:
                self._select_row(open_path)
            return
        self.tasks.run(self.editor.open_file(doc.path))

    def showEvent(self, event: Any) -> None:  # noqa: N802 - Qt's name
        super().showEvent(event)
        self.editor.schedule_disk_check()  # shown again (its dock reopened): the file may have changed meanwhile

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 - Qt's name
        kind = event.type()
        if kind == QEvent.Type.ActivationChange and self.isActiveWindow():
            self.editor.schedule_disk_check()  # the window regained focus: the file may have changed meanwhile
        elif kind in (QEvent.Type.StyleChange, QEvent.Type.PaletteChange):
            dark = is_dark()
            if dark != self._dark:
                self._dark = dark
                self.editor.highlighter.set_theme(dark)
                self.diff_highlighter.set_theme(dark)
        super().changeEvent(event)

    def _refresh_section(self) -> None:
        used = self.model.section_tokens()
        limits = f"per file ≤ {self.max_file_tokens:,} tokens, the whole section ≤ {self.max_total_tokens:,}"
        if used is None:
            self.section_label.setText(f"Not read by a run yet · {limits}")
        else:
            self.section_label.setText(f"Last run: {used:,} tokens of instructions shown · {limits}")

    def _show_failure(self, exc: BaseException) -> None:
        self.editor.show_message(f"Something went wrong: {exc}", error=True)
