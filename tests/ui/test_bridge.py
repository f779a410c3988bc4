"""The bridge (CONVENTIONS 3): engine events in, ``sig_<noun>_<past-verb>`` Qt signals out, streamed
text handed on in ~30 ms batches."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.ui.helpers import wait_for
from workbench.engine.events import Event
from workbench.engine.messages import Message, ToolCall
from workbench.engine.usage import Usage
from workbench.ui.bridge import Bridge


class FakeSession:
    """A stand-in for ``Session``: what the bridge uses of it."""

    thread_id = "t1"
    model_name = "demo"
    status = "done"
    pending = ()

    def __init__(self) -> None:
        self.listener: Any = None
        self.stored = [Event("run_started", "t1", "r0", 0, {}, seq=1)]
        self.messages: list[Message] = []
        self.usage = Usage(input_tokens=3)

    def subscribe(self, listener: Any, *, replay: bool = True, recent: int | None = None) -> Any:
        if replay:
            for e in self.stored:
                listener(e)
        self.listener = listener
        return lambda: setattr(self, "listener", None)

    def last_error(self) -> None:
        return None

    def history_tail(self, turns: int | None = 2, *, limit: int = 400, at_least: int = 0) -> Any:
        """G13: the bridge reads the newest messages only (``Session.history_tail``)."""
        from workbench.session_history import HistoryPage

        start = max(0, len(self.messages) - limit)
        return HistoryPage(start, tuple(self.messages[start:]), len(self.messages))

    def emit(self, type: str, **data: Any) -> None:
        self.listener(Event(type, "t1", "r1", 1, data))


async def test_text_is_batched_and_ordered(qtbot: Any) -> None:
    session = FakeSession()
    bridge = Bridge()
    got: list[tuple[str, Any]] = []
    for name in ("sig_text_streamed", "sig_tool_started", "sig_run_finished", "sig_thread_loaded",
                 "sig_event_received", "sig_thread_attached"):
        getattr(bridge, name).connect(lambda value, n=name: got.append((n, value)))
    bridge.attach(session)
    # the replayed event only goes out as sig_event_received, then the committed state
    assert [n for n, _ in got] == ["sig_thread_attached", "sig_event_received", "sig_thread_loaded"]
    assert got[-1][1]["usage"]["input_tokens"] == 3
    got.clear()
    for i in range(2000):
        session.emit("model_delta", text=f"{i} ")
    assert not got  # nothing reaches the view per chunk
    await wait_for(lambda: any(n == "sig_text_streamed" for n, _ in got), 5, "the coalesced text")
    texts = [v for n, v in got if n == "sig_text_streamed"]
    assert len(texts) == 1 and texts[0].startswith("0 1 2 ") and texts[0].endswith("1999 ")
    got.clear()
    session.emit("model_delta", text="last words")
    session.emit("tool_call_started", call_id="c1", name="read_file", arguments={"path": "/a"})
    # the pending text goes out before the event that follows it
    assert [n for n, _ in got][:2] == ["sig_text_streamed", "sig_event_received"]
    assert ("sig_tool_started", {"call_id": "c1", "name": "read_file", "arguments": {"path": "/a"}}) in got
    bridge.detach()
    assert session.listener is None


async def test_tool_results_come_from_the_committed_messages(qtbot: Any) -> None:
    session = FakeSession()
    bridge = Bridge(session)
    results: list[dict[str, Any]] = []
    bridge.sig_tool_results_committed.connect(results.append)
    session.emit("tool_call_finished", call_id="c1", name="read_file", status="ok")
    call = ToolCall.parse("c1", "read_file", {"path": "/a"})
    session.messages = [Message.assistant("", (call,)), Message.tool(call, "file text")]
    session.emit("step_started")
    await asyncio.sleep(0.02)  # read on the next turn of the loop, not inside the step boundary
    assert results == [{"c1": {"status": "ok", "content": "file text"}}]
