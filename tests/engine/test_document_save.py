"""P5 for the window's Save of an AGENTS.md (``Session.write_verdict`` / ``write_document``).

The person saving is held to the agent's deny rules on every path the write really touches: a symlink
is judged as named and where it leads, as ``edit_file`` is, and again while the backend opens it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from workbench.backends.base import BackendRefusal
from workbench.engine.models.scripted import ScriptedModel, reply, tool_reply
from workbench.session import Session

RULES = """permissions:
  rules:
    - {deny: write, path: '/project/protected/**'}
    - {ask: write, path: '/project/asked/**'}
"""


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    for folder in ("protected", "asked", "open"):
        (ws / folder).mkdir(parents=True)
        (ws / folder / "rules.md").write_text("ORIGINAL\n")
    (ws / "workbench.yaml").write_text(RULES)
    return ws


async def test_P5_saving_an_agents_md_linked_into_a_denied_folder_is_refused_naming_rule_and_target(workspace):
    """P5: write_verdict said allowed and write_document wrote through the link into /project/protected."""
    os.symlink("protected/rules.md", workspace / "AGENTS.md")
    model = ScriptedModel([tool_reply(("edit_file", {"path": "/project/AGENTS.md", "old_string": "ORIGINAL",
                                                     "new_string": "AGENT"})), reply("ok")])
    session = await Session.open(workspace, model=model)
    await session.run("edit it")
    (agent_said,) = [m.content for m in session.messages if m.role == "tool"]
    ok, why = session.write_verdict("/project/AGENTS.md")
    assert not ok
    assert why == ("Denied: write /project/protected/rules.md matches 'deny write /project/protected/**' "
                   "(workbench.yaml line 3) (/project/AGENTS.md is a symlink to it)")
    assert why.removeprefix("Denied: ") in agent_said  # the same words the agent's edit_file got
    with pytest.raises(BackendRefusal, match=r"/project/protected/rules\.md.*deny write /project/protected/\*\*"):
        await session.write_document("/project/AGENTS.md", "USER SAVE\n")
    assert (workspace / "protected" / "rules.md").read_text() == "ORIGINAL\n"
    await session.close()


async def test_P5_saving_through_a_link_to_an_allowed_or_asked_file_goes_ahead(workspace):
    """An ask rule on where the link leads does not stop the person: they are the one it would ask."""
    os.symlink("asked/rules.md", workspace / "AGENTS.md")
    os.symlink("open/rules.md", workspace / "OPEN.md")
    session = await Session.open(workspace, model=ScriptedModel([]))
    assert session.write_verdict("/project/AGENTS.md") == (True, "")
    await session.write_document("/project/AGENTS.md", "saved via link\n")
    await session.write_document("/project/OPEN.md", "saved too\n")
    assert (workspace / "asked" / "rules.md").read_text() == "saved via link\n"
    assert (workspace / "open" / "rules.md").read_text() == "saved too\n"
    assert (workspace / "AGENTS.md").is_symlink()
    await session.close()


async def test_P5_a_link_swapped_after_the_verdict_cannot_carry_the_save_past_a_rule(workspace):
    """P5, no TOCTOU: the backend judges again, while it writes, the path it really opens."""
    os.symlink("open/rules.md", workspace / "AGENTS.md")
    session = await Session.open(workspace, model=ScriptedModel([]))
    backend_write = session.backend.write

    async def swapped_then_written(path: str, content: str) -> None:
        os.unlink(workspace / "AGENTS.md")
        os.symlink("protected/rules.md", workspace / "AGENTS.md")
        await backend_write(path, content)

    session.backend.write = swapped_then_written  # type: ignore[method-assign]
    with pytest.raises(BackendRefusal, match="deny write /project/protected"):
        await session.write_document("/project/AGENTS.md", "USER SAVE\n")
    assert (workspace / "protected" / "rules.md").read_text() == "ORIGINAL\n"
    await session.close()


async def test_P5_a_link_chain_too_long_to_follow_on_the_gui_thread_is_not_saved(workspace):
    """The verdict runs on the window's GUI thread: a chain of links that would take a long resolve is
    given up after ``LINK_STEPS`` components, and the save refused (never let through unjudged)."""
    from workbench.session_documents import LINK_STEPS

    os.symlink(".", workspace / "a")
    os.symlink("a/" * 1500 + "l2", workspace / "l1")
    os.symlink("a/" * 1500 + "open/rules.md", workspace / "l2")
    os.symlink("l1", workspace / "AGENTS.md")
    os.symlink("open/rules.md", workspace / "SHORT.md")
    session = await Session.open(workspace, model=ScriptedModel([]))
    ok, why = session.write_verdict("/project/AGENTS.md")
    assert not ok
    assert why == (f"Refused: /project/AGENTS.md: it leads through too many symlinks to follow "
                   f"(more than {LINK_STEPS} path components to follow)")
    with pytest.raises(BackendRefusal) as refused:
        await session.write_document("/project/AGENTS.md", "USER SAVE\n")
    assert str(refused.value) == why  # the same words, the path named once
    assert (workspace / "open" / "rules.md").read_text() == "ORIGINAL\n"
    assert session.write_verdict("/project/SHORT.md") == (True, "")  # an ordinary link is followed
    await session.close()


async def test_P5_a_link_that_cannot_be_followed_is_not_saved_unjudged(workspace, monkeypatch):
    """A link removed or changed while the verdict follows it (readlink fails): refused, not judged as
    if it led nowhere (the write's own guard would still judge it; the verdict must not say yes)."""
    from workbench.backends.host import HostBackend

    os.symlink("open/rules.md", workspace / "AGENTS.md")
    session = await Session.open(workspace, model=ScriptedModel([]))

    def racing(self, path, max_steps=None):
        raise FileNotFoundError(2, "No such file or directory")

    monkeypatch.setattr(HostBackend, "link_target", racing)
    assert session.write_verdict("/project/AGENTS.md") == (
        False, "Refused: /project/AGENTS.md: its links could not be followed (No such file or directory)")
    await session.close()


async def test_P5_a_name_the_system_cannot_take_is_refused_not_an_error(workspace):
    """A lone surrogate in a path (a name no file system can hold) makes ``lstat`` raise ValueError: the
    verdict says no, instead of raising past the window (which kept the last file's verdict on screen)."""
    session = await Session.open(workspace, model=ScriptedModel([]))
    ok, why = session.write_verdict("/project/open/\udcffbad.md")
    assert (ok, why) == (False, "Refused: /project/open/\udcffbad.md: its name is not valid text, so no rule can be "
                                "checked on it")
    with pytest.raises(BackendRefusal, match="not valid text"):
        await session.write_document("/project/open/\udcffbad.md", "x")
    await session.close()


async def test_P5_a_name_the_system_cannot_encode_is_refused_even_with_no_rule_to_match(tmp_path):
    """With no path rule, the name reaches the link check itself (lstat cannot encode it): the same
    refusal, in the same words, as when a rule's pattern cannot read it."""
    ws = tmp_path / "plain"
    ws.mkdir()
    session = await Session.open(ws, model=ScriptedModel([]))
    ok, why = session.write_verdict("/project/\ud800.md")
    assert (ok, why) == (False, "Refused: /project/\ud800.md: its name is not valid text, so no rule can be checked on it")
    await session.close()
