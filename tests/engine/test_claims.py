"""One writer per thread (R7), tools at most once (R9), atomic endings (R8), state once per change (F3).

Two "processes" here are two ``Store`` objects on one file (their own SQLite connections); the tests
with real subprocesses are in tests/e2e/test_processes.py. A kill -9 is simulated by an exception no
handler catches (the run never reaches its next checkpoint) plus a claim that reads as dead.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from typing import Any

import pytest

from tests.fakes import until
from workbench.engine.agent import Agent, Engine
from workbench.engine.events import Event
from workbench.engine.messages import Message
from workbench.engine.middleware import AgentMiddleware, NeedsApproval
from workbench.engine.models.scripted import ScriptedModel, reply, tool_reply
from workbench.engine import store as store_module
from workbench.engine.store import STALE_AFTER, Claim, RunRecord, Store
from workbench.engine.tool_calls import LAZY_COMMIT_SECONDS
from workbench.engine.tools import Tool, schema
from workbench.engine.usage import Usage
from workbench.errors import RunError, StoreError, ThreadBusyError
from workbench.session import Session


class Crash(BaseException):
    """What a kill -9 does to a run: nothing after it runs (no handler, no checkpoint)."""


def make(tmp_path, model, tools=(), middleware=(), store: Store | None = None) -> Engine:
    return Engine(Agent(model, instructions="BASE", tools=tools, middleware=middleware),
                  store or Store.for_workspace(tmp_path))


def mark_claim_dead(store: Store, thread: str) -> None:
    """A claim whose holder is gone: a process on another host that stopped refreshing it (on this
    host the pid decides, and the test's own pid is alive)."""
    with store.transaction() as db:
        assert db.execute("UPDATE claims SET host='gone.invalid', heartbeat=0 WHERE thread_id=?",
                          (thread,)).rowcount == 1


class Gate(ScriptedModel):
    """Waits on ``gate`` before the call numbered ``at`` (0-based)."""

    def __init__(self, replies, at: int = 0) -> None:
        super().__init__(replies)
        self.gate = asyncio.Event()
        self.waiting = asyncio.Event()
        self.at = at

    async def stream(self, request):
        if self.calls == self.at:
            self.waiting.set()
            await self.gate.wait()
        async for item in super().stream(request):
            yield item


# -- R7: one writer per thread ----------------------------------------------------------------------------
async def test_R7_a_second_process_run_on_a_running_thread_is_refused_naming_the_holder(tmp_path):
    model = Gate([reply("first")])
    a = make(tmp_path, model)
    task = asyncio.ensure_future(a.run("t", "one"))
    await asyncio.wait_for(model.waiting.wait(), 10)
    other = ScriptedModel([reply("second")])
    b = make(tmp_path, other, store=Store.for_workspace(tmp_path))  # another process's connection
    with pytest.raises(ThreadBusyError, match=rf"in flight .*process {os.getpid()} on .*since") as refused:
        await b.run("t", "two")
    assert isinstance(refused.value, RunError)  # the CLI reports it in one line, exit 2
    with pytest.raises(ThreadBusyError):
        await b.recover("t")  # a live run is never "recovered" (R9)
    assert other.calls == 0
    # while it runs, it reads as running everywhere, never "cut off"
    assert b.store.thread("t").status == "running" and [t.status for t in b.store.threads()] == ["running"]
    model.gate.set()
    assert (await task).status == "done"
    assert b.store.thread("t").status == "done" and b.store.holder("t") is None  # released at its end
    assert (await b.run("t", "two")).status == "done"
    assert [m["content"] for m in b.store.latest_checkpoint("t").state["messages"]] == ["one", "first", "two", "second"]


async def test_R7_a_resume_while_the_thread_runs_elsewhere_is_refused(tmp_path):
    """The guard against resuming a running thread (a mutation removing it went unnoticed)."""

    class Ask(AgentMiddleware):
        async def wrap_tool_call(self, call, ctx, call_next):
            return await call_next(call, ctx) if ctx.approved else NeedsApproval("check")

    ran: list[str] = []
    gate = asyncio.Event()

    async def slow(args, ctx):
        ran.append("slow")
        await gate.wait()
        return "done"

    tool = Tool("slow", "", schema({}), slow)
    engine = make(tmp_path, ScriptedModel([tool_reply(("slow", {})), reply("end")]), tools=(tool,), middleware=(Ask(),))
    first = await engine.run("t", "go")
    assert first.status == "interrupted"
    decisions = {q.id: "approve" for q in first.pending}
    task = asyncio.ensure_future(engine.resume("t", decisions))
    await until(lambda: ran, what="the resumed call")
    with pytest.raises(RunError, match="in flight"):
        await engine.resume("t", decisions)  # this process
    elsewhere = make(tmp_path, ScriptedModel([reply("x")]), tools=(tool,), middleware=(Ask(),),
                     store=Store.for_workspace(tmp_path))
    with pytest.raises(ThreadBusyError, match=r"in flight .*process \d+ on "):
        await elsewhere.resume("t", decisions)
    gate.set()
    assert (await task).status == "done"
    assert ran == ["slow"]  # the call ran once


async def test_R7_recover_takes_over_a_dead_process_claim_and_the_old_run_can_no_longer_write(tmp_path):
    model = Gate([reply("never")])
    old = make(tmp_path, model)
    task = asyncio.ensure_future(old.run("t", "go"))
    await asyncio.wait_for(model.waiting.wait(), 10)
    # a dead pid on this host: a process that has exited
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    with old.store.transaction() as db:
        db.execute("UPDATE claims SET pid=? WHERE thread_id='t'", (int(dead.stdout),))
    assert old.store.thread("t").status == "failed"  # its process is gone: failed, recover it
    new = make(tmp_path, ScriptedModel([reply("recovered")]), store=Store.for_workspace(tmp_path))
    result = await new.recover("t")
    assert result.status == "done" and result.answer == "recovered"
    # the old run wakes up: its writes are refused (fencing), nothing of it lands
    model.gate.set()
    with pytest.raises(ThreadBusyError, match="taken over|in flight|no longer"):
        await task
    messages = new.store.latest_checkpoint("t").state["messages"]
    assert [m["content"] for m in messages] == ["go", "recovered"]
    assert [e.type for e in new.store.events("t")].count("run_finished") == 1


# -- R7: on this host the pid decides, not the heartbeat (issue 8) ----------------------------------------
def test_R7_a_live_pid_on_this_host_is_alive_however_old_its_heartbeat():
    """A Ctrl-Z'd run, a sleeping laptop, a GIL-frozen run: the heartbeat stops, the process lives on."""
    now = time.time()
    here = socket.gethostname()
    assert Claim("t", "tok", os.getpid(), here, now, now - STALE_AFTER - 1).alive
    assert Claim("t", "tok", os.getpid(), here, now, 0.0).alive
    # another host's claim: only its heartbeat can tell
    assert not Claim("t", "tok", os.getpid(), "elsewhere.invalid", now, now - STALE_AFTER - 1).alive
    assert Claim("t", "tok", os.getpid(), "elsewhere.invalid", now, now - 1).alive


def test_R7_a_dead_pid_on_this_host_is_dead_at_once_however_fresh_its_heartbeat():
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    now = time.time()
    assert not Claim("t", "tok", int(dead.stdout), socket.gethostname(), now, now).alive


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="process start times are read from /proc")
def test_R7_a_pid_reused_by_a_process_started_after_the_claim_is_dead():
    """The pid is alive, but its process started after the claim was made: not the holder."""
    now = time.time()
    long_ago = now - 30 * 86400  # before this test process started
    assert not Claim("t", "tok", os.getpid(), socket.gethostname(), long_ago, now).alive


