"""Plugs the dock panels (G2) into the main window and wires them to the one bridge.

Every panel has the same two entry points: ``set_session(session)`` when a thread is attached (it
rebuilds from the store) and ``handle_event(event)`` for each engine event the bridge forwards,
replayed or live. Panels never poll the engine.

Each panel's module is imported on its own: one that fails to import (or to build) takes only its
own dock down, and never silently — its dock shows the error and the log has the traceback.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QVBoxLayout, QWidget

from workbench.ui import qt_async
from workbench.ui.plain_text import plain_label

log = logging.getLogger(__name__)

PANELS: tuple[tuple[str, str, str], ...] = (
    ("Plan", "workbench.ui.plan_panel", "PlanPanel"),
    ("Skills", "workbench.ui.skills_panel", "SkillsPanel"),
    ("Instructions", "workbench.ui.instructions_panel", "InstructionsPanel"),
    ("Budget", "workbench.ui.budget_panel", "BudgetPanel"),
    ("Artifacts", "workbench.ui.artifacts_panel", "ArtifactsPanel"),
)
"""The right-hand panels: title, module, class."""

Right = Qt.DockWidgetArea.RightDockWidgetArea
THREADS_WIDTH = 230
"""The thread list's width on first start (px)."""
PANELS_WIDTH = 420
"""The right-hand panels' width on first start (px)."""


