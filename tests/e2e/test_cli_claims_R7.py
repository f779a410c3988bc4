"""One writer per thread with the real CLI as subprocesses (R7): a clock stepped forward under a live run,
``workbench compact`` holding its thread (C7), and two processes recovering one background task (D5).

Each against the loopback stub. The shifted clock and the widened recovery window are put into the
subprocess by a ``sitecustomize`` on its PYTHONPATH (they change no code path: the clock reads behind
the host's; the first read of the task rows waits until the other process has read them too).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from tests.e2e.test_cli import cli, env, json_lines, no_traceback  # noqa: F401 - env is a fixture
from tests.e2e.test_cli_compact import first_run, workspace
from tests.fakes import kill_9, reap, subagent_workspace
from tests.stub_server import StubReply, StubServer
from workbench.engine.store import Store
from workbench.engine.task_store import SqliteTaskStore

TIMEOUT = 120

CLOCK_BEHIND = """
import os, time
_behind = float(os.environ.get("WB_CLOCK_BEHIND", "0"))
if _behind:
    _real = time.time
    time.time = lambda: _real() - _behind
"""

#: Both processes read the task rows before either takes a task: the first read that finds a pending
#: task waits until every process named by the barrier folder has read them too (at most 20 s).
READ_BARRIER = """
import os, time
_folder = os.environ.get("WB_TASK_READ_BARRIER")
if _folder:
    from workbench.engine import task_store
    _read = task_store.SqliteTaskStore.tasks
    _waited = []

    def tasks(self, parent_thread=None):
        rows = _read(self, parent_thread)
        if parent_thread is None and not _waited and any(r.status == "pending" for r in rows):
            _waited.append(1)
            open(os.path.join(_folder, str(os.getpid())), "w").close()
            deadline = time.monotonic() + 20
            while len(os.listdir(_folder)) < 2 and time.monotonic() < deadline:
                time.sleep(0.01)
        return rows

    task_store.SqliteTaskStore.tasks = tasks
