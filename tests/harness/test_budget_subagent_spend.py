"""A sub-agent's whole spend counts toward its parent's budgets, once, however its task ends (B1, B4, D8):
its own sub-agents' spend included (``max_depth`` 2), and when its delegation call never returns — the
parent stopped, or its process killed and the run recovered. Real sessions against the loopback stub
(litellm for real), which answers the parent and each sub-agent by model name with scripted usage.

The figure every test checks is the budget's ``spent`` against what was really spent: the usage of every
thread involved (the parent's, its tasks', their tasks'), each model call once."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import sessions_on_the_task_loop
from tests.stub_server import StubReply, StubServer
from workbench.session import Session

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True, params=["caller's loop", "task loop"])
def runner_loop(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Sub-agents on the caller's loop (CLI, scripts) and, as the window runs them, on the task loop."""
    if request.param == "task loop":
        if "kill_9" in request.node.name:
            pytest.skip("runs its parent in a subprocess, which opens its session the CLI's way")
        sessions_on_the_task_loop(monkeypatch)
    return str(request.param)


def workspace(path: Path, stub: StubServer, *, budget: str, agents: str, extra: str = "") -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "workbench.yaml").write_text(
        f"model: openai/parent\napi_base: {stub.url}\npermissions: {{default: allow}}\nbudget:\n  - {budget}\n"
        f"subagents:\n{extra}  agents:\n{agents}")
    return path


def real_spend(session: Session) -> int:
    """Every model call's tokens: the parent's thread and every task's thread, at any depth."""
    threads = {session.thread_id} | {t.child_thread for t in session.tasks(all_threads=True)}
    return sum(session.store.thread_usage(t).total_tokens for t in threads)


def spent(session: Session) -> float:
    return session.budget_figures()[0]["fields"]["total_tokens"]["spent"]


async def test_b4_d8_a_grandchilds_spend_counts_toward_the_top_run(tmp_path: Path, stub_server: StubServer) -> None:
    """B4, D8 (``max_depth`` 2): a1 delegates to a2, whose 1500 tokens count toward the top run's budget
    — once: not left out (the parent counted only a1's own thread) and not added twice (a1's record of its
    sub-agent's usage for its own envelope is the same calls)."""
    ws = workspace(tmp_path / "ws", stub_server, budget="{scope: run, limit: {total_tokens: 100000}}",
                   extra="  max_depth: 2\n",
                   agents="    - {name: a1, description: Plans., model: openai/a1}\n"
                          "    - {name: a2, description: Reads., model: openai/a2}\n")
    stub_server.script_for("parent", StubReply(tool_calls=[("delegate_to_a1", {"task": "job"})], usage=(10, 5)),
                           StubReply(text="parent done", usage=(10, 5)))
    stub_server.script_for("a1", StubReply(tool_calls=[("delegate_to_a2", {"task": "read"})], usage=(10, 5)),
                           StubReply(text="a1 done", usage=(10, 5)))
    stub_server.script_for("a2", StubReply(text="a2 read it", usage=(800, 700)))
    session = await Session.open(ws, api_key="sk-test")
    try:
        result = await session.run("go")
        assert result.status == "done", result
        assert real_spend(session) == 15 * 4 + 1500
        assert spent(session) == real_spend(session)
        [task] = session.tasks()
        assert task.usage.total_tokens == 30 + 1500  # the task's figure is its whole spend too
    finally:
        await session.close()


