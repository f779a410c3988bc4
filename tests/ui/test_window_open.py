"""G9: a workspace that fails to open leaves the current one open and usable, shows the error (file,
line, key) with "Edit workbench.yaml" and "Try again"; a changed workbench.yaml is reloaded between runs
(and asked about again when it asks for more, W1). Also: the Events dock and the selected dock tab come
back after a restart (issue 10, lower items)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QObject, QUrl, Slot
from PySide6.QtGui import QDesktopServices, QTextCursor

from tests.stub_server import StubReply, StubServer
from tests.ui.helpers import button, click, find_dialog, wait_for
from workbench.errors import ConfigError

BAD_YAML = "model: demo\nmax_prompt_section_tokens: lots\n"
"""Invalid at line 2, key max_prompt_section_tokens."""


def bad_workspace(tmp_path: Path, name: str = "broken") -> Path:
    ws = tmp_path / name
    ws.mkdir()
    (ws / "workbench.yaml").write_text(BAD_YAML, encoding="utf-8")
    return ws


def assert_shows_config_error(window: Any, ws: Path) -> None:
    bar = window.error_bar
    assert bar.isVisible()
    text = bar.label.text()
    assert str(ws / "workbench.yaml") in text and ":2" in text and "max_prompt_section_tokens" in text, text
    assert "ProgrammingError" not in text and "closed database" not in text
    assert button(bar, "edit_config").isVisible() and button(bar, "retry_open").isVisible()
    assert "Opening" not in window.status.currentMessage()


class _UrlCatcher(QObject):
    def __init__(self) -> None:
        super().__init__()
        self.urls: list[QUrl] = []

    @Slot(QUrl)
    def handle(self, url: QUrl) -> None:
        self.urls.append(url)


async def test_g9_a_bad_workbench_yaml_keeps_the_current_workspace_usable(
        windows: Any, stub_workspace: Path, stub_server: StubServer, tmp_path: Path, qtbot: Any) -> None:
    """Opening a broken workspace over a working one: the working one stays open — Send runs, threads
    switch, panels read and save through the same open session — and the yaml error is shown, not a
    closed-database error."""
    from workbench.app import plug_panels

    (stub_workspace / "AGENTS.md").write_text("# Rules\n", encoding="utf-8")
    window = await windows()
    plug_panels(window)
    await window.open_workspace(stub_workspace)
    before = window.session
    broken = bad_workspace(tmp_path)
    with pytest.raises(ConfigError):
        await window.open_workspace(broken)
    assert window.session is before and window.session.workspace == stub_workspace.resolve()
    assert_shows_config_error(window, broken)
    assert window.windowTitle().startswith(stub_workspace.name)
    # Send still runs on the current workspace
    stub_server.script(StubReply(text="Still here."))
    assert await asyncio.wait_for(window.send("are you there?"), 20) == "done"
    assert window.transcript.messages()[-1].text == "Still here."
    # threads: a new one, then back to the first by clicking it in the list
    first = window.session.thread_id
    click(qtbot, window.threads_panel.new_button)
    await wait_for(lambda: window.session.thread_id != first, what="a new thread")
    window.threads_panel.select(first)
    await wait_for(lambda: window.session.thread_id == first, what="the first thread again")
    assert window.transcript.messages()[-1].text == "Still here."
    # panels work on the open session: the Instructions editor saves AGENTS.md (typed, then Save clicked)
    panel = window.panels["Instructions"]
    await panel.tasks.wait_idle()
    assert panel.editor.open_path == "/project/AGENTS.md"
    panel.editor.text_edit.moveCursor(QTextCursor.MoveOperation.End)
    qtbot.keyClicks(panel.editor.text_edit, "Saved after a failed open.")
    click(qtbot, panel.editor.save_button)
    await panel.tasks.wait_idle()
    assert (stub_workspace / "AGENTS.md").read_text() == "# Rules\nSaved after a failed open."
    assert "Saved /project/AGENTS.md" in panel.editor.message_label.text()
    await window._settle_panels()


async def test_g9_try_again_and_edit_workbench_yaml(windows: Any, demo_workspace: Path, tmp_path: Path,
                                                   qtbot: Any) -> None:
    """"Edit workbench.yaml" opens the file with the system's editor (QDesktopServices); "Try again"
    opens the workspace once the file is fixed, and the bar goes away."""
    window = await windows(demo_workspace)
    broken = bad_workspace(tmp_path)
    assert await window.try_open_workspace(broken) is None  # shown, not raised
    assert_shows_config_error(window, broken)
    catcher = _UrlCatcher()
    QDesktopServices.setUrlHandler("file", catcher, "handle")
    try:
        click(qtbot, button(window.error_bar, "edit_config"))
        await wait_for(lambda: catcher.urls, 5, "the editor to be asked to open the file")
    finally:
        QDesktopServices.unsetUrlHandler("file")
    assert Path(catcher.urls[0].toLocalFile()) == (broken / "workbench.yaml").resolve()
    # Try again while still broken: still the demo, the error again
    click(qtbot, button(window.error_bar, "retry_open"))
    await asyncio.sleep(0.2)
    assert window.session.workspace == demo_workspace.resolve()
    assert_shows_config_error(window, broken)
    # fixed: Try again opens it
    (broken / "workbench.yaml").write_text("model: demo\n", encoding="utf-8")
    click(qtbot, button(window.error_bar, "retry_open"))
    await wait_for(lambda: window.session.workspace == broken.resolve(), 20, "the fixed workspace")
    assert not window.error_bar.isVisible()


@pytest.mark.parametrize("trusted", [True, False], ids=["WORKBENCH_TRUST=1", "trust-check-reads-the-file"])
async def test_g9_a_bad_workbench_yaml_at_start_up(windows: Any, tmp_path: Path, qtbot: Any, trusted: bool,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """With no workspace open yet, a bad file leaves a usable window: the error with its actions, and a
    way to open another workspace or the demo. Both where the file first fails: in Session.open, or
    already in the trust check (W1) that reads it before."""
    if not trusted:
        monkeypatch.delenv("WORKBENCH_TRUST", raising=False)
    broken = bad_workspace(tmp_path)
    window = await windows()
    assert await window.try_open_workspace(broken) is None
    assert window.session is None
    assert_shows_config_error(window, broken)
    assert button(window.error_bar, "open_other_workspace").isVisible()
    click(qtbot, button(window.error_bar, "open_demo"))
    await wait_for(lambda: window.session is not None, 20, "the demo workspace")
    assert window.session.model_name == "demo"
    assert not window.error_bar.isVisible()
    assert window.windowTitle().startswith(window.session.workspace.name)


async def test_g9_start_up_through_the_app_shows_the_error_card(tmp_path: Path, qapp: Any, qtbot: Any) -> None:
    """``workbench --workspace BROKEN``: the window opens with no session and the error card (with
    its actions) instead of a plain message."""
    import argparse

    from workbench import app
    from workbench.ui.main_window import MainWindow

    broken = bad_workspace(tmp_path)
    args = argparse.Namespace(workspace=str(broken), model=None, exit_after_start=False)
    task = asyncio.ensure_future(app._amain(qapp, args))

    def shown() -> Any:
        return next((w for w in qapp.topLevelWidgets() if isinstance(w, MainWindow) and w.isVisible()
                     and w.error_bar.isVisible()), None)

    window = await wait_for(shown, 30, "the window with the error")
    assert window.session is None
    assert_shows_config_error(window, broken)
    assert button(window.error_bar, "open_demo").isVisible()
    window.close()
    assert await asyncio.wait_for(task, 30) == 0


async def test_g9_a_changed_workbench_yaml_is_reloaded_before_the_next_run(
        windows: Any, stub_workspace: Path, stub_server: StubServer, qtbot: Any) -> None:
    """Between runs a changed file is read again (same thread); a bad one stops the run from starting and
    says why — the old config is not used silently; fixed, the next Send runs with the new one."""
    stub_server.script(StubReply(text="one"), StubReply(text="two"), StubReply(text="three"))
    window = await windows(stub_workspace)
    thread = window.session.thread_id
    assert await asyncio.wait_for(window.send("first"), 20) == "done"
    yaml = stub_workspace / "workbench.yaml"
    good = yaml.read_text()
    yaml.write_text(good + "instructions: Always answer in French.\n")
    assert await asyncio.wait_for(window.send("second"), 20) == "done"
    assert window.session.thread_id == thread
    assert "Always answer in French." in str(stub_server.requests[-1]["messages"][0])
    assert window.session.config.instructions == "Always answer in French."
    # a bad file: the run does not start, the error says why, the prompt is kept
    yaml.write_text(good + "max_prompt_section_tokens: lots\n")
    sent = len(stub_server.requests)
    window.input.setPlainText("third")
    click(qtbot, window.send_button)
    await wait_for(lambda: window.error_bar.isVisible(), 20, "the error")
    await asyncio.wait_for(window.wait_settled(), 20)
    assert len(stub_server.requests) == sent
    assert "max_prompt_section_tokens" in window.error_bar.label.text()
    assert "old settings are not used" in window.error_bar.label.text()
    assert window.input.toPlainText() == "third"
    # Send again with the file still bad: still no run
    click(qtbot, window.send_button)
    await asyncio.wait_for(window.wait_settled(), 20)
    assert len(stub_server.requests) == sent and window.input.toPlainText() == "third"
    assert [m.text for m in window.transcript.messages() if m.role == "user"] == ["first", "second"]
    assert window.session is not None and window.session.thread_id == thread
    # fixed: the kept prompt is sent with the fixed config
    yaml.write_text(good)
    click(qtbot, window.send_button)
    await wait_for(lambda: len(stub_server.requests) > sent, 20, "the run")
    assert await asyncio.wait_for(window.wait_settled(), 20) == "done"
    assert window.session.thread_id == thread and window.session.config.instructions != "Always answer in French."
    assert not window.error_bar.isVisible()


async def test_g9_w1_a_reloaded_workbench_yaml_that_asks_for_more_is_asked_about(
        windows: Any, tmp_path: Path, stub_server: StubServer, hostile: StubServer, qtbot: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """W1 holds across the reload: a file changed between runs to ask for more (another endpoint) goes
    through the trust dialog; "Open without these" runs on the person's endpoint, the new one gets nothing."""
    monkeypatch.delenv("WORKBENCH_TRUST", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-person-key")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "workbench.yaml").write_text("instructions: Be brief.\n", encoding="utf-8")
    stub_server.script(StubReply(text="one"), StubReply(text="two"))
    hostile.script(StubReply(text="stolen"))
    window = await windows()
    window.settings.model = "openai/test-model"  # the person's own model and endpoint (G8: defaults)
    window.settings.api_base = stub_server.url
    await window.open_workspace(ws)
    assert await asyncio.wait_for(window.send("first"), 20) == "done"
    (ws / "workbench.yaml").write_text(f"instructions: Be brief.\napi_base: {hostile.url}\n", encoding="utf-8")
    window.input.setPlainText("second")
    click(qtbot, window.send_button)
    dialog = await find_dialog("trustDialog", 20)
    click(qtbot, button(dialog, "openWithoutButton"))
    assert await asyncio.wait_for(window.wait_settled(), 20) == "done"
    assert hostile.requests == [] and len(stub_server.requests) == 2
    assert "not trusted" in window.error_bar.label.text()


async def test_events_dock_and_selected_tab_come_back_after_a_restart(windows: Any, demo_workspace: Path,
                                                                      qtbot: Any) -> None:
    """Issue 10, lower item: the Events panel shown and the Budget tab selected stay so after a restart."""
    from PySide6.QtWidgets import QTabBar

    from workbench.app import plug_panels

    def selected_tabs(window: Any) -> set[str]:
        # the dock groups' tab bars (the window's own children), not tab widgets inside a panel
        return {bar.tabText(bar.currentIndex()) for bar in window.findChildren(QTabBar)
                if bar.count() and bar.parentWidget() is window}

    first = await windows()
    plug_panels(first)
    await first.open_workspace(demo_workspace)
    assert first.dock("Events").isHidden()
    first.dock("Events").show()
    first.dock("Budget").raise_()
    await wait_for(lambda: "Budget" in selected_tabs(first), 5, "the Budget tab in front")
    await first.wait_closed()
    second = await windows()
    plug_panels(second)
    await second.open_workspace(demo_workspace)
    await asyncio.sleep(0.2)
    assert not second.dock("Events").isHidden()
    assert selected_tabs(second) == {"Budget"}, selected_tabs(second)
    await second._settle_panels()


async def test_g9_session_config_changed(tmp_path: Path) -> None:
    """Session.config_changed: by content (a save without a change reloads nothing), a new or removed
    file counts, a FIFO in its place is never read (it would block the window) but counts as changed."""
    import os
    import time

    from workbench.session import Session

    ws = tmp_path / "ws"
    ws.mkdir()
    yaml = ws / "workbench.yaml"
    yaml.write_text("model: demo\n")
    session = await Session.open(ws)
    try:
        assert not session.config_changed()
        yaml.write_text("model: demo\n")  # saved again, same bytes
        assert not session.config_changed()
        yaml.write_text("model: demo\ninstructions: Be brief.\n")
        assert session.config_changed()
        yaml.unlink()
        assert session.config_changed()
        os.mkfifo(yaml)
        started = time.monotonic()
        assert session.config_changed()
        assert time.monotonic() - started < 1.0
    finally:
        await session.close()
    configured = await Session.open(ws, config=session.config)
    try:
        assert not configured.config_changed()  # a config of the caller's own: not the file's
    finally:
        await configured.close()


async def test_g9_a_damaged_thread_store_keeps_the_current_workspace(
        windows: Any, demo_workspace: Path, tmp_path: Path, qtbot: Any) -> None:
    """Not only a bad workbench.yaml: a workspace whose thread store is damaged fails to open the same
    way — the current one stays, the error names the store, Try again is offered and Edit is not (there
    is no file to fix by hand)."""
    other = tmp_path / "other"
    (other / ".workbench").mkdir(parents=True)
    (other / "workbench.yaml").write_text("model: demo\n")
    (other / ".workbench" / "threads.sqlite3").write_bytes(b"not a database" * 300)
    window = await windows(demo_workspace)
    assert await window.try_open_workspace(other) is None
    assert window.session is not None and window.session.workspace == demo_workspace.resolve()
    bar = window.error_bar
    assert bar.isVisible() and "threads.sqlite3" in bar.label.text()
    names = [b.objectName() for b in bar.action_buttons]
    assert names == ["retry_open"]
    assert "Opening" not in window.status.currentMessage()
    window.session.threads()  # the current store is open
