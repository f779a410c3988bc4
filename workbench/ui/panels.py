"""Plugs the dock panels (G2) into the main window and wires them to the one bridge.

Every panel has the same two entry points: ``set_session(session)`` when a thread is attached (it
rebuilds from the store) and ``handle_event(event)`` for each engine event the bridge forwards,
replayed or live. Panels never poll the engine.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt

from workbench.ui import qt_async
from workbench.ui.artifacts_panel import ArtifactsPanel
from workbench.ui.budget_panel import BudgetPanel
from workbench.ui.instructions_panel import InstructionsPanel
from workbench.ui.plan_panel import PlanPanel
from workbench.ui.skills_panel import SkillsPanel

Right = Qt.DockWidgetArea.RightDockWidgetArea
THREADS_WIDTH = 230
"""The thread list's width on first start (px)."""
PANELS_WIDTH = 420
"""The right-hand panels' width on first start (px)."""


def install_panels(window: Any) -> dict[str, Any]:
    """Add Plan, Skills, Instructions, Budget and Artifacts docks; returns them by title."""
    panels: dict[str, Any] = {
        "Plan": PlanPanel(window),
        "Skills": SkillsPanel(start=qt_async.start, parent=window),
        "Instructions": InstructionsPanel(start=qt_async.start, parent=window),
        "Budget": BudgetPanel(window),
        "Artifacts": ArtifactsPanel(start=qt_async.start, parent=window),
    }
    docks = [window.add_dock(title, panel, Right) for title, panel in panels.items()]
    # One tab group on the right, tabs on top: stacked in two groups each panel got half the height,
    # too little for the Instructions editor or the budget meters at the default window size. A dock can
    # still be dragged out of the group to see two panels at once (the layout is saved).
    first, *rest = [d for d in docks if d is not None]
    for dock in rest:
        window.tabifyDockWidget(first, dock)
    first.raise_()
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
