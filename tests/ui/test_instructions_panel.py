"""G2 Instructions dock (issue 4 item 6, I1–I5): the AGENTS.md files in order with their fate and
tokens; editing in place, saving through the agent's backend and rules (the next run's prompt carries
the new text; a denied path cannot be saved and says why), a live token warning, a change on disk
while editing, and the agent's own edit shown as a diff. The item model passes qtmodeltester."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QTextCursor

from tests.ui.helpers import click, wait_for
from workbench.engine.events import Event
from workbench.engine.models.scripted import ScriptedModel, reply, tool_reply
from workbench.session import Session
from workbench.ui import qt_async
from workbench.ui.instructions_model import FATE, TOKENS, DocumentsModel
from workbench.ui.instructions_panel import InstructionsPanel, unified_diff
from workbench.ui.markdown_highlighter import MarkdownHighlighter

PROJECT = "/project/AGENTS.md"
USER = "/user/AGENTS.md"
ORIGINAL = "# Project rules\n\nOld rule: write tests first.\n"


def make_workspace(tmp_path: Path, extra_yaml: str = "") -> Path:
    ws, user = tmp_path / "ws", tmp_path / "user"
    ws.mkdir()
    user.mkdir()
    (ws / "AGENTS.md").write_text(ORIGINAL, encoding="utf-8")
    (ws / "workbench.yaml").write_text(f"mounts:\n  /user: {{host: {user}}}\n" + extra_yaml, encoding="utf-8")
    return ws


@pytest.fixture
def panel(qtbot: Any) -> InstructionsPanel:
    p = InstructionsPanel(start=qt_async.start)
    p.editor.disk_timer.setInterval(60_000)  # tests call check_disk() themselves unless they say otherwise
    qtbot.addWidget(p)
    return p


async def opened(panel: InstructionsPanel, session: Session) -> None:
    panel.set_session(session)
    await panel.tasks.wait_idle()
    assert panel.editor.open_path == PROJECT


async def test_files_in_order_before_any_run_then_with_their_fate(tmp_path: Path, panel: InstructionsPanel) -> None:
    session = await Session.open(make_workspace(tmp_path), model=ScriptedModel([reply("ok")]))
    try:
        await opened(panel, session)
        m = panel.model
        assert [d.path for d in m.docs] == [USER, PROJECT]  # config order, before any run
        assert m.data(m.index(0, FATE), Qt.ItemDataRole.DisplayRole) == "not read yet (missing)"
        assert m.data(m.index(1, FATE), Qt.ItemDataRole.DisplayRole) == "not read yet"
        assert m.data(m.index(1, TOKENS), Qt.ItemDataRole.DisplayRole).endswith(" / 4,000")
        assert "Not read by a run yet" in panel.section_label.text()
        assert panel.editor.text_edit.toPlainText() == ORIGINAL  # the project's file opens by default

        unsubscribe = session.subscribe(panel.handle_event, replay=False)
        await session.run("hi")
        unsubscribe()
        assert m.data(m.index(0, FATE), Qt.ItemDataRole.DisplayRole) == "skipped (missing)"
        assert m.data(m.index(1, FATE), Qt.ItemDataRole.DisplayRole) == "shown"
        assert m.docs[1].tokens and m.docs[1].tokens > 0
        assert "Last run: " in panel.section_label.text() and "tokens of instructions shown" in panel.section_label.text()

        # A reopened panel takes the fates from the store's newest report.
        again = InstructionsPanel(start=qt_async.start)
        again.set_session(session)
        assert [d.fate for d in again.model.docs] == ["skipped", "shown"]
        await again.tasks.wait_idle()
        again.deleteLater()
    finally:
        await session.close()


async def test_edit_save_and_the_next_run_sees_the_new_text(tmp_path: Path, panel: InstructionsPanel,
                                                            qtbot: Any) -> None:
    model = ScriptedModel([reply("first"), reply("second")])
    ws = make_workspace(tmp_path)
    session = await Session.open(ws, model=model)
    try:
        await session.run("before")
        assert "Old rule" in model.requests[-1].system
        await opened(panel, session)
        assert isinstance(panel.editor.highlighter, MarkdownHighlighter)
        assert panel.editor.text_edit.font().fixedPitch() or panel.editor.text_edit.property("role") == "code"
        assert not panel.editor.save_button.isEnabled() and not panel.editor.dirty
        panel.editor.text_edit.moveCursor(QTextCursor.MoveOperation.End)
        qtbot.keyClicks(panel.editor.text_edit, "New rule: keep answers short.")
        qtbot.keyClick(panel.editor.text_edit, Qt.Key.Key_Return)
        assert panel.editor.dirty and panel.editor.save_button.isEnabled() and panel.editor.revert_button.isEnabled()
        click(qtbot, panel.editor.save_button)
        await panel.tasks.wait_idle()
        expected = ORIGINAL + "New rule: keep answers short.\n"
        assert (ws / "AGENTS.md").read_text() == expected
        assert not panel.editor.dirty and not panel.editor.save_button.isEnabled()
        assert "Saved /project/AGENTS.md" in panel.editor.message_label.text()

        await session.run("after")
        system = model.requests[-1].system
        assert f"## {PROJECT}\n" in system and "New rule: keep answers short." in system
        model.assert_all_used()
    finally:
        await session.close()


async def test_revert_drops_the_edits(tmp_path: Path, panel: InstructionsPanel, qtbot: Any) -> None:
    session = await Session.open(make_workspace(tmp_path), model=ScriptedModel([]))
    try:
        await opened(panel, session)
        panel.editor.text_edit.setPlainText("scribbles")
        click(qtbot, panel.editor.revert_button)
        await panel.tasks.wait_idle()
        assert panel.editor.text_edit.toPlainText() == ORIGINAL and not panel.editor.dirty
    finally:
        await session.close()


async def test_a_denied_path_cannot_be_saved_and_says_why(tmp_path: Path, panel: InstructionsPanel) -> None:
    ws = make_workspace(tmp_path, 'permissions:\n  rules:\n    - {allow: read, path: "/**"}\n'
                                  '    - {deny: write, path: "/project/AGENTS.md"}\n')
    session = await Session.open(ws, model=ScriptedModel([]))
    try:
        await opened(panel, session)
        assert panel.editor.can_save[0] is False and "Denied" in panel.editor.can_save[1]
        assert not panel.editor.save_button.isEnabled()
        assert "deny write /project/AGENTS.md" in panel.editor.save_button.toolTip()
        assert not panel.editor.verdict_label.isHidden()
        assert "You cannot save this file" in panel.editor.verdict_label.text()
        assert "deny write /project/AGENTS.md" in panel.editor.verdict_label.text()
        assert panel.editor.text_edit.isReadOnly()

        # Even if a save is attempted (a stale button, a script), the session refuses it: nothing is written.
        panel.editor.text_edit.setPlainText("Sneaky rewrite.\n")
        assert await panel.editor.save() is False
        assert (ws / "AGENTS.md").read_text() == ORIGINAL
        assert "Not saved" in panel.editor.message_label.text()
        assert "deny write /project/AGENTS.md" in panel.editor.message_label.text()
        assert panel.editor.message_label.property("status") == "error"
    finally:
        await session.close()


async def test_a_read_only_mount_cannot_be_saved(tmp_path: Path, panel: InstructionsPanel) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "AGENTS.md").write_text("# Shared docs rules\n", encoding="utf-8")
    ws = make_workspace(tmp_path, f"  /docs: {{host: {docs}, readonly: true}}\n"
                                  "memory: {paths: [/project/AGENTS.md, /docs/AGENTS.md]}\n")
    session = await Session.open(ws, model=ScriptedModel([]))
    try:
        panel.set_session(session)
        await panel.tasks.wait_idle()
        assert panel.editor.open_path == "/docs/AGENTS.md"  # the last configured file that exists
        assert not panel.editor.save_button.isEnabled() and "read-only" in panel.editor.verdict_label.text()
        assert await panel.editor.save() is False
        assert (docs / "AGENTS.md").read_text() == "# Shared docs rules\n"
        # Choosing the project's file in the list opens it, savable.
        panel.view.setCurrentIndex(panel.model.index(panel.model.row_of(PROJECT), 0))
        await panel.tasks.wait_idle()
        assert panel.editor.open_path == PROJECT and panel.editor.can_save == (True, "")
        assert panel.editor.verdict_label.isHidden()
    finally:
        await session.close()


async def test_token_warning_past_max_file_tokens(tmp_path: Path, panel: InstructionsPanel, qtbot: Any) -> None:
    ws = make_workspace(tmp_path, "memory: {max_file_tokens: 40}\n")
    session = await Session.open(ws, model=ScriptedModel([]))
    try:
        await opened(panel, session)
        assert not panel.editor.token_warning and panel.editor.token_label.text().endswith(" / 40 tokens")
        qtbot.keyClicks(panel.editor.text_edit, "many more words to push this file past its limit " * 4)
        assert not panel.editor.token_warning  # debounced: not on every keystroke
        await wait_for(lambda: panel.editor.token_warning, 5.0, "the token warning")
        assert "over max_file_tokens (40)" in panel.editor.token_label.text()
        panel.editor.text_edit.setPlainText("short")
        await wait_for(lambda: not panel.editor.token_warning, 5.0, "the warning to clear")
    finally:
        await session.close()


async def test_a_change_on_disk_while_editing_shows_the_conflict_bar(tmp_path: Path, panel: InstructionsPanel) -> None:
    ws = make_workspace(tmp_path)
    session = await Session.open(ws, model=ScriptedModel([]))
    try:
        await opened(panel, session)
        assert await panel.editor.check_disk() == "unchanged"
        # Not edited: a change on disk reloads silently.
        (ws / "AGENTS.md").write_text("# Changed outside\n", encoding="utf-8")
        assert await panel.editor.check_disk() == "reloaded"
        assert panel.editor.text_edit.toPlainText() == "# Changed outside\n" and panel.editor.conflict_bar.isHidden()

        # Edited: the bar asks; Keep mine keeps the edits (and Save would replace the file).
        panel.editor.text_edit.setPlainText("# Mine\n")
        (ws / "AGENTS.md").write_text("# Theirs\n", encoding="utf-8")
        assert await panel.editor.check_disk() == "conflict"
        assert not panel.editor.conflict_bar.isHidden()
        assert panel.editor.conflict_label.text().startswith("AGENTS.md changed on disk")
        assert await panel.editor.check_disk() == "unchanged"  # asked once per change
        panel.editor.conflict_keep.click()
        assert panel.editor.conflict_bar.isHidden()
        assert panel.editor.text_edit.toPlainText() == "# Mine\n" and panel.editor.dirty

        # Edited again and changed again: Reload takes the disk's version.
        (ws / "AGENTS.md").write_text("# Theirs, again\n", encoding="utf-8")
        assert await panel.editor.check_disk() == "conflict"
        panel.editor.conflict_reload.click()
        assert panel.editor.text_edit.toPlainText() == "# Theirs, again\n" and not panel.editor.dirty
        assert panel.editor.conflict_bar.isHidden()
    finally:
        await session.close()


async def test_the_timer_notices_a_change_on_disk(tmp_path: Path, panel: InstructionsPanel) -> None:
    ws = make_workspace(tmp_path)
    session = await Session.open(ws, model=ScriptedModel([]))
    try:
        await opened(panel, session)
        assert panel.editor.disk_timer.isActive()
        panel.show()  # a hidden panel (its dock closed) does not read the disk
        await panel.tasks.wait_idle()
        panel.editor.disk_timer.setInterval(30)
        panel.editor.text_edit.setPlainText("# Mine\n")
        (ws / "AGENTS.md").write_text("# Theirs\n", encoding="utf-8")
        await wait_for(lambda: not panel.editor.conflict_bar.isHidden(), 5.0, "the conflict bar")
        panel.editor.disk_timer.stop()
        await panel.tasks.wait_idle()
    finally:
        await session.close()


async def test_the_agents_edit_shows_as_a_diff(tmp_path: Path, panel: InstructionsPanel) -> None:
    ws = make_workspace(tmp_path, 'permissions:\n  rules:\n    - {allow: read, path: "/**"}\n'
                                  '    - {allow: write, path: "/project/**"}\n')
    model = ScriptedModel([
        tool_reply(("edit_file", {"path": PROJECT, "old_string": "Old rule: write tests first.",
                                  "new_string": "New rule: write tests first, then the code."})),
        tool_reply(("write_file", {"path": "/project/notes.md", "content": "not an instruction file\n"})),
        reply("Edited AGENTS.md."),
    ])
    session = await Session.open(ws, model=model)
    try:
        await opened(panel, session)
        assert panel.diff_view.isHidden()
        unsubscribe = session.subscribe(panel.handle_event, replay=False)
        result = await session.run("Improve AGENTS.md")
        unsubscribe()
        assert result.status == "done"
        await panel.tasks.wait_idle()
        diff = panel.last_agent_diff
        assert "-Old rule: write tests first.\n" in diff and "+New rule: write tests first, then the code.\n" in diff
        assert diff.startswith("--- /project/AGENTS.md (before)\n+++ /project/AGENTS.md (after)\n")
        assert not panel.diff_view.isHidden() and panel.diff_view.toPlainText() == diff
        assert panel.agent_label.text().startswith(PROJECT)
        # The editor was not edited: it follows the agent's change silently.
        assert "New rule" in panel.editor.text_edit.toPlainText() and not panel.editor.dirty
    finally:
        await session.close()


async def test_rebuilt_rows_never_switch_the_open_file(tmp_path: Path, panel: InstructionsPanel) -> None:
    session = await Session.open(make_workspace(tmp_path), model=ScriptedModel([]))
    try:
        await opened(panel, session)
        panel.editor.text_edit.setPlainText("# Mine\n")
        # A report naming a file the config does not list rebuilds the rows.
        panel.handle_event(Event("documents_reported", session.thread_id, "r", 1, {"source": "instructions", "documents": [
            {"path": "/elsewhere/AGENTS.md", "fate": "shown", "tokens": 3, "shown_tokens": 3, "reason": ""}]}))
        panel.show()
        panel.view.setFocus()
        await asyncio.sleep(0.05)
        await panel.tasks.wait_idle()
        assert panel.editor.open_path == PROJECT and panel.editor.text_edit.toPlainText() == "# Mine\n"
        assert panel.view.currentIndex().row() == panel.model.row_of(PROJECT)
        assert panel.editor.message_label.property("status") != "error"
    finally:
        await session.close()


async def test_switching_threads_keeps_the_edits_and_takes_that_threads_fates(tmp_path: Path,
                                                                              panel: InstructionsPanel) -> None:
    session = await Session.open(make_workspace(tmp_path), model=ScriptedModel([reply("ok")]))
    try:
        await session.run("hi")
        await opened(panel, session)
        assert [d.fate for d in panel.model.docs] == ["skipped", "shown"]
        panel.editor.text_edit.setPlainText("# Unsaved\n")
        session.new_thread()
        panel.set_session(session)  # what the window does after a thread switch
        await panel.tasks.wait_idle()
        assert [d.fate for d in panel.model.docs] == ["", ""]  # this thread has had no run
        assert panel.editor.open_path == PROJECT
        assert panel.editor.text_edit.toPlainText() == "# Unsaved\n" and panel.editor.dirty
    finally:
        await session.close()


async def test_markdown_highlighting(qapp: Any) -> None:
    from PySide6.QtGui import QFont, QTextCharFormat, QTextDocument

    doc = QTextDocument()
    doc.setPlainText("---\nname: x\n---\n# Title\nSome *soft* and **strong** text with `code`.\n- item\n"
                     "[link](https://example.com)\n```\n# not a heading\n```\nafter_snake_case")
    highlighter = MarkdownHighlighter(doc, dark=False)

    def formats(block: int) -> list[tuple[int, int, Any]]:
        return [(r.start, r.length, QTextCharFormat(r.format)) for r in doc.findBlockByNumber(block).layout().formats()]

    def bold(f: QTextCharFormat) -> bool:
        return int(f.fontWeight()) >= QFont.Weight.Bold.value

    assert highlighter.document() is doc
    heading = formats(3)
    assert any(bold(f) and start == 0 for start, _n, f in heading)
    line = doc.findBlockByNumber(4).text()
    spans = {line[s:s + n]: f for s, n, f in formats(4)}
    assert spans["*soft*"].fontItalic() and bold(spans["**strong**"])
    assert spans["`code`"].fontFixedPitch()
    assert formats(5)[0][:2] == (0, 1)  # the list marker
    assert any(f.fontUnderline() for _s, _n, f in formats(6))  # the link text
    fenced = formats(8)
    assert fenced and not any(bold(f) for _s, _n, f in fenced)  # code, not a heading
    assert formats(10) == []  # snake_case is not emphasis
    assert formats(1)  # the frontmatter is coloured


def test_unified_diff_of_a_new_file() -> None:
    assert unified_diff(None, "a\n", PROJECT).startswith("--- /dev/null\n+++ /project/AGENTS.md (after)\n")
    assert unified_diff("same\n", "same\n", PROJECT) == ""


async def test_model_passes_qtmodeltester(qtmodeltester: Any) -> None:
    model = DocumentsModel()
    model.set_paths([USER, PROJECT], 100)
    qtmodeltester.check(model)
    model.apply_report([
        {"path": USER, "fate": "refused", "tokens": 0, "shown_tokens": 0, "reason": "read-only"},
        {"path": PROJECT, "fate": "cut", "tokens": 150, "shown_tokens": 100, "reason": "over max_file_tokens (100)"},
        {"path": "/other/AGENTS.md", "fate": "left_out", "tokens": 5, "reason": "the section is full"},
    ])
    model.set_disk(PROJECT, "text " * 200, "present")
    assert [d.path for d in model.docs] == [USER, PROJECT, "/other/AGENTS.md"]
    assert model.data(model.index(1, TOKENS), Qt.ItemDataRole.ForegroundRole) is not None  # over the limit
    qtmodeltester.check(model, force_py=True)
    await asyncio.sleep(0)


def _stream_text(path: Path, mb: int) -> None:
    line = "Always write the tests first.\n"
    with path.open("w", encoding="utf-8") as f:
        for _ in range(mb):
            f.write(line * (1024 * 1024 // len(line)))


async def test_F3_a_huge_agents_md_is_never_loaded_whole_into_the_window(tmp_path: Path,
                                                                         panel: InstructionsPanel) -> None:
    """A 48 MB AGENTS.md: the panel reads a bounded head, says the file is too large to edit here,
    and never offers a cut copy for saving (which would destroy the file)."""
    ws = make_workspace(tmp_path)
    _stream_text(ws / "AGENTS.md", 48)
    session = await Session.open(ws, model=ScriptedModel([reply("ok")]))
    try:
        started = asyncio.get_running_loop().time()
        panel.set_session(session)
        await panel.tasks.wait_idle()
        assert asyncio.get_running_loop().time() - started < 5
        assert panel.editor.open_path is None and panel.editor.text_edit.toPlainText() == ""
        assert "too large to edit here" in panel.editor.verdict_label.text()
        doc = panel.model.doc(PROJECT)
        assert doc.disk_state == "error" and "too large" in doc.disk_reason
        assert (ws / "AGENTS.md").stat().st_size == 48 * (1024 * 1024 // 30) * 30  # untouched
    finally:
        await session.close()


async def test_I5_an_agents_md_that_is_not_utf8_says_why_in_the_panel(tmp_path: Path, panel: InstructionsPanel) -> None:
    ws = make_workspace(tmp_path)
    (ws / "AGENTS.md").write_bytes("\ufeffRègles\r\n".encode("utf-16"))
    session = await Session.open(ws, model=ScriptedModel([reply("ok")]))
    try:
        panel.set_session(session)
        await panel.tasks.wait_idle()
        doc = panel.model.doc(PROJECT)
        assert doc.disk_state == "error" and "UTF-8" in doc.disk_reason
        unsubscribe = session.subscribe(panel.handle_event, replay=False)
        assert (await session.run("hi")).status == "done"  # never fails the run (I5)
        unsubscribe()
        assert panel.model.doc(PROJECT).fate_text.startswith("skipped")
    finally:
        await session.close()


async def test_I5_an_agents_md_the_os_refuses_is_refused_in_the_panel(tmp_path: Path, panel: InstructionsPanel,
                                                                     monkeypatch: Any) -> None:
    """I5: an AGENTS.md the OS refuses (mode 000, another user's) reads "refused: Permission denied" in the
    panel, as the run reports it — not an I/O error — and the run goes on."""
    from tests.harness.os_refusals import refuse

    ws = make_workspace(tmp_path)
    (ws / "AGENTS.md").write_text("secret rules\n", encoding="utf-8")
    refuse(monkeypatch, "open", "/AGENTS.md")
    session = await Session.open(ws, model=ScriptedModel([reply("ok")]))
    try:
        panel.set_session(session)
        await panel.tasks.wait_idle()
        doc = panel.model.doc(PROJECT)
        assert doc.disk_state == "refused" and "Permission denied" in doc.disk_reason
        assert (await session.run("hi")).status == "done"
    finally:
        await session.close()
