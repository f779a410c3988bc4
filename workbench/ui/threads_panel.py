"""The threads list (G1, issue 3 item 2): the workspace's threads, newest first; new, rename, delete.

The panel lists what ``session.threads()`` returns and refreshes when the bridge says a thread was
loaded or a run started or finished. Choosing a thread, or New, is a request the window carries out
(it knows whether a run is in flight); rename and delete (after a confirmation) go to the session here.
Dialogs are ``open()``ed and awaited, never ``exec()``ed.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtWidgets import (
    QHBoxLayout,
    QInputDialog,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMessageBox,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from workbench.errors import RunError
from workbench.ui.plain_text import plain_message_box, plain_tooltip
from workbench.ui.qt_async import ask_dialog, release_dialog, start

if TYPE_CHECKING:
    from workbench.session import ThreadInfo
    from workbench.ui.bridge import Bridge

ThreadIdRole = Qt.ItemDataRole.UserRole
StatusRole = Qt.ItemDataRole.UserRole + 1
DELETE_TIP = "Delete the selected thread: its messages, events and usage are removed for good"
RUNNING_DELETE_TIP = ("A run is in flight on this thread (in this window or in another process): it can be "
                      "deleted once that run has ended")

_STATUS_WORDS = {"new": "", "running": "running", "done": "", "failed": "failed", "aborted": "stopped",
                 "interrupted": "waiting for you"}
# R9: a thread reads "failed" when its run failed or its process died (never "running" forever).
_STATUS_TIPS = {"failed": "The run failed or its process died: open the thread and Recover to go on.",
                "running": "A run is in flight (in this window or in another process)."}


def _when(ts: float, now: float | None = None) -> str:
    now = time.time() if now is None else now
    age = max(0.0, now - ts)
    if age < 60:
        return "just now"
    if age < 3600:
        return f"{int(age // 60)} min ago"
    if age < 86400:
        return f"{int(age // 3600)} h ago"
    return time.strftime("%Y-%m-%d", time.localtime(ts))


class ThreadsPanel(QWidget):
    """Lists the threads of the bridge's session; the current one is selected."""

    sig_thread_selected = Signal(str)
    """The user chose this thread (the window switches the session to it)."""

    sig_thread_requested = Signal()
    """The user asked for a new thread (New)."""

    sig_thread_deleted = Signal(str)
    """A thread was deleted (after the user confirmed)."""

    sig_thread_renamed = Signal(str, str)
    """A thread was renamed: its id and new title."""

    def __init__(self, bridge: Bridge, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("threads_panel")
        self._bridge = bridge
        self._updating = False
        self.list = QListWidget(self)
        self.list.setObjectName("threads_list")
        self.list.setAccessibleName("Threads")  # G14
        self.list.setAccessibleDescription("This workspace's threads, newest first; each says its status and age")
        self.list.setAlternatingRowColors(True)
        self.list.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.list.setUniformItemSizes(True)
        self.list.currentItemChanged.connect(self._on_current_changed)
        self.new_button = QPushButton("New", self)
        self.new_button.setObjectName("thread_new")
        self.new_button.setToolTip("Start a new thread in this workspace")
        self.rename_button = QPushButton("Rename", self)
        self.rename_button.setObjectName("thread_rename")
        self.delete_button = QPushButton("Delete", self)
        self.delete_button.setObjectName("thread_delete")
        self.delete_button.setToolTip(DELETE_TIP)
        self.new_button.clicked.connect(self.sig_thread_requested)
        self.rename_button.clicked.connect(lambda: start(self.rename_selected(), name="rename-thread"))
        self.delete_button.clicked.connect(lambda: start(self.delete_selected(), name="delete-thread"))
        buttons = QHBoxLayout()
        buttons.setContentsMargins(0, 0, 0, 0)
        for b in (self.new_button, self.rename_button, self.delete_button):
            b.setAutoDefault(False)
            buttons.addWidget(b)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.setSpacing(4)
        lay.addLayout(buttons)
        lay.addWidget(self.list, 1)
        QWidget.setTabOrder(self.delete_button, self.list)  # G14: Tab as laid out, buttons then list
        bridge.sig_thread_loaded.connect(self.refresh)
        bridge.sig_run_started.connect(self.refresh)
        bridge.sig_run_finished.connect(self.refresh)
        self._dialog: Any = None  # the open rename/confirm dialog (tests find it here too)

    # -- contents -----------------------------------------------------------------------------------
    def threads(self) -> list[ThreadInfo]:
        session = self._bridge.session
        return session.threads() if session is not None else []

    @Slot()
    @Slot(object)
    def refresh(self, *_: Any) -> None:
        """Re-read the thread list (newest first) and select the session's current thread."""
        session = self._bridge.session
        current = session.thread_id if session is not None else None
        now = time.time()
        self._updating = True
        try:
            self.list.clear()
            for t in self.threads():
                status = _STATUS_WORDS.get(t.status, t.status)
                title = t.title or "New thread"
                # Two lines: a long title is cut on its own line, never the status or the age.
                meta = (f"{status} · " if status else "") + _when(t.updated, now)
                item = QListWidgetItem(f"{title}\n{meta}")
                item.setData(ThreadIdRole, t.id)
                item.setData(StatusRole, t.status)
                tip = _STATUS_TIPS.get(t.status)
                item.setToolTip(plain_tooltip(f"{title}\n{meta}" + (f"\n{tip}" if tip else "")))
                self.list.addItem(item)
                if t.id == current:
                    self.list.setCurrentItem(item)
        finally:
            self._updating = False
        self._update_buttons()

    def _update_buttons(self) -> None:
        """R7, R9: Delete is not offered for a thread whose run is in flight, here or in another process
        (it reads ``running`` while its holder lives); the tooltip says why."""
        item = self.list.currentItem()
        running = item is not None and item.data(StatusRole) == "running"
        self.rename_button.setEnabled(item is not None)
        self.delete_button.setEnabled(item is not None and not running)
        self.delete_button.setToolTip(RUNNING_DELETE_TIP if running else DELETE_TIP)

    def thread_ids(self) -> list[str]:
        return [self.list.item(i).data(ThreadIdRole) for i in range(self.list.count())]

    def selected_id(self) -> str | None:
        item = self.list.currentItem()
        return item.data(ThreadIdRole) if item is not None else None

    def select(self, thread_id: str) -> None:
        """Select a thread as the user would (emits ``sig_thread_selected``)."""
        for i in range(self.list.count()):
            if self.list.item(i).data(ThreadIdRole) == thread_id:
                self.list.setCurrentRow(i)
                return

    @Slot(object, object)
    def _on_current_changed(self, current: QListWidgetItem | None, _previous: Any) -> None:
        if self._updating:
            return
        self._update_buttons()
        if current is None:
            return
        tid = current.data(ThreadIdRole)
        session = self._bridge.session
        if session is not None and tid != session.thread_id:
            self.sig_thread_selected.emit(tid)

    # -- rename / delete ----------------------------------------------------------------------------
    async def rename_selected(self) -> None:
        tid = self.selected_id()
        session = self._bridge.session
        if tid is None or session is None:
            return
        item = self.list.currentItem()
        old = next((t.title for t in self.threads() if t.id == tid), "")
        dialog = QInputDialog(self)
        dialog.setObjectName("rename_thread_dialog")
        dialog.setWindowTitle("Rename thread")
        dialog.setLabelText("New title:")
        dialog.setTextEchoMode(QLineEdit.EchoMode.Normal)
        dialog.setTextValue(old or (item.text() if item else ""))
        # Wide enough to show a long title whole (the default field cut it at ~170 px), within reason;
        # the dialog's layout fixes its size from the field's.
        field = dialog.findChild(QLineEdit)
        if field is not None:
            field.setAccessibleName("New title")
            field.setMinimumWidth(min(max(380, field.fontMetrics().horizontalAdvance(dialog.textValue()) + 24), 720))
        self._dialog = dialog
        try:
            code = await ask_dialog(dialog)
            title = dialog.textValue().strip()
        finally:
            self._dialog = None
            release_dialog(dialog)
        if code != QInputDialog.DialogCode.Accepted or not title:
            return
        session.rename_thread(tid, title)
        self.refresh()
        self.sig_thread_renamed.emit(tid, title)

    async def delete_selected(self) -> None:
        tid = self.selected_id()
        session = self._bridge.session
        if tid is None or session is None:
            return
        info = next((t for t in self.threads() if t.id == tid), None)  # fresh: its run may have started since
        title = (info.title if info is not None else "") or "this thread"
        if info is not None and info.status == "running":
            await self._refused(title, RUNNING_DELETE_TIP + ".")
            self.refresh()
            return
        box = QMessageBox(QMessageBox.Icon.Warning, "Delete thread",
                          f"Delete “{title}”? Its messages, events and usage are removed for good.",
                          QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel, self)
        plain_message_box(box)  # the title is the thread's (a model may have named it): shown as written
        box.setObjectName("delete_thread_dialog")
        box.setDefaultButton(QMessageBox.StandardButton.Cancel)
        self._dialog = box
        try:
            await ask_dialog(box)
            # QMessageBox.finished gives the button's role code, not StandardButton: ask the box.
            yes = box.clickedButton() is box.button(QMessageBox.StandardButton.Yes)
        finally:
            self._dialog = None
            release_dialog(box)
        if not yes:
            return
        try:
            session.delete_thread(tid)
        except RunError as e:  # R7: e.g. a run in another process took the thread meanwhile (holder named)
            self.refresh()
            await self._refused(title, str(e))
            return
        self.sig_thread_deleted.emit(tid)
        self.refresh()

    async def _refused(self, title: str, why: str) -> None:
        """Say why the thread was not deleted (the session's refusal names the run's holder)."""
        box = QMessageBox(QMessageBox.Icon.Information, "Thread not deleted", f"“{title}” was not deleted: {why}",
                          QMessageBox.StandardButton.Ok, self)
        plain_message_box(box)
        box.setObjectName("delete_thread_refused")
        self._dialog = box
        try:
            await ask_dialog(box)
        finally:
            self._dialog = None
            release_dialog(box)


__all__ = ["StatusRole", "ThreadIdRole", "ThreadsPanel"]
