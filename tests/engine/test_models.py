"""Models: LiteLLMModel through the real litellm path against the stub server, ThreadedModel, ScriptedModel."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.stub_server import StubReply
from workbench.engine.messages import Message, ModelDelta, ModelRequest, ModelResponse, ToolCall, ToolSpec
from workbench.engine.models.base import Model, complete
from workbench.engine.models.litellm_model import LiteLLMModel, classify
from workbench.engine.models.scripted import ScriptedModel, reply, tool_reply
from workbench.engine.models.threaded import ThreadedModel
from workbench.engine.usage import Usage
from workbench.errors import ModelError

ROOT = Path(__file__).resolve().parents[2]

REQUEST = ModelRequest(
    system="You are a test.",
    messages=(Message.user("Say hello"),),
    tools=(ToolSpec("read_file", "Read a file.", {"type": "object", "properties": {"path": {"type": "string"}}}),),
)


def make(stub, model: str = "openai/test-model", **kw) -> LiteLLMModel:
    kw.setdefault("backoff_base", 0.01)
    kw.setdefault("timeout", 10.0)
    return LiteLLMModel(model, api_base=stub.url, api_key="sk-test", **kw)


async def collect(model: Model, request: ModelRequest = REQUEST) -> tuple[list[ModelDelta], ModelResponse]:
    deltas: list[ModelDelta] = []
    final = None
    async for item in model.stream(request):
        if isinstance(item, ModelDelta):
            deltas.append(item)
        else:
            assert final is None, "more than one response"
            final = item
    assert final is not None
    return deltas, final


# --- LiteLLMModel against the stub --------------------------------------------------------------


async def test_streamed_text_arrives_in_deltas_with_usage(stub_server):
    stub_server.script(StubReply(text="Hello there, general Kenobi", chunks=4, usage=(42, 7)))
    model = make(stub_server)
    assert isinstance(model, Model) and model.name == "openai/test-model"
    deltas, resp = await collect(model)
    assert len([d for d in deltas if d.text]) >= 3
    assert "".join(d.text for d in deltas) == "Hello there, general Kenobi"
    assert resp.message.role == "assistant" and resp.message.content == "Hello there, general Kenobi"
    assert resp.usage.input_tokens == 42 and resp.usage.output_tokens == 7 and resp.usage.calls == 1
    assert resp.finish_reason == "stop"
    # The stub saw what the model was given.
    body = stub_server.requests[0]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["messages"][0] == {"role": "system", "content": "You are a test."}
    assert body["tools"][0]["function"]["name"] == "read_file"


async def test_reasoning_and_detailed_usage(stub_server):
    usage = {
        "prompt_tokens": 100,
        "completion_tokens": 30,
        "completion_tokens_details": {"reasoning_tokens": 12},
        "prompt_tokens_details": {"cached_tokens": 64},
    }
    stub_server.script(StubReply(text="ok", reasoning="let me think", usage=usage))
    deltas, resp = await collect(make(stub_server))
    assert "".join(d.reasoning for d in deltas) == "let me think"
    u = resp.usage
    assert (u.input_tokens, u.output_tokens, u.thoughts_tokens, u.cached_tokens) == (100, 18, 12, 64)
    assert u.total_tokens == 130


async def test_tool_calls_with_fragmented_arguments(stub_server):
    args = {"path": "/project/README.md", "lines": [1, 2, 3], "note": "ünïcode"}
    stub_server.script(StubReply(tool_calls=[("read_file", args), ("write_todos", {"todos": []})], chunks=5))
    _, resp = await collect(make(stub_server))
    calls = resp.message.tool_calls
    assert [c.name for c in calls] == ["read_file", "write_todos"]
    assert calls[0].arguments == args and calls[1].arguments == {"todos": []}
    assert calls[0].id and calls[0].id != calls[1].id
    assert resp.finish_reason == "tool_calls"


async def test_R10_a_lone_surrogate_in_a_call_id_logs_no_error_for_a_good_answer(stub_server, caplog):
    """Found by a review: litellm's rebuild of the streamed response (for its logging, which nobody
    receives) failed to serialize the id and logged an ERROR with a traceback; ``workbench run`` printed
    them as ``error:`` lines for a run that succeeded. The answer is built from the stream regardless."""
    import logging

    import litellm

    stub_server.script(StubReply(tool_calls=[("ls", {"path": "/project"}, "n\udc00")], usage=(100, 20)))
    with caplog.at_level(logging.DEBUG):
        _, resp = await collect(make(stub_server))
    (call,) = resp.message.tool_calls
    assert call.name == "ls" and call.arguments == {"path": "/project"}
    assert resp.usage.input_tokens == 100
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], [r.getMessage() for r in caplog.records]
    # With a callback registered, litellm's own report goes through as before.
    record = logging.LogRecord("LiteLLM", logging.ERROR, __file__, 1,
                               "litellm.main.py::stream_chunk_builder() - Exception occurred - x", None, None)
    quiet = next(f for f in logging.getLogger("LiteLLM").filters if type(f).__name__ == "_QuietIdleRebuild")
    assert not quiet.filter(record)
    litellm.success_callback.append(lambda *a, **k: None)
    try:
        assert quiet.filter(record)
    finally:
        litellm.success_callback.pop()


async def test_invalid_tool_arguments_keep_raw(stub_server):
    stub_server.script(StubReply(tool_calls=[("read_file", '{"path": "/x", oops')]))
    _, resp = await collect(make(stub_server))
    (call,) = resp.message.tool_calls
    assert call.arguments is None and call.raw_arguments == '{"path": "/x", oops'


async def test_no_usage_from_provider_is_estimated_and_counted(stub_server):
    stub_server.script(StubReply(text="an answer of a few words", send_usage=False))
    _, resp = await collect(make(stub_server))
    assert resp.usage.calls == 1
    assert resp.usage.input_tokens > 0 and resp.usage.output_tokens > 0


async def test_401_is_a_key_error_without_retry(stub_server):
    stub_server.script(StubReply(status=401), StubReply(text="never"))
    with pytest.raises(ModelError) as info:
        await complete(make(stub_server), REQUEST)
    msg = str(info.value)
    assert "API key" in msg and "openai/test-model" in msg and "401" in msg and "OPENAI_API_KEY" in msg
    assert "\n" not in msg and "Traceback" not in msg
    assert info.value.status == 401 and not info.value.retryable
    assert len(stub_server.requests) == 1


async def test_404_is_unknown_model(stub_server):
    stub_server.script(StubReply(status=404))
    with pytest.raises(ModelError, match=r"unknown model 'openai/test-model' — check the model name"):
        await complete(make(stub_server), REQUEST)
    assert len(stub_server.requests) == 1


async def test_unknown_provider_is_unknown_model():
    model = LiteLLMModel("nosuchprovider-model-xyz", api_key="sk-test", backoff_base=0.01)
    with pytest.raises(ModelError, match=r"unknown model 'nosuchprovider-model-xyz'"):
        await complete(model, REQUEST)


async def test_429_then_200_succeeds_after_retry(stub_server):
    stub_server.script(StubReply(status=429), StubReply(text="made it", usage=(5, 2)))
    _, resp = await collect(make(stub_server))
    assert resp.message.content == "made it"
    assert len(stub_server.requests) == 2


async def test_429_every_time_gives_up(stub_server):
    stub_server.script(*[StubReply(status=429)] * 3)
    with pytest.raises(ModelError, match=r"rate limited by openai after 3 tries") as info:
        await complete(make(stub_server, max_retries=2), REQUEST)
    assert info.value.retryable and info.value.status == 429
    assert len(stub_server.requests) == 3


async def test_500_after_retries(stub_server):
    stub_server.script(*[StubReply(status=500)] * 4)
    with pytest.raises(ModelError, match=r"server error \(500\) after 4 tries") as info:
        await complete(make(stub_server, max_retries=3), REQUEST)
    assert info.value.status == 500
    assert len(stub_server.requests) == 4
    assert stub_server.remaining == 0


async def test_backoff_grows(stub_server):
    stub_server.script(StubReply(status=503), StubReply(status=503), StubReply(text="ok"))
    started = time.monotonic()
    await complete(make(stub_server, backoff_base=0.1), REQUEST)
    assert time.monotonic() - started >= 0.1 + 0.2  # 0.1 then 0.2 (+ jitter)


async def test_timeout_is_retried_then_reported(stub_server):
    stub_server.script(StubReply(text="late", delay=1.0), StubReply(text="late", delay=1.0))
    with pytest.raises(ModelError, match=r"did not answer within 0.2 s after 2 tries"):
        await complete(make(stub_server, timeout=0.2, max_retries=1), REQUEST)
    assert len(stub_server.requests) == 2


async def test_connection_refused_names_the_address():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))  # bound, never listening: connecting is refused
    try:
        base = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
        model = LiteLLMModel("openai/test-model", api_base=base, api_key="sk-test", backoff_base=0.01)
        with pytest.raises(ModelError) as info:
            await complete(model, REQUEST)
    finally:
        sock.close()
    assert str(info.value) == f"could not connect to {base}: connection refused — is the server running?"


async def test_dropped_stream_is_not_retried_after_text(stub_server):
    stub_server.script(StubReply(text="one two three", chunks=3, drop_after=3), StubReply(text="again"))
    seen: list[str] = []
    with pytest.raises(ModelError, match="mid-stream"):
        async for item in make(stub_server).stream(REQUEST):
            if isinstance(item, ModelDelta):
                seen.append(item.text)
    text = "".join(seen)
    assert text and text != "one two three" and "one two three".startswith(text)  # never duplicated
    assert len(stub_server.requests) == 1


async def test_dropped_before_any_text_is_retried(stub_server):
    stub_server.script(StubReply(text="x", drop_after=1), StubReply(text="second try"))
    _, resp = await collect(make(stub_server))
    assert resp.message.content == "second try"
    assert len(stub_server.requests) == 2


async def test_cost_for_priced_and_unpriced_models(stub_server):
    stub_server.script(StubReply(text="priced", usage=(1000, 100)), StubReply(text="unpriced", usage=(1000, 100)))
    _, priced = await collect(make(stub_server, model="openai/gpt-4o-mini"))
    _, unpriced = await collect(make(stub_server, model="openai/test-model"))
    assert priced.usage.cost_usd is not None and priced.usage.cost_usd > 0
    assert priced.usage.unpriced_calls == 0
    assert unpriced.usage.cost_usd is None and unpriced.usage.unpriced_calls == 1
    total = priced.usage + unpriced.usage
    assert total.calls == 2 and total.unpriced_calls == 1 and total.cost_usd == priced.usage.cost_usd


async def test_R5_B1_a_usage_objects_details_never_price_a_call_below_its_counts(stub_server):
    """A provider's (or a proxy's) usage details are priced by litellm as they say: `text_tokens: 1`
    made 100k + 100k tokens of gpt-4o cost $0.00001 instead of $1.25, and a cost_usd budget never held
    (a review found it). The counts kept (cached input at its price) are the floor; details that say
    more — a cache write — still count."""
    counts = {"prompt_tokens": 100_000, "completion_tokens": 100_000}
    honest = {**counts, "prompt_tokens_details": {"cached_tokens": 20_000}}
    cheat = {**counts, "prompt_tokens_details": {"cached_tokens": 0, "text_tokens": 1},
             "completion_tokens_details": {"reasoning_tokens": 0, "text_tokens": 1}}
    stub_server.script(*(StubReply(text="ok", usage=u) for u in (counts, honest, cheat)))
    plain, cached, cheated = [(await collect(make(stub_server, model="openai/gpt-4o")))[1].usage for _ in range(3)]
    assert plain.cost_usd == pytest.approx(1.25)  # gpt-4o: $2.50 / $10 a million
    assert cached.cost_usd == pytest.approx(1.25 - 20_000 * (2.5 - 1.25) / 1e6) and cached.cached_tokens == 20_000
    assert cheated.cost_usd == pytest.approx(1.25) and cheated.unpriced_calls == 0


@pytest.mark.parametrize("usage", [
    {"total_tokens": 30_010},  # only a total (litellm makes the parts 0)
    {"completion_tokens": 10},  # no prompt figure
    {"prompt_tokens": 50},  # no completion figure
    {"prompt_tokens": 0, "completion_tokens": 0},
])
async def test_R5_B1_a_usage_figure_left_out_is_estimated_not_zero(stub_server, usage):
    """A usage object with a figure missing counted that figure as 0: a run answered with only
    total_tokens counted nothing, and a total_tokens budget never held (a review found it). A figure
    given is kept; one missing (or 0: no call has an empty prompt or an answer of no tokens) is the
    estimate of the request or of the answer."""
    stub_server.script(StubReply(text="a fine answer of some words", usage=usage))
    _, resp = await collect(make(stub_server))
    u = resp.usage
    assert u.input_tokens > 0 and u.output_tokens > 0, u
    assert u.input_tokens == usage.get("prompt_tokens") or not usage.get("prompt_tokens")
    assert u.output_tokens == usage.get("completion_tokens") or not usage.get("completion_tokens")


async def test_request_settings_are_passed(stub_server):
    stub_server.script(StubReply(text="ok"))
    await complete(make(stub_server, extra={"temperature": 0.5}), REQUEST.replace(settings={"max_tokens": 17}))
    body = stub_server.requests[0]
    assert body["temperature"] == 0.5 and body["max_tokens"] == 17


async def test_no_retry_after_a_delta_with_a_fake_litellm(monkeypatch):
    """A retryable error after text was yielded is reported, not retried (text is never duplicated)."""

    class RateLimitError(Exception):
        status_code = 429

    calls = []

    class Fake:
        async def acompletion(self, **kwargs):
            calls.append(kwargs)

            async def gen():
                yield {"choices": [{"delta": {"content": "partial"}}]}
                raise RateLimitError("slow down")

            return gen()

        def cost_per_token(self, **kwargs):
            raise ValueError("unpriced")

    import workbench.engine.llm_setup as llm_setup

    monkeypatch.setattr(llm_setup, "import_litellm", lambda: Fake())
    got = []
    with pytest.raises(ModelError, match="mid-stream"):
        async for item in LiteLLMModel("fake/model", backoff_base=0.0).stream(REQUEST):
            got.append(item)
    assert got == [ModelDelta(text="partial")]
    assert len(calls) == 1 and calls[0]["num_retries"] == 0


def test_classify_kinds():
    class AuthenticationError(Exception):
        status_code = 401

    class InternalServerError(Exception):
        status_code = 500

    assert classify(AuthenticationError("x")).kind == "auth"
    assert classify(InternalServerError("x")).retryable
    try:
        try:
            raise ConnectionRefusedError(111, "refused")
        except ConnectionRefusedError as inner:
            raise InternalServerError("Connection error.") from inner
    except InternalServerError as exc:
        assert classify(exc).kind == "refused"


# --- ThreadedModel ------------------------------------------------------------------------------


class ProbeModel:
    """Records the thread and loop it ran on; plays scripted steps."""

    name = "probe"

    def __init__(self, steps):
        self.steps = steps
        self.thread_ids: list[int] = []
        self.loops: list[asyncio.AbstractEventLoop] = []
        self.cancelled = threading.Event()

    async def stream(self, request):
        self.thread_ids.append(threading.get_ident())
        self.loops.append(asyncio.get_running_loop())
        try:
            for step in self.steps:
                if isinstance(step, float):
                    await asyncio.sleep(step)
                elif isinstance(step, BaseException):
                    raise step
                elif step == "hang":
                    await asyncio.Event().wait()
                elif isinstance(step, str):
                    yield ModelDelta(text=step)
                else:
                    yield step
        except asyncio.CancelledError:
            self.cancelled.set()
            raise


@pytest.fixture
def threaded():
    made: list[ThreadedModel] = []

    def build(inner, **kw) -> ThreadedModel:
        m = ThreadedModel(inner, **kw)
        made.append(m)
        return m

    yield build
    for m in made:
        m.close()


async def test_threaded_runs_inner_on_worker_thread(threaded):
    inner = ProbeModel(["a", 0.1, "b", reply("ab")])
    model = threaded(inner)
    assert isinstance(model, Model) and model.name == "probe"
    deltas, resp = await collect(model)
    assert "".join(d.text for d in deltas) == "ab" and resp.message.content == "ab"
    assert inner.thread_ids[0] != threading.get_ident()
    assert inner.loops[0] is not asyncio.get_running_loop()
    assert inner.thread_ids[0] == model.thread.ident


async def test_threaded_batches_bursts(threaded):
    burst = [f"t{i} " for i in range(50)]
    model = threaded(ProbeModel([*burst, 0.15, "late", reply("x")]))
    deltas, _ = await collect(model)
    assert "".join(d.text for d in deltas) == "".join(burst) + "late"
    assert len(deltas) <= 3  # the burst arrives as one (or very few) batches, "late" separately
    assert deltas[-1].text == "late"


async def test_threaded_batches_stub_stream(threaded, stub_server):
    text = "".join(f"w{i} " for i in range(200))  # varied: litellm rejects 100 identical chunks
    stub_server.script(StubReply(text=text, chunks=200, usage=(3, 200)))
    deltas, resp = await collect(threaded(make(stub_server)))
    assert "".join(d.text for d in deltas) == text and resp.usage.output_tokens == 200
    assert len(deltas) < 50


async def test_threaded_errors_propagate(threaded):
    model = threaded(ProbeModel(["x", ModelError("boom from the worker")]))
    got = []
    with pytest.raises(ModelError, match="boom from the worker"):
        async for item in model.stream(REQUEST):
            got.append(item)
    assert got == [ModelDelta(text="x")]


async def test_threaded_cancellation_cancels_worker_task(threaded):
    inner = ProbeModel(["first", "hang"])
    model = threaded(inner)
    first = asyncio.Event()

    async def consume():
        async for _ in model.stream(REQUEST):
            first.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await asyncio.to_thread(inner.cancelled.wait, 5)


async def test_threaded_breaking_out_cancels_worker(threaded):
    inner = ProbeModel(["first", "hang"])
    model = threaded(inner)
    agen = model.stream(REQUEST)
    assert await agen.__anext__() == ModelDelta(text="first")
    await agen.aclose()
    assert await asyncio.to_thread(inner.cancelled.wait, 5)


async def test_threaded_close_joins_and_fails_waiting_consumer():
    inner = ProbeModel(["hang"])
    model = ThreadedModel(inner)
    model.start()
    thread = model.thread

    async def consume():
        async for _ in model.stream(REQUEST):
            pass

    task = asyncio.create_task(consume())
    await asyncio.sleep(0.1)
    await asyncio.to_thread(model.close)
    assert not thread.is_alive()
    with pytest.raises(ModelError, match="cancelled"):
        await asyncio.wait_for(task, 5)


def test_threaded_warm_up_returns_future():
    model = ThreadedModel(ScriptedModel([]))
    try:
        seconds = model.warm_up().result(120)
        assert seconds >= 0
    finally:
        model.close()


# --- ScriptedModel ------------------------------------------------------------------------------


async def test_scripted_plays_in_order_and_records():
    model = ScriptedModel(
        [reply("hello world"), tool_reply(("read_file", {"path": "/a"}), ToolCall.parse("c9", "ls", {}), text="hm")],
        chunk_size=4,
    )
    deltas, first = await collect(model)
    assert [d.text for d in deltas] == ["hell", "o wo", "rld"]
    assert first.usage == Usage(input_tokens=10, output_tokens=5, calls=1)
    _, second = await collect(model, REQUEST.replace(system="other"))
    calls = second.message.tool_calls
    assert calls[0].name == "read_file" and calls[0].arguments == {"path": "/a"} and calls[0].id.startswith("call_")
    assert calls[1].id == "c9" and second.finish_reason == "tool_calls"
    assert [r.system for r in model.requests] == ["You are a test.", "other"]
    model.assert_all_used()


async def test_scripted_without_kept_requests_counts_calls_and_holds_none():
    """Issue 9: a benchmark's 500-step session must not keep every request alive (the GC walks them)."""
    import gc
    import weakref

    model = ScriptedModel([reply("one"), reply("two")], keep_requests=False)
    request = REQUEST.replace(system="held only by the caller")
    await complete(model, request)
    await complete(model, REQUEST)
    assert model.calls == 2 and model.requests == []
    gone = weakref.ref(request)
    del request
    gc.collect()
    assert gone() is None  # the model kept no reference to it
    model.assert_all_used()


