"""The main window against the demo model and the stub server (issue 3 tests)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.stub_server import StubReply, StubServer
from tests.ui.helpers import button, click, find_dialog, hand_settled, visible_dialog, wait_for


async def _answer_approvals_until_done(window: Any, qtbot: Any, choice: str = "approve_once",
                                       timeout: float = 20.0) -> list[str]:
    """Click ``choice`` in every approval dialog until the run settles; the tools that asked."""
    asked: list[str] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while window.busy:
        dialog = visible_dialog("approval_dialog")
        if dialog is not None:
            await hand_settled()  # a person looks at the new call before deciding (G7)
            asked.append(dialog.current.payload["tool"])
            click(qtbot, button(dialog, choice))
        assert loop.time() < deadline, "the run did not settle"
        await asyncio.sleep(0.01)
    return asked


async def test_demo_session_plays_to_the_end(windows: Any, demo_workspace: Path, qtbot: Any) -> None:
    window = await windows(demo_workspace)
    assert window.session.model_name == "demo"
    assert "demo" in window.status.model_label.text()
    window.input.setPlainText("Show me around")
    click(qtbot, window.send_button)
    asked = await _answer_approvals_until_done(window, qtbot)
    assert asked == ["write_file", "edit_file"]
    assert window.session.status == "done"
    assert (demo_workspace / "notes.md").is_file()
    assert "Keep notes.md short" in (demo_workspace / "AGENTS.md").read_text()
    messages = window.transcript.messages()
    assert [m.role for m in messages][:1] == ["user"]
    assert messages[-1].role == "assistant" and "offline *demo* model" in messages[-1].text
    assert not messages[-1].streaming  # rendered as markdown once complete
    rows = {r.name: r for r in window.transcript.tool_rows()}
    assert rows["write_file"].status == "ok" and rows["read_file"].result
    assert "Done" in window.status.status_label.text()
    assert "in /" in window.status.usage_label.text()


def _write_call(content: str = "hello\n", path: str = "/project/out.txt") -> StubReply:
    return StubReply(tool_calls=[("write_file", {"path": path, "content": content})], usage=(50, 10))


async def test_approve_writes_the_file(windows: Any, stub_workspace: Path, stub_server: StubServer,
                                       qtbot: Any) -> None:
    stub_server.script(_write_call(), StubReply(text="I wrote **out.txt**.", usage=(80, 6)))
    window = await windows(stub_workspace)
    assert window.session.model_name == "openai/test-model"
    window.input.setPlainText("Write out.txt")
    click(qtbot, window.send_button)
    dialog = await find_dialog("approval_dialog")
    assert "write_file" in dialog.tool_label.text()
    assert "ask" in dialog.reason_label.text()
    await wait_for(lambda: "+hello" in dialog.diff_view.toPlainText(), what="the diff")
    assert dialog.tabs.currentWidget() is dialog.diff_view
    # the window keeps working while the dialog is up: the loop runs, the transcript is there
    assert window.transcript.tool_row("call_stub_0").status == "waiting"
    click(qtbot, button(dialog, "approve_once"))
    assert await asyncio.wait_for(window.wait_settled(), 20) == "done"
    assert (stub_workspace / "out.txt").read_text() == "hello\n"
    row = window.transcript.tool_row("call_stub_0")
    assert row.status == "ok"
    assert window.transcript.messages()[-1].text == "I wrote **out.txt**."
    assert "130 in / 16 out" in window.status.usage_label.text()
    tool_msgs = [m for m in stub_server.requests[-1]["messages"] if m["role"] == "tool"]
    assert tool_msgs and "out.txt" in tool_msgs[0]["content"]


async def test_reject_sends_the_message_to_the_model(windows: Any, stub_workspace: Path,
                                                     stub_server: StubServer, qtbot: Any) -> None:
    stub_server.script(_write_call(), StubReply(text="Understood, I will not write it."))
    window = await windows(stub_workspace)
    window.input.setPlainText("Write out.txt")
    click(qtbot, window.send_button)
    dialog = await find_dialog("approval_dialog")
    dialog.reject_message.setText("use /scratch instead")
    click(qtbot, button(dialog, "reject"))
    assert await asyncio.wait_for(window.wait_settled(), 20) == "done"
    assert not (stub_workspace / "out.txt").exists()
    tool_msgs = [m for m in stub_server.requests[-1]["messages"] if m["role"] == "tool"]
    assert "use /scratch instead" in tool_msgs[-1]["content"]
    assert window.transcript.tool_row("call_stub_0").status == "rejected"


async def test_edit_uses_the_edited_arguments(windows: Any, stub_workspace: Path, stub_server: StubServer,
                                              qtbot: Any) -> None:
    stub_server.script(_write_call("original\n"), StubReply(text="ok"))
    window = await windows(stub_workspace)
    window.input.setPlainText("Write out.txt")
    click(qtbot, window.send_button)
    dialog = await find_dialog("approval_dialog")
    await wait_for(lambda: "+original" in dialog.diff_view.toPlainText(), what="the diff")
    click(qtbot, button(dialog, "edit_arguments"))
    dialog.args_edit.setPlainText('{"path": "/project/out.txt", "content": ')  # invalid JSON first
    assert not button(dialog, "approve_once").isEnabled()
    assert "Not valid JSON" in dialog.edit_error.text()
    dialog.args_edit.setPlainText('{"path": "/project/out.txt", "content": "edited\\n"}')
    assert button(dialog, "approve_once").isEnabled()
    assert "+edited" in dialog.diff_view.toPlainText()
    click(qtbot, button(dialog, "approve_once"))
    assert await asyncio.wait_for(window.wait_settled(), 20) == "done"
    assert (stub_workspace / "out.txt").read_text() == "edited\n"


async def test_stop_mid_stream_keeps_the_partial_answer(windows: Any, stub_workspace: Path,
                                                        stub_server: StubServer, qtbot: Any) -> None:
    stub_server.script(StubReply(text="word " * 400, chunks=400, chunk_delay=0.01))
    window = await windows(stub_workspace)
    window.input.setPlainText("Talk a lot")
    click(qtbot, window.send_button)
    await wait_for(lambda: [m for m in window.transcript.messages() if m.role == "assistant"
                            and m.text.count("word") >= 20], timeout=20, what="streamed text")
    assert window.stop_button.isEnabled()
    click(qtbot, window.stop_button)
    assert await asyncio.wait_for(window.wait_settled(), 20) == "aborted"
    answer = window.transcript.messages()[-1]
    assert answer.role == "assistant" and answer.tag_text == "stopped"
    assert 20 <= answer.text.count("word") < 400
    stored = window.session.messages[-1]
    assert stored.role == "assistant" and stored.meta.get("partial") and stored.content.startswith("word")
    assert window.transcript.notices("info")


async def test_suspended_approval_reappears_after_restart(windows: Any, stub_workspace: Path,
                                                          stub_server: StubServer, qtbot: Any) -> None:
    stub_server.script(_write_call(), StubReply(text="Written after the restart."))
    first = await windows(stub_workspace)
    first.input.setPlainText("Write out.txt")
    click(qtbot, first.send_button)
    await find_dialog("approval_dialog")
    thread = first.session.thread_id
    await first.wait_closed()  # the app closes with the run suspended
    assert visible_dialog("approval_dialog") is None
    second = await windows(stub_workspace)
    assert second.session.thread_id == thread
    dialog = await find_dialog("approval_dialog")
    assert dialog.current.payload["tool"] == "write_file"
    assert second.transcript.notices("pending")
    click(qtbot, button(dialog, "approve_once"))
    assert await asyncio.wait_for(second.wait_settled(), 20) == "done"
    assert (stub_workspace / "out.txt").read_text() == "hello\n"
    assert second.transcript.messages()[-1].text == "Written after the restart."


async def test_transcript_survives_a_restart(windows: Any, stub_workspace: Path, stub_server: StubServer,
                                             qtbot: Any) -> None:
    stub_server.script(StubReply(tool_calls=[("read_file", {"path": "/project/README.md"})]),
                       StubReply(text="The README says *Stub project*."))
    first = await windows(stub_workspace)
    assert await first.send("What does the README say?") == "done"
    await first.wait_closed()
    second = await windows(stub_workspace)
    messages = second.transcript.messages()
    assert [m.role for m in messages] == ["user", "assistant"]
    assert messages[0].text == "What does the README say?"
    assert messages[1].text == "The README says *Stub project*."
    row = second.transcript.tool_row("call_stub_0")
    assert row is not None and row.status == "ok" and "Stub project" in row.result
    row.toggle.click()
    assert row.expanded and "README.md" in row.args_view.toPlainText()


async def test_a_failed_run_says_what_to_do(windows: Any, stub_workspace: Path, stub_server: StubServer,
                                            qtbot: Any) -> None:
    stub_server.script(StubReply(status=401))
    window = await windows(stub_workspace)
    assert await window.send("hello") == "failed"
    errors = window.transcript.notices("error")
    assert errors and "Open Settings and check the API key" in errors[-1].advice.text()
    assert "Failed" in window.status.status_label.text()


async def test_threads_new_rename_delete_and_pending_on_select(windows: Any, stub_workspace: Path,
                                                               stub_server: StubServer, qtbot: Any,
                                                               qtmodeltester: Any) -> None:
    from PySide6.QtWidgets import QDialogButtonBox, QMessageBox

    stub_server.script(_write_call(), StubReply(text="done"))
    window = await windows(stub_workspace)
    panel = window.threads_panel
    first = window.session.thread_id
    window.input.setPlainText("Write out.txt")
    click(qtbot, window.send_button)
    await find_dialog("approval_dialog")
    # New: the dialog goes away, the suspended run stays on its thread
    click(qtbot, panel.new_button)
    await wait_for(lambda: window.session.thread_id != first, what="a new thread")
    await wait_for(lambda: visible_dialog("approval_dialog") is None, what="the dialog to close")
    assert window.transcript.messages() == []
    await wait_for(lambda: len(panel.thread_ids()) == 2, what="two threads listed")
    assert panel.thread_ids()[0] == window.session.thread_id  # newest first
    # the Python tester: the C++ one outlives the model and crashes when the window goes
    qtmodeltester.check(panel.list.model(), force_py=True)
    # selecting the first thread shows its transcript and asks its pending decision again
    panel.select(first)
    dialog = await find_dialog("approval_dialog")
    assert window.session.thread_id == first
    assert window.transcript.messages()[0].text == "Write out.txt"
    click(qtbot, button(dialog, "approve_once"))
    assert await asyncio.wait_for(window.wait_settled(), 20) == "done"
    # rename
    click(qtbot, panel.rename_button)
    rename = await find_dialog("rename_thread_dialog")
    rename.setTextValue("Writing files")
    click(qtbot, rename.findChild(QDialogButtonBox).button(QDialogButtonBox.StandardButton.Ok))
    await wait_for(lambda: any(t.title == "Writing files" for t in window.session.threads()), what="rename")
    assert panel.list.currentItem().text().startswith("Writing files")
    # delete, after confirming
    click(qtbot, panel.delete_button)
    box = await find_dialog("delete_thread_dialog")
    click(qtbot, box.button(QMessageBox.StandardButton.Cancel))
    await asyncio.sleep(0.05)
    assert first in panel.thread_ids()
    click(qtbot, panel.delete_button)
    box = await find_dialog("delete_thread_dialog")
    click(qtbot, box.button(QMessageBox.StandardButton.Yes))
    await wait_for(lambda: first not in panel.thread_ids(), what="the thread to go")
    assert window.session.thread_id != first and len(panel.thread_ids()) == 1


async def test_layout_and_geometry_are_restored(windows: Any, demo_workspace: Path, qtbot: Any) -> None:
    from PySide6.QtCore import Qt

    from workbench.config import load_user_settings

    first = await windows(demo_workspace)
    first.resize(700, 500)
    first.dock("Threads").hide()
    await asyncio.sleep(0.05)
    await first.wait_closed()
    assert load_user_settings().window.get("state")
    second = await windows()
    assert (second.size().width(), second.size().height()) == (700, 500)
    assert second.dock("Threads").isHidden()
    docks_listed = [a.text() for a in second.view_menu.actions() if not a.isSeparator() and a.menu() is None]
    assert docks_listed[:1] == ["Threads"]  # the docks, after View's Theme submenu
    # a panel plugged in later is listed in the View menu and can be toggled
    from PySide6.QtWidgets import QLabel

    dock = second.add_dock("Plan", QLabel("plan"), Qt.DockWidgetArea.RightDockWidgetArea)
    assert "Plan" in [a.text() for a in second.view_menu.actions()]
    assert dock.objectName() == "dock_plan"
    assert load_user_settings().recent_workspaces == [str(demo_workspace.resolve())]


async def test_send_with_ctrl_enter(windows: Any, demo_workspace: Path, qtbot: Any) -> None:
    from PySide6.QtCore import Qt

    window = await windows(demo_workspace)
    window.input.setPlainText("Show me around")
    qtbot.keyClick(window.input, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    assert window.busy
    dialog = await find_dialog("approval_dialog")
    window.close()  # closing mid-decision leaves the run suspended
    await window.wait_closed()
    assert visible_dialog("approval_dialog") is None


async def test_render_mid_session_to_png(windows: Any, demo_workspace: Path, qtbot: Any, tmp_path: Path) -> None:
    """A PNG of the window mid-session (at the demo's first approval); WORKBENCH_SCREENSHOT=path keeps
    a copy (``benchmarks/screenshot.py`` writes docs/screenshot.png the same way)."""
    import os

    from PySide6.QtGui import QImage

    from tests.ui.helpers import distinct_colors, render_window

    window = await windows(demo_workspace)
    window.input.setPlainText("Show me around")
    click(qtbot, window.send_button)
    dialog = await find_dialog("approval_dialog")
    await wait_for(lambda: "+# Notes" in dialog.diff_view.toPlainText(), what="the diff")
    out = tmp_path / "window.png"
    image = render_window(window, str(out))
    assert out.stat().st_size > 20_000
    loaded = QImage(str(out))
    assert (loaded.width(), loaded.height()) == (window.width(), window.height())
    assert distinct_colors(loaded) > 50  # text, badges, the dialog: not a blank frame
    if os.environ.get("WORKBENCH_SCREENSHOT"):
        image.save(os.environ["WORKBENCH_SCREENSHOT"], "PNG")


async def test_open_workspace_from_the_file_menu(windows: Any, demo_workspace: Path, tmp_path: Path,
                                                 qtbot: Any) -> None:
    from PySide6.QtWidgets import QFileDialog

    from workbench.ui.window_keys import fill_recent_menu

    other = tmp_path / "other"
    other.mkdir()
    (other / "workbench.yaml").write_text("model: demo\n")
    window = await windows(demo_workspace)
    window.open_action.trigger()
    dialog = await find_dialog("open_workspace_dialog")
    assert isinstance(dialog, QFileDialog)
    from PySide6.QtWidgets import QLineEdit

    assert dialog.directory().absolutePath() == str(tmp_path)  # starts next to the current workspace
    dialog.findChild(QLineEdit, "fileNameEdit").setText(str(other))  # typed, as a user may
    await wait_for(lambda: dialog.selectedFiles() == [str(other)], what="the selection")
    dialog.accept()
    await wait_for(lambda: window.session is not None and window.session.workspace == other.resolve(),
                   what="the other workspace")
    assert window.windowTitle().startswith("other")
    fill_recent_menu(window)
    assert [a.text() for a in window.recent_menu.actions()] == [str(other.resolve()), str(demo_workspace.resolve())]
    window.recent_menu.actions()[1].trigger()
    await wait_for(lambda: window.session is not None and window.session.workspace == demo_workspace.resolve(),
                   what="the recent workspace")


async def test_settings_entry_opens_the_settings_dialog(windows: Any, demo_workspace: Path, qtbot: Any) -> None:
    window = await windows(demo_workspace)
    # A broken settings_dialog fails this test rather than skipping it.
    assert window.settings_action is not None, "workbench.ui.settings_dialog did not import"
    window.settings_action.trigger()
    dialog = await find_dialog("settingsDialog")
    dialog.reject()
    await wait_for(lambda: visible_dialog("settingsDialog") is None, what="the dialog to close")


async def test_a_failing_task_is_shown_and_logged(windows: Any, demo_workspace: Path, task_errors: list[Any],
                                                  caplog: Any) -> None:
    from workbench.errors import ConfigError
    from workbench.ui import qt_async

    window = await windows(demo_workspace)

    async def boom() -> None:
        raise ConfigError("workbench.yaml:3: model: expected a non-empty string")

    task = qt_async.start(boom(), name="boom")
    await asyncio.gather(task, return_exceptions=True)
    await asyncio.sleep(0)
    assert window.error_bar.isVisible()
    assert "workbench.yaml:3" in window.error_bar.label.text()
    assert any("workbench.yaml:3" in r.getMessage() or "workbench.yaml:3" in str(r.exc_info) for r in caplog.records)
    assert task_errors and isinstance(task_errors[0][0], ConfigError)
    task_errors.clear()


async def test_stop_while_waiting_for_a_decision(windows: Any, demo_workspace: Path, qtbot: Any) -> None:
    window = await windows(demo_workspace)
    window.input.setPlainText("Show me around")
    click(qtbot, window.send_button)
    await find_dialog("approval_dialog")
    assert window.stop_button.isEnabled() and not window.send_button.isEnabled()
    click(qtbot, window.stop_button)
    assert await asyncio.wait_for(window.wait_settled(), 10) in ("interrupted", "")
    await wait_for(lambda: visible_dialog("approval_dialog") is None, what="the dialog to close")
    assert window.session.status == "interrupted" and window.session.pending
    assert window.transcript.notices("pending")
    # Send while decisions are pending asks them again instead of starting a run
    window.input.setPlainText("something else")
    click(qtbot, window.send_button)
    dialog = await find_dialog("approval_dialog")
    assert window.input.toPlainText() == "something else"
    click(qtbot, button(dialog, "reject"))
    await asyncio.sleep(0.05)
    window.close()


async def test_retry_after_a_failure(windows: Any, stub_workspace: Path, stub_server: StubServer,
                                     qtbot: Any) -> None:
    stub_server.script(StubReply(status=401), StubReply(text="Now it works."))
    window = await windows(stub_workspace)
    assert await window.send("hello") == "failed"
    error = window.transcript.notices("error")[-1]
    click(qtbot, error.button)
    assert await asyncio.wait_for(window.wait_settled(), 20) == "done"
    assert window.transcript.messages()[-1].text == "Now it works."


async def test_panels_follow_the_demo_session_and_reopen_from_the_store(windows: Any, demo_workspace: Path,
                                                                          qtbot: Any) -> None:
    """G2: every dock panel is plugged into the window and live from the bridge's events."""
    from workbench.app import plug_panels

    window = await windows()
    plug_panels(window)
    assert set(window.panels) == {"Plan", "Skills", "Instructions", "Budget", "Artifacts", "Decisions",
                                  "Tasks", "Context", "Servers"}  # Q1, D10, C9
    await window.open_workspace(demo_workspace)
    window.input.setPlainText("Show me around")
    click(qtbot, window.send_button)
    await _answer_approvals_until_done(window, qtbot)
    panels = window.panels
    await wait_for(lambda: panels["Plan"].model.items
                   and all(t["status"] == "done" for t in panels["Plan"].model.items), 5, "the finished plan")
    assert [t["content"] for t in panels["Plan"].model.items][0] == "Read the project README"
    assert panels["Artifacts"].model.names() == ["summary.md"]
    assert {r.name for r in panels["Skills"].model.rows} >= {"summarize", "review"}
    assert panels["Instructions"].model.doc("/project/AGENTS.md").fate_text.startswith("shown")
    assert panels["Budget"].meter("run", "total_tokens").spent > 0
    assert panels["Context"].calls.rows and "tokens" in panels["Context"].meter.format()  # C9: live too
    thread = window.session.thread_id

    reopened = await windows()
    plug_panels(reopened)
    await reopened.open_workspace(demo_workspace)
    await reopened.switch_thread(thread)
    await wait_for(lambda: len(reopened.panels["Plan"].model.items) == 4, 5, "the plan rebuilt from the store")
    assert reopened.panels["Artifacts"].model.names() == ["summary.md"]
    for w in (window, reopened):  # their file reads finish inside the test's loop
        await w._settle_panels()
