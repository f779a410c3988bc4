"""Aborting a sub-agent task that another process drives (D10, D7; R7), with real processes.

A ``workbench run`` (the real CLI, as a subprocess) launches a background task and waits for it; a
second ``Session`` — a window open on the same thread, in this test's process — aborts it. The stop is
recorded on the task's row and the driving process stops the run within a step: the row says
``aborted`` only once the run has stopped, the sub-agent makes no further model call, and the row
never flips to another ending. When the driving process does not answer, the abort is refused naming
it; when it is gone, the task is settled where it was asked.
"""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.test_cli import env  # noqa: F401 - a fixture
from tests.fakes import subagent_workspace
from tests.stub_server import StubReply, StubServer
from workbench.engine.middleware import RunResult
from workbench.engine.store import Store
from workbench.engine.task_store import SqliteTaskStore
from workbench.engine.usage import Usage
from workbench.errors import RunError
from workbench.harness.task_runner import LocalTaskRunner

TIMEOUT = 120


def _popen(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "workbench", *args], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _researcher_calls(stub: StubServer) -> int:
    return len([r for r in stub.requests if r.get("model") == "researcher"])


async def _until(check, what: str, proc: subprocess.Popen[str] | None = None, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the driving process ended before {what}: {proc.communicate()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def _task_rows(ws: Path) -> list:
    st = Store.for_workspace(ws)
    try:
        return SqliteTaskStore(st).tasks(None)
    finally:
        st.close()


async def _launched_and_running(ws: Path, stub: StubServer, proc: subprocess.Popen[str]):
    """Wait until the driving process runs the task and its sub-agent's model call is in flight."""
    await _until(lambda: any(t.status == "pending" for t in _task_rows(ws)) and _researcher_calls(stub) >= 1,
                 "the task's first model call", proc)
    [task] = _task_rows(ws)
    await _until(lambda: _holder(ws, task.parent_thread) is None, "the parent's run to end (it waits for its task)",
                 proc)
    return task


def _holder(ws: Path, thread: str):
    st = Store.for_workspace(ws)
    try:
        return st.holder(thread)
    finally:
        st.close()


@pytest.fixture
def driven(tmp_path, env, stub_server: StubServer):  # noqa: F811 - env is the e2e fixture
    """A ``workbench run`` driving one background researcher task, whose model call is in flight."""
    ws = subagent_workspace(tmp_path, stub_server.url)
    stub_server.script_for("parent", StubReply(tool_calls=[("delegate_to_researcher",
                                                            {"task": "Research it", "background": True}, "d1")]),
                           StubReply(text="launched"))
    stub_server.script_for("researcher", StubReply(tool_calls=[("ls", {"path": "/"}, "r1")], usage=(500, 500), delay=4),
                           StubReply(text="ran to the end after it was aborted", usage=(500, 500)))
    env = dict(env, WORKBENCH_TRUST="1", WORKBENCH_MODEL_DAEMON="0")
    proc = _popen(["run", "Launch it"], ws, env)
    yield ws, proc, env
    if proc.poll() is None:
        proc.kill()
        proc.communicate(timeout=30)


async def test_D10_D7_abort_from_another_process_stops_the_task_where_it_runs(driven, stub_server: StubServer):
    """D10, D7, R7: ``abort_task`` from a second process on a task a ``workbench run`` drives returns
    ``aborted`` only once that process has stopped the run: the sub-agent makes no further model call,
    the driving process reports it aborted, and the row stays ``aborted`` (never ``completed``)."""
    from workbench.session import Session

    ws, proc, _ = driven
    task = await _launched_and_running(ws, stub_server, proc)
    other = await Session.open(ws, task.parent_thread, api_key="sk-test")
    try:
        asked = time.monotonic()
        record = await other.abort_task(task.id)
        assert record is not None and record.status == "aborted", record
        assert time.monotonic() - asked < 10  # honoured within a step (the model call in flight is cut)
        out, err = await asyncio.to_thread(proc.communicate, timeout=TIMEOUT)
        assert proc.returncode == 0, err
        assert f"task {task.id} aborted" in err, err
        assert other.task(task.id).status == "aborted"  # the driver never turned it into another ending
        assert _researcher_calls(stub_server) == 1  # no model call after the abort
        assert "ran to the end" not in (other.task(task.id).outcome or "")
        settled = [e for e in other.store.events(task.parent_thread) if e.type == "task_settled"]
        assert [e.data["status"] for e in settled] == ["aborted"]
    finally:
        await other.close()


#: A long-lived process (as a window is) that launches a background task and drives it: it prints
#: READY once the task runs, lives on for a while, then waits for the task and prints how it ended.
WINDOW = """
import asyncio, sys
from workbench.session import Session

async def main():
    session = await Session.open(sys.argv[1], api_key="sk-test")
    await session.run("Launch it")
    while [t.status for t in session.tasks()] != ["pending"]:
        await asyncio.sleep(0.05)
    print("READY", session.thread_id, flush=True)
    await asyncio.sleep(float(sys.argv[2]))
    await session.wait_for_tasks(60)
    print("FINAL", [(t.status, t.outcome) for t in session.tasks()], flush=True)
    await session.close()

asyncio.run(main())
"""


async def test_D10_abort_from_another_process_then_delete_leaves_nothing_written(
        tmp_path, env, stub_server):  # noqa: F811 - env is the e2e fixture
    """D10, D7, R7: a long-lived process (a window) drives a background task; a second process aborts it
    and deletes the thread at once (allowed: the row says aborted). The driving process stopped the run
    before the row said so, so it writes nothing more on the deleted threads: no ``task_settled`` on a
    thread that is gone, no child checkpoint, no task row brought back, no further model call."""
    from workbench.session import Session

    ws = subagent_workspace(tmp_path, stub_server.url)
    stub_server.script_for("parent", StubReply(tool_calls=[("delegate_to_researcher",
                                                            {"task": "Research it", "background": True}, "d1")]),
                           StubReply(text="launched"))
    stub_server.script_for("researcher", StubReply(tool_calls=[("ls", {"path": "/"}, "r1")], usage=(500, 500), delay=3),
                           StubReply(text="ran to the end after it was aborted", usage=(500, 500)))
    script = tmp_path / "window.py"
    script.write_text(WINDOW, encoding="utf-8")
    env = dict(env, WORKBENCH_TRUST="1", WORKBENCH_MODEL_DAEMON="0")
    proc = subprocess.Popen([sys.executable, str(script), str(ws), "8"], env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = await asyncio.to_thread(proc.stdout.readline)
        assert line.startswith("READY"), proc.communicate(timeout=30)
        parent = line.split()[1]
        await _until(lambda: _researcher_calls(stub_server) >= 1, "the task's first model call", proc)
        [task] = _task_rows(ws)
        other = await Session.open(ws, parent, api_key="sk-test")
        try:
            record = await other.abort_task(task.id)
            assert record is not None and record.status == "aborted"
            other.delete_thread(parent)
            out, err = await asyncio.to_thread(proc.communicate, timeout=TIMEOUT)
            assert proc.returncode == 0, err
            assert other.store.thread(parent) is None and other.store.thread(task.child_thread) is None
            assert other.store.events(parent) == []  # nothing written on the deleted thread
            assert other.store.latest_checkpoint(task.child_thread) is None
            assert _task_rows(ws) == []
            assert _researcher_calls(stub_server) == 1  # the run stopped: no further model call
        finally:
            await other.close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)


async def test_D10_abort_of_a_task_whose_driver_does_not_answer_is_refused_naming_it(tmp_path, stub_server):
    """D10, R7: a task owned by a live process that does not stop it (here a process that never reads
    the request) is not marked aborted: ``abort_task`` refuses, naming that process, and the stop stays
    recorded; once that process is gone, the abort settles it ``aborted`` where it was asked, and a
    ``recover`` elsewhere would not run it."""
    from workbench.session import Session

    ws = subagent_workspace(tmp_path, stub_server.url)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        time.sleep(0.2)
        session = await Session.open(ws, api_key="sk-test")
        try:
            tasks = SqliteTaskStore(session.store)
            child = session.store.create_thread(title="researcher: R")
            task = tasks.create_task(parent_thread=session.thread_id, parent_run="r0", call_id="c1",
                                     agent="researcher", child_thread=child, description="R", background=True,
                                     status="pending", envelope={}, depth=1, prompt="R")
            tasks.update_task(task.id, owner=f"{socket.gethostname()} {sleeper.pid} {time.time():.3f}")
            session._runner().stop_wait_seconds = 1.0
            with pytest.raises(RunError, match=rf"process {sleeper.pid} on {socket.gethostname()}"):
                await session.abort_task(task.id)
            held = session.task(task.id)
            assert held.status == "pending" and held.stop_requested is not None  # never "aborted" while it may run

            sleeper.send_signal(signal.SIGKILL)
            sleeper.wait(30)
            record = await session.abort_task(task.id)
            assert record is not None and record.status == "aborted"
        finally:
            await session.close()
    finally:
        if sleeper.poll() is None:
            sleeper.kill()
            sleeper.wait(30)
    assert _researcher_calls(stub_server) == 0


async def test_D10_a_stop_asked_while_its_process_was_gone_is_honoured_by_recover(tmp_path, stub_server):
    """D10, D5: a stop recorded for a task whose process then died is honoured when a later process
    recovers the thread's tasks: it ends ``aborted`` without running."""
    from workbench.session import Session

    ws = subagent_workspace(tmp_path, stub_server.url)
    st = Store.for_workspace(ws)
    tasks = SqliteTaskStore(st)
    parent = st.create_thread(title="p")
    child = st.create_thread(title="researcher: R")
    task = tasks.create_task(parent_thread=parent, parent_run="r0", call_id="c1", agent="researcher",
                             child_thread=child, description="R", background=True, status="pending",
                             envelope={}, depth=1, prompt="R")
    tasks.update_task(task.id, owner=f"{socket.gethostname()} 999999999 {time.time():.3f}")
    tasks.request_stop(task.id)
    st.close()
    session = await Session.open(ws, parent, api_key="sk-test")
    try:
        await asyncio.sleep(0.3)
        assert session.task(task.id).status == "aborted"
    finally:
        await session.close()
    assert _researcher_calls(stub_server) == 0


def test_D7_a_settled_task_keeps_its_ending(tmp_path):
    """D7: settling is conditional on the row not having settled: a result that comes after an abort (a
    driver that did not see it) never turns ``aborted`` into ``completed``, and publishes no second
    ``task_settled``."""
    st = Store(tmp_path / "t.sqlite3")
    try:
        tasks = SqliteTaskStore(st)
        parent = st.create_thread(title="p")
        child = st.create_thread(title="c")
        task = tasks.create_task(parent_thread=parent, parent_run="r0", call_id="c1", agent="researcher",
                                 child_thread=child, description="R", background=True, status="pending",
                                 envelope={}, depth=1, prompt="R")
        published: list[tuple[str, dict]] = []
        runner = LocalTaskRunner(tasks, lambda t: None,  # type: ignore[arg-type,return-value]
                                 publish=lambda t, type, data: published.append((type, data)))
        tasks.update_task(task.id, status="aborted", settled=time.time(), error="aborted")
        record = runner._record_result(tasks.task(task.id), RunResult("done", "late answer", Usage(), thread_id=child))
        assert record.status == "aborted" and tasks.task(task.id).status == "aborted"
        assert tasks.task(task.id).outcome == ""
        assert [t for t, _ in published if t == "task_settled"] == []
        assert not tasks.update_unsettled(task.id, status="completed")
        assert json.dumps(tasks.task(task.id).to_dict())  # still a well-formed row
    finally:
        st.close()
