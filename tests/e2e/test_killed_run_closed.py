"""A run killed (kill -9) while its approved ``execute`` runs, then a NEW turn on its thread (R9, R1, G10).

The new turn's engine holds the thread (R7), so the killed run lives nowhere: it is closed ``failed``
("the process ended while this run was in flight") — in ``runs``, with its cut call's
``tool_call_finished`` and its ``run_error``/``run_finished`` — never left ``running`` for good nor
ending, as the transcript read it, with its earlier suspension ("left waiting for 1 decision").
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from tests.e2e.test_cli import cli, env, make_workspace  # noqa: F401 - env is a fixture
from tests.fakes import kill_9, reap
from tests.stub_server import StubReply, StubServer

CUT_OFF = "the process ended while this run was in flight"


def _popen(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "workbench", *args], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_R9_G10_a_run_killed_mid_command_is_closed_failed_when_a_new_turn_starts(tmp_path, env, stub_server: StubServer):
    """R9/R1/R8/G10: kill -9 during the approved command; ``workbench run --thread T "second turn"``
    closes the killed run as failed (row, tool_call_finished for the cut call, run_error, run_finished)
    and then answers the new turn; the command is not run again."""
    ws = make_workspace(tmp_path, stub_server.url)
    stub_server.script(StubReply(tool_calls=[("execute", {"command": "echo start >> c.txt; sleep 30"}, "x1")],
                                 usage=(50, 10)),
                       StubReply(text="second turn answer", usage=(60, 5)))
    proc = _popen(["run", "--json", "--approve", "all", "first turn"], ws, env)
    try:
        assert proc.stdout is not None
        thread = json.loads(proc.stdout.readline())["thread"]
        deadline = time.monotonic() + 60
        while not (ws / "c.txt").exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert (ws / "c.txt").exists(), "the command never started"
        time.sleep(0.3)
        kill_9(proc)
    finally:
        reap(proc)
    assert proc.returncode == -signal.SIGKILL
    db = sqlite3.connect(ws / ".workbench" / "threads.sqlite3")
    [(killed, status)] = db.execute("SELECT id, status FROM runs WHERE thread_id=?", (thread,)).fetchall()
    assert status == "running"  # cut off: nothing closed it yet

    second = cli(["run", "--thread", thread, "--json", "second turn"], ws, env)
    assert second.returncode == 0, second.stderr
    rows = db.execute("SELECT id, status, error, finished FROM runs WHERE thread_id=? ORDER BY started",
                      (thread,)).fetchall()
    assert [(r[0], r[1], r[2]) for r in rows[:1]] == [(killed, "failed", CUT_OFF)]
    assert rows[0][3] is not None and rows[1][1] == "done"
    assert (ws / "c.txt").read_text() == "start\n"  # never run twice

    shown = cli(["show", thread, "--json"], ws, env)
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    mine = [e for e in data["events"] if e["run"] == killed]
    ends = [e for e in mine if e["type"] == "run_finished"]
    assert ends[-1]["status"] == "failed" and ends[-1]["error"] == CUT_OFF  # the last word on the killed run
    assert [e["error"] for e in mine if e["type"] == "run_error"] == [CUT_OFF]
    finished = [(e["call_id"], e["name"], e["status"]) for e in mine if e["type"] == "tool_call_finished"]
    assert finished == [("x1", "execute", "error")]
    tool = [m for m in data["messages"] if m["role"] == "tool"]
    assert len(tool) == 1 and "may or may not have taken effect" in tool[0]["content"]
    assert [m["role"] for m in data["messages"]] == ["user", "assistant", "tool", "user", "assistant"]
    listed = cli(["threads", "--json"], ws, env)
    assert [json.loads(line)["status"] for line in listed.stdout.splitlines()] == ["done"]


async def test_R9_the_engine_closes_a_run_cut_off_before_a_new_turn_in_one_checkpoint(tmp_path):
    """R9/R8 in one process: a run dies (a BaseException, as kill -9: no handler runs) during its second
    call; a new turn closes it failed — the call that finished keeps its result, the cut one says it may
    have taken effect, each gets a tool_call_finished once, and the closing events come before the new
    run's run_started."""
    from workbench.engine.agent import Agent, Engine
    from workbench.engine.models.scripted import ScriptedModel, reply, tool_reply
    from workbench.engine.store import Store
    from workbench.engine.tools import Tool, schema

    class Crash(BaseException):
        pass

    async def apply(args, ctx):
        return "applied"

    async def boom(args, ctx):
        raise Crash()

    tools = [Tool("apply", "", schema({}), apply), Tool("boom", "", schema({}), boom)]
    engine = Engine(Agent(ScriptedModel([tool_reply(("apply", {}, "c1"), ("boom", {}, "c2"))]), tools=tools),
                    Store.for_workspace(tmp_path))
    try:
        await engine.run("t", "go")
    except Crash:
        pass
    store = Store.for_workspace(tmp_path)
    [dead] = store.runs("t")
    assert dead.status == "running"
    again = Engine(Agent(ScriptedModel([reply("next")]), tools=tools), store)
    result = await again.run("t", "again")
    assert result.status == "done"
    closed = store.run(dead.id)
    assert closed.status == "failed" and closed.error == CUT_OFF and closed.finished is not None
    events = store.events("t")
    mine = [(e.type, e.data.get("call_id"), e.data.get("status")) for e in events if e.run_id == dead.id
            and e.type in ("tool_call_finished", "run_error", "run_finished")]
    assert mine == [("tool_call_finished", "c1", "ok"), ("tool_call_finished", "c2", "error"),
                    ("run_error", None, None), ("run_finished", None, "failed")]
    kinds = [(e.run_id, e.type) for e in events]
    assert kinds.index((dead.id, "run_finished")) < kinds.index((result.run_id, "run_started"))
    assert [e.seq for e in events] == sorted({e.seq for e in events})
