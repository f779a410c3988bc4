"""F3: grep and glob run in linear time or under a hard limit, and Stop ends them promptly.

Also: grep with its default path works on a fresh install, where /user's folder does not exist.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from workbench.backends import CompositeBackend, HostBackend
from workbench.backends import guard as guard_mod
from workbench.backends.base import compile_grep, glob_regex
from workbench.engine.models.scripted import ScriptedModel, reply, tool_reply
from workbench.errors import BackendIOError
from workbench.harness.permissions import match_path
from workbench.session import Session

EVIL = "(a+)+$"


def one_mb(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "big.txt").write_text("a" * (1024 * 1024 - 2) + "b\n")
    return ws


async def test_F3_a_pathological_grep_over_1mb_returns_quickly(tmp_path):
    backend = CompositeBackend({"/project": HostBackend(one_mb(tmp_path))})
    t = time.monotonic()
    assert await backend.grep(EVIL, "/project") == []
    assert time.monotonic() - t < 2.0  # sanity bound only; the figure is in benchmarks/hostile_input.py


@pytest.mark.parametrize("pattern, construct", [
    (r"(a)\1", "backreference"), (r"foo(?=bar)", "lookahead or lookbehind"),
    (r"(?<!x)y", "lookahead or lookbehind"), (r"(?P<n>a)(?P=n)", "backreference"),
])
async def test_F3_grep_names_the_construct_RE2_refuses(tmp_path, pattern, construct):
    ws = one_mb(tmp_path)
    model = ScriptedModel([tool_reply(("grep", {"pattern": pattern, "path": "/project"})), reply("done")])
    session = await Session.open(ws, model=model)
    assert (await session.run("go")).status == "done"
    out = [m.content for m in model.requests[-1].messages if m.role == "tool"][-1]
    assert construct in out and "RE2" in out and repr(pattern) in out


def test_F3_globs_and_permission_patterns_with_many_double_stars_are_linear():
    pattern = "/".join(["**"] * 8 + ["*.py"])
    path = "a/" * 40 + "b.txt"
    t = time.monotonic()
    assert glob_regex(pattern).fullmatch(path) is None
    assert not match_path("/" + pattern, "/" + path)
    assert not match_path("/" + "/".join(["**", "x*"] * 6), "/" + "x/" * 40 + "y")
    assert time.monotonic() - t < 0.5


async def test_F3_a_walk_past_its_time_limit_ends_with_a_clear_error(tmp_path, monkeypatch):
    ws = tmp_path / "ws"
    for i in range(30):
        (ws / f"d{i}").mkdir(parents=True)
        (ws / f"d{i}" / "f.txt").write_text("x\n")
    monkeypatch.setattr(guard_mod, "WALK_SECONDS", 0.0)
    backend = HostBackend(ws)
    with pytest.raises(BackendIOError, match="took longer than 0 s and was ended"):
        await backend.grep("x", "/")
    with pytest.raises(BackendIOError, match="took longer than"):
        await backend.glob("**/*.txt", "/")


async def test_F3_stop_during_a_long_grep_ends_it_promptly_and_the_loop_stays_free(tmp_path, monkeypatch):
    """A walk slowed on purpose: the event loop keeps ticking, and cancelling stops the worker too."""
    ws = tmp_path / "ws"
    ws.mkdir()
    for i in range(200):
        (ws / f"f{i}.txt").write_text("needle\n")
    backend = HostBackend(ws)
    started, seen = [], []
    real_tick = guard_mod.walk_tick

    def slow_tick(path: str = "/") -> None:
        started.append(path)
        time.sleep(0.01)
        real_tick(path)
        seen.append(path)

    monkeypatch.setattr("workbench.backends.host.walk_tick", slow_tick)
    task = asyncio.create_task(backend.grep("needle", "/"))
    ticks = 0
    while len(started) < 5:
        await asyncio.sleep(0.005)
        ticks += 1
    assert ticks >= 3  # the loop ran while the walk worked
    t = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert time.monotonic() - t < 0.5
    await asyncio.sleep(0.1)
    n = len(seen)
    await asyncio.sleep(0.1)
    assert len(seen) == n < 200  # the worker stopped at its next check, long before the end


def test_F3_sigint_ends_a_pathological_grep_in_a_real_process(tmp_path):
    """Before RE2 the regex held the GIL and SIGINT was ignored; now the process ends on SIGINT."""
    one_mb(tmp_path)
    # SIGINT's default handler, whatever the suite inherited: a shell starting it in the background
    # (`nohup … &` without job control) has SIGINT ignored, and a child would inherit that
    script = textwrap.dedent(f"""
        import asyncio, signal, sys
        signal.signal(signal.SIGINT, signal.default_int_handler)
        from workbench.backends import HostBackend
        async def main():
            b = HostBackend({str(tmp_path / 'ws')!r})
            while True:
                await b.grep({EVIL!r}, "/")
                print("round", flush=True)
        asyncio.run(main())
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "round"  # one full grep of 1 MB finished
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)  # it ends (it never did before RE2); the bound leaves room for a loaded CI
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode != 0


async def test_grep_with_its_default_path_works_when_a_mount_folder_is_missing(tmp_path):
    """A fresh install: ~/.config/workbench (/user) does not exist; grep over / searches what exists."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.md").write_text("needle here\n")
    backend = CompositeBackend({"/project": HostBackend(ws), "/user": HostBackend(tmp_path / "missing")})
    hits = await backend.grep("needle")
    assert [(m.path, m.line) for m in hits] == [("/project/a.md", 1)]
    model = ScriptedModel([tool_reply(("grep", {"pattern": "needle"})), reply("done")])
    session = await Session.open(ws, model=model)
    assert (await session.run("go")).status == "done"
    out = [m.content for m in model.requests[-1].messages if m.role == "tool"][-1]
    assert out.startswith("/project/a.md:1: needle here"), out


def test_compile_grep_still_reports_plain_syntax_errors():
    with pytest.raises(ValueError, match="Invalid regular expression"):
        compile_grep("(")
