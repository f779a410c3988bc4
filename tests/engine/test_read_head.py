"""``FileBackend.read_head``: a bounded read for untrusted files (F3), and ``NotTextFile`` (I5, S6)."""

from __future__ import annotations

import os
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from workbench.backends.composite import CompositeBackend
from workbench.backends.host import HostBackend
from workbench.backends.readonly import ReadOnlyBackend
from workbench.backends.state import StateBackend
from workbench.backends.store import StoreBackend
from workbench.errors import BackendIOError, FileNotFound, NotTextFile


def _state() -> StateBackend:
    box: dict[str, Any] = {"files": {}}
    return StateBackend(lambda: box["files"], lambda f: box.__setitem__("files", f))


@pytest.fixture(params=["host", "state", "store", "composite", "readonly"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    kind = request.param
    if kind == "host":
        return HostBackend(tmp_path)
    if kind == "state":
        return _state()
    store = StoreBackend(tmp_path / "files.sqlite3")
    if kind == "store":
        return store
    if kind == "composite":
        return CompositeBackend({"/": HostBackend(tmp_path)})
    host = HostBackend(tmp_path)
    return _Writable(ReadOnlyBackend(host), host)


class _Writable:
    """A read-only view whose files are written through the backend under it (test set-up only)."""

    def __init__(self, view: ReadOnlyBackend, under: HostBackend) -> None:
        self.view, self.under = view, under

    async def write(self, path: str, content: str) -> None:
        await self.under.write(path, content)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.view, name)


async def test_F3_read_head_returns_at_most_max_bytes_and_says_whether_cut(backend: Any) -> None:
    await backend.write("/a.md", "héllo wörld")  # 13 bytes in UTF-8
    assert await backend.read_head("/a.md", 100) == ("héllo wörld", False)
    assert await backend.read_head("/a.md", 13) == ("héllo wörld", False)
    assert await backend.read_head("/a.md", 12) == ("héllo wörl", True)
    # The cut falls inside "é" (2 bytes): the half character is dropped, never decoded as an error.
    assert await backend.read_head("/a.md", 2) == ("h", True)
    assert await backend.read_head("/a.md", 0) == ("", True)
    with pytest.raises(FileNotFound):
        await backend.read_head("/missing.md", 10)
    with pytest.raises(ValueError):
        await backend.read_head("/a.md", -1)


async def test_F3_host_read_head_never_reads_the_whole_file(tmp_path: Path) -> None:
    big = tmp_path / "AGENTS.md"
    with big.open("wb") as f:  # sparse: 512 MB on paper, nothing on disk
        f.write(b"# rules\n")
        f.truncate(512 * 1024 * 1024)
    host = HostBackend(tmp_path)
    tracemalloc.start()
    try:
        started = time.perf_counter()
        text, cut = await host.read_head("/AGENTS.md", 16_000)
        elapsed = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert cut and text.startswith("# rules\n") and len(text) == 16_000
    assert peak < 1024 * 1024, f"read_head allocated {peak} bytes for a 16,000-byte head"
    assert elapsed < 1.0


async def test_I5_things_that_are_not_utf8_text_files_are_NotTextFile(tmp_path: Path) -> None:
    (tmp_path / "utf16.md").write_bytes("\ufeffRules".encode("utf-16"))
    (tmp_path / "latin1.md").write_bytes("Règles".encode("latin-1"))
    (tmp_path / "folder.md").mkdir()
    os.symlink("loop.md", tmp_path / "loop.md")
    host = HostBackend(tmp_path)
    for name, reason in [("utf16.md", "not UTF-8"), ("latin1.md", "not UTF-8"), ("folder.md", "directory"),
                         ("loop.md", "loop")]:
        for read in (host.read(f"/{name}"), host.read_head(f"/{name}", 100)):
            with pytest.raises(NotTextFile, match=reason):
                await read
    state = _state()
    await state.write("/d/x.md", "x")
    with pytest.raises(NotTextFile, match="directory"):
        await state.read_head("/d", 10)
    assert issubclass(NotTextFile, BackendIOError)  # every other caller still sees an I/O error


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
@pytest.mark.timeout(20)
async def test_I5_a_fifo_is_NotTextFile_and_never_blocks(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "AGENTS.md")  # nobody ever writes to it: a blocking open would hang forever
    host = HostBackend(tmp_path)
    started = time.perf_counter()
    for read in (host.read("/AGENTS.md"), host.read_head("/AGENTS.md", 100)):
        with pytest.raises(NotTextFile, match="FIFO"):
            await read
    assert time.perf_counter() - started < 5


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
@pytest.mark.timeout(20)
async def test_I5_a_fifo_swapped_in_after_the_check_does_not_block(tmp_path: Path, monkeypatch: Any) -> None:
    """The race: the path was a regular file when stat'ed and is a FIFO when opened."""
    fifo = tmp_path / "AGENTS.md"
    os.mkfifo(fifo)
    regular = tmp_path / "regular.md"
    regular.write_text("x")
    host = HostBackend(tmp_path)
    real_stat = os.stat
    monkeypatch.setattr(os, "stat", lambda p, *a, **k: real_stat(regular) if str(p) == str(fifo) else real_stat(p, *a, **k))
    with pytest.raises(NotTextFile, match="FIFO"):
        await host.read_head("/AGENTS.md", 100)
