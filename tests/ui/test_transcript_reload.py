"""G10: after a reload the transcript still shows how each run ended — done, stopped, budget refused
(field, spent, limit), failed with its error card, waiting for decisions — rebuilt from the durable
events. And (issue 10, lower item) only the latest failed run's card offers Retry."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from tests.stub_server import StubReply, StubServer
from tests.ui.helpers import click, find_dialog, visible_dialog, wait_for


def _kinds(window: Any) -> list[str]:
    """The transcript's blocks in order, as short labels (user:…, assistant:…, tool:…, notice kinds)."""
    from workbench.ui.transcript_blocks import MessageBlock, NoticeBlock, ToolCallRow

    out = []
    for w in window.transcript.blocks():
        if isinstance(w, MessageBlock):
            out.append(f"{w.role}:{w.text[:12]}" + (f"[{w.tag_text}]" if w.tag_text else ""))
        elif isinstance(w, ToolCallRow):
            out.append(f"tool:{w.name}:{w.status}")
        elif isinstance(w, NoticeBlock):
            out.append(f"notice:{w.kind}")
    return out


async def test_g10_each_ending_is_shown_again_after_a_restart(
        windows: Any, stub_workspace: Path, stub_server: StubServer, qtbot: Any) -> None:
    yaml = stub_workspace / "workbench.yaml"
    yaml.write_text(yaml.read_text() + "budget:\n  - {scope: run, limit: {total_tokens: 100}}\n")
    stub_server.script(
        StubReply(text="Hello there.", usage=(10, 5)),                                 # 1 done
        StubReply(text="word " * 400, chunks=400, chunk_delay=0.01, usage=(10, 5)),    # 2 stopped
        StubReply(status=401),                                                         # 3 failed
        StubReply(tool_calls=[("read_file", {"path": "/project/README.md"})], usage=(90, 20)),  # 4 budget
        StubReply(tool_calls=[("write_file", {"path": "/project/out.txt", "content": "x"})],
                  usage=(10, 5)),                                                      # 5 waiting
    )
    first = await windows(stub_workspace)
    thread = first.session.thread_id
    assert await asyncio.wait_for(first.send("one"), 20) == "done"
    # 2: stopped part-way by the person
    first.input.setPlainText("two")
    click(qtbot, first.send_button)
    await wait_for(lambda: [m for m in first.transcript.messages() if m.role == "assistant"
                            and m.text.count("word") >= 10], 20, "streamed text")
    click(qtbot, first.stop_button)
    assert await asyncio.wait_for(first.wait_settled(), 20) == "aborted"
    assert await asyncio.wait_for(first.send("three"), 20) == "failed"
    assert await asyncio.wait_for(first.send("four"), 20) == "aborted"
    live_budget = first.transcript.notices("info")[-1].label.text()
    assert "total_tokens" in live_budget and "110" in live_budget and "100" in live_budget
    first.input.setPlainText("five")
    click(qtbot, first.send_button)
    await find_dialog("approval_dialog")
    live = _kinds(first)
    live_texts = [n.label.text() for n in first.transcript.notices()]
    await first.wait_closed()  # the app closes with the last run waiting

    second = await windows(stub_workspace)
    assert second.session.thread_id == thread
    await find_dialog("approval_dialog")  # the waiting run asks again
    kinds = _kinds(second)
    # the same endings, in the same places, as the person saw them live
    assert kinds == live, (kinds, live)
    texts = [n.label.text() for n in second.transcript.notices()]
    assert texts == live_texts
    # 1 done: no notice after its answer; 2 stopped: marked and said; 3 failed: the card with advice
    i = kinds.index("assistant:Hello there.")
    assert kinds[i + 1] == "user:two"
    assert kinds[kinds.index("user:two") + 2] == "notice:info" and "[stopped]" in kinds[kinds.index("user:two") + 1]
    assert texts[0] == "Stopped."
    errors = second.transcript.notices("error")
    assert len(errors) == 1 and "API key" in errors[0].advice.text()
    # 4 budget refused: field, spent and limit
    budget = [t for t in texts if "budget" in t]
    assert budget and "total_tokens" in budget[0] and "110" in budget[0] and "100" in budget[0]
    # 5 waiting for a decision
    assert second.transcript.notices("pending") and kinds[-2:] == ["tool:write_file:waiting", "notice:pending"]
    # the failed run was followed by others: its Retry is no longer offered
    assert errors[0].button is not None and not errors[0].button.isEnabled()
    if os.environ.get("WORKBENCH_SHOT"):
        second.grab().save(os.environ["WORKBENCH_SHOT"])
    dialog = visible_dialog("approval_dialog")
    if dialog is not None:
        dialog.reject()
    await asyncio.sleep(0.05)


