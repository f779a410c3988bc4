"""F4, P5: on a disk that ignores case (macOS), a protected folder spelt in another case is still
protected (issue 8). The flag is forced: this machine's disk is case-sensitive."""

from __future__ import annotations

import pytest

from workbench.backends import HostBackend
from workbench.errors import BackendRefusal


async def test_F4_on_a_case_insensitive_disk_a_protected_folder_is_protected_in_any_case(tmp_path):
    """Forced: on macOS /project/.WORKBENCH/threads.sqlite3 opens the thread store; it must be refused."""
    ws = tmp_path / "ws"
    (ws / ".workbench").mkdir(parents=True)
    (ws / ".workbench" / "threads.sqlite3").write_text("db")
    host = HostBackend(ws, protected=[ws / ".workbench"])
    host._icase = True  # this machine's disk is case-sensitive; the comparison is what is tested
    for path in ("/.WORKBENCH/threads.sqlite3", "/.WorkBench/Threads.SQLITE3", "/.WORKBENCH"):
        with pytest.raises(BackendRefusal, match="protected path"):
            await host.read(path)
        with pytest.raises(BackendRefusal, match="protected path"):
            await host.write(path, "x")
    assert (ws / ".workbench" / "threads.sqlite3").read_text() == "db"
    assert not (ws / ".WORKBENCH").exists()
    # A sibling whose name only starts the same stays reachable.
    (ws / ".workbench2").mkdir()
    await host.write("/.WORKBENCH2/a.txt", "ok")
    host._icase = False  # a case-sensitive disk: another spelling is another (unprotected) file
    await host.write("/.WORKBENCH/x.txt", "ok")
