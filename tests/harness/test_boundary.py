"""The file boundary through the real stack (Session + build_backend + build_middleware).

P5: symlinks never lead around a deny or ask rule; no spelling of a path passes a rule.
P6: grep/glob/ls leave out what is not allowed outright (deny or ask) and say so.
F4: the thread store and the key folder are invisible to every tool, rule and mount.
"""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench.backends.base import normalize
from workbench.engine.models.scripted import ScriptedModel, reply, tool_reply
from workbench.errors import BackendRefusal
from workbench.harness.permissions import PermissionsMiddleware, match_path
from workbench.session import Session

RULES = """permissions:
  rules:
    - {allow: read, path: '/**'}
    - {deny: read, path: '/project/secret/**'}
    - {deny: write, path: '/project/.git/**'}
    - {ask: read, path: '/project/private/**'}
"""


def workspace(tmp_path: Path, rules: str = RULES) -> Path:
    ws = tmp_path / "ws"
    (ws / "secret").mkdir(parents=True)
    (ws / "secret" / "key.txt").write_text("TOPSECRET\n")
    (ws / "private").mkdir()
    (ws / "private" / "diary.md").write_text("PRIVATE entry\n")
    (ws / ".git" / "hooks").mkdir(parents=True)
    (ws / "readme.md").write_text("hello PRIVATE TOPSECRET-free\n")
    os.symlink("secret", ws / "notes")
    os.symlink(".git", ws / "gitdir")
    os.symlink("secret/key.txt", ws / "key-link.txt")
    os.symlink("private/diary.md", ws / "diary-link.md")
    (ws / "workbench.yaml").write_text(rules)
    return ws


async def run_calls(ws: Path, *calls, decisions=None):
    """Run one model turn with ``calls``; answer approvals with ``decisions`` (None: leave pending)."""
    model = ScriptedModel([tool_reply(*calls), reply("done")])
    session = await Session.open(ws, model=model)
    result = await session.run("go")
    asked = []
    while result.status == "interrupted" and decisions is not None:
        asked.extend(result.pending)
        result = await session.resume({q.id: decisions for q in result.pending})
    outs = [m.content for m in model.requests[-1].messages if m.role == "tool"] if model.calls > 1 else []
    return result, outs, asked


# -- P5: symlinks ------------------------------------------------------------------------------------------


async def test_P5_read_through_a_symlink_to_a_denied_folder_is_denied(tmp_path):
    ws = workspace(tmp_path)
    result, outs, _ = await run_calls(ws, ("read_file", {"path": "/project/notes/key.txt"}),
                                      ("read_file", {"path": "/project/key-link.txt"}))
    assert result.status == "done"
    for out in outs:
        assert "TOPSECRET" not in out
        assert out.startswith("Denied: ") and "deny read /project/secret/**" in out and "symlink" in out


async def test_P5_write_and_edit_through_a_symlink_to_git_are_denied_even_when_approved(tmp_path):
    ws = workspace(tmp_path)
    (ws / ".git" / "config").write_text("[core]\n")
    result, outs, _ = await run_calls(
        ws, ("write_file", {"path": "/project/gitdir/hooks/pre-commit", "content": "rm -rf ~"}),
        ("edit_file", {"path": "/project/gitdir/config", "old_string": "[core]", "new_string": "[evil]"}),
        decisions="approve")
    assert result.status == "done"
    assert not (ws / ".git" / "hooks" / "pre-commit").exists()
    assert (ws / ".git" / "config").read_text() == "[core]\n"
    assert all(o.startswith("Denied: ") and "deny write /project/.git/**" in o for o in outs), outs


async def test_P5_an_allow_rule_on_the_link_path_gives_no_way_around_a_deny_on_its_target(tmp_path):
    """Zero approvals: an allow on /project/gitdir/** must not open /project/.git."""
    rules = RULES + "    - {allow: write, path: '/project/gitdir/**'}\n    - {allow: write, path: '/project/notes/**'}\n"
    ws = workspace(tmp_path, rules)
    result, outs, _ = await run_calls(
        ws, ("write_file", {"path": "/project/gitdir/hooks/pre-commit", "content": "x"}))
    assert result.status == "done" and not result.pending
    assert not (ws / ".git" / "hooks" / "pre-commit").exists()
    assert outs[0].startswith("Denied: ")


