"""C6, C7, C9, V2, B3 (issue 12 items 3–5): the Context panel, the prompt inspector, Compact now and
"Compact and continue" at a budget hold.

Real windows with every dock panel, on a workspace whose model (``openai/main``) and summariser
(``compression.summarize.model: openai/cheap``) the loopback stub answers by model name, through
litellm. Figures are compared with what the engine sent (``context_measured``), what the store holds
(``Session.compression_records``, ``Session.inspect_call``) and what the stub received.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QContextMenuEvent
from PySide6.QtWidgets import QApplication, QMenu

from tests.stub_server import StubReply, StubServer
from tests.ui.helpers import click, distinct_colors, find_dialog, render_window, visible_dialog, wait_for
from tests.ui.pending import warmed
from tests.ui.test_accessibility import focus_out_of_order, unnamed
from workbench.ui.context_figures import compression_headline, lost_line, meter_text, strategy_lines
from workbench.ui.prompt_inspector import MARKER, BlocksModel, call_for

READ = ("read_file", {"path": "/project/big.txt"})
SUMMARY = "The user asked to read big.txt; it holds 6000 B's."


@pytest.fixture
def context_workspace(tmp_path: Path, stub_server: StubServer, monkeypatch: pytest.MonkeyPatch) -> Any:
    """``make(compression=…, extra=…)``: a workspace on the stub, ``big.txt`` and an AGENTS.md in it."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")

    def make(compression: str = "  max_input_tokens: 50000\n", extra: str = "") -> Path:
        ws = tmp_path / "ws"
        ws.mkdir(exist_ok=True)
        (ws / "big.txt").write_text("B" * 6000, encoding="utf-8")
        (ws / "AGENTS.md").write_text("Always answer in French.\n", encoding="utf-8")
        (ws / "workbench.yaml").write_text(
            f"model: openai/main\napi_base: {stub_server.url}\npermissions: {{default: allow}}\n{extra}"
            "compression:\n  preserve_recent: 2\n  summarize: {model: openai/cheap, preserve_recent: 2}\n"
            + compression, encoding="utf-8")
        return ws

    return make


async def open_window(windows: Any, workspace: Path) -> Any:
    from workbench.app import plug_panels

    window = await windows()
    plug_panels(window)  # every dock panel, as the app has them
    window.resize(1200, 800)
    await window.open_workspace(workspace)
    await warmed(window)
    return window


def context(window: Any) -> Any:
    dock = window.dock("Context")
    dock.show()
    dock.raise_()
    return dock.widget()


async def loaded(panel: Any) -> Any:
    """The panel has read the attached thread (it does so on the loop's next turn, after the transcript)."""
    await wait_for(lambda: not panel.loading, 5, "the Context panel to read the thread")
    return panel


def sent(stub: StubServer, model: str = "main") -> list[dict[str, Any]]:
    return [r for r in stub.requests if r["model"] == model]


async def settle(window: Any) -> None:
    await window._settle_panels()  # the file-reading panels finish inside the test's loop


# -- words and models (pure) ---------------------------------------------------------------------------------
def test_c9_words_say_the_level_and_the_losses() -> None:
    assert meter_text(1000, 50_000) == "1,000 of 50,000 tokens (2%)"
    assert meter_text(40_000, 50_000).endswith("— nearing the trigger")
    assert "over the trigger" in meter_text(50_000, 50_000)
    assert lost_line({"op": "truncate", "index": 5, "chars": 6000, "max": 2000}) == \
        "Tool result #5: cut to 2,000 of its 6,000 characters"
    assert lost_line({"op": "dedupe", "index": 2, "chars": 300}).startswith("Tool result #2: replaced by a note")
    assert lost_line({"op": "drop", "start": 1, "end": 9, "chars": 12000}) == \
        "Messages #1–#8: dropped with a notice (12,000 characters)"
    assert strategy_lines({"truncate": {"messages": 1, "tokens_saved": 900}}) == \
        ["Truncate: 1 older tool result shortened, ≈900 tokens saved"]


