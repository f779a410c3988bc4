"""What the harness puts in the prompt, seen where it crosses the wire: the stub server's recorded
requests, through the real litellm path (issue 4: I1, S1, T5; issue 5: A2)."""

from __future__ import annotations

import pytest

from tests.stub_server import StubReply
from workbench.session import Session


@pytest.fixture
def workspace(tmp_path, stub_server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    ws = tmp_path / "ws"
    (ws / "skills" / "tidy").mkdir(parents=True)
    (ws / "skills" / "tidy" / "SKILL.md").write_text("---\nname: tidy\ndescription: Tidy a folder.\n---\nBody.\n")
    (ws / "AGENTS.md").write_text("# House rules\nAlways run the tests before committing.\n")
    (ws / "workbench.yaml").write_text(
        f"model: openai/test-model\napi_base: {stub_server.url}\n"
        "permissions:\n  rules:\n    - {allow: read, path: '/**'}\n"
    )
    return ws


def system_prompt(request: dict) -> str:
    first = request["messages"][0]
    assert first["role"] == "system"
    return first["content"]


async def test_prompt_carries_agents_md_skills_and_the_new_plan(workspace, stub_server):
    stub_server.script(
        StubReply(tool_calls=[("write_todos", {"todos": [{"content": "Run the test suite", "status": "in_progress"}]})],
                  usage=(100, 10)),
        StubReply(tool_calls=[("write_artifact", {"name": "report.md", "content": "# Report\nAll green.\n"})],
                  usage=(120, 10)),
        StubReply(text="Done.", usage=(130, 5)),
    )
    session = await Session.open(workspace)
    result = await session.run("Check the project")
    assert result.status == "done", result.error
    first, second, third = (system_prompt(r) for r in stub_server.requests)
    # I1: AGENTS.md under a heading naming its path
    assert "## /project/AGENTS.md\n# House rules\nAlways run the tests before committing." in first
    # S1: the skill listed with its SKILL.md path
    assert "tidy" in first and "/project/skills/tidy/SKILL.md" in first
    # M2: stable sections before the plan; T5: the plan appears from the next step on
    assert "Run the test suite" not in first and "Run the test suite" in second
    assert second.index("House rules") < second.index("Run the test suite")
    # A2: artifacts listed by name and size, never their content
    assert "report.md" in third and "All green" not in third
    await session.close()