async def test_P5_ask_on_a_symlink_target_asks_and_a_rejection_keeps_it_closed(tmp_path):
    ws = workspace(tmp_path)
    model = ScriptedModel([tool_reply(("read_file", {"path": "/project/diary-link.md"})), reply("done")])
    session = await Session.open(ws, model=model)
    result = await session.run("go")
    assert result.status == "interrupted"
    [q] = result.pending
    assert "/project/private/diary.md" in q.payload["reason"] and "symlink" in q.payload["reason"]
    result = await session.resume({q.id: {"decision": "reject", "message": "no"}})
    out = [m.content for m in model.requests[-1].messages if m.role == "tool"][0]
    assert "PRIVATE entry" not in out


async def test_P5_searches_and_ls_through_symlinks_never_show_denied_content(tmp_path):
    ws = workspace(tmp_path)
    result, outs, _ = await run_calls(
        ws, ("grep", {"pattern": "TOPSECRET", "path": "/project"}),
        ("glob", {"pattern": "**/*.txt", "path": "/project"}),
        ("ls", {"path": "/project/notes"}),
        ("grep", {"pattern": "TOPSECRET", "path": "/project/notes"}),
        ("glob", {"pattern": "*", "path": "/project/notes"}))
    grep, glob, ls, grep_in, glob_in = outs
    assert "/project/key-link.txt" not in grep and "TOPSECRET\n" not in grep.replace("TOPSECRET-free", "")
    assert "key-link.txt" not in glob and "key.txt" not in glob
    for out in (ls, grep_in, glob_in):
        assert out.startswith("Denied: ") and "key.txt" not in out.split("Denied:")[0]


@pytest.mark.parametrize("spelling", [
    "/project/secret/./key.txt", "/project/x/../secret/key.txt", "/project//secret//key.txt",
    "/project/secret/key.txt/", "/project/./notes/../secret/key.txt", "/project/notes/./key.txt",
])
async def test_P5_no_spelling_of_a_denied_path_is_read(tmp_path, spelling):
    ws = workspace(tmp_path)
    _, [out], _ = await run_calls(ws, ("read_file", {"path": spelling}))
    assert "TOPSECRET" not in out and (out.startswith("Denied: ") or out.startswith("Error"))


SEGMENT = st.sampled_from([".", "..", "", "secret", "notes", "SECRET", "x", "se\u0301cret", "key.txt",
                           "key-link.txt", "gitdir", ".git"])


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(SEGMENT, min_size=1, max_size=6), trailing=st.booleans())
def test_P5_hypothesis_no_spelling_of_a_path_reads_the_secret(tmp_path_factory, parts, trailing):
    """Any spelling, through the rules and the real host backend as a tool call sees them: the named
    path and its symlink target are judged, the guard judges what is opened; the secret never comes back."""
    import asyncio

    from workbench.backends import CompositeBackend, HostBackend, PathError
    from workbench.backends.guard import guarding
    from workbench.config import parse_config

    ws = _SPELLING_WS.get("ws")
    if ws is None:
        ws = _SPELLING_WS["ws"] = workspace(tmp_path_factory.mktemp("spell"))
    backend = CompositeBackend({"/project": HostBackend(ws)})
    perms = PermissionsMiddleware.from_config(parse_config(RULES))
    raw = "/project/" + "/".join(parts) + ("/" if trailing else "")

    async def attempt() -> str | None:
        verdicts = [perms.judge("read", raw)]
        try:
            verdicts.append(perms.judge("read", await backend.target(raw)))
        except PathError:
            pass
        if any(v.effect != "allow" for v in verdicts):
            return None
        with guarding(perms.guard(verdicts, {}, approved=False)):
            try:
                return await backend.read(raw)
            except PathError:
                return None

    got = asyncio.run(attempt())
    assert got is None or "TOPSECRET" not in got, raw
    try:
        canon = unicodedata.normalize("NFC", normalize(raw))
    except BackendRefusal:
        return
    assert perms.judge("read", raw).effect == perms.judge("read", canon).effect


_SPELLING_WS: dict[str, Path] = {}


def test_P5_unicode_normal_forms_of_a_rule_and_a_path_match():
    nfd = unicodedata.normalize("NFD", "/project/café/x")
    assert match_path("/project/café/**", nfd)
    assert match_path(unicodedata.normalize("NFD", "/project/café/**"), "/project/café/x")


# -- P6: searches and ask ---------------------------------------------------------------------------------