"""


def _popen(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "workbench", *args], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _with_site(env: dict[str, str], folder: Path, code: str, **extra: str) -> dict[str, str]:
    folder.mkdir(exist_ok=True)
    (folder / "sitecustomize.py").write_text(code, encoding="utf-8")
    return {**env, **extra, "PYTHONPATH": os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")])}


def _wait(check, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _calls(stub: StubServer, model: str) -> int:
    return sum(1 for r in stub.requests if r.get("model") == model)


# -- a forward clock step --------------------------------------------------------------------------------
def test_R7_a_run_whose_clock_was_stepped_forward_keeps_its_thread(tmp_path, env, stub_server: StubServer):
    """The holder's wall clock reads 120 s behind the host's (stepped forward after it claimed): a second
    ``run --thread T`` is refused (exit 2, the holder named) and the holder finishes its turn."""
    ws = subagent_workspace(tmp_path, stub_server.url)
    env = dict(env, WORKBENCH_TRUST="1", WORKBENCH_MODEL_DAEMON="0")
    stub_server.script_for("parent", StubReply(text="first"))
    made = cli(["run", "--json", "hello"], ws, env)
    assert made.returncode == 0, made.stderr
    thread = json_lines(made.stdout)[-1]["thread"]
    stub_server.script_for("parent", StubReply(text="the holder's answer", delay=6), StubReply(text="never asked"))
    holder = _popen(["run", "--thread", thread, "--json", "turn A"], ws,
                    _with_site(env, tmp_path / "clock", CLOCK_BEHIND, WB_CLOCK_BEHIND="120"))
    try:
        _wait(lambda: _calls(stub_server, "parent") >= 2, "the holder's model call")
        second = cli(["run", "--thread", thread, "--json", "turn B"], ws, env)
        no_traceback(second)
        assert second.returncode == 2, second.stderr
        assert f"already has a run in flight in another process (process {holder.pid} on {socket.gethostname()}" \
            in second.stderr
        out, err = holder.communicate(timeout=TIMEOUT)
        assert holder.returncode == 0, err
        assert json_lines(out)[-1]["answer"] == "the holder's answer" and "taken over" not in err
    finally:
        reap(holder)
    assert _calls(stub_server, "parent") == 2  # the refused run asked nothing


# -- compact holds the thread (C7) -----------------------------------------------------------------------
def test_R7_C7_compact_holds_the_thread_while_it_summarises(tmp_path, env, stub_server: StubServer):
    """While ``compact``'s summary call is in flight, a ``run`` on the thread and a second ``compact`` are
    refused (exit 2, the holder named): one summary is paid for, one compression stored. Once it ends, the
    thread is free."""
    ws = workspace(tmp_path, stub_server)
    thread = first_run(ws, env, stub_server)
    stub_server.script_for("cheap", StubReply(text="THE SUMMARY", delay=5, usage=(100, 10)),
                           StubReply(text="A SECOND SUMMARY", usage=(100, 10)))
    compacting = _popen(["compact", "--thread", thread, "--json"], ws, env)
    try:
        _wait(lambda: _calls(stub_server, "cheap") >= 1, "the summary call")
        run = cli(["run", "--thread", thread, "--json", "a turn meanwhile"], ws, env)
        no_traceback(run)
        assert run.returncode == 2, run.stderr
        assert f"thread {thread} already has a run in flight in another process (process {compacting.pid} " \
            in run.stderr
        again = cli(["compact", "--thread", thread, "--json"], ws, env)
        no_traceback(again)
        assert again.returncode == 2, again.stderr
        assert f"thread {thread} is running in another process (process {compacting.pid} " in again.stderr
        out, err = compacting.communicate(timeout=TIMEOUT)
        assert compacting.returncode == 0, err
        assert json.loads(out)["compacted"] is True and json.loads(out)["summary"] == "THE SUMMARY"
    finally:
        reap(compacting)
    assert _calls(stub_server, "cheap") == 1
    shown = json.loads(cli(["show", thread, "--json"], ws, env).stdout)
    assert [c["id"] for c in shown["compressions"]] == [1]
    assert [e["compression"] for e in shown["events"] if e["type"] == "compression_applied"] == [1]
    assert Store.for_workspace(ws).holder(thread) is None  # released
    stub_server.script_for("test-model", StubReply(text="after the compaction"))
    after = cli(["run", "--thread", thread, "--json", "and now"], ws, env)
    assert after.returncode == 0, after.stderr


# -- two processes recovering one background task (D5) ---------------------------------------------------
def _tasks(ws: Path) -> list:
    st = Store.for_workspace(ws)
    try:
        return SqliteTaskStore(st).tasks(None)
    finally:
        st.close()


def test_R7_D5_two_processes_recovering_one_background_task_drive_it_once(tmp_path, env, stub_server: StubServer):
    """A background task left ``pending`` by a kill -9; then two ``workbench resume --thread T`` at once,
    both reading the task rows before either takes the task. One drives it: it completes (never
    ``failed`` because the other holds its thread), with one sub-agent call."""
    ws = subagent_workspace(tmp_path, stub_server.url)
    env = dict(env, WORKBENCH_TRUST="1", WORKBENCH_MODEL_DAEMON="0")
    stub_server.script_for("parent", StubReply(tool_calls=[("delegate_to_researcher",
                                                            {"task": "Research it", "background": True}, "d1")]),
                           StubReply(text="launched"), *[StubReply(text="told") for _ in range(4)])
    stub_server.script_for("researcher", StubReply(text="lost", delay=8),  # under the stub's 10 s stop
                           *[StubReply(text="the research result", delay=2) for _ in range(3)])
    first = _popen(["run", "--json", "Delegate it"], ws, env)
    try:
        assert first.stdout is not None
        thread = json.loads(first.stdout.readline())["thread"]
        _wait(lambda: any(t.status == "pending" for t in _tasks(ws)) and _calls(stub_server, "researcher") >= 1,
              "the task's model call")
        time.sleep(0.3)
        kill_9(first)
    finally:
        reap(first)
    before = _calls(stub_server, "researcher")
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    both = _with_site(env, tmp_path / "site", READ_BARRIER, WB_TASK_READ_BARRIER=str(barrier))
    procs = [_popen(["resume", "--thread", thread, "--json"], ws, both) for _ in range(2)]
    try:
        results = [p.communicate(timeout=TIMEOUT) for p in procs]
    finally:
        for p in procs:
            reap(p)
    assert len(os.listdir(barrier)) == 2  # both read the rows before either took the task
    for p, (_, err) in zip(procs, results):
        assert p.returncode == 0, err
        assert "Traceback" not in err
    [task] = _tasks(ws)
    assert task.status == "completed", (task.status, task.error)
    assert task.error is None and task.outcome == "the research result"
    assert _calls(stub_server, "researcher") - before == 1  # driven once