def test_v2_a_message_is_mapped_to_the_call_that_made_it() -> None:
    calls = [{"seq": 1, "run": "r1", "step": 1, "stored": 1, "status": "ok"},
             {"seq": 2, "run": "r1", "step": 2, "stored": 3, "status": "cut"},
             {"seq": 3, "run": "r1", "step": 2, "stored": 3, "status": "ok"},  # recovered: the same step again
             {"seq": 4, "run": "r2", "step": 1, "stored": 5, "status": "ok"}]
    assert call_for(calls, {"message": 1}) == 1
    assert call_for(calls, {"message": 3}) == 3 and call_for(calls, {"run": "r1", "step": 2}) == 3
    assert call_for(calls, {"run": "r2", "step": 1}) == 4
    assert call_for(calls, {"message": 2}) is None and call_for(calls, {}) is None


# -- the panel after runs, Compact now, thread switches ------------------------------------------------------
async def test_c9_the_panel_follows_a_run_and_compact_now_summarises_through_the_stub(
        windows: Any, context_workspace: Any, stub_server: StubServer, qtbot: Any, qtmodeltester: Any) -> None:
    ws = context_workspace()
    stub_server.script_for("main", StubReply(tool_calls=[READ], usage=(1200, 10)),
                           StubReply(text="Read it: 6000 B's.", usage=(2600, 10)),
                           StubReply(text="Going on.", usage=(700, 5)))
    stub_server.script_for("cheap", StubReply(text=SUMMARY, usage=(300, 20)))
    window = await open_window(windows, ws)
    measured: list[dict[str, Any]] = []
    window.bridge.sig_context_measured.connect(measured.append)
    panel = await loaded(context(window))
    assert "0 of 50,000 tokens" in panel.meter.format()  # a new thread: nothing sent yet
    assert await asyncio.wait_for(window.send("Read /project/big.txt"), 30) == "done"

    # after the run: the last request as the engine measured it, by source, in words
    last = measured[-1]
    assert len(measured) == 2 and last["trigger"] == 50_000
    assert panel.meter.format() == meter_text(last["tokens"], 50_000)
    assert panel.meter.accessibleName() == f"Next request: {meter_text(last['tokens'], 50_000)}"
    rows = dict(panel.source_rows)
    for key, name in (("system_prompt", "System prompt"), ("messages", "Messages"), ("tool_results", "Tool results"),
                      ("tool_schemas", "Tool schemas")):
        assert rows[name].startswith(f"≈{last['parts'][key]:,} ("), (name, rows)
    assert last["parts"]["tool_results"] >= 400  # what read_file returned of the file
    sections = window.session.prompt_sections()
    assert "Agent instructions" in rows and any(s["label"].startswith("section ") for s in sections)
    assert "Measured at the last model call" in panel.basis_label.text()
    assert [r["seq"] for r in panel.calls.rows] == [2, 1]  # newest first
    assert "No compression in this thread yet" in panel.compression_label.text()
    qtmodeltester.check(panel.calls)

    # Compact now: the summary through the stub, the stats and what was lost
    readers: list[str] = []  # G13: sizing the thread again after a compaction is never the GUI thread's work
    figures_of = window.session.context_figures
    window.session.context_figures = lambda: readers.append(threading.current_thread().name) or figures_of()
    click(qtbot, panel.compact_button)
    assert not panel.compact_button.isEnabled()  # one at a time
    await wait_for(lambda: "Compacted" in panel.compact_status.text(), 20, "the compaction")
    del window.session.context_figures
    assert readers and threading.main_thread().name not in readers, readers
    [record] = window.session.compression_records()
    assert record["trigger"] == "manual" and "summarize" in record["strategies"]
    [summary_request] = sent(stub_server, "cheap")
    assert "/project/big.txt" in json.dumps(summary_request["messages"])
    assert panel.compression_label.text() == compression_headline(record)
    assert f"{record['tokens_before']:,} → {record['tokens_after']:,} tokens" in panel.compression_label.text()
    assert panel.strategies_label.text().splitlines() == strategy_lines(record["strategies"])
    assert panel.lost.rows == [lost_line(op) for op in record["lost"]]
    assert "Messages #0–#2: replaced by a summary" in panel.lost.rows[0]
    assert panel.lost_view.isVisible()
    qtmodeltester.check(panel.lost)
    # between runs the figures are the stored thread's, smaller now
    assert "Estimated from the stored thread" in panel.basis_label.text()
    figures = window.session.context_figures()
    assert panel.meter.format() == meter_text(sum(figures["parts"].values()), 50_000)
    assert sum(figures["parts"].values()) < last["tokens"]

    # the next run sends the summary, and the panel measures it
    assert await asyncio.wait_for(window.send("Go on"), 30) == "done"
    assert SUMMARY in json.dumps(sent(stub_server)[-1]["messages"])
    assert panel.meter.format() == meter_text(measured[-1]["tokens"], 50_000)
    assert [r["seq"] for r in panel.calls.rows] == [4, 3, 2, 1]  # #3: the summary (V1: every model call)
    assert panel.calls.data(panel.calls.index(1, 0)) == "#3 · summary"

    # thread switch: the new thread's figures, then the first one's again
    thread = window.session.thread_id
    await window.new_thread()
    assert "No compression" in panel.compression_label.text() and panel.calls.rows == []  # at once
    assert not panel.inspect_button.isEnabled()
    await window.switch_thread(thread)
    await loaded(panel)
    assert panel.compression_label.text() == compression_headline(record)
    assert [r["seq"] for r in panel.calls.rows] == [4, 3, 2, 1]
    await settle(window)


