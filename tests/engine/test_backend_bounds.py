"""The host and composite backends at their edges (issue 8): a mount of a protected folder under a
glob over ``/`` (F4), grep of one huge named file (F3).
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench.backends import CompositeBackend, HostBackend
from workbench.backends import guard as guard_mod
from workbench.backends import host as host_mod
from workbench.backends.base import compile_grep, grep_text
from workbench.errors import BackendIOError, BackendRefusal, NotTextFile

# ------------------------------------------------------------------ F4: a protected mount under a glob


def _protected_mount(tmp_path: Path) -> CompositeBackend:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("needle\n")
    keys = tmp_path / "keys"
    keys.mkdir()
    (keys / "keys.json").write_text('{"openai": "sk-needle"}')
    return CompositeBackend({"/project": HostBackend(ws, protected=[keys]),
                             "/kf": HostBackend(keys, protected=[keys])})


async def test_F4_glob_over_the_root_skips_a_mount_of_a_protected_folder_like_grep(tmp_path):
    backend = _protected_mount(tmp_path)
    assert await backend.glob("**", "/") == ["/project/a.txt"]
    assert await backend.glob("*/*.json", "/") == []
    assert [m.path for m in await backend.grep("needle", "/")] == ["/project/a.txt"]
    # ls of / still shows the mount points (it lists no files of theirs), as before.
    assert [i.path for i in await backend.list("/")] == ["/kf", "/project"]
    # Named directly, the protected mount is still refused, not silently empty.
    for call in (backend.glob("*", "/kf"), backend.glob("/kf/*"), backend.list("/kf"), backend.grep("x", "/kf")):
        with pytest.raises(BackendRefusal, match="protected path"):
            await call


# ----------------------------------------------------------------- F3: grep of one large named file


async def test_F3_grep_of_a_large_named_file_streams_it_in_bounded_memory(tmp_path):
    big = tmp_path / "big.txt"
    line = b"x" * 99 + b"\n"
    with open(big, "wb") as f:
        for _ in range(40):
            f.write(line * 10_000)  # 40 MB in all
        f.write(b"the needle\r\n")
    backend = HostBackend(tmp_path)
    tracemalloc.start()
    try:
        hits = await backend.grep("needle", "/big.txt")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [(m.path, m.line, m.text) for m in hits] == [("/big.txt", 400_001, "the needle")]
    assert peak < 8 * 1024 * 1024, f"peak {peak / 1e6:.1f} MB while grepping a 40 MB file"


async def test_F3_grep_of_a_named_file_is_under_the_walk_limit(tmp_path, monkeypatch):
    (tmp_path / "f.txt").write_text("x\n" * 10)
    monkeypatch.setattr(guard_mod, "WALK_SECONDS", 0.0)
    with pytest.raises(BackendIOError, match="took longer than 0 s"):
        await HostBackend(tmp_path).grep("x", "/f.txt")


async def test_F3_grep_of_a_named_file_names_bad_utf8_and_an_over_long_line(tmp_path, monkeypatch):
    (tmp_path / "bad.txt").write_bytes(b"ok\nfine\n\xff\n")
    with pytest.raises(NotTextFile, match=r"not UTF-8 text \(bad byte at offset 8\)"):
        await HostBackend(tmp_path).grep("ok", "/bad.txt")
    monkeypatch.setattr(host_mod, "GREP_MAX_BYTES", 10)
    (tmp_path / "long.txt").write_text("short\n" + "y" * 11 + "\n")
    with pytest.raises(NotTextFile, match=r"line 2 is longer than 10 bytes"):
        await HostBackend(tmp_path).grep("y", "/long.txt")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(alphabet=st.sampled_from(["a", "b", "\n", "\r", "é", "€", "😀", " "]), max_size=200),
       pattern=st.sampled_from(["a", "b$", "^a", "é", "😀", r"\r", "a.b", "^$"]))
async def test_F3_grep_of_a_named_file_finds_what_a_whole_text_search_finds(tmp_path, text, pattern):
    """Streaming keeps the old meaning: lines split on \\n only, one \\r stripped at the end, UTF-8."""
    (tmp_path / "f.txt").write_bytes(text.encode("utf-8"))
    got = await HostBackend(tmp_path).grep(pattern, "/f.txt")
    assert got == grep_text("/f.txt", text, compile_grep(pattern))
