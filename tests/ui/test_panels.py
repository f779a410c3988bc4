"""G2: a panel module that fails to import (or to build) is shown, never silently dropped."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtWidgets import QLabel

import workbench.ui
from tests.ui.helpers import find_dialog, wait_for
from workbench.engine.middleware import Question
from workbench.ui.panels import PanelError


def _error_text(window: Any, title: str) -> str:
    dock = window.dock(title)
    assert dock is not None, f"no {title} dock at all: the failure was dropped"
    label = dock.widget().findChild(QLabel, "panelLoadErrorText") or dock.widget()
    return label.text()


async def test_G2_a_panel_module_that_fails_to_import_shows_the_error_in_its_dock_and_the_log(
        windows: Any, demo_workspace: Path, monkeypatch: pytest.MonkeyPatch, caplog: Any) -> None:
    from workbench.app import plug_panels

    monkeypatch.setitem(sys.modules, "workbench.ui.plan_panel", None)  # importing it now fails
    caplog.set_level(logging.ERROR)
    window = await windows()
    plug_panels(window)
    assert isinstance(window.dock("Plan").widget(), PanelError)
    text = _error_text(window, "Plan")
    assert "Plan panel could not be loaded" in text and "workbench.ui.plan_panel" in text
    assert "ModuleNotFoundError" in text
    assert window.dock("Plan").toggleViewAction().isEnabled()  # listed in View like any dock
    assert "Plan" in window.panel_errors
    assert any("Plan panel could not be loaded" in r.getMessage() and r.exc_info for r in caplog.records)
    # The other panels still load and follow the session.
    assert set(window.panels) == {"Skills", "Instructions", "Budget", "Artifacts", "Decisions", "Tasks", "Context",
                                  "Servers"}
    await window.open_workspace(demo_workspace)
    await wait_for(lambda: {r.name for r in window.panels["Skills"].model.rows} >= {"summarize"}, 10,
                   "the Skills panel to fill")
    await window._settle_panels()


async def test_G2_a_panel_that_fails_to_build_and_a_broken_events_module_are_shown(
        windows: Any, monkeypatch: pytest.MonkeyPatch, caplog: Any) -> None:
    from workbench.app import plug_panels
    from workbench.ui import budget_panel

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("meter font missing")

    monkeypatch.setattr(budget_panel, "BudgetPanel", broken)
    monkeypatch.setitem(sys.modules, "workbench.ui.events_panel", None)
    caplog.set_level(logging.ERROR)
    window = await windows()
    plug_panels(window)
    assert "RuntimeError: meter font missing" in _error_text(window, "Budget")
    events = _error_text(window, "Events")
    assert "Events panel could not be loaded" in events and "workbench.ui.events_panel" in events
    assert window.dock("Events").isVisible()  # the error is in sight, not in a hidden dock
    assert {"Budget", "Events"} <= set(window.panel_errors)
    assert "Budget" not in window.panels
    await window._settle_panels()


async def test_G2_when_the_panels_module_itself_fails_the_window_says_so(
        windows: Any, monkeypatch: pytest.MonkeyPatch, caplog: Any) -> None:
    from workbench.app import plug_panels

    monkeypatch.setitem(sys.modules, "workbench.ui.panels", None)
    monkeypatch.delattr(workbench.ui, "panels", raising=False)
    caplog.set_level(logging.ERROR)
    window = await windows()
    plug_panels(window)
    text = _error_text(window, "Panels")
    assert "workbench.ui.panels" in text and "could not be loaded" in text
    assert any("workbench.ui.panels" in r.getMessage() for r in caplog.records)
    await window._settle_panels()


async def test_G3_a_budget_dialog_that_fails_to_import_is_shown_in_the_fallback_dialog_and_logged(
        qapp: Any, monkeypatch: pytest.MonkeyPatch, caplog: Any) -> None:
    from workbench.ui import decision_dialogs, qt_async

    monkeypatch.setitem(sys.modules, "workbench.ui.budget_dialog", None)
    monkeypatch.delattr(workbench.ui, "budget_dialog", raising=False)
    caplog.set_level(logging.ERROR)
    question = Question(id="q1", kind="budget",
                        payload={"scope": "run", "fields": {"total_tokens": {"spent": 150, "limit": 100}}})
    task = qt_async.start(decision_dialogs.ask_budget_holds(None, [question]), name="budget")
    dialog = await find_dialog("budget_hold_dialog")
    note = dialog.findChild(QLabel, "budget_dialog_error")
    assert note is not None and note.isVisible()
    assert "workbench.ui.budget_dialog" in note.text() and "ModuleNotFoundError" in note.text()
    assert any("workbench.ui.budget_dialog" in r.getMessage() and r.exc_info for r in caplog.records)
    dialog.continue_button.click()
    decisions = await task
    assert decisions == {"q1": dialog.decision}