async def test_c7_the_first_time_warning_is_shown_once_and_stays_until_dismissed(
        windows: Any, context_workspace: Any, stub_server: StubServer, qtbot: Any) -> None:
    ws = context_workspace("  max_input_tokens: 3000\n")
    stub_server.script_for("main", StubReply(text="One.", usage=(2800, 5)), StubReply(text="Two.", usage=(2900, 5)),
                           StubReply(text="Three.", usage=(2950, 5)))
    window = await open_window(windows, ws)
    warned: list[dict[str, Any]] = []
    window.bridge.sig_context_warned.connect(warned.append)
    panel = context(window)
    window.dock("Plan").raise_()  # another panel in front
    assert await asyncio.wait_for(window.send("First"), 30) == "done"
    assert not warned and panel.warning_box.isHidden()
    assert await asyncio.wait_for(window.send("Second"), 30) == "done"  # 2,800 reported + the new messages

    assert len(warned) == 1 and not panel.warning_box.isHidden()
    dock = window.dock("Context")
    assert window.rect().intersects(dock.geometry()), "the warning brings the Context panel to the front"
    assert "3,000 tokens" in panel.warning_text.text() and "Compact now" in panel.warning_text.text()
    assert panel.warning_title.text().startswith("⚠ Warning")  # words, not colour alone (G14)
    # it stays with its thread
    thread = window.session.thread_id
    await window.new_thread()
    assert panel.warning_box.isHidden()
    await window.switch_thread(thread)
    assert not panel.warning_box.isHidden()
    # dismissed with the keyboard
    window.activateWindow()
    panel.warning_dismiss.setFocus()
    qtbot.keyClick(panel.warning_dismiss, Qt.Key.Key_Space)
    assert panel.warning_box.isHidden()
    assert await asyncio.wait_for(window.send("Third"), 30) == "done"
    assert len(warned) == 1 and panel.warning_box.isHidden()  # once per thread
    assert window.session.compression_records() == []  # warned, never compacted (under the trigger)
    await settle(window)


# -- the prompt inspector ---------------------------------------------------------------------------------------
def _rows(dialog: Any) -> list[tuple[str, str, str]]:
    model = dialog.blocks
    out = []
    for r in range(model.rowCount()):
        if model.block_at(r) is None:
            continue
        out.append(tuple(str(model.data(model.index(r, c)) or "") for c in
                         (BlocksModel.SOURCE, BlocksModel.ROLE, BlocksModel.TOKENS)))
    return out


