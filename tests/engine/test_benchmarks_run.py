"""benchmarks/peers.py and benchmarks/first_request.py (issue 9), benchmarks/delegation.py (issue 11),
benchmarks/compression.py (issue 12) and benchmarks/mcp.py (issue 13) still run, offline.

Only the sides that need no download: this project and the standard-library floor (the peers' venvs
come from a package index, so they are never built here: naming no peer side means none is
installed). What is checked is that the scripts work end to end — the stub in its own process, the
project's ``Session`` and CLI on ``openai/…`` at the stub, the figures printed — not their values.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(script: str, *args: str) -> str:
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, f"{script} exited {done.returncode}\n{done.stdout}\n{done.stderr}"
    assert "building" not in done.stderr  # no venv built, nothing downloaded
    return done.stdout


@pytest.mark.timeout(300)
def test_peers_script_runs_the_project_and_the_floor() -> None:
    out = _run("peers.py", "--sides", "workbench,http.client", "--steps", "3", "--rounds", "1")
    assert re.search(r"round 1\s+workbench\s+[\d.]+ ms/step\s+\(CPU\s+[\d.]+; [\d.]+ s for 4 calls\)", out), out
    assert re.search(r"round 1\s+http\.client\s+[\d.]+ ms/step", out), out
    assert re.search(r"this project \(Session, litellm\)\s+[\d.]+\s", out), out
    assert "litellm 1." in out  # the versions measured are printed
    assert "no ratio" in out  # no peer ran, and it says so


@pytest.mark.timeout(300)
def test_first_request_script_times_the_cli_and_the_floor() -> None:
    out = _run("first_request.py", "--sides", "workbench,http.client", "--runs", "1")
    assert re.search(r"run 1\s+workbench\s+first request after [\d.]+ s", out), out
    assert re.search(r"run 1\s+workbench-cold\s+first request after [\d.]+ s", out), out
    assert re.search(r"run 1\s+workbench-first\s+first request after [\d.]+ s", out), out
    assert re.search(r"this project: first command, starts the host\s+[\d.]+\s+[\d.]+", out), out
    assert re.search(r"this project: workbench run \(shared host up\)\s+[\d.]+\s+[\d.]+", out), out
    assert re.search(r"this project: workbench run, no shared host\s+[\d.]+\s+[\d.]+", out), out
    assert re.search(r"reference: http.client, one streamed call\s+[\d.]+\s+[\d.]+", out), out


@pytest.mark.timeout(300)
def test_delegation_script_runs_eight_background_tasks_against_the_stub() -> None:
    out = _run("delegation.py", "--quick")  # 50 ms latency, one round
    assert re.search(r"parent wall, 1 task\s+[\d.]+ s", out), out
    assert re.search(r"parent wall, 8 tasks\s+[\d.]+ s .*8 ran at once", out), out  # max_concurrent 8: none queued
    assert re.search(r"Python heap \(tracemalloc\)\s+[\d.]+ MB per task", out), out
    assert re.search(r"resident set \(VmRSS sampled\)\s+[\d.]+ MB per task", out), out
    assert re.search(r"the 8 tasks\s+40 model calls", out), out  # 8 tasks x (4 ls + 1 answer)
    assert re.search(r"target: parent wall with 8 tasks / with 1 = [\d.]+ / [\d.]+ = [\d.]+ <= 1.5", out), out


@pytest.mark.timeout(300)
def test_compression_script_prints_each_strategy_the_view_and_the_prompt_log() -> None:
    out = _run("compression.py", "--quick")  # 400 steps (800 messages), 20 logged steps
    assert re.search(r"history: 800 messages, ~[\d,]+ tokens", out), out
    for case in ("dedupe", "truncate", r"dedupe\+truncate", r"all \(\+summary\)"):
        row = rf"  {case}\s+tokens\s+[\d,]+ ->\s+[\d,]+ \(saved\s+[\d.]+%\)\s+view\s+[\d.]+ ms"
        assert re.search(row, out), (case, out)
    assert re.search(r"view with no record \(the common step\): [\d.]+ ms at 800 messages", out), out
    assert re.search(r"target view < 50 ms at 4,000 messages: slowest [\d.]+ ms at 800 messages", out), out
    assert re.search(r"prompt log once sections repeat: [\d,]+ bytes a step over \d+ steps \(target < 2,048\)",
                     out), out


@pytest.mark.timeout(300)
def test_mcp_script_times_tools_offered_and_a_call() -> None:
    out = _run("mcp.py", "--rounds", "1", "--calls", "10")  # issue 13: one session, a few echo calls
    assert re.search(r"time from Session.open to the server's tools offered .*\n  min [\d.]+ s", out), out
    assert re.search(r"workbench McpServers.call:\s+median [\d.]+ ms", out), out
    assert re.search(r"overhead beyond the server's own time: -?[\d.]+ ms a call", out), out
