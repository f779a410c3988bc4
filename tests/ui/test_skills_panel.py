"""G2 Skills dock (issue 4 item 5, S1–S6): skills in source order with name, description and source;
shadowed and malformed ones greyed with their reason; Open shows SKILL.md; Reload says the change
applies from the next run (S2). The item model passes qtmodeltester."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt

from tests.ui.helpers import click
from workbench.engine.models.scripted import ScriptedModel, reply
from workbench.session import Session
from workbench.ui import qt_async
from workbench.ui.markdown_highlighter import MarkdownHighlighter
from workbench.ui.skills_panel import (
    DESCRIPTION,
    NAME,
    NEXT_RUN_NOTE,
    SOURCE,
    STATUS,
    VIEWER_MAX_BYTES,
    SkillRow,
    SkillsModel,
    SkillsPanel,
)


def skill(root: Path, folder: str, frontmatter: str, body: str = "# Steps\n\n1. Do the thing.\n") -> Path:
    d = root / folder
    d.mkdir(parents=True, exist_ok=True)
    (d / "SKILL.md").write_text(f"---\n{frontmatter}---\n{body}", encoding="utf-8")
    return d / "SKILL.md"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """/user/skills (the earlier source) and /project/skills: ``shared`` in both (the project's wins),
    ``broken`` with frontmatter that is not YAML."""
    ws, user = tmp_path / "ws", tmp_path / "user"
    ws.mkdir()
    skill(user / "skills", "gamma", "name: gamma\ndescription: Greets the user.\n")
    skill(user / "skills", "shared", "name: shared\ndescription: The user's old version.\n")
    skill(ws / "skills", "alpha", "name: alpha\ndescription: Audits the logs.\nallowed-tools: read_file grep\n")
    skill(ws / "skills", "broken", "name: broken\ndescription: [unclosed\n")
    skill(ws / "skills", "shared", "name: shared\ndescription: The project's version.\n")
    (ws / "workbench.yaml").write_text(
        f"mounts:\n  /user: {{host: {user}}}\n"
        "skills: {sources: [/user/skills, /project/skills]}\n",
        encoding="utf-8",
    )
    return ws


@pytest.fixture
def panel(qtbot: Any) -> SkillsPanel:
    p = SkillsPanel(start=qt_async.start)
    qtbot.addWidget(p)
    return p


def table(model: SkillsModel) -> list[tuple[str, str, str, str]]:
    return [tuple(model.data(model.index(r, c), Qt.ItemDataRole.DisplayRole) for c in (NAME, DESCRIPTION, SOURCE, STATUS))
            for r in range(model.rowCount())]  # type: ignore[misc]


async def test_shadowed_and_malformed_skills_are_greyed_with_their_reasons(workspace: Path, panel: SkillsPanel) -> None:
    model = ScriptedModel([reply("Hello.")])
    session = await Session.open(workspace, model=model)
    try:
        panel.set_session(session)
        await panel.tasks.wait_idle()
        rows = table(panel.model)
        assert [(r[0], r[2]) for r in rows] == [  # source order, then path order
            ("gamma", "/user/skills"),
            ("shared", "/user/skills"),
            ("alpha", "/project/skills"),
            ("broken", "/project/skills"),
            ("shared", "/project/skills"),
        ]
        by = {(r.name, r.source): r for r in panel.model.rows}
        shadowed = by[("shared", "/user/skills")]
        assert shadowed.fate == "shadowed" and shadowed.reason == "replaced by /project/skills/shared/SKILL.md"
        assert shadowed.description == "The user's old version."
        broken = by[("broken", "/project/skills")]
        assert broken.fate == "malformed" and "not valid YAML" in broken.reason
        assert by[("alpha", "/project/skills")].allowed_tools == ("read_file", "grep")
        assert [r[3] for r in rows] == ["listed", "shadowed", "listed", "malformed", "listed"]
        assert rows[1][1] == "The user's old version." and rows[3][1] == "—"
        reasons = panel.reasons_label.text().splitlines()
        assert reasons[0] == "Skipped:"
        assert reasons[1] == "shared (/user/skills): shadowed — replaced by /project/skills/shared/SKILL.md"
        assert reasons[2].startswith("broken (/project/skills): malformed — the frontmatter is not valid YAML")
        tip = panel.model.data(panel.model.index(1, NAME), Qt.ItemDataRole.ToolTipRole)
        assert "shadowed — replaced by /project/skills/shared/SKILL.md" in tip
        # Greyed (and italic) when skipped; listed rows keep the normal colours.
        m = panel.model
        for r, row in enumerate(panel.model.rows):
            grey = m.data(m.index(r, NAME), Qt.ItemDataRole.ForegroundRole)
            assert (grey is not None) == (not row.listed), row
        assert m.data(m.index(1, NAME), Qt.ItemDataRole.FontRole).italic()
        assert "2 skipped" in panel.count_label.text() and "3 listed" in panel.count_label.text()

        # A run reports the same fates (documents_reported, source skills); the panel keeps its rows.
        unsubscribe = session.subscribe(panel.handle_event, replay=False)
        await session.run("hi")
        unsubscribe()
        report = [d for d in session.documents if d["path"].endswith("SKILL.md")]
        assert {d["path"]: d["fate"] for d in report} == {r.path: r.fate for r in panel.model.rows}
        assert by[("alpha", "/project/skills")] in panel.model.rows  # descriptions kept

        # Reopening (a new panel) shows the same, from the newest report at once, then the scan.
        again = SkillsPanel(start=qt_async.start)
        again.set_session(session)
        assert {r.path: r.fate for r in again.model.rows} == {r.path: r.fate for r in panel.model.rows}
        await again.tasks.wait_idle()
        assert again.model.rows == panel.model.rows
        again.deleteLater()
    finally:
        await session.close()


async def test_open_shows_the_skill_md_in_a_highlighted_viewer(workspace: Path, panel: SkillsPanel, qtbot: Any) -> None:
    session = await Session.open(workspace, model=ScriptedModel([]))
    try:
        panel.set_session(session)
        await panel.tasks.wait_idle()
        assert not panel.open_button.isEnabled()
        assert panel.select_path("/project/skills/alpha/SKILL.md")
        click(qtbot, panel.open_button)
        await panel.tasks.wait_idle()
        assert panel.opened_path == "/project/skills/alpha/SKILL.md"
        assert panel.viewer.toPlainText() == (workspace / "skills/alpha/SKILL.md").read_text()
        assert panel.viewer.isReadOnly()
        assert isinstance(panel.highlighter, MarkdownHighlighter)
        assert panel.highlighter.document() is panel.viewer.document()
        assert panel.viewer_title.text() == "/project/skills/alpha/SKILL.md"

        # Double-click opens too; a skipped skill can be read to see what is wrong with it.
        row = panel.model.row_of("/project/skills/broken/SKILL.md")
        panel.view.doubleClicked.emit(panel.model.index(row, NAME))
        await panel.tasks.wait_idle()
        assert "[unclosed" in panel.viewer.toPlainText()
        assert "malformed" in panel.viewer_title.text()

        # A skill removed from disk since the scan says so instead of failing.
        (workspace / "skills/alpha/SKILL.md").unlink()
        assert await panel.open_skill("/project/skills/alpha/SKILL.md") is None
        assert "no longer exists" in panel.viewer_title.text()
    finally:
        await session.close()


async def test_reload_rereads_the_sources_and_says_it_applies_next_run(workspace: Path, panel: SkillsPanel,
                                                                       qtbot: Any) -> None:
    session = await Session.open(workspace, model=ScriptedModel([]))
    try:
        panel.set_session(session)
        await panel.tasks.wait_idle()
        assert panel.note_label.isHidden()
        skill(workspace / "skills", "delta", "name: delta\ndescription: New since the window opened.\n")
        (workspace / "skills/broken/SKILL.md").write_text("---\nname: broken\ndescription: Fixed now.\n---\n")
        click(qtbot, panel.reload_button)
        await panel.tasks.wait_idle()
        by = {r.name: r for r in panel.model.rows if r.source == "/project/skills"}
        assert by["delta"].listed and by["delta"].description == "New since the window opened."
        assert by["broken"].listed and by["broken"].description == "Fixed now."
        assert not panel.note_label.isHidden()
        assert NEXT_RUN_NOTE in panel.note_label.text()
    finally:
        await session.close()


def test_model_passes_qtmodeltester(qtmodeltester: Any) -> None:
    model = SkillsModel()
    model.set_rows([
        SkillRow("a", "Does a.", "/user/skills", "/user/skills/a/SKILL.md", "shadowed", "replaced by /p/a/SKILL.md"),
        SkillRow("a", "Does a better.", "/project/skills", "/project/skills/a/SKILL.md", allowed_tools=("read_file",)),
    ])
    qtmodeltester.check(model)
    model.apply_report([{"path": "/project/skills/b/SKILL.md", "name": "", "fate": "malformed", "reason": "bad"}],
                       ["/user/skills", "/project/skills"])
    assert [r.name for r in model.rows] == ["a", "a", "b"]
    qtmodeltester.check(model, force_py=True)


async def test_F3_a_huge_skill_md_opens_only_its_head_in_the_viewer(workspace: Path, panel: SkillsPanel) -> None:
    path = workspace / "skills" / "alpha" / "SKILL.md"
    line = "More steps.\n"
    with path.open("a", encoding="utf-8") as f:  # 40 MB, streamed
        for _ in range(40):
            f.write(line * (1024 * 1024 // len(line)))
    session = await Session.open(workspace, model=ScriptedModel([]))
    try:
        panel.set_session(session)
        await panel.tasks.wait_idle()
        text = await panel.open_skill("/project/skills/alpha/SKILL.md")
        assert text is not None and text.startswith("---") and len(text.encode()) <= VIEWER_MAX_BYTES
        assert len(panel.viewer.toPlainText().encode()) <= VIEWER_MAX_BYTES
        assert "larger" in panel.viewer_title.text() and panel.viewer.isReadOnly()
    finally:
        await session.close()
