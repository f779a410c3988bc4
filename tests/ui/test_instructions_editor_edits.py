"""The AGENTS.md editor never loses the person's words or the file's bytes (G2, G9, G12, I5).

- G2/G9: a reopen of the same workspace (``workbench.yaml`` changed, read again before the run that
  Ctrl+Enter starts) keeps the editor's unsaved edits, their dirty state and their baseline, and checks
  the disk against that baseline; another workspace asks first (Save / Discard / Cancel, Cancel the
  default: Enter never discards).
- G2/G12: closing the window with unsaved edits asks first; Enter and Escape keep the window open.
- G2/I5: a file with CRLF, a BOM, no-break spaces, U+2028 or a lone CR opens unedited, and Save keeps
  its bytes except where the person typed (a hypothesis property over such files).
- G2: Ctrl+S right after another program rewrote the file (before the disk timer looked) writes
  nothing and shows the conflict bar.

Everything goes through the keyboard as a person would: ``qtbot.keyClicks`` into the editor, Ctrl+S,
Ctrl+Enter in the prompt box, Enter / Escape in the question, ``window.close()``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PySide6.QtCore import Qt
from PySide6.QtGui import QTextCursor
from PySide6.QtWidgets import QMessageBox

from tests.ui.helpers import click, render_window, visible_dialog, wait_for
from workbench.ui.instructions_editor import InstructionsEditor
from workbench.ui.panel_tasks import PanelTasks

PROJECT = "/project/AGENTS.md"


async def _window_with_editor(windows: Any, workspace: Path) -> tuple[Any, Any]:
    from workbench.app import plug_panels

    window = await windows()
    plug_panels(window)
    await window.open_workspace(workspace, model="demo")
    panel = window.panels["Instructions"]
    await panel.tasks.wait_idle()
    assert panel.editor.open_path == PROJECT
    panel.editor.disk_timer.setInterval(60_000)  # the tests say when the disk is looked at
    return window, panel


def _type_at_end(qtbot: Any, editor: InstructionsEditor, text: str, *, new_line: bool = True) -> None:
    editor.text_edit.setFocus()
    editor.text_edit.moveCursor(QTextCursor.MoveOperation.End)
    if new_line:
        qtbot.keyClick(editor.text_edit, Qt.Key.Key_Return)
    qtbot.keyClicks(editor.text_edit, text)


def _ctrl_s(qtbot: Any, editor: InstructionsEditor) -> None:
    editor.text_edit.setFocus()  # back in the editor (after typing a prompt, say), as a person clicks into it
    qtbot.keyClick(editor.text_edit, Qt.Key.Key_S, Qt.KeyboardModifier.ControlModifier)


async def _question() -> QMessageBox:
    box = await wait_for(lambda: visible_dialog("unsaved_edits"), 10, "the unsaved-edits question")
    assert isinstance(box, QMessageBox)
    return box


def _button(box: QMessageBox, name: str) -> Any:
    return next(b for b in box.buttons() if b.objectName() == name)


# -- Bug 1: a reopen keeps the edits; another workspace asks ---------------------------------------------------
async def test_G2_G9_workbench_yaml_reloaded_before_a_run_keeps_unsaved_edits(windows: Any, demo_workspace: Path,
                                                                               qtbot: Any) -> None:
    """G9 reloads a changed workbench.yaml before the run Ctrl+Enter starts (a new Session of the same
    workspace); G2: the editor keeps the typed rule, its dirty state and its baseline, and Ctrl+S then
    writes the file as it was plus the rule."""
    window, panel = await _window_with_editor(windows, demo_workspace)
    ed = panel.editor
    original = (demo_workspace / "AGENTS.md").read_text(encoding="utf-8")
    _type_at_end(qtbot, ed, "- MY UNSAVED RULE", new_line=False)
    assert ed.dirty
    yaml = demo_workspace / "workbench.yaml"
    yaml.write_text(yaml.read_text(encoding="utf-8") + "\n# touched\n", encoding="utf-8")
    before = window.session
    window.input.setFocus()
    qtbot.keyClicks(window.input, "hello")
    qtbot.keyClick(window.input, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    await wait_for(lambda: window.session is not before and window.session is not None, 30, "the reopen")
    await window.stop()  # the demo run may wait for an approval: not what this test is about
    await wait_for(lambda: not window.busy, 30, "the run to end")
    await window._settle_panels()
    assert panel.session is window.session
    assert ed.open_path == PROJECT and ed.dirty
    assert ed.text_edit.toPlainText() == original + "- MY UNSAVED RULE"
    assert ed.save_button.isEnabled() and ed.path_label.text().endswith(" •")
    assert not ed.conflict_visible  # the disk still matches the baseline
    _ctrl_s(qtbot, ed)
    await panel.tasks.wait_idle()
    assert (demo_workspace / "AGENTS.md").read_text(encoding="utf-8") == original + "- MY UNSAVED RULE"
    assert not ed.dirty


async def test_G2_G9_a_reopen_checks_the_disk_against_the_kept_baseline(windows: Any, demo_workspace: Path,
                                                                         qtbot: Any) -> None:
    """G2/G9: the file changed on disk while the workspace was reopened: the kept edits are not
    silently replaced and the conflict bar asks (the check the timer would have made)."""
    window, panel = await _window_with_editor(windows, demo_workspace)
    ed = panel.editor
    _type_at_end(qtbot, ed, "- MINE")
    (demo_workspace / "AGENTS.md").write_text("# Theirs\n", encoding="utf-8")
    await window.open_workspace(demo_workspace, thread_id=window.session.thread_id, model="demo")
    await wait_for(lambda: ed.conflict_visible, 10, "the conflict bar after the reopen")
    await window._settle_panels()  # the panels' reads of the reopened workspace end inside the test
    assert ed.text_edit.toPlainText().endswith("- MINE") and ed.dirty
    assert (demo_workspace / "AGENTS.md").read_text(encoding="utf-8") == "# Theirs\n"


async def test_G2_another_workspace_asks_and_enter_keeps_the_edits(windows: Any, demo_workspace: Path,
                                                                   tmp_path: Path, qtbot: Any) -> None:
    """G2/G7: opening another workspace with unsaved edits asks Save / Discard / Cancel; Cancel is the
    default (Enter) and the Escape button, and keeps the workspace and the edits; Save writes them and opens."""
    from workbench.app import ensure_demo_workspace

    other = ensure_demo_workspace(tmp_path / "other")
    window, panel = await _window_with_editor(windows, demo_workspace)
    ed = panel.editor
    original = (demo_workspace / "AGENTS.md").read_text(encoding="utf-8")
    _type_at_end(qtbot, ed, "- KEEP ME", new_line=False)
    first = window.session

    opening = asyncio.ensure_future(window.try_open_workspace(other, model="demo"))
    box = await _question()
    assert box.defaultButton() is _button(box, "unsaved_edits_cancel")
    assert box.escapeButton() is _button(box, "unsaved_edits_cancel")
    assert not _button(box, "unsaved_edits_discard").autoDefault()
    qtbot.keyClick(box, Qt.Key.Key_Return)
    assert await asyncio.wait_for(opening, 10) is None
    assert window.session is first and ed.dirty and ed.text_edit.toPlainText().endswith("- KEEP ME")

    opening = asyncio.ensure_future(window.try_open_workspace(other, model="demo"))
    box = await _question()
    qtbot.keyClick(box, Qt.Key.Key_Escape)
    assert await asyncio.wait_for(opening, 10) is None
    assert window.session is first and ed.dirty

    opening = asyncio.ensure_future(window.try_open_workspace(other, model="demo"))
    box = await _question()
    click(qtbot, _button(box, "unsaved_edits_save"))
    assert await asyncio.wait_for(opening, 30) is not None
    await window._settle_panels()  # the panels read the new workspace
    assert window.session.workspace == other.resolve()
    assert (demo_workspace / "AGENTS.md").read_text(encoding="utf-8") == original + "- KEEP ME"


async def test_G2_another_workspace_discard_drops_the_edits(windows: Any, demo_workspace: Path, tmp_path: Path,
                                                            qtbot: Any) -> None:
    """G2: Discard (clicked, never the default) opens the other workspace and writes nothing."""
    from workbench.app import ensure_demo_workspace

    other = ensure_demo_workspace(tmp_path / "other")
    window, panel = await _window_with_editor(windows, demo_workspace)
    original = (demo_workspace / "AGENTS.md").read_text(encoding="utf-8")
    _type_at_end(qtbot, panel.editor, "- DROP ME")
    opening = asyncio.ensure_future(window.try_open_workspace(other, model="demo"))
    box = await _question()
    click(qtbot, _button(box, "unsaved_edits_discard"))
    assert await asyncio.wait_for(opening, 30) is not None
    await window._settle_panels()  # the panels read the new workspace
    assert window.session.workspace == other.resolve()
    assert (demo_workspace / "AGENTS.md").read_text(encoding="utf-8") == original
    assert "DROP ME" not in panel.editor.text_edit.toPlainText()


# -- Bug 2: closing asks --------------------------------------------------------------------------------------
async def test_G2_G12_closing_with_unsaved_edits_asks_and_enter_or_escape_keep_the_window(
        windows: Any, demo_workspace: Path, qtbot: Any) -> None:
    """G12: closing with unsaved AGENTS.md edits asks first; Enter and Escape answer Cancel (the window
    stays open with the edits); Save writes the file, then the window closes."""
    window, panel = await _window_with_editor(windows, demo_workspace)
    ed = panel.editor
    original = (demo_workspace / "AGENTS.md").read_text(encoding="utf-8")
    _type_at_end(qtbot, ed, "- UNSAVED", new_line=False)

    window.close()
    box = await _question()
    render_window(window, "/tmp/editor_close_question_window.png")
    box.grab().save("/tmp/editor_close_question.png")
    assert "not saved" in box.text()
    qtbot.keyClick(box, Qt.Key.Key_Return)
    await wait_for(lambda: visible_dialog("unsaved_edits") is None, 5, "the question to close")
    await asyncio.sleep(0.1)
    assert window.isVisible() and ed.dirty and ed.text_edit.toPlainText().endswith("- UNSAVED")

    window.close()
    box = await _question()
    qtbot.keyClick(box, Qt.Key.Key_Escape)
    await wait_for(lambda: visible_dialog("unsaved_edits") is None, 5, "the question to close")
    await asyncio.sleep(0.1)
    assert window.isVisible() and ed.dirty

    window.close()
    box = await _question()
    click(qtbot, _button(box, "unsaved_edits_save"))
    await wait_for(lambda: not window.isVisible(), 10, "the window to close after Save")
    assert (demo_workspace / "AGENTS.md").read_text(encoding="utf-8") == original + "- UNSAVED"


async def test_G2_G12_closing_and_discard_closes_without_writing(windows: Any, demo_workspace: Path,
                                                                 qtbot: Any) -> None:
    """G12: Discard closes the window; the file on disk stays as it was."""
    window, panel = await _window_with_editor(windows, demo_workspace)
    original = (demo_workspace / "AGENTS.md").read_text(encoding="utf-8")
    _type_at_end(qtbot, panel.editor, "- UNSAVED")
    window.close()
    box = await _question()
    click(qtbot, _button(box, "unsaved_edits_discard"))
    await wait_for(lambda: not window.isVisible(), 10, "the window to close after Discard")
    assert (demo_workspace / "AGENTS.md").read_text(encoding="utf-8") == original


async def test_G12_closing_without_edits_asks_nothing(windows: Any, demo_workspace: Path) -> None:
    """G12: nothing unsaved, nothing asked."""
    window, panel = await _window_with_editor(windows, demo_workspace)
    assert not panel.editor.dirty
    window.close()
    await wait_for(lambda: not window.isVisible(), 10, "the window to close")
    assert visible_dialog("unsaved_edits") is None


# -- Bug 3: the file's bytes -----------------------------------------------------------------------------------
async def test_I5_G2_crlf_bom_nbsp_file_opens_unedited_and_save_keeps_its_bytes(windows: Any, demo_workspace: Path,
                                                                                qtbot: Any) -> None:
    """I5/G2: a BOM, CRLF, NBSP, U+2028 and a lone CR: opened, nothing is marked edited; a line typed
    at the end and Ctrl+S: the old bytes stay as they were, the new line follows."""
    raw = "\ufeff# Rules\r\n\r\n- Prix\u00a0: 10\u00a0€\r\n- a\u2028b\r\n- old\rmac\r\n- two\r\n"
    (demo_workspace / "AGENTS.md").write_bytes(raw.encode("utf-8"))
    window, panel = await _window_with_editor(windows, demo_workspace)
    ed = panel.editor
    assert not ed.dirty and not ed.save_button.isEnabled() and not ed.path_label.text().endswith(" •")
    assert await ed.check_disk() == "unchanged"
    _type_at_end(qtbot, ed, "- three", new_line=False)
    assert ed.dirty
    _ctrl_s(qtbot, ed)
    await panel.tasks.wait_idle()
    assert (demo_workspace / "AGENTS.md").read_bytes() == (raw + "- three").encode("utf-8")
    assert not ed.dirty and await ed.check_disk() == "unchanged"


async def test_I5_G2_an_edit_inside_a_line_keeps_its_no_break_spaces(windows: Any, demo_workspace: Path,
                                                                     qtbot: Any) -> None:
    """I5/G2: a word typed inside a line that holds NBSPs (shown as spaces): they stay NBSPs, CRLF stays."""
    raw = "# R\r\n- Prix\u00a0: 10\u00a0€\r\n- end\r\n"
    (demo_workspace / "AGENTS.md").write_bytes(raw.encode("utf-8"))
    window, panel = await _window_with_editor(windows, demo_workspace)
    ed = panel.editor
    assert not ed.dirty
    ed.text_edit.setFocus()
    cursor = ed.text_edit.textCursor()
    cursor.setPosition(len("# R\n- "))
    ed.text_edit.setTextCursor(cursor)
    qtbot.keyClicks(ed.text_edit, "Le ")
    _ctrl_s(qtbot, ed)
    await panel.tasks.wait_idle()
    assert (demo_workspace / "AGENTS.md").read_bytes() == "# R\r\n- Le Prix\u00a0: 10\u00a0€\r\n- end\r\n".encode()


_PIECES = st.sampled_from(["a", "b", "# ", "-", " ", "\t", "é", "€", "\r\n", "\r", "\n", "\ufeff", "\u00a0",
                           "\u2028", "\u2029", "\x0c"])
_FILES = st.builds(lambda bom, parts: ("\ufeff" if bom else "") + "".join(parts),
                   st.booleans(), st.lists(_PIECES, max_size=40))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=_FILES)
def test_I5_property_open_unedited_save_and_append(qapp: Any, raw: str) -> None:
    """I5/G2, for any text of CRLF, CR, LF, BOM, NBSP, U+2028/U+2029: opened → not dirty; saved with no
    edit → the same text; a line appended → the old text is kept whole, the new line after it (the
    file's own line ending before it when the file did not end with a line break)."""
    from workbench.ui.instructions_editor import shown_text, text_to_save

    ed = InstructionsEditor(PanelTasks())
    try:
        ed.open_path = PROJECT
        ed._show_disk_text(raw)
        assert not ed.dirty
        assert text_to_save(raw, ed._baseline_view, ed.text_edit.toPlainText()) == raw
        assert ed._baseline_view == shown_text(raw)

        view = ed.text_edit.toPlainText()
        cursor = ed.text_edit.textCursor()
        cursor.movePosition(QTextCursor.MoveOperation.End)
        ends_with_break = view == "" or view.endswith("\n")
        cursor.insertText("X" if ends_with_break else "\nX")
        ed.text_edit.setTextCursor(cursor)
        assert ed.dirty
        saved = text_to_save(raw, ed._baseline_view, ed.text_edit.toPlainText())
        assert saved.startswith(raw)
        added = saved[len(raw):]
        assert added == "X" if ends_with_break else added in ("\nX", "\r\nX", "\rX")
        assert shown_text(saved) == ed.text_edit.toPlainText()
    finally:
        ed.deleteLater()


# -- Bug 4: Ctrl+S after a change on disk ----------------------------------------------------------------------
async def test_G2_ctrl_s_after_a_change_on_disk_shows_the_conflict_and_writes_nothing(
        windows: Any, demo_workspace: Path, qtbot: Any) -> None:
    """G2: another program rewrites AGENTS.md (git pull) and Ctrl+S comes before the disk timer looked:
    nothing is written, the conflict bar shows; Keep mine then Ctrl+S replaces the file on purpose."""
    window, panel = await _window_with_editor(windows, demo_workspace)
    ed = panel.editor
    _type_at_end(qtbot, ed, "- my rule")
    theirs = "# Rules pulled from the team\n- THEIR RULE\n"
    (demo_workspace / "AGENTS.md").write_text(theirs, encoding="utf-8")
    _ctrl_s(qtbot, ed)
    await panel.tasks.wait_idle()
    assert (demo_workspace / "AGENTS.md").read_text(encoding="utf-8") == theirs
    assert ed.conflict_visible and not ed.conflict_bar.isHidden()
    assert ed.text_edit.toPlainText().endswith("- my rule") and ed.dirty
    assert "Not saved" in ed.message_label.text()
    ed.grab().save("/tmp/editor_conflict_bar.png")
    panel.grab().save("/tmp/editor_conflict_panel.png")
    _ctrl_s(qtbot, ed)  # again while the bar asks: still nothing written
    await panel.tasks.wait_idle()
    assert (demo_workspace / "AGENTS.md").read_text(encoding="utf-8") == theirs
    click(qtbot, ed.conflict_keep)
    _ctrl_s(qtbot, ed)
    await panel.tasks.wait_idle()
    assert (demo_workspace / "AGENTS.md").read_text(encoding="utf-8").endswith("- my rule")
    assert not ed.dirty and not ed.conflict_visible


if __name__ == "__main__":  # pragma: no cover
    pytest.main([__file__])
