"""Issue 9: our use of litellm is lean — one kept-alive connection, the import overlapping set-up,
cost looked up once per model — without changing what a call returns (usage, cost, text)."""

from __future__ import annotations

import asyncio

from tests.engine.test_litellm_setup import run_python
from workbench.engine.messages import Message, ModelRequest
from workbench.engine.models.base import complete
from workbench.engine.models.litellm_model import LiteLLMModel


def _request(text: str = "hi") -> ModelRequest:
    return ModelRequest(system="s", messages=(Message.user(text),))


def test_successive_calls_share_one_kept_alive_connection(stub_server):
    """No fresh client or connection per call: three calls arrive from one client port."""
    stub_server.script(*({"text": f"answer {i}", "usage": [5, 2]} for i in range(3)))
    model = LiteLLMModel("openai/test-model", stub_server.url, "sk-test")

    async def three() -> list[str]:
        return [(await complete(model, _request(f"q{i}"))).message.content for i in range(3)]

    assert asyncio.run(three()) == ["answer 0", "answer 1", "answer 2"]
    ports = {peer[1] for peer in stub_server.peers if peer}
    assert len(stub_server.peers) == 3 and len(ports) == 1, stub_server.peers


def test_a_litellm_model_starts_the_import_in_the_background(tmp_path):
    """make_model for a real model starts litellm's import on a thread at once (it overlaps the set-up),
    the demo model never imports it."""
    code = """
import sys, threading, time
from workbench.config import WorkbenchConfig
from workbench.session import make_model
make_model(WorkbenchConfig(model="demo"))
time.sleep(0.2)
print("demo_thread", any(t.name == "workbench-import-litellm" for t in threading.enumerate()))
print("demo_imported", "litellm" in sys.modules)
make_model(WorkbenchConfig(model="openai/test-model"), api_key="sk-test")
print("thread", any(t.name == "workbench-import-litellm" for t in threading.enumerate()))
deadline = time.time() + 90
while "litellm.main" not in sys.modules and time.time() < deadline:
    time.sleep(0.05)
print("imported", "litellm.main" in sys.modules)
"""
    out = run_python(code, tmp_path)
    values = dict(line.split() for line in out.stdout.strip().splitlines())
    assert values == {"demo_thread": "False", "demo_imported": "False", "thread": "True", "imported": "True"}, out.stdout


def test_an_unpriced_model_is_looked_up_once_and_a_priced_one_still_costs(stub_server, monkeypatch):
    """Price look-ups: a model litellm cannot price is asked once a process; a priced model's cost is
    still computed from each call's own usage (the memo never hides a price)."""
    from workbench.engine.llm_setup import import_litellm
    from workbench.engine.models import litellm_model

    litellm = import_litellm()
    asked: list[str] = []
    original = litellm.cost_per_token

    def counting(**kwargs):
        asked.append(kwargs["model"])
        return original(**kwargs)

    monkeypatch.setattr(litellm, "cost_per_token", counting)
    monkeypatch.setattr(litellm_model, "_unpriced", set())
    stub_server.script(*({"text": "x", "usage": [1000, 100 * (i + 1)]} for i in range(4)))
    unpriced = LiteLLMModel("openai/test-model", stub_server.url, "sk-test")
    priced = LiteLLMModel("openai/gpt-4o-mini", stub_server.url, "sk-test")

    async def calls():
        return [await complete(m, _request()) for m in (unpriced, unpriced, priced, priced)]

    results = asyncio.run(calls())
    assert [r.usage.cost_usd is None for r in results] == [True, True, False, False]
    assert results[3].usage.cost_usd > results[2].usage.cost_usd > 0  # 400 vs 300 output tokens
    assert asked.count("openai/test-model") == 1 and asked.count("openai/gpt-4o-mini") == 2


def test_litellm_prices_nothing_itself_while_no_callback_listens(tmp_path):
    """litellm's own per-call pricing (for logging payloads nobody receives) is skipped; with a callback
    registered it runs as litellm intends."""
    code = """
from workbench.engine.llm_setup import import_litellm
litellm = import_litellm()
from litellm.litellm_core_utils.litellm_logging import Logging
class Fake:
    model_call_details = {}
print("idle", Logging.response_cost_calculator(Fake(), result=object()) is None)
litellm.success_callback.append(lambda *a, **k: None)
try:
    Logging.response_cost_calculator(Fake(), result=object())
    print("listening skipped")
except Exception:
    print("listening ran")  # litellm's own calculator touched the (fake) logging object
"""
    out = run_python(code, tmp_path)
    assert "idle True" in out.stdout, out.stdout + out.stderr
    assert "listening ran" in out.stdout, out.stdout + out.stderr


def test_the_final_response_is_rebuilt_inline_and_usage_still_adds_up(tmp_path, stub_server):
    """litellm's end-of-stream rebuild runs on the calling loop (no thread hand-off) for the litellm
    version it was written against, and the call's usage and tool calls are unchanged by it; the heap
    litellm's import leaves is frozen out of the collector's walks."""
    stub_server.script({"text": "", "tool_calls": [["ls", {"path": "/project"}]], "usage": [321, 12]})
    code = f"""
import asyncio, gc
from workbench.engine.llm_setup import import_litellm
from workbench.engine.messages import Message, ModelRequest
from workbench.engine.models.base import complete
from workbench.engine.models.litellm_model import LiteLLMModel
import_litellm()
from litellm.litellm_core_utils.streaming_handler import CustomStreamWrapper
print("inline", getattr(CustomStreamWrapper._async_build_complete_streaming_response, "_workbench_inline", False))
print("frozen", gc.get_freeze_count() > 100000)
r = asyncio.run(complete(LiteLLMModel("openai/test-model", {stub_server.url!r}, "sk-test"),
                         ModelRequest(system="s", messages=(Message.user("hi"),))))
print("usage", r.usage.input_tokens, r.usage.output_tokens)
print("call", r.message.tool_calls[0].name, r.message.tool_calls[0].raw_arguments.replace(" ", ""))
"""
    out = run_python(code, tmp_path)
    lines = dict(line.split(" ", 1) for line in out.stdout.strip().splitlines())
    assert lines["inline"] == "True" and lines["frozen"] == "True", out.stdout
    assert lines["usage"] == "321 12" and lines["call"] == 'ls {"path":"/project"}'