async def test_scripted_out_of_replies_and_errors():
    model = ScriptedModel([ModelError("scripted failure"), lambda req: reply(f"saw {len(req.messages)}")])
    with pytest.raises(ModelError, match="scripted failure"):
        await complete(model, REQUEST)
    assert (await complete(model, REQUEST)).message.content == "saw 1"
    with pytest.raises(AssertionError, match="ScriptedModel ran out of replies after 2 calls"):
        await complete(model, REQUEST)
    assert len(model.requests) == 3


def test_scripted_assert_all_used_fails_when_left():
    with pytest.raises(AssertionError, match="1 of 1 replies"):
        ScriptedModel([reply("never")]).assert_all_used()


# --- the stub server itself ---------------------------------------------------------------------


def _post(url: str, body: dict) -> tuple[int, dict]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_stub_non_streamed_models_and_exhausted_script(stub_server):
    stub_server.script({"text": "plain", "usage": [3, 4], "tool_calls": [["f", {"a": 1}]]})
    status, body = _post(stub_server.url + "/chat/completions", {"model": "m", "messages": []})
    assert status == 200 and body["choices"][0]["message"]["content"] == "plain"
    assert body["usage"]["prompt_tokens"] == 3 and body["usage"]["total_tokens"] == 7
    assert json.loads(body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]) == {"a": 1}
    status, body = _post(stub_server.url + "/chat/completions", {"model": "m", "messages": []})
    assert status == 500 and "ran out of replies" in body["error"]["message"]
    with urllib.request.urlopen(stub_server.url + "/models", timeout=10) as resp:
        assert json.loads(resp.read())["data"][0]["id"] == "test-model"
    assert len(stub_server.requests) == 2


