"""R10: model output is data, never a crash; provider errors are shown and stored with secrets scrubbed.

Every test goes through the real ``LiteLLMModel`` against the loopback stub server.
"""

from __future__ import annotations

from typing import Any

from tests.stub_server import StubReply
from workbench.engine.agent import Agent, Engine
from workbench.engine.models.litellm_model import LiteLLMModel
from workbench.engine.store import Store
from workbench.engine.tools import Tool, schema

SECRET = "sk-proj-AbCdEf0123456789SECRETxyz"


async def _echo(args: dict[str, Any], ctx: Any) -> str:
    return f"echo {args['x']}"


ECHO = Tool("echo", "Echo x.", schema({"x": {"type": "string"}}, ["x"]), _echo, changes_outside=False)


def make(tmp_path, stub, key: str = "sk-test", **kw) -> Engine:
    model = LiteLLMModel("openai/test-model", api_base=stub.url, api_key=key, max_retries=0, backoff_base=0.01)
    return Engine(Agent(model, instructions="BASE", tools=(ECHO,), **kw), Store.for_workspace(tmp_path))


def check_history(messages: list[dict[str, Any]]) -> None:
    """Every assistant tool call is followed by exactly one tool result per id, before the next turn."""
    for i, m in enumerate(messages):
        if m["role"] != "assistant" or not m.get("tool_calls"):
            continue
        ids = [c["id"] for c in m["tool_calls"]]
        assert len(set(ids)) == len(ids), "call ids of one message must be unique"
        results = []
        for later in messages[i + 1:]:
            if later["role"] != "tool":
                break
            results.append(later["tool_call_id"])
        assert sorted(results) == sorted(ids)


async def test_R10_an_emoji_split_across_two_streamed_chunks_is_stored_whole(tmp_path, stub_server):
    stub_server.script(StubReply(text="smile \ud83d\ude00 done", chunks=7))  # the pair lands in two chunks
    engine = make(tmp_path, stub_server)
    result = await engine.run("t", "go")
    assert result.status == "done", result.error
    stored = Store.for_workspace(tmp_path).latest_checkpoint("t").state["messages"]
    assert stored[-1]["content"] == "smile \U0001F600 done"


async def test_R10_lone_surrogates_nul_and_huge_text_are_stored_and_the_thread_goes_on(tmp_path, stub_server):
    huge = "x" * 2_000_000
    stub_server.script(StubReply(text="half \ud83d here \x00 nul"), StubReply(text=huge, chunks=4),
                       StubReply(text="third"))
    engine = make(tmp_path, stub_server)
    first = await engine.run("t", "one")
    assert first.status == "done", first.error
    assert "\ud83d" not in first.answer and "\ufffd" in first.answer and "\x00" in first.answer
    second = await engine.run("t", "two")
    assert second.status == "done" and len(second.answer) == 2_000_000
    third = await engine.run("t", "three")  # the history with all of it goes back to the provider
    assert third.status == "done", third.error
    stored = Store.for_workspace(tmp_path).latest_checkpoint("t").state["messages"]
    assert [m["role"] for m in stored] == ["user", "assistant"] * 3


async def test_R10_surrogates_in_tool_call_names_and_arguments_are_stored(tmp_path, stub_server):
    stub_server.script(
        StubReply(tool_calls=[("echo", '{"x": "a\\ud800b"}', "c\ud800"), ("ec\udfffho", {"x": "y"})]),
        StubReply(text="ok"),
    )
    engine = make(tmp_path, stub_server)
    result = await engine.run("t", "go")
    assert result.status == "done", result.error
    messages = Store.for_workspace(tmp_path).latest_checkpoint("t").state["messages"]
    check_history(messages)
    assert messages[2]["content"] == "echo a\ufffdb"
    assert "unknown tool" in messages[3]["content"].lower() or "no tool" in messages[3]["content"].lower()


async def test_R10_duplicate_call_ids_each_get_their_own_result(tmp_path, stub_server):
    stub_server.script(
        StubReply(tool_calls=[("echo", {"x": "a"}, "dup"), ("echo", {"x": "b"}, "dup"), ("echo", {"x": "c"}, "dup")]),
        StubReply(text="ok"),
    )
    engine = make(tmp_path, stub_server)
    result = await engine.run("t", "go")
    assert result.status == "done", result.error
    messages = Store.for_workspace(tmp_path).latest_checkpoint("t").state["messages"]
    check_history(messages)
    ids = [c["id"] for c in messages[1]["tool_calls"]]
    assert ids[0] == "dup" and len(set(ids)) == 3
    by_id = {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}
    assert [by_id[i] for i in ids] == ["echo a", "echo b", "echo c"]
    # The provider is sent the same pairing it will be asked to continue from.
    sent = stub_server.requests[1]["messages"]
    sent_ids = [c["id"] for c in sent[2]["tool_calls"]]
    assert sent_ids == ids and [m["tool_call_id"] for m in sent[3:6]] == ids