async def test_v2_the_inspector_shows_the_exact_blocks_the_diff_and_the_cache_prefix(
        windows: Any, context_workspace: Any, stub_server: StubServer, qtbot: Any, qtmodeltester: Any) -> None:
    ws = context_workspace()
    stub_server.script_for("main", StubReply(tool_calls=[READ], usage=(500, 10)),
                           StubReply(text="Lu.", usage=(2100, 4)),
                           StubReply(text="Encore.", usage={"prompt_tokens": 2200, "completion_tokens": 3,
                                                            "prompt_tokens_details": {"cached_tokens": 1024}}))
    window = await open_window(windows, ws)
    session = window.session
    assert await asyncio.wait_for(window.send("Read big.txt"), 30) == "done"
    assert await asyncio.wait_for(window.send("Again"), 30) == "done"

    # from the transcript: "Inspect prompt" on the answer just streamed (a live block: its run and step)
    block = window.transcript.messages()[-1]
    assert block.text == "Encore." and block.inspect_button is not None
    click(qtbot, block.inspect_button)
    dialog = await find_dialog("promptInspector")
    view = session.inspect_call(3)
    blocks = view["blocks"]
    assert dialog.windowTitle() == "Prompt of model call #3"
    # the exact blocks: as the session rebuilds them, and as the stub received them
    assert _rows(dialog) == [(b.label, b.role, f"{b.tokens:,}") for b in blocks]
    request = sent(stub_server)[2]
    system = "\n\n".join(b.text for b in blocks if b.role == "system")
    assert system == request["messages"][0]["content"]
    texts = [b.text.split("\n→ ")[0] for b in blocks if b.role not in ("system", "tools")]
    assert texts == [m.get("content") or "" for m in request["messages"][1:]]
    assert json.loads(blocks[-1].text) == request["tools"]
    for i, b in enumerate(blocks):  # each block's whole text as sent
        dialog.select_block(i)
        assert dialog.text.toPlainText() == b.text
        assert dialog.block_title.text().startswith(f"{i + 1}. {b.label} · {b.role}")
    # where the cacheable prefix ends: a row of its own, the blocks before it say so
    prefix = view["cache_prefix_end"]
    assert prefix > 0 and dialog.blocks.marker_row() == prefix
    assert dialog.blocks.data(dialog.blocks.index(prefix, 0)) == MARKER
    assert not dialog.blocks.flags(dialog.blocks.index(prefix, 0)) & Qt.ItemFlag.ItemIsSelectable
    heard = [dialog.blocks.data(dialog.blocks.index(dialog.blocks.row_of_block(i), BlocksModel.SOURCE),
                                Qt.ItemDataRole.AccessibleTextRole) for i in range(len(blocks))]
    assert [h.endswith(", in the cacheable prefix") for h in heard] == [i < prefix for i in range(len(blocks))]
    # the diff against call #2: added and changed blocks marked in words and tinted
    diff = view["diff"]
    assert view["previous"] == 2 and diff["added"]
    marks = {b.label: dialog.blocks.data(dialog.blocks.index(dialog.blocks.row_of_block(i), BlocksModel.CHANGE))
             for i, b in enumerate(blocks)}
    assert {k for k, v in marks.items() if v == "added"} == set(diff["added"])
    assert {k for k, v in marks.items() if v == "changed"} == set(diff["changed"])
    added_row = dialog.blocks.row_of_block(next(i for i, b in enumerate(blocks) if b.label == diff["added"][0]))
    assert dialog.blocks.data(dialog.blocks.index(added_row, 0), Qt.ItemDataRole.BackgroundRole) is not None
    assert dialog.diff_label.text().startswith(f"Since call #2: {len(diff['added'])} added")
    # usage and cost
    assert "2,200 tokens in (1,024 cached) · 3 out" in dialog.usage_label.text()
    assert "not priced" in dialog.usage_label.text()
    qtmodeltester.check(dialog.blocks)
    # G14 and G7: named controls, Tab in layout order; Enter does nothing, Esc closes
    missing, order = unnamed([dialog]), focus_out_of_order(dialog)
    assert not missing, missing
    assert not order, order
    dialog.table.setFocus()
    qtbot.keyClick(dialog.table, Qt.Key.Key_Return)
    await asyncio.sleep(0.05)
    assert visible_dialog("promptInspector") is dialog
    click(qtbot, dialog.previous_button)
    assert dialog.windowTitle() == "Prompt of model call #2" and dialog.next_button.isEnabled()
    qtbot.keyClick(dialog.table, Qt.Key.Key_Escape)
    await wait_for(lambda: visible_dialog("promptInspector") is None, 5, "Esc to close the inspector")

    # after a reload the transcript's blocks name their stored message: "Lu." is the answer of call #2
    thread = session.thread_id
    await window.new_thread()
    await window.switch_thread(thread)
    lu = next(m for m in window.transcript.messages() if m.text == "Lu.")
    assert lu.call_ref == {"message": 3}
    click(qtbot, lu.inspect_button)
    dialog = await find_dialog("promptInspector")
    assert dialog.windowTitle() == "Prompt of model call #2"
    dialog.close()
    await wait_for(lambda: visible_dialog("promptInspector") is None, 5, "the inspector to close")
    # a tool call's row names the call that asked for it, from its right-click menu
    row = window.transcript.tool_rows()[0]
    assert row.call_ref == {"message": 1}
    QApplication.sendEvent(row, QContextMenuEvent(QContextMenuEvent.Reason.Keyboard, QPoint(10, 10)))
    menu = await wait_for(lambda: next((m for m in row.findChildren(QMenu, "tool_call_menu") if m.isVisible()), None),
                          5, "the tool call's menu")
    [action] = menu.actions()
    action.trigger()
    menu.close()
    dialog = await find_dialog("promptInspector")
    assert dialog.windowTitle() == "Prompt of model call #1"
    dialog.close()
    await wait_for(lambda: visible_dialog("promptInspector") is None, 5, "the inspector to close")

    # from the Context panel: the list of calls, Enter on a row
    panel = context(window)
    panel.select_call(1)
    window.activateWindow()
    panel.calls_view.setFocus()
    qtbot.keyClick(panel.calls_view, Qt.Key.Key_Return)
    dialog = await find_dialog("promptInspector")
    assert dialog.windowTitle() == "Prompt of model call #1"
    assert dialog.diff_label.text() == "The thread's first call: nothing to compare with."
    assert not dialog.previous_button.isEnabled()
    dialog.close()
    await settle(window)


