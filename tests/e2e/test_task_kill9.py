"""kill -9 while a FOREGROUND sub-agent task runs (D5, D7, R9, R2), with the real CLI as subprocesses.

A foreground task is driven by its parent's delegation call, in the parent's process. When that
process dies, the call is settled as cut off — by ``workbench resume`` (recover, R2/R9: never run
again), or by a new turn closing the cut-off run — and the task it drove ends with it: ``failed``,
saying the process ended while it ran, with a ``task_settled`` event on the parent thread; so the
Tasks board reads it right (no ``pending`` with a growing elapsed time) and the thread can be deleted.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.test_cli import cli, env  # noqa: F401 - env is a fixture
from tests.fakes import kill_9, reap, subagent_workspace
from tests.stub_server import StubReply, StubServer
from workbench.engine.store import Store
from workbench.engine.task_store import SqliteTaskStore

CUT_OFF_TASK = "the process running it ended before it finished"


def _tasks(ws: Path) -> list:
    st = Store.for_workspace(ws)
    try:
        return SqliteTaskStore(st).tasks(None)
    finally:
        st.close()


def _kill_during_foreground_task(ws: Path, env: dict[str, str], stub: StubServer) -> str:
    """``workbench run`` delegating in the foreground, killed -9 while the sub-agent's model call is in
    flight. Returns the parent thread."""
    stub.script_for("parent", StubReply(tool_calls=[("delegate_to_researcher", {"task": "Research it"}, "d1")],
                                        usage=(40, 10)),
                    StubReply(text="parent answered after the kill", usage=(40, 10)))
    stub.script_for("researcher", StubReply(text="lost", delay=5), StubReply(text="never asked"))
    proc = subprocess.Popen([sys.executable, "-m", "workbench", "run", "--json", "Delegate it"], cwd=ws, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        thread = json.loads(proc.stdout.readline())["thread"]
        deadline = time.monotonic() + 60
        while not (any(t.status == "pending" for t in _tasks(ws))
                   and any(r.get("model") == "researcher" for r in stub.requests)):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the foreground task never started its model call"
            time.sleep(0.05)
        time.sleep(0.3)
        kill_9(proc)
    finally:
        reap(proc)
    assert proc.returncode == -signal.SIGKILL
    [task] = _tasks(ws)
    assert task.status == "pending" and not task.background  # cut: nothing settled it yet
    return thread


def _check_settled(ws: Path, env: dict[str, str], thread: str) -> None:
    [task] = _tasks(ws)
    assert task.status == "failed", task
    assert task.error and CUT_OFF_TASK in task.error
    assert task.settled is not None
    first = task.elapsed()
    time.sleep(0.3)
    assert _tasks(ws)[0].elapsed() == first  # no longer growing on the Tasks board
    listed = cli(["tasks", "--json"], ws, env)
    assert listed.returncode == 0, listed.stderr
    [row] = [json.loads(line) for line in listed.stdout.splitlines() if line.strip()]
    assert row["status"] == "failed"
    shown = cli(["show", thread, "--json"], ws, env)
    assert shown.returncode == 0, shown.stderr
    settled = [e for e in json.loads(shown.stdout)["events"] if e["type"] == "task_settled"]
    assert [(e["task_id"], e["status"]) for e in settled] == [(task.id, "failed")]


@pytest.fixture
def wb_env(env):  # noqa: F811 - the e2e env fixture
    return dict(env, WORKBENCH_TRUST="1", WORKBENCH_MODEL_DAEMON="0")


async def _delete(ws: Path, thread: str) -> None:
    from workbench.session import Session

    session = await Session.open(ws, thread, api_key="sk-test")
    try:
        session.delete_thread(thread)  # D7: no task "would go on without a thread to report to"
        assert session.store.thread(thread) is None
    finally:
        await session.close()


async def test_D5_R9_kill_9_during_a_foreground_task_then_resume_settles_the_task(tmp_path, wb_env, stub_server):
    """D5, D7, R9, R2: after kill -9 mid foreground sub-agent, ``workbench resume`` (recover) settles the
    parent's delegation call as not finished (never run again) AND the task it drove: ``failed``, "the
    process running it ended…", with its ``task_settled``; the thread can then be deleted."""
    ws = subagent_workspace(tmp_path, stub_server.url)
    thread = _kill_during_foreground_task(ws, wb_env, stub_server)
    resumed = cli(["resume", "--thread", thread], ws, wb_env)
    assert resumed.returncode == 0, resumed.stderr
    assert "parent answered after the kill" in resumed.stdout
    assert len([r for r in stub_server.requests if r.get("model") == "researcher"]) == 1  # not run again
    _check_settled(ws, wb_env, thread)
    await _delete(ws, thread)


async def test_D5_R9_kill_9_during_a_foreground_task_then_a_new_turn_settles_the_task(tmp_path, wb_env, stub_server):
    """D5, D7, R9: after kill -9 mid foreground sub-agent, a NEW turn on the thread closes the cut-off
    run (``_close_cut_off``) and settles the task its delegation call drove, in the same closing."""
    ws = subagent_workspace(tmp_path, stub_server.url)
    thread = _kill_during_foreground_task(ws, wb_env, stub_server)
    second = cli(["run", "--thread", thread, "A new turn"], ws, wb_env)
    assert second.returncode == 0, second.stderr
    assert "parent answered after the kill" in second.stdout
    assert len([r for r in stub_server.requests if r.get("model") == "researcher"]) == 1
    _check_settled(ws, wb_env, thread)
    await _delete(ws, thread)
