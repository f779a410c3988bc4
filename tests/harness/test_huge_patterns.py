"""F3: a glob or rule pattern RE2 refuses (or one over the length cap) is a clear error, never a
backtracking ``re`` fallback that freezes the process (issue 8).

The freezes held the GIL in ``re``, so the tests that could freeze run in a subprocess with a deadline:
a regression fails instead of hanging the suite.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.backends.base import MAX_PATTERN_CHARS, glob_regex, grep_filter, path_rule_regex
from workbench.config import load_config, parse_config
from workbench.config.schema import PermissionRule
from workbench.engine.models.scripted import ScriptedModel, reply, tool_reply
from workbench.errors import ConfigError
from workbench.harness.permissions import PermissionsMiddleware, match_path, user_rules_path
from workbench.session import Session

#: 130 KB: RE2 refuses it for size alone; Python's ``re`` backtracked on it for minutes on "a".
HUGE = "{*,*}" * 26000 + "x"
DEADLINE = 60.0


def run_bounded(code: str, cwd: Path | None = None) -> str:
    """Run ``code`` in a fresh interpreter; fail (not hang) if it takes longer than DEADLINE."""
    try:
        proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                              env=dict(os.environ), cwd=cwd, timeout=DEADLINE)
    except subprocess.TimeoutExpired:
        pytest.fail(f"froze: still running after {DEADLINE:g} s")
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


# ------------------------------------------------------------------------------ globs of the model


def test_F3_a_glob_RE2_refuses_is_a_ValueError_naming_the_problem():
    with pytest.raises(ValueError, match=r"glob pattern '\{\*,\*\}.*' is too long: 130001 characters"):
        glob_regex(HUGE)
    with pytest.raises(ValueError, match=r"glob pattern '\[z-a\]\*'.*invalid character class range"):
        glob_regex("[z-a]*")
    with pytest.raises(ValueError, match="too long"):
        grep_filter(HUGE)
    # At the cap, RE2 takes it and matches in bounded time.
    assert glob_regex("{*,*}" * ((MAX_PATTERN_CHARS - 1) // 5) + "x").fullmatch("ax")


@pytest.mark.parametrize("tool", ["glob", "grep"])
def test_F3_a_huge_glob_from_the_model_is_a_tool_error_not_a_frozen_process(tmp_path, tool):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a").write_text("x\n")
    out = run_bounded(f"""
        import asyncio
        from workbench.engine.models.scripted import ScriptedModel, reply, tool_reply
        from workbench.session import Session
        PAT = {HUGE!r}
        args = {{"pattern": PAT, "path": "/project"}} if {tool!r} == "glob" else \\
               {{"pattern": "x", "path": "/project", "glob": PAT}}
        async def main():
            model = ScriptedModel([tool_reply(({tool!r}, args)), reply("done")])
            s = await Session.open({str(ws)!r}, model=model)
            r = await s.run("go")
            print(r.status)
            print([m.content for m in model.requests[-1].messages if m.role == "tool"][-1][:300])
        asyncio.run(main())
    """)
    status, result = out.split("\n", 1)
    assert status == "done"
    assert "too long: 130001 characters" in result and f"at most {MAX_PATTERN_CHARS}" in result


async def test_F3_a_glob_RE2_cannot_parse_is_a_tool_error(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a").write_text("x\n")
    model = ScriptedModel([tool_reply(("glob", {"pattern": "[z-a]*", "path": "/project"})),
                           tool_reply(("grep", {"pattern": "x", "path": "/project", "glob": "[z-a]*"})),
                           reply("done")])
    session = await Session.open(ws, model=model)
    assert (await session.run("go")).status == "done"
    outs = [m.content for m in model.requests[-1].messages if m.role == "tool"]
    assert len(outs) == 2
    for out in outs:
        assert "'[z-a]*'" in out and "invalid character class range" in out


# ---------------------------------------------------------------------------------- rule patterns


def test_F3_match_path_with_a_huge_pattern_errors_at_once():
    out = run_bounded(f"""
        from workbench.harness.permissions import match_path
        try:
            match_path("/project/" + {HUGE!r}, "/project/a")
        except ValueError as e:
            print("ValueError", str(e)[:200])
    """)
    assert out.startswith("ValueError") and "too long" in out


def test_F3_a_huge_or_unparsable_rule_in_workbench_yaml_is_a_config_error_naming_file_line_key(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "workbench.yaml").write_text("permissions:\n  rules:\n    - {allow: read, path: '/project/**'}\n"
                                       f"    - {{deny: read, path: '/project/{HUGE}'}}\n")
    with pytest.raises(ConfigError, match=r"workbench\.yaml:4: permissions\.rules\[1\]\.path: .*too long"):
        load_config(ws)
    with pytest.raises(ConfigError, match=r"x\.yaml:3: permissions\.rules\[0\]\.path: .*"
                                          r"invalid character class range"):
        parse_config("permissions:\n  rules:\n    - {deny: read, path: '/p/[z-a]'}\n", source="x.yaml")
    with pytest.raises(ConfigError, match=r"permissions\.rules\[0\]\.tool: .*too long"):
        parse_config("permissions:\n  rules:\n    - {deny: invoke, tool: '" + "*" * 5000 + "'}\n")


def test_F3_an_untrusted_workspace_with_a_huge_deny_rule_fails_at_open_not_frozen_in_the_run(tmp_path):
    """/tmp/h8/rule_ws.py: the first run froze. Now opening the workspace names the file and line."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "AGENTS.md").write_text("hi")
    (ws / "workbench.yaml").write_text(f"permissions:\n  rules:\n    - {{deny: read, path: '/project/{HUGE}x'}}\n")
    env_code = f"""
        import asyncio, os
        os.environ.pop("WORKBENCH_TRUST", None)
        from workbench.engine.models.scripted import ScriptedModel, reply
        from workbench.errors import ConfigError
        from workbench.session import Session
        async def main():
            try:
                s = await Session.open({str(ws)!r}, model=ScriptedModel([reply("hello")]))
                print((await s.run("hi")).status)
            except ConfigError as e:
                print("ConfigError", str(e)[:300])
        asyncio.run(main())
    """
    out = run_bounded(env_code)
    assert out.startswith("ConfigError") and "workbench.yaml:3: permissions.rules[0].path" in out