async def test_b4_d8_a_grandchilds_spend_stops_the_top_run_at_its_hard_limit(tmp_path: Path,
                                                                          stub_server: StubServer) -> None:
    """B2, B4: under a hard run limit of 2000, once a1's sub-agent spent 1500 the parent's next launch gets
    only what is left, and no parent call is made past the limit: the run never reaches 3000+ tokens."""
    ws = workspace(tmp_path / "ws", stub_server, budget="{scope: run, limit: {total_tokens: 2000}}",
                   extra="  max_depth: 2\n",
                   agents="    - {name: a1, description: Plans., model: openai/a1}\n"
                          "    - {name: a2, description: Reads., model: openai/a2}\n")
    stub_server.script_for("parent", StubReply(tool_calls=[("delegate_to_a1", {"task": "job"}, "p1")], usage=(10, 5)),
                           StubReply(tool_calls=[("delegate_to_a1", {"task": "job again"}, "p2")], usage=(10, 5)),
                           StubReply(text="parent done", usage=(10, 5)))
    stub_server.script_for("a1", StubReply(tool_calls=[("delegate_to_a2", {"task": "read"}, "c1")], usage=(10, 5)),
                           StubReply(text="a1 done", usage=(10, 5)),
                           StubReply(tool_calls=[("delegate_to_a2", {"task": "read"}, "c2")], usage=(10, 5)),
                           StubReply(text="a1 done", usage=(10, 5)))
    stub_server.script_for("a2", StubReply(text="a2 read it", usage=(800, 700)),
                           StubReply(text="a2 read it", usage=(800, 700)))
    session = await Session.open(ws, api_key="sk-test")
    try:
        result = await session.run("go")
        assert result.status == "aborted" and "budget" in (result.error or ""), result
        assert spent(session) == real_spend(session)
        # the second a1 got what was left after the first one's 1530 (2000 - 15 - 15 - 1530 = 440)
        assert session.tasks()[1].envelope == {"total_tokens": 440.0}
        assert len([r for r in stub_server.requests if r["model"] == "parent"]) == 2
    finally:
        await session.close()


async def test_b1_b4_a_stopped_foreground_sub_agents_spend_counts_once(tmp_path: Path,
                                                                      stub_server: StubServer) -> None:
    """B1, B4: Stop while a foreground sub-agent runs: its delegation call never returns a result, yet the
    1800 tokens it spent count toward the session budget at once — and only once, in later runs too."""
    ws = workspace(tmp_path / "ws", stub_server, budget="{scope: session, limit: {total_tokens: 5000}}",
                   agents="    - {name: a1, description: Reads., model: openai/a1}\n")
    stub_server.script_for("parent", StubReply(tool_calls=[("delegate_to_a1", {"task": "job"}, "d1")], usage=(10, 5)))
    stub_server.script_for("a1", StubReply(tool_calls=[("ls", {"path": "/"}, "x1")], usage=(900, 900)),
                           StubReply(text="slow", delay=3))
    session = await Session.open(ws, api_key="sk-test")
    try:
        run = asyncio.ensure_future(session.run("go"))
        for _ in range(200):
            if len([r for r in stub_server.requests if r["model"] == "a1"]) >= 2:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)
        await session.stop()
        result = await run
        assert result.status == "aborted", result
        [task] = session.tasks()
        assert task.status == "aborted"
        assert real_spend(session) == 15 + 1800
        assert spent(session) == real_spend(session)
        stub_server.script_for("parent", StubReply(text="a later turn", usage=(300, 200)))
        result = await session.run("another turn")
        assert result.status == "done", result
        assert spent(session) == real_spend(session) == 15 + 1800 + 500
    finally:
        await session.close()


_KILLED_PARENT = r"""
import asyncio, sys
from workbench.session import Session

async def main() -> None:
    session = await Session.open(sys.argv[1], api_key="sk-test")
    print(session.thread_id, flush=True)
    await session.run("go")

asyncio.run(main())
"""


