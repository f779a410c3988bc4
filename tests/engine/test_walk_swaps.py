"""F4, P5: a search's walk opens what it judged, never what a process in the workspace swapped in
between the check and the open (found by a review: grep printed the API key file).

The swaps here happen at the exact moment between the walk's check and its open, so each test is
deterministic; a command in the workspace can make the same swap (creating a symlink needs no access to
its target, so a sandbox does not stop it).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import workbench.backends.host as host_module
from workbench.backends import HostBackend

SECRET = "sk-THE-SECRET-KEY"


@pytest.fixture
def ws_and_keys(tmp_path: Path) -> tuple[Path, Path, HostBackend]:
    keys = tmp_path / "data" / "keys"
    keys.mkdir(parents=True)
    (keys / "keys.json").write_text(f'{{"openai": "{SECRET}"}}\n')
    ws = tmp_path / "ws"
    (ws / "src" / "sub").mkdir(parents=True)
    (ws / "src" / "a.txt").write_text("sk- nothing here\n")
    (ws / "src" / "sub" / "b.txt").write_text("sk- nothing either\n")
    return ws, keys, HostBackend(ws, protected=[keys])


async def test_F4_grep_never_reads_a_file_swapped_for_a_symlink_after_the_walk_judged_it(ws_and_keys, monkeypatch):
    ws, keys, host = ws_and_keys
    walk = HostBackend._walk_files

    def swapping_walk(self, top, max_depth=None):
        for rel, real in walk(self, top, max_depth):
            if rel == "a.txt":  # judged as a plain file in the workspace; now it leads to the key file
                link = ws / "src" / ".swap"
                os.symlink(keys / "keys.json", link)
                os.replace(link, real)
            yield rel, real

    monkeypatch.setattr(HostBackend, "_walk_files", swapping_walk)
    hits = await host.grep("sk-", "/src")
    assert all(SECRET not in m.text for m in hits), hits
    assert [m.path for m in hits] == ["/src/sub/b.txt"]  # the rest of the walk still searched


async def test_F4_a_folder_swapped_for_a_symlink_after_its_parent_was_listed_is_not_walked(ws_and_keys, monkeypatch):
    ws, keys, host = ws_and_keys
    tick = host_module.walk_tick

    def swapping_tick(where):
        if str(where).endswith(os.sep + "sub") and not os.path.islink(where):
            os.rename(where, str(where) + ".old")
            os.symlink(keys, where)  # the folder, listed as a folder, now leads into the key folder
        return tick(where)

    monkeypatch.setattr(host_module, "walk_tick", swapping_tick)
    hits = await host.grep("sk-", "/src")
    assert all(SECRET not in m.text for m in hits), hits
    assert [m.path for m in hits] == ["/src/a.txt"]
    # glob walks the same way: no name from inside the key folder comes back either
    monkeypatch.setattr(host_module, "walk_tick", tick)
    os.unlink(ws / "src" / "sub")
    os.rename(ws / "src" / "sub.old", ws / "src" / "sub")
    monkeypatch.setattr(host_module, "walk_tick", swapping_tick)
    assert "keys.json" not in " ".join(await host.glob("**/*", "/src"))


async def test_F4_grep_skips_a_file_swapped_for_a_fifo_without_blocking(ws_and_keys, monkeypatch):
    ws, _, host = ws_and_keys
    walk = HostBackend._walk_files

    def swapping_walk(self, top, max_depth=None):
        for rel, real in walk(self, top, max_depth):
            if rel == "a.txt":
                os.unlink(real)
                os.mkfifo(real)  # a plain open() would wait for a writer for ever
            yield rel, real

    monkeypatch.setattr(HostBackend, "_walk_files", swapping_walk)
    hits = await host.grep("sk-", "/src")
    assert [m.path for m in hits] == ["/src/sub/b.txt"]


async def test_walk_still_finds_files_in_nested_folders_and_through_inner_symlinks(ws_and_keys):
    ws, _, host = ws_and_keys
    (ws / "src" / "sub" / "deeper").mkdir()
    (ws / "src" / "sub" / "deeper" / "c.txt").write_text("sk- deep\n")
    os.symlink(ws / "src" / "a.txt", ws / "src" / "link.txt")  # a file symlink inside the root counts
    hits = await host.grep("sk-", "/src")
    assert sorted(m.path for m in hits) == ["/src/a.txt", "/src/link.txt", "/src/sub/b.txt", "/src/sub/deeper/c.txt"]
    assert sorted(await host.glob("**/*.txt", "/src")) == [
        "/src/a.txt", "/src/link.txt", "/src/sub/b.txt", "/src/sub/deeper/c.txt"]
