"""Issue 9, C3/C5: the compression middleware remembers how much of a thread's history is known to be
within the tool-response cap, so a step checks its new messages instead of all of them — and the view
it sends is always the one ``compressed_view`` computes afresh: an over-cap result arriving late, a cap
changed between steps, a history of new message objects (another run) or another thread are all seen.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.config import CompressionConfig
from workbench.engine.messages import Message, ToolCall
from workbench.harness.compression import CompressionMiddleware, compressed_view


def _step(i: int, size: int) -> list[Message]:
    call = ToolCall.parse(f"call_{i}", "read_file", {"path": f"/f{i}"})
    return [Message.assistant("", (call,)), Message.tool(call, "x" * size)]


@settings(max_examples=200, deadline=None)
@given(sizes=st.lists(st.integers(0, 60), min_size=1, max_size=25), cap=st.sampled_from([0, 20, 40]),
       reload_at=st.integers(0, 30), cap_change_at=st.integers(0, 30))
def test_c3_the_remembered_cap_check_gives_the_fresh_view(sizes: list[int], cap: int, reload_at: int,
                                                          cap_change_at: int) -> None:
    """C3: step by step, the view with the middleware's memo equals the view computed from scratch."""
    mw = CompressionMiddleware(CompressionConfig(max_tool_response_chars=cap))
    history: list[Message] = [Message.user("go")]
    for i, size in enumerate(sizes):
        history += _step(i, size)
        if i == reload_at:  # another run: the same history parsed again into new objects
            history = [Message.from_dict(m.to_dict()) for m in history]
        if i == cap_change_at:
            mw.config = CompressionConfig(max_tool_response_chars=max(0, mw.config.max_tool_response_chars - 15))
        cap_now = mw.config.max_tool_response_chars
        remembered = compressed_view(history, [], cap_now, checked=mw._within_cap("t", history))
        assert remembered == compressed_view(history, [], cap_now)
        assert [m.content for m in remembered] == [m.content for m in compressed_view(history, [], cap_now)]
        other = [Message.user("other thread"), *_step(99, 70)]  # never mixed up with thread t's memo
        assert compressed_view(other, [], cap_now, checked=mw._within_cap("u", other)) == \
            compressed_view(other, [], cap_now)


def test_c3_a_step_checks_only_its_new_messages() -> None:
    """The memo covers everything up to the newest message checked: a later step starts from there."""
    mw = CompressionMiddleware(CompressionConfig(max_tool_response_chars=100))
    history: list[Message] = [Message.user("go")]
    for i in range(50):
        history += _step(i, 10)
        assert mw._within_cap("t", history) == len(history)
    assert mw._checked["t"][0] == 101 and mw._checked["t"][1] is history[-1]
    history += _step(50, 500)  # over the cap: the memo stops before it, and the view cuts it
    assert mw._within_cap("t", history) == 102
    view = compressed_view(history, [], 100, checked=102)
    assert len(view[-1].content) < 500 and view[:102] == history[:102]
