"""Permissions through the real Engine (P1–P4, M5, M6): rule order, approvals, "always", P4 memory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from workbench.backends import CompositeBackend, HostBackend
from workbench.config import PermissionRule, load_config, parse_config
from workbench.engine.agent import Agent, Engine
from workbench.engine.messages import ModelRequest
from workbench.engine.middleware import AgentMiddleware
from workbench.engine.models.scripted import ScriptedModel, reply, tool_reply
from workbench.engine.store import Store
from workbench.engine.tools import Tool, schema
from workbench.harness.files import FilesMiddleware
from workbench.harness.permissions import PermissionsMiddleware, match_path, match_tool

WRITE = ("write_file", {"path": "/project/notes.md", "content": "hello\n"})


def tool_texts(request: ModelRequest) -> list[str]:
    msgs = list(request.messages)
    last = max(i for i, m in enumerate(msgs) if m.role == "assistant")
    return [m.content for m in msgs[last + 1 :] if m.role == "tool"]


def rules(yaml_text: str) -> tuple[PermissionRule, ...]:
    return parse_config(yaml_text).permissions.rules


delegated: list[dict[str, Any]] = []


async def _delegate(args: dict[str, Any], ctx: Any) -> str:
    delegated.append(args)
    return "delegated"


DELEGATE = Tool("delegate_to_researcher", "Hand a task over.", schema({"task": {"type": "string"}}, ["task"]),
                _delegate)


class Env:
    def __init__(self, tmp_path: Path, perms: PermissionsMiddleware | None = None, extra=(),
                 store: Store | None = None) -> None:
        self.ws = tmp_path / "ws"
        self.ws.mkdir(exist_ok=True)
        self.model = ScriptedModel([])
        self.backend = CompositeBackend({"/project": HostBackend(self.ws)})
        self.perms = perms if perms is not None else PermissionsMiddleware(rules("model: demo\n"))
        self.store = store or Store(tmp_path / "store.sqlite3")
        agent = Agent(self.model, middleware=[*extra, self.perms, FilesMiddleware(self.backend)],
                      tools=[DELEGATE], backend=self.backend)
        self.engine = Engine(agent, self.store)

    async def run(self, *calls, then: str = "done", thread: str = "t"):
        del self.model.replies[self.model.calls :]  # drop what an unanswered interrupt left unplayed
        self.model.add(tool_reply(*calls), reply(then))
        return await self.engine.run(thread, "go")

    def last_tool_texts(self) -> list[str]:
        return tool_texts(self.model.requests[-1])

    @property
    def notes(self) -> Path:
        return self.ws / "notes.md"


# -- P1 rule order ---------------------------------------------------------------------------------------


async def test_P1_deny_beats_ask_and_allow_and_names_the_rule_and_line(tmp_path):
    text = ("permissions:\n  rules:\n    - {allow: write, path: '/project/**'}\n"
            "    - {ask: write, path: '/project/**'}\n    - {deny: write, path: '/project/*.md'}\n")
    env = Env(tmp_path, PermissionsMiddleware(rules(text)))
    result = await env.run(WRITE)
    assert result.status == "done" and not result.pending
    [out] = env.last_tool_texts()
    assert out.startswith("Denied: ")
    assert "'deny write /project/*.md' (workbench.yaml line 5)" in out
    assert not env.notes.exists()


async def test_P1_ask_beats_allow(tmp_path):
    text = "permissions:\n  rules:\n    - {allow: write, path: '/project/**'}\n    - {ask: write, path: '/project/*.md'}\n"
    env = Env(tmp_path, PermissionsMiddleware(rules(text), default="allow"))
    result = await env.run(WRITE)
    assert result.status == "interrupted"
    [q] = result.pending
    assert "matches 'ask write /project/*.md' (workbench.yaml line 4)" in q.payload["reason"]
    assert not env.notes.exists()


async def test_P1_allow_applies_when_no_deny_or_ask_matches(tmp_path):
    text = "permissions:\n  rules:\n    - {allow: write, path: '/project/**'}\n    - {ask: write, path: '/other/**'}\n"
    env = Env(tmp_path, PermissionsMiddleware(rules(text), default="deny"))
    result = await env.run(WRITE)
    assert result.status == "done" and not result.pending
    assert env.last_tool_texts() == ["Wrote /project/notes.md (6 bytes)."]
    assert env.notes.read_text() == "hello\n"


async def test_P1_default_deny_applies_when_nothing_matches(tmp_path):
    env = Env(tmp_path, PermissionsMiddleware((), default="deny"))
    await env.run(WRITE)
    [out] = env.last_tool_texts()
    assert out.startswith("Denied: ") and "write /project/notes.md: deny (default)" in out
    assert not env.notes.exists()


async def test_P1_out_of_the_box_reads_and_read_only_tools_are_not_asked(tmp_path):
    env = Env(tmp_path, PermissionsMiddleware((), default="ask"))  # not even the allow-read rule
    env.notes.write_text("hi\n")
    result = await env.run(("read_file", {"path": "/project/notes.md"}), ("ls", {"path": "/project"}),
                           ("grep", {"pattern": "hi", "path": "/project"}))
    assert result.status == "done", result.pending
    assert env.last_tool_texts()[0] == "     1\thi"


async def test_P1_ask_rule_on_a_tool_name_glob_names_rule_and_line(tmp_path):
    text = "model: demo\npermissions:\n  rules:\n    - {ask: invoke, tool: 'delegate_to_*'}\n"
    env = Env(tmp_path, PermissionsMiddleware(rules(text), default="allow"))
    delegated.clear()
    result = await env.run(("delegate_to_researcher", {"task": "look"}))
    assert result.status == "interrupted"
    [q] = result.pending
    assert q.payload["reason"] == ("invoke delegate_to_researcher matches 'ask invoke delegate_to_*' "
                                   "(workbench.yaml line 4)")
    assert delegated == []


# -- P2 default resources ---------------------------------------------------------------------------------


async def test_P2_every_tool_checks_invoke_and_file_tools_also_check_their_path(tmp_path):
    text = ("permissions:\n  rules:\n    - {deny: read, path: '/project/secret/**'}\n"
            "    - {deny: write, path: '/project/locked/**'}\n"
            "    - {deny: invoke, tool: delegate_to_researcher}\n")
    env = Env(tmp_path, PermissionsMiddleware(rules(text), default="allow"))
    (env.ws / "secret").mkdir()
    (env.ws / "secret" / "key.txt").write_text("s3cret\n")
    (env.ws / "open.txt").write_text("fine\n")
    delegated.clear()
    result = await env.run(("read_file", {"path": "/project/secret/key.txt"}),
                           ("grep", {"pattern": "s3cret", "path": "/project/secret"}),
                           ("write_file", {"path": "/project/locked/a.md", "content": "x"}),
                           ("delegate_to_researcher", {"task": "look"}),
                           ("read_file", {"path": "/project/open.txt"}))
    assert result.status == "done" and not result.pending
    read_secret, grep_secret, write_locked, delegate, read_open = env.last_tool_texts()
    # file tools: their path is a read (or write) resource, judged by the path rules
    assert read_secret.startswith("Denied: ") and "read /project/secret/key.txt matches" in read_secret
    assert "s3cret" not in read_secret
    assert grep_secret.startswith("Denied: ") and "read /project/secret matches" in grep_secret
    assert write_locked.startswith("Denied: ") and "write /project/locked/a.md matches" in write_locked
    assert not (env.ws / "locked").exists()
    # every tool: "invoke <tool name>", even one that takes no path
    assert delegate.startswith("Denied: ") and "invoke delegate_to_researcher matches" in delegate
    assert delegated == []
    # no rule matches: the call runs
    assert read_open == "     1\tfine"


async def test_P2_a_file_tool_without_a_path_argument_still_checks_its_default_path(tmp_path):
    env = Env(tmp_path, PermissionsMiddleware(rules("permissions:\n  rules:\n    - {deny: read, path: '/**'}\n"),
                                              default="allow"))
    env.notes.write_text("s3cret\n")
    await env.run(("grep", {"pattern": "s3cret"}), ("glob", {"pattern": "**/*.md"}), ("ls", {}))
    for out in env.last_tool_texts():
        assert out.startswith("Denied: "), out


def test_glob_matching_of_paths_and_tools():
    assert match_path("/project/**", "/project/a/b/c.py") and match_path("/project/**", "/project")
    assert match_path("/project/*.md", "/project/a.md") and not match_path("/project/*.md", "/project/d/a.md")
    assert match_path("/project/?.md", "/project/a.md") and not match_path("/project/?.md", "/project/ab.md")
    assert match_path("/project/**/*.py", "/project/x.py") and match_path("/project/**/*.py", "/project/a/b/x.py")
    assert match_path("/project/.git/**", "/project/src/../.git/config")  # normalized before matching
    assert not match_path("/project/**", "/projectile/a")
    assert match_tool("delegate_to_*", "delegate_to_x") and not match_tool("delegate_to_*", "write_file")


# -- P3 decisions -----------------------------------------------------------------------------------------


async def test_P3_default_ask_for_write_interrupts_with_a_tool_approval(tmp_path):
    env = Env(tmp_path)
    result = await env.run(WRITE)
    assert result.status == "interrupted"
    [q] = result.pending
    assert q.kind == "tool_approval" and q.id.startswith("approval-") and q.call_id and q.id == f"approval-{q.call_id}"
    assert q.payload["tool"] == "write_file"
    assert q.payload["arguments"] == WRITE[1]
    assert q.payload["reason"] == "write /project/notes.md: ask (default for writes)"
    assert not env.notes.exists()


async def test_P3_approve_runs_the_call(tmp_path):
    env = Env(tmp_path)
    result = await env.run(WRITE)
    result = await env.engine.resume("t", {result.pending[0].id: "approve"})
    assert result.status == "done"
    assert env.notes.read_text() == "hello\n"
    assert env.last_tool_texts() == ["Wrote /project/notes.md (6 bytes)."]


async def test_P3_reject_tells_the_model_the_message_and_writes_nothing(tmp_path):
    env = Env(tmp_path)
    result = await env.run(WRITE)
    result = await env.engine.resume("t", {result.pending[0].id: {"decision": "reject", "message": "not in notes"}})
    assert result.status == "done"
    [out] = env.last_tool_texts()
    assert "Rejected" in out and "not in notes" in out
    assert not env.notes.exists()


async def test_P3_edit_runs_the_call_with_the_edited_arguments(tmp_path):
    env = Env(tmp_path)
    result = await env.run(WRITE)
    edited = {"path": "/project/notes.md", "content": "edited by the user\n"}
    result = await env.engine.resume("t", {result.pending[0].id: {"decision": "edit", "arguments": edited}})
    assert result.status == "done"
    assert env.notes.read_text() == "edited by the user\n"


async def test_P3_edit_cannot_escape_a_deny_rule(tmp_path):
    env = Env(tmp_path, PermissionsMiddleware(rules("permissions:\n  rules:\n    - {deny: write, path: '/project/.git/**'}\n")))
    result = await env.run(WRITE)
    edited = {"path": "/project/.git/config", "content": "x"}
    result = await env.engine.resume("t", {result.pending[0].id: {"decision": "edit", "arguments": edited}})
    [out] = env.last_tool_texts()
    # P6: the denial stays first; the last line notes that the person edited the call, and how.
    assert out.startswith("Denied: ") and "deny write /project/.git/**" in out
    assert "person edited" in out.splitlines()[-1] and "/project/.git/config" in out.splitlines()[-1]
    assert not (env.ws / ".git" / "config").exists()


async def test_P3_respond_answers_in_place_of_the_tool(tmp_path):
    env = Env(tmp_path)
    result = await env.run(WRITE)
    result = await env.engine.resume("t", {result.pending[0].id: {"decision": "respond",
                                                                   "message": "The notes live in the wiki."}})
    assert result.status == "done"
    assert env.last_tool_texts() == ["The notes live in the wiki."]
    assert not env.notes.exists()


# -- P4 rejection memory ------------------------------------------------------------------------------------


async def test_P4_a_rejected_call_is_not_asked_again_in_the_run_but_is_in_a_new_run(tmp_path):
    env = Env(tmp_path)
    env.model.add(tool_reply(WRITE), tool_reply(WRITE), reply("ok, I give up"))
    result = await env.engine.run("t", "go")
    assert result.status == "interrupted"
    result = await env.engine.resume("t", {result.pending[0].id: {"decision": "reject", "message": "no"}})
    assert result.status == "done", result.pending  # the retry was refused without asking
    [out] = env.last_tool_texts()
    assert "already rejected" in out
    assert not env.notes.exists()
    result = await env.run(WRITE)  # a new run asks again
    assert result.status == "interrupted"
    assert result.pending[0].payload["tool"] == "write_file"


# -- P3 "always" ---------------------------------------------------------------------------------------------


async def test_P3_always_session_allows_the_same_resources_later_in_the_thread(tmp_path):
    env = Env(tmp_path)
    result = await env.run(WRITE)
    result = await env.engine.resume("t", {result.pending[0].id: {"decision": "approve", "always": "session"}})
    assert result.status == "done"
    saved = env.store.latest_checkpoint("t").state["permission_rules"]
    assert [{k: v for k, v in d.items() if k != "seal"} for d in saved] == [
        {"effect": "allow", "action": "write", "pattern": "/project/notes.md"}]
    assert len(saved[0]["seal"]) == 32  # W1: sealed on this account (tests/harness/test_sealed_rules.py)
    # A later run, same resources: not asked.
    result = await env.run(("write_file", {"path": "/project/notes.md", "content": "again\n"}))
    assert result.status == "done" and not result.pending
    assert env.notes.read_text() == "again\n"
    # Other resources still ask, and so does another thread.
    result = await env.run(("write_file", {"path": "/project/other.md", "content": "x"}))
    assert result.status == "interrupted"
    result = await env.run(WRITE, thread="t2")
    assert result.status == "interrupted"


async def test_P3_always_session_never_beats_deny_but_beats_ask(tmp_path):
    text = "permissions:\n  rules:\n    - {ask: write, path: '/project/**'}\n    - {deny: write, path: '/project/locked/**'}\n"
    env = Env(tmp_path, PermissionsMiddleware(rules(text)))
    result = await env.run(WRITE)
    result = await env.engine.resume("t", {result.pending[0].id: {"decision": "approve", "always": "session"}})
    assert result.status == "done"
    result = await env.run(WRITE)
    assert result.status == "done" and not result.pending  # session allow beat the configured ask
    verdict = env.perms.judge("write", "/project/locked/a", session=[
        PermissionRule("allow", "write", "/project/**")])
    assert verdict.effect == "deny"


async def test_P3_always_project_saves_the_rule_and_a_reloaded_config_allows_it(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    cfg = ws / "workbench.yaml"
    cfg.write_text("# my workspace\nmodel: demo\npermissions:\n  rules:\n"
                   "    - {allow: read, path: '/**'}  # reads are fine\n")
    env = Env(tmp_path, PermissionsMiddleware.from_config(load_config(ws), project_config=cfg))
    result = await env.run(WRITE)
    result = await env.engine.resume("t", {result.pending[0].id: {"decision": "approve", "always": "project"}})
    assert result.status == "done"
    text = cfg.read_text()
    assert text.startswith("# my workspace\nmodel: demo\n") and "# reads are fine" in text
    saved = load_config(ws).permissions.rules
    assert [str(r) for r in saved] == ["allow read /**", "allow write /project/notes.md"]
    assert saved[1].line == 6
    # A fresh middleware from the reloaded config, on a new thread of a new engine: not asked.
    env.notes.unlink()
    fresh = Env(tmp_path, PermissionsMiddleware.from_config(load_config(ws), project_config=cfg),
                store=Store(tmp_path / "other.sqlite3"))
    result = await fresh.run(WRITE, thread="new")
    assert result.status == "done" and not result.pending
    assert env.notes.read_text() == "hello\n"
    result = await fresh.run(("write_file", {"path": "/project/b.md", "content": "x"}), thread="new")
    assert result.status == "interrupted"


async def test_P3_always_project_creates_the_file_when_missing(tmp_path):
    cfg = tmp_path / "ws" / "workbench.yaml"
    env = Env(tmp_path, PermissionsMiddleware(rules("model: demo\n"), project_config=cfg))
    result = await env.run(("delegate_to_researcher", {"task": "t"}))
    assert result.status == "interrupted"
    result = await env.engine.resume("t", {result.pending[0].id: {"decision": "approve", "always": "project"}})
    assert result.status == "done"
    saved = [str(r) for r in load_config(cfg.parent).permissions.rules]
    assert saved == ["allow read /**", "allow invoke delegate_to_researcher"]


async def test_P3_always_project_keeps_the_session_rule_when_the_file_cant_be_written(tmp_path, caplog):
    cfg = tmp_path / "ws" / "workbench.yaml"
    cfg.parent.mkdir()
    cfg.write_text("permissions: [1, 2]\n")  # not something we can append to
    env = Env(tmp_path, PermissionsMiddleware(rules("model: demo\n"), project_config=cfg))
    result = await env.run(WRITE)
    result = await env.engine.resume("t", {result.pending[0].id: {"decision": "approve", "always": "project"}})
    assert result.status == "done"
    assert cfg.read_text() == "permissions: [1, 2]\n"
    assert "could not save the permission rule" in caplog.text
    result = await env.run(WRITE)
    assert result.status == "done" and not result.pending


# -- M5 / M6 ---------------------------------------------------------------------------------------------------


class HideWrites(AgentMiddleware):
    """Filters write_file out of the tools offered (not a permission control, M5)."""

    async def wrap_model_call(self, request, call_next, ctx):
        return await call_next(request.replace(tools=tuple(t for t in request.tools if t.name != "write_file")))


async def test_M5_a_tool_not_offered_still_goes_through_the_permission_check(tmp_path):
    perms = PermissionsMiddleware(rules("permissions:\n  rules:\n    - {deny: invoke, tool: 'write_*'}\n"),
                                  default="allow")
    env = Env(tmp_path, perms, extra=[HideWrites()])
    result = await env.run(WRITE)
    assert "write_file" not in {t.name for t in env.model.requests[0].tools}
    assert result.status == "done"
    [out] = env.last_tool_texts()
    assert out.startswith("Denied: ") and "'deny invoke write_*' (workbench.yaml line 3)" in out
    assert not env.notes.exists()


async def test_P2_searches_never_show_files_a_deny_read_rule_covers(tmp_path):
    """grep/glob/ls are allowed on /project, but what they reach below it is judged too."""
    from workbench.engine.models.scripted import ScriptedModel, reply, tool_reply
    from workbench.session import Session

    ws = tmp_path / "ws"
    (ws / "secret").mkdir(parents=True)
    (ws / "secret" / "keys.md").write_text("token s3cret\n")
    (ws / "notes.md").write_text("no s3cret here, just notes\n")
    (ws / "workbench.yaml").write_text(
        "permissions:\n  rules:\n    - {allow: read, path: '/**'}\n    - {deny: read, path: '/project/secret/**'}\n"
    )
    model = ScriptedModel([
        tool_reply(("grep", {"pattern": "s3cret", "path": "/project"}), ("glob", {"pattern": "**/*.md",
                   "path": "/project"}), ("ls", {"path": "/project/secret"})),
        reply("done"),
    ])
    session = await Session.open(ws, model=model)
    assert (await session.run("search")).status == "done"
    grep, glob, ls = [m.content for m in model.requests[-1].messages if m.role == "tool"]
    assert "/project/notes.md" in grep and "keys.md" not in grep and "token" not in grep
    assert "/project/notes.md" in glob and "keys.md" not in glob
    assert "keys.md" not in ls


# -- P3 "always: user" ----------------------------------------------------------------------------------------


async def test_P3_always_user_saves_the_rule_to_the_user_file_and_every_workspace_loads_it(tmp_path):
    from workbench.harness.permissions import load_user_rules, user_rules_path
    from workbench.harness.stack import build_middleware

    user_file = user_rules_path()
    env = Env(tmp_path, PermissionsMiddleware(rules("model: demo\n"), user_config=user_file))
    result = await env.run(("delegate_to_researcher", {"task": "t"}))
    result = await env.engine.resume("t", {result.pending[0].id: {"decision": "approve", "always": "user"}})
    assert result.status == "done"
    assert [str(r) for r in load_user_rules(user_file)] == ["allow invoke delegate_to_researcher"]  # no seed
    assert not (env.ws / "workbench.yaml").exists()
    # Another workspace, built the standard way: the user rule applies there, with no asking.
    other = tmp_path / "other"
    other.mkdir()
    stack = build_middleware(load_config(other), other, env.backend)
    perms = next(m for m in stack if isinstance(m, PermissionsMiddleware))
    verdict = perms.judge("invoke", "delegate_to_researcher")
    assert verdict.effect == "allow" and str(user_file) in verdict.reason


async def test_P3_a_user_allow_rule_never_beats_a_workspace_deny_or_ask(tmp_path):
    from workbench.harness.permissions import user_rules_path

    user_file = user_rules_path()
    user_file.parent.mkdir(parents=True, exist_ok=True)
    user_file.write_text("permissions:\n  rules:\n    - {allow: write, path: '/project/**'}\n")
    ws_rules = rules("permissions:\n  rules:\n    - {deny: write, path: '/project/.git/**'}\n"
                     "    - {ask: write, path: '/project/docs/**'}\n")
    perms = PermissionsMiddleware(ws_rules, user_config=user_file)
    assert perms.judge("write", "/project/a.md").effect == "allow"
    assert perms.judge("write", "/project/.git/config").effect == "deny"
    assert perms.judge("write", "/project/docs/a.md").effect == "ask"


def test_P3_a_broken_user_rules_file_is_a_config_error_naming_the_file_and_line(tmp_path):
    from workbench.errors import ConfigError
    from workbench.harness.permissions import user_rules_path

    user_file = user_rules_path()
    user_file.parent.mkdir(parents=True, exist_ok=True)
    user_file.write_text("permissions:\n  rules:\n    - {allow: fly, path: '/**'}\n")
    with pytest.raises(ConfigError, match=r"permissions\.yaml:3: permissions\.rules\[0\]"):
        PermissionsMiddleware([], user_config=user_file)


@pytest.mark.parametrize("name", ["permissions.yaml", "trusted_workspaces.json", "settings.json"])
async def test_P3_the_agent_cannot_write_the_user_rules_trust_record_or_settings(tmp_path, name):
    """Else one approved write_file would hand the agent an allow rule (P3), trust a workspace (W1) or
    send the key elsewhere with api_base (W2): these files are protected (F4)."""
    from workbench.backends import BackendRefusal
    from workbench.config import user_config_dir
    from workbench.harness.stack import build_backend

    ws = tmp_path / "ws"
    ws.mkdir()
    user_config_dir().mkdir(parents=True, exist_ok=True)
    cfg = parse_config(f"mounts:\n  /project: {{host: {ws}}}\n  /user: {{host: {user_config_dir()}}}\n")
    backend = build_backend(cfg, ws, ws / ".workbench" / "threads.sqlite3")
    with pytest.raises(BackendRefusal, match="protected path"):
        await backend.write(f"/user/{name}", "{}")
    assert not (user_config_dir() / name).exists()
    assert f"/user/{name}" not in [i.path for i in await backend.list("/user")]


def test_P3_a_verdicts_reason_names_where_its_rule_is_now(tmp_path):
    """A rule's part of a reason is remembered per rule (issue 9), never past a change of where it is:
    a rule the rule builder adds for the session, a sub-agent following its parent's files."""
    yaml = "model: demo\npermissions:\n  rules:\n    - {allow: read, path: /**}\n"
    (tmp_path / "workbench.yaml").write_text(yaml)
    perms = PermissionsMiddleware(load_config(tmp_path).permissions.rules, project_config=tmp_path / "workbench.yaml")
    assert perms.judge("read", "/project/a.md").reason == \
        "read /project/a.md matches 'allow read /**' (workbench.yaml line 4)"
    assert perms.judge("read", "/project/b.md").reason == \
        "read /project/b.md matches 'allow read /**' (workbench.yaml line 4)"
    ask = PermissionRule(effect="ask", action="read", pattern="/project/**", line=9)
    perms.session_added.append(ask)
    assert perms.judge("read", "/project/a.md").reason == \
        "read /project/a.md matches 'ask read /project/**' (a rule for this session)"
    perms.session_added.remove(ask)
    perms.rules.append(ask)  # the same rule object, in the file's rules since
    assert perms.judge("read", "/project/a.md").reason == \
        "read /project/a.md matches 'ask read /project/**' (workbench.yaml line 9)"

    other = tmp_path / "other"
    other.mkdir()
    (other / "workbench.yaml").write_text(yaml)
    parent_rules = load_config(other).permissions.rules
    parent = PermissionsMiddleware(parent_rules, project_config=other / "renamed.yaml")
    child = PermissionsMiddleware(parent_rules)  # the same rule objects, no file of its own
    assert child.judge("read", "/x").reason == "read /x matches 'allow read /**' (workbench.yaml line 4)"
    child.follow(parent)
    assert child.judge("read", "/x").reason == "read /x matches 'allow read /**' (renamed.yaml line 4)"


def test_a_user_rules_file_with_a_value_yaml_cannot_convert_is_a_config_error_naming_it(tmp_path):
    from workbench.errors import ConfigError
    from workbench.harness.permissions import load_user_rules

    path = tmp_path / "permissions.yaml"
    path.write_text("permissions:\n  rules:\n    - {allow: read, path: !!int x}\n")
    with pytest.raises(ConfigError, match=rf"{path}:3: 'x' is not a valid !!int value"):
        load_user_rules(path)
