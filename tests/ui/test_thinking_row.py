"""G1 (issue 10 item 11): the transcript shows "Thinking…" while the model has not answered yet, and the
status bar ticks the run's time, tokens and cost while it runs.

The engine emits no event when the model layer retries, so these tests cover "Thinking…" only (a retry
shows as a longer wait; ``ThinkingRow.set_retry`` is tested on its own).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt

from tests.stub_server import StubReply, StubServer
from tests.ui.helpers import click, wait_for


def _last_widget(window: Any) -> Any:
    """The lowest visible widget of the transcript's content."""
    lay = window.transcript._content.layout()
    widgets = [lay.itemAt(i).widget() for i in range(lay.count())]
    shown = [w for w in widgets if w is not None and not w.isHidden()]
    return shown[-1]


async def test_g1_thinking_row_until_the_first_token(windows: Any, stub_workspace: Path, stub_server: StubServer,
                                                     qtbot: Any, tmp_path: Path) -> None:
    stub_server.script(StubReply(text="Hello **there**.", delay=1.5, usage=(40, 5)))
    window = await windows(stub_workspace)
    row = window.transcript.thinking_row
    assert not row.active
    window.input.setPlainText("Say hello")
    click(qtbot, window.send_button)
    await wait_for(lambda: row.active, timeout=10, what="the thinking row")
    assert row.text.startswith("⋯ Thinking…")
    assert _last_widget(window) is row, "the thinking row is the transcript's last row"
    assert row not in window.transcript.blocks()  # not one of the thread's blocks
    await wait_for(lambda: "1 s" in row.text, timeout=5, what="the elapsed time")
    await asyncio.sleep(0.05)
    window.grab().save(str(tmp_path / "thinking.png"))
    # the status bar ticks while the run is in flight
    ticker = window.run_ticker
    assert ticker.isVisible() and ticker.text().startswith("This run ")
    assert await asyncio.wait_for(window.wait_settled(), 20) == "done"
    assert not row.active, "the thinking row disappears once the answer arrived"
    assert window.transcript.messages()[-1].text == "Hello **there**."
    assert not ticker.isVisible(), "the ticker is hidden once the run ended"


async def test_g1_thinking_row_leaves_at_a_tool_call_and_returns_for_the_next_step(
        windows: Any, stub_workspace: Path, stub_server: StubServer, qtbot: Any) -> None:
    stub_server.script(StubReply(tool_calls=[("read_file", {"path": "/project/README.md"})], delay=0.6),
                       StubReply(text="It is a stub project.", delay=1.0))
    window = await windows(stub_workspace)
    row = window.transcript.thinking_row
    window.input.setPlainText("Read the README")
    click(qtbot, window.send_button)
    await wait_for(lambda: row.active, timeout=10, what="thinking before the tool call")
    await wait_for(lambda: window.transcript.tool_rows(), timeout=10, what="the tool call")
    await wait_for(lambda: row.active, timeout=10, what="thinking again before the answer")
    assert _last_widget(window) is row, "below the tool call"
    assert await asyncio.wait_for(window.wait_settled(), 20) == "done"
    assert not row.active


async def test_g1_ticker_estimates_streamed_tokens_then_shows_the_counted_ones(
        windows: Any, stub_workspace: Path, stub_server: StubServer, qtbot: Any) -> None:
    stub_server.script(StubReply(text="word " * 200, chunks=100, chunk_delay=0.03, usage=(50, 321)))
    window = await windows(stub_workspace)
    ticker = window.run_ticker
    seen: list[str] = []
    ticker.setText = _recording(ticker.setText, seen)  # type: ignore[method-assign]
    window.input.setPlainText("Talk")
    click(qtbot, window.send_button)
    await wait_for(lambda: any("~" in t for t in seen), timeout=15, what="an estimate while streaming")
    assert await asyncio.wait_for(window.wait_settled(), 20) == "done"
    estimates = [int(t.split("~")[1].split(" ")[0].replace(",", "")) for t in seen if "~" in t]
    assert estimates == sorted(estimates) and estimates[-1] > 0, "the estimate grows as text streams"
    assert not ticker.isVisible()
    assert "321 out" in window.status.usage_label.text()  # the counted figure replaces the estimate


def _recording(original: Any, seen: list[str]) -> Any:
    def set_text(text: str) -> None:
        seen.append(text)
        original(text)

    return set_text


async def test_g1_thinking_row_is_gone_after_a_failed_run_and_on_reload(
        windows: Any, stub_workspace: Path, stub_server: StubServer, qtbot: Any) -> None:
    stub_server.script(StubReply(status=401, delay=0.5))
    window = await windows(stub_workspace)
    row = window.transcript.thinking_row
    window.input.setPlainText("Fail")
    click(qtbot, window.send_button)
    await wait_for(lambda: row.active, timeout=10, what="the thinking row")
    assert await asyncio.wait_for(window.wait_settled(), 20) == "failed"
    assert not row.active
    assert window.transcript.notices("error")
    row.start()
    window.bridge.reload()  # the thread is shown again from the store: no stale "Thinking…"
    assert not row.active


def test_g1_retry_countdown(qtbot: Any) -> None:
    from workbench.ui.run_activity import ThinkingRow

    row = ThinkingRow()
    qtbot.addWidget(row)
    row.start()
    assert row.text == "⋯ Thinking…"
    row.set_retry(3)
    assert row.text == "⋯ Retrying in 3 s…"
    row.stop()
    assert not row.active


async def test_b2_d8_while_the_run_waits_for_a_background_task_the_row_says_so_not_thinking(
        windows: Any, tmp_path: Path, stub_server: StubServer, qtbot: Any, monkeypatch: Any) -> None:
    """B2, D8: a hard run limit, a background task holding everything left: before the parent's next model
    call the run waits for the task, and the row says why ("Waiting for background task … hard limit"),
    not "Thinking…"; once the task settled the call goes ahead and the row goes back to "Thinking…"."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "workbench.yaml").write_text(
        f"model: openai/parent\napi_base: {stub_server.url}\npermissions: {{default: allow}}\n"
        "budget:\n  - {scope: run, limit: {total_tokens: 1000}}\n"
        "subagents:\n  async: true\n  max_wait_seconds: 20\n  agents:\n"
        "    - {name: a1, description: Reads., model: openai/a1}\n", encoding="utf-8")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    stub_server.script_for("parent", StubReply(tool_calls=[("delegate_to_a1", {"task": "job", "background": True})],
                                               usage=(10, 5)),
                           StubReply(text="all done", usage=(10, 5), delay=1.5))
    stub_server.script_for("a1", StubReply(tool_calls=[("ls", {"path": "/"})], usage=(100, 100)),
                           StubReply(text="findings", usage=(50, 50), delay=2.0))
    window = await windows(ws)
    row = window.transcript.thinking_row
    window.input.setPlainText("go")
    click(qtbot, window.send_button)
    await wait_for(lambda: row.text.startswith("⋯ Waiting for background task"), timeout=15, what="the wait")
    assert row.active and "hard limit" in row.text and "a1:" in row.text
    assert row.label.textFormat() == Qt.TextFormat.PlainText
    window.grab().save(os.environ.get("WAITING_PNG") or str(tmp_path / "waiting.png"))
    await wait_for(lambda: row.text.startswith("⋯ Thinking…"), timeout=15, what="thinking once the task settled")
    assert await asyncio.wait_for(window.wait_settled(), 20) == "done"
    assert not row.active
