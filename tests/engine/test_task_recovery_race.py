"""D5, R7: a background task left by a gone process is driven again by one process only.

``LocalTaskRunner.recover`` takes a task with a compare-and-set on its owner (``TaskStore.take_task``):
a process whose read of the rows is older than another's take leaves the task alone. And a run of a
task whose thread another process holds (it drives the task) leaves the row to that process — it is
not settled ``failed`` here. Two "processes" are two ``Store`` objects on one file; the real-process
race is in tests/e2e/test_cli_claims_R7.py.
"""

from __future__ import annotations

import asyncio
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from tests.fakes import until
from workbench.engine.agent import Agent, Engine
from workbench.engine.models.scripted import ScriptedModel, reply
from workbench.engine.store import Store
from workbench.engine.task_store import SqliteTaskStore, TaskRecord
from workbench.harness.task_runner import LocalTaskRunner, process_owner


def _dead_owner() -> str:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return f"{socket.gethostname()} {int(done.stdout)} {time.time() - 60:.3f}"


def _left_task(path: Path) -> tuple[str, str]:
    """A pending background task whose process was killed (its owner's pid is gone). Returns (task id,
    child thread)."""
    st = Store(path)
    try:
        tasks = SqliteTaskStore(st)
        parent = st.create_thread(title="parent")
        child = st.create_thread(title="child")
        task = tasks.create_task(parent_thread=parent, parent_run="r0", call_id="c1", agent="researcher",
                                 child_thread=child, description="Research", background=True, status="pending",
                                 envelope={}, depth=1, prompt="Research it")
        tasks.update_task(task.id, owner=_dead_owner())
        return task.id, child
    finally:
        st.close()


def _runner(path: Path, model: ScriptedModel) -> tuple[LocalTaskRunner, Store]:
    st = Store(path)
    tasks = SqliteTaskStore(st)

    def engine_for(record: TaskRecord) -> Engine:
        return Engine(Agent(model, instructions="SUB"), st)

    return LocalTaskRunner(tasks, engine_for), st


async def test_D5_R7_recover_leaves_a_task_another_process_took_since_its_rows_were_read(tmp_path):
    """Process A read the rows (owner: the killed process); process B took the task meanwhile. A's
    recover must not take it from B: one driver per task (before: A's unconditional write made both
    drive it)."""
    path = tmp_path / "threads.sqlite3"
    task_id, _ = _left_task(path)
    model = ScriptedModel([reply("A's answer")])
    runner, st = _runner(path, model)
    try:
        read_then = runner.tasks.tasks(None)  # A's read, before B's take
        b_owner = "elsewhere.invalid 4242 1700000000.000"  # B: a live process this one cannot judge by pid
        with sqlite3.connect(path) as db:
            db.execute("UPDATE tasks SET owner=? WHERE id=?", (b_owner, task_id))
        runner.tasks.tasks = lambda parent_thread=None: read_then  # type: ignore[method-assign]
        assert runner.recover() == []
        await asyncio.sleep(0.2)
        record = SqliteTaskStore(st).task(task_id)
        assert record is not None and record.owner == b_owner and record.status == "pending"
        assert model.calls == 0  # A never ran it
    finally:
        await runner.close()
        st.close()


async def test_D5_R7_of_two_runners_recovering_one_task_at_once_one_drives_it(tmp_path):
    """Both read the rows before either takes the task (the window a slow disk or a busy loop widens):
    the first take wins, the other leaves it; the task completes once, with one sub-agent call."""
    path = tmp_path / "threads.sqlite3"
    task_id, _ = _left_task(path)
    model_a, model_b = ScriptedModel([reply("from A")]), ScriptedModel([reply("from B")])
    runner_a, st_a = _runner(path, model_a)
    runner_b, st_b = _runner(path, model_b)
    try:
        rows_a, rows_b = runner_a.tasks.tasks(None), runner_b.tasks.tasks(None)
        runner_a.tasks.tasks = lambda parent_thread=None: rows_a  # type: ignore[method-assign]
        runner_b.tasks.tasks = lambda parent_thread=None: rows_b  # type: ignore[method-assign]
        picked_a = runner_a.recover()
        # B is another process: this process's own record of the tasks its runners drive is not B's
        from workbench.harness import task_runner

        driven_here = set(task_runner._DRIVEN)
        task_runner._DRIVEN.clear()
        try:
            picked_b = runner_b.recover()
        finally:
            task_runner._DRIVEN.update(driven_here)
        assert picked_a == [task_id] and picked_b == []
        tasks = SqliteTaskStore(st_a)
        await until(lambda: tasks.task(task_id).status == "completed", timeout=20, what="the task to complete")
        record = tasks.task(task_id)
        assert record.outcome == "from A" and record.error is None
        assert model_a.calls == 1 and model_b.calls == 0
    finally:
        await runner_a.close()
        await runner_b.close()
        st_a.close()
        st_b.close()


async def test_D5_R7_a_task_whose_thread_another_process_holds_is_left_unsettled_not_failed(tmp_path):
    """The task's run cannot claim its thread: another process holds it, so that process drives the
    task and settles its row. This runner writes no ending (before: ``failed`` with ThreadBusyError,
    and the process that really ran it then found the task settled and stopped its run)."""
    path = tmp_path / "threads.sqlite3"
    task_id, child = _left_task(path)
    model = ScriptedModel([reply("never")])
    runner, st = _runner(path, model)
    other = Store(path)  # the process that drives it
    try:
        assert runner.recover() == [task_id]
        claim = other.claim(child)  # it claimed the task's thread first
        tasks = SqliteTaskStore(st)
        await until(lambda: not runner._drivers, timeout=20, what="the runner's attempt to end")
        record = tasks.task(task_id)
        assert record is not None and record.status == "pending" and record.error is None and record.settled is None
        assert record.owner != process_owner()  # no longer names this process as its driver
        assert model.calls == 0
        assert [e.type for e in st.events(record.parent_thread) if e.type == "task_settled"] == []
        other.release(claim)
    finally:
        await runner.close()
        st.close()
        other.close()

