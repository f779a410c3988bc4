"""Suspensions, stops, failures and recovery: the history stays valid and nothing is counted twice.

Regression tests for the run loop's edges (R1-R6, M3, M8, P4): a tools-phase suspension with some
calls done, a model-phase suspension, recover() after a failure or a crash, stop() during a tool call,
and durable events (never lost, never numbered twice, replayed once).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Sequence
from typing import Any

import pytest

from tests.fakes import until
from workbench.engine.agent import Agent, Engine
from workbench.engine.messages import Message
from workbench.engine.middleware import AgentMiddleware, Block
from workbench.engine.models.scripted import ScriptedModel, reply, tool_reply
from workbench.engine.store import Store
from workbench.engine.tool_calls import LAZY_COMMIT_SECONDS
from workbench.engine.tools import Fatal, NeedsApproval, Tool, schema
from workbench.engine.usage import Usage
from workbench.errors import ModelError, RunError, WorkbenchError
from workbench.session import Session


async def _echo(args: dict[str, Any], ctx: Any) -> str:
    return f"echo {args['x']}"


ECHO = Tool("echo", "Echo x.", schema({"x": {"type": "string"}}, ["x"]), _echo, changes_outside=False)


def make(tmp_path, model, middleware=(), tools=(ECHO,), store: Store | None = None, **kw) -> Engine:
    return Engine(Agent(model, instructions="BASE", middleware=middleware, tools=tools, **kw),
                  store or Store.for_workspace(tmp_path))


def assert_valid_history(messages: Sequence[Message | dict[str, Any]]) -> None:
    """What providers accept: each assistant tool call answered by one tool message, in order, at once."""
    msgs = [m if isinstance(m, Message) else Message.from_dict(m) for m in messages]
    i = 0
    while i < len(msgs):
        m = msgs[i]
        assert m.role != "tool", f"message {i} is a tool result without a call: {[x.role for x in msgs]}"
        i += 1
        if m.role == "assistant" and m.tool_calls:
            answered = []
            while i < len(msgs) and msgs[i].role == "tool":
                answered.append(msgs[i].tool_call_id)
                i += 1
            assert answered == [c.id for c in m.tool_calls], f"calls {[c.id for c in m.tool_calls]} got {answered}"


def mark_claim_dead(store: Store, thread: str) -> None:
    """Make a run's claim read as a dead process's (R7): what a kill -9 leaves behind."""
    with store.transaction() as db:
        assert db.execute("UPDATE claims SET host='gone.invalid', heartbeat=0 WHERE thread_id=?",
                          (thread,)).rowcount == 1  # on this host the pid decides (R7); ours is alive


def committed(engine: Engine, thread: str = "t") -> list[Message]:
    return [Message.from_dict(m) for m in engine.store.latest_checkpoint(thread).state["messages"]]


def tool_texts(messages: Sequence[Message]) -> list[str]:
    last = max(i for i, m in enumerate(messages) if m.role == "assistant")
    return [m.content for m in messages[last + 1:] if m.role == "tool"]


class AskFor(AgentMiddleware):
    """Asks before the calls whose ``x`` is listed, until approved."""

    def __init__(self, *xs: str) -> None:
        self.xs = set(xs)

    async def wrap_tool_call(self, call, ctx, call_next):
        if (call.arguments or {}).get("x") in self.xs and not ctx.approved:
            return NeedsApproval("check it")
        return await call_next(call, ctx)


# -- (1) a tools-phase suspension ----------------------------------------------------------------------
async def test_R4_a_call_waiting_for_approval_holds_back_later_calls_on_its_lock(tmp_path):
    order: list[str] = []

    class Doc(AgentMiddleware):
        writes = frozenset({"doc"})
        state_defaults = {"doc": ""}

        def tools(self):
            async def put(args, ctx):
                order.append(args["x"])
                ctx.write("doc", ctx.get("doc") + args["x"])
                return "doc=" + ctx.get("doc")

            return [Tool("put", "", schema({"x": {"type": "string"}}, ["x"]), put, lock="doc")]

    model = ScriptedModel([tool_reply(("put", {"x": "A"}), ("put", {"x": "B"}), ("put", {"x": "C"}),
                                      ("echo", {"x": "free"})), reply("ok")])
    engine = make(tmp_path, model, [AskFor("A", "C"), Doc()])
    result = await engine.run("t", "go")
    ids = [c.id for c in model.replies[0].message.tool_calls]
    # the questions of one message come together (A and C), but B, on A's lock, did not run before A
    assert result.status == "interrupted" and [q.call_id for q in result.pending] == [ids[0], ids[2]]
    assert order == []
    done = await engine.resume("t", {q.id: "approve" for q in result.pending})
    assert done.status == "done" and order == ["A", "B", "C"]
    assert tool_texts(model.requests[-1].messages) == ["doc=A", "doc=AB", "doc=ABC", "echo free"]
    assert_valid_history(model.requests[-1].messages)


async def test_resume_keeps_completed_outcomes_appends_in_call_order_and_remembers_rejections(tmp_path):
    ran: list[str] = []

    async def tracked(args, ctx):
        ran.append(args["x"])
        return f"ran {args['x']}"

    tool = Tool("echo", "", schema({"x": {"type": "string"}}, ["x"]), tracked)
    model = ScriptedModel([
        tool_reply(("echo", {"x": "a"}), ("echo", {"x": "b"}), ("echo", {"x": "c"})),
        tool_reply(("echo", {"x": "a"})),  # the model retries the rejected call: refused without asking (P4)
        reply("ok"),
    ])
    engine = make(tmp_path, model, [AskFor("a", "c")], tools=(tool,))
    result = await engine.run("t", "go")
    assert result.status == "interrupted" and ran == ["b"]
    qa, qc = result.pending
    done = await engine.resume("t", {qa.id: {"decision": "reject", "message": "no"}, qc.id: "approve"})
    assert done.status == "done", done.pending
    assert ran == ["b", "c"]  # b ran once, before the suspension; a never ran
    texts = tool_texts(model.requests[1].messages)
    assert texts[0].startswith("Rejected by the user: no") and texts[1:] == ["ran b", "ran c"]
    assert "already rejected" in tool_texts(model.requests[2].messages)[0]
    assert_valid_history(model.requests[-1].messages)


# -- (2) a model-phase suspension ------------------------------------------------------------------------
async def test_model_phase_suspension_reruns_the_step_and_counts_each_call_once(tmp_path):
    class CheckFirst(AgentMiddleware):
        asks = True

        async def wrap_model_call(self, request, call_next, ctx):
            first = await call_next(request)  # a real call, made before the question
            if ctx.step == 2:
                answer = ctx.ask("review", {"what": "the draft"}, key=f"review-{ctx.run_id}")
                assert answer["decision"] == "approve"
                return await call_next(request)
            return first

    u = Usage(100, 10, calls=1, cost_usd=0.01)
    model = ScriptedModel([tool_reply(("echo", {"x": "a"}), usage=u), reply("draft", u),
                           reply("draft again", u), reply("final", u)])
    engine = make(tmp_path, model, [CheckFirst()])
    result = await engine.run("t", "go")
    assert result.status == "interrupted" and result.usage.calls == 2  # step 1, and step 2's first call
    assert engine.store.thread_usage("t").calls == 2
    done = await engine.resume("t", {result.pending[0].id: "approve"})
    assert done.status == "done" and done.answer == "final"
    # step 2 re-ran from its model call: two more real calls; the one before the question counted once
    assert done.usage.calls == 4 and done.usage.input_tokens == 400
    assert len(engine.store.usage_calls("t", done.run_id)) == 4
    assert engine.store.thread_usage("t").calls == 4
    assert engine.store.run(done.run_id).usage.calls == 4
    assert [m.role for m in committed(engine)] == ["user", "assistant", "tool", "assistant"]
    assert [m.role for m in model.requests[-1].messages] == ["user", "assistant", "tool"]


# -- (3) recover() ---------------------------------------------------------------------------------------
async def test_recover_after_a_failure_in_before_agent_runs_the_turn_from_its_start(tmp_path):
    class Flaky(AgentMiddleware):
        def __init__(self) -> None:
            self.fail = True

        async def before_agent(self, input, ctx):
            if self.fail:
                raise WorkbenchError("the instructions could not be read")
            return None

    flaky = Flaky()
    model = ScriptedModel([reply("first answer"), reply("second answer")])
    engine = make(tmp_path, model, [flaky])
    flaky.fail = False
    assert (await engine.run("t", "one")).status == "done"
    flaky.fail = True
    failed = await engine.run("t", "two")
    assert failed.status == "failed" and model.calls == 1
    flaky.fail = False
    again = await engine.recover("t")
    assert again.status == "done" and again.answer == "second answer" and again.run_id == failed.run_id
    # the recovered turn sent its own input (once), not the previous turn's history alone
    assert [m.content for m in model.requests[-1].messages if m.role == "user"] == ["one", "two"]
    assert [m.role for m in committed(engine)] == ["user", "assistant", "user", "assistant"]


async def test_recover_after_a_crash_continues_from_the_running_checkpoint_without_duplicates(tmp_path):
    gate = asyncio.Event()

    class Hangs(ScriptedModel):
        async def stream(self, request):
            if self.calls == 1:
                await gate.wait()  # step 2 is in flight when the process "dies"
            async for item in super().stream(request):
                yield item

    first = make(tmp_path, Hangs([tool_reply(("echo", {"x": "a"})), reply("never")]))
    task = asyncio.ensure_future(first.run("t", "go"))
    await until(lambda: (cp := first.store.latest_checkpoint("t")) is not None and cp.step == 1
                and cp.pending.get("phase") is None, what="step 1's checkpoint")
    # A new process: its own store connection and engine; the old one never writes again. R7: its
    # claim must read as a dead process's (what a kill -9 leaves) for recover() to take the thread over.
    mark_claim_dead(first.store, "t")
    model = ScriptedModel([reply("finished")])
    second = make(tmp_path, model, store=Store.for_workspace(tmp_path))
    assert second.store.latest_checkpoint("t").status == "running"
    result = await second.recover("t")
    assert result.status == "done" and result.answer == "finished"
    assert [m.role for m in model.requests[0].messages] == ["user", "assistant", "tool"]
    assert [m.role for m in committed(second)] == ["user", "assistant", "tool", "assistant"]
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_recover_after_a_failed_step_keeps_the_messages_table_consistent(tmp_path):
    """R2, R9: the failed step's message was committed before its calls ran, so it is kept with the
    failed call's error result and recover() goes on from there — the model is not asked that step again.
    (Before R9 this test asserted the step was asked again: its message was dropped on failure.)"""
    boom = {"on": True}

    async def flaky(args, ctx):
        if boom["on"]:
            raise Fatal("the disk is full")
        return "written"

    tool = Tool("save", "", schema({}), flaky)
    model = ScriptedModel([
        tool_reply(("echo", {"x": "a"})), tool_reply(("save", {})),  # step 2's tool fails the run
        tool_reply(("echo", {"x": "b"}), ("echo", {"x": "c"})), tool_reply(("save", {})), reply("done"),
    ])
    engine = make(tmp_path, model, tools=(ECHO, tool))
    failed = await engine.run("t", "go")
    assert failed.status == "failed" and "disk is full" in failed.error
    assert [m.role for m in committed(engine)] == ["user", "assistant", "tool", "assistant", "tool"]
    assert "disk is full" in committed(engine)[-1].content
    boom["on"] = False
    result = await engine.recover("t")
    assert result.status == "done"
    messages = committed(engine)
    assert_valid_history(messages)
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant", "tool", "assistant", "tool",
                                          "tool", "assistant", "tool", "assistant"]
    assert model.calls == 5  # each step asked once
    # the table rows the checkpoint covers are exactly the committed messages (overwritten indices included)
    db = sqlite3.connect(engine.store.path)
    rows = [json.loads(r[0]) for r in db.execute(
        "SELECT message FROM messages WHERE thread_id='t' ORDER BY idx").fetchall()][:len(messages)]
    assert [Message.from_dict(r) for r in rows] == messages


# -- (4) stop() during a tool call -------------------------------------------------------------------------
def _slow_tool(started: asyncio.Event, seconds: float = 30.0) -> Tool:
    async def slow(args, ctx):
        started.set()
        await asyncio.sleep(seconds)
        return "late"

    return Tool("slow", "", schema({}), slow)


async def test_R6_stop_during_a_tool_call_ends_aborted_with_a_valid_history(tmp_path):
    started = asyncio.Event()
    model = ScriptedModel([tool_reply(("echo", {"x": "a"}), ("slow", {})), reply("next turn")])
    engine = make(tmp_path, model, tools=(ECHO, _slow_tool(started)))
    seen: list[Any] = []
    engine.subscribe(seen.append)
    task = asyncio.ensure_future(engine.run("t", "go"))
    await asyncio.wait_for(started.wait(), 5)
    assert engine.stop("t")
    result = await asyncio.wait_for(task, 5)  # the slow tool does not hold the stop up
    assert result.status == "aborted" and not result.pending
    messages = committed(engine)
    assert_valid_history(messages)
    assert messages[-2].content == "echo a" and messages[-2].meta["status"] == "ok"
    assert messages[-1].meta["status"] == "stopped" and "stopped by the user" in messages[-1].content
    finished = {e.data["call_id"]: e.data["status"] for e in seen if e.type == "tool_call_finished"}
    assert sorted(finished.values()) == ["ok", "stopped"]
    assert engine.store.thread("t").status == "aborted"
    nxt = await engine.run("t", "again")
    assert nxt.status == "done"
    assert_valid_history(model.requests[-1].messages)


@pytest.mark.parametrize("after", [0.0, LAZY_COMMIT_SECONDS * 3], ids=["before its message is stored",
                                                                       "after its message is stored"])
async def test_R6_stop_during_a_lone_read_ends_aborted_with_a_valid_history(tmp_path, after):
    """Issue 9: a message whose one call only reads is stored when the step ends or once the call has
    run LAZY_COMMIT_SECONDS; a stop on either side of that keeps the call, stopped, and a valid history."""
    started = asyncio.Event()

    async def slow_read(args, ctx):
        started.set()
        await asyncio.sleep(30)
        return "late"

    model = ScriptedModel([tool_reply(("look", {})), reply("next turn")])
    engine = make(tmp_path, model, tools=(Tool("look", "", schema({}), slow_read, changes_outside=False),))
    task = asyncio.ensure_future(engine.run("t", "go"))
    await asyncio.wait_for(started.wait(), 5)
    await asyncio.sleep(after)
    assert engine.stop("t")
    result = await asyncio.wait_for(task, 5)
    assert result.status == "aborted"
    messages = committed(engine)
    assert_valid_history(messages)
    assert [m.role for m in messages] == ["user", "assistant", "tool"]
    assert messages[-1].meta["status"] == "stopped" and "stopped by the user" in messages[-1].content
    assert (await engine.run("t", "again")).status == "done"
    assert_valid_history(model.requests[-1].messages)


@pytest.mark.parametrize("after", [0.0, LAZY_COMMIT_SECONDS * 3], ids=["before its message is stored",
                                                                       "after its message is stored"])
async def test_R6_a_run_cancelled_during_a_lone_read_cancels_the_read_before_it_ends(tmp_path, after):
    """A library caller's timeout, a second Ctrl-C: the run task is cancelled, not stopped. Its call is
    cancelled with it on either side of the lazy commit; none keeps running after the run ended."""
    started = asyncio.Event()
    fate: list[str] = []

    async def slow_read(args, ctx):
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            fate.append("cancelled")
            raise
        fate.append("finished")
        return "late"

    engine = make(tmp_path, ScriptedModel([tool_reply(("look", {})), reply("x")]),
                  tools=(Tool("look", "", schema({}), slow_read, changes_outside=False),))
    task = asyncio.ensure_future(engine.run("t", "go"))
    await asyncio.wait_for(started.wait(), 5)
    await asyncio.sleep(after)
    task.cancel()
    try:
        result = await asyncio.wait_for(task, 5)
    except asyncio.CancelledError:
        result = None
    assert fate == ["cancelled"]  # by the time the run is over, not later
    assert result is None or result.status in ("aborted", "failed")
    assert_valid_history(committed(engine))


async def test_R6_a_lone_read_that_fails_the_run_keeps_its_call_in_the_history(tmp_path):
    """A lone read that fails the run at once (a hook's Fatal) is stored with its error, as a call of a
    message of two is: the failed run's transcript shows the call that failed it."""
    async def look(args, ctx):
        raise Fatal("the disk is gone")

    model = ScriptedModel([tool_reply(("look", {})), reply("after")])
    engine = make(tmp_path, model, tools=(Tool("look", "", schema({}), look, changes_outside=False),))
    result = await engine.run("t", "go")
    assert result.status == "failed" and "the disk is gone" in (result.error or "")
    messages = committed(engine)
    assert_valid_history(messages)
    assert [m.role for m in messages] == ["user", "assistant", "tool"]
    assert messages[-1].meta["status"] == "error"
    assert (await engine.recover("t")).status == "done"
    assert [m.role for m in model.requests[-1].messages] == ["user", "assistant", "tool"]


async def test_R6_stop_while_another_call_asks_ends_aborted_not_interrupted(tmp_path):
    started = asyncio.Event()
    model = ScriptedModel([tool_reply(("slow", {}), ("echo", {"x": "ask"})), reply("next turn")])
    engine = make(tmp_path, model, [AskFor("ask")], tools=(ECHO, _slow_tool(started)))
    task = asyncio.ensure_future(engine.run("t", "go"))
    await asyncio.wait_for(started.wait(), 5)
    engine.stop("t")
    result = await asyncio.wait_for(task, 5)
    assert result.status == "aborted" and result.pending == ()
    assert engine.store.latest_checkpoint("t").status == "aborted"
    assert_valid_history(committed(engine))
    assert (await engine.run("t", "again")).status == "done"
    assert_valid_history(model.requests[-1].messages)


async def test_R6_a_run_cancelled_during_a_tool_call_keeps_a_valid_history(tmp_path):
    started = asyncio.Event()
    model = ScriptedModel([tool_reply(("echo", {"x": "a"}), ("slow", {})), reply("next turn")])
    engine = make(tmp_path, model, tools=(ECHO, _slow_tool(started)))
    task = asyncio.ensure_future(engine.run("t", "go"))
    await asyncio.wait_for(started.wait(), 5)
    task.cancel()  # e.g. the window closing, or a second Ctrl-C
    result = await task
    assert result.status == "aborted"
    assert_valid_history(committed(engine))
    assert (await engine.run("t", "again")).status == "done"
    assert_valid_history(model.requests[-1].messages)


async def test_R6_a_budget_abort_raised_by_a_tool_keeps_a_valid_history(tmp_path):
    class Spent(Fatal):
        abort_status = "aborted"

    async def costly(args, ctx):
        raise Spent("the run's budget is spent")

    tool = Tool("costly", "", schema({}), costly)
    model = ScriptedModel([tool_reply(("echo", {"x": "a"}), ("costly", {})), reply("next turn")])
    engine = make(tmp_path, model, tools=(ECHO, tool))
    result = await engine.run("t", "go")
    assert result.status == "aborted"
    messages = committed(engine)
    assert_valid_history(messages)
    assert messages[-2].content == "echo a"  # the call that did run keeps its real result
    assert (await engine.run("t", "again")).status == "done"
    assert_valid_history(model.requests[-1].messages)


# -- (5) a failure between the tool-call message and its results --------------------------------------------
async def test_a_failure_while_resumed_tools_run_leaves_a_valid_history_for_run_and_recover(tmp_path):
    calls: list[str] = []

    async def tracked(args, ctx):
        calls.append(args["x"])
        if args["x"] == "boom" and len(calls) < 3:
            raise Fatal("the tool is unsafe")
        return f"ran {args['x']}"

    tool = Tool("echo", "", schema({"x": {"type": "string"}}, ["x"]), tracked)
    model = ScriptedModel([tool_reply(("echo", {"x": "fine"}), ("echo", {"x": "boom"})), reply("after"),
                           reply("second turn")])
    engine = make(tmp_path, model, [AskFor("boom")], tools=(tool,))
    result = await engine.run("t", "go")
    assert result.status == "interrupted" and calls == ["fine"]
    failed = await engine.resume("t", {result.pending[0].id: "approve"})
    assert failed.status == "failed" and "unsafe" in failed.error
    assert_valid_history(committed(engine))
    recovered = await engine.recover("t")
    assert recovered.status == "done" and recovered.answer == "after"
    assert_valid_history(model.requests[-1].messages)
    assert calls == ["fine", "boom"]  # the call that had run was not run again
    assert tool_texts(model.requests[-1].messages)[0] == "ran fine"
    assert (await engine.run("t", "next")).status == "done"
    assert_valid_history(model.requests[-1].messages)


# -- M3 from a tool ---------------------------------------------------------------------------------------
async def test_M3_an_undeclared_write_from_a_tool_fails_the_run(tmp_path):
    class Sneaky(AgentMiddleware):
        writes = frozenset({"mine"})

        def tools(self):
            async def sneak(args, ctx):
                ctx.write("todos", [])
                return "wrote"

            return [Tool("sneak", "", schema({}), sneak)]

        async def wrap_tool_call(self, call, ctx, call_next):
            return await call_next(call, ctx)

    model = ScriptedModel([tool_reply(("sneak", {})), reply("should not get here")])
    result = await make(tmp_path, model, [Sneaky()]).run("t", "go")
    assert result.status == "failed" and "Sneaky" in result.error and "'todos'" in result.error
    assert model.calls == 1


# -- (6) durable events -----------------------------------------------------------------------------------
def _assert_seq_ok(engine: Engine, published: list[Any], thread: str = "t") -> None:
    durable = [e for e in published if e.durable]
    seqs = [e.seq for e in durable]
    assert len(seqs) == len(set(seqs)), f"a seq was used twice: {seqs}"
    stored = engine.store.events(thread)
    assert [(e.seq, e.type) for e in stored] == [(e.seq, e.type) for e in durable]
    assert [e.seq for e in stored] == list(range(1, len(stored) + 1))


async def test_M8_resume_stores_interrupt_answered_once_even_when_a_decision_hook_fails(tmp_path):
    class Broken(AgentMiddleware):
        async def on_decision(self, question, decision, ctx):
            raise ValueError("decision hook bug")

    model = ScriptedModel([tool_reply(("echo", {"x": "a"})), reply("ok"), reply("two")])
    engine = make(tmp_path, model, [AskFor("a"), Broken()])
    published: list[Any] = []
    engine.subscribe(published.append)
    result = await engine.run("t", "go")
    resumed = await engine.resume("t", {result.pending[0].id: "approve"})
    assert resumed.status == "failed" and "decision hook bug" in resumed.error
    assert (await engine.run("t", "next")).status == "done"
    _assert_seq_ok(engine, published)
    assert [e.type for e in engine.store.events("t")].count("interrupt_answered") == 1


async def test_M8_events_of_a_checkpoint_that_could_not_be_written_are_not_lost(tmp_path):
    class Bad(AgentMiddleware):
        writes = frozenset({"bad"})

        def tools(self):
            async def bad(args, ctx):
                ctx.write("bad", {1, 2})  # not JSON: the step's checkpoint fails
                return "ok"

            return [Tool("bad", "", schema({}), bad)]

    model = ScriptedModel([tool_reply(("bad", {})), reply("two")])
    engine = make(tmp_path, model, [Bad()])
    published: list[Any] = []
    engine.subscribe(published.append)
    result = await engine.run("t", "go")
    assert result.status == "failed"
    assert (await engine.run("t", "next")).status == "done"
    _assert_seq_ok(engine, published)
    assert "tool_call_finished" in [e.type for e in engine.store.events("t")]


async def test_M8_two_engines_on_one_store_never_run_one_thread_at_once(tmp_path):
    gate = asyncio.Event()

    entered = asyncio.Event()

    class Waits(ScriptedModel):
        async def stream(self, request):
            entered.set()
            await gate.wait()
            async for item in super().stream(request):
                yield item

    store = Store.for_workspace(tmp_path)
    a = make(tmp_path, Waits([reply("a")]), store=store)
    b = make(tmp_path, ScriptedModel([reply("b")]), store=store)
    published: list[Any] = []
    a.subscribe(published.append)
    b.subscribe(published.append)
    task = asyncio.ensure_future(a.run("t", "one"))
    await asyncio.wait_for(entered.wait(), 10)  # a's run is in flight (inside its model call)
    with pytest.raises(RunError, match="in flight"):
        await b.run("t", "two")
    gate.set()
    assert (await task).status == "done"
    assert (await b.run("t", "two")).status == "done"
    _assert_seq_ok(a, published)
    assert_valid_history(committed(a))


# -- (7) Session.subscribe(replay=True) --------------------------------------------------------------------
async def test_a_subscriber_joining_mid_run_gets_every_durable_event_once_in_order(tmp_path):
    gate = asyncio.Event()
    started = asyncio.Event()

    async def wait(args, ctx):
        started.set()
        await gate.wait()
        return "waited"

    model = ScriptedModel([tool_reply(("echo", {"x": "a"})), tool_reply(("wait", {})), reply("done")])
    engine = make(tmp_path, model, tools=(ECHO, Tool("wait", "", schema({}), wait)))
    session = Session(tmp_path, None, engine.store, engine, "t")  # type: ignore[arg-type]
    task = asyncio.ensure_future(session.run("go"))
    await asyncio.wait_for(started.wait(), 5)
    late: list[Any] = []
    # joins while step 2's tool runs: step 1's events are stored, step 2's model_call_finished is not yet
    unsubscribe = session.subscribe(late.append, replay=True)
    gate.set()
    assert (await task).status == "done"
    unsubscribe()
    durable = [(e.seq, e.type) for e in late if e.durable]
    stored = [(e.seq, e.type) for e in session.store.events("t")]
    assert durable == stored and [s for s, _ in stored] == list(range(1, len(stored) + 1))


# -- blocked input ---------------------------------------------------------------------------------------
async def test_recover_after_a_blocked_input_asks_before_agent_again(tmp_path):
    class Guard(AgentMiddleware):
        async def before_agent(self, input, ctx):
            return Block("no secrets") if "password" in input else None

    model = ScriptedModel([reply("never")])
    engine = make(tmp_path, model, [Guard()])
    assert (await engine.run("t", "my password is x")).status == "failed"
    again = await engine.recover("t")
    assert again.status == "failed" and "no secrets" in again.error and model.calls == 0


async def test_a_model_error_after_suspension_then_run_is_valid(tmp_path):
    model = ScriptedModel([tool_reply(("echo", {"x": "a"})), ModelError("down"), reply("fine")])
    engine = make(tmp_path, model, [AskFor("a")])
    result = await engine.run("t", "go")
    failed = await engine.resume("t", {result.pending[0].id: "approve"})
    assert failed.status == "failed"
    assert (await engine.run("t", "next")).status == "done"
    assert_valid_history(model.requests[-1].messages)


async def test_a_failure_before_the_first_checkpoint_still_ends_failed_and_keeps_the_thread_usable(tmp_path):
    class Bad(AgentMiddleware):
        writes = frozenset({"seen"})

        def __init__(self) -> None:
            self.on = True

        async def before_agent(self, input, ctx):
            ctx.write("seen", {input} if self.on else [input])  # a set is not JSON: the checkpoint fails
            return None

    bad = Bad()
    model = ScriptedModel([reply("fine")])
    engine = make(tmp_path, model, [bad])
    result = await engine.run("t", "go")  # a RunResult, not an exception out of run()
    assert result.status == "failed" and "not JSON serializable" in result.error
    assert engine.store.run(result.run_id).status == "failed"
    bad.on = False
    again = await engine.recover("t")
    assert again.status == "done" and [m.role for m in committed(engine)] == ["user", "assistant"]


async def test_R3_a_resume_answers_only_the_suspended_step_even_when_call_ids_repeat(tmp_path):
    class Confirm(AgentMiddleware):
        asks = True

        async def wrap_tool_call(self, call, ctx, call_next):
            ctx.ask("confirm", {"x": call.arguments["x"]}, key=f"confirm-{ctx.run_id}-{call.id}")
            return await call_next(call, ctx)

    # Some providers number calls per message: both steps call "call_0".
    model = ScriptedModel([tool_reply(("echo", {"x": "a"}, "call_0")), tool_reply(("echo", {"x": "b"}, "call_0")),
                           reply("done")])
    engine = make(tmp_path, model, [Confirm()])
    first = await engine.run("t", "go")
    assert first.status == "interrupted" and first.pending[0].payload == {"x": "a"}
    second = await engine.resume("t", {first.pending[0].id: "approve"})
    assert second.status == "interrupted" and second.pending[0].payload == {"x": "b"}  # asked, not assumed
    third = await engine.resume("t", {second.pending[0].id: "approve"})
    assert third.status == "done"
    assert_valid_history(model.requests[-1].messages)


async def test_R6_stop_as_a_resume_starts_keeps_the_results_of_calls_that_ran_before_the_suspension(tmp_path):
    class StopsAtOnce(AgentMiddleware):
        engine: Engine

        async def on_decision(self, question, decision, ctx):
            self.engine.stop(ctx.thread_id)  # the user pressed Stop as the run went on

    stopper = StopsAtOnce()
    model = ScriptedModel([tool_reply(("echo", {"x": "a"}), ("echo", {"x": "b"})), reply("next turn")])
    engine = make(tmp_path, model, [AskFor("a"), stopper])
    stopper.engine = engine
    result = await engine.run("t", "go")
    stopped = await engine.resume("t", {result.pending[0].id: "approve"})
    assert stopped.status == "aborted"
    messages = committed(engine)
    assert_valid_history(messages)
    assert [m.meta["status"] for m in messages[-2:]] == ["stopped", "ok"] and messages[-1].content == "echo b"


async def test_recover_after_a_failed_model_phase_resume_reruns_the_same_step(tmp_path):
    class Review(AgentMiddleware):
        asks = True

        async def wrap_model_call(self, request, call_next, ctx):
            if ctx.step == 2:
                ctx.ask("review", {}, key=f"review-{ctx.run_id}-{ctx.step}")
            return await call_next(request)

    model = ScriptedModel([tool_reply(("echo", {"x": "a"})), ModelError("provider down"), reply("done")])
    engine = make(tmp_path, model, [Review()])
    seen: list[Any] = []
    engine.subscribe(seen.append)
    result = await engine.run("t", "go")
    assert result.status == "interrupted"
    assert (await engine.resume("t", {result.pending[0].id: "approve"})).status == "failed"
    assert engine.store.latest_checkpoint("t").step == 1  # step 2 never ended
    recovered = await engine.recover("t")
    # step 2 runs again under its own number (so it asks again under the same key: a new invocation)
    assert recovered.status == "interrupted" and recovered.pending[0].id == result.pending[0].id
    done = await engine.resume("t", {result.pending[0].id: "approve"})
    assert done.status == "done"
    assert [e.step for e in seen if e.type == "model_call_finished"] == [1, 2]


async def test_R2_recover_after_a_crash_before_the_runs_first_checkpoint(tmp_path):
    """The process died right after the run was recorded: recover starts that turn again."""
    from workbench.engine.agent import Agent, Engine
    from workbench.engine.models.scripted import ScriptedModel, reply
    from workbench.engine.store import RunRecord, Store
    from workbench.engine.usage import Usage

    store = Store.for_workspace(tmp_path)
    engine = Engine(Agent(ScriptedModel([reply("first"), reply("second")])), store)
    assert (await engine.run("t", "one")).status == "done"
    store.save_run(RunRecord("crashed", "t", "running", "two", "", None, Usage(), 9e9, None))  # then: kill -9
    result = await Engine(engine.agent, Store.for_workspace(tmp_path)).recover("t")
    assert result.status == "done" and result.answer == "second" and result.run_id == "crashed"
    contents = [m["content"] for m in Store.for_workspace(tmp_path).latest_checkpoint("t").state["messages"]]
    assert contents == ["one", "first", "two", "second"]
