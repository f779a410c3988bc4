"""The Skills dock (G2, S1–S6): every skill in source order, the skipped ones greyed with their reason.

``SkillsModel`` is a thin ``QAbstractTableModel`` over a list of ``SkillRow`` values. Rows come from
``scan_skills`` over the session's backend and ``skills`` config (the same scan and section bounds the
middleware uses, so the panel shows what the next run will list), and a ``documents_reported`` event
with source ``skills`` updates each path's fate as the run saw it. Opening a skill reads its SKILL.md
through ``Session.read_document`` into a read-only viewer with markdown highlighting. Reload scans
again; the skills section is read on a run's first model call and kept for the run (S2), so the panel
says the change applies from the next run.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QEvent, QModelIndex, QPersistentModelIndex, Qt, Signal, Slot
from PySide6.QtGui import QColor, QFont, QFontDatabase
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QTreeView,
    QVBoxLayout,
    QWidget,
)

from workbench.backends.base import is_under
from workbench.errors import BackendIOError, BackendRefusal, FileNotFound
from workbench.ui.markdown_highlighter import MarkdownHighlighter
from workbench.ui.panel_tasks import PanelTasks, Start
from workbench.ui.plain_text import plain_label, plain_tooltip
from workbench.ui.style import is_dark, status_color
from workbench.ui.table_model import RowsTableModel

if TYPE_CHECKING:
    from workbench.session import Event
    from workbench.session import SkillScan
    from workbench.session import Session

log = logging.getLogger(__name__)

Index = QModelIndex | QPersistentModelIndex

__all__ = ["SkillRow", "SkillsModel", "SkillsPanel", "rows_from_scan", "NEXT_RUN_NOTE"]

COLUMNS = ("Name", "Status", "Source", "Description")
NAME, STATUS, SOURCE, DESCRIPTION = range(len(COLUMNS))
#: How many skipped skills the reasons line names before "and N more".
MAX_REASONS_SHOWN = 6
#: The most of a SKILL.md the viewer reads and shows (F3); the title says when the file is larger.
VIEWER_MAX_BYTES = 1024 * 1024
RowRole = Qt.ItemDataRole.UserRole + 1
"""The ``SkillRow`` behind a row."""

NEXT_RUN_NOTE = "Changes apply from the next run"
FATE_LABELS = {
    "listed": "listed",
    "shadowed": "shadowed",
    "malformed": "malformed",
    "unlisted": "unlisted",
    "unreadable": "unreadable",
    "refused": "refused",
}


@dataclass(frozen=True)
class SkillRow:
    """One skill (or a skipped folder/source) as the panel shows it."""

    name: str
    description: str
    source: str
    path: str
    fate: str = "listed"
    reason: str = ""
    allowed_tools: tuple[str, ...] = ()

    @property
    def listed(self) -> bool:
        return self.fate == "listed"

    @property
    def openable(self) -> bool:
        """A row naming a SKILL.md (not a whole source) can be opened."""
        return self.path.endswith("/SKILL.md")

    @property
    def status_text(self) -> str:
        label = FATE_LABELS.get(self.fate, self.fate)
        return label if self.listed or not self.reason else f"{label} — {self.reason}"


def _source_of(path: str, sources: Sequence[str]) -> str:
    """The source a path is under (the deepest match), else its grandparent folder."""
    best = ""
    for s in sources:
        if is_under(path, s.rstrip("/") or "/") and len(s) > len(best):
            best = s
    if best:
        return best
    parts = path.rstrip("/").rsplit("/", 2)
    return parts[0] if len(parts) == 3 and path.endswith("/SKILL.md") else path


def _folder_name(path: str) -> str:
    """``/src/name/SKILL.md`` -> ``name``; a source path -> its last part."""
    parts = [p for p in path.split("/") if p]
    if path.endswith("/SKILL.md") and len(parts) >= 2:
        return parts[-2]
    return parts[-1] if parts else path


def _order_key(row: SkillRow, sources: Sequence[str]) -> tuple[int, int, str]:
    try:
        src = list(sources).index(row.source)
    except ValueError:
        src = len(sources)
    # A source-level row (refused source, folders not examined) sorts after that source's skills.
    return (src, 1 if row.path == row.source else 0, row.path)


def rows_from_scan(
    scan: SkillScan,
    sources: Sequence[str],
    unlisted: Iterable[Any] = (),
    descriptions: Mapping[str, str] | None = None,
) -> list[SkillRow]:
    """Rows for every skill the scan saw, listed or skipped, in source order (then path order).

    ``unlisted``: ``SkippedSkill``s the section had no room for (``render_skills``);
    ``descriptions``: path -> description for skipped skills whose frontmatter was read separately.
    """
    descriptions = descriptions or {}
    left = {u.path: u for u in unlisted}
    rows: list[SkillRow] = []
    for s in scan.skills:
        u = left.get(s.path)
        rows.append(SkillRow(s.name, s.description, s.source, s.path, u.fate if u else "listed",
                             u.reason if u else "", tuple(s.allowed_tools)))
    for k in scan.skipped:
        rows.append(SkillRow(k.name or _folder_name(k.path), descriptions.get(k.path, ""), _source_of(k.path, sources),
                             k.path, k.fate, k.reason))
    rows.sort(key=lambda r: _order_key(r, sources))
    return rows


class SkillsModel(RowsTableModel):
    """Rows are skills: name, description, source and status; skipped rows greyed."""

    COLUMNS = COLUMNS

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._rows: list[SkillRow] = []

    @property
    def rows(self) -> list[SkillRow]:
        return list(self._rows)

    def set_rows(self, rows: Iterable[SkillRow]) -> None:
        self.beginResetModel()
        self._rows = list(rows)
        self.endResetModel()

    def row_at(self, row: int) -> SkillRow | None:
        return self._rows[row] if 0 <= row < len(self._rows) else None

    def row_of(self, path: str) -> int:
        return next((i for i, r in enumerate(self._rows) if r.path == path), -1)

    def apply_report(self, documents: Iterable[Mapping[str, Any]], sources: Sequence[str]) -> None:
        """Take each path's fate from a ``documents_reported`` (skills) event; unknown paths are added."""
        rows = list(self._rows)
        index = {r.path: i for i, r in enumerate(rows)}
        for d in documents:
            path = str(d.get("path") or "")
            if not path:
                continue
            fate = str(d.get("fate") or "listed")
            reason = str(d.get("reason") or "")
            name = str(d.get("name") or "") or _folder_name(path)
            if path in index:
                rows[index[path]] = replace(rows[index[path]], fate=fate, reason=reason)
            else:
                index[path] = len(rows)
                rows.append(SkillRow(name, "", _source_of(path, sources), path, fate, reason))
        rows.sort(key=lambda r: _order_key(r, sources))
        self.set_rows(rows)

    # -- Qt model API ---------------------------------------------------------------------------------
    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or index.parent().isValid():
            return None
        r = self.row_at(index.row())
        if r is None:
            return None
        col = index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            if col == NAME:
                return r.name
            if col == DESCRIPTION:
                return r.description or ("" if r.listed else "—")
            if col == SOURCE:
                return r.source
            if col == STATUS:
                return FATE_LABELS.get(r.fate, r.fate)
            return None
        if role == Qt.ItemDataRole.ToolTipRole:
            lines = [f"{r.name} ({r.path})"]
            if r.description:
                lines.append(r.description)
            if r.allowed_tools:
                lines.append("allowed-tools: " + ", ".join(r.allowed_tools))
            lines.append(f"Status: {r.status_text}")
            return plain_tooltip("\n".join(lines))  # a skill's name and description are a file's words
        if role == Qt.ItemDataRole.ForegroundRole:
            if r.listed:
                return None
            if col == STATUS and r.fate in ("malformed", "unreadable", "refused"):
                return QColor(status_color("denied", is_dark()))
            return QColor(status_color("aborted", is_dark()))
        if role == Qt.ItemDataRole.FontRole and not r.listed and col in (NAME, DESCRIPTION):
            font = QFont()
            font.setItalic(True)
            return font
        if role == RowRole:
            return r
        return None

    def flags(self, index: Index) -> Qt.ItemFlag:
        if not index.isValid():
            return Qt.ItemFlag.NoItemFlags
        return Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable | Qt.ItemFlag.ItemNeverHasChildren