# -- Compact and continue at a budget hold ---------------------------------------------------------------------
async def test_b3_compact_and_continue_compacts_then_answers_the_hold(
        windows: Any, context_workspace: Any, stub_server: StubServer, qtbot: Any) -> None:
    ws = context_workspace(extra="budget:\n  - {scope: run, limit: {total_tokens: 1500}, interrupt: true}\n")
    stub_server.script_for("main", StubReply(text="Hello.", usage=(500, 10)),
                           StubReply(tool_calls=[READ], usage=(1000, 10)),
                           StubReply(tool_calls=[("ls", {"path": "/project"})], usage=(1400, 10)),
                           StubReply(text="Done, with less to read.", usage=(300, 5)))
    stub_server.script_for("cheap", StubReply(text=SUMMARY))
    window = await open_window(windows, ws)
    assert await asyncio.wait_for(window.send("Hi"), 30) == "done"
    window.input.setPlainText("Read big.txt, then list the project")
    window.on_send()
    dialog = await find_dialog("budgetHoldDialog", 30)  # 2,420 of 1,500 tokens: held before the ls call runs
    button = dialog.compact_button
    assert button is not None and button.text() == "Compact and continue"
    assert not button.autoDefault() and not button.isDefault()
    missing, order = unnamed([dialog]), focus_out_of_order(dialog)
    assert not missing, missing
    assert not order, order
    # G7: Enter decides nothing
    dialog.activateWindow()
    qtbot.keyClick(dialog, Qt.Key.Key_Return)
    await asyncio.sleep(0.05)
    assert visible_dialog("budgetHoldDialog") is dialog and window.session.compression_records() == []
    # Space on the focused button: compacts (the run is suspended: at once), then continues
    button.setFocus()
    qtbot.keyClick(button, Qt.Key.Key_Space)
    assert await asyncio.wait_for(window.wait_settled(), 30) == "done"
    [record] = window.session.compression_records()
    assert record["trigger"] == "manual" and "summarize" in record["strategies"]
    assert len(sent(stub_server, "cheap")) == 1
    last = json.dumps(sent(stub_server)[-1]["messages"])
    assert SUMMARY in last and "B" * 1000 not in last  # the continued run sent the compacted view
    assert window.session.messages[-1].content == "Done, with less to read."
    assert any(m.role == "tool" and m.name == "ls" for m in window.session.messages)  # the held call ran
    panel = context(window)
    assert panel.compression_label.text() == compression_headline(record)
    await settle(window)


