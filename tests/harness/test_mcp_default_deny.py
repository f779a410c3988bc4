"""X2/P1: an MCP server's read-only label (``readOnlyHint``) spares its tool the default ``ask`` — it is
never an allow under the person's ``default: deny`` (the default applies to calls no rule matches, and the
label is the server's own claim). The workbench's own read tools keep working under every default, their
paths judged by the path rules. Real sessions (``Session.open`` with a ``ScriptedModel``) with a real MCP
server process (``tests/mcp_servers/tiny.py``: ``echo`` and ``add`` annotated read-only, ``note`` not)."""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from workbench.engine.models.scripted import ScriptedModel, reply, tool_reply
from workbench.engine.tools import Tool
from workbench.harness.permissions import PermissionsMiddleware
from workbench.session import Session

TINY = Path(__file__).resolve().parents[1] / "mcp_servers" / "tiny.py"

pytestmark = pytest.mark.timeout(120)


def workspace(tmp_path: Path, permissions: str, *, extra: str = "", mcp: bool = True) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    servers = ""
    if mcp:
        args = json.dumps([str(TINY), "normal", f"wbtest-{uuid.uuid4().hex[:10]}"])
        servers = f"mcp_servers:\n  tiny: {{command: {json.dumps(sys.executable)}, args: {args}}}\n"
    (ws / "workbench.yaml").write_text(f"model: scripted\npermissions: {permissions}\n{extra}{servers}",
                                       encoding="utf-8")
    return ws


def tool_results(messages: list[Any]) -> list[str]:
    return [m.content for m in messages if m.role == "tool"]


async def run(ws: Path, *replies: Any) -> tuple[Session, Any]:
    session = await Session.open(ws, model=ScriptedModel([*replies, reply("done")]))
    return session, await session.run("go")


async def test_x2_p1_default_deny_refuses_a_tool_its_server_labels_read_only(tmp_path: Path) -> None:
    """X2/P1: under ``permissions: {default: deny}`` with no rule, the server's read-only tools are
    denied like any other call no rule matches; the server's label lifts nothing."""
    ws = workspace(tmp_path, "{default: deny}")
    note = tmp_path / "note.txt"
    session, result = await run(ws, tool_reply(("mcp__tiny__echo", {"text": "ran despite default deny"}),
                                               ("mcp__tiny__add", {"a": 1, "b": 2}),
                                               ("mcp__tiny__note", {"path": str(note), "text": "x"})))
    try:
        assert result.status == "done", result
        echo, add, wrote = tool_results(session.messages)
        assert echo.startswith("Denied: invoke mcp__tiny__echo: deny (default)"), echo
        assert add.startswith("Denied: invoke mcp__tiny__add: deny (default)"), add
        assert wrote.startswith("Denied: invoke mcp__tiny__note: deny (default)"), wrote
        assert not note.exists()
    finally:
        await session.close()


async def test_x2_d_a_sub_agent_under_default_deny_is_refused_the_read_only_tool_too(tmp_path: Path) -> None:
    """X2/P1/D: the same for a sub-agent's call (its permissions are the parent's): only the rule the
    person wrote (delegating) is allowed; the server's read-only tool is denied by the default."""
    ws = workspace(tmp_path, "{default: deny, rules: [{allow: invoke, tool: 'delegate_to_*'}]}",
                   extra="subagents:\n  agents:\n    - {name: helper, description: Helps.}\n")
    session, result = await run(ws, tool_reply(("delegate_to_helper", {"task": "echo hi"})),
                                tool_reply(("mcp__tiny__echo", {"text": "from the helper"})),
                                reply("it was refused"))
    try:
        assert result.status == "done", result
        [task] = session.tasks()
        [out] = tool_results(session.task_messages(task.id))
        assert out.startswith("Denied: invoke mcp__tiny__echo: deny (default)"), out
    finally:
        await session.close()


