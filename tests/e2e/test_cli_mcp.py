"""End to end: ``workbench mcp list`` and ``workbench mcp check NAME`` (X1, X4, X5, W1) — the real
``python -m workbench`` as a subprocess, against the published mcp-server-time and the tests' small SDK
servers. ``check`` is the "doctor": it starts one server, lists its tools, stops it, and says why a
server will not start."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.e2e.test_cli import cli, env, no_traceback  # noqa: F401

TINY = Path(__file__).resolve().parents[1] / "mcp_servers" / "tiny.py"
TIME_SERVER = Path(sys.executable).parent / "mcp-server-time"

pytestmark = pytest.mark.timeout(180)


def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    tiny = json.dumps(sys.executable)
    (ws / "workbench.yaml").write_text(
        "model: demo\nmcp_servers:\n"
        f"  time: {{command: {json.dumps(str(TIME_SERVER))}, args: [--local-timezone, UTC]}}\n"
        f"  hang: {{command: {tiny}, args: [{json.dumps(str(TINY))}, hang, cli-test], startup_timeout: 3}}\n"
        "  missing: {command: npx-not-installed-xyz}\n"
        '  docs: {url: "http://127.0.0.1:9/mcp", headers: {Authorization: "Bearer ${DOCS_TOKEN}"}, enabled: false}\n',
        encoding="utf-8")
    return ws


def trusted(env: dict[str, str]) -> dict[str, str]:
    return {**env, "WORKBENCH_TRUST": "1"}


def test_x5_mcp_list_shows_the_servers_without_starting_any(tmp_path: Path, env: dict[str, str]) -> None:
    ws = workspace(tmp_path)
    proc = cli(["mcp", "list"], ws, trusted(env))
    no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("time\tstdio\t") and "--local-timezone UTC" in lines[0]
    assert lines[3] == "docs\thttp\thttp://127.0.0.1:9/mcp\t(disabled)"
    proc = cli(["mcp", "list", "--json"], ws, trusted(env))
    rows = [json.loads(ln) for ln in proc.stdout.splitlines()]
    assert [r["name"] for r in rows] == ["time", "hang", "missing", "docs"]
    assert all(r["status"] == "stopped" for r in rows)
    assert "${DOCS_TOKEN}" not in proc.stdout or "Bearer" not in proc.stdout  # headers are not printed


def test_x5_mcp_check_starts_a_real_server_and_lists_its_tools(tmp_path: Path, env: dict[str, str]) -> None:
    proc = cli(["mcp", "check", "time"], workspace(tmp_path), trusted(env))
    no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith("✓ time: ready (mcp-time ")
    assert "mcp__time__get_current_time  (read-only, runs without asking)" in out
    proc = cli(["mcp", "check", "time", "--json"], workspace(tmp_path), trusted(env))
    data = json.loads(proc.stdout)
    assert data["status"] == "ready" and {t["tool"] for t in data["tools"]} == {"get_current_time", "convert_time"}


def test_x4_mcp_check_names_the_command_and_the_path_searched(tmp_path: Path, env: dict[str, str]) -> None:
    proc = cli(["mcp", "check", "missing"], workspace(tmp_path), {**trusted(env), "PATH": "/usr/bin:/bin",
                                                                  "SHELL": "/bin/false"})
    no_traceback(proc)
    assert proc.returncode == 1
    assert proc.stdout.startswith("✗ missing: failed")
    assert ("MCP server 'missing' failed: mcp_servers.missing.command: command 'npx-not-installed-xyz' not found on "
            "PATH /usr/bin:/bin") in proc.stderr


def test_x3_mcp_check_reports_a_startup_timeout_with_the_servers_last_words(tmp_path: Path,
                                                                             env: dict[str, str]) -> None:
    proc = cli(["mcp", "check", "hang"], workspace(tmp_path), trusted(env))
    no_traceback(proc)
    assert proc.returncode == 1
    assert "MCP server 'hang' failed: it did not answer within startup_timeout (3 s)" in proc.stderr
    assert "raise mcp_servers.hang.startup_timeout" in proc.stderr
    assert "tiny: hanging" in proc.stderr  # what it wrote on stderr (in the error, or under it)


def test_w1_mcp_check_needs_trust_without_a_terminal(tmp_path: Path, env: dict[str, str]) -> None:
    ws = workspace(tmp_path)
    untrusted = {k: v for k, v in env.items() if k != "WORKBENCH_TRUST"}
    proc = cli(["mcp", "check", "time"], ws, untrusted)
    no_traceback(proc)
    assert proc.returncode == 2 and "not trusted" in proc.stderr and "--trust" in proc.stderr
    proc = cli(["mcp", "check", "time", "--trust"], ws, untrusted)
    assert proc.returncode == 0, proc.stderr
    proc = cli(["mcp", "list"], ws, untrusted)
    assert proc.returncode == 0 and "not trusted" in proc.stdout


def test_x5_mcp_check_an_unknown_or_disabled_server_is_a_usage_error(tmp_path: Path, env: dict[str, str]) -> None:
    ws = workspace(tmp_path)
    proc = cli(["mcp", "check", "nope"], ws, trusted(env))
    assert proc.returncode == 2 and "no MCP server 'nope'" in proc.stderr and "time, hang, missing, docs" in proc.stderr
    proc = cli(["mcp", "check", "docs"], ws, trusted(env))
    assert proc.returncode == 2 and "disabled" in proc.stderr
    proc = cli(["mcp"], ws, trusted(env))
    assert proc.returncode == 2