async def test_P6_grep_glob_ls_leave_out_ask_read_files_and_say_how_many_and_under_which_rule(tmp_path):
    ws = workspace(tmp_path)
    result, outs, asked = await run_calls(
        ws, ("grep", {"pattern": "PRIVATE", "path": "/project"}),
        ("glob", {"pattern": "**/*.md", "path": "/project"}),
        ("ls", {"path": "/project"}))
    assert result.status == "done" and not asked
    grep, glob, ls = outs
    assert "PRIVATE entry" not in grep and "diary" not in grep
    assert "/project/readme.md" in grep  # what is allowed is still found
    assert "diary" not in glob and "/project/readme.md" in glob
    listed = ls.split("\n[")[0]
    assert "/project/private/" not in listed and "secret/" not in listed and "diary-link" not in listed
    assert "/project/readme.md" in listed
    for out in (grep, glob, ls):
        assert "left out" in out and "ask read /project/private/**" in out
    assert "deny read /project/secret/**" in ls


async def test_P6_grep_right_after_a_rejected_read_still_shows_nothing(tmp_path):
    ws = workspace(tmp_path)
    model = ScriptedModel([tool_reply(("read_file", {"path": "/project/private/diary.md"})),
                           tool_reply(("grep", {"pattern": "entry", "path": "/project"})), reply("done")])
    session = await Session.open(ws, model=model)
    result = await session.run("go")
    [q] = result.pending
    result = await session.resume({q.id: {"decision": "reject", "message": "private"}})
    assert result.status == "done"
    out = [m.content for m in model.requests[-1].messages if m.role == "tool"][-1]
    assert "PRIVATE entry" not in out and "left out" in out and "ask read /project/private/**" in out


async def test_P6_an_approved_search_of_an_ask_folder_shows_its_files(tmp_path):
    ws = workspace(tmp_path)
    result, outs, asked = await run_calls(ws, ("grep", {"pattern": "entry", "path": "/project/private"}),
                                          decisions="approve")
    assert len(asked) == 1 and "PRIVATE entry" in outs[0]


# -- P5: the path judged is the path opened (no TOCTOU) -----------------------------------------------------


def _swap_to_secret(ws: Path) -> None:
    """Between the rule check and the open: 'public' becomes a symlink to 'secret'."""
    if not (ws / "public").is_symlink():
        os.rename(ws / "public", ws / "public.old")
        os.symlink("secret", ws / "public")


def _guarded_backend(tmp_path: Path):
    from workbench.backends import HostBackend
    from workbench.backends.guard import PathGuard

    ws = tmp_path / "ws"
    (ws / "public").mkdir(parents=True)
    (ws / "secret").mkdir()
    (ws / "public" / "a.txt").write_text("public\n")
    (ws / "secret" / "a.txt").write_text("TOPSECRET\n")

    def refusal(action: str, path: str) -> str | None:
        return f"Denied: {action} {path}" if path.startswith("/secret") else None

    return ws, HostBackend(ws), PathGuard(refusal, lambda p: None)


@pytest.mark.skipif(not os.path.exists("/proc/self/fd"), reason="the open-time check needs /proc/self/fd")
async def test_P5_a_folder_swapped_for_a_symlink_after_the_check_is_refused_on_read(tmp_path, monkeypatch):
    from workbench.backends import BackendRefusal, HostBackend
    from workbench.backends.guard import guarding

    ws, backend, guard = _guarded_backend(tmp_path)
    real_stat = HostBackend._stat

    def stat_then_swap(self, v, real):
        st = real_stat(self, v, real)
        _swap_to_secret(ws)
        return st

    monkeypatch.setattr(HostBackend, "_stat", stat_then_swap)
    with guarding(guard), pytest.raises(BackendRefusal, match="changed on disk"):
        await backend.read("/public/a.txt")


@pytest.mark.skipif(not os.path.exists("/proc/self/fd"), reason="the open-time check needs /proc/self/fd")
async def test_P5_a_folder_swapped_for_a_symlink_after_the_check_is_refused_on_write(tmp_path, monkeypatch):
    import tempfile

    from workbench.backends import BackendRefusal
    from workbench.backends.guard import guarding

    ws, backend, guard = _guarded_backend(tmp_path)
    real_mkstemp = tempfile.mkstemp

    def swap_then_mkstemp(*a, **kw):
        _swap_to_secret(ws)
        return real_mkstemp(*a, **kw)

    monkeypatch.setattr(tempfile, "mkstemp", swap_then_mkstemp)
    with guarding(guard), pytest.raises(BackendRefusal, match="changed on disk"):
        await backend.write("/public/a.txt", "overwritten")
    assert (ws / "secret" / "a.txt").read_text() == "TOPSECRET\n"
    assert sorted(p.name for p in (ws / "secret").iterdir()) == ["a.txt"]  # no temp file left
