"""The Servers dock (X5, issue 13): real windows on workspaces whose workbench.yaml declares MCP servers
(the small SDK servers of tests/mcp_servers/tiny.py, started as real processes). The panel follows the
servers live, says why one will not start, and its Check, Restart and tool switches go through the
real mouse and keyboard."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt

from tests.ui.helpers import click, wait_for

TINY = Path(__file__).resolve().parents[1] / "mcp_servers" / "tiny.py"

pytestmark = pytest.mark.timeout(120)


def tiny(mode: str, **options: Any) -> str:
    args = json.dumps([str(TINY), mode, "ui-test"])
    opts = "".join(f", {k}: {json.dumps(v)}" for k, v in options.items())
    return f"{{command: {json.dumps(sys.executable)}, args: {args}{opts}}}"


@pytest.fixture
def mcp_workspace(tmp_path: Path) -> Any:
    def make(servers: dict[str, str]) -> Path:
        ws = tmp_path / "ws"
        ws.mkdir(exist_ok=True)
        lines = "".join(f"  {name}: {spec}\n" for name, spec in servers.items())
        (ws / "workbench.yaml").write_text(f"model: demo\nmcp_servers:\n{lines}", encoding="utf-8")
        return ws

    return make


async def open_panel(windows: Any, workspace: Path) -> tuple[Any, Any]:
    from workbench.ui import panels

    window = await windows()
    panels.install_servers_panel(window)
    await window.open_workspace(workspace)
    dock = window.dock("Servers")
    dock.show()
    dock.raise_()
    return window, dock.widget()


def row(panel: Any, name: str) -> Any:
    return next(r for r in panel.model.rows if r.name == name)


def cell(panel: Any, name: str, column: int) -> str:
    model = panel.model
    return str(model.data(model.index(model.row_of(name), column)))


async def test_x5_the_panel_follows_the_servers_live_and_check_lists_tools(windows: Any, mcp_workspace: Any,
                                                                           qtbot: Any) -> None:
    from workbench.ui.servers_panel import ServersModel

    window, panel = await open_panel(windows, mcp_workspace({"tiny": tiny("normal"), "broken": tiny("stderr")}))
    assert [r.name for r in panel.model.rows] == ["tiny", "broken"]
    assert cell(panel, "tiny", ServersModel.STATUS).startswith("○ stopped")
    assert "none started yet" in panel.summary.text()
    panel.select("tiny")
    assert "Not started yet" in panel.error.text()
    # A run starts them; the panel hears it from the live events alone (no reload here).
    starting = asyncio.ensure_future(window.session.start_mcp_servers())
    await wait_for(lambda: row(panel, "tiny").status == "ready", 30, "tiny ready in the panel")
    await wait_for(lambda: row(panel, "broken").status == "failed", 30, "broken failed in the panel")
    await starting
    assert cell(panel, "tiny", ServersModel.STATUS).startswith("✓ ready\npid ")
    assert cell(panel, "tiny", ServersModel.TOOLS).startswith("9 of 9")
    assert "1 ready" in panel.summary.text() and "1 failed" in panel.summary.text()
    # The failed one says why, in words, with its stderr in the log.
    panel.select("broken")
    assert "missing configuration file /etc/tiny.conf" in panel.error.text()
    assert "exit code 2" in panel.error.text()
    panel.tabs.setCurrentIndex(1)
    assert "missing configuration file" in panel.log_view.toPlainText()
    # Check on the ready one: the tools listed, with how each runs.
    panel.select("tiny")
    panel.tabs.setCurrentIndex(0)
    click(qtbot, panel.check_button)
    await wait_for(lambda: panel.check_button.isEnabled() and panel.check_button.text() == "Check", 30, "check done")
    tools = {panel.tools_model.data(panel.tools_model.index(i, 0)): panel.tools_model.data(panel.tools_model.index(i, 1))
             for i in range(panel.tools_model.rowCount())}
    assert tools["mcp__tiny__echo"] == "unasked (read-only)" and tools["mcp__tiny__note"] == "asks"


async def test_x5_a_tool_switched_off_with_the_keyboard_is_not_offered(windows: Any, mcp_workspace: Any,
                                                                       qtbot: Any) -> None:
    window, panel = await open_panel(windows, mcp_workspace({"tiny": tiny("normal")}))
    panel.select("tiny")
    click(qtbot, panel.check_button)
    await wait_for(lambda: row(panel, "tiny").status == "ready" and panel.tools_model.rowCount() == 9
                   and panel.check_button.isEnabled(), 30, "the check done")
    assert "mcp__tiny__echo" in window.session.engine.agent.tool_map
    view = panel.tools_view
    names = [panel.tools_model.data(panel.tools_model.index(i, 0)) for i in range(panel.tools_model.rowCount())]
    view.setFocus()
    view.setCurrentIndex(panel.tools_model.index(names.index("mcp__tiny__echo"), 0))
    qtbot.keyClick(view, Qt.Key.Key_Space)
    await wait_for(lambda: not next(t for t in row(panel, "tiny").tools if t.tool == "echo").enabled, 5, "echo off")
    assert "mcp__tiny__echo" not in window.session.engine.agent.tool_map  # not offered from the next step
    assert cell(panel, "tiny", 2).startswith("8 of 9")
    i = names.index("mcp__tiny__echo")
    assert panel.tools_model.data(panel.tools_model.index(i, 0), Qt.ItemDataRole.CheckStateRole) == Qt.CheckState.Unchecked
    view.setCurrentIndex(panel.tools_model.index(i, 0))
    qtbot.keyClick(view, Qt.Key.Key_Space)
    await wait_for(lambda: "mcp__tiny__echo" in window.session.engine.agent.tool_map, 5, "echo back on")


async def test_x5_restart_gives_a_new_process(windows: Any, mcp_workspace: Any, qtbot: Any) -> None:
    window, panel = await open_panel(windows, mcp_workspace({"tiny": tiny("normal")}))
    panel.select("tiny")
    assert not panel.restart_button.isEnabled()  # nothing to restart before it ran
    click(qtbot, panel.check_button)
    await wait_for(lambda: row(panel, "tiny").status == "ready" and panel.restart_button.isEnabled(), 30)
    pid = row(panel, "tiny").pid
    click(qtbot, panel.restart_button)
    await wait_for(lambda: row(panel, "tiny").status == "ready" and row(panel, "tiny").pid not in (None, pid)
                   and panel.restart_button.isEnabled(), 30, "a new process")
    assert "restarted 1×" in panel.title.text()


async def test_x5_a_startup_timeout_and_a_missing_command_say_why(windows: Any, mcp_workspace: Any, qtbot: Any) -> None:
    window, panel = await open_panel(windows, mcp_workspace({
        "hang": tiny("hang", startup_timeout=1), "npx-thing": "{command: npx-not-installed-xyz}"}))
    panel.select("npx-thing")
    click(qtbot, panel.check_button)
    await wait_for(lambda: row(panel, "npx-thing").status == "failed" and panel.check_button.isEnabled(), 30)
    text = panel.error.text()
    assert "Last error: mcp_servers.npx-thing.command: command 'npx-not-installed-xyz' not found on PATH " in text
    panel.select("hang")
    click(qtbot, panel.check_button)
    await wait_for(lambda: "startup_timeout (1 s)" in panel.error.text(), 30, "the timeout in words")
    await wait_for(lambda: "tiny: hanging" in panel.log_view.toPlainText(), 10, "its stderr in the log")


async def test_x5_w1_an_untrusted_workspaces_servers_are_listed_and_not_started(
        windows: Any, mcp_workspace: Any, qtbot: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.ui.helpers import button, find_dialog
    from workbench.ui import panels

    monkeypatch.delenv("WORKBENCH_TRUST", raising=False)
    window = await windows()
    panels.install_servers_panel(window)
    opening = asyncio.ensure_future(window.open_workspace(mcp_workspace({"tiny": tiny("normal")})))
    dialog = await find_dialog("trustDialog", 10)  # W1: the window asks first; the person says no
    click(qtbot, button(dialog, "openWithoutButton"))
    await asyncio.wait_for(opening, 30)
    panel = window.dock("Servers").widget()
    await wait_for(lambda: panel.model.rowCount() == 1, 10)
    panel.select("tiny")
    assert "not trusted" in panel.error.text() and cell(panel, "tiny", 1).endswith("not trusted")
    assert not panel.check_button.isEnabled() and not panel.restart_button.isEnabled()


async def test_x5_no_servers_says_how_to_add_one(windows: Any, tmp_path: Path) -> None:
    ws = tmp_path / "plain"
    ws.mkdir()
    (ws / "workbench.yaml").write_text("model: demo\n", encoding="utf-8")
    window, panel = await open_panel(windows, ws)
    assert panel.model.rowCount() == 0 and "mcp_servers:" in panel.summary.text()
    assert "Servers" in [a.text() for a in window.view_menu.actions()]


async def test_x5_models_pass_qtmodeltester(qtmodeltester: Any) -> None:
    from workbench.session import McpServerInfo, McpToolInfo
    from workbench.ui.servers_panel import ServersModel, ToolsModel

    tools = (McpToolInfo("git", "mcp__git__git_log", "git_log", "Log.", {"type": "object"}, True),
             McpToolInfo("git", "mcp__git__git_commit", "git_commit", "Commit.", {"type": "object"}, False,
                         enabled=False))
    servers = ServersModel()
    servers.set_rows([McpServerInfo("git", "stdio", "mcp-server-git", True, "ready", tools=tools, pid=42),
                      McpServerInfo("web", "http", "http://127.0.0.1:1/mcp", True, "failed", error="refused",
                                    retry_at=1e12)])
    qtmodeltester.check(servers)
    model = ToolsModel()
    model.set_rows(tools)
    qtmodeltester.check(model)
    toggled: list[tuple[str, bool]] = []
    model.sig_toggled.connect(lambda tool, on: toggled.append((tool, on)))
    assert model.setData(model.index(1, 0), Qt.CheckState.Checked.value, Qt.ItemDataRole.CheckStateRole)
    assert toggled == [("git_commit", True)]


async def test_x5_render_the_panel(windows: Any, mcp_workspace: Any, qtbot: Any, tmp_path: Path) -> None:
    """Looked at: the table, a failed server's error in words and colour, the tools with their switches."""
    from tests.ui.helpers import distinct_colors

    window, panel = await open_panel(windows, mcp_workspace({"tiny": tiny("normal"), "broken": tiny("stderr")}))
    await window.session.start_mcp_servers()
    await wait_for(lambda: row(panel, "broken").status == "failed", 20)
    panel.select("broken")
    panel.resize(420, 640)
    image = panel.grab().toImage()
    assert image.save(str(tmp_path / "servers.png"), "PNG")
    assert distinct_colors(image) > 4