def test_stub_runs_as_a_script(tmp_path):
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": "from the script", "usage": [1, 2]}]))
    with subprocess.Popen(
        [sys.executable, "-m", "tests.stub_server", "--port", "0", "--script", str(script)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    ) as proc:
        try:
            url = proc.stdout.readline().strip()
            assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
            status, body = _post(url + "/chat/completions", {"model": "m", "messages": []})
            assert status == 200 and body["choices"][0]["message"]["content"] == "from the script"
        finally:
            proc.terminate()
            proc.wait(10)
    assert proc.returncode == 0


async def test_stopping_early_closes_the_stream(stub_server):
    stub_server.script(StubReply(text="a b c d e f", chunks=6, chunk_delay=0.05), StubReply(text="next"))
    agen = make(stub_server).stream(REQUEST)
    assert isinstance(await agen.__anext__(), ModelDelta)
    await agen.aclose()
    _, resp = await collect(make(stub_server))  # the stub is free for the next call
    assert resp.message.content == "next"


async def test_no_key_at_all_is_reported_as_a_key_problem_not_a_server_error(stub_server, monkeypatch):
    # No api_key and no OPENAI_API_KEY: the client refuses before sending anything.
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    from workbench.engine.messages import Message, ModelRequest
    from workbench.engine.models.base import complete
    from workbench.engine.models.litellm_model import LiteLLMModel
    from workbench.errors import ModelError

    with pytest.raises(ModelError) as info:
        await complete(LiteLLMModel("openai/test-model", stub_server.url, None, max_retries=0),
                       ModelRequest(system="s", messages=(Message.user("hi"),)))
    assert "API key" in str(info.value) and "server error" not in str(info.value)


async def test_no_key_names_the_provider_and_where_to_set_it_never_refused_500(stub_server, monkeypatch):
    """Issue 8: with no key at all the message said the key "was refused (500)"."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    from workbench.engine.messages import Message, ModelRequest
    from workbench.engine.models.base import complete
    from workbench.engine.models.litellm_model import LiteLLMModel
    from workbench.errors import ModelError

    with pytest.raises(ModelError) as info:
        await complete(LiteLLMModel("openai/test-model", stub_server.url, None, max_retries=0),
                       ModelRequest(system="s", messages=(Message.user("hi"),)))
    text = str(info.value)
    assert "no API key is set for provider openai" in text and "$OPENAI_API_KEY" in text and "Settings" in text
    assert "refused" not in text and "500" not in text
    assert stub_server.requests == []  # nothing was sent


def test_redact_scrubs_known_keys_and_key_shapes_but_not_ordinary_text(monkeypatch):
    from workbench.redact import remember, scrub

    monkeypatch.setenv("GROQ_API_KEY", "gsk_live_0123456789abcdef")
    remember("custom-secret-value-42")
    text = ("key gsk_live_0123456789abcdef; custom-secret-value-42; sk-ant-api03-AAAABBBBCCCC; "
            "Authorization: Bearer eyJhbGciOi.JIUzI1NiJ9; api_key='abcdefghijklmno'; model gpt-4o, status 401")
    out = scrub(text, "extra-secret-xyz") + scrub("passed extra-secret-xyz", "extra-secret-xyz")
    for secret in ("gsk_live_0123456789abcdef", "custom-secret-value-42", "sk-ant-api03-AAAABBBBCCCC",
                   "eyJhbGciOi.JIUzI1NiJ9", "abcdefghijklmno", "extra-secret-xyz"):
        assert secret not in out
    assert "model gpt-4o, status 401" in out and "Bearer [redacted]" in out
