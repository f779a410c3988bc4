"""Test helpers for the decision inbox and batch tests (Q1, Q2, G12): threads left waiting for
decisions in a workspace's store, made by real runs of the engine (a scripted model asks for
``write_file`` calls, which the default rules ask about), then closed — as another window or the
CLI (``--approve ask``) would leave them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import QPoint, QRect
from PySide6.QtWidgets import QWidget


async def leave_pending(workspace: Path, *batches: list[str], title: str = "") -> list[str]:
    """One thread per batch, each suspended on its batch's ``write_file`` calls (one call per file
    name, content = the name). Returns the thread ids, oldest first."""
    from workbench.engine.models.scripted import ScriptedModel, tool_reply
    from workbench.session import Session

    ids: list[str] = []
    for n, names in enumerate(batches):
        calls = [("write_file", {"path": f"/project/{name}", "content": name}) for name in names]
        session = await Session.open(workspace, model=ScriptedModel([tool_reply(*calls)]), trust=True)
        try:
            result = await session.run(f"{title or 'Write'} {' and '.join(names)}")
            assert result.status == "interrupted", result
            ids.append(session.thread_id)
        finally:
            await session.close()
    return ids


def global_rect(widget: QWidget) -> QRect:
    return QRect(widget.mapToGlobal(QPoint(0, 0)), widget.size())


def decisions_panel(window: Any) -> Any:
    """The window's Decisions panel, tabbed with a stand-in "Other" dock on the right (the app tabs it
    with the other panels; those read files, which these tests do not need)."""
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QLabel

    from workbench.ui import panels

    if window.dock("Decisions") is None:
        other = window.add_dock("Other", QLabel("another panel"), Qt.DockWidgetArea.RightDockWidgetArea)
        panels.install_decisions_panel(window, tab_with=other)
    return window.dock("Decisions").widget()


async def warmed(window: Any) -> None:
    """Wait for the window's model to finish importing litellm (started when the workspace opened):
    a model call racing that import on a fresh interpreter once failed with pydantic's "partially
    initialized module" ImportError (an import-order race outside these tests' subject)."""
    import asyncio

    model = getattr(window.session.engine.agent, "model", None)
    warm = getattr(model, "warm_up", None)
    if callable(warm):
        await asyncio.wrap_future(warm())


async def open_window(windows: Any, workspace: Path, **kwargs: Any) -> Any:
    """A window with the Decisions panel plugged in before the workspace opens (as the app does), its
    model's litellm import finished."""
    window = await windows()
    decisions_panel(window)
    await window.open_workspace(workspace, **kwargs)
    await warmed(window)
    return window
