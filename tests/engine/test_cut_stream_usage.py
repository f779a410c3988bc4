"""Issue 10 (defect 10): a stream cut part-way — stopped by the person, or a dropped connection —
counts an estimate of what it cost (the request's tokens in, the streamed text out, priced where litellm
knows the model), instead of 0 tokens and $0. Through the real litellm path against the stub."""

from __future__ import annotations

import asyncio

import pytest

from tests.fakes import until
from tests.stub_server import StubReply
from workbench.session import Session


@pytest.fixture
def workspace(tmp_path, stub_server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "workbench.yaml").write_text(f"model: openai/gpt-4o-mini\napi_base: {stub_server.url}\n")
    return ws


LONG = " ".join(f"word{i}" for i in range(400))


async def test_a_stopped_stream_counts_what_was_sent_and_streamed(workspace, stub_server):
    stub_server.script(StubReply(text=LONG, chunks=200, chunk_delay=0.02, usage=(10_000, 10_000)))
    session = await Session.open(workspace)
    events = []
    session.subscribe(events.append, replay=False)
    task = asyncio.ensure_future(session.run("Write a long answer"))
    await until(lambda: sum(e.type == "model_delta" for e in events) >= 5, timeout=20)
    await session.stop()
    result = await task
    assert result.status == "aborted"
    assert result.answer and LONG.startswith(result.answer.strip()[:20])
    usage = result.usage
    # The provider's own figure (10,000 / 10,000) never arrived: the estimate is ours, and not zero.
    assert 0 < usage.input_tokens < 10_000 and 0 < usage.output_tokens < 10_000
    assert usage.calls == 1 and usage.cost_usd and usage.cost_usd > 0 and usage.unpriced_calls == 0
    finished = [e for e in events if e.type == "model_call_finished"]
    assert len(finished) == 1 and finished[0].data.get("estimated") is True
    assert session.usage.output_tokens == usage.output_tokens  # the thread's total counts it too
    await session.close()


async def test_a_dropped_connection_mid_stream_counts_an_estimate(workspace, stub_server):
    stub_server.script(StubReply(text=LONG, chunks=50, drop_after=10, usage=(10_000, 10_000)))
    session = await Session.open(workspace)
    result = await session.run("Write a long answer")
    assert result.status == "failed"
    assert 0 < result.usage.output_tokens < 10_000 and result.usage.calls == 1
    await session.close()


async def test_a_finished_stream_counts_the_providers_figures_not_an_estimate(workspace, stub_server):
    stub_server.script(StubReply(text="short", usage=(123, 7)))
    session = await Session.open(workspace)
    result = await session.run("hi")
    assert (result.usage.input_tokens, result.usage.output_tokens, result.usage.calls) == (123, 7, 1)
    await session.close()


async def test_an_answer_that_never_ends_is_cut_at_the_cap_and_counted(workspace, stub_server, monkeypatch):
    """R6: a runaway or hostile endpoint streaming without end is cut at MAX_ANSWER_CHARS (the run fails
    naming it) and what it streamed counts, estimated, like any cut call; the text kept is the cap's."""
    from workbench.engine import model_calls

    monkeypatch.setattr(model_calls, "MAX_ANSWER_CHARS", 2_000)
    stub_server.script(StubReply(text=LONG, chunks=200))  # ~3,300 characters
    session = await Session.open(workspace)
    events = []
    session.subscribe(events.append, replay=False)
    result = await session.run("Write a long answer")
    assert result.status == "failed" and "passed 2,000 characters" in (result.error or ""), result
    streamed = "".join(e.data["text"] for e in events if e.type == "model_delta")
    assert 0 < len(streamed) <= 2_000
    assert result.usage.calls == 1 and result.usage.output_tokens > 0
    finished = [e for e in events if e.type == "model_call_finished"]
    assert len(finished) == 1 and finished[0].data.get("estimated") is True
    await session.close()
