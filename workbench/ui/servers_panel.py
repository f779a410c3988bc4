"""The Servers dock (X5, G2): the workspace's MCP tool servers, why one will not start, and what to do.

At the top, one row per server of workbench.yaml (``Session.mcp_servers()``): its name over the command
line or URL; its status in words with a glyph (◐ starting, ✓ ready, ✗ failed, ○ stopped — never colour
alone, G14) over its pid or when it restarts; how many of its tools are offered. Under the table, the
selected server's:

- **last error** in plain words (the command not found and the PATH searched, the startup timeout and
  its last output, a variable not set, a crash and its exit code), or why it does not start (disabled
  in workbench.yaml, the workspace not trusted);
- **Check** (start it if it is not up, list its tools afresh: the "doctor") and **Restart**, run as
  tasks (the window never waits on a server);
- **Tools**: each with a switch (a check box: off = not offered to the model from its next step, kept
  for the workspace) and whether it runs unasked (read-only) or asks;
- **Log**: the tail of the server's stderr and what the workbench noticed (lines on stdout that were not
  JSON-RPC, starts, exits).

It follows the live ``mcp_server_status`` events the bridge forwards (``handle_event``) and reads the
session's snapshot on one — no polling; a burst of events is one re-read.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QFontDatabase
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QPlainTextEdit,
    QSplitter,
    QTableView,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from workbench.errors import WorkbenchError
from workbench.ui import qt_async
from workbench.ui.buttons import quiet_button
from workbench.ui.plain_text import plain_label, plain_tooltip
from workbench.ui.style import is_dark, status_color
from workbench.ui.table_model import RowsTableModel, two_line_table

if TYPE_CHECKING:
    from workbench.session import McpServerInfo, McpToolInfo, Session

log = logging.getLogger(__name__)

Index = QModelIndex | QPersistentModelIndex

GLYPHS = {"starting": "◐", "ready": "✓", "failed": "✗", "stopped": "○"}
STATUS_HELP = {
    "starting": "starting: the server is being launched and asked for its tools",
    "ready": "ready: its tools are offered to the agent",
    "failed": "failed: see the last error and the log; it is tried again after a pause unless it gave up",
    "stopped": "stopped: not started in this session (a run starts it, or Check)",
}
_STYLE_CLASS = {"starting": "running", "ready": "ok", "failed": "error", "stopped": "aborted"}

NameRole = Qt.ItemDataRole.UserRole + 1
"""The server (or tool) name behind a row."""


def status_text(status: str) -> str:
    """``✓ ready``: the glyph and the word (G14)."""
    return f"{GLYPHS.get(status, '·')} {status or 'unknown'}"


def status_detail(info: McpServerInfo, now: float | None = None) -> str:
    """The status cell's second line: the pid, when it restarts, or why it does not start."""
    if info.note:
        return "not trusted" if "not trusted" in info.note else "disabled"
    if info.status == "failed" and info.retry_at is not None:
        left = max(0, round(info.retry_at - (time.time() if now is None else now)))
        return f"retry in {left} s"
    if info.status == "failed":
        return "gave up" if info.error and "gave up" in info.error else "not running"
    if info.pid is not None:
        return f"pid {info.pid}"
    return info.transport


class ServersModel(RowsTableModel):
    """Rows are ``McpServerInfo`` snapshots, in workbench.yaml's order."""

    COLUMNS = ("Server", "Status", "Tools")
    SERVER, STATUS, TOOLS = range(3)

    def set_rows(self, rows: Iterable[McpServerInfo]) -> None:
        new = list(rows)
        if [r.name for r in new] == [r.name for r in self._rows]:
            old, self._rows = self._rows, new
            for i, (a, b) in enumerate(zip(old, new)):
                if a != b:
                    self.dataChanged.emit(self.index(i, 0), self.index(i, len(self.COLUMNS) - 1))
            return
        self.beginResetModel()
        self._rows = new
        self.endResetModel()

    @property
    def rows(self) -> list[McpServerInfo]:
        return list(self._rows)

    def row_of(self, name: str) -> int:
        return next((i for i, r in enumerate(self._rows) if r.name == name), -1)

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        info: McpServerInfo | None = self.row_at(index)
        if info is None:
            return None
        col = index.column()
        if role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.AccessibleTextRole):
            display = role == Qt.ItemDataRole.DisplayRole
            if col == self.SERVER:
                return f"{info.name}\n{info.target}" if display else f"{info.name}: {info.target}"
            if col == self.STATUS:
                return (f"{status_text(info.status)}\n{status_detail(info)}" if display
                        else f"{info.status}, {status_detail(info)}")
            if col == self.TOOLS:
                if not info.tools:
                    return "—"
                on = len(info.offered)
                return f"{on} of {len(info.tools)}\noffered" if display else f"{on} of {len(info.tools)} tools offered"
            return None
        if role == Qt.ItemDataRole.ToolTipRole:
            if col == self.STATUS:
                return plain_tooltip(STATUS_HELP.get(info.status, info.status) + (f"\n{info.error}" if info.error else ""))
            return plain_tooltip(f"{info.name} ({info.transport}): {info.target}")
        if role == Qt.ItemDataRole.ForegroundRole and col == self.STATUS:
            return QColor(status_color(_STYLE_CLASS.get(info.status, "aborted"), is_dark()))
        if role == NameRole:
            return info.name
        return None

    def flags(self, index: Index) -> Qt.ItemFlag:
        if not index.isValid():
            return Qt.ItemFlag.NoItemFlags
        return Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable | Qt.ItemFlag.ItemNeverHasChildren


