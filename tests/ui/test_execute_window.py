"""The shell tool in the window (issue 15, E2, E4–E6): the bridge hands a command's live output on as
``sig_command_output`` (gathered like streamed text), the approval dialog says the command, its folder,
whether a sandbox holds it and offers rules at prefix level — the one picked is what "Always" saves —
and Stop ends a running command with every process it started; the transcript's tool row shows the
output as it comes (monospace, scrolled to the end) and the exit code and duration when it ends (E1, E6)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt

from tests.harness.test_execute import alive, sleepers
from tests.stub_server import StubReply, StubServer
from tests.ui.helpers import button, click, find_dialog, wait_for
from workbench.engine.models.scripted import ScriptedModel, reply, tool_reply
from workbench.session import Session


def ws_with(tmp_path: Path, yaml: str) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    (ws / "workbench.yaml").write_text(yaml, encoding="utf-8")
    return ws


async def test_E6_the_bridge_hands_on_command_output_in_batches_before_the_call_ends(tmp_path: Path, qtbot: Any):
    from workbench.ui.bridge import Bridge

    command = ("python3 -c \"import time; [(print('row%d' % i, flush=True), time.sleep(0.005)) "
               "for i in range(60)]\"")
    model = ScriptedModel([tool_reply(("execute", {"command": command}, "c1")), reply("ok")])
    session = await Session.open(ws_with(tmp_path, "permissions: {default: allow}\n"), model=model)
    bridge = Bridge(session)
    seen: list[tuple[str, Any]] = []
    bridge.sig_command_output.connect(lambda d: seen.append(("output", dict(d))))
    bridge.sig_tool_finished.connect(lambda d: seen.append(("finished", dict(d))))
    bridge.sig_event_received.connect(lambda e: seen.append(("event", e.type)))
    try:
        assert (await session.run("go")).status == "done"
        await wait_for(lambda: any(k == "finished" for k, _ in seen), 5, "the call's end")
        outputs = [d for k, d in seen if k == "output"]
        assert "".join(d["text"] for d in outputs) == "".join(f"row{i}\n" for i in range(60))
        assert all(d["call_id"] == "c1" and d["skipped"] == 0 for d in outputs)
        assert 1 <= len(outputs) < 60  # gathered, not one signal a line
        kinds = [k for k, _ in seen]
        assert kinds.index("finished") > max(i for i, k in enumerate(kinds) if k == "output")
        [finished] = [d for k, d in seen if k == "finished"]
        assert finished["exit_code"] == 0 and finished["duration_seconds"] > 0
        assert ("event", "command_output") not in seen  # too many for the Events dock, like model_delta
    finally:
        bridge.detach()
        await session.close()


async def test_E2_E5_the_approval_shows_command_folder_and_sandbox_and_saves_the_prefix_rule_picked(
        tmp_path: Path, qtbot: Any, monkeypatch: Any):
    from workbench.harness.permissions import PermissionsMiddleware
    from workbench.ui.decision_dialogs import ask_approvals

    monkeypatch.setenv("WORKBENCH_SANDBOX", "off")
    ws = ws_with(tmp_path, "model: demo\n")
    (ws / "sub").mkdir()
    model = ScriptedModel([tool_reply(("execute", {"command": "git commit -m 'first try'", "cwd": "/project/sub"},
                                       "c1")), reply("ok"),
                           tool_reply(("execute", {"command": "git commit -m other"}, "c2")), reply("ok")])
    session = await Session.open(ws, model=model)
    try:
        result = await session.run("commit")
        [q] = result.pending
        task = asyncio.ensure_future(ask_approvals(None, [q]))
        dialog = await find_dialog("approval_dialog")
        dialog._session = session
        text = dialog.command_label.text()
        assert "git commit -m &#x27;first try&#x27;" in text or "git commit -m 'first try'" in text
        assert "Folder: /project/sub" in text and str((ws / "sub").resolve()) in text
        assert "<b>Sandbox: none</b> — switched off (WORKBENCH_SANDBOX=off)" in text
        assert dialog.header.text() == "The agent wants to run a command"
        combo = dialog.command_rule_combo
        assert combo.isVisible()
        items = [combo.itemText(i) for i in range(combo.count())]
        assert items == ["Always: exactly what asked", "Always: git commit -m 'first try'", "Always: git commit *",
                         "Always: git *"]
        combo.setFocus()
        qtbot.keyClick(combo, Qt.Key.Key_Down)
        qtbot.keyClick(combo, Qt.Key.Key_Down)  # the keyboard path: "git commit *"
        assert combo.currentData() == "git commit *"
        assert "git commit *" in dialog.always_scope.text()
        dialog.grab().save(str(tmp_path / "approval_execute.png"))
        click(qtbot, button(dialog, "always_session"))
        decisions = await asyncio.wait_for(task, 10)
        assert decisions == {q.id: {"decision": "approve"}}  # once; the wider rule is saved, not an exact one
        perms = session.middleware(PermissionsMiddleware)
        await wait_for(lambda: [str(r) for r in perms.session_added] == ["allow execute git commit *"], 5,
                       "the rule saved for the session")
        result = await session.resume(decisions)
        assert result.status == "done"
        assert (await session.run("again")).status == "done"  # `git commit -m other` no longer asks
    finally:
        await session.close()


async def test_E4_stop_in_the_window_ends_a_running_command_and_every_process_it_started(
        windows: Any, stub_workspace: Path, stub_server: StubServer, qtbot: Any):
    token = f"wb-window-{uuid.uuid4().hex[:8]}"
    with (stub_workspace / "workbench.yaml").open("a", encoding="utf-8") as f:
        f.write("permissions: {default: allow}\n")
    stub_server.script(StubReply(tool_calls=[("execute", {"command": sleepers(token, 2)}, "c1")]),
                       StubReply(text="never"))
    window = await windows(stub_workspace)
    window.input.setPlainText("Sleep")
    click(qtbot, window.send_button)
    await wait_for(lambda: len(alive(token, named=True)) == 2, 30, "the command's two sleepers")
    await wait_for(lambda: window.stop_button.isEnabled(), 5, "Stop enabled")
    click(qtbot, window.stop_button)
    assert await asyncio.wait_for(window.wait_settled(), 20) == "aborted"
    assert alive(token) == []


async def test_E5_the_status_bar_says_whether_commands_run_in_a_sandbox(windows: Any, tmp_path: Path,
                                                                        monkeypatch: Any) -> None:
    from workbench.harness.sandbox import detect

    monkeypatch.setenv("WORKBENCH_SANDBOX", "off")
    window = await windows(ws_with(tmp_path, "model: demo\n"))
    label = window.status.sandbox_label
    assert label.isVisible() and label.text() == "commands: no sandbox"
    assert "none — switched off (WORKBENCH_SANDBOX=off)" in label.toolTip()
    window.grab().save(str(tmp_path / "status_no_sandbox.png"))
    monkeypatch.delenv("WORKBENCH_SANDBOX")
    if detect().active:
        (tmp_path / "b").mkdir()
        other = await windows(ws_with(tmp_path / "b", "model: demo\n"))
        assert other.status.sandbox_label.text() == "commands: sandboxed"
        assert "bubblewrap — " in other.status.sandbox_label.toolTip()


async def test_E1_E6_output_streams_into_the_tool_row_then_its_exit_code_and_duration(
        windows: Any, stub_workspace: Path, stub_server: StubServer, qtbot: Any, tmp_path: Path):
    """The real window: a command printing a line every 20 ms shows its lines in its tool row while it
    runs (before the call ends), the view follows the newest line, and the row ends with "exit 3 · N s"."""
    with (stub_workspace / "workbench.yaml").open("a", encoding="utf-8") as f:
        f.write("permissions: {default: allow}\n")
    command = ("python3 -c \"import sys, time\n[(print('line %d' % i, flush=True), time.sleep(0.02)) "
               "for i in range(150)]\nsys.exit(3)\"")
    stub_server.script(StubReply(tool_calls=[("execute", {"command": command}, "c1")]), StubReply(text="done"))
    window = await windows(stub_workspace)
    window.input.setPlainText("Run it")
    click(qtbot, window.send_button)
    row = await wait_for(lambda: window.transcript.tool_row("c1"), 30, "the execute row")
    await wait_for(lambda: row.output_view is not None and "line 10" in row.output_view.toPlainText(), 20,
                   "output in the row while the command runs")
    assert row.status == "running" and not row.ending_label.isVisible()  # live: the call has not ended
    view = row.output_view
    assert view.isVisible() and view.property("role") == "code"
    assert await asyncio.wait_for(window.wait_settled(), 30) == "done"
    text = view.toPlainText()
    assert text.startswith("line 0\n") and text.rstrip().endswith("line 149")
    assert [ln for ln in text.splitlines() if ln.startswith("line ")] == [f"line {i}" for i in range(150)]
    bar = view.verticalScrollBar()
    assert bar.value() == bar.maximum()  # it followed the newest line
    assert row.ending_label.isVisible() and row.ending_label.text().startswith("exit 3 · ")
    row.grab().save(str(tmp_path / "execute_row.png"))


async def test_E4_stop_in_the_window_ends_the_command_whose_output_is_streaming(
        windows: Any, stub_workspace: Path, stub_server: StubServer, qtbot: Any):
    """Stop, pressed while output streams into the row, kills the command: the row stops growing, and
    says it was stopped."""
    with (stub_workspace / "workbench.yaml").open("a", encoding="utf-8") as f:
        f.write("permissions: {default: allow}\n")
    token = f"wb-stream-{uuid.uuid4().hex[:8]}"
    command = ("python3 -c \"import itertools, time\nfor i in itertools.count(): print('tick', i, flush=True); "
               f"time.sleep(0.05)\" {token}")  # no expansion in it: allowed without asking
    stub_server.script(StubReply(tool_calls=[("execute", {"command": command}, "c1")]), StubReply(text="never"))
    window = await windows(stub_workspace)
    window.input.setPlainText("Tick")
    click(qtbot, window.send_button)
    row = await wait_for(lambda: window.transcript.tool_row("c1"), 30, "the execute row")
    await wait_for(lambda: row.output_view is not None and "tick 5" in row.output_view.toPlainText(), 20,
                   "ticks in the row")
    await wait_for(lambda: window.stop_button.isEnabled(), 5, "Stop enabled")
    qtbot.keyClick(window.input, Qt.Key.Key_Escape)  # Esc is Stop (the real keyboard path)
    assert await asyncio.wait_for(window.wait_settled(), 20) == "aborted"
    seen = row.output_view.toPlainText()
    await asyncio.sleep(0.4)
    assert row.output_view.toPlainText() == seen  # nothing printed after Stop: the loop was killed
    assert row.status == "stopped"
    assert alive(token) == []
