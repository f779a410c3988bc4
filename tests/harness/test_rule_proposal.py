"""The rule builder's engine side (Q3, P1, P3, W1): proposing a rule at file / folder / tree level,
previewing the earlier calls it matches across the workspace's threads, and saving it to the
session, the project's workbench.yaml or the user's permissions.yaml with every comment kept."""

from __future__ import annotations

import posixpath
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from workbench import Session
from workbench.backends.base import is_under
from workbench.config import PermissionRule, load_config, parse_config
from workbench.engine.models.scripted import ScriptedModel, reply, tool_reply
from workbench.harness.permissions import PermissionsMiddleware, exact_pattern, match_path, user_rules_path
from workbench.harness.rule_proposal import (
    PastCall,
    build_rule,
    path_pattern,
    preview,
    rule_yaml,
    save_rule,
    with_rule,
)

COMMENTED = """\
# My project's settings: keep this comment
model: demo                       # the offline model
permissions:
  default: ask                     # for calls no rule matches
  rules:
    - {allow: read,   path: "/**"}          # aligned on purpose
    # never touch git
    - {deny:  write,  path: "/project/.git/**"}
budget:
- {scope: run, limit: {total_tokens: 200000}}
"""


def _write(path: str, content: str = "x") -> tuple[str, dict[str, str]]:
    return ("write_file", {"path": path, "content": content})


async def _session_with_history(ws: Path, *calls_per_thread: list[tuple[str, dict[str, str]]]) -> Session:
    """A session whose threads each made these calls (each approved once), then a fresh thread."""
    session = None
    for calls in calls_per_thread:
        model = ScriptedModel([tool_reply(*calls), reply("ok")])
        session = await Session.open(ws, model=model)
        result = await session.run("go")
        if result.status == "interrupted":
            result = await session.resume({q.id: {"decision": "approve"} for q in result.pending})
        assert result.status == "done", result.error
        await session.close()
    return await Session.open(ws, model=ScriptedModel([]))


# -- building: levels --------------------------------------------------------------------------------------


def test_Q3_levels_make_the_file_the_folder_and_the_tree_pattern():
    assert path_pattern("/project/src/a.py", "file") == "/project/src/a.py"
    assert path_pattern("/project/src/a.py", "folder") == "/project/src/*"
    assert path_pattern("/project/src/a.py", "tree") == "/project/src/**"
    assert path_pattern("/project//src/./b/../a.py", "folder") == "/project/src/*"  # canonical first (P5)
    assert path_pattern("/a.txt", "folder") == "/*" and path_pattern("/a.txt", "tree") == "/**"
    assert build_rule("deny", "invoke", "execute", "tool").pattern == "execute"
    assert build_rule("allow", "invoke", "mcp_*", "glob").pattern == "mcp_*"
    assert build_rule("allow", "invoke", "odd*name", "tool").pattern == "odd[*]name"
    assert rule_yaml(build_rule("allow", "write", "/project/src/a.py", "folder")) == \
        '{allow: write, path: "/project/src/*"}'
    with pytest.raises(ValueError, match="level"):
        build_rule("allow", "write", "/project/a", "everything")
    with pytest.raises(ValueError, match="effect"):
        build_rule("permit", "write", "/project/a", "file")


def test_Q3_P3_an_exact_pattern_escapes_braces_so_always_covers_that_file_only():
    """Regression: ``{a,b}`` is an alternative in path rules, and exact_pattern left it as is — an
    "Always" on /project/x{a,b}.py saved a rule that allowed /project/xa.py and /project/xb.py and
    not the file itself (before the fix: match_path(...) was False for the file, True for xa.py)."""
    pattern = exact_pattern("/project/x{a,b}.py")
    assert match_path(pattern, "/project/x{a,b}.py")
    assert not match_path(pattern, "/project/xa.py") and not match_path(pattern, "/project/xb.py")


# The property: a built rule, saved to a file and loaded back, covers exactly the paths the level
# says — by an oracle independent of the matcher — and the preview lists exactly those.
_SEGMENT = st.lists(st.sampled_from(list("ab.-_*?[]{},!^\\ é") + ["e\u0301"]), min_size=1, max_size=6) \
    .map("".join).filter(lambda s: s not in (".", ".."))  # é both composed and decomposed (NFC, P5)
_PATH = st.lists(_SEGMENT, min_size=1, max_size=4).map(lambda parts: "/" + "/".join(parts))