async def test_b1_b4_a_kill_9_foreground_sub_agents_spend_counts_once_after_recovery(
        tmp_path: Path, stub_server: StubServer) -> None:
    """B1, B4, R9: the process running a foreground sub-agent is killed mid-task. Recovery settles the task
    ``failed`` (its call was cut off) and the 1800 tokens it spent count toward the session budget before
    the parent's next model call — once, across the recovery and a later run."""
    ws = workspace(tmp_path / "ws", stub_server, budget="{scope: session, limit: {total_tokens: 5000}}",
                   agents="    - {name: a1, description: Reads., model: openai/a1}\n")
    stub_server.script_for("parent", StubReply(tool_calls=[("delegate_to_a1", {"task": "job"}, "d1")], usage=(10, 5)),
                           StubReply(text="parent answered after the kill", usage=(10, 5)))
    stub_server.script_for("a1", StubReply(tool_calls=[("ls", {"path": "/"}, "x1")], usage=(900, 900)),
                           StubReply(text="lost", delay=6))
    proc = subprocess.Popen([sys.executable, "-c", _KILLED_PARENT, str(ws)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=str(ROOT))
    try:
        thread = (await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 60)).strip()  # type: ignore[union-attr]
        for _ in range(600):
            if len([r for r in stub_server.requests if r["model"] == "a1"]) >= 2:
                break
            assert proc.poll() is None, proc.stderr.read()  # type: ignore[union-attr]
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
    session = await Session.open(ws, thread, api_key="sk-test")
    try:
        result = await session.recover()
        assert result.status == "done", result
        [task] = session.tasks()
        assert task.status == "failed"
        assert real_spend(session) == 30 + 1800
        assert spent(session) == real_spend(session)
        stub_server.script_for("parent", StubReply(text="a later turn", usage=(300, 200)))
        result = await session.run("another turn")
        assert result.status == "done", result
        assert spent(session) == real_spend(session) == 30 + 1800 + 500
    finally:
        await session.close()


def background_job(tmp_path: Path, stub: StubServer, budget: str, agent_budget: str = "") -> Path:
    extra = f", budget: {agent_budget}" if agent_budget else ""
    ws = workspace(tmp_path / "ws", stub, budget=budget, extra="  async: true\n  max_wait_seconds: 20\n",
                   agents=f"    - {{name: a1, description: Reads., model: openai/a1{extra}}}\n")
    stub.script_for("parent", StubReply(tool_calls=[("delegate_to_a1", {"task": "job", "background": True}),
                                                    ("wait_for_background_tasks", {})], usage=(10, 5)),
                    StubReply(text="parent done", usage=(10, 5)))
    stub.script_for("a1", StubReply(tool_calls=[("ls", {"path": "/"})], usage=(450, 450)),
                    StubReply(text="finished", usage=(450, 450)))
    return ws


async def test_d8_b1_continue_from_the_board_gets_what_is_left_not_its_old_envelope(
        tmp_path: Path, stub_server: StubServer) -> None:
    """D8, B1, D10: the board's "Continue…" (``Session.continue_task``) is a launch: after the task spent
    1800 of a 2000-token session budget (1830 with the parent's), its further turn runs under a fresh
    envelope of what is left (170), not its old 1985."""
    ws = background_job(tmp_path, stub_server, "{scope: session, limit: {total_tokens: 2000}}")
    session = await Session.open(ws, api_key="sk-test")
    try:
        await session.run("go")
        assert await session.wait_for_tasks(20)
        [task] = session.tasks()
        assert task.envelope == {"total_tokens": 1985.0} and spent(session) == 1830
        stub_server.script_for("a1", StubReply(text="more", usage=(50, 50)))
        session.continue_task(task.id, "do more")
        assert session.task(task.id).envelope == {"total_tokens": 170.0}
        assert await session.wait_for_tasks(20)
        assert session.task(task.id).outcome == "more"
    finally:
        await session.close()


async def test_d8_b1_continue_from_the_board_with_nothing_left_is_refused_naming_the_budget(
        tmp_path: Path, stub_server: StubServer) -> None:
    """D8, B1: nothing left of the session budget: the board's continue is refused with a RunError naming
    the budget and field, and the task stays as it was (not run again)."""
    from workbench.errors import RunError

    ws = background_job(tmp_path, stub_server, "{scope: session, limit: {total_tokens: 1500}}")
    session = await Session.open(ws, api_key="sk-test")
    try:
        await session.run("go")
        assert await session.wait_for_tasks(20)
        [task] = session.tasks()
        assert spent(session) >= 1500
        calls = len(stub_server.requests)
        with pytest.raises(RunError, match="session budget's total_tokens"):
            session.continue_task(task.id, "do more")
        assert session.task(task.id).status == task.status and session.task(task.id).envelope == task.envelope
        await asyncio.sleep(0.3)
        assert len(stub_server.requests) == calls
    finally:
        await session.close()
