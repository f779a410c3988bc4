"""A sub-agent is judged by exactly the rules its parent is judged by (P1, P3, Q3, D4/D9): the rules the
person saves with the rule builder — for this session, to the project's workbench.yaml or to the user's
permissions.yaml — bind the sub-agents too, at their next call, deny always winning. Real sessions
(``Session.open`` with a ``ScriptedModel``), a real ``delegate_to_writer`` call, on the caller's loop and on
the sub-agents' own loop and thread (the window's way)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from workbench.engine.messages import ModelRequest, ModelResponse
from workbench.engine.models.scripted import ScriptedModel, reply, tool_reply
from workbench.harness import rule_proposal
from workbench.harness.permissions import PermissionsMiddleware
from workbench.session import Session

pytestmark = pytest.mark.timeout(60)

SECRET = "/project/secret.txt"


@pytest.fixture(params=["caller's loop", "task loop"])
def threaded(request: pytest.FixtureRequest) -> bool:
    """Sub-agents on the caller's loop (CLI, scripts), or on their own loop and thread (the window)."""
    return request.param == "task loop"


def workspace(tmp_path: Path) -> Path:
    """Writes under /project are allowed by a configured rule (so a saved deny must beat an allow), and
    the default is allow: nothing but the saved rule stands between the sub-agent and the file."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "workbench.yaml").write_text(
        "model: scripted\n"
        "permissions:\n"
        "  default: allow\n"
        "  rules:\n"
        "    - {allow: read, path: '/**'}\n"
        "    - {allow: write, path: '/project/**'}\n"
        "subagents:\n"
        "  agents:\n"
        "    - {name: writer, description: Writes files.}\n", encoding="utf-8")
    return ws


def tool_results(messages: list[Any]) -> list[str]:
    return [m.content for m in messages if m.role == "tool"]


def sub_agent_results(session: Session) -> list[str]:
    [task] = session.tasks()
    return tool_results(session.task_messages(task.id))


def write(content: str) -> ModelResponse:
    return tool_reply(("write_file", {"path": SECRET, "content": content}))


@pytest.mark.parametrize("scope", ["session", "project", "user"])
async def test_q3_p1_a_saved_deny_binds_the_sub_agent_as_it_binds_the_parent(tmp_path: Path, threaded: bool,
                                                                             scope: str) -> None:
    """Q3/P1/D: a deny saved with the rule builder before the run — for the session, to workbench.yaml or
    to the user's permissions.yaml — refuses the parent's write and the sub-agent's alike, over the
    configured allow rule (deny wins); the file is never written."""
    ws = workspace(tmp_path)
    model = ScriptedModel([
        write("by the parent"),                               # parent
        tool_reply(("delegate_to_writer", {"task": "write the secret file"})),
        write("by the sub-agent"),                            # sub-agent
        reply("could not write it"),                          # sub-agent
        reply("done"),                                        # parent
    ])
    session = await Session.open(ws, model=model, threaded_model=threaded)
    try:
        saved = await session.save_rule(session.build_rule("deny", "write", SECRET, "file"), scope)
        assert saved.scope == scope
        result = await session.run("write the secret file, then have the writer try")
        assert result.status == "done", result
        parent = tool_results(session.messages)
        assert parent[0].startswith("Denied: write /project/secret.txt matches 'deny write /project/secret.txt'")
        [sub] = sub_agent_results(session)
        assert sub.startswith("Denied: write /project/secret.txt matches 'deny write /project/secret.txt'"), sub
        assert not (ws / "secret.txt").exists()
        model.assert_all_used()
    finally:
        await session.close()


@pytest.mark.parametrize("scope", ["session", "project", "user"])
async def test_q3_p1_a_deny_saved_while_the_sub_agent_runs_binds_its_next_call(tmp_path: Path, threaded: bool,
                                                                               scope: str) -> None:
    """Q3 ("it counts from the next call")/D: the sub-agent's engine is already built and running when
    the person saves the deny; its next call is refused all the same — its rules are its parent's rules
    at that moment, never a copy taken when it started (nor the user's file as read then)."""
    ws = workspace(tmp_path)
    session: Session | None = None

    def save_then_write(request: ModelRequest) -> ModelResponse:
        assert session is not None
        perms = session.middleware(PermissionsMiddleware)
        rule = rule_proposal.build_rule("deny", "write", SECRET, "file")
        rule_proposal.save_rule(perms, rule, scope, workspace=session.workspace)  # what Session.save_rule does
        return write("by the sub-agent")

    model = ScriptedModel([
        tool_reply(("delegate_to_writer", {"task": "write the secret file"})),  # parent
        save_then_write,                                                         # sub-agent
        reply("could not write it"),                                             # sub-agent
        reply("done"),                                                           # parent
    ])
    session = await Session.open(ws, model=model, threaded_model=threaded)
    try:
        result = await session.run("have the writer write the secret file")
        assert result.status == "done", result
        [sub] = sub_agent_results(session)
        assert sub.startswith("Denied: write /project/secret.txt matches 'deny write /project/secret.txt'"), sub
        assert not (ws / "secret.txt").exists()
        model.assert_all_used()
    finally:
        await session.close()


async def test_q3_d_a_session_ask_asks_for_the_sub_agent_too(tmp_path: Path, threaded: bool) -> None:
    """Q3/D9: an ``ask`` saved for this session is not skipped by the sub-agent (never more permissive
    than its parent): its write asks the person, naming the sub-agent's task; nothing is written."""
    ws = workspace(tmp_path)
    model = ScriptedModel([
        tool_reply(("delegate_to_writer", {"task": "write the secret file"})),
        write("by the sub-agent"),
    ])
    session = await Session.open(ws, model=model, threaded_model=threaded)
    try:
        await session.save_rule(session.build_rule("ask", "write", SECRET, "file"), "session")
        result = await session.run("have the writer write the secret file")
        assert result.status == "interrupted", result
        [q] = result.pending
        assert q.kind == "tool_approval" and "task_id" in q.payload
        assert "write /project/secret.txt matches 'ask write /project/secret.txt'" in q.payload["reason"]
        assert not (ws / "secret.txt").exists()
    finally:
        await session.close()


async def test_q3_d9_a_sub_agents_own_sub_agent_is_bound_too(tmp_path: Path, threaded: bool) -> None:
    """Q3/D9 (``max_depth: 2``): a deny saved for this session binds the sub-agent's own sub-agent too."""
    ws = workspace(tmp_path)
    text = (ws / "workbench.yaml").read_text(encoding="utf-8")
    (ws / "workbench.yaml").write_text(text.replace("subagents:\n", "subagents:\n  max_depth: 2\n"), encoding="utf-8")
    model = ScriptedModel([
        tool_reply(("delegate_to_writer", {"task": "have a writer write the secret file"})),  # parent
        tool_reply(("delegate_to_writer", {"task": "write the secret file"})),                # sub-agent
        write("by the sub-agent's sub-agent"),                                                # its sub-agent
        reply("could not write it"),
        reply("it could not"),
        reply("done"),
    ])
    session = await Session.open(ws, model=model, threaded_model=threaded)
    try:
        await session.save_rule(session.build_rule("deny", "write", SECRET, "file"), "session")
        result = await session.run("delegate twice")
        assert result.status == "done", result
        tasks = session.tasks(all_threads=True)
        assert len(tasks) == 2, tasks
        deepest = [r for t in tasks for r in tool_results(session.task_messages(t.id)) if "secret" in r]
        assert deepest and all(r.startswith("Denied: write /project/secret.txt") for r in deepest), deepest
        assert not (ws / "secret.txt").exists()
        model.assert_all_used()
    finally:
        await session.close()
