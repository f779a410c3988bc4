"""The host backend on what the OS refuses and on links out of the root, as its callers see them (F2, S6, P5).

``AccessDenied`` is the OS refusing a file or folder (EACCES): still an I/O error for every tool, but a
class the instruction and skill readers report rather than fail on (I5, S6). ``noting_links_outside``
names the entries a listing leaves out as links out of the root, so the skills scan can report a skill
folder linked away (S6) while ``ls`` stays as it was. ``link_target`` is ``target`` without awaiting,
for the window's Save verdict (P5).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.harness.os_refusals import refuse
from workbench.backends.composite import CompositeBackend
from workbench.backends.base import AccessDenied
from workbench.backends.host import HostBackend, LinkOutside, noting_links_outside
from workbench.errors import BackendIOError, NotTextFile
from workbench.harness.files import FilesMiddleware


async def test_F2_the_os_refusing_a_file_is_access_denied_still_an_io_error(tmp_path: Path, monkeypatch) -> None:
    """S6/I5: the readers need to tell EACCES from a real failure; the tools see the same I/O error."""
    (tmp_path / "f.txt").write_text("x")
    (tmp_path / "locked").mkdir()
    host = CompositeBackend({"/project": HostBackend(tmp_path)})
    refuse(monkeypatch, "open", "f.txt")
    refuse(monkeypatch, "scandir", "locked")
    for call in (host.read("/project/f.txt"), host.read_head("/project/f.txt", 10), host.list("/project/locked")):
        with pytest.raises(AccessDenied) as caught:
            await call
        assert isinstance(caught.value, BackendIOError) and not isinstance(caught.value, NotTextFile)
        assert caught.value.detail == "Permission denied" and caught.value.path.startswith("/project/")
        assert str(caught.value) == f"I/O error on {caught.value.path}: Permission denied"


async def test_S6_a_listing_names_the_links_it_leaves_out_only_when_asked(tmp_path: Path) -> None:
    root, outside, keys = tmp_path / "root", tmp_path / "outside", tmp_path / "keys"
    for d in (root / "inside", outside, keys):
        d.mkdir(parents=True)
    (outside / "notes.txt").write_text("n")
    os.symlink(outside, root / "away")
    os.symlink(outside / "notes.txt", root / "note")
    os.symlink(keys, root / "keydir")
    os.symlink(root / "inside", root / "alias")
    host = CompositeBackend({"/project": HostBackend(root, protected=[keys])})
    plain = [i.path for i in await host.list("/project")]
    with noting_links_outside() as noted:
        listed = [i.path for i in await host.list("/project")]
    assert listed == plain == ["/project/alias", "/project/inside"]
    # F4: a link into a protected folder is never named, not even here.
    assert sorted(noted) == [LinkOutside("away", True), LinkOutside("note", False)]
    with noting_links_outside() as again:
        pass
    await host.list("/project")  # outside the block: nobody is told
    assert again == []


async def test_P5_link_target_answers_what_target_answers(tmp_path: Path) -> None:
    (tmp_path / "protected").mkdir()
    (tmp_path / "protected" / "rules.md").write_text("r")
    os.symlink("protected/rules.md", tmp_path / "AGENTS.md")
    host = HostBackend(tmp_path)
    for path in ("/AGENTS.md", "/protected/rules.md", "/new.md", "/"):
        assert host.link_target(path) == await host.target(path)
    assert host.link_target("/AGENTS.md") == "/protected/rules.md"


async def test_F2_the_file_tools_report_access_denied_as_before(tmp_path: Path, monkeypatch) -> None:
    """Nothing changes for the model: an I/O error naming the path and the OS's reason."""
    (tmp_path / "f.txt").write_text("x")
    refuse(monkeypatch, "open", "f.txt")
    backend = CompositeBackend({"/project": HostBackend(tmp_path)})
    read_file = next(t for t in FilesMiddleware(backend).tools() if t.name == "read_file")
    out = await read_file.func({"path": "/project/f.txt"}, None)
    assert out.content == "Error: I/O error on /project/f.txt: Permission denied", out