class ToolsModel(RowsTableModel):
    """One server's tools; the first column is the switch (a check box: on = offered)."""

    COLUMNS = ("Tool", "Runs")
    TOOL, RUNS = range(2)

    sig_toggled = Signal(str, bool)
    """A tool's switch was flipped: (the server's name for the tool, on)."""

    def set_rows(self, rows: Iterable[McpToolInfo]) -> None:
        new = list(rows)
        if [(r.name, r.enabled, r.problem) for r in new] == [(r.name, r.enabled, r.problem) for r in self._rows]:
            self._rows = new
            return
        self.beginResetModel()
        self._rows = new
        self.endResetModel()

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        tool: McpToolInfo | None = self.row_at(index)
        if tool is None:
            return None
        col = index.column()
        if role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.AccessibleTextRole):
            if col == self.TOOL:
                return tool.name if role == Qt.ItemDataRole.DisplayRole else (
                    f"{tool.name}, {'on' if tool.enabled else 'off'}")
            if col == self.RUNS:
                if tool.problem:
                    return "not offered"
                return "unasked (read-only)" if tool.read_only else "asks"
            return None
        if role == Qt.ItemDataRole.CheckStateRole and col == self.TOOL:
            return Qt.CheckState.Checked if tool.enabled else Qt.CheckState.Unchecked
        if role == Qt.ItemDataRole.ToolTipRole:
            lines = [f"{tool.name} — the server's {tool.tool!r}", tool.description]
            if tool.problem:
                lines.append(f"Not offered: {tool.problem}")
            elif col == self.RUNS:
                lines.append("Annotated read-only by the server: runs without asking under the default `ask`"
                             if tool.read_only else "Asks you before it runs (unless a rule allows it)")
            return plain_tooltip("\n".join(x for x in lines if x))  # the server's tool names and descriptions
        if role == NameRole:
            return tool.tool
        return None

    def flags(self, index: Index) -> Qt.ItemFlag:
        if not index.isValid():
            return Qt.ItemFlag.NoItemFlags
        base = Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable | Qt.ItemFlag.ItemNeverHasChildren
        if index.column() == self.TOOL:
            base |= Qt.ItemFlag.ItemIsUserCheckable
        return base

    def setData(self, index: Index, value: Any, role: int = Qt.ItemDataRole.EditRole) -> bool:  # noqa: N802
        tool: McpToolInfo | None = self.row_at(index)
        if tool is None or role != Qt.ItemDataRole.CheckStateRole or index.column() != self.TOOL:
            return False
        on = Qt.CheckState(value) == Qt.CheckState.Checked if not isinstance(value, bool) else value
        from dataclasses import replace

        self._rows[index.row()] = replace(tool, enabled=on)
        self.dataChanged.emit(index, index.siblingAtColumn(len(self.COLUMNS) - 1))
        self.sig_toggled.emit(tool.tool, on)
        return True