async def test_b3_compact_and_continue_stays_open_when_there_is_nothing_to_compact(qtbot: Any) -> None:
    from tests.ui.test_budget_dialog import hold
    from workbench.ui.budget_dialog import ask_budget_hold

    calls: list[int] = []

    async def nothing() -> None:
        calls.append(1)
        return None

    task = asyncio.ensure_future(ask_budget_hold(hold(), compact=nothing))
    dialog = await find_dialog("budgetHoldDialog")
    click(qtbot, dialog.compact_button)
    await wait_for(lambda: "Nothing to compact" in dialog.compact_label.text(), 5, "the note")
    assert calls == [1] and visible_dialog("budgetHoldDialog") is dialog and dialog.compact_button.isEnabled()
    qtbot.keyClick(dialog, Qt.Key.Key_Escape)  # closing still fails closed
    got = await asyncio.wait_for(task, 5)
    assert got["decision"] == "reject"


# -- pictures for the docs ----------------------------------------------------------------------------------------
async def test_c9_render_the_context_panel_and_the_inspector(
        windows: Any, context_workspace: Any, stub_server: StubServer, qtbot: Any, tmp_path: Path,
        light_style: Any) -> None:
    """The panel and the inspector as the person sees them (``CONTEXT_PNG=docs/context.png``,
    ``INSPECTOR_PNG=docs/inspector.png`` refresh the docs' pictures)."""
    ws = context_workspace("  max_input_tokens: 6000\n")
    (ws / "notes.md").write_text("# Notes\n" + "- a point worth keeping\n" * 80, encoding="utf-8")
    stub_server.script_for("main", StubReply(tool_calls=[READ], usage=(1900, 12)),
                           StubReply(text="`big.txt` holds **6,000** B's and nothing else.", usage=(5450, 14)),
                           StubReply(tool_calls=[("read_file", {"path": "/project/notes.md"})], usage=(5600, 9)),
                           StubReply(text="The notes list 80 points worth keeping.", usage=(2600, 11)))
    stub_server.script_for("cheap", StubReply(text=SUMMARY))
    window = await open_window(windows, ws)
    panel = context(window)
    assert await asyncio.wait_for(window.send("What is in big.txt?"), 30) == "done"
    # the next request nears the trigger (the warning), the one after goes over it (an automatic compaction)
    assert await asyncio.wait_for(window.send("And the notes?"), 30) == "done"
    assert not panel.warning_box.isHidden()
    [record] = window.session.compression_records()
    assert record["trigger"] == "auto" and panel.compression_label.text() == compression_headline(record)
    assert [c["kind"] for c in window.session.prompt_calls()] == ["step", "step", "step", "summary", "step"]
    panel.select_call(5)  # #4 is the summary the automatic compaction asked for, just before it
    await asyncio.sleep(0.1)
    image = render_window(window, os.environ.get("CONTEXT_PNG") or str(tmp_path / "context.png"))
    assert distinct_colors(image) > 8
    panel.inspect_selected()
    dialog = await find_dialog("promptInspector")
    dialog.select_block(next(i for i, b in enumerate(window.session.inspect_call(5)["blocks"])
                             if b.label.startswith("compression summary")))
    await asyncio.sleep(0.1)
    shot = dialog.grab()
    assert shot.save(os.environ.get("INSPECTOR_PNG") or str(tmp_path / "inspector.png"), "PNG")
    dialog.close()
    await settle(window)


