"""The Artifacts dock (G2, A1–A3): the thread's artifacts (name, size, type, source) and a viewer.

``ArtifactsModel`` is a thin ``QAbstractTableModel`` over the artifact entries (without their content).
The panel follows the window's contract: ``set_session(session)`` rebuilds the list from
``session.artifacts`` when a thread opens; ``handle_event(event)`` adds or updates a row on each
``artifact_written`` (the event carries no content: the viewer re-reads it from ``session.artifacts``,
which holds it once the step is committed, so a row shown while its step is still running is re-read
at the next ``step_started`` / ``interrupt_raised`` / ``run_finished``).

Save as… runs as a task through ``start`` (the window's ``qt_async.start``; default
``asyncio.ensure_future``), kept by ``PanelTasks`` until it ends; ``tasks.wait_idle()`` waits for it.

The viewer shows text, markdown (rendered), code (highlighted by extension or mime, see
``code_highlighter``) and images by mime type (``image/*``: base64 content → ``QPixmap``). "Save as…"
writes the artifact to disk (binary artifacts decoded from base64); the path comes from
``choose_path(suggested_path, mime)`` (sync or async; default: a ``QFileDialog`` opened with ``open()``
and awaited, never ``exec()``), so tests can inject one.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import inspect
import logging
import mimetypes
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import (
    QEvent,
    QItemSelectionModel,
    QModelIndex,
    QPersistentModelIndex,
    QSortFilterProxyModel,
    Qt,
    Signal,
)
from PySide6.QtGui import QFontDatabase, QPixmap, QResizeEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSplitter,
    QStackedWidget,
    QTableView,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from workbench.ui.answer_links import no_resource
from workbench.ui.budget_panel import is_news, last_seq
from workbench.ui.code_highlighter import CodeHighlighter, language_for
from workbench.ui.markdown_render import set_answer_markdown
from workbench.ui.panel_tasks import PanelTasks, Start
from workbench.ui.plain_text import escape as _html, plain_label, plain_tooltip, rich_label
from workbench.ui.style import safe_is_dark
from workbench.ui.table_model import RowsTableModel

if TYPE_CHECKING:
    from workbench.session import Event
    from workbench.session import Session

log = logging.getLogger(__name__)

__all__ = ["ArtifactsModel", "ArtifactsPanel", "artifact_bytes", "format_size", "view_kind"]

Index = QModelIndex | QPersistentModelIndex
ChoosePath = Callable[[str, str], "str | Path | None | Awaitable[str | Path | None]"]

#: The role returning a row's sort key (sizes sort as numbers).
SortRole = Qt.ItemDataRole.UserRole + 1
#: The role returning a row's artifact name.
NameRole = Qt.ItemDataRole.UserRole + 2

# Events emitted after a checkpoint: committed artifact content can be re-read then.
_COMMITTED = frozenset({"step_started", "interrupt_raised", "run_finished"})

_TEXT_MIMES = {
    "application/xml", "application/yaml", "application/x-yaml", "application/toml", "application/x-toml",
    "application/x-sh", "application/sql", "application/csv", "application/x-ndjson",
}


def format_size(size: int | float) -> str:
    """``812 B``, ``1.2 KB``, ``3.4 MB``."""
    n = float(size or 0)
    if n < 1024:
        return f"{int(n)} B"
    for unit in ("KB", "MB", "GB"):
        n /= 1024
        if n < 1024 or unit == "GB":
            return f"{n:.1f} {unit}"
    return f"{n:.1f} GB"  # pragma: no cover


def view_kind(name: str, mime: str) -> str:
    """How the viewer shows an artifact: ``markdown``, ``image``, ``code``, ``text`` or ``binary``."""
    m = (mime or "").split(";", 1)[0].strip().lower()
    ext = PurePosixPath(name).suffix.lower()
    if m in ("text/markdown", "text/x-markdown") or ext in (".md", ".markdown"):
        return "markdown"
    if m.startswith("image/"):
        return "image"
    if language_for(name, m):
        return "code"
    if m.startswith("text/") or m in _TEXT_MIMES or m.endswith(("+xml", "+yaml")):
        return "text"
    return "binary"


def _is_text_mime(mime: str) -> bool:
    return view_kind("", mime) in ("markdown", "code", "text") or (mime or "").startswith("image/svg")


def artifact_bytes(entry: Mapping[str, Any]) -> bytes:
    """The artifact as bytes on disk: text as UTF-8; binary (base64 by A1) decoded, else as UTF-8."""
    content = str(entry.get("content", ""))
    mime = str(entry.get("mime", "text/plain"))
    if not _is_text_mime(mime) or (mime.startswith("image/svg") and not content.lstrip().startswith("<")):
        try:
            return base64.b64decode("".join(content.split()), validate=True)
        except (binascii.Error, ValueError):
            log.info("artifact of type %s is not base64: saved as text", mime)
    return content.encode("utf-8", "surrogatepass")


def _source_text(source: str) -> str:
    return "agent" if source in ("", "agent") else f"{source} (sub-agent)"


# ----------------------------------------------------------------------------------------------------
# The model


class _ArtifactBrowser(QTextBrowser):
    """The markdown viewer of an artifact: it never reads a resource the text names (an image by path,
    a style sheet) and never navigates away (found by a review of the transcript's answers, G1, F4)."""

    def loadResource(self, kind: int, name: Any) -> Any:  # noqa: N802 - Qt override
        return no_resource(kind)

    def doSetSource(self, name: Any, kind: Any = None) -> None:  # noqa: N802 - Qt override
        """Nothing: the artifact stays shown."""

class ArtifactsModel(RowsTableModel):
    """Rows of ``{"name", "size", "mime", "source", "updated"}`` (never the content), in write order."""

    COLUMNS = ("Name", "Size", "Type", "Source")
    NAME, SIZE, TYPE, SOURCE = range(4)

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self._rows: list[dict[str, Any]] = []

    def set_items(self, items: Mapping[str, Mapping[str, Any]]) -> None:
        """Replace the rows with the session's artifacts (``{name: entry}``), oldest first."""
        rows = [_row(name, e) for name, e in items.items()]
        rows.sort(key=lambda r: (r["updated"], r["name"]))
        self.beginResetModel()
        self._rows = rows
        self.endResetModel()

    def upsert(self, name: str, entry: Mapping[str, Any]) -> int:
        """Add or update one artifact; returns its row."""
        new = _row(name, entry)
        row = self.row_of(name)
        if row is None:
            row = len(self._rows)
            self.beginInsertRows(QModelIndex(), row, row)
            self._rows.append(new)
            self.endInsertRows()
        else:
            self._rows[row] = new
            self.dataChanged.emit(self.index(row, 0), self.index(row, len(self.COLUMNS) - 1))
        return row

    def row_of(self, name: str) -> int | None:
        return next((i for i, r in enumerate(self._rows) if r["name"] == name), None)

    def entry(self, row: int) -> dict[str, Any]:
        return dict(self._rows[row])

    def names(self) -> list[str]:
        return [r["name"] for r in self._rows]

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or not (0 <= index.row() < len(self._rows)):
            return None
        r = self._rows[index.row()]
        col = index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            if col == self.NAME:
                return r["name"]
            if col == self.SIZE:
                return format_size(r["size"])
            if col == self.TYPE:
                return r["mime"]
            if col == self.SOURCE:
                return _source_text(r["source"])
        elif role == SortRole:
            return (r["name"], r["size"], r["mime"], r["source"])[col] if 0 <= col < 4 else None
        elif role == NameRole:
            return r["name"]
        elif role == Qt.ItemDataRole.ToolTipRole:
            if col == self.SIZE:
                return plain_tooltip(f"{int(r['size']):,} bytes")
            if col == self.SOURCE and r["source"] not in ("", "agent"):
                return plain_tooltip(f"Merged from the sub-agent invocation {r['source']}")
            return plain_tooltip(r["name"])
        elif role == Qt.ItemDataRole.TextAlignmentRole and col == self.SIZE:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None


def _row(name: str, e: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "name": str(name),
        "size": int(e.get("size") or 0),
        "mime": str(e.get("mime") or "text/plain"),
        "source": str(e.get("source") or "agent"),
        "updated": float(e.get("updated") or 0.0),
    }


# ----------------------------------------------------------------------------------------------------
# The panel


class ArtifactsPanel(QWidget):
    """The artifact list, a viewer for the selected one, and Save as…"""

    sig_artifact_opened = Signal(str)
    """The viewer now shows this artifact (its name)."""

    sig_artifact_saved = Signal(str, str)
    """An artifact (name) was saved to this path."""

    def __init__(
        self,
        start: Start | None = None,
        parent: QWidget | None = None,
        *,
        choose_path: ChoosePath | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("artifactsPanel")
        self.tasks = PanelTasks(start, on_error=lambda exc: self._note(f"Could not save: {exc}"))
        self._choose_path: ChoosePath = choose_path or self._ask_path
        self._session: Session | None = None
        self._seen_seq = 0
        self.current_name: str | None = None
        self.current_kind: str = ""
        self._stale = False
        self._pixmap: QPixmap | None = None

        self.model = ArtifactsModel(self)
        self.proxy = QSortFilterProxyModel(self)
        self.proxy.setSourceModel(self.model)
        self.proxy.setSortRole(SortRole)
        self.table = QTableView(self)
        self.table.setObjectName("artifactsTable")
        self.table.setAccessibleName("Artifacts")  # G14
        self.table.setAccessibleDescription("The artifacts of this thread; select one to view it below")
        self.table.setModel(self.proxy)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(-1, Qt.SortOrder.AscendingOrder)  # write order until a header is clicked
        self.table.verticalHeader().hide()
        self.table.setAlternatingRowColors(True)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(ArtifactsModel.NAME, QHeaderView.ResizeMode.Stretch)
        self.table.selectionModel().currentRowChanged.connect(self._on_current_changed)

        self.empty_label = plain_label("No artifacts yet. The agent writes them with write_artifact.", self)
        self.empty_label.setProperty("role", "muted")
        self.empty_label.setWordWrap(True)

        # The viewer: a title row, then one page per kind.
        self.title_label = rich_label(self)  # our markup; the name and type escaped
        self.title_label.setObjectName("artifactTitle")
        self.title_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.save_button = QPushButton("Save as…", self)
        self.save_button.setObjectName("artifactSaveAs")
        self.save_button.setEnabled(False)
        self.save_button.clicked.connect(self._on_save_clicked)
        self.note_label = plain_label(self)
        self.note_label.setObjectName("artifactNote")
        self.note_label.setWordWrap(True)
        self.note_label.setProperty("role", "muted")
        self.note_label.hide()

        self.stack = QStackedWidget(self)
        self.placeholder = plain_label("Select an artifact to view it.", self.stack)
        self.placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.placeholder.setProperty("role", "muted")
        self.placeholder.setWordWrap(True)
        self.markdown_view = _ArtifactBrowser(self.stack)
        self.markdown_view.setObjectName("artifactMarkdown")
        self.markdown_view.setAccessibleName("Artifact")
        self.markdown_view.setOpenLinks(False)  # an artifact's links never navigate the viewer away
        self.text_view = QPlainTextEdit(self.stack)
        self.text_view.setObjectName("artifactText")
        self.text_view.setAccessibleName("Artifact")
        self.text_view.setReadOnly(True)
        self.text_view.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.text_view.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.text_view.setProperty("role", "code")
        self.highlighter = CodeHighlighter(self.text_view.document(), None, dark=safe_is_dark())
        self.image_label = plain_label(self.stack)
        self.image_label.setObjectName("artifactImage")
        self.image_label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.image_scroll = QScrollArea(self.stack)
        self.image_scroll.setWidget(self.image_label)
        self.image_scroll.setWidgetResizable(True)
        for page in (self.placeholder, self.markdown_view, self.text_view, self.image_scroll):
            self.stack.addWidget(page)

        viewer = QWidget(self)
        title_row = QHBoxLayout()
        title_row.addWidget(self.title_label, 1)
        title_row.addWidget(self.save_button)
        v = QVBoxLayout(viewer)
        v.setContentsMargins(0, 0, 0, 0)
        v.addLayout(title_row)
        v.addWidget(self.note_label)
        v.addWidget(self.stack, 1)

        top = QWidget(self)
        t = QVBoxLayout(top)
        t.setContentsMargins(0, 0, 0, 0)
        t.addWidget(self.table, 1)
        t.addWidget(self.empty_label)

        self.splitter = QSplitter(Qt.Orientation.Vertical, self)
        self.splitter.addWidget(top)
        self.splitter.addWidget(viewer)
        self.splitter.setStretchFactor(0, 1)
        self.splitter.setStretchFactor(1, 2)
        self.splitter.setChildrenCollapsible(False)
        self.splitter.setSizes([160, 400])  # the viewer gets most of the height

        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.addWidget(self.splitter)
        self._show_placeholder()
        self._update_empty()

    # -- the contract -------------------------------------------------------------------------------------
    def set_session(self, session: Session | None) -> None:
        """Rebuild the list from ``session.artifacts`` (a thread was opened); the viewer starts empty."""
        self._session = session
        self._seen_seq = 0
        items: dict[str, dict[str, Any]] = {}
        if session is not None:
            try:
                self._seen_seq = last_seq(session)
                items = session.artifacts
            except Exception:  # noqa: BLE001 - a damaged store must not take the window down
                log.exception("artifacts panel: could not read the thread's artifacts")
        self.model.set_items(items)
        self.current_name = None
        self._show_placeholder()
        self._update_empty()

    def handle_event(self, event: Event) -> None:
        """``artifact_written`` adds or updates a row; after a commit a stale viewer re-reads its content."""
        if not is_news(event, self._session, self._seen_seq):
            return
        if event.type == "artifact_written":
            data = event.data or {}
            name = str(data.get("name") or "")
            if not name:
                return
            self.model.upsert(name, {**data, "updated": getattr(event, "time", 0.0)})
            self._update_empty()
            if name == self.current_name:
                self.open_artifact(name)
                self._stale = True  # re-read once the step is committed
                self._note("Updating: a newer version is being written by the step in progress.")
            elif self.current_name is None:
                self.select(name)
        elif event.type in _COMMITTED and self._stale and self.current_name:
            self._stale = False
            self.open_artifact(self.current_name)

    # -- selection and viewing ---------------------------------------------------------------------------
    def select(self, name: str) -> bool:
        """Select ``name`` in the list (which opens it in the viewer)."""
        row = self.model.row_of(name)
        if row is None:
            return False
        index = self.proxy.mapFromSource(self.model.index(row, 0))
        self.table.selectionModel().setCurrentIndex(
            index, QItemSelectionModel.SelectionFlag.ClearAndSelect | QItemSelectionModel.SelectionFlag.Rows
        )
        if self.current_name != name:  # the same row was already current: open it anyway
            self.open_artifact(name)
        return True

    def _on_current_changed(self, current: QModelIndex, _previous: QModelIndex) -> None:
        if current.isValid():
            name = current.data(NameRole)
            if name:
                self.open_artifact(str(name))

    def _entry(self, name: str) -> dict[str, Any] | None:
        if self._session is None:
            return None
        try:
            return self._session.artifacts.get(name)
        except Exception:  # noqa: BLE001 - the store is gone (window closing)
            log.debug("artifacts panel: could not read %s", name, exc_info=True)
            return None

    def open_artifact(self, name: str) -> None:
        """Show ``name`` in the viewer, content re-read from ``session.artifacts``."""
        if name != self.current_name:
            self._stale = False
        row = self.model.row_of(name)
        listed = self.model.entry(row) if row is not None else {}
        entry = self._entry(name)
        self.current_name = name
        shown = entry or listed
        mime = str(shown.get("mime") or "text/plain")
        self.title_label.setText(f"<b>{_html(name)}</b> — {_html(mime)}, {format_size(int(shown.get('size') or 0))}")
        self.save_button.setEnabled(entry is not None)
        if entry is None:  # written by the step in flight: its content is committed with the step
            self._stale = True
            self.current_kind = ""
            self._note("")
            self._show_placeholder("Written by the step in progress: it shows here once the step is saved.")
        else:
            if listed and int(entry.get("size") or 0) != int(listed.get("size") or 0):
                self._stale = True  # a newer version is being written
            self._note("Updating: a newer version is being written by the step in progress." if self._stale else "")
            self._show_content(name, str(entry.get("mime") or "text/plain"), str(entry.get("content", "")))
        self.sig_artifact_opened.emit(name)

    def _show_content(self, name: str, mime: str, content: str) -> None:
        kind = view_kind(name, mime)
        self.current_kind = kind
        self._pixmap = None
        if kind == "markdown":
            # G1, F4: an artifact is the agent's text: markdown without raw HTML, images as their alt
            # text, nothing loaded from disk or the network (as the transcript's answers).
            set_answer_markdown(self.markdown_view.document(), content)
            self.stack.setCurrentWidget(self.markdown_view)
        elif kind in ("code", "text"):
            self.highlighter.set_language(language_for(name, mime) if kind == "code" else None)
            self.text_view.setPlainText(content)
            self.stack.setCurrentWidget(self.text_view)
        elif kind == "image":
            pixmap = QPixmap()
            ok = pixmap.loadFromData(artifact_bytes({"content": content, "mime": mime}))
            if not ok or pixmap.isNull():
                self.current_kind = "binary"
                self._show_placeholder(f"This {mime} image cannot be shown here. Use Save as… to open it elsewhere.")
                return
            self._pixmap = pixmap
            self.stack.setCurrentWidget(self.image_scroll)
            self._fit_image()
        else:
            self._show_placeholder(f"Binary content ({mime}): no preview. Use Save as… to write it to disk.")

    def _show_placeholder(self, text: str = "Select an artifact to view it.") -> None:
        self.placeholder.setText(text)
        self.stack.setCurrentWidget(self.placeholder)
        if self.current_name is None:
            self.title_label.setText("")
            self.save_button.setEnabled(False)
            self._note("")

    def _note(self, text: str) -> None:
        self.note_label.setText(text)
        self.note_label.setVisible(bool(text))

    def _update_empty(self) -> None:
        self.empty_label.setVisible(self.model.rowCount() == 0)

    def _fit_image(self) -> None:
        """Show the image at its size, scaled down (never up) to the visible area."""
        if self._pixmap is None:
            return
        area = self.image_scroll.viewport().size()
        pm = self._pixmap
        if area.width() > 16 and area.height() > 16 and (pm.width() > area.width() or pm.height() > area.height()):
            pm = pm.scaled(area, Qt.AspectRatioMode.KeepAspectRatio, Qt.TransformationMode.SmoothTransformation)
        self.image_label.setPixmap(pm)

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 - Qt override
        super().changeEvent(event)
        if event.type() in (QEvent.Type.PaletteChange, QEvent.Type.StyleChange):
            self.highlighter.set_dark(safe_is_dark())

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        self._fit_image()

    @property
    def image_pixmap(self) -> QPixmap | None:
        """The image shown (unscaled), or None."""
        return self._pixmap

    # -- Save as… ------------------------------------------------------------------------------------------
    def _on_save_clicked(self) -> None:
        if self.current_name is None:
            return
        self.tasks.run(self.save_as(self.current_name))

    def suggested_path(self, name: str, mime: str) -> str:
        """Where Save as… starts: the workspace folder and the artifact's base name (with an extension)."""
        base = PurePosixPath(name).name or "artifact"
        if not PurePosixPath(base).suffix:
            ext = mimetypes.guess_extension(mime.split(";", 1)[0].strip()) or ""
            base += ext
        folder = getattr(self._session, "workspace", None) or Path.home()
        return str(Path(folder) / base)

    async def save_as(self, name: str | None = None) -> Path | None:
        """Ask where to save ``name`` (default: the one shown) and write it; returns the path or None."""
        name = name or self.current_name
        if not name:
            return None
        entry = self._entry(name)
        if entry is None:
            self._note(f"'{name}' is not saved in the thread yet: try again when the step is done.")
            return None
        mime = str(entry.get("mime") or "text/plain")
        chosen = self._choose_path(self.suggested_path(name, mime), mime)
        if inspect.isawaitable(chosen):
            chosen = await chosen
        if not chosen:
            return None
        path = Path(chosen)
        try:
            path.write_bytes(artifact_bytes(entry))
        except OSError as e:
            self._note(f"Could not save {name} to {path}: {e.strerror or e}")
            return None
        self._note(f"Saved {name} to {path}")
        self.sig_artifact_saved.emit(name, str(path))
        return path

    async def _ask_path(self, suggested: str, mime: str) -> str | None:
        """The default chooser: a save dialog, ``open()``ed and awaited (no nested event loop)."""
        dialog = QFileDialog(self, "Save artifact as", suggested)
        dialog.setAcceptMode(QFileDialog.AcceptMode.AcceptSave)
        dialog.setFileMode(QFileDialog.FileMode.AnyFile)
        dialog.selectFile(suggested)
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        dialog.finished.connect(lambda code: fut.done() or fut.set_result(int(code)))
        dialog.open()
        try:
            code = await fut
            files = dialog.selectedFiles()
            return files[0] if code == int(QFileDialog.DialogCode.Accepted) and files else None
        except asyncio.CancelledError:
            dialog.reject()
            raise
        finally:
            dialog.deleteLater()
