"""The run loop and the middleware contract: one test (at least) per requirement R1–R6, M1–M10."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.fakes import until
from workbench.engine.agent import Agent, Engine
from workbench.engine.messages import ModelDelta, ModelRequest, ModelResponse
from workbench.engine.middleware import AgentMiddleware, Block, Section
from workbench.engine.models.scripted import ScriptedModel, reply, tool_reply
from workbench.engine.store import Store
from workbench.engine.tools import Fatal, NeedsApproval, Tool, ToolOutcome, schema
from workbench.engine.usage import Usage
from workbench.errors import BuildError, ModelError


async def _echo(args: dict[str, Any], ctx: Any) -> str:
    return f"echo {args['x']}"


ECHO = Tool("echo", "Echo x.", schema({"x": {"type": "string"}}, ["x"]), _echo, changes_outside=False)


def make(tmp_path, model, middleware=(), tools=(ECHO,), **kw) -> Engine:
    return Engine(Agent(model, instructions="BASE", middleware=middleware, tools=tools, **kw),
                  Store.for_workspace(tmp_path))


def tool_texts(request: ModelRequest) -> list[str]:
    return [m.content for m in request.messages if m.role == "tool"]


class Recorder:
    def __init__(self, engine: Engine) -> None:
        self.events: list[Any] = []
        engine.subscribe(self.events.append)

    def types(self) -> list[str]:
        return [e.type for e in self.events]


# -- R1 checkpoints ------------------------------------------------------------------------------------
async def test_R1_every_step_ends_with_a_checkpoint_readable_from_another_connection(tmp_path):
    gate = asyncio.Event()

    class Hanging(ScriptedModel):
        async def stream(self, request):
            if self.calls == 1:
                self.requests.append(request)
                await gate.wait()  # step 2 is in flight "forever"
            async for item in super().stream(request):
                yield item

    model = Hanging([tool_reply(("echo", {"x": "a"})), reply("never")])
    engine = make(tmp_path, model)
    task = asyncio.ensure_future(engine.run("t", "go"))
    await until(lambda: model.calls >= 2, what="step 2's model call")
    other = Store.for_workspace(tmp_path)  # what a restarted process would see
    cp = other.latest_checkpoint("t")
    assert cp is not None and cp.step == 1 and cp.status == "running"
    roles = [m["role"] for m in cp.state["messages"]]
    assert roles == ["user", "assistant", "tool"]
    assert cp.state["messages"][2]["content"] == "echo a"
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


# -- R2 recover and resume -------------------------------------------------------------------------------
async def test_R2_recover_reruns_the_failed_step_from_the_last_checkpoint(tmp_path):
    model = ScriptedModel([tool_reply(("echo", {"x": "a"})), ModelError("provider down"), reply("finished")])
    engine = make(tmp_path, model)
    first = await engine.run("t", "go")
    assert first.status == "failed" and "provider down" in (first.error or "")
    again = await engine.recover("t")
    assert again.status == "done" and again.answer == "finished"
    # the recovered step saw the first step's tool result exactly once
    assert tool_texts(model.requests[-1]) == ["echo a"]
    assert again.run_id == first.run_id


async def test_R2_R3_suspended_run_survives_a_restart_and_resumes(tmp_path):
    class AskAll(AgentMiddleware):
        async def wrap_tool_call(self, call, ctx, call_next):
            return await call_next(call, ctx) if ctx.approved else NeedsApproval("check it")

    model = ScriptedModel([tool_reply(("echo", {"x": "a"})), reply("ok")])
    result = await make(tmp_path, model, [AskAll()]).run("t", "go")
    assert result.status == "interrupted"
    (q,) = result.pending
    assert q.kind == "tool_approval" and q.payload["tool"] == "echo" and q.payload["reason"] == "check it"
    # a new engine and store: the app restarted
    engine2 = make(tmp_path, model, [AskAll()])
    resumed = await engine2.resume("t", {q.id: "approve"})
    assert resumed.status == "done" and resumed.answer == "ok"
    assert tool_texts(model.requests[-1]) == ["echo a"]


# -- R4 concurrency and locks ----------------------------------------------------------------------------
async def test_R4_calls_run_concurrently_but_same_lock_calls_run_in_order_seeing_writes(tmp_path):
    running: list[str] = []
    overlap: list[bool] = []

    class Counter(AgentMiddleware):
        writes = frozenset({"count"})
        state_defaults = {"count": 0}

        def tools(self):
            async def bump(args, ctx):
                before = ctx.get("count")
                await asyncio.sleep(0.01)  # a race would lose an increment here
                ctx.write("count", before + 1)
                return f"count was {before}"

            async def slow(args, ctx):
                running.append(args["x"])
                await asyncio.sleep(0.02)
                overlap.append(len(running) > 1)
                running.remove(args["x"])
                return "slow"

            return [
                Tool("bump", "", schema({}), bump, lock="count"),
                Tool("slow", "", schema({"x": {"type": "string"}}, ["x"]), slow),
            ]

    model = ScriptedModel([
        tool_reply(("bump", {}), ("bump", {}), ("slow", {"x": "1"}), ("slow", {"x": "2"})),
        reply("done"),
    ])
    engine = make(tmp_path, model, [Counter()])
    result = await engine.run("t", "go")
    assert result.status == "done"
    assert tool_texts(model.requests[1])[:2] == ["count was 0", "count was 1"]
    assert any(overlap), "calls without a shared lock should run at the same time"
    assert engine.store.latest_checkpoint("t").state["count"] == 2


# -- R5 usage ------------------------------------------------------------------------------------------------
async def test_R5_every_next_call_is_counted_per_call_run_and_thread(tmp_path):
    class RetryOnce(AgentMiddleware):
        async def wrap_model_call(self, request, call_next, ctx):
            await call_next(request)  # thrown away, still counted
            return await call_next(request)

    u1, u2 = Usage(100, 10, calls=1, cost_usd=0.01), Usage(200, 20, calls=1, cost_usd=0.02)
    model = ScriptedModel([reply("first", u1), reply("second", u2), reply("third", u1), reply("fourth", u2)])
    engine = make(tmp_path, model, [RetryOnce()])
    r1 = await engine.run("t", "go")
    assert r1.answer == "second"
    assert (r1.usage.input_tokens, r1.usage.output_tokens, r1.usage.calls) == (300, 30, 2)
    assert r1.usage.cost_usd == pytest.approx(0.03)
    await engine.run("t", "again")
    assert engine.store.thread_usage("t").calls == 4
    assert engine.store.thread_usage("t").input_tokens == 600
    assert len(engine.store.usage_calls("t", r1.run_id)) == 2


# -- R6 statuses -------------------------------------------------------------------------------------------
async def test_R6_failed_run_leaves_the_thread_usable(tmp_path):
    model = ScriptedModel([ModelError("bad key"), reply("fine now")])
    engine = make(tmp_path, model)
    assert (await engine.run("t", "one")).status == "failed"
    second = await engine.run("t", "two")
    assert second.status == "done" and second.answer == "fine now"


async def test_R6_stop_mid_stream_ends_aborted_with_the_partial_answer(tmp_path):
    class Slow:
        name = "slow"

        async def stream(self, request):
            for word in ["Hello ", "there ", "friend ", "and ", "more"]:
                yield ModelDelta(text=word)
                await asyncio.sleep(0.05)
            yield ModelResponse(message=__import__("workbench.engine.messages", fromlist=["Message"]).Message.assistant("x"))

    engine = make(tmp_path, Slow())
    rec = Recorder(engine)
    task = asyncio.ensure_future(engine.run("t", "go"))
    await until(lambda: rec.types().count("model_delta") >= 2, what="two model_delta events")
    assert engine.stop("t")
    result = await task
    assert result.status == "aborted"
    assert result.answer.startswith("Hello there")
    last = engine.store.latest_checkpoint("t").state["messages"][-1]
    assert last["role"] == "assistant" and last["content"].startswith("Hello there") and last["meta"]["partial"]


# -- M1 before_agent -------------------------------------------------------------------------------------------
async def test_M1_before_agent_changes_input_and_its_update_is_seen_by_the_first_call(tmp_path):
    class Prefix(AgentMiddleware):
        writes = frozenset({"seen"})

        async def before_agent(self, input, ctx):
            ctx.write("seen", input)
            return "[checked] " + input

        async def sections(self, ctx):
            return [Section("seen", f"seen={ctx.get('seen')}")]

    model = ScriptedModel([reply("ok")])
    await make(tmp_path, model, [Prefix()]).run("t", "hello")
    req = model.requests[0]
    assert req.messages[0].content == "[checked] hello"
    assert "seen=hello" in req.system


async def test_M1_before_agent_block_ends_the_run_without_a_model_call(tmp_path):
    class Guard(AgentMiddleware):
        async def before_agent(self, input, ctx):
            return Block("no secrets") if "password" in input else None

    model = ScriptedModel([])
    result = await make(tmp_path, model, [Guard()]).run("t", "my password is x")
    assert result.status == "failed" and "no secrets" in result.error and model.calls == 0


# -- M2 sections ----------------------------------------------------------------------------------------------------
class Sections(AgentMiddleware):
    def __init__(self, items):
        self.items = items

    async def sections(self, ctx):
        return self.items


async def test_M2_system_prompt_is_instructions_then_cacheable_then_others_and_never_stored(tmp_path):
    a = Sections([Section("dynamic-a", "DYN-A"), Section("stable-a", "STABLE-A", cacheable=True)])
    b = Sections([Section("stable-b", "STABLE-B", cacheable=True), Section("dynamic-b", "DYN-B")])
    model = ScriptedModel([reply("ok")])
    engine = make(tmp_path, model, [a, b])
    await engine.run("t", "go")
    system = model.requests[0].system
    order = [system.index(x) for x in ["BASE", "STABLE-A", "STABLE-B", "DYN-A", "DYN-B"]]
    assert order == sorted(order)
    assert "STABLE-A" not in str(engine.store.latest_checkpoint("t").state)


async def test_M2_sections_over_the_total_bound_fail_the_run_naming_them(tmp_path):
    big = Sections([Section("huge-notes", "word " * 400)])
    model = ScriptedModel([])
    result = await make(tmp_path, model, [big], max_prompt_section_tokens=100).run("t", "go")
    assert result.status == "failed" and "huge-notes" in result.error and "max_prompt_section_tokens" in result.error
    assert model.calls == 0


async def test_M2_sections_of_exactly_the_bound_pass_one_token_more_fails(tmp_path):
    from workbench.engine.tokens import estimate_tokens

    a, b = Section("a", "alpha beta gamma"), Section("b", "delta epsilon")
    exact = estimate_tokens(a.text) + estimate_tokens(b.text)
    model = ScriptedModel([reply("ok")])
    at = await make(tmp_path / "at", model, [Sections([a, b])], max_prompt_section_tokens=exact).run("t", "go")
    assert at.status == "done" and model.calls == 1
    over = await make(tmp_path / "over", ScriptedModel([]), [Sections([a, b])],
                      max_prompt_section_tokens=exact - 1).run("t", "go")
    assert over.status == "failed" and f"take {exact} tokens, over max_prompt_section_tokens={exact - 1}" in over.error


# -- M3 writes ------------------------------------------------------------------------------------------------------
async def test_M3_writing_an_undeclared_key_fails_the_run(tmp_path):
    class Sneaky(AgentMiddleware):
        writes = frozenset({"mine"})

        async def wrap_model_call(self, request, call_next, ctx):
            ctx.write("todos", [])
            return await call_next(request)

    result = await make(tmp_path, ScriptedModel([reply("x")]), [Sneaky()]).run("t", "go")
    assert result.status == "failed" and "Sneaky" in result.error and "'todos'" in result.error


# -- M4 wrap_model_call ------------------------------------------------------------------------------------------
async def test_M4_wrapper_rewrites_the_request_and_transforms_the_response(tmp_path):
    class Note(AgentMiddleware):
        async def wrap_model_call(self, request, call_next, ctx):
            request = request.replace(system=request.system + "\nNOTE", tools=())
            response = await call_next(request)
            from dataclasses import replace

            return replace(response, message=replace(response.message, content=response.message.content.upper()))

    model = ScriptedModel([reply("quiet")])
    result = await make(tmp_path, model, [Note()]).run("t", "go")
    assert model.requests[0].system.endswith("NOTE") and model.requests[0].tools == ()
    assert result.answer == "QUIET"


async def test_M4_only_an_asking_middleware_may_suspend(tmp_path):
    class Rude(AgentMiddleware):
        async def wrap_model_call(self, request, call_next, ctx):
            ctx.ask("question", {}, key="q1")
            return await call_next(request)

    class Polite(Rude):
        asks = True

    bad = await make(tmp_path / "a", ScriptedModel([]), [Rude()]).run("t", "go")
    assert bad.status == "failed" and "asking middleware" in bad.error
    model = ScriptedModel([reply("after the answer")])
    engine = make(tmp_path / "b", model, [Polite()])
    asked = await engine.run("t", "go")
    assert asked.status == "interrupted" and asked.pending[0].id == "q1" and model.calls == 0
    done = await engine.resume("t", {"q1": "approve"})
    assert done.status == "done" and done.answer == "after the answer"


# -- M5 unknown tools and bad arguments ------------------------------------------------------------------------
async def test_M5_unknown_tool_invalid_json_and_schema_errors_go_back_to_the_model(tmp_path):
    from workbench.engine.messages import ToolCall

    calls = [
        ToolCall.parse("c1", "nope", "{}"),
        ToolCall.parse("c2", "echo", "{not json"),
        ToolCall.parse("c3", "echo", '{"x": 5}'),
    ]
    model = ScriptedModel([tool_reply(*calls), reply("recovered")])
    result = await make(tmp_path, model).run("t", "go")
    assert result.status == "done" and result.answer == "recovered"
    texts = tool_texts(model.requests[1])
    assert "unknown tool 'nope'" in texts[0] and "echo" in texts[0]
    assert "not a valid JSON object" in texts[1]
    assert "invalid arguments for 'echo'" in texts[2] and "x" in texts[2]


async def test_M5_filtered_tool_called_anyway_still_goes_through_wrap_tool_call(tmp_path):
    class HideAndDeny(AgentMiddleware):
        async def wrap_model_call(self, request, call_next, ctx):
            return await call_next(request.replace(tools=()))

        async def wrap_tool_call(self, call, ctx, call_next):
            return ToolOutcome.error("Denied: echo is off")

    model = ScriptedModel([tool_reply(("echo", {"x": "a"})), reply("ok")])
    engine = make(tmp_path, model, [HideAndDeny()])
    rec = Recorder(engine)
    await engine.run("t", "go")
    assert tool_texts(model.requests[1]) == ["Denied: echo is off"]
    finished = [e for e in rec.events if e.type == "tool_call_finished"]
    assert finished[0].data["status"] == "denied"


# -- M6 wrap_tool_call ------------------------------------------------------------------------------------------
async def test_M6_short_circuit_transform_and_fatal(tmp_path):
    ran: list[str] = []

    async def tracked(args, ctx):
        ran.append(args["x"])
        return "real"

    tool = Tool("echo", "", schema({"x": {"type": "string"}}, ["x"]), tracked)

    class Wrap(AgentMiddleware):
        async def wrap_tool_call(self, call, ctx, call_next):
            if call.arguments["x"] == "cached":
                return ToolOutcome.ok("from cache")  # short-circuit: the tool never runs
            if call.arguments["x"] == "boom":
                raise Fatal("the tool is unsafe")
            out = await call_next(call, ctx)
            return ToolOutcome.ok(out.content + " (checked)")

    model = ScriptedModel([tool_reply(("echo", {"x": "cached"}), ("echo", {"x": "live"})), reply("ok")])
    await make(tmp_path / "a", model, [Wrap()], tools=(tool,)).run("t", "go")
    assert tool_texts(model.requests[1]) == ["from cache", "real (checked)"] and ran == ["live"]
    fatal = await make(tmp_path / "b", ScriptedModel([tool_reply(("echo", {"x": "boom"}))]), [Wrap()],
                       tools=(tool,)).run("t", "go")
    assert fatal.status == "failed" and "unsafe" in fatal.error


# -- M7 placement --------------------------------------------------------------------------------------------------
def test_M7_placement_is_checked_never_arranged(tmp_path):
    class Inner(AgentMiddleware):
        pass

    class Outer(AgentMiddleware):
        runs_outside = (Inner,)

    Agent(ScriptedModel([]), middleware=[Outer(), Inner()])  # fine
    with pytest.raises(BuildError, match="Outer must run outside Inner"):
        Agent(ScriptedModel([]), middleware=[Inner(), Outer()])


# -- M8 events ---------------------------------------------------------------------------------------------------------
async def test_M8_durable_events_are_stored_without_content_live_ones_are_not(tmp_path):
    model = ScriptedModel([tool_reply(("echo", {"x": "secret-arg"})), reply("the answer text")], chunk_size=3)
    engine = make(tmp_path, model)
    rec = Recorder(engine)
    await engine.run("t", "go")
    for e in rec.events:
        assert e.type and e.thread_id == "t" and e.run_id and e.time > 0 and isinstance(e.step, int)
    stored = engine.store.events("t")
    stored_types = {e.type for e in stored}
    assert {"run_started", "model_call_finished", "tool_call_finished", "run_finished"} <= stored_types
    assert not stored_types & {"model_delta", "tool_call_started", "usage_updated"}
    assert "model_delta" in rec.types()
    blob = str([e.data for e in stored])
    assert "secret-arg" not in blob and "the answer text" not in blob


# -- M9 after_agent -----------------------------------------------------------------------------------------------------
async def test_M9_blocked_output_restores_keys_that_ask_for_it(tmp_path):
    class Plan(AgentMiddleware):
        writes = frozenset({"plan"})
        state_defaults = {"plan": ["old"]}
        restore_on_block = frozenset({"plan"})

        def tools(self):
            async def set_plan(args, ctx):
                ctx.write("plan", ["new"])
                return "ok"

            return [Tool("set_plan", "", schema({}), set_plan)]

    class Censor(AgentMiddleware):
        async def after_agent(self, answer, ctx):
            return Block("leaks a secret") if "secret" in answer else None

    model = ScriptedModel([tool_reply(("set_plan", {})), reply("the secret is 42")])
    engine = make(tmp_path, model, [Censor(), Plan()])
    result = await engine.run("t", "go")
    assert result.status == "failed" and "leaks a secret" in result.error and result.answer == ""
    state = engine.store.latest_checkpoint("t").state
    assert state["plan"] == ["old"]
    # the blocked answer is neither kept nor sent again (not "42": a random run id may hold it)
    assert "secret is" not in str(state["messages"])


# -- M10 tool names -----------------------------------------------------------------------------------------------------
def test_M10_tool_name_clash_refuses_the_build():
    class Dup(AgentMiddleware):
        def tools(self):
            return [ECHO]

    with pytest.raises(BuildError, match="'echo'.*Dup"):
        Agent(ScriptedModel([]), middleware=[Dup()], tools=[ECHO])


def test_two_middleware_writing_one_key_refuse_the_build():
    class A(AgentMiddleware):
        writes = frozenset({"k"})

    class B(AgentMiddleware):
        writes = frozenset({"k"})

    with pytest.raises(BuildError, match="'k'.*A.*B"):
        Agent(ScriptedModel([]), middleware=[A(), B()])


# -- decisions ---------------------------------------------------------------------------------------------------------
async def test_resume_refuses_unknown_or_missing_decisions(tmp_path):
    class AskAll(AgentMiddleware):
        async def wrap_tool_call(self, call, ctx, call_next):
            return await call_next(call, ctx) if ctx.approved else NeedsApproval("why")

    model = ScriptedModel([tool_reply(("echo", {"x": "a"}), ("echo", {"x": "b"})), reply("ok")])
    engine = make(tmp_path, model, [AskAll()])
    result = await engine.run("t", "go")
    assert len(result.pending) == 2
    from workbench.errors import RunError

    with pytest.raises(RunError, match="missing"):
        await engine.resume("t", {result.pending[0].id: "approve"})
    with pytest.raises(RunError, match="no pending question"):
        await engine.resume("t", {"bogus": "approve"})
    with pytest.raises(RunError, match="waiting for decisions"):
        await engine.run("t", "new turn")
    done = await engine.resume("t", {q.id: "approve" for q in result.pending})
    assert done.status == "done" and tool_texts(model.requests[-1]) == ["echo a", "echo b"]


async def test_M8_event_fields_never_hide_the_envelope(tmp_path):
    class Loud(AgentMiddleware):
        async def wrap_model_call(self, request, call_next, ctx):
            ctx.emit("custom_note", run="not an id")
            return await call_next(request)

    model = ScriptedModel([reply("ok"), reply("ok")])
    engine = make(tmp_path, model)
    rec = Recorder(engine)
    await engine.run("t", "go")
    usage = next(e for e in rec.events if e.type == "usage_updated").to_dict()
    assert usage["run"] == rec.events[0].run_id and usage["thread"] == "t"
    assert usage["run_usage"]["calls"] == 1 and usage["thread_usage"]["calls"] == 1
    bad = await make(tmp_path / "b", ScriptedModel([reply("x")]), [Loud()]).run("t", "go")
    assert bad.status == "failed" and "reserved field names: run" in bad.error