async def test_x2_p1_an_allow_rule_still_lets_a_servers_tool_run_under_default_deny(tmp_path: Path) -> None:
    """P1/X2: a rule the person wrote (``allow invoke``) is what lets an MCP tool run under ``deny``."""
    ws = workspace(tmp_path, "{default: deny, rules: [{allow: invoke, tool: 'mcp__tiny__echo'}]}")
    session, result = await run(ws, tool_reply(("mcp__tiny__echo", {"text": "allowed by a rule"}),
                                               ("mcp__tiny__add", {"a": 1, "b": 2})))
    try:
        assert result.status == "done", result
        echo, add = tool_results(session.messages)
        assert echo == "echo: allowed by a rule"
        assert add.startswith("Denied: invoke mcp__tiny__add: deny (default)"), add
    finally:
        await session.close()


async def test_x2_under_the_default_ask_a_read_only_tool_runs_unasked_and_a_changing_one_asks(tmp_path: Path) -> None:
    """X2 (unchanged): "a tool annotated read-only does not ask under the default ``ask``"; one that is
    not annotated asks."""
    ws = workspace(tmp_path, "{default: ask}")
    note = tmp_path / "note.txt"
    session, result = await run(ws, tool_reply(("mcp__tiny__echo", {"text": "unasked"})),
                                tool_reply(("mcp__tiny__note", {"path": str(note), "text": "x"})))
    try:
        assert result.status == "interrupted", result
        assert tool_results(session.messages) == ["echo: unasked"]
        [q] = result.pending
        assert q.payload["tool"] == "mcp__tiny__note"
        assert not note.exists()
    finally:
        await session.close()


async def test_p1_p2_built_in_read_tools_under_default_deny_are_judged_by_their_paths(tmp_path: Path) -> None:
    """P1/P2 (unchanged): ``ls``, ``read_file``, ``glob`` and ``grep`` are not refused for being tools
    under ``default: deny``: their paths decide — allowed under /project by the read rule, denied by the
    default elsewhere. The workbench's own read-only tools (``write_todos``) are not a server's claim."""
    ws = workspace(tmp_path, "{default: deny, rules: [{allow: read, path: '/project/**'}]}", mcp=False)
    (ws / "notes.md").write_text("hello\n", encoding="utf-8")
    session, result = await run(ws, tool_reply(
        ("ls", {"path": "/project"}),
        ("read_file", {"path": "/project/notes.md"}),
        ("glob", {"pattern": "*.md", "path": "/project"}),
        ("grep", {"pattern": "hello", "path": "/project"}),
        ("read_file", {"path": "/scratch/elsewhere.md"}),
        ("write_todos", {"todos": [{"content": "look", "status": "pending"}]}),
    ))
    try:
        assert result.status == "done", result
        ls, read, glob, grep, elsewhere, todos = tool_results(session.messages)
        assert "notes.md" in ls and "notes.md" in glob and "hello" in grep, (ls, glob, grep)
        assert read == "     1\thello"
        assert elsewhere.startswith("Denied: read /scratch/elsewhere.md: deny (default)"), elsewhere
        assert not todos.startswith("Denied"), todos
    finally:
        await session.close()


@pytest.mark.parametrize("default, server_tool, own_tool", [
    ("deny", "deny", "allow"),
    ("ask", "allow", "allow"),
    ("allow", "allow", "allow"),
])
def test_x2_p1_a_read_only_label_by_default(default: str, server_tool: str, own_tool: str) -> None:
    """X2/P1: the verdict on ``invoke`` with no rule matching, per default: a server's read-only tool is
    spared only the ``ask``; the workbench's own read-only tool (no path) is allowed as before."""
    async def nothing(args: dict[str, Any], ctx: Any) -> str:
        return ""

    served = Tool("mcp__srv__look", "", {"type": "object"}, nothing, changes_outside=False)
    own = Tool("write_todos", "", {"type": "object"}, nothing, changes_outside=False)
    perms = PermissionsMiddleware((), default)
    assert perms.judge("invoke", served.name, tool=served).effect == server_tool
    assert perms.judge("invoke", own.name, tool=own).effect == own_tool