class PanelError(QWidget):
    """What a dock shows in place of a panel that could not be loaded: which, from where, and why."""

    def __init__(self, title: str, module: str, error: BaseException, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("panelLoadError")
        self.title = title
        self.message = (f"The {title} panel could not be loaded: importing {module} failed with "
                        f"{type(error).__name__}: {error}. The rest of the window works; see the log for "
                        "the traceback, and reinstall the workbench if the error persists.")
        lay = QVBoxLayout(self)
        label = plain_label(self.message, self)
        label.setObjectName("panelLoadErrorText")
        label.setWordWrap(True)
        label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        label.setStyleSheet("color: #c0392b;")
        lay.addWidget(label)
        lay.addStretch(1)


def load_panel(window: Any, title: str, module: str, factory: Callable[[Any], QWidget]) -> QWidget:
    """The panel ``factory(module)`` builds, else (import or build failed) a ``PanelError`` naming
    the panel and the error, which is logged with its traceback and kept in ``window.panel_errors``."""
    try:
        return factory(importlib.import_module(module))
    except Exception as error:  # noqa: BLE001 - any failure is shown, never dropped
        log.error("The %s panel could not be loaded (%s): %s: %s", title, module, type(error).__name__, error,
                  exc_info=True)
        widget = PanelError(title, module, error, window)
        errors = getattr(window, "panel_errors", None)
        if not isinstance(errors, dict):
            errors = {}
            window.panel_errors = errors
        errors[title] = widget.message
        return widget


_NEEDS_START = frozenset({"Skills", "Instructions", "Artifacts"})
"""Panels that read files: they get ``qt_async.start`` to run those reads as tasks."""


def _factory(window: Any, title: str, cls: str) -> Callable[[Any], QWidget]:
    def factory(mod: Any) -> QWidget:
        panel_cls = getattr(mod, cls)
        return panel_cls(start=qt_async.start, parent=window) if title in _NEEDS_START else panel_cls(window)
    return factory


def install_events_panel(window: Any) -> QWidget:
    """The Events dock (bottom, hidden at first), fed every event the bridge forwards."""
    def factory(mod: Any) -> QWidget:
        panel = mod.EventsPanel(window)
        bridge = window.bridge
        bridge.sig_thread_attached.connect(lambda _tid: panel.clear())
        bridge.sig_event_received.connect(panel.add_event)
        return panel

    if window.dock("Events") is not None:
        return window.dock("Events").widget()
    panel = load_panel(window, "Events", "workbench.ui.events_panel", factory)
    dock = window.add_dock("Events", panel, Qt.DockWidgetArea.BottomDockWidgetArea, visible=False)
    if isinstance(panel, PanelError):  # hidden by default, but an error must be in sight
        dock.show()
        dock.raise_()
    return panel


def install_decisions_panel(window: Any, tab_with: Any = None) -> QWidget:
    """The Decisions dock (Q1, the inbox) over the window's ``DecisionDesk``; tabbed with ``tab_with``
    (the right-hand group) when given. Installed once; the status bar's "N decisions waiting" opens it."""
    if window.dock("Decisions") is not None:
        return window.dock("Decisions").widget()

    def factory(mod: Any) -> QWidget:
        return mod.DecisionsPanel(window)

    panel = load_panel(window, "Decisions", "workbench.ui.decisions_panel", factory)
    dock = window.add_dock("Decisions", panel, Right)
    if tab_with is not None:
        window.tabifyDockWidget(tab_with, dock)
    bridge = window.bridge
    if not isinstance(panel, PanelError):
        bridge.sig_thread_attached.connect(lambda _tid: panel.set_session(bridge.session))
        if isinstance(getattr(window, "panels", None), dict):
            window.panels["Decisions"] = panel
    return panel


def _register(window: Any, title: str, panel: QWidget, follow: bool) -> None:
    """A dock plugged in after the others: listed in ``window.panels``; with ``follow``, given the
    session now and on every thread attached (the window's own panels get it through ``install_panels``)."""
    if isinstance(getattr(window, "panels", None), dict):
        window.panels[title] = panel
    if follow:
        bridge = window.bridge
        bridge.sig_thread_attached.connect(lambda _tid: panel.set_session(bridge.session))
        if bridge.session is not None:
            panel.set_session(bridge.session)


def install_tasks_panel(window: Any, tab_with: Any = None, *, follow: bool = True) -> QWidget:
    """The Tasks dock (D10, the board of the thread's sub-agent tasks), live from the bridge's task
    signals; tabbed with ``tab_with`` when given. Installed once; it feeds the status bar's "N tasks
    running" (which opens it) and asks the window to show a task's transcript. ``follow``: it follows
    the attached thread itself (``install_panels`` does that for the panels it plugs in)."""
    if window.dock("Tasks") is not None:
        return window.dock("Tasks").widget()
    bridge = window.bridge

    def factory(mod: Any) -> QWidget:
        return mod.TasksPanel(window, bridge=bridge, desk=getattr(window, "desk", None))

    panel = load_panel(window, "Tasks", "workbench.ui.tasks_panel", factory)
    dock = window.add_dock("Tasks", panel, Right)
    if tab_with is not None:
        window.tabifyDockWidget(tab_with, dock)
    if not isinstance(panel, PanelError):
        set_tasks = getattr(window.status, "set_tasks", None)
        if callable(set_tasks):
            panel.sig_counts_changed.connect(set_tasks)
        show = getattr(window, "show_task_transcript", None)
        if callable(show):
            panel.sig_transcript_requested.connect(show)
        _register(window, "Tasks", panel, follow)
    return panel


def install_context_panel(window: Any, tab_with: Any = None, *, follow: bool = True) -> QWidget:
    """The Context dock (C9, V2: the next request's size, the last compression, Compact now, the model
    calls and their prompts), live from the bridge's context signals; tabbed with ``tab_with`` when
    given. Installed once; the first-time warning brings it to the front. ``follow``: as for Tasks."""
    if window.dock("Context") is not None:
        return window.dock("Context").widget()
    bridge = window.bridge

    def factory(mod: Any) -> QWidget:
        return mod.ContextPanel(window, bridge=bridge, start=qt_async.start)

    panel = load_panel(window, "Context", "workbench.ui.context_panel", factory)
    dock = window.add_dock("Context", panel, Right)
    if tab_with is not None:
        window.tabifyDockWidget(tab_with, dock)
    if not isinstance(panel, PanelError):
        def attention() -> None:
            dock.show()
            dock.raise_()
            window.status.showMessage("Context nearly full: see the Context panel.", 8000)

        panel.sig_attention_requested.connect(attention)
        _register(window, "Context", panel, follow)
    return panel


def install_servers_panel(window: Any, tab_with: Any = None, *, follow: bool = True) -> QWidget:
    """The Servers dock (X5: the workspace's MCP servers, their tools, last error and log, Check and
    Restart), live from the bridge's ``mcp_server_status`` events; tabbed with ``tab_with`` when given.
    Installed once. ``follow``: as for Tasks (and then it takes the bridge's events itself)."""
    if window.dock("Servers") is not None:
        return window.dock("Servers").widget()

    def factory(mod: Any) -> QWidget:
        return mod.ServersPanel(window, start=qt_async.start)

    panel = load_panel(window, "Servers", "workbench.ui.servers_panel", factory)
    dock = window.add_dock("Servers", panel, Right)
    if tab_with is not None:
        window.tabifyDockWidget(tab_with, dock)
    if not isinstance(panel, PanelError):
        if follow:
            window.bridge.sig_event_received.connect(panel.handle_event)
        _register(window, "Servers", panel, follow)
    return panel


def install_panels(window: Any) -> dict[str, Any]:
    """Add Plan, Skills, Instructions, Budget and Artifacts docks, then Decisions, Tasks, Context and Servers
    in the same tab group; returns the loaded ones by title.

    A panel that failed to load gets its dock with a ``PanelError`` instead (listed in
    ``window.panel_errors``, not in the result).
    """
    if not isinstance(getattr(window, "panel_errors", None), dict):
        window.panel_errors = {}
    widgets = {title: load_panel(window, title, module, _factory(window, title, cls)) for title, module, cls in PANELS}
    panels: dict[str, Any] = {t: w for t, w in widgets.items() if not isinstance(w, PanelError)}
    docks = [window.add_dock(title, widget, Right) for title, widget in widgets.items()]
    # One tab group on the right, tabs on top: stacked in two groups each panel got half the height,
    # too little for the Instructions editor or the budget meters at the default window size. A dock can
    # still be dragged out of the group to see two panels at once (the layout is saved).
    first, *rest = [d for d in docks if d is not None]
    for dock in rest:
        window.tabifyDockWidget(first, dock)
    decisions = install_decisions_panel(window, tab_with=first)  # Q1: the inbox, in the same group
    if not isinstance(decisions, PanelError):
        panels["Decisions"] = decisions
    tasks = install_tasks_panel(window, tab_with=first, follow=False)  # D10: the Tasks board, in the same group
    if not isinstance(tasks, PanelError):
        panels["Tasks"] = tasks
    context = install_context_panel(window, tab_with=first, follow=False)  # C9: the Context panel, same group
    if not isinstance(context, PanelError):
        panels["Context"] = context
    servers = install_servers_panel(window, tab_with=first, follow=False)  # X5: the MCP servers, same group
    if not isinstance(servers, PanelError):
        panels["Servers"] = servers
    failed = [d for d in docks if d is not None and isinstance(d.widget(), PanelError)]
    (failed[0] if failed else first).raise_()  # a panel that failed to load is the tab in sight
    if not window.settings.window.get("state"):
        # First start (no saved layout): a narrow thread list, a right column wide enough for the
        # panels' tables (names, sizes, costs) without clipping.
        left = [d for d in (window.dock("Threads"),) if d is not None]
        window.resizeDocks([*left, first], [*[THREADS_WIDTH] * len(left), PANELS_WIDTH],
                           Qt.Orientation.Horizontal)

    bridge = window.bridge

    def attach(_thread_id: str) -> None:
        session = bridge.session
        for panel in panels.values():
            panel.set_session(session)

    bridge.sig_thread_attached.connect(attach)
    for panel in panels.values():
        bridge.sig_event_received.connect(panel.handle_event)
    if bridge.session is not None:  # a session opened before the panels were plugged in
        attach(bridge.session.thread_id)
    window.panels = panels
    return panels


def show_dock(window: Any, title: str) -> None:
    """Open (or raise) one of the window's docks by title — "Decisions", "Tasks", "Context" — plugging it
    in first when the window has none yet (the status bar's buttons open them)."""
    dock = window.dock(title)
    if dock is None:
        install = {"Decisions": install_decisions_panel, "Tasks": install_tasks_panel,
                   "Context": install_context_panel, "Servers": install_servers_panel}.get(title)
        if install is None:
            return
        install(window)
        dock = window.dock(title)
    if dock is not None:
        dock.show()
        dock.raise_()
        widget = dock.widget()
        if widget is not None:
            widget.setFocus()