def _family(chosen: str, others: list[str]) -> list[str]:
    """Paths near the chosen one: itself, siblings, children, its folder, the parent's siblings."""
    folder = posixpath.dirname(chosen)
    near = [chosen, folder, folder + "/other", chosen + "/below", folder + "/sub/deep",
            posixpath.dirname(folder) + "/x", folder + "x/y", chosen + "x"]
    return near + others


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(chosen=_PATH, others=st.lists(_PATH, max_size=8), level=st.sampled_from(["file", "folder", "tree"]),
       effect=st.sampled_from(["allow", "ask", "deny"]))
def test_Q3_a_saved_rule_matches_exactly_what_the_preview_said_and_never_more_than_the_level(
        tmp_path_factory, chosen, others, level, effect):
    import unicodedata

    from workbench.harness.permissions import _canonical

    rule = build_rule(effect, "write", chosen, level)
    # Saved and read back: the pattern survives the YAML round trip unchanged.
    yaml_file = tmp_path_factory.mktemp("rp") / "workbench.yaml"
    yaml_file.write_text(COMMENTED, encoding="utf-8")
    perms = PermissionsMiddleware(parse_config(COMMENTED).permissions.rules, project_config=yaml_file)
    saved = save_rule(perms, rule, "project")
    loaded = load_config(yaml_file.parent).permissions.rules
    assert loaded[-1] == PermissionRule(rule.effect, rule.action, rule.pattern, saved.line)

    paths = _family(chosen, others)
    calls = [PastCall("t", "T", f"c{i}", "write_file", {"path": p, "content": ""}) for i, p in enumerate(paths)]
    from workbench.harness.files import FilesMiddleware

    tools = {t.name: t for t in FilesMiddleware(None).tools()}  # type: ignore[arg-type]
    shown = {e.call.arguments["path"] for e in preview(perms, loaded[-1], "project", calls, tools)}
    base = unicodedata.normalize("NFC", _canonical(chosen))
    for p in paths:
        c = unicodedata.normalize("NFC", _canonical(p))
        want = {"file": c == base,
                "folder": c != "/" and posixpath.dirname(c) == posixpath.dirname(base),
                "tree": is_under(c, posixpath.dirname(base))}[level]
        assert match_path(loaded[-1].pattern, p) == want, (level, chosen, p, loaded[-1].pattern)
        assert (p in shown) == want, (level, chosen, p)


# -- preview across the workspace's threads -----------------------------------------------------------------


async def test_Q3_preview_lists_earlier_calls_of_every_thread_the_rule_matches_and_what_changes(tmp_path):
    ws = tmp_path / "ws"
    (ws / "src" / "deep").mkdir(parents=True)
    session = await _session_with_history(
        ws, [_write("/project/src/a.py"), _write("/project/src/deep/b.py")], [_write("/project/README.md")],
        [_write("/project/src/c.py")])
    history = await session.rule_history()
    assert {c.arguments["path"] for c in history} == {"/project/src/a.py", "/project/src/deep/b.py",
                                                      "/project/README.md", "/project/src/c.py"}
    assert len({c.thread_id for c in history}) == 3

    folder = session.build_rule("allow", "write", "/project/src/a.py", "folder")
    entries = await session.preview_rule(folder, "project", history)
    assert sorted(e.call.arguments["path"] for e in entries) == ["/project/src/a.py", "/project/src/c.py"]
    assert all(e.before == "ask" and e.after == "allow" and e.changes for e in entries)
    tree = session.build_rule("allow", "write", "/project/src/a.py", "tree")
    assert len(await session.preview_rule(tree, "session", history)) == 3
    # A deny on the tool matches every write_file call and would refuse them.
    deny = session.build_rule("deny", "invoke", "write_file", "tool")
    entries = await session.preview_rule(deny, "session", history)
    assert len(entries) == 4 and {e.after for e in entries} == {"deny"}
    await session.close()