async def test_g10_a_failed_last_run_keeps_retry_after_a_restart(
        windows: Any, stub_workspace: Path, stub_server: StubServer, qtbot: Any) -> None:
    stub_server.script(StubReply(text="fine", usage=(10, 5)), StubReply(status=401), StubReply(text="Now it works."))
    first = await windows(stub_workspace)
    assert await asyncio.wait_for(first.send("one"), 20) == "done"
    assert await asyncio.wait_for(first.send("two"), 20) == "failed"
    await first.wait_closed()
    second = await windows(stub_workspace)
    errors = second.transcript.notices("error")
    assert len(errors) == 1 and errors[0].button.isEnabled()
    click(qtbot, errors[0].button)
    assert await asyncio.wait_for(second.wait_settled(), 20) == "done"
    assert not errors[0].button.isEnabled()


async def test_old_retry_buttons_become_inactive_after_a_retry(
        windows: Any, stub_workspace: Path, stub_server: StubServer, qtbot: Any) -> None:
    """Issue 10, lower item: only the latest failed run's card offers Retry; a successful retry leaves none."""
    stub_server.script(StubReply(status=401), StubReply(status=401), StubReply(text="Now it works."))
    window = await windows(stub_workspace)
    assert await asyncio.wait_for(window.send("hello"), 20) == "failed"
    click(qtbot, window.transcript.notices("error")[-1].button)
    assert await asyncio.wait_for(window.wait_settled(), 20) == "failed"
    first, second = window.transcript.notices("error")
    assert not first.button.isEnabled() and second.button.isEnabled()
    click(qtbot, second.button)
    assert await asyncio.wait_for(window.wait_settled(), 20) == "done"
    assert not any(n.button.isEnabled() for n in window.transcript.notices("error"))
    assert window.transcript.messages()[-1].text == "Now it works."


class _Msg:
    def __init__(self, run: str | None) -> None:
        self.meta = {"run": run} if run is not None else {}


def test_g10_endings_are_placed_once_in_run_order_after_their_runs_messages() -> None:
    """G10, property: whatever runs, messages and endings a thread has (runs without messages after
    compression, messages without a run id, runs that never ended), every ending is placed exactly
    once, in the order the runs started, after its run's last message and before any later run's."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from workbench.engine.events import Event
    from workbench.ui.transcript_endings import RunEndings

    runs_st = st.lists(st.tuples(st.integers(0, 3), st.booleans(), st.booleans()), min_size=0, max_size=7)

    @settings(max_examples=300, deadline=None)
    @given(runs_st)
    def check(runs: list[tuple[int, bool, bool]]) -> None:
        endings = RunEndings()
        messages: list[_Msg] = []
        owner: list[int] = []  # index of the run each message belongs to (-1: none)
        for n, (count, ended, stray) in enumerate(runs):
            rid = f"r{n}"
            endings.add(Event("run_started", "t", rid, 0, {}))
            for _ in range(count):
                messages.append(_Msg(rid))
                owner.append(n)
            if stray:
                messages.append(_Msg(None))
                owner.append(-1)
            if ended:
                endings.add(Event("run_finished", "t", rid, 1, {"status": "done"}))
        placed = endings.place(messages)  # type: ignore[arg-type]
        flat = [(i, rid) for i in sorted(placed) for rid, _ in placed[i]]
        expected = [f"r{n}" for n, (_, ended, _) in enumerate(runs) if ended]
        assert [rid for _, rid in flat] == expected
        for i, rid in flat:
            n = int(rid[1:])
            assert all(o <= n for o in owner[:i] if o >= 0), (runs, placed)  # nothing later before it
            assert all(o > n for o in owner[i:] if o >= 0), (runs, placed)   # all of its own before it

    check()
