"""Issue 9: the host backend lists a small folder on the event loop and a large or slow one in a worker
thread, and the listing is the same either way: the same entries in the same order, the same entries
hidden by the call's rules, links out of the root named once (S6), the same errors.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench.backends import guard as guard_mod
from workbench.backends.host import HostBackend, LinkOutside, _InlineBudget, noting_links_outside
from workbench.errors import FileNotFound


@pytest.fixture
def workers(monkeypatch) -> list[str]:
    """The functions handed to a worker thread, by name."""
    handed: list[str] = []
    real = asyncio.to_thread

    async def to_thread(fn, *args, **kwargs):
        handed.append(getattr(fn, "__name__", repr(fn)))
        return await real(fn, *args, **kwargs)

    monkeypatch.setattr(asyncio, "to_thread", to_thread)
    return handed


def _folder(root: Path, names: int, *, outside: int = 0, away: Path | None = None) -> None:
    for i in range(names):
        (root / f"f{i:03d}.txt").write_text("x" * i)
    for i in range(outside):
        assert away is not None
        os.symlink(away, root / f"a{i:03d}-away")  # sorts first: noted before a listing gives up


def _paths(infos) -> list[tuple[str, bool, int]]:
    return [(i.path, i.is_dir, i.size) for i in infos]


async def test_a_small_folder_is_listed_on_the_loop(tmp_path: Path, workers: list[str]) -> None:
    _folder(tmp_path, 5)
    (tmp_path / "sub").mkdir()
    host = HostBackend(tmp_path)
    listed = await host.list("/")
    assert workers == []
    assert _paths(listed) == _paths(host._do_list("/")) == [
        ("/f000.txt", False, 0), ("/f001.txt", False, 1), ("/f002.txt", False, 2), ("/f003.txt", False, 3),
        ("/f004.txt", False, 4), ("/sub", True, 0)]


async def test_a_large_folder_moves_to_a_worker_and_is_listed_whole(tmp_path: Path, workers: list[str]) -> None:
    _folder(tmp_path, _InlineBudget.ENTRIES + 1)
    host = HostBackend(tmp_path)
    listed = await host.list("/")
    assert workers == ["_do_list"]
    assert len(listed) == _InlineBudget.ENTRIES + 1
    assert [i.path for i in listed] == sorted(f"/{p.name}" for p in tmp_path.iterdir())


async def test_a_slow_folder_moves_to_a_worker(tmp_path: Path, workers: list[str], monkeypatch) -> None:
    _folder(tmp_path, 3)
    monkeypatch.setattr(_InlineBudget, "SECONDS", -1.0)  # every system call "took too long"
    host = HostBackend(tmp_path)
    assert [i.path for i in await host.list("/")] == ["/f000.txt", "/f001.txt", "/f002.txt"]
    assert workers == ["_do_list"]


async def test_S6_links_out_of_the_root_are_named_once_when_the_listing_moves_part_way(
        tmp_path: Path, workers: list[str]) -> None:
    root, away = tmp_path / "root", tmp_path / "away"
    root.mkdir()
    away.mkdir()
    # read whole on the loop, then given up while looking at the entries, after the links were seen
    _folder(root, _InlineBudget.ENTRIES // 2, outside=3, away=away)
    host = HostBackend(root)
    with noting_links_outside() as noted:
        listed = await host.list("/")
    assert workers == ["_do_list"]
    assert noted == [LinkOutside(f"a{i:03d}-away", True) for i in range(3)]
    assert len(listed) == _InlineBudget.ENTRIES // 2  # the links out are left out


@pytest.mark.parametrize("where", ["an entry", "the folder named", "a folder on the way"])
async def test_no_symlink_is_resolved_on_the_loop(tmp_path: Path, workers: list[str], monkeypatch, where) -> None:
    """A chain of links through a deep folder takes seconds to resolve, and a workspace can hold one
    (review of issue 9): a listing that meets a symlink anywhere on its way moves to a worker before
    any realpath of it runs on the loop."""
    real = tmp_path / "real"
    (real / "deeper").mkdir(parents=True)
    (real / "f.txt").write_text("x")
    if where == "an entry":
        os.symlink(real / "f.txt", real / "link.txt")
        named = "/real"
    elif where == "the folder named":
        os.symlink(real, tmp_path / "alias")
        named = "/alias"
    else:
        os.symlink(real, tmp_path / "alias")
        named = "/alias/deeper"
    loop_thread = threading.get_ident()
    resolved_on_loop: list[str] = []
    realpath = os.path.realpath

    def spy(path, *args, **kwargs):
        parts = Path(path).parts
        if threading.get_ident() == loop_thread and ("link.txt" in parts or "alias" in parts):
            resolved_on_loop.append(str(path))
        return realpath(path, *args, **kwargs)

    monkeypatch.setattr(os.path, "realpath", spy)
    host = HostBackend(tmp_path)
    listed = [i.path for i in await host.list(named)]
    assert workers == ["_do_list"] and resolved_on_loop == []
    assert listed == {"an entry": ["/real/deeper", "/real/f.txt", "/real/link.txt"],
                      "the folder named": ["/alias/deeper", "/alias/f.txt"], "a folder on the way": []}[where]


async def test_errors_are_the_same_on_the_loop(tmp_path: Path, workers: list[str]) -> None:
    host = HostBackend(tmp_path)
    with pytest.raises(FileNotFound):
        await host.list("/missing")
    (tmp_path / "f.txt").write_text("abc")
    assert _paths(await host.list("/f.txt")) == [("/f.txt", False, 3)]
    assert workers == []


@pytest.mark.parametrize("names", [4, _InlineBudget.ENTRIES // 2 + 8], ids=["on the loop", "moved part-way"])
async def test_P6_the_calls_guard_hides_and_counts_entries_as_in_a_worker(tmp_path: Path, workers, names) -> None:
    _folder(tmp_path, names)
    host = HostBackend(tmp_path)

    def guard() -> guard_mod.PathGuard:
        return guard_mod.PathGuard(lambda action, path: None,
                                   lambda path: "deny read /f00*" if path.startswith("/f00") else None)

    on_loop, in_thread = guard(), guard()
    with guard_mod.guarding(on_loop):
        listed = await host.list("/")
    assert workers == ([] if names == 4 else ["_do_list"])
    with guard_mod.guarding(in_thread):
        whole = await asyncio.to_thread(host._do_list, "/")
    assert [i.path for i in listed] == [i.path for i in whole] and "/f001.txt" not in [i.path for i in listed]
    assert on_loop.omitted == in_thread.omitted == {"deny read /f00*": min(names, 10)}  # P6's note: counted once


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=st.integers(0, _InlineBudget.ENTRIES + 20), outside=st.integers(0, 4), dirs=st.integers(0, 3),
       slow=st.booleans())
def test_the_listing_is_the_same_inline_or_in_a_worker(names: int, outside: int, dirs: int, slow: bool,
                                                        monkeypatch) -> None:
    monkeypatch.setattr(_InlineBudget, "SECONDS", -1.0 if slow else _InlineBudget.SECONDS)
    with tempfile.TemporaryDirectory() as tmp:
        root, away = Path(tmp) / "root", Path(tmp) / "away"
        root.mkdir()
        away.mkdir()
        _folder(root, names, outside=outside, away=away)
        for i in range(dirs):
            (root / f"d{i}").mkdir()
        host = HostBackend(root)

        async def both():
            with noting_links_outside() as noted:
                listed = await host.list("/")
            with noting_links_outside() as noted_worker:
                whole = await asyncio.to_thread(host._do_list, "/")
            return listed, noted, whole, noted_worker

        listed, noted, whole, noted_worker = asyncio.run(both())
        assert _paths(listed) == _paths(whole)
        assert len(listed) == names + dirs
        assert noted == noted_worker and len(noted) == outside


def test_P6_a_guard_asks_its_rules_once_per_path_and_answers_alike_past_its_memory(monkeypatch) -> None:
    """The backend and the tool both ask about a listing's entries (issue 9): the rules are asked once
    per path; every answer, and what is counted as left out, is what asking again would give."""
    asked: list[str] = []

    def hidden_by(path: str) -> str | None:
        asked.append(path)
        return "deny read /secret*" if path.startswith("/secret") else None

    guard = guard_mod.PathGuard(lambda action, path: None, hidden_by)
    monkeypatch.setattr(guard_mod, "MAX_ANSWERS", 3)
    paths = ["/a", "/secret1", "/a", "/secret1", "/b", "/c", "/secret2", "/secret2", "/d", "/d"]
    with guard_mod.guarding(guard):
        answers = [guard_mod.hidden(p) for p in paths]
    assert answers == [p.startswith("/secret") for p in paths]
    assert asked == ["/a", "/secret1", "/b", "/c", "/secret2", "/secret2", "/d", "/d"]  # memory full after /b
    assert guard.omitted == {"deny read /secret*": 4}


async def test_P5_a_symlink_named_to_a_call_is_resolved_in_a_worker(tmp_path: Path, workers: list[str]) -> None:
    """``target`` (run before every file call, P5) resolves a plain path on the loop and one with a
    symlink on the way in a worker: the same answer, the loop never held by a chain of links."""
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "f.txt").write_text("x")
    os.symlink(tmp_path / "real", tmp_path / "alias")
    host = HostBackend(tmp_path)
    assert await host.target("/real/f.txt") == "/real/f.txt"
    assert workers == []
    assert await host.target("/alias/f.txt") == "/real/f.txt"
    assert workers == ["link_target"]
    assert await host.target("/alias/f.txt") == host.link_target("/alias/f.txt")
