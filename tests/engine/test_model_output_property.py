"""R10, property-based: whatever the model replies — any Unicode (lone surrogates, NUL), empty or huge
text, duplicate or odd call ids, up to hundreds of calls, unknown tools, malformed argument JSON — the
run ends in a documented status with a valid, reloadable history, and the thread takes the next turn.

Replies go through the loopback stub server and the real ``LiteLLMModel`` (litellm runs for real).
Bounded: 25 examples on one event loop, deadline off.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.engine.test_model_output import ECHO, check_history
from tests.stub_server import StubReply
from workbench.engine.agent import Agent, Engine
from workbench.engine.models.litellm_model import LiteLLMModel
from workbench.engine.store import Store

STATUSES = {"done", "failed", "aborted", "interrupted"}


@pytest.fixture(scope="module")
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """One loop for every example (litellm keeps clients bound to the loop that made them)."""
    new = asyncio.new_event_loop()
    yield new
    new.close()

any_char = st.characters(codec=None, exclude_categories=())  # every code point, surrogates included
texts = st.one_of(
    st.text(any_char, max_size=40),
    st.text(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1, max_size=4),
    st.sampled_from(["", "\x00", "a\x00b", "\ud83d", "\ude00", "\ud83d\ude00", "x" * 2_000_000]),
)
arguments = st.one_of(
    st.fixed_dictionaries({"x": st.text(any_char, max_size=20)}),
    st.dictionaries(st.text(any_char, max_size=5), st.integers(), max_size=3),  # schema errors
    st.sampled_from(['{"x": "unterminated', "[1, 2]", "null", "", "{}", '{"x": "\\ud800"}', "not json"]),
)
call_ids = st.one_of(st.sampled_from(["dup", "dup", "", "call_1"]), st.text(any_char, min_size=1, max_size=8))
names = st.one_of(st.sampled_from(["echo", "echo", "echo", "no_such_tool", ""]), st.text(any_char, min_size=1, max_size=8))
calls = st.lists(st.tuples(names, arguments, call_ids), max_size=4)
many_calls = st.integers(100, 200).map(lambda n: [("echo", {"x": str(i)}, "dup" if i % 3 == 0 else "") for i in range(n)])
replies = st.builds(
    lambda text, tool_calls, chunks: StubReply(text=text, tool_calls=tool_calls, chunks=chunks),
    texts,
    st.one_of(*[calls] * 9, many_calls),  # hundreds of calls in about one reply in ten
    st.integers(1, 7),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow, HealthCheck.data_too_large])
@given(script=st.lists(replies, min_size=1, max_size=3))
def test_R10_any_model_reply_ends_in_a_documented_status_with_a_valid_history(stub_server, loop, script):
    folder = Path(tempfile.mkdtemp(prefix="r10-"))
    try:
        loop.run_until_complete(_one_example(stub_server, folder, script))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


async def _one_example(stub: Any, folder: Path, script: list[StubReply]) -> None:
    stub.reset()
    stub.script(*script, StubReply(text="final"), StubReply(text="final"))
    model = LiteLLMModel("openai/test-model", api_base=stub.url, api_key="sk-test", max_retries=0)
    engine = Engine(Agent(model, instructions="BASE", tools=(ECHO,), max_steps=3), Store.for_workspace(folder))
    first = await engine.run("t", "go")
    assert first.status in STATUSES, first
    reloaded = Store.for_workspace(folder)
    try:
        cp = reloaded.latest_checkpoint("t")
        assert cp is not None
        check_history(cp.state["messages"])
        assert reloaded.runs("t")[-1].status == first.status
    finally:
        reloaded.close()
    stub.reset()
    stub.script(StubReply(text="after"))
    second = await engine.run("t", "again")  # the thread goes on, its whole history sent back
    assert second.status == "done" and second.answer == "after", second.error
    sent = stub.requests[-1]["messages"]
    assert sent[-1] == {"role": "user", "content": "again"}
    check_history(Store.for_workspace(folder).latest_checkpoint("t").state["messages"])
    engine.store.close()


