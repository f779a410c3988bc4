"""P5 for files read into the prompt outside tool calls: AGENTS.md and SKILL.md.

The instructions and skills middleware read through the same backend as the file tools, but no
person is there to ask. A symlink must not carry a denied (or asked-for) file into the system prompt,
which goes to the provider: a deny on the path as named or on where it leads refuses it, and an ask
on where a link leads refuses it too.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from workbench.engine.models.scripted import ScriptedModel, reply
from workbench.harness.skills import SkillFormatError, parse_skill
from workbench.session import Session

RULES = """permissions:
  rules:
    - {allow: read, path: '/**'}
    - {deny: read, path: '/project/secret/**'}
    - {ask: read, path: '/project/private/**'}
"""


async def _first_prompt(ws: Path) -> tuple[str, list[dict]]:
    model = ScriptedModel([reply("done")])
    session = await Session.open(ws, model=model)
    events = []
    session.subscribe(lambda e: events.append(e) if e.type == "documents_reported" else None)
    result = await session.run("hello")
    assert result.status == "done", result.error
    docs = [d for e in events for d in e.data["documents"]]
    return model.requests[0].system, docs


def _ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "secret").mkdir(parents=True)
    (ws / "secret" / "key.txt").write_text("TOPSECRET token\n")
    (ws / "private").mkdir()
    (ws / "private" / "diary.md").write_text("PRIVATE diary entry\n")
    (ws / "workbench.yaml").write_text(RULES)
    return ws


async def test_P5_agents_md_linked_to_a_denied_file_never_reaches_the_prompt(tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    os.symlink("secret/key.txt", ws / "AGENTS.md")
    system, docs = await _first_prompt(ws)
    assert "TOPSECRET" not in system
    fate = next(d for d in docs if d["path"] == "/project/AGENTS.md")
    assert fate["fate"] == "refused" and "secret" in fate["reason"], fate


async def test_P5_agents_md_linked_to_an_asked_file_is_not_read_without_asking(tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    os.symlink("private/diary.md", ws / "AGENTS.md")
    system, docs = await _first_prompt(ws)
    assert "PRIVATE" not in system
    assert next(d for d in docs if d["path"] == "/project/AGENTS.md")["fate"] == "refused"


async def test_P5_a_plain_agents_md_is_still_shown(tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    (ws / "AGENTS.md").write_text("Use tabs.\n")
    system, docs = await _first_prompt(ws)
    assert "Use tabs." in system
    assert next(d for d in docs if d["path"] == "/project/AGENTS.md")["fate"] == "shown"


async def test_P5_a_skill_folder_linked_into_a_denied_folder_is_not_listed(tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    (ws / "secret" / "evil").mkdir()
    (ws / "secret" / "evil" / "SKILL.md").write_text(
        "---\nname: evil\ndescription: TOPSECRET description\n---\nbody\n")
    (ws / "skills").mkdir()
    os.symlink("../secret/evil", ws / "skills" / "evil")
    (ws / "skills" / "fine").mkdir()
    (ws / "skills" / "fine" / "SKILL.md").write_text("---\nname: fine\ndescription: A fine skill.\n---\n")
    system, docs = await _first_prompt(ws)
    assert "TOPSECRET" not in system
    assert "A fine skill." in system
    # Left out of the listing like a search leaves it out (P6), and reported by rule, not by content.
    refused = [d for d in docs if d["fate"] == "refused" and "/project/skills" in d["path"]]
    assert refused and "secret" in refused[0]["reason"], docs


def test_S6_deeply_nested_frontmatter_is_malformed_not_a_crash() -> None:
    # 1000 levels fit in the frontmatter cap and overflow PyYAML's recursive composer.
    text = "---\nname: x\ndescription: " + "[" * 1000 + "]" * 1000 + "\n---\n"
    with pytest.raises(SkillFormatError, match="nested too deeply"):
        parse_skill(text, "/project/skills/x/SKILL.md", "/project/skills")


async def test_P5_W1_a_workspace_cannot_list_asked_files_as_instructions(tmp_path: Path) -> None:
    """An untrusted workspace chooses ``memory.paths``: naming a file the person's own ``ask read`` rule
    covers must not put it in the prompt unasked (only the default AGENTS.md files are exempt)."""
    from workbench.harness.permissions import user_rules_path

    user_rules_path().parent.mkdir(parents=True, exist_ok=True)
    user_rules_path().write_text("permissions:\n  rules:\n    - {ask: read, path: '/project/.env'}\n"
                                 "    - {ask: read, path: '/project/private/**'}\n")
    ws = tmp_path / "ws"
    (ws / "private").mkdir(parents=True)
    (ws / ".env").write_text("DB_PASSWORD=hunter2\n")
    (ws / "private" / "diary.md").write_text("DIARY-SECRET\n")
    (ws / "workbench.yaml").write_text("memory:\n  paths: [/project/.env, /project/private/diary.md]\n")
    system, docs = await _first_prompt(ws)
    assert "hunter2" not in system and "DIARY-SECRET" not in system
    assert {d["path"]: d["fate"] for d in docs if d["path"].startswith("/project/")} == {
        "/project/.env": "refused", "/project/private/diary.md": "refused"}


async def test_P5_the_default_agents_md_is_read_under_an_ask_rule(tmp_path: Path) -> None:
    """``ask read /project/**`` must not hide the project's own AGENTS.md from the prompt: the default
    instruction files are listed by the workbench itself, not by the workspace."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "AGENTS.md").write_text("Use tabs.\n")
    (ws / "workbench.yaml").write_text("permissions:\n  rules:\n    - {ask: read, path: '/project/**'}\n")
    system, _docs = await _first_prompt(ws)
    assert "Use tabs." in system