class ServersPanel(QWidget):
    """The Servers dock (see the module)."""

    sig_counts_changed = Signal(int, int)
    """(servers ready, servers failed)."""

    def __init__(self, parent: QWidget | None = None, *, start: Callable[..., Any] = qt_async.start) -> None:
        super().__init__(parent)
        self.setObjectName("serversPanel")
        self._start = start
        self._session: Session | None = None
        self._busy: dict[str, str] = {}  # server -> what runs on it now ("Checking…")
        self._messages: dict[str, str] = {}  # server -> what the last action said (a refusal)
        self._soon = QTimer(self)
        self._soon.setSingleShot(True)
        self._soon.setInterval(0)
        self._soon.timeout.connect(self.reload)
        self._ticker = QTimer(self)  # "retry in N s" counts down
        self._ticker.setInterval(1000)
        self._ticker.timeout.connect(self._tick)

        lay = QVBoxLayout(self)
        lay.setContentsMargins(6, 6, 6, 6)
        self.summary = plain_label(self)
        self.summary.setObjectName("serversSummary")
        self.summary.setWordWrap(True)
        lay.addWidget(self.summary)

        split = QSplitter(Qt.Orientation.Vertical, self)
        split.setChildrenCollapsible(False)
        lay.addWidget(split, 1)
        self.model = ServersModel(self)
        self.view = two_line_table(self, self.model, "serversView", "MCP servers",
                                   "The workspace's MCP tool servers: name and command, status, tools offered")
        header = self.view.horizontalHeader()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(ServersModel.SERVER, QHeaderView.ResizeMode.Stretch)
        self.view.selectionModel().currentRowChanged.connect(lambda *_: self._show_selected())
        split.addWidget(self.view)

        detail = QWidget(self)
        dl = QVBoxLayout(detail)
        dl.setContentsMargins(0, 0, 0, 0)
        self.title = plain_label(detail)  # the server's own name and version: shown as written
        self.title.setObjectName("serverTitle")
        self.title.setWordWrap(True)
        self.title.setStyleSheet("font-weight: 600;")
        self.title.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        dl.addWidget(self.title)
        self.error = plain_label(detail)
        self.error.setObjectName("serverError")
        self.error.setWordWrap(True)
        self.error.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.error.setAccessibleName("The server's last error")
        dl.addWidget(self.error)
        row = QHBoxLayout()
        self.check_button = quiet_button(detail, "Check", "serverCheck", self.check,
                                         "Start the server if it is not up and list its tools")
        self.restart_button = quiet_button(detail, "Restart", "serverRestart", self.restart,
                                           "Stop the server and start it again")
        row.addWidget(self.check_button)
        row.addWidget(self.restart_button)
        row.addStretch(1)
        dl.addLayout(row)
        self.tabs = QTabWidget(detail)
        self.tabs.setObjectName("serverTabs")
        self.tools_model = ToolsModel(self)
        self.tools_model.sig_toggled.connect(self._toggled)
        self.tools_view = QTableView(detail)
        self.tools_view.setObjectName("serverTools")
        self.tools_view.setAccessibleName("The server's tools")
        self.tools_view.setAccessibleDescription("Each tool with its switch: on = offered to the agent. Space "
                                                 "switches the current tool on or off")
        self.tools_view.setModel(self.tools_model)
        self.tools_view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.tools_view.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.tools_view.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.tools_view.verticalHeader().setVisible(False)
        theader = self.tools_view.horizontalHeader()
        theader.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        theader.setSectionResizeMode(ToolsModel.TOOL, QHeaderView.ResizeMode.Stretch)
        self.tabs.addTab(self.tools_view, "Tools")
        self.log_view = QPlainTextEdit(detail)
        self.log_view.setObjectName("serverLog")
        self.log_view.setAccessibleName("The server's log")
        self.log_view.setReadOnly(True)
        self.log_view.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        self.log_view.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.tabs.addTab(self.log_view, "Log")
        dl.addWidget(self.tabs, 1)
        split.addWidget(detail)
        split.setStretchFactor(0, 2)
        split.setStretchFactor(1, 3)
        split.setSizes([160, 300])
        self.detail = detail
        self.reload()

    # -- the panel contract ---------------------------------------------------------------------------
    def set_session(self, session: Session | None) -> None:
        """A workspace or thread was attached: its servers (their processes go on across threads)."""
        self._session = session
        self._busy.clear()
        self._messages.clear()
        self.reload()

    def handle_event(self, event: Any) -> None:
        if getattr(event, "type", "") == "mcp_server_status":
            self._soon.start()  # a burst of changes: one read

    # -- reading --------------------------------------------------------------------------------------
    def servers(self) -> list[McpServerInfo]:
        session = self._session
        if session is None:
            return []
        try:
            return session.mcp_servers()
        except Exception as e:  # noqa: BLE001 - a session closing under a workspace switch
            log.debug("servers not read: %s", e)
            return []

    def reload(self) -> None:
        keep = self.selected()
        rows = self.servers()
        self.model.set_rows(rows)
        names = [r.name for r in rows]
        if keep is not None and keep.name in names:
            self.select(keep.name)
        elif rows and self.selected() is None:
            self.select(rows[0].name)
        ready = sum(1 for r in rows if r.status == "ready")
        failed = sum(1 for r in rows if r.status == "failed")
        if rows:
            parts = [f"{ready} ready" if ready else "", f"{failed} failed" if failed else "",
                     f"{sum(1 for r in rows if r.status == 'starting')} starting"
                     if any(r.status == "starting" for r in rows) else ""]
            tools = sum(len(r.offered) for r in rows)
            self.summary.setText(f"{len(rows)} MCP server{'s' if len(rows) != 1 else ''}: "
                                 + (", ".join(p for p in parts if p) or "none started yet (the first run starts them)")
                                 + f". {tools} tool{'s' if tools != 1 else ''} offered.")
        else:
            self.summary.setText("No MCP servers in this workspace. Add them under mcp_servers: in workbench.yaml "
                                 "(a command, or a URL); they start with the first run.")
        if any(r.status == "failed" and r.retry_at is not None for r in rows):
            self._ticker.start()
        else:
            self._ticker.stop()
        self.sig_counts_changed.emit(ready, failed)
        self._show_selected()

    def _tick(self) -> None:
        for i, r in enumerate(self.model.rows):
            if r.status == "failed" and r.retry_at is not None:
                index = self.model.index(i, ServersModel.STATUS)
                self.model.dataChanged.emit(index, index, [Qt.ItemDataRole.DisplayRole])

    # -- selection ------------------------------------------------------------------------------------
    def selected(self) -> McpServerInfo | None:
        index = self.view.currentIndex()
        return self.model.row_at(index) if index.isValid() else None

    def select(self, name: str) -> None:
        i = self.model.row_of(name)
        if i >= 0:
            self.view.setCurrentIndex(self.model.index(i, ServersModel.SERVER))
            self.view.selectRow(i)

    def _show_selected(self) -> None:
        info = self.selected()
        self.detail.setEnabled(info is not None)
        if info is None:
            self.title.setText("")
            self.error.setText("")
            self.tools_model.set_rows([])
            self.log_view.setPlainText("")
            self.check_button.setEnabled(False)
            self.restart_button.setEnabled(False)
            return
        bits = [info.name, info.transport, status_text(info.status)]
        if info.server_info:
            bits.append(info.server_info)
        if info.pid is not None:
            bits.append(f"pid {info.pid}")
        if info.restarts:
            bits.append(f"restarted {info.restarts}×")
        self.title.setText(" · ".join(bits))
        busy = self._busy.get(info.name)
        message = self._messages.get(info.name)
        if busy:
            text = busy
        elif info.note:
            text = info.note[:1].upper() + info.note[1:]
        elif message:
            text = message
        elif info.error:
            text = f"Last error: {info.error}"
        elif info.status == "stopped":
            text = "Not started yet: the first run starts it, or Check."
        else:
            text = ""
        self.error.setText(text)
        self.error.setStyleSheet("" if not (info.error or message) or busy else
                                 f"color: {status_color('error', is_dark())};")
        self.tools_model.set_rows(info.tools)
        log_text = "\n".join(info.log)
        if self.log_view.toPlainText() != log_text:
            self.log_view.setPlainText(log_text)
            bar = self.log_view.verticalScrollBar()
            bar.setValue(bar.maximum())
        can = self._session is not None and info.note is None and not busy
        self.check_button.setEnabled(can and info.status != "starting")
        self.restart_button.setEnabled(can and info.status != "stopped")
        self.check_button.setText("Checking…" if busy and busy.startswith("Checking") else "Check")

    # -- actions --------------------------------------------------------------------------------------
    def check(self) -> None:
        info = self.selected()
        if info is not None and self._session is not None:
            self._start(self._act(info.name, "Checking…", "check_mcp_server"), name="mcp-check")

    def restart(self) -> None:
        info = self.selected()
        if info is not None and self._session is not None:
            self._start(self._act(info.name, "Restarting…", "restart_mcp_server"), name="mcp-restart")

    async def _act(self, name: str, busy: str, call: str) -> None:
        session = self._session
        if session is None:
            return
        self._busy[name] = f"{busy} (starting the server and listing its tools)"
        self._messages.pop(name, None)
        self._show_selected()
        try:
            await getattr(session, call)(name)
        except WorkbenchError as e:  # refused (disabled, not trusted): said here, not raised
            self._messages[name] = str(e)
        finally:
            self._busy.pop(name, None)
            if self._session is session:
                self.reload()

    def _toggled(self, tool: str, on: bool) -> None:
        info = self.selected()
        session = self._session
        if info is None or session is None:
            return
        try:
            session.set_mcp_tool_enabled(info.name, tool, on)
        except WorkbenchError as e:
            self._messages[info.name] = str(e)
        self.reload()


__all__ = ["GLYPHS", "ServersModel", "ServersPanel", "ToolsModel", "status_detail", "status_text"]
