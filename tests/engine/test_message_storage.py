"""How tool calls are stored (F3, R1): parsed arguments once, their text derived the same way on load."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from workbench.engine.messages import Message, ToolCall


def test_F3_a_big_call_is_stored_once_not_twice() -> None:
    content = "x" * 1_000_000
    call = ToolCall.parse("c1", "write_file", json.dumps({"path": "/scratch/big.txt", "content": content}))
    stored = json.dumps(Message.assistant("", tool_calls=(call,)).to_dict())
    assert len(stored) < 1.1 * len(content)  # was twice: parsed arguments and their raw text


def test_the_text_sent_back_is_the_same_before_and_after_a_reload() -> None:
    # The model's own spacing is not kept: what is sent back must not change across a restart.
    call = ToolCall.parse("c1", "ls", '{ "path" :  "/project" }')
    reloaded = ToolCall.from_dict(json.loads(json.dumps(call.to_dict())))
    assert reloaded == call
    assert Message.assistant("", tool_calls=(call,)).to_openai() == \
        Message.assistant("", tool_calls=(reloaded,)).to_openai()


def test_text_that_is_not_a_json_object_is_kept_as_it_came() -> None:
    for raw in ('{"path": ', "[1, 2]", "not json"):
        call = ToolCall.parse("c1", "ls", raw)
        assert call.arguments is None
        assert ToolCall.from_dict(json.loads(json.dumps(call.to_dict()))).raw_arguments == raw


@given(st.dictionaries(st.text(max_size=8), st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8), max_size=5))
def test_any_parsed_arguments_round_trip(arguments: dict) -> None:
    call = ToolCall.parse("c", "t", json.dumps(arguments))
    again = ToolCall.from_dict(json.loads(json.dumps(call.to_dict(), ensure_ascii=False)))
    assert again.arguments == arguments and again.raw_arguments == call.raw_arguments
