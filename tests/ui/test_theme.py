"""G1 (issue 10 item 11): View → Theme (System / Light / Dark) applies at once and is remembered in the
user settings; the choice is made through the real menu action."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from PySide6.QtWidgets import QApplication


@pytest.fixture
def restore_theme() -> Any:
    from workbench.ui.style import apply_style

    yield
    apply_style(QApplication.instance(), None)  # other tests see the system theme again


def _theme_action(window: Any, name: str) -> Any:
    menu = window.theme_menu
    assert menu.title().replace("&", "") == "Theme"
    assert menu.menuAction() in window.view_menu.actions(), "Theme is in the View menu"
    actions = {a.text().replace("&", ""): a for a in menu.actions()}
    assert list(actions) == ["System", "Light", "Dark"]
    return actions[name]


async def test_g1_theme_dark_then_light_applies_at_once_and_is_saved(windows: Any, demo_workspace: Path,
                                                                     restore_theme: Any, tmp_path: Path) -> None:
    from workbench.config import load_user_settings
    from workbench.ui.style import current_theme, is_dark

    from workbench.engine.messages import Message
    from workbench.ui.markdown_render import code_boxes, colors

    window = await windows(demo_workspace)
    window.transcript.render_messages([Message.assistant("Run:\n\n```python\nx = 1\n```\n")])
    body = window.transcript.messages()[-1].body

    def code_bg() -> str:
        box = code_boxes(body.document())[0]
        return box.cellAt(0, 0).format().background().color().name()

    app = QApplication.instance()
    dark = _theme_action(window, "Dark")
    assert dark.isCheckable()
    dark.trigger()
    assert current_theme(app) == "dark" and is_dark()
    assert dark.isChecked() and not _theme_action(window, "Light").isChecked()
    assert load_user_settings().theme == "dark"
    # the transcript follows at once (its blocks' colours come from the theme)
    assert window.transcript._palette["assistant_bg"] == "#22272e"
    assert code_bg() == colors(True)["code_bg"], "code boxes take the dark colours"
    window.grab().save(str(tmp_path / "dark.png"))
    _theme_action(window, "Light").trigger()
    assert current_theme(app) == "light" and not is_dark()
    assert code_bg() == colors(False)["code_bg"]
    assert load_user_settings().theme == "light"
    _theme_action(window, "System").trigger()
    assert load_user_settings().theme == "system"
    assert app.property("_workbench_follows_system")


async def test_g1_saved_theme_is_applied_when_the_window_opens(windows: Any, demo_workspace: Path,
                                                               restore_theme: Any) -> None:
    from workbench.config import load_user_settings, save_user_settings
    from workbench.ui.style import current_theme

    settings = load_user_settings()
    settings.theme = "dark"
    save_user_settings(settings)
    window = await windows(demo_workspace)
    assert current_theme(QApplication.instance()) == "dark"
    assert _theme_action(window, "Dark").isChecked()


def test_g1_theme_setting_is_lenient() -> None:
    from workbench.config import UserSettings

    assert UserSettings.from_dict({"theme": "dark"}).theme == "dark"
    assert UserSettings.from_dict({"theme": "purple"}).theme == "system"
    assert UserSettings.from_dict({}).theme == "system"
    assert UserSettings.from_dict(UserSettings(theme="light").to_dict()).theme == "light"
