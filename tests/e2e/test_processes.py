"""Real processes on one thread: one writer (R7), tools at most once across kill -9 (R9).

(a) Two ``workbench run --thread T`` subprocesses started together against the loopback stub: exactly
one runs; the other exits 2 naming the holder (pid, host, since); the store keeps one copy of each
step. While it runs, ``show`` says running (never "cut off … recover it") and ``resume`` is refused.

(b) A driver process (tests/e2e/edit_driver.py: the engine, the file tools over the workspace and a
deterministic model, each step appending one unique line with ``edit_file``) is killed with SIGKILL at
seeded random moments, then started again, which recovers the run. No line is ever applied twice;
a line is missing only where its call was in flight at a kill (its result says so).
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.test_cli import cli, env, make_workspace  # noqa: F401 - env is a fixture
from tests.stub_server import StubReply, StubServer

ROOT = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).with_name("edit_driver.py")


def _popen(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "workbench", *args], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_R7_two_cli_runs_on_one_thread_exactly_one_runs_the_other_is_refused(tmp_path, env, stub_server: StubServer):
    ws = make_workspace(tmp_path, stub_server.url)
    stub_server.script(StubReply(text="first turn"))
    made = cli(["run", "--json", "hello"], ws, env)
    assert made.returncode == 0, made.stderr
    thread = json.loads(made.stdout.splitlines()[-1])["thread"]

    before = len(stub_server.requests)
    stub_server.script(StubReply(text="slow answer", delay=4), StubReply(text="must never be asked"))
    procs = [_popen(["run", "--thread", thread, "--json", f"turn {i}"], ws, env) for i in (1, 2)]
    try:
        deadline = time.monotonic() + 60
        while len(stub_server.requests) < before + 1 and all(p.poll() is None for p in procs) and time.monotonic() < deadline:
            time.sleep(0.05)
        refused = next((p for p in procs if p.poll() is not None), None)
        if refused is None:  # both still alive: the refused one exits as soon as it reads the claim
            deadline = time.monotonic() + 30
            while refused is None and time.monotonic() < deadline:
                time.sleep(0.05)
                refused = next((p for p in procs if p.poll() is not None), None)
        assert refused is not None, "neither run was refused"
        winner = procs[1] if refused is procs[0] else procs[0]
        _, err = refused.communicate(timeout=30)
        assert refused.returncode == 2, err
        assert f"thread {thread} already has a run in flight in another process" in err
        assert f"process {winner.pid} on {socket.gethostname()}, since " in err
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1

        # while the winner runs: `show` says running (who), never "cut off"; `resume` is refused too
        shown = cli(["show", thread], ws, env)
        assert shown.returncode == 0, shown.stderr
        assert f"· running" in shown.stdout and f"running in process {winner.pid}" in shown.stdout
        assert "cut off" not in shown.stdout and "recover" not in shown.stdout.lower()
        listed = cli(["threads", "--json"], ws, env)
        assert [json.loads(line)["status"] for line in listed.stdout.splitlines()] == ["running"]
        resumed = cli(["resume", "--thread", thread], ws, env)
        assert resumed.returncode == 2 and f"process {winner.pid}" in resumed.stderr, resumed.stderr

        out, err = winner.communicate(timeout=60)
        assert winner.returncode == 0, err
        assert json.loads(out.splitlines()[-1])["answer"] == "slow answer"
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
    assert len(stub_server.requests) == before + 1  # the refused run never reached the model

    db = sqlite3.connect(ws / ".workbench" / "threads.sqlite3")
    assert db.execute("SELECT COUNT(*) FROM runs WHERE thread_id=?", (thread,)).fetchone()[0] == 2
    shown = json.loads(cli(["show", thread, "--json"], ws, env).stdout)
    assert [m["content"] for m in shown["messages"]] in (
        ["hello", "first turn", "turn 1", "slow answer"], ["hello", "first turn", "turn 2", "slow answer"])
    types = [e["type"] for e in shown["events"]]
    assert types.count("run_started") == 2 and types.count("run_finished") == 2
    assert shown["status"] == "done"


def _driver(ws: Path, steps: int) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(DRIVER), str(ws), str(steps)], cwd=ROOT, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})


def _wait_line(proc: subprocess.Popen[str], timeout: float = 30) -> str:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    line = proc.stdout.readline()
    assert line or proc.poll() is not None, "the driver printed nothing"
    assert time.monotonic() < deadline
    return line.strip()


@pytest.mark.timeout(120)
def test_R9_kill_9_at_random_moments_never_applies_an_edit_twice(tmp_path):
    steps = 1000  # more than 16 random kills can get through: every attempt ends in a kill
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "log.txt").write_text("END\n", encoding="utf-8")
    rng = random.Random(20261130)
    kills = 0
    started = time.monotonic()
    for _ in range(16):
        proc = _driver(ws, steps)
        first = _wait_line(proc)
        if first == "finished":
            proc.communicate(timeout=30)
            break
        assert first == "ready", (first, proc.stderr.read() if proc.stderr else "")
        time.sleep(rng.uniform(0.02, 0.4))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            kills += 1
        proc.communicate(timeout=30)
    for _ in range(5):  # then let it finish, recovering once more
        proc = _driver(ws, steps)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        if "finished" in out.split():
            break
    else:
        pytest.fail("the session never finished")
    assert kills >= 8, f"only {kills} kills landed: the test no longer exercises recovery"
    assert time.monotonic() - started < 100

    lines = (ws / "log.txt").read_text(encoding="utf-8").splitlines()
    assert lines[-1] == "END"
    twice = {line: n for line in set(lines) if (n := lines.count(line)) > 1}
    assert not twice, f"edits applied more than once: {twice}"
    numbers = [int(line.split()[1]) for line in lines[:-1]]
    assert numbers == sorted(numbers)
    # nothing lost beyond the step in flight: a missing line's call was cut off by a kill (and says so)
    history = json.loads((ws / "history.json").read_text(encoding="utf-8"))
    unknown = {m["tool_call_id"] for m in history if m.get("role") == "tool" and "may or may not" in (m.get("content") or "")}
    calls = {c["id"]: int(c["arguments"]["new_string"].split()[1])
             for m in history if m.get("role") == "assistant" for c in (m.get("tool_calls") or [])}
    assert sorted(calls.values()) == list(range(1, steps + 1))  # every step asked once, in order
    missing = set(range(1, steps + 1)) - set(numbers)
    assert missing <= {calls[c] for c in unknown}, (missing, unknown)
    assert len(unknown) <= kills