HANG = """
import asyncio, sys
from workbench.engine.agent import Agent, Engine
from workbench.engine.models.scripted import ScriptedModel
from workbench.engine.store import Store

class Hang(ScriptedModel):
    async def stream(self, request):
        print("waiting", flush=True)
        await asyncio.Event().wait()
        yield None

engine = Engine(Agent(Hang([]), instructions="B"), Store.for_workspace(sys.argv[1]))
asyncio.run(engine.run("t", "go"))
"""


@pytest.mark.skipif(not hasattr(signal, "SIGSTOP"), reason="needs SIGSTOP")
async def test_R7_a_stopped_process_is_not_taken_over_and_a_killed_one_is_at_once(tmp_path, monkeypatch):
    """A real run stopped with SIGSTOP for longer than the stale limit keeps its thread (run, resume and
    recover are refused, it reads as running); once it is killed, recover takes the thread at once."""
    monkeypatch.setattr(store_module, "STALE_AFTER", 0.3)
    env = dict(os.environ, PYTHONPATH=os.getcwd() + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-c", HANG, str(tmp_path)], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "waiting"
        proc.send_signal(signal.SIGSTOP)
        await asyncio.sleep(1.0)  # no heartbeat for over three times the stale limit
        store = Store.for_workspace(tmp_path)
        held = store.holder("t")
        assert held is not None and held.pid == proc.pid and time.time() - held.heartbeat > store_module.STALE_AFTER
        assert store.thread("t").status == "running"
        model = ScriptedModel([reply("x"), reply("y")])
        other = make(tmp_path, model, store=store)
        with pytest.raises(ThreadBusyError, match=rf"process {proc.pid} "):
            await other.run("t", "two")
        with pytest.raises(ThreadBusyError, match=rf"process {proc.pid} "):
            await other.resume("t", {})
        with pytest.raises(ThreadBusyError, match=rf"process {proc.pid} "):
            await other.recover("t")
        assert model.calls == 0
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        monkeypatch.setattr(store_module, "STALE_AFTER", 3600.0)  # a dead pid needs no stale heartbeat
        assert store.holder("t") is None and store.thread("t").status == "failed"
        result = await other.recover("t")
        assert result.status == "done" and result.answer == "x"
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
            proc.kill()
            proc.wait(10)


READ_THEN_HANG = """
import asyncio, sys
from workbench.engine.agent import Agent, Engine
from workbench.engine.models.scripted import ScriptedModel, tool_reply
from workbench.engine.store import Store
from workbench.engine.tools import Tool, schema
from workbench.engine import tool_calls
from workbench.engine.usage import Usage

tool_calls.LAZY_COMMIT_SECONDS = float(sys.argv[2])  # the grace, set by the test: no race with its kill

async def look(args, ctx):
    print("reading", flush=True)
    await asyncio.Event().wait()  # a read that never ends: the process is killed in it

model = ScriptedModel([tool_reply(("look", {}), usage=Usage(100, 10, calls=1))])
tool = Tool("look", "", schema({}), look, changes_outside=False)
engine = Engine(Agent(model, tools=[tool], instructions="B"), Store.for_workspace(sys.argv[1]))
asyncio.run(engine.run("t", "go"))
"""


def _phase(store: Store) -> str | None:
    cp = store.latest_checkpoint("t", messages=False)
    return cp.pending.get("phase") if cp is not None else None


@pytest.mark.parametrize("wait", [False, True], ids=["killed before its message is stored",
                                                      "killed once its message was stored"])
async def test_R1_R9_kill_9_during_a_lone_read(tmp_path, wait):
    """Issue 9, with a real process: a message whose one call only reads is stored LAZY_COMMIT_SECONDS
    into the call. Killed before that, the step is lost whole (R1) and recovery asks the model again;
    killed after, recovery runs the read again and the model is not asked for that step (R9)."""
    env = dict(os.environ, PYTHONPATH=os.getcwd() + os.pathsep + os.environ.get("PYTHONPATH", ""))
    grace = "0.01" if wait else "600"
    proc = subprocess.Popen([sys.executable, "-c", READ_THEN_HANG, str(tmp_path), grace], stdout=subprocess.PIPE,
                            text=True, env=env)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "reading"
        if wait:
            watch = Store.for_workspace(tmp_path)
            await until(lambda: _phase(watch) == "tools", what="the message stored")
            watch.close()
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    store = Store.for_workspace(tmp_path)
    assert store.thread("t").status == "failed"
    stored = store.latest_checkpoint("t")
    reads: list[str] = []

    async def look(args, ctx):
        reads.append("again")
        return "seen"

    model = ScriptedModel([reply("done", usage=Usage(1, 1, calls=1))])
    again = make(tmp_path, model, tools=(Tool("look", "", schema({}), look, changes_outside=False),), store=store)
    result = await again.recover("t")
    assert result.status == "done"
    roles = [m.role for m in model.requests[0].messages]
    if wait:
        assert stored.pending.get("phase") == "tools"
        assert reads == ["again"] and roles == ["user", "assistant", "tool"]
        assert store.thread_usage("t").input_tokens == 101  # the killed step's call stays counted (R5)
    else:
        assert [m["role"] for m in stored.state["messages"]] == ["user"]
        assert reads == [] and roles == ["user"]  # the step was lost whole: the model is asked again
        # ... with its call, as a call killed mid-stream is: 50 ms of a read is part of the step in flight
        assert store.thread_usage("t").input_tokens == 1


def test_R7_events_and_messages_are_never_overwritten(tmp_path):
    store = Store.for_workspace(tmp_path)
    store.append_events([Event("run_started", "t", "r1", 0, {"input_chars": 1}, 1.0, 1)])
    with pytest.raises(StoreError, match="already stored"):
        store.append_events([Event("run_started", "t", "r2", 0, {"input_chars": 2}, 2.0, 1)])
    assert [e.run_id for e in store.events("t")] == ["r1"]
    t = store.create_thread(thread_id="t2")
    store.save_checkpoint(t, "r", 1, "running", {"messages": [{"role": "user", "content": "a"}]}, {})
    with store.transaction() as db:  # another writer appended a message this store does not know of
        db.execute("INSERT INTO messages(thread_id, idx, message) VALUES (?,?,?)", (t, 1, '{"role": "user", "content": "x"}'))
    with pytest.raises(StoreError, match="already stored"):
        store.save_checkpoint(t, "r", 2, "running", {"messages": [{"role": "user", "content": "a"},
                                                                 {"role": "assistant", "content": "b"}]}, {})
    assert store.latest_checkpoint(t).step == 1


# -- R8: one transaction --------------------------------------------------------------------------------
def test_R8_a_write_failing_inside_the_checkpoint_transaction_leaves_nothing(tmp_path):
    """The failure happens after messages were written in the transaction: with ``transaction`` a no-op
    (no BEGIN/ROLLBACK) those rows would stay."""
    store = Store.for_workspace(tmp_path)
    t = store.create_thread(thread_id="t")
    store.append_events([Event("run_started", "t", "r", 0, {}, 1.0, 1)])
    run = RunRecord("r", t, "done", "hi", "answer", None, Usage(5, 5, calls=1), 1.0, 2.0)
    with pytest.raises(StoreError):
        store.save_checkpoint(t, "r", 1, "done", {"messages": [{"role": "user", "content": "hi"}], "todos": [1]}, {},
                              calls=[("m", Usage(5, 5, calls=1))], run=run, thread_status="done",
                              events=[Event("run_finished", "t", "r", 1, {"status": "done"}, 2.0, 1)])  # seq 1 taken
    db = sqlite3.connect(store.path)
    assert db.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 0
    assert db.execute("SELECT COUNT(*) FROM checkpoints").fetchone()[0] == 0
    assert db.execute("SELECT COUNT(*) FROM state_values").fetchone()[0] == 0
    assert store.run("r") is None and store.usage_calls(t) == [] and store.thread(t).status == "new"


async def test_R8_a_suspension_commits_checkpoint_run_record_and_closing_events_together(tmp_path, monkeypatch):
    class Ask(AgentMiddleware):
        async def wrap_tool_call(self, call, ctx, call_next):
            return NeedsApproval("check")

    async def noop(args, ctx):
        return "ok"

    engine = make(tmp_path, ScriptedModel([tool_reply(("noop", {}))]), tools=(Tool("noop", "", schema({}), noop),),
                  middleware=(Ask(),))
    original = Store._insert_events
    failed: list[int] = []

    def failing(self, db, events, **kw):
        if not failed and any(e.type == "run_finished" for e in events):
            failed.append(1)
            raise sqlite3.OperationalError("disk I/O error")  # inside the closing transaction
        return original(self, db, events, **kw)

    monkeypatch.setattr(Store, "_insert_events", failing)
    published: list[Event] = []
    engine.subscribe(published.append)
    result = await engine.run("t", "go")
    monkeypatch.setattr(Store, "_insert_events", original)
    assert failed and result.status == "failed" and "disk I/O error" in (result.error or "")
    store = Store.for_workspace(tmp_path)
    assert store.latest_checkpoint("t").status != "interrupted"  # nothing of the suspension landed
    assert store.run(result.run_id).status != "interrupted"
    assert "interrupt_raised" not in [e.type for e in store.events("t")]
    assert "interrupt_raised" not in [e.type for e in published]  # never published either


# -- R9: tools at most once -----------------------------------------------------------------------------
def _counting_tools(effects: list[str], crash_on: str | None):
    """apply: a side effect (changes outside); boom: changes outside; look: read-only. ``crash_on``
    names the tool during which the process dies."""
    async def apply(args, ctx):
        effects.append(args["x"])
        return f"applied {args['x']}"

    async def boom(args, ctx):
        if crash_on == "boom":
            raise Crash()
        return "fine"

    async def look(args, ctx):
        if crash_on == "look":
            raise Crash()
        effects.append("look " + args["x"])
        return "seen"

    return (Tool("apply", "", schema({"x": {"type": "string"}}, ["x"]), apply),
            Tool("boom", "", schema({}), boom),
            Tool("look", "", schema({"x": {"type": "string"}}, ["x"]), look, changes_outside=False))


async def test_R9_a_crash_after_a_tool_finished_replays_it_from_the_journal_never_runs_it_again(tmp_path):
    effects: list[str] = []
    first_model = ScriptedModel([tool_reply(("apply", {"x": "1"})),
                                 tool_reply(("apply", {"x": "2"}), ("boom", {}))])  # killed in step 2
    engine = make(tmp_path, first_model, tools=_counting_tools(effects, crash_on="boom"))
    with pytest.raises(Crash):
        await engine.run("t", "go")
    assert effects == ["1", "2"]
    store = Store.for_workspace(tmp_path)
    with store.transaction() as db:  # what kill -9 leaves: the claim of a dead process
        db.execute("INSERT OR REPLACE INTO claims VALUES ('t', 'x', 1, 'elsewhere', 0, 0)")
    effects_after: list[str] = []
    model = ScriptedModel([reply("finished")])
    again = make(tmp_path, model, tools=_counting_tools(effects_after, crash_on=None), store=store)
    result = await again.recover("t")
    assert result.status == "done" and result.answer == "finished"
    assert effects_after == []  # apply 2 finished: replayed; boom started and never finished: not run again
    assert model.calls == 1  # step 2 was not asked again
    msgs = [Message.from_dict(m) for m in store.latest_checkpoint("t").state["messages"]]
    assert [m.role for m in msgs] == ["user", "assistant", "tool", "assistant", "tool", "tool", "assistant"]
    assert msgs[4].content == "applied 2"
    assert (msgs[5].meta or {}).get("status") == "error" and "may or may not have taken effect" in msgs[5].content
    assert [m.role for m in model.requests[0].messages] == ["user", "assistant", "tool", "assistant", "tool", "tool"]


async def test_R9_a_read_only_call_that_never_finished_runs_on_recovery(tmp_path):
    effects: list[str] = []
    model = ScriptedModel([tool_reply(("apply", {"x": "1"}), ("look", {"x": "a"}))])
    engine = make(tmp_path, model, tools=_counting_tools(effects, crash_on="look"))
    with pytest.raises(Crash):  # the process dies while look runs, after apply finished
        await engine.run("t", "go")
    store = Store.for_workspace(tmp_path)
    if store.holder("t"):
        mark_claim_dead(store, "t")
    after: list[str] = []
    again = make(tmp_path, ScriptedModel([reply("ok")]), tools=_counting_tools(after, crash_on=None), store=store)
    assert (await again.recover("t")).status == "done"
    assert after == ["look a"]  # only the read-only call that never finished ran again
    assert effects == ["1"]


async def test_R9_a_messages_only_read_is_committed_with_its_step_and_a_crash_before_asks_the_model_again(tmp_path):
    """Issue 9: a message whose one call only reads is neither committed before the call nor journaled:
    the step's end commits both (one transaction a step). A crash before that loses the step in flight
    (R1) — recovery asks the model again, as after a crash in its stream. A read beside other calls, and
    every call that changes things outside, is still committed first and journaled (R9)."""
    effects: list[str] = []
    model = ScriptedModel([tool_reply(("look", {"x": "a"})), tool_reply(("look", {"x": "b"}), ("apply", {"x": "1"})),
                           tool_reply(("look", {"x": "c"}))])
    engine = make(tmp_path, model, tools=_counting_tools(effects, crash_on=None))
    journaled: list[str] = []
    finish = engine.store.journal_finish
    engine.store.journal_finish = lambda *a, **k: (journaled.append(a[3]), finish(*a, **k))[1]
    save = engine.store.save_checkpoint
    saved: list[tuple[int, dict[str, Any]]] = []

    def crash_after_look_c(thread_id, run_id, step, status, state, pending, *a, **k):
        if state["messages"][-1].get("role") == "tool" and effects[-1:] == ["look c"]:
            raise Crash()  # the process dies after look c finished, before its step's checkpoint
        saved.append((step, dict(pending)))
        return save(thread_id, run_id, step, status, state, pending, *a, **k)

    engine.store.save_checkpoint = crash_after_look_c
    with pytest.raises(Crash):
        await engine.run("t", "go")
    assert effects == ["look a", "look b", "1", "look c"]
    assert len(journaled) == 2  # look b and apply 1 (two calls in one message); never look a or look c
    # step 1 (look a) ended with one checkpoint; step 2 was committed before its calls ran, then at its end
    assert [(step, p.get("phase")) for step, p in saved] == [(0, None), (1, None), (2, "tools"), (2, None)]
    store = Store.for_workspace(tmp_path)
    if store.holder("t"):
        mark_claim_dead(store, "t")
    after: list[str] = []
    again_model = ScriptedModel([reply("done")])
    again = make(tmp_path, again_model, tools=_counting_tools(after, crash_on=None), store=store)
    result = await again.recover("t")
    assert result.status == "done" and after == []  # apply 1 never ran again; the lost step was not replayed
    assert [m.role for m in again_model.requests[0].messages] == ["user", "assistant", "tool", "assistant", "tool",
                                                                   "tool"]  # asked again from step 2's end
    msgs = [Message.from_dict(m) for m in store.latest_checkpoint("t").state["messages"]]
    assert [m.role for m in msgs] == ["user", "assistant", "tool", "assistant", "tool", "tool", "assistant"]
    assert msgs[-1].content == "done"


async def test_R9_a_servers_read_only_label_is_not_enough_to_skip_the_commit(tmp_path):
    """X2: a tool server may label a tool read-only and lie: its call is committed before it runs, as a
    call that changes things outside is (R9), never left to the step's end."""
    phases: list[str | None] = []

    async def look(args, ctx):
        phases.append("ran")
        return "seen"

    tool = Tool("mcp__srv__look", "", schema({}), look, changes_outside=False)
    assert tool.server_labelled and not tool.only_reads
    engine = make(tmp_path, ScriptedModel([tool_reply(("mcp__srv__look", {})), reply("done")]), tools=(tool,))
    save = engine.store.save_checkpoint

    def spy(thread_id, run_id, step, status, state, pending, *a, **k):
        phases.append(pending.get("phase"))
        return save(thread_id, run_id, step, status, state, pending, *a, **k)

    engine.store.save_checkpoint = spy
    assert (await engine.run("t", "go")).status == "done"
    assert phases[:4] == [None, "tools", "ran", None]


async def test_R9_a_servers_read_only_call_cut_off_by_a_crash_is_not_run_again(tmp_path):
    """X2, R9: a tool server's "read-only" is its word, not ours: a lone call to such a tool is journaled
    as it starts, and one a crash cut off is reported as maybe done, never run a second time."""
    ran: list[str] = []

    def server_tool(crash: bool) -> Tool:
        async def look(args, ctx):
            ran.append("look")
            if crash:
                raise Crash()
            return "seen"

        return Tool("mcp__srv__look", "", schema({}), look, changes_outside=False)

    engine = make(tmp_path, ScriptedModel([tool_reply(("mcp__srv__look", {}))]), tools=(server_tool(True),))
    with pytest.raises(Crash):
        await engine.run("t", "go")
    store = Store.for_workspace(tmp_path)
    if store.holder("t"):
        mark_claim_dead(store, "t")
    model = ScriptedModel([reply("done")])
    again = make(tmp_path, model, tools=(server_tool(False),), store=store)
    assert (await again.recover("t")).status == "done"
    assert ran == ["look"]  # not run again
    assert "may or may not have taken effect" in model.requests[0].messages[-1].content


async def test_R9_a_read_that_runs_long_is_committed_before_it_ends(tmp_path):
    """Issue 9: the message of a read still running after LAZY_COMMIT_SECONDS is committed then: a crash
    after that point does not ask the model again, and the step's call stays counted (R5)."""
    u = Usage(100, 10, calls=1, cost_usd=0.25)

    async def slow_look(args, ctx):
        await asyncio.sleep(LAZY_COMMIT_SECONDS * 4)
        raise Crash()  # the process dies while the read runs, past the grace

    tools = (*_counting_tools([], None)[:2], Tool("look", "", schema({"x": {"type": "string"}}, ["x"]), slow_look,
                                                  changes_outside=False))
    model = ScriptedModel([tool_reply(("look", {"x": "a"}), usage=u)])
    engine = make(tmp_path, model, tools=tools)
    with pytest.raises(Crash):
        await engine.run("t", "go")
    store = Store.for_workspace(tmp_path)
    cp = store.latest_checkpoint("t")
    assert cp.pending.get("phase") == "tools" and [m["role"] for m in cp.state["messages"]] == ["user", "assistant"]
    assert store.thread_usage("t").input_tokens == 100  # counted with the message, before the call ended
    if store.holder("t"):
        mark_claim_dead(store, "t")
    after: list[str] = []
    again_model = ScriptedModel([reply("end", usage=u)])
    again = make(tmp_path, again_model, tools=_counting_tools(after, crash_on=None), store=store)
    result = await again.recover("t")
    assert result.status == "done" and after == ["look a"]  # the read ran again; the model was not asked for it
    assert again_model.calls == 1 and store.thread_usage("t").input_tokens == 200


async def test_R9_recover_keeps_the_runs_earlier_usage(tmp_path):
    """recover() adds to the run's usage so far (a mutation dropping it went unnoticed)."""
    u = Usage(100, 10, calls=1, cost_usd=0.25)
    effects: list[str] = []
    # two calls in the message: it is committed (with its call's usage) before they run
    model = ScriptedModel([tool_reply(("apply", {"x": "1"}), usage=u),
                           tool_reply(("look", {"x": "a"}), ("look", {"x": "b"}), usage=u)])
    engine = make(tmp_path, model, tools=_counting_tools(effects, crash_on="look"))
    with pytest.raises(Crash):
        await engine.run("t", "go")
    store = Store.for_workspace(tmp_path)
    if store.holder("t"):
        mark_claim_dead(store, "t")
    again = make(tmp_path, ScriptedModel([reply("end", usage=u)]), tools=_counting_tools([], None), store=store)
    result = await again.recover("t")
    assert result.usage.input_tokens == 300 and result.usage.calls == 3 and result.usage.cost_usd == pytest.approx(0.75)
    assert store.run(result.run_id).usage == result.usage
    assert store.thread_usage("t").input_tokens == 300  # each call counted once


# -- status (R9) ------------------------------------------------------------------------------------------
async def test_R9_status_is_running_while_live_elsewhere_and_failed_once_its_process_died(tmp_path):
    (tmp_path / "workbench.yaml").write_text("model: demo\n")
    session = await Session.open(tmp_path)
    thread = session.thread_id
    model = Gate([reply("x")])
    elsewhere = make(tmp_path, model, store=Store.for_workspace(tmp_path))
    task = asyncio.ensure_future(elsewhere.run(thread, "go"))
    await asyncio.wait_for(model.waiting.wait(), 10)
    assert session.status == "running" and session.last_error() is None
    assert "process" in (session.holder or "")
    assert [t.status for t in Session.list_threads(tmp_path)] == ["running"]
    mark_claim_dead(elsewhere.store, thread)
    assert session.status == "failed" and "Recover" in (session.last_error() or "")
    assert [t.status for t in Session.list_threads(tmp_path)] == ["failed"]
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await session.close()


# -- F3: state stored once per change ---------------------------------------------------------------------
async def test_F3_a_2MB_state_value_over_20_steps_grows_the_store_by_less_than_3MB(tmp_path):
    class Scratch(AgentMiddleware):
        writes = frozenset({"files"})

        def tools(self):
            async def put(args, ctx):
                ctx.write("files", {"/scratch/big.txt": {"content": "x" * 2_000_000, "modified": 1.0}})
                return "written"

            async def tick(args, ctx):
                return "tick"

            return [Tool("put", "", schema({}), put), Tool("tick", "", schema({}), tick, changes_outside=False)]

    store = Store.for_workspace(tmp_path)
    engine = make(tmp_path, ScriptedModel([tool_reply(("put", {}))] + [tool_reply(("tick", {}))] * 19 + [reply("done")]),
                  middleware=(Scratch(),), store=store)
    base = _size(store)
    assert (await engine.run("t", "go")).status == "done"
    grown = _size(store) - base
    assert grown < 3_000_000, f"the store grew {grown / 1e6:.1f} MB"
    assert len(store.latest_checkpoint("t").state["files"]["/scratch/big.txt"]["content"]) == 2_000_000


def _size(store: Store) -> int:
    with store.transaction():
        pass
    store._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return sum(p.stat().st_size for p in store.path.parent.iterdir() if p.name.startswith(store.path.name))


def test_F3_state_values_no_checkpoint_references_are_collected(tmp_path):
    store = Store.for_workspace(tmp_path)
    t = store.create_thread(thread_id="t")
    for i in range(45):
        store.save_checkpoint(t, "r", i, "running", {"messages": [], "n": i}, {})
    kept = sqlite3.connect(store.path).execute("SELECT COUNT(*) FROM state_values").fetchone()[0]
    assert kept <= 40 and store.latest_checkpoint(t).state["n"] == 44


def test_F3_a_checkpoint_in_the_old_inline_format_still_loads(tmp_path):
    store = Store.for_workspace(tmp_path)
    with store.transaction() as db:
        db.execute("INSERT INTO checkpoints VALUES ('t', 1, 'r', 1, 'done', ?, '{}', 1.0)",
                   ('{"todos": [1], "__message_count": 0}',))
    assert store.latest_checkpoint("t").state == {"todos": [1], "messages": []}



async def test_R9_a_new_turn_after_a_crash_keeps_the_journaled_results_of_the_cut_off_step(tmp_path):
    """Not recovering but sending a new message: the calls that finished before the kill keep their
    results (not "not finished", which would invite the model to apply an edit twice)."""
    effects: list[str] = []
    engine = make(tmp_path, ScriptedModel([tool_reply(("apply", {"x": "1"}), ("boom", {}))]),
                  tools=_counting_tools(effects, crash_on="boom"))
    with pytest.raises(Crash):
        await engine.run("t", "go")
    store = Store.for_workspace(tmp_path)
    model = ScriptedModel([reply("next turn")])
    again = make(tmp_path, model, tools=_counting_tools([], None), store=store)
    assert (await again.run("t", "something else")).status == "done"
    sent = model.requests[0].messages
    assert [m.role for m in sent] == ["user", "assistant", "tool", "tool", "user"]
    assert sent[2].content == "applied 1"
    assert "may or may not have taken effect" in sent[3].content


async def test_R9_a_crash_while_resumed_calls_run_recovers_without_running_an_approved_call_twice(tmp_path):
    class Ask(AgentMiddleware):
        async def wrap_tool_call(self, call, ctx, call_next):
            return await call_next(call, ctx) if ctx.approved else NeedsApproval("check")

    effects: list[str] = []
    engine = make(tmp_path, ScriptedModel([tool_reply(("apply", {"x": "1"}), ("boom", {}))]),
                  tools=_counting_tools(effects, crash_on="boom"), middleware=(Ask(),))
    first = await engine.run("t", "go")
    assert first.status == "interrupted" and effects == []
    with pytest.raises(Crash):  # approved: apply runs, then the process dies during boom
        await engine.resume("t", {q.id: "approve" for q in first.pending})
    assert effects == ["1"]
    store = Store.for_workspace(tmp_path)
    assert store.thread("t").status == "failed"  # not "interrupted": its questions were answered
    after: list[str] = []
    model = ScriptedModel([reply("end")])
    again = make(tmp_path, model, tools=_counting_tools(after, crash_on=None), middleware=(Ask(),), store=store)
    result = await again.recover("t")
    assert result.status == "done" and after == [] and model.calls == 1
    msgs = [Message.from_dict(m) for m in store.latest_checkpoint("t").state["messages"]]
    assert [m.role for m in msgs] == ["user", "assistant", "tool", "tool", "assistant"]
    assert msgs[2].content == "applied 1" and "may or may not" in msgs[3].content
