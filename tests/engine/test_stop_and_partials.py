"""R6: a stop at any moment ends the run without a further model call; a partial answer keeps only the
text of the call that was cut. Also: recover after a blocked output (issue 8, item 16)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
import pytest

from workbench.engine.agent import Agent, Engine
from workbench.engine.messages import Message, ModelDelta, ModelRequest, ModelResponse
from workbench.engine.middleware import AgentMiddleware, Block, Section
from workbench.engine.models.scripted import ScriptedModel, reply
from workbench.engine.store import Store
from workbench.engine.usage import Usage
from workbench.errors import RunError


def make(tmp_path, model, middleware=()) -> Engine:
    return Engine(Agent(model, instructions="BASE", middleware=middleware), Store.for_workspace(tmp_path))


class Streams:
    """Each call streams its scripted pieces; ``None`` in a script waits until cancelled."""

    name = "streams"

    def __init__(self, *scripts: list[str | None]) -> None:
        self.scripts = list(scripts)
        self.calls = 0
        self.started = asyncio.Event()

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelDelta | ModelResponse]:
        script = self.scripts[self.calls]
        self.calls += 1
        text = ""
        for piece in script:
            if piece is None:
                self.started.set()
                await asyncio.sleep(3600)
            else:
                text += piece
                yield ModelDelta(text=piece)
        yield ModelResponse(Message.assistant(text), Usage(input_tokens=1, output_tokens=1, calls=1), "streams")


async def test_R6_stop_while_sections_are_collected_ends_aborted_without_a_model_call(tmp_path):
    entered, release = asyncio.Event(), asyncio.Event()

    class SlowSections(AgentMiddleware):
        async def sections(self, ctx):
            entered.set()
            await release.wait()  # e.g. reading AGENTS.md from a slow disk
            return [Section("notes", "n")]

    model = ScriptedModel([reply("never")])
    engine = make(tmp_path, model, [SlowSections()])
    task = asyncio.ensure_future(engine.run("t", "go"))
    await asyncio.wait_for(entered.wait(), 5)
    assert engine.stop("t")
    release.set()
    result = await asyncio.wait_for(task, 5)
    assert result.status == "aborted"
    assert model.calls == 0 and result.usage.calls == 0  # nothing made, nothing billed
    assert engine.store.thread_usage("t").calls == 0


async def test_R6_stop_before_a_retry_wrapper_calls_again_makes_no_further_call(tmp_path):
    model = Streams(["first"], ["second"])
    holder: dict[str, Engine] = {}

    class StopThenRetry(AgentMiddleware):
        async def wrap_model_call(self, request, call_next, ctx):
            await call_next(request)
            holder["engine"].stop(ctx.thread_id)  # the person presses Stop between the two calls
            return await call_next(request)

    engine = make(tmp_path, model, [StopThenRetry()])
    holder["engine"] = engine
    result = await engine.run("t", "go")
    assert result.status == "aborted" and model.calls == 1


async def test_R6_a_cut_retry_keeps_only_its_own_text_never_the_discarded_attempts(tmp_path):
    model = Streams(["DISCARDED ", "attempt"], ["kept ", "so far", None])

    class Retry(AgentMiddleware):
        async def wrap_model_call(self, request, call_next, ctx):
            await call_next(request)  # an answer this wrapper does not like: it asks again
            return await call_next(request)

    engine = make(tmp_path, model, [Retry()])
    task = asyncio.ensure_future(engine.run("t", "go"))
    await asyncio.wait_for(model.started.wait(), 5)
    engine.stop("t")
    result = await asyncio.wait_for(task, 5)
    assert result.status == "aborted" and result.answer == "kept so far"
    stored = engine.store.latest_checkpoint("t").state["messages"]
    assert stored[-1]["content"] == "kept so far" and stored[-1]["meta"]["partial"] is True
    assert "DISCARDED" not in str(stored) and engine.store.runs("t")[-1].answer == "kept so far"


async def test_recover_after_a_blocked_output_refuses_and_the_thread_goes_on(tmp_path):
    """The run ended on purpose (after_agent blocked it): there is nothing to re-run, and re-running
    would send the model a history ending in the withheld answer."""

    class Censor(AgentMiddleware):
        async def after_agent(self, answer, ctx):
            return Block("leaks a secret") if "secret" in answer else None

    model = ScriptedModel([reply("the secret is 42"), reply("fresh turn")])
    engine = make(tmp_path, model, [Censor()])
    assert (await engine.run("t", "go")).status == "failed"
    with pytest.raises(RunError, match="blocked.*nothing to recover"):
        await engine.recover("t")
    assert model.calls == 1  # the model was not called on the withheld answer
    after = await engine.run("t", "next")
    assert after.status == "done" and after.answer == "fresh turn"


async def test_R6_a_stop_that_a_model_layer_drops_still_ends_the_run_stopped(tmp_path):
    """A model layer may swallow the cancellation a Stop sends (asyncio.wait_for on 3.11 does, when an
    item arrives at that moment) and run on into an error: the run failed instead of stopping (a CI run
    caught it: litellm then refused a stream repeating one chunk). The person stopped it: it is aborted."""
    from workbench.errors import ModelError

    class Deaf:
        name = "deaf"

        async def stream(self, request: ModelRequest) -> AsyncIterator[ModelDelta | ModelResponse]:
            yield ModelDelta(text="some words ")
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                pass  # dropped
            raise ModelError("the stream broke after the stop")

    engine = make(tmp_path, Deaf())
    task = asyncio.ensure_future(engine.run("t", "hi"))
    await asyncio.sleep(0.3)  # the words have streamed; the model waits
    assert engine.stop("t")
    result = await asyncio.wait_for(task, 10)
    assert result.status == "aborted", result
    assert (result.answer or "").startswith("some words")
