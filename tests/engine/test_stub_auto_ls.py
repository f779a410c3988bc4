"""The stub server's ``--auto-ls`` mode and arrival log (issue 9: benchmarks/peers.py, first_request.py).

Every side of the peer benchmark plays the same session from its own prompt, so the stub must answer
from the conversation: N ``ls`` calls on the folder the last user message names, then an answer;
and it must record when each request arrives. Driven over real HTTP with the standard library.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.stub_server import StubServer


@pytest.fixture
def auto_stub() -> Iterator[StubServer]:
    server = StubServer()
    server.auto_ls = True
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _post(url: str, messages: list[dict[str, Any]], *, stream: bool) -> dict[str, Any]:
    """One chat request; the reply as {text, calls, finish}, the stream reassembled."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    try:
        conn.request("POST", f"{parts.path}/chat/completions", headers={"Content-Type": "application/json"},
                     body=json.dumps({"model": "m", "messages": messages, "stream": stream}))
        resp = conn.getresponse()
        assert resp.status == 200, resp.read()
        if not stream:
            choice = json.loads(resp.read())["choices"][0]
            calls = choice["message"].get("tool_calls") or []
            return {"text": choice["message"]["content"] or "", "finish": choice["finish_reason"],
                    "calls": [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
                              for c in calls]}
        text, finish, calls = "", None, {}
        for raw in resp:
            line = raw.strip()
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            for choice in json.loads(line[6:])["choices"]:
                delta = choice["delta"]
                text += delta.get("content") or ""
                finish = choice["finish_reason"] or finish
                for tc in delta.get("tool_calls") or ():
                    call = calls.setdefault(tc["index"], {"id": "", "name": "", "args": ""})
                    call["id"] = tc.get("id") or call["id"]
                    call["name"] = tc.get("function", {}).get("name") or call["name"]
                    call["args"] += tc.get("function", {}).get("arguments") or ""
        return {"text": text, "finish": finish,
                "calls": [(c["id"], c["name"], json.loads(c["args"])) for _, c in sorted(calls.items())]}
    finally:
        conn.close()


def test_auto_ls_calls_ls_n_times_on_the_named_folder_then_answers(auto_stub: StubServer) -> None:
    """One ls call per request until the prompt's count of tool results follows it, then a text answer."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "be brief, 7 words"},
                                      {"role": "user", "content": "List /project 3 times, then say done."}]
    for i in range(3):
        reply = _post(auto_stub.url, messages, stream=True)
        assert reply["finish"] == "tool_calls"
        assert reply["calls"] == [(f"call_ls_{i}", "ls", {"path": "/project"})]
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_ls_{i}", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]})
        messages.append({"role": "tool", "tool_call_id": f"call_ls_{i}", "content": "/README.md"})
    final = _post(auto_stub.url, messages, stream=True)
    assert final == {"text": "Listed 3 times. Done.", "finish": "stop", "calls": []}


def test_auto_ls_counts_only_after_the_last_user_message_and_reads_content_parts(auto_stub: StubServer) -> None:
    """A second turn on the same history starts its count again; OpenAI content parts are read too;
    no folder named means '/'; no count means a plain answer (a first "hi")."""
    earlier = [{"role": "user", "content": "List / 1 times"},
               {"role": "assistant", "content": None, "tool_calls": []},
               {"role": "tool", "tool_call_id": "call_ls_0", "content": "x"},
               {"role": "assistant", "content": "Listed 1 times. Done."}]
    turn = {"role": "user", "content": [{"type": "text", "text": "Now list 2 times please"}]}
    reply = _post(auto_stub.url, [*earlier, turn], stream=False)
    assert reply["calls"] == [("call_ls_0", "ls", {"path": "/"})]
    hi = _post(auto_stub.url, [{"role": "user", "content": "hi"}], stream=True)
    assert hi["calls"] == [] and hi["text"] == "Listed 0 times. Done."


def test_a_script_still_comes_first_and_without_auto_ls_an_empty_script_is_an_error(auto_stub: StubServer) -> None:
    auto_stub.script("scripted answer")
    assert _post(auto_stub.url, [{"role": "user", "content": "List / 5 times"}], stream=True)["text"] == "scripted answer"
    assert _post(auto_stub.url, [{"role": "user", "content": "List / 5 times"}], stream=True)["calls"]
    plain = StubServer().start()
    try:
        parts = urlsplit(plain.url)
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
        conn.request("POST", f"{parts.path}/chat/completions", body=json.dumps({"messages": []}))
        resp = conn.getresponse()
        assert resp.status == 500 and b"stub_script_exhausted" in resp.read()
        conn.close()
    finally:
        plain.stop()


def test_each_request_s_arrival_time_is_recorded_and_reported(auto_stub: StubServer) -> None:
    """first_request.py times spawn -> arrival from these (``--log-arrivals`` prints them)."""
    import time

    seen: list[float] = []
    auto_stub.on_arrival = seen.append
    before = time.time()
    _post(auto_stub.url, [{"role": "user", "content": "hi"}], stream=True)
    _post(auto_stub.url, [{"role": "user", "content": "hi"}], stream=False)
    after = time.time()
    assert len(auto_stub.arrivals) == 2 and seen == auto_stub.arrivals
    assert before <= auto_stub.arrivals[0] <= auto_stub.arrivals[1] <= after
    auto_stub.reset()
    assert auto_stub.arrivals == []


@pytest.mark.parametrize("raw, content", [
    ('"plain text, \\u00e9 and \\ud83d\\ude00"', "plain text, é and 😀"),  # orjson reads it
    ('"a lone \\ud800 surrogate"', "a lone \ud800 surrogate"),  # orjson refuses: the standard library reads it
])
def test_stub_reads_every_body_the_standard_library_reads(raw: str, content: str) -> None:
    """The stub parses bodies with orjson for speed (issue 9), yet keeps what it recorded as before: a
    body orjson refuses (R10's lone surrogates, sent back in the history) is still read, not refused."""
    server = StubServer().start()
    try:
        server.script("ok")
        parts = urlsplit(server.url)
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
        body = '{"model": "m", "stream": false, "messages": [{"role": "user", "content": ' + raw + '}]}'
        conn.request("POST", f"{parts.path}/chat/completions", headers={"Content-Type": "application/json"},
                     body=body.encode("ascii"))
        resp = conn.getresponse()
        assert resp.status == 200, resp.read()
        resp.read()
        conn.close()
        assert server.requests[-1]["messages"][0]["content"] == content
    finally:
        server.stop()
