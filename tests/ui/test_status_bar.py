"""G1 status bar (model, run status, tokens, cost) and the light/dark style sheets (G6 style)."""

from __future__ import annotations

import re
from importlib import resources

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QLabel

from workbench.engine.events import Event
from workbench.engine.usage import Usage
from workbench.ui import style
from workbench.ui.status_bar import RunStatusBar, format_cost, format_usage, model_label


@pytest.fixture(autouse=True)
def _qt_app(qapp):
    qapp.setQuitOnLastWindowClosed(False)
    return qapp


@pytest.fixture
def bar(qtbot) -> RunStatusBar:
    b = RunStatusBar()
    qtbot.addWidget(b)
    return b


@pytest.fixture
def clean_style(qapp):
    """Leave the application's style sheet and palette as they were."""
    sheet, palette = qapp.styleSheet(), qapp.palette()
    yield qapp
    qapp.setStyleSheet(sheet)
    qapp.setPalette(palette)
    for name in ("_workbench_theme", "_workbench_follows_system"):
        qapp.setProperty(name, None)


# --- the bar ---------------------------------------------------------------------------------------------


def test_model_names(bar):
    assert bar.model_label.text() == "no model"
    bar.set_model("demo")
    assert bar.model_label.text() == "demo (offline)"
    bar.set_model("openai/gpt-4.1-mini")
    assert bar.model_label.text() == "openai/gpt-4.1-mini"
    assert model_label(None) == "no model"


def test_usage_with_cost(bar):
    run = Usage(input_tokens=1234, output_tokens=56, thoughts_tokens=4, cost_usd=0.0123, calls=1).to_dict()
    thread = Usage(input_tokens=20_000, output_tokens=900, cost_usd=1.5, calls=7).to_dict()
    bar.set_usage(run, thread)
    assert bar.usage_label.text() == "Run 1,234 in / 60 out · $0.0123  |  Thread 20,000 in / 900 out · $1.50"
    assert "7 model call(s)" in bar.usage_label.toolTip()


def test_usage_unpriced_and_partly_priced(bar):
    unpriced = Usage(input_tokens=10, output_tokens=2, cost_usd=None, calls=1, unpriced_calls=1).to_dict()
    bar.set_usage(unpriced, unpriced)
    assert bar.usage_label.text() == (
        "Run 10 in / 2 out · cost: n/a (unpriced)  |  Thread 10 in / 2 out · cost: n/a (unpriced)"
    )
    mixed = Usage(cost_usd=0.5, calls=3, unpriced_calls=2).to_dict()
    assert format_cost(mixed) == "$0.5000 (+2 unpriced calls)"


def test_usage_before_any_call(bar):
    assert bar.usage_label.text() == "Thread 0 in / 0 out · $0.0000"
    assert format_usage(None) == "0 in / 0 out · $0.0000"


def test_status_words_and_colours(bar):
    assert bar.status_label.text() == "Ready"
    for status, words, cls in [
        ("running", "Running…", "running"),
        ("done", "Done", "ok"),
        ("failed", "Failed", "error"),
        ("aborted", "Stopped", "aborted"),
        ("interrupted", "Waiting for your decision", "waiting"),
    ]:
        bar.set_status(status)
        assert bar.status_label.text() == words
        assert bar.status_label.property("status") == cls


def test_handle_event_from_usage_updated_and_run_events(bar):
    run = Usage(input_tokens=100, output_tokens=10, cost_usd=0.001, calls=1).to_dict()
    bar.set_model("openai/gpt-4.1")
    bar.handle_event(Event("run_started", "t", "r", 0, {"input_chars": 5}))
    assert bar.status_label.text() == "Running…"
    bar.handle_event(Event("usage_updated", "t", "r", 1, {"run_usage": run, "thread_usage": run, "model": "gpt-4.1-2025-04-14"}))
    assert bar.usage_label.text().startswith("Run 100 in / 10 out · $0.0010")
    assert bar.model_label.text() == "openai/gpt-4.1"  # the chosen name, not the provider's dated id
    bar.handle_event(Event("run_finished", "t", "r", 2, {"status": "done", "usage": run}))
    assert bar.status_label.text() == "Done"


# --- style -----------------------------------------------------------------------------------------------


def _sheet(theme: str) -> str:
    return resources.files("workbench.resources").joinpath("style", f"{theme}.qss").read_text(encoding="utf-8")


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_sheets_ship_as_resources_and_match_status_color(theme):
    sheet = _sheet(theme)
    for status, color in style.STATUS_COLORS[theme].items():
        assert re.search(rf'\[status="{status}"\]\s*\{{\s*color:\s*{color};', sheet), (theme, status)
        assert style.status_color(status, dark=theme == "dark") == color
    assert '[role="code"]' in sheet and "monospace" in sheet
    assert ":focus" in sheet


def test_status_color_aliases():
    assert style.status_color("done", dark=False) == style.STATUS_COLORS["light"]["ok"]
    assert style.status_color("failed", dark=True) == style.STATUS_COLORS["dark"]["error"]
    assert style.status_color("rejected", dark=False) == style.STATUS_COLORS["light"]["denied"]
    assert style.status_color("whatever", dark=False) == style.STATUS_COLORS["light"]["aborted"]
    assert QColor(style.status_color("ok", dark=True)).isValid()


def test_apply_style_follows_the_system(clean_style):
    app = clean_style
    theme = style.apply_style(app)
    assert theme == style.system_theme(app) and style.current_theme(app) == theme
    assert app.styleSheet() == _sheet(theme)


def test_palette_decides_when_the_scheme_is_unknown(clean_style, monkeypatch):
    app = clean_style
    hints = app.styleHints()
    monkeypatch.setattr(type(hints), "colorScheme", lambda self: Qt.ColorScheme.Unknown)
    dark = QPalette()
    dark.setColor(QPalette.ColorRole.Window, QColor("#202020"))
    dark.setColor(QPalette.ColorRole.WindowText, QColor("#f0f0f0"))
    app.setPalette(dark)
    assert style.system_theme(app) == "dark"
    light = QPalette()
    light.setColor(QPalette.ColorRole.Window, QColor("#f0f0f0"))
    light.setColor(QPalette.ColorRole.WindowText, QColor("#101010"))
    app.setPalette(light)
    assert style.system_theme(app) == "light"


def test_style_is_reapplied_when_the_colour_scheme_changes(clean_style, monkeypatch):
    app = clean_style
    hints = app.styleHints()
    scheme = {"now": Qt.ColorScheme.Light}
    monkeypatch.setattr(type(hints), "colorScheme", lambda self: scheme["now"])
    assert style.apply_style(app) == "light" and app.styleSheet() == _sheet("light")
    scheme["now"] = Qt.ColorScheme.Dark
    hints.colorSchemeChanged.emit(Qt.ColorScheme.Dark)
    assert style.current_theme(app) == "dark" and app.styleSheet() == _sheet("dark")
    assert style.is_dark(app)
    # An explicit theme stays put.
    assert style.apply_style(app, "light") == "light"
    hints.colorSchemeChanged.emit(Qt.ColorScheme.Dark)
    assert style.current_theme(app) == "light"


def test_status_property_repolishes_a_label(clean_style, qtbot):
    style.apply_style(clean_style, "light")
    label = QLabel("x")
    qtbot.addWidget(label)
    label.show()
    style.set_status_property(label, "failed")
    assert label.property("status") == "error"
    assert label.palette().color(QPalette.ColorRole.WindowText).name() == style.STATUS_COLORS["light"]["error"]