def test_F3_a_huge_rule_in_the_user_permissions_file_is_a_config_error():
    user_file = user_rules_path()
    user_file.parent.mkdir(parents=True, exist_ok=True)
    user_file.write_text(f"permissions:\n  rules:\n    - {{deny: read, path: '/{HUGE}'}}\n")
    with pytest.raises(ConfigError, match=r"permissions\.yaml:3: permissions\.rules\[0\]\.path: .*too long"):
        PermissionsMiddleware([], user_config=user_file)


def test_F3_rules_given_in_code_are_checked_when_the_middleware_is_built():
    rule = PermissionRule(effect="deny", action="read", pattern="/" + HUGE, line=7)
    with pytest.raises(ConfigError, match=r"permission rule 'deny read /\{\*,\*\}.*' \(line 7\): .*too long"):
        PermissionsMiddleware([rule])


def test_F3_a_long_but_sane_rule_still_matches():
    pattern = "/project/" + "a" * 3000 + "/**"
    assert match_path(pattern, "/project/" + "a" * 3000 + "/b.txt")
    assert not match_path(pattern, "/project/b.txt")


GLOB_TOKENS = st.sampled_from(["*", "**", "?", "[", "]", "{", "}", ",", "!", "^", "a", "z", "-", "/", "\\", ".",
                               "z-a", "a-z"])


@settings(max_examples=300, deadline=None)
@given(st.lists(GLOB_TOKENS, max_size=12).map("".join))
def test_F3_any_glob_or_rule_pattern_is_RE2_or_a_ValueError(pattern):
    """Never ``re`` (backtracking) and never another exception type: the tools catch ValueError."""
    for compile_ in (glob_regex, path_rule_regex):
        try:
            rx = compile_(pattern)
        except ValueError as e:
            assert "cannot be used" in str(e) and repr(pattern) in str(e)
        else:
            assert not isinstance(rx, re.Pattern)