class SkillsPanel(QWidget):
    """Skills in source order; Open shows a SKILL.md; Reload scans the sources again."""

    sig_skill_opened = Signal(str)
    """A SKILL.md was shown in the viewer (its virtual path)."""

    sig_skills_reloaded = Signal(int)
    """A scan finished (the number of rows)."""

    def __init__(self, start: Start | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("skillsPanel")
        self.tasks = PanelTasks(start, self._show_failure)
        self._session: Session | None = None
        self._generation = 0
        self.opened_path: str | None = None

        self.model = SkillsModel(self)

        self.open_button = QPushButton("Open", self)
        self.open_button.setObjectName("skillsOpen")
        self.open_button.setToolTip("Show the selected skill's SKILL.md")
        self.open_button.setEnabled(False)
        self.open_button.clicked.connect(self._open_selected)
        self.reload_button = QPushButton("Reload", self)
        self.reload_button.setObjectName("skillsReload")
        self.reload_button.setToolTip("Read the skill sources again (the agent sees the change from its next run)")
        self.reload_button.clicked.connect(lambda: self.tasks.run(self.reload()))
        self.count_label = plain_label(self)
        self.count_label.setProperty("role", "muted")

        self.note_label = plain_label(self)
        self.note_label.setObjectName("skillsNote")
        self.note_label.setProperty("role", "muted")
        self.note_label.setWordWrap(True)
        self.note_label.setVisible(False)

        self.view = QTreeView(self)
        self.view.setObjectName("skillsView")
        self.view.setAccessibleName("Skills")  # G14
        self.view.setModel(self.model)
        self.view.setRootIsDecorated(False)
        self.view.setUniformRowHeights(True)
        self.view.setAlternatingRowColors(True)
        self.view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.view.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.view.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.view.setTextElideMode(Qt.TextElideMode.ElideRight)
        header = self.view.header()
        header.setStretchLastSection(True)
        for col in (NAME, STATUS, SOURCE):
            header.setSectionResizeMode(col, QHeaderView.ResizeMode.ResizeToContents)

        self.reasons_label = plain_label(self)
        self.reasons_label.setObjectName("skillsReasons")
        self.reasons_label.setWordWrap(True)
        self.reasons_label.setProperty("role", "muted")
        self.reasons_label.setVisible(False)
        self.view.doubleClicked.connect(self._on_double_clicked)
        self.view.selectionModel().selectionChanged.connect(self._on_selection)

        self.viewer_title = plain_label("Select a skill and press Open (or double-click it) to read its SKILL.md.", self)
        self.viewer_title.setObjectName("skillsViewerTitle")
        self.viewer_title.setProperty("role", "muted")
        self.viewer_title.setWordWrap(True)
        self.viewer = QPlainTextEdit(self)
        self.viewer.setObjectName("skillsViewer")
        self.viewer.setAccessibleName("SKILL.md")
        self.viewer.setReadOnly(True)
        self.viewer.setProperty("role", "code")
        self.viewer.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.viewer.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        self.highlighter = MarkdownHighlighter(self.viewer.document())
        self._dark = is_dark()

        buttons = QHBoxLayout()
        buttons.setContentsMargins(0, 0, 0, 0)
        buttons.addWidget(self.open_button)
        buttons.addWidget(self.reload_button)
        buttons.addStretch(1)
        buttons.addWidget(self.count_label)

        lower = QWidget(self)
        lower_layout = QVBoxLayout(lower)
        lower_layout.setContentsMargins(0, 0, 0, 0)
        lower_layout.setSpacing(2)
        lower_layout.addWidget(self.viewer_title)
        lower_layout.addWidget(self.viewer)

        upper = QWidget(self)
        upper_layout = QVBoxLayout(upper)
        upper_layout.setContentsMargins(0, 0, 0, 0)
        upper_layout.setSpacing(2)
        upper_layout.addWidget(self.view, 1)
        upper_layout.addWidget(self.reasons_label)

        self.splitter = QSplitter(Qt.Orientation.Vertical, self)
        self.splitter.addWidget(upper)
        self.splitter.addWidget(lower)
        self.splitter.setStretchFactor(0, 1)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setChildrenCollapsible(False)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.setSpacing(4)
        layout.addLayout(buttons)
        layout.addWidget(self.note_label)
        layout.addWidget(self.splitter, 1)

        self.model.modelReset.connect(self._refresh_count)
        self._refresh_count()

    # -- the contract -----------------------------------------------------------------------------------
    @property
    def session(self) -> Session | None:
        return self._session

    @property
    def sources(self) -> tuple[str, ...]:
        s = self._session
        return tuple(s.config.skills.sources) if s is not None else ()

    def set_session(self, session: Session | None) -> None:
        """Show ``session``'s skills: the newest report at once, then a scan of its sources.

        The same session again (another thread of the workspace) keeps the open SKILL.md.
        """
        same_workspace = session is not None and session is self._session
        self._session = session
        self._generation += 1
        self.note_label.setVisible(False)
        if not same_workspace:
            self._clear_viewer()
        self.model.set_rows([])
        if session is None:
            return
        latest = None
        for e in session.store.events(session.thread_id, types={"documents_reported"}):
            if e.data.get("source") == "skills":
                latest = e
        if latest is not None:
            self.model.apply_report(latest.data.get("documents") or [], self.sources)
        self.tasks.run(self.reload(note=False))

    def handle_event(self, event: Event) -> None:
        """Render one engine event: a skills ``documents_reported`` updates the fates."""
        try:
            s = self._session
            if s is not None and event.thread_id != s.thread_id:
                return
            if event.type == "documents_reported" and event.data.get("source") == "skills":
                self.model.apply_report(event.data.get("documents") or [], self.sources)
        except Exception:  # noqa: BLE001 - a bad payload must not break the bridge
            log.exception("skills panel could not handle %s", event.type)

    # -- actions ----------------------------------------------------------------------------------------
    async def reload(self, *, note: bool = True) -> list[SkillRow]:
        """Scan the sources again (S1, S3, S4, S6) and show every skill; ``note`` says it applies next run."""
        s = self._session
        if s is None:
            return []
        generation = self._generation
        cfg = s.config.skills
        self.reload_button.setEnabled(False)
        try:
            survey = await s.survey_skills()
            scan, unlisted, descriptions = survey.scan, survey.unlisted, survey.shadowed_descriptions
        except (BackendIOError, BackendRefusal) as e:
            if generation == self._generation:
                self._note(f"Could not read the skill sources: {e}", error=True)
            return self.model.rows
        finally:
            if generation == self._generation:
                self.reload_button.setEnabled(True)
        if generation != self._generation:
            return []
        rows = rows_from_scan(scan, cfg.sources, unlisted, descriptions)
        selected = self.selected_row()
        self.model.set_rows(rows)
        if selected is not None:
            self.select_path(selected.path)
        if note:
            listed = sum(1 for r in rows if r.listed)
            self._note(f"Reloaded at {time.strftime('%H:%M:%S')}: {listed} listed, {len(rows) - listed} skipped. "
                       f"{NEXT_RUN_NOTE}.")
        self.sig_skills_reloaded.emit(len(rows))
        return rows

    async def open_skill(self, path: str) -> str | None:
        """Show ``path`` (a SKILL.md) in the viewer, read through the session; None if it could not be read."""
        s = self._session
        if s is None:
            return None
        generation = self._generation
        cut = False
        try:
            text, cut = await s.read_document_head(path, VIEWER_MAX_BYTES)
        except FileNotFound:
            problem = f"{path} no longer exists. Reload to scan the sources again."
        except (BackendRefusal, BackendIOError) as e:
            problem = f"Could not read {path}: {e}"
        else:
            problem = ""
        if generation != self._generation:
            return None
        if problem:
            self.viewer_title.setText(problem)
            self.viewer.clear()
            self.opened_path = None
            return None
        row = self.model.row_at(self.model.row_of(path))
        title = f"{path}"
        if row is not None and not row.listed:
            title += f"  ({row.status_text})"
        if cut:
            title += f"  (only its first {VIEWER_MAX_BYTES // 1024 // 1024} MB shown: the file is larger)"
        self.viewer_title.setText(title)
        self.viewer.setPlainText(text)
        self.opened_path = path
        self.sig_skill_opened.emit(path)
        return text

    # -- selection ----------------------------------------------------------------------------------------
    def selected_row(self) -> SkillRow | None:
        indexes = self.view.selectionModel().selectedRows()
        return self.model.row_at(indexes[0].row()) if indexes else None

    def select_path(self, path: str) -> bool:
        row = self.model.row_of(path)
        if row < 0:
            return False
        self.view.setCurrentIndex(self.model.index(row, 0))
        return True

    @Slot()
    def _on_selection(self) -> None:
        row = self.selected_row()
        self.open_button.setEnabled(row is not None and row.openable)

    @Slot(QModelIndex)
    def _on_double_clicked(self, index: QModelIndex) -> None:
        row = self.model.row_at(index.row())
        if row is not None and row.openable:
            self.tasks.run(self.open_skill(row.path))

    @Slot()
    def _open_selected(self) -> None:
        row = self.selected_row()
        if row is not None and row.openable:
            self.tasks.run(self.open_skill(row.path))

    # -- rendering ----------------------------------------------------------------------------------------
    def _clear_viewer(self) -> None:
        self.viewer.clear()
        self.opened_path = None
        self.viewer_title.setText("Select a skill and press Open (or double-click it) to read its SKILL.md.")

    def _note(self, text: str, *, error: bool = False) -> None:
        self.note_label.setText(text)
        self.note_label.setProperty("status", "error" if error else "")
        self.note_label.style().unpolish(self.note_label)
        self.note_label.style().polish(self.note_label)
        self.note_label.setVisible(True)

    @Slot()
    def _refresh_count(self) -> None:
        rows = self.model.rows
        listed = sum(1 for r in rows if r.listed)
        skipped = len(rows) - listed
        if not rows:
            self.count_label.setText("No skills")
        else:
            self.count_label.setText(f"{listed} listed" + (f", {skipped} skipped" if skipped else ""))
        skipped_rows = [r for r in rows if not r.listed]
        lines = [f"{r.name} ({r.source}): {r.status_text}" for r in skipped_rows[:MAX_REASONS_SHOWN]]
        if len(skipped_rows) > MAX_REASONS_SHOWN:
            lines.append(f"… and {len(skipped_rows) - MAX_REASONS_SHOWN} more (hover a row for its reason)")
        self.reasons_label.setText("Skipped:\n" + "\n".join(lines) if lines else "")
        self.reasons_label.setVisible(bool(lines))
        self._on_selection()

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 - Qt's name
        if event.type() in (QEvent.Type.StyleChange, QEvent.Type.PaletteChange) and is_dark() != self._dark:
            self._dark = is_dark()
            self.highlighter.set_theme(self._dark)
        super().changeEvent(event)

    def _show_failure(self, exc: BaseException) -> None:
        self._note(f"Something went wrong: {exc}", error=True)
