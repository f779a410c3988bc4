"""The main window (G1): threads on the left, the transcript in the centre, the input box with Send
(Ctrl+Enter) and Stop, and a status bar with the model, the run status, tokens and cost.

The window talks to one ``Session`` at a time. Events come in through the ``Bridge``; user actions go
back as Session calls started with ``qt_async.start``. A run that suspends on questions opens the
approval dialog (``open()``ed and awaited); its decisions resume the run. Other panels (Settings,
Events, Plan, Skills, …) plug in with ``add_dock(title, widget, area)``; the View menu lists every
dock, and the dock layout and window geometry are kept in ``UserSettings.window``. A sub-agent task's
conversation can take the transcript's place, read-only (``show_task_transcript``: ``task_transcript``);
the prompt box does not write while it is shown.
"""

from __future__ import annotations

import asyncio
import logging
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QByteArray, Qt, Signal, Slot
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import (
    QDockWidget,
    QFileDialog,
    QHBoxLayout,
    QMainWindow,
    QPushButton,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from workbench.config import UserSettings, add_recent_workspace, load_user_settings, save_user_settings
from workbench.errors import WorkbenchError
from workbench.ui import qt_async
from workbench.ui.approval_dialog import STOP_RUN
from workbench.ui.bridge import Bridge
from workbench.ui.decision_desk import DecisionDesk
from workbench.ui.run_activity import install_run_ticker
from workbench.ui.threads_panel import ThreadsPanel
from workbench.ui.transcript import TranscriptView
from workbench.ui.warm_up import start_warm_up
from workbench.ui.window_widgets import ErrorBar, PromptEdit, _status_bar
from workbench.ui.window_keys import install_keyboard, install_menus
from workbench.ui import window_open

if TYPE_CHECKING:
    from workbench.session import RunResult
    from workbench.session import Session

log = logging.getLogger(__name__)

APP_TITLE = "Agent Workbench"
DockArea = Qt.DockWidgetArea


class MainWindow(QMainWindow):
    """The workbench window over one Session at a time."""

    sig_session_opened = Signal(object)
    """A workspace was opened (the new ``Session``)."""

    sig_run_settled = Signal(str)
    """A send (with its approvals) settled: the last run status (done, failed, aborted, interrupted)."""

    def __init__(self, settings: UserSettings | None = None, *, persist: bool = True,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("main_window")
        self.setWindowTitle(APP_TITLE)
        self.settings = settings if settings is not None else load_user_settings()
        self.persist = persist
        self.session: Session | None = None
        self.opened_with: dict[str, Any] = {}  # G9: model/api_base the workspace was opened with (reload)
        self._trust_declined: dict[str, str] = {}  # W1: workspace -> hash of the settings opened without
        self.bridge = Bridge(parent=self)
        self._drive_task: asyncio.Task[Any] | None = None
        self._shutdown_task: asyncio.Task[None] | None = None
        self._docks: dict[str, QDockWidget] = {}
        self._closing = False
        self.unsaved_box: Any = None  # G2: the "unsaved instructions" question while it asks (window_open)
        self._edits_settled = False  # G2: the close in progress was already asked about unsaved edits
        self._edits_task: asyncio.Task[None] | None = None
        self.setDockOptions(QMainWindow.DockOption.AnimatedDocks | QMainWindow.DockOption.AllowTabbedDocks)
        # Tabs of tabbed docks on top of their group, where they read as the group's tabs (at the
        # bottom they sat right above the next dock's title and seemed to belong to it).
        self.setTabPosition(Qt.DockWidgetArea.AllDockWidgetAreas, QTabWidget.TabPosition.North)

        # centre: error bar, transcript, input
        self.error_bar = ErrorBar(self)
        self.transcript = TranscriptView(self.bridge, self)
        self.input = PromptEdit(self)
        self.input.setObjectName("prompt_input")
        self.input.setPlaceholderText("Ask the agent…  (Ctrl+Enter sends)")
        self.input.setAccessibleName("Message to the agent")  # G14
        self.input.setAccessibleDescription("Ctrl+Enter sends; Tab moves on to Send")
        self.send_button = QPushButton("Send", self)
        self.send_button.setObjectName("send_button")
        self.send_button.setToolTip("Send (Ctrl+Enter)")
        self.send_button.setDefault(True)
        self.stop_button = QPushButton("Stop", self)
        self.stop_button.setObjectName("stop_button")
        self.stop_button.setToolTip("Stop the run: it ends aborted and keeps its partial answer")
        self.stop_button.setEnabled(False)
        input_row = QWidget(self)
        row = QHBoxLayout(input_row)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.input, 1)
        col = QVBoxLayout()
        col.addWidget(self.send_button)
        col.addWidget(self.stop_button)
        col.addStretch(1)
        row.addLayout(col)
        self.splitter = QSplitter(Qt.Orientation.Vertical, self)
        self.splitter.setObjectName("centre_splitter")
        self.splitter.addWidget(self.transcript)
        self.splitter.addWidget(input_row)
        self.splitter.setStretchFactor(0, 5)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setSizes([600, 110])
        centre = QWidget(self)
        lay = QVBoxLayout(centre)
        lay.setContentsMargins(6, 6, 6, 6)
        lay.setSpacing(4)
        lay.addWidget(self.error_bar)
        lay.addWidget(self.splitter, 1)
        self.setCentralWidget(centre)

        self.status = _status_bar(self)
        self.setStatusBar(self.status)
        self.run_ticker = install_run_ticker(self.status, self.bridge)  # G1: time, tokens, cost while running

        # menus: File (Open workspace…, Open recent, Settings…, Quit) and View, made by window_keys
        install_menus(self)

        # docks
        self.threads_panel = ThreadsPanel(self.bridge, self)
        self.add_dock("Threads", self.threads_panel, DockArea.LeftDockWidgetArea)

        # wiring
        self.send_button.clicked.connect(self.on_send)
        self.input.sig_prompt_submitted.connect(self.on_send)
        self.stop_button.clicked.connect(self.on_stop)
        self.transcript.sig_decisions_requested.connect(self.on_review_pending)
        self.transcript.sig_retry_requested.connect(self.on_retry)
        self.transcript.sig_prompt_requested.connect(self.inspect_prompt)  # V2: "Inspect prompt"
        self.threads_panel.sig_thread_selected.connect(self.on_thread_selected)
        self.threads_panel.sig_thread_requested.connect(self.on_new_thread)
        self.threads_panel.sig_thread_deleted.connect(self.on_thread_deleted)
        self.sig_run_settled.connect(self.threads_panel.refresh)  # the run has let go of its thread now
        self.bridge.sig_thread_loaded.connect(self._on_thread_loaded)
        self.bridge.sig_status_changed.connect(self._on_status_changed)
        self.bridge.sig_usage_updated.connect(self._on_usage)
        if hasattr(self.status, "follow_budgets"):  # G11: the engine's budget figures, as the Budget panel
            self.bridge.sig_event_received.connect(self.status.follow_budgets)
        self._remove_error_hook = qt_async.add_error_hook(self._on_error)
        install_keyboard(self)  # G7: shortcuts in the File and Run menus, the prompt box focused
        self._quit_confirmed = False  # G12: quitting mid-run or with decisions waiting asks first
        self.desk = DecisionDesk(self)  # Q1: the workspace's pending decisions, answered in one way
        clicked = getattr(self.status, "sig_decisions_clicked", None)
        if clicked is not None:
            clicked.connect(self.show_decisions_panel)
        tasks_clicked = getattr(self.status, "sig_tasks_clicked", None)
        if tasks_clicked is not None:  # D10: "N tasks running" opens the Tasks board
            tasks_clicked.connect(self.show_tasks_panel)
        self.task_mode: Any = None  # D10: a task's transcript, read-only, in the centre (task_transcript)

        self.resize(1200, 800)
        self.restore_layout()

    # -- docks and layout -------------------------------------------------------------------------------
    def add_dock(self, title: str, widget: QWidget, area: Qt.DockWidgetArea = DockArea.RightDockWidgetArea,
                 *, visible: bool = True) -> QDockWidget:
        """Add a panel as a dock (listed in the View menu; its place is saved with the layout)."""
        dock = QDockWidget(title, self)
        dock.setObjectName("dock_" + (re.sub(r"\W+", "_", title.strip().lower()).strip("_") or "panel"))
        dock.setWidget(widget)
        dock.setFeatures(QDockWidget.DockWidgetFeature.DockWidgetClosable
                         | QDockWidget.DockWidgetFeature.DockWidgetMovable
                         | QDockWidget.DockWidgetFeature.DockWidgetFloatable)
        self.addDockWidget(area, dock)
        self._docks[title] = dock
        action = dock.toggleViewAction()
        action.setText(title)
        self.view_menu.addAction(action)
        if not visible:
            dock.hide()
        elif self.isVisible():
            dock.show()  # a child added to a shown window stays hidden (and out of its tab group) otherwise
        self.restoreDockWidget(dock)  # back where the saved layout had it, for panels added later
        return dock

    def dock(self, title: str) -> QDockWidget | None:
        return self._docks.get(title)

    def docks(self) -> dict[str, QDockWidget]:
        return dict(self._docks)

    def save_layout(self) -> None:
        """Window geometry and dock layout into ``UserSettings.window`` (and the settings file)."""
        self.settings.window["geometry"] = bytes(self.saveGeometry().toBase64().data()).decode("ascii")
        self.settings.window["state"] = bytes(self.saveState().toBase64().data()).decode("ascii")
        self.settings.window["splitter"] = bytes(self.splitter.saveState().toBase64().data()).decode("ascii")
        self._save_settings()

    def restore_layout(self) -> None:
        w = self.settings.window
        if w.get("geometry"):
            self.restoreGeometry(QByteArray.fromBase64(w["geometry"].encode("ascii")))
        if w.get("state"):
            self.restoreState(QByteArray.fromBase64(w["state"].encode("ascii")))
        if w.get("splitter"):
            self.splitter.restoreState(QByteArray.fromBase64(w["splitter"].encode("ascii")))

    def _save_settings(self) -> None:
        if not self.persist:
            return
        try:
            save_user_settings(self.settings)
        except OSError as e:
            log.warning("could not save the user settings: %s", e)

    def show_decisions_panel(self) -> None:
        """Open (or raise) the Decisions inbox (Q1)."""
        from workbench.ui.panels import show_dock

        show_dock(self, "Decisions")

    # -- sub-agent tasks (D10) --------------------------------------------------------------------------
    def show_tasks_panel(self) -> None:
        """Open (or raise) the Tasks board."""
        from workbench.ui.panels import show_dock

        show_dock(self, "Tasks")

    @Slot(str)
    def show_task_transcript(self, task_id: str) -> bool:
        """Show a sub-agent task's conversation read-only in the centre, with "Back to the thread"; the
        prompt box does not write while it is shown. False when there is no such task."""
        if self.task_mode is None:
            from workbench.ui.task_transcript import TaskTranscriptMode

            self.task_mode = TaskTranscriptMode(self)
        return bool(self.task_mode.open(task_id))

    def show_thread_transcript(self) -> None:
        """Back from a task's transcript to the thread's."""
        if self.task_mode is not None:
            self.task_mode.back()

    @property
    def reading_task(self) -> bool:
        """A task's transcript is shown in place of the thread's (the prompt box does not write)."""
        return self.task_mode is not None and self.task_mode.is_open

    # -- workspaces -------------------------------------------------------------------------------------
    async def open_workspace(self, path: Path | str, *, model: str | None = None, api_base: str | None = None,
                             thread_id: str | None = None) -> Session:
        """Open a workspace folder (its newest thread, or ``thread_id``) and show it.

        G9: the new session opens before the current one closes; on failure the current one stays open
        and the error bar shows the error with Edit / Try again (``window_open``), then it is raised.
        G2: another workspace while AGENTS.md has unsaved edits asks first (Save / Discard / Cancel);
        Cancel raises ``window_open.OpenCancelled`` and nothing changes. The same workspace again keeps
        the edits (the editor keeps its buffer)."""
        from workbench.session import Session

        ws = Path(path).expanduser().resolve()
        current = self.session
        if current is not None and current.workspace != ws and window_open.unsaved_editor(self) is not None:
            if not await window_open.settle_unsaved_edits(self, f"opening {ws.name}"):
                self.status.showMessage(f"{ws} was not opened: your unsaved edits stay in the editor.", 8000)
                raise window_open.OpenCancelled(f"{ws} was not opened: unsaved edits kept")
        try:
            trust = await window_open.trust_decision(self, ws)
            self.status.showMessage(f"Opening {ws} …")
            # G8: the user's model and API base are defaults for a workspace whose yaml names no model;
            # ``model``/``api_base`` given here (workbench --model, the first-run choice) win for this session.
            session = await Session.open(ws, thread_id, model=model, api_base=api_base, threaded_model=True,
                                         default_model=self.settings.model, default_api_base=self.settings.api_base,
                                         default_permission=self.settings.default_permission, trust=trust)
        except Exception as e:  # noqa: BLE001 - shown, then raised: the current workspace stays (G9)
            window_open.show_open_error(self, ws, e, {"model": model, "api_base": api_base, "thread_id": thread_id})
            raise
        await self.close_session()  # only now: the new one opened
        self.opened_with = {"model": model, "api_base": api_base}
        window_open.clear_open_error(self)
        for notice in session.notices:  # W1: which untrusted settings were ignored
            self.error_bar.show_message(notice)
        if thread_id is None:
            # Session.open made a fresh thread: show the newest existing one instead, if there is one.
            fresh = session.thread_id
            older = [t for t in session.threads() if t.id != fresh]
            if older:
                session.switch_thread(older[0].id)
                session.delete_thread(fresh)
        self.session = session
        self.setWindowTitle(f"{ws.name} — {APP_TITLE}")
        self.status.set_model(session.model_name)  # type: ignore[attr-defined]
        set_sandbox = getattr(self.status, "set_sandbox", None)
        if set_sandbox is not None:  # E5: the fallback status bar has no place for it
            set_sandbox(session.sandbox)
        self.bridge.attach(session)
        add_recent_workspace(self.settings, ws)
        self._save_settings()
        self.status.showMessage(f"Opened {ws}", 4000)
        self.sig_session_opened.emit(session)
        start_warm_up(session)
        return session

    async def try_open_workspace(self, path: Path | str, **kwargs: Any) -> Session | None:
        """``open_workspace`` for menus and buttons: a failure is shown (G9), not raised; None then."""
        try:
            return await self.open_workspace(path, **kwargs)
        except window_open.OPEN_FAILURES:
            return None
        except Exception:  # noqa: BLE001 - already shown in the error bar; the traceback goes to the log
            log.exception("opening %s failed", path)
            return None

    async def close_session(self) -> None:
        """Stop what runs, close the session (its model worker and store)."""
        task = self._drive_task
        if task is not None and task is asyncio.current_task():
            pass  # G9: the send that reloads workbench.yaml before its run: it goes on
        elif task is not None and not task.done():
            if self.session is not None and self.session.running:
                await self.session.stop()
            task.cancel()
            await asyncio.wait([task], timeout=5)
            self._drive_task = None
        else:
            self._drive_task = None
        await self._settle_panels()  # a panel still reading through the session would hit a closed store
        session, self.session = self.session, None
        self.bridge.attach(None)
        if session is not None:
            await session.close()

    async def _settle_panels(self) -> None:
        for title, panel in getattr(self, "panels", {}).items():
            tasks = getattr(panel, "tasks", None)
            if tasks is None:
                continue
            try:
                await tasks.wait_idle(5.0)
            except Exception as e:  # noqa: BLE001 - already shown by the panel; closing goes on
                log.warning("the %s panel's work did not settle: %s", title, e)

    async def choose_workspace(self) -> None:
        dialog = QFileDialog(self, "Open workspace folder")
        dialog.setObjectName("open_workspace_dialog")
        dialog.setFileMode(QFileDialog.FileMode.Directory)
        dialog.setOption(QFileDialog.Option.ShowDirsOnly, True)
        if self.session is not None:
            dialog.setDirectory(str(self.session.workspace.parent))
        try:
            code = await qt_async.ask_dialog(dialog)
            files = dialog.selectedFiles()
        finally:
            qt_async.release_dialog(dialog)
        if code == QFileDialog.DialogCode.Accepted and files:
            await self.try_open_workspace(files[0])

    async def open_settings(self) -> None:
        """The Settings dialog (another panel's module); applying it reopens the workspace."""
        from workbench.ui.settings_dialog import SettingsDialog

        ws = self.session.workspace if self.session is not None else Path.home()
        sources = self.session.setting_sources(self.settings) if self.session is not None else None  # G8
        dialog = SettingsDialog(self.settings, ws, self, start=qt_async.start, sources=sources)
        applied: list[Any] = []
        dialog.sig_settings_applied.connect(applied.append)
        try:
            await qt_async.ask_dialog(dialog)
        finally:
            qt_async.release_dialog(dialog)
        if applied:
            values = applied[-1]
            self.settings = load_user_settings() if self.persist else self.settings
            target = Path(getattr(values, "workspace", ws) or ws)
            # G8: a session-only model (workbench --model) stays unless the model or endpoint was saved.
            keep = target.resolve() == ws and not {"model", "api_base"} & set(getattr(values, "changed", ()))
            await self.try_open_workspace(target, **(getattr(self, "opened_with", {}) if keep else {}))

    # -- runs -------------------------------------------------------------------------------------------
    @property
    def busy(self) -> bool:
        return self._drive_task is not None and not self._drive_task.done()

    @Slot()
    def on_send(self) -> None:
        text = self.input.toPlainText().strip()
        session = self.session
        if not text or session is None:
            return
        if self.reading_task:  # a task's transcript is read-only: nothing is sent to a task's thread
            self.status.showMessage("This is a sub-agent task's transcript (read-only): go back to the thread "
                                    "to send, or use Continue… on the Tasks board.", 6000)
            return
        if self.busy or session.running:
            self.status.showMessage("A run is in progress: wait for it or press Stop.", 5000)
            return
        if session.pending:
            self.status.showMessage("The run is waiting for your decisions: decide them first.", 5000)
            self.on_review_pending()
            return
        if session.config_changed():  # G9: read a changed workbench.yaml again before the run starts
            self._drive_task = qt_async.start(window_open.reload_then_send(self, text), name="reload-run")
            return
        self.input.clear()
        self.transcript.add_user_message(text)
        self._drive_task = qt_async.start(self._drive(text), name="run")

    @Slot()
    def on_stop(self) -> None:
        qt_async.start(self.stop(), name="stop")

    async def stop(self) -> None:
        """Stop the run in flight (it ends aborted, partial answer kept); or close a pending dialog."""
        session = self.session
        if session is not None and session.running:
            await session.stop()
        elif self.busy:
            assert self._drive_task is not None
            self._drive_task.cancel()

    @Slot()
    def on_review_pending(self) -> None:
        if self.session is None or self.busy or not self.session.pending:
            return
        self._drive_task = qt_async.start(self._drive(None), name="decide")

    @Slot()
    def on_retry(self) -> None:
        """Re-run the step a failed run stopped at (``Session.recover``), e.g. after fixing the key."""
        session = self.session
        if session is None or self.busy or session.running:
            return
        if session.status != "failed":
            self.status.showMessage("Only a failed run can be retried.", 5000)
            return
        self._drive_task = qt_async.start(self._drive(None, recover=True), name="retry")

    @Slot(dict)
    def inspect_prompt(self, call_ref: dict[str, Any]) -> Any:
        """V2: the prompt inspector on the model call that made a transcript message (``prompt_inspector``)."""
        from workbench.ui.prompt_inspector import inspect_message

        return inspect_message(self, call_ref)

    async def send(self, text: str) -> str:
        """Send a message as the user would and wait until the run settles; returns its last status."""
        self.input.setPlainText(text)
        self.on_send()
        return await self.wait_settled()

    async def wait_settled(self) -> str:
        task = self._drive_task
        if task is not None:
            try:
                return str(await asyncio.shield(task))
            except asyncio.CancelledError:
                if not task.cancelled():
                    raise
        return self.session.status if self.session is not None else ""

    async def _drive(self, prompt: str | None, *, recover: bool = False) -> str:
        """Run (or recover, or resume) and answer questions until the run ends or the user leaves
        them pending."""
        session = self.session
        assert session is not None
        self._set_running(True)
        status = ""
        try:
            result: RunResult | None = None
            if prompt is not None:
                result = await session.run(prompt)
            elif recover:
                result = await session.recover()
            while True:
                pending = list(result.pending) if result is not None else list(session.pending)
                status = result.status if result is not None else ("interrupted" if pending else session.status)
                if status != "interrupted" or not pending:
                    break
                self._set_running(False, waiting=True)
                decisions = await self.desk.ask(session, pending)  # Q1/Q2: the inbox decides too
                if decisions is None:  # closed without deciding: the run stays suspended
                    break
                self._set_running(True)
                self.status.set_status("running")  # type: ignore[attr-defined] # resuming starts no new run
                result = await (session.abandon() if decisions == STOP_RUN else session.resume(decisions))
            return status
        finally:
            self._set_running(False)
            if self.session is session:
                self.sig_run_settled.emit(status)

    def _set_running(self, running: bool, *, waiting: bool = False) -> None:
        self.send_button.setEnabled(not running and not waiting and not self.reading_task)
        self.stop_button.setEnabled(running or waiting)

    # -- threads ----------------------------------------------------------------------------------------
    @Slot(str)
    def on_thread_selected(self, thread_id: str) -> None:
        qt_async.start(self.switch_thread(thread_id), name="switch-thread")

    async def switch_thread(self, thread_id: str) -> None:
        session = self.session
        if session is None or thread_id == session.thread_id:
            return
        if session.running:
            self.status.showMessage("Stop the run before opening another thread.", 5000)
            self.threads_panel.refresh()
            return
        await self._leave_decisions()
        session.switch_thread(thread_id)
        self.bridge.reload()

    @Slot()
    def on_new_thread(self) -> None:
        qt_async.start(self.new_thread(), name="new-thread")

    async def new_thread(self) -> None:
        session = self.session
        if session is None:
            return
        if session.running:
            self.status.showMessage("Stop the run before starting a new thread.", 5000)
            return
        await self._leave_decisions()
        session.new_thread()
        self.bridge.reload()
        self.input.setFocus()

    @Slot(str)
    def on_thread_deleted(self, thread_id: str) -> None:
        session = self.session
        if session is None or thread_id != session.thread_id:
            return
        others = [t for t in session.threads() if t.id != thread_id]
        if others:
            session.switch_thread(others[0].id)
        else:
            session.new_thread()
        self.bridge.reload()

    async def _leave_decisions(self) -> None:
        """Close an open approval dialog (the run stays suspended on its thread)."""
        task = self._drive_task
        if task is not None and not task.done():
            task.cancel()
            await asyncio.wait([task], timeout=5)

    # -- bridge -----------------------------------------------------------------------------------------
    @Slot(dict)
    def _on_thread_loaded(self, info: dict[str, Any]) -> None:
        self.status.set_model(info.get("model"))  # type: ignore[attr-defined]
        self.status.set_status(info.get("status"))  # type: ignore[attr-defined]
        self.status.set_usage({}, info.get("usage") or {})  # type: ignore[attr-defined]
        if hasattr(self.status, "set_budgets") and self.session is not None:  # G11: committed figures
            self.status.set_budgets(self.session.budget_figures())
        if info.get("pending") and not self.busy:
            # A run suspended before (maybe before a restart): ask again.
            self._drive_task = qt_async.start(self._drive(None), name="decide")

    @Slot(str)
    def _on_status_changed(self, status: str) -> None:
        self.status.set_status(status)  # type: ignore[attr-defined]

    @Slot(dict)
    def _on_usage(self, data: dict[str, Any]) -> None:
        self.status.set_usage(data.get("run_usage"), data.get("thread_usage"))  # type: ignore[attr-defined]

    def _on_error(self, exc: BaseException, context: str) -> None:
        if isinstance(exc, WorkbenchError):
            text = str(exc)
        else:
            text = f"Something went wrong: {type(exc).__name__}: {exc} (the details are in the log)"
        self.error_bar.show_message(text)

    # -- closing ----------------------------------------------------------------------------------------
    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 - Qt override
        if (not self._quit_confirmed and not self._closing and not self._edits_settled and _loop_running()
                and window_open.unsaved_editor(self) is not None):  # G2/G12: unsaved AGENTS.md edits: ask first
            event.ignore()
            if self._edits_task is None or self._edits_task.done():
                self._edits_task = qt_async.start(self._confirm_unsaved_close(), name="confirm-unsaved")
            return
        why = "" if self._quit_confirmed or self._closing else self.desk.quit_question()
        if why and self.desk.quit_box is None and _loop_running():  # G12: ask first; the default stays
            event.ignore()
            qt_async.start(self._confirm_quit(why), name="confirm-quit")
            return
        if why and self.desk.quit_box is not None:
            event.ignore()  # already asking
            return
        if not self._closing:
            self._closing = True
            self.save_layout()
        super().closeEvent(event)
        if self._shutdown_task is None:
            try:
                asyncio.get_running_loop()
            except RuntimeError:  # no loop (a test tearing down): let go of the session
                self._remove_error_hook()
                self.bridge.attach(None)
                return
            self._shutdown_task = qt_async.start(self.shutdown(), name="shutdown")

    async def shutdown(self) -> None:
        """Close the session (stopping a run in flight) and let go of the error hook."""
        try:
            await self.close_session()
        finally:
            self._remove_error_hook()

    async def _confirm_unsaved_close(self) -> None:
        """Save / Discard / Cancel for unsaved AGENTS.md edits; then the close goes on (and may still ask
        the quit question, G12). Cancel keeps the window open with the edits."""
        if not await window_open.settle_unsaved_edits(self, "closing the window"):
            return
        self._edits_settled = True
        try:
            self.close()
        finally:
            self._edits_settled = False

    async def _confirm_quit(self, why: str) -> None:
        if await self.desk.confirm_quit(why):
            self._quit_confirmed = True
            self.close()

    async def wait_closed(self) -> None:
        """Close the window (if open) and wait until its session is closed (no question asked)."""
        self._quit_confirmed = True
        self.desk.dismiss_quit_box()
        if self.unsaved_box is not None:
            self.unsaved_box.reject()
        if self._shutdown_task is None:
            self.close()
        if self._shutdown_task is None:  # close() sent no close event (never shown)
            self._closing = True
            self._shutdown_task = qt_async.start(self.shutdown(), name="shutdown")
        await asyncio.shield(self._shutdown_task)


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


__all__ = ["APP_TITLE", "MainWindow", "PromptEdit"]