async def test_Q3_preview_is_honest_when_a_configured_ask_still_wins_over_a_saved_allow(tmp_path):
    """Deny, then ask, then allow (P1): an allow saved to the project does not stop an ask rule of the
    same file, and the preview says the call still asks instead of promising otherwise."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "workbench.yaml").write_text("model: demo\npermissions:\n  rules:\n    - {allow: read, path: '/**'}\n"
                                       "    - {ask: write, path: '/project/**'}\n", encoding="utf-8")
    session = await _session_with_history(ws, [_write("/project/a.txt")])
    rule = session.build_rule("allow", "write", "/project/a.txt", "file")
    [entry] = await session.preview_rule(rule, "project")
    assert (entry.before, entry.after) == ("ask", "ask")
    [entry] = await session.preview_rule(rule, "session")  # a session allow ranks like "Always"
    assert (entry.before, entry.after) == ("ask", "allow")
    await session.close()


async def test_Q3_preview_uses_the_arguments_that_ran_for_an_edited_call(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    model = ScriptedModel([tool_reply(_write("/project/model.txt")), reply("ok")])
    session = await Session.open(ws, model=model)
    result = await session.run("go")
    result = await session.resume({result.pending[0].id: {
        "decision": "edit", "arguments": {"path": "/project/edited.txt", "content": "y"}}})
    assert result.status == "done"
    [call] = await session.rule_history()
    assert call.arguments["path"] == "/project/edited.txt" and call.edited
    await session.close()


# -- saving: scopes, comments kept, trust kept ---------------------------------------------------------------


async def test_Q3_save_to_the_project_keeps_every_byte_and_the_next_run_does_not_ask(tmp_path):
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "workbench.yaml").write_text(COMMENTED, encoding="utf-8")
    session = await _session_with_history(ws, [_write("/project/src/a.py")])
    rule = session.build_rule("allow", "write", "/project/src/a.py", "folder")
    saved = await session.save_rule(rule, "project")
    after = (ws / "workbench.yaml").read_text(encoding="utf-8")
    before_lines, after_lines = COMMENTED.splitlines(), after.splitlines()
    # Exactly one line was added, after the last rule; every other line is byte for byte the same.
    assert len(after_lines) == len(before_lines) + 1
    added = after_lines[saved.line - 1]
    assert after_lines[:saved.line - 1] + after_lines[saved.line:] == before_lines
    assert added.startswith('    - {allow: write, path: "/project/src/*"}  # rule builder, ')
    assert saved.file == ws / "workbench.yaml" and saved.notice == ""
    await session.close()
    # A new session (a second run) writes another file of that folder without asking.
    model = ScriptedModel([tool_reply(_write("/project/src/new.py")), reply("ok")])
    again = await Session.open(ws, model=model)
    result = await again.run("write another")
    assert result.status == "done" and not result.pending
    assert (ws / "src" / "new.py").exists()
    await again.close()


async def test_Q3_save_for_the_session_counts_at_once_keeps_through_a_reopen_and_touches_no_file(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "workbench.yaml").write_text(COMMENTED, encoding="utf-8")
    model = ScriptedModel([tool_reply(_write("/project/a.txt")), reply("ok"),
                           tool_reply(_write("/project/b.txt")), reply("ok")])
    session = await Session.open(ws, model=model)
    await session.save_rule(session.build_rule("allow", "write", "/project/a.txt", "folder"), "session")
    assert (await session.run("one")).status == "done"
    session.new_thread()  # every thread of this session
    assert (await session.run("two")).status == "done"
    assert (ws / "workbench.yaml").read_text(encoding="utf-8") == COMMENTED
    await session.close()
    # Reopened in the same app session (a changed workbench.yaml is read again, G9): still there.
    reopened = await Session.open(ws, model=ScriptedModel([tool_reply(_write("/project/c.txt")), reply("ok")]))
    assert (await reopened.run("three")).status == "done"
    await reopened.close()
    # Another workspace is not touched by it.
    other = tmp_path / "other"
    other.mkdir()
    elsewhere = await Session.open(other, model=ScriptedModel([tool_reply(_write("/project/a.txt")), reply("ok")]))
    assert (await elsewhere.run("four")).status == "interrupted"
    await elsewhere.close()


async def test_Q3_a_session_deny_refuses_and_beats_an_always_allow(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    model = ScriptedModel([tool_reply(_write("/project/secret/k.txt")), reply("ok")])
    session = await Session.open(ws, model=model)
    await session.save_rule(session.build_rule("deny", "write", "/project/secret/k.txt", "tree"), "session")
    result = await session.run("go")
    assert result.status == "done" and not (ws / "secret" / "k.txt").exists()
    await session.close()


async def test_Q3_save_to_the_user_file_keeps_its_comments_and_applies_in_every_workspace(tmp_path):
    user_file = user_rules_path()
    user_file.parent.mkdir(parents=True, exist_ok=True)
    original = "# my own rules\npermissions:\n  rules:\n    - {allow: read, path: '/**'}  # reads\n"
    user_file.write_text(original, encoding="utf-8")
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    session = await Session.open(one, model=ScriptedModel([]))
    saved = await session.save_rule(session.build_rule("allow", "invoke", "delegate_*", "glob"), "user")
    text = user_file.read_text(encoding="utf-8")
    assert text.startswith(original) and text.count("\n") == original.count("\n") + 1
    assert saved.file == user_file and 'tool: "delegate_*"' in text.splitlines()[saved.line - 1]
    assert not (one / "workbench.yaml").exists()
    await session.close()
    other = await Session.open(two, model=ScriptedModel([]))
    perms = other.middleware(PermissionsMiddleware)
    assert perms.judge("invoke", "delegate_to_x").effect == "allow"
    await other.close()


async def test_W1_Q3_a_rule_saved_to_a_trusted_project_keeps_it_trusted(tmp_path, monkeypatch):
    """Saving an allow-write rule adds a trust request (W1); the person made it, so their trusted
    workspace stays trusted. An untrusted one stays untrusted (and says so)."""
    monkeypatch.delenv("WORKBENCH_TRUST", raising=False)
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "workbench.yaml").write_text(COMMENTED, encoding="utf-8")
    assert Session.trust_requests(ws) == []
    session = await Session.open(ws, model=ScriptedModel([]))
    saved = await session.save_rule(session.build_rule("allow", "write", "/project/x/y.py", "tree"), "project")
    assert saved.notice == ""
    assert Session.trust_requests(ws) == []  # still trusted, with the new rule in the hash
    reopened = await Session.open(ws, model=ScriptedModel([]))
    assert reopened.ignored == ()
    assert reopened.middleware(PermissionsMiddleware).judge("write", "/project/x/z/q.py").effect == "allow"
    await reopened.close()
    await session.close()

    other = tmp_path / "other"
    other.mkdir()
    (other / "workbench.yaml").write_text("model: demo\napi_base: http://203.0.113.9/v1\n", encoding="utf-8")
    session = await Session.open(other, model=ScriptedModel([]))
    saved = await session.save_rule(session.build_rule("allow", "write", "/project/a", "file"), "project")
    assert "not trusted" in saved.notice and "counts once you trust" in saved.notice
    assert any(r.key == "api_base" for r in Session.trust_requests(other))
    await session.close()


def test_Q3_with_rule_judges_a_copy_and_changes_nothing():
    perms = PermissionsMiddleware(parse_config("model: demo\n").permissions.rules)
    rule = PermissionRule("allow", "write", "/project/**")
    other = with_rule(perms, rule, "project")
    assert other.judge("write", "/project/a").effect == "allow"
    assert perms.judge("write", "/project/a").effect == "ask" and rule not in perms.rules


async def test_P3_Q3_the_approval_says_exactly_what_always_saves(tmp_path):
    """The tool_approval question carries the exact rules an "Always" answer saves (the dialog shows
    them), and an "Always (this project)" line in workbench.yaml says where it came from."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "workbench.yaml").write_text(COMMENTED, encoding="utf-8")
    model = ScriptedModel([tool_reply(_write("/project/notes.md")), reply("ok")])
    session = await Session.open(ws, model=model)
    result = await session.run("go")
    [q] = result.pending
    assert q.payload["always"] == ["allow write /project/notes.md"]
    result = await session.resume({q.id: {"decision": "approve", "always": "project"}})
    assert result.status == "done"
    lines = (ws / "workbench.yaml").read_text(encoding="utf-8").splitlines()
    [added] = [ln for ln in lines if "notes.md" in ln]
    assert "# Always (this project) on " in added and "exactly this path or tool" in added
    await session.close()


@pytest.mark.parametrize("text", [
    # `<<` gives the file its permissions: a new `permissions:` block would override them all
    "<<: {permissions: {default: deny, rules: [{deny: write, path: /project/x}]}}\nmodel: demo\n",
    # the last rule is an alias: its marks are the anchor's, so the new rule landed between the two
    "permissions:\n  default: deny\n  rules:\n    - &d {deny: write, path: /project/x}\n    - *d\n",
])
def test_Q3_a_rule_that_would_change_other_settings_is_refused_and_the_file_kept(tmp_path, text):
    """Q3: saving "Always (project)" adds the rule and changes nothing else, or refuses saying to add it by
    hand (a review found the merge case dropping the person's deny rule and default)."""
    from workbench.errors import ConfigError
    from workbench.harness.permission_rules_file import append_rules_to_config

    path = tmp_path / "workbench.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match="add the rule by hand"):
        append_rules_to_config(path, [PermissionRule("allow", "write", "/project/a.txt")])
    assert path.read_text() == text