async def test_R10_hundreds_of_calls_in_one_reply_are_all_answered(tmp_path, stub_server):
    stub_server.script(StubReply(tool_calls=[("echo", {"x": str(i)}) for i in range(300)]), StubReply(text="ok"))
    engine = make(tmp_path, stub_server)
    result = await engine.run("t", "go")
    assert result.status == "done", result.error
    messages = Store.for_workspace(tmp_path).latest_checkpoint("t").state["messages"]
    check_history(messages)
    assert [m["content"] for m in messages if m["role"] == "tool"] == [f"echo {i}" for i in range(300)]


async def test_R10_a_provider_error_that_echoes_the_key_is_scrubbed_everywhere(tmp_path, stub_server, monkeypatch):
    other = "sk-ant-OTHERKEY0123456789abcdef"
    monkeypatch.setenv("ANTHROPIC_API_KEY", other)  # a key the workbench knows, not the one in use
    body = {"error": {"message": f"Incorrect API key provided: {SECRET}. Also {other} and "
                                 "Authorization: Bearer abcdefghijklmnop0123456789", "type": "invalid_request_error",
                      "code": 400}}
    stub_server.script(StubReply(status=400, error_body=body))
    engine = make(tmp_path, stub_server, key=SECRET)
    events: list[Any] = []
    engine.subscribe(events.append)
    result = await engine.run("t", "go")
    assert result.status == "failed"
    store = Store.for_workspace(tmp_path)
    record = store.runs("t")[-1]
    stored_events = [str(e.data) for e in store.events("t")]
    for text in [result.error, record.error, *stored_events, *(str(e.data) for e in events)]:
        assert SECRET not in text and other not in text and "abcdefghijklmnop0123456789" not in text
        assert SECRET[:12] not in text
    assert "[redacted]" in result.error


def test_R10_cli_errors_are_printed_scrubbed(capsys):
    from workbench.cli import _report
    from workbench.errors import ModelError

    code = _report(ModelError(f"openai refused the request (400): Incorrect API key provided: {SECRET}"), verbose=False)
    err = capsys.readouterr().err
    assert code == 1 and SECRET not in err and "[redacted]" in err and "Incorrect API key provided" in err


async def test_R10_a_user_input_with_lone_surrogates_is_stored_not_a_crash(tmp_path, stub_server):
    """E.g. argv bytes that are not UTF-8 reach Python as lone surrogates (surrogateescape)."""
    stub_server.script(StubReply(text="ok"))
    engine = make(tmp_path, stub_server)
    result = await engine.run("t", "bad \udcff input")
    assert result.status == "done", result.error
    store = Store.for_workspace(tmp_path)
    assert store.runs("t")[-1].input == "bad \ufffd input"
    assert store.latest_checkpoint("t").state["messages"][0]["content"] == "bad \ufffd input"


async def test_R10_retry_and_failure_logs_carry_no_key(tmp_path, stub_server, caplog):
    import logging

    body = {"error": {"message": f"overloaded; your key {SECRET}", "type": "server_error", "code": 503}}
    stub_server.script(StubReply(status=503, error_body=body), StubReply(status=503, error_body=body))
    model = LiteLLMModel("openai/test-model", api_base=stub_server.url, api_key=SECRET, max_retries=1,
                         backoff_base=0.01)
    engine = Engine(Agent(model, instructions="BASE"), Store.for_workspace(tmp_path))
    with caplog.at_level(logging.DEBUG, logger="workbench"):
        result = await engine.run("t", "go")
    assert result.status == "failed" and SECRET not in result.error
    logged = "\n".join(r.getMessage() + str(r.exc_info or "") for r in caplog.records)
    assert "retry 1" in logged and SECRET not in logged


def test_R10_the_verbose_traceback_is_printed_scrubbed(capsys):
    from workbench.cli import _report
    from workbench.errors import ModelError

    try:
        raise ModelError(f"openai refused the request (400): Incorrect API key provided: {SECRET}")
    except ModelError as e:
        code = _report(e, verbose=True)
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" in err and SECRET not in err and "[redacted]" in err