def test_a_finished_stream_is_rebuilt_once_while_no_callback_listens(tmp_path, stub_server):
    """Issue 9: litellm ends a stream with usage through its finaliser twice and rebuilt the whole
    response both times; with no callback the second is given the first's (same usage, same calls),
    with a callback registered it rebuilds as litellm intends."""
    stub_server.script(*({"text": "", "tool_calls": [["ls", {"path": f"/p{i}"}]], "usage": [321 + i, 12]}
                         for i in range(2)))
    code = f"""
import asyncio
from workbench.engine.llm_setup import import_litellm
from workbench.engine.messages import Message, ModelRequest
from workbench.engine.models.base import complete
from workbench.engine.models.litellm_model import LiteLLMModel
litellm = import_litellm()
built = []
original = litellm.stream_chunk_builder
def counting(**kwargs):
    built.append(1)
    return original(**kwargs)
litellm.stream_chunk_builder = counting
model = LiteLLMModel("openai/test-model", {stub_server.url!r}, "sk-test")
def call():
    built.clear()
    r = asyncio.run(complete(model, ModelRequest(system="s", messages=(Message.user("hi"),))))
    return f"{{len(built)}} {{r.usage.input_tokens}} {{r.usage.output_tokens}} {{r.message.tool_calls[0].raw_arguments}}"
print("idle", call())
litellm.success_callback.append(lambda *a, **k: None)
print("listening", call())
"""
    out = run_python(code, tmp_path)
    lines = dict(line.split(" ", 1) for line in out.stdout.strip().splitlines())
    assert lines["idle"] == '1 321 12 {"path": "/p0"}', out.stdout + out.stderr
    assert lines["listening"].startswith("2 322 12 "), out.stdout + out.stderr


async def test_a_call_made_during_a_warm_up_waits_for_it(stub_server, monkeypatch):
    """litellm imports modules lazily inside a call: a real call racing the warm-up's own call could
    meet a half-imported module, so a first call waits until no warm-up call is in flight."""
    import threading

    from workbench.engine import llm_setup

    idle = threading.Event()  # a warm-up in flight
    monkeypatch.setattr(llm_setup, "_warm_idle", idle)
    stub_server.script({"text": "after the warm-up", "usage": [3, 3]})
    model = LiteLLMModel("openai/test-model", stub_server.url, "sk-test")
    call = asyncio.ensure_future(complete(model, _request()))
    await asyncio.sleep(0.4)
    assert not call.done() and stub_server.requests == []  # held back while the warm-up runs
    idle.set()
    result = await asyncio.wait_for(call, 30)
    assert result.message.content == "after the warm-up" and len(stub_server.requests) == 1


def _streamed(model: LiteLLMModel, text: str = "hi") -> tuple[list[str], object, list[str]]:
    """The deltas and response of one streamed call, and the async generators left to the loop to close."""
    import sys

    abandoned: list[str] = []

    async def call() -> tuple[list[str], object]:
        firstiter, finalizer = sys.get_asyncgen_hooks()

        def record(agen):  # asyncio's hook schedules an aclose() task for each generator it sees here
            abandoned.append(agen.__qualname__)
            return finalizer(agen)

        sys.set_asyncgen_hooks(firstiter=firstiter, finalizer=record)
        deltas, final = [], None
        async for item in model.stream(_request(text)):
            if hasattr(item, "message"):
                final = item
            else:
                deltas.append(item.text)
        import gc

        gc.collect()
        await asyncio.sleep(0)
        return deltas, final

    deltas, final = asyncio.run(call())
    return deltas, final, abandoned


def test_issue9_a_streamed_answer_leaves_no_generator_per_chunk_to_the_loop(stub_server, monkeypatch):
    """litellm restarted ``async for`` over the SDK stream for every chunk, leaving one async generator
    per chunk for asyncio to close with a task of its own; one iterator now serves them all, and the
    chunks are the same with it as without it."""
    words = " ".join(f"w{i}" for i in range(40))
    script = {"text": words, "chunks": 40, "tool_calls": [["ls", {"path": "/project"}, "call_1"]], "usage": [9, 40]}
    stub_server.script(dict(script), dict(script))
    model = LiteLLMModel("openai/test-model", stub_server.url, "sk-test")
    deltas, final, abandoned = _streamed(model)
    per_chunk = [name for name in abandoned if name == "AsyncStream.__aiter__"]
    assert per_chunk == [], abandoned
    assert len(abandoned) < 10, abandoned  # the SDK's inner chain, once a call, not once a chunk

    from openai._streaming import AsyncStream

    assert getattr(AsyncStream.__aiter__, "_workbench_fast", False)  # installed with litellm's import
    monkeypatch.setattr(AsyncStream, "__aiter__", AsyncStream.__aiter__.__wrapped__)  # the SDK's own
    plain_deltas, plain_final, plain_abandoned = _streamed(model)
    assert len([n for n in plain_abandoned if n == "AsyncStream.__aiter__"]) >= 40  # what it was
    assert deltas == plain_deltas and "".join(deltas) == words
    assert final.message == plain_final.message and final.message.tool_calls[0].name == "ls"
