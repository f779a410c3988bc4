"""File backends (F1, F2): the shared contract on every backend, then what each one adds."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from workbench.backends import (
    BackendIOError,
    BackendRefusal,
    CompositeBackend,
    EditMismatch,
    FileBackend,
    FileInfo,
    FileNotFound,
    GrepMatch,
    HostBackend,
    ReadOnlyBackend,
    StateBackend,
    StoreBackend,
    normalize,
)
from workbench.backends.base import strip_glob_prefix
from workbench.errors import NotTextFile, WorkbenchError


class Holder:
    """Thread state stand-in for StateBackend: keeps every snapshot it is handed."""

    def __init__(self) -> None:
        self.files: dict[str, dict[str, Any]] = {}
        self.snapshots: list[dict[str, dict[str, Any]]] = []

    def get(self) -> dict[str, dict[str, Any]]:
        return self.files

    def set(self, files: dict[str, dict[str, Any]]) -> None:
        self.snapshots.append(files)
        self.files = files

    def backend(self) -> StateBackend:
        return StateBackend(self.get, self.set)


def state_backend() -> StateBackend:
    return Holder().backend()


@pytest.fixture(params=["state", "host", "store", "composite"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> FileBackend:
    """Every writable backend, empty."""
    kind = request.param
    if kind == "state":
        return state_backend()
    if kind == "host":
        root = tmp_path / "root"
        root.mkdir()
        return HostBackend(root)
    if kind == "store":
        store = StoreBackend(tmp_path / "files.db")
        request.addfinalizer(store.close)
        return store
    root = tmp_path / "root"
    root.mkdir()
    return CompositeBackend({"/": HostBackend(root)})


TREE = {
    "/a.py": "def top():\n    return 1\n",
    "/src/b.py": "import os\n\ndef bee():\n    pass\n",
    "/src/pkg/c.py": "def sea():\n    x = 'def not_at_start'\n",
    "/src/pkg/d.txt": "def in a text file\n",
    "/docs/e.md": "# Title\n",
}


async def write_tree(b: FileBackend, tree: dict[str, str] = TREE) -> None:
    for path, content in tree.items():
        await b.write(path, content)


# ------------------------------------------------------------------------------------ normalize


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("/", "/"),
        ("/a/b", "/a/b"),
        ("/a/b/", "/a/b"),
        ("//a///b", "/a/b"),
        ("/a/./b/.", "/a/b"),
        ("/a/b/../c", "/a/c"),
        ("/a/..", "/"),
    ],
)
def test_normalize_canonical_form(raw: str, expected: str) -> None:
    assert normalize(raw) == expected


@pytest.mark.parametrize("raw", ["/..", "/a/../..", "/a/b/../../../etc/passwd"])
def test_normalize_refuses_climbing_above_root(raw: str) -> None:
    with pytest.raises(BackendRefusal, match="leaves the root") as info:
        normalize(raw)
    assert info.value.path == raw


@pytest.mark.parametrize("raw", ["a/b", "", "./a", "/a\x00b"])
def test_normalize_refuses_relative_or_nul(raw: str) -> None:
    with pytest.raises(BackendRefusal):
        normalize(raw)


def test_error_classes_are_distinct_workbench_errors() -> None:
    refusal = BackendRefusal("/docs/a.md", "read-only mount")
    io = BackendIOError("/a", "disk on fire")
    missing = FileNotFound("/b")
    mismatch = EditMismatch("/c", "matched 2 times")
    for err in (refusal, io, missing, mismatch):
        assert isinstance(err, WorkbenchError)
    assert not isinstance(refusal, (BackendIOError, FileNotFound))
    assert not isinstance(io, (BackendRefusal, FileNotFound))
    assert not isinstance(missing, (BackendRefusal, BackendIOError))
    assert str(refusal) == "Refused: /docs/a.md: read-only mount"
    assert refusal.reason == "read-only mount"
    assert "/a" in str(io) and "disk on fire" in str(io)
    assert str(missing) == "File not found: /b"
    assert "/c" in str(mismatch) and "matched 2 times" in str(mismatch)


def test_strip_glob_prefix() -> None:
    assert strip_glob_prefix("**/*.py", "project") == ["**/*.py"]
    assert strip_glob_prefix("project/*.py", "project") == ["*.py"]
    assert strip_glob_prefix("docs/*.md", "project") == []
    assert strip_glob_prefix("*/src/*.py", "project") == ["src/*.py"]
    assert strip_glob_prefix("**/src/*.py", "a/b") == ["**/src/*.py"]
    assert strip_glob_prefix("p*", "project") == [""]


# -------------------------------------------------------------------------------- the contract


async def test_write_then_read(backend: FileBackend) -> None:
    await backend.write("/deep/er/file.txt", "héllo\r\nwörld\n")
    assert await backend.read("/deep/er/file.txt") == "héllo\r\nwörld\n"
    await backend.write("/deep/er/file.txt", "replaced")
    assert await backend.read("/deep/er/file.txt") == "replaced"
    assert await backend.read("/deep/./x/../er//file.txt") == "replaced"


async def test_write_rejects_non_text(backend: FileBackend) -> None:
    with pytest.raises(TypeError):
        await backend.write("/a.bin", b"bytes")  # type: ignore[arg-type]
    assert not await backend.exists("/a.bin")


async def test_edit_once(backend: FileBackend) -> None:
    await backend.write("/f.py", "x = 1\ny = 2\n")
    assert await backend.edit("/f.py", "y = 2", "y = 3") == 1
    assert await backend.read("/f.py") == "x = 1\ny = 3\n"


async def test_edit_mismatch_leaves_file_alone(backend: FileBackend) -> None:
    await backend.write("/f.py", "x = 1\n")
    with pytest.raises(EditMismatch, match="not found") as info:
        await backend.edit("/f.py", "z = 9", "z = 0")
    assert info.value.path == "/f.py"
    assert await backend.read("/f.py") == "x = 1\n"


async def test_edit_multiple_matches_needs_replace_all(backend: FileBackend) -> None:
    await backend.write("/f.py", "a\na\nb\n")
    with pytest.raises(EditMismatch) as info:
        await backend.edit("/f.py", "a", "c")
    assert "2 times" in str(info.value)
    assert "replace_all" in str(info.value)
    assert "context" in str(info.value)
    assert await backend.read("/f.py") == "a\na\nb\n"


async def test_edit_replace_all(backend: FileBackend) -> None:
    await backend.write("/f.py", "a-a-a b")
    assert await backend.edit("/f.py", "a", "cc", replace_all=True) == 3
    assert await backend.read("/f.py") == "cc-cc-cc b"


async def test_edit_empty_old_text_is_a_mismatch(backend: FileBackend) -> None:
    await backend.write("/f.py", "abc")
    with pytest.raises(EditMismatch, match="empty"):
        await backend.edit("/f.py", "", "x", replace_all=True)
    assert await backend.read("/f.py") == "abc"


async def test_edit_missing_file(backend: FileBackend) -> None:
    with pytest.raises(FileNotFound):
        await backend.edit("/nope.py", "a", "b")


async def test_read_missing_file_is_file_not_found(backend: FileBackend) -> None:
    with pytest.raises(FileNotFound) as info:
        await backend.read("/missing.md")
    assert info.value.path == "/missing.md"
    assert not isinstance(info.value, (BackendRefusal, BackendIOError))


async def test_read_a_directory_is_an_io_error(backend: FileBackend) -> None:
    await backend.write("/dir/f.txt", "x")
    with pytest.raises(BackendIOError, match="is a directory"):
        await backend.read("/dir")


async def test_write_over_a_directory_or_under_a_file_fails(backend: FileBackend) -> None:
    await backend.write("/dir/f.txt", "x")
    with pytest.raises(BackendIOError):
        await backend.write("/dir", "clobber")
    with pytest.raises(BackendIOError):
        await backend.write("/dir/f.txt/child", "y")
    assert await backend.read("/dir/f.txt") == "x"


async def test_paths_leaving_the_root_are_refused(backend: FileBackend) -> None:
    with pytest.raises(BackendRefusal, match="leaves the root"):
        await backend.read("/../etc/passwd")
    with pytest.raises(BackendRefusal, match="leaves the root"):
        await backend.write("/a/../../x.txt", "no")
    with pytest.raises(BackendRefusal):
        await backend.read("relative.txt")


async def test_list_direct_children_sorted(backend: FileBackend) -> None:
    await write_tree(backend)
    await backend.write("/src/é.txt", "é")
    infos = await backend.list("/src")
    assert [i.path for i in infos] == ["/src/b.py", "/src/pkg", "/src/é.txt"]
    assert [i.is_dir for i in infos] == [False, True, False]
    assert infos[0].size == len(TREE["/src/b.py"].encode())
    assert infos[2].size == 2  # bytes of UTF-8, not characters
    assert all(isinstance(i, FileInfo) and i.modified > 0 for i in infos)
    top = await backend.list("/")
    assert [i.path for i in top] == ["/a.py", "/docs", "/src"]


async def test_list_missing_and_file(backend: FileBackend) -> None:
    await write_tree(backend)
    with pytest.raises(FileNotFound):
        await backend.list("/nowhere")
    [info] = await backend.list("/a.py")
    assert info.path == "/a.py" and not info.is_dir


async def test_glob(backend: FileBackend) -> None:
    await write_tree(backend)
    assert await backend.glob("**/*.py") == ["/a.py", "/src/b.py", "/src/pkg/c.py"]
    assert await backend.glob("*.py") == ["/a.py"]
    assert await backend.glob("*.py", "/src") == ["/src/b.py"]
    assert await backend.glob("**/*.py", "/src") == ["/src/b.py", "/src/pkg/c.py"]
    assert await backend.glob("src/**/*.py") == ["/src/b.py", "/src/pkg/c.py"]
    assert await backend.glob("/src/pkg/?.py", "/docs") == ["/src/pkg/c.py"]
    assert await backend.glob("**/*.{md,txt}") == ["/docs/e.md", "/src/pkg/d.txt"]
    assert await backend.glob("**") == sorted(TREE)
    assert await backend.glob("src/pkg/d.txt") == ["/src/pkg/d.txt"]
    assert await backend.glob("src") == []  # directories are not listed
    assert await backend.glob("*.py", "/missing") == []


async def test_grep_with_glob_filter(backend: FileBackend) -> None:
    await write_tree(backend)
    hits = await backend.grep(r"^def \w+", glob="*.py")
    assert hits == [
        GrepMatch("/a.py", 1, "def top():"),
        GrepMatch("/src/b.py", 3, "def bee():"),
        GrepMatch("/src/pkg/c.py", 1, "def sea():"),
    ]
    everything = await backend.grep("def")
    assert [(m.path, m.line) for m in everything] == [
        ("/a.py", 1),
        ("/src/b.py", 3),
        ("/src/pkg/c.py", 1),
        ("/src/pkg/c.py", 2),
        ("/src/pkg/d.txt", 1),
    ]
    in_dir = await backend.grep("def", "/src/pkg", glob="*.txt")
    assert in_dir == [GrepMatch("/src/pkg/d.txt", 1, "def in a text file")]
    whole_path = await backend.grep("def", "/", glob="src/*.py")
    assert [m.path for m in whole_path] == ["/src/b.py"]
    one_file = await backend.grep("return", "/a.py")
    assert one_file == [GrepMatch("/a.py", 2, "    return 1")]


async def test_grep_errors(backend: FileBackend) -> None:
    await write_tree(backend)
    with pytest.raises(ValueError, match="Invalid regular expression"):
        await backend.grep("def (", "/")
    with pytest.raises(FileNotFound):
        await backend.grep("def", "/nowhere")


async def test_grep_keeps_crlf_out_of_text(backend: FileBackend) -> None:
    await backend.write("/w.txt", "one\r\ntwo\r\n")
    assert await backend.grep("two$", "/") == [GrepMatch("/w.txt", 2, "two")]


async def test_stat_and_exists(backend: FileBackend) -> None:
    await write_tree(backend)
    info = await backend.stat("/src/b.py")
    assert info == FileInfo("/src/b.py", False, len(TREE["/src/b.py"].encode()), info.modified)
    assert info.modified > 0
    folder = await backend.stat("/src/pkg")
    assert folder.is_dir and folder.path == "/src/pkg" and folder.size == 0
    assert (await backend.stat("/")).is_dir
    with pytest.raises(FileNotFound):
        await backend.stat("/src/none.py")
    assert await backend.exists("/src/b.py")
    assert await backend.exists("/src")
    assert not await backend.exists("/src/none.py")


# ---------------------------------------------------------------------------------------- host


@pytest.fixture
def host_dirs(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("top secret\n")
    return root, outside


async def test_host_maps_virtual_paths_under_root(host_dirs: tuple[Path, Path]) -> None:
    root, _ = host_dirs
    host = HostBackend(root)
    await host.write("/a/b.txt", "hi")
    assert (root / "a" / "b.txt").read_text() == "hi"
    (root / "c.txt").write_text("from disk")
    assert await host.read("/c.txt") == "from disk"
    assert host.root == Path(os.path.realpath(root))


async def test_host_dotdot_escape_refused(host_dirs: tuple[Path, Path]) -> None:
    root, outside = host_dirs
    host = HostBackend(root)
    for path in ("/../outside/secret.txt", "/sub/../../outside/secret.txt"):
        with pytest.raises(BackendRefusal) as info:
            await host.read(path)
        assert not isinstance(info.value, BackendIOError)
        with pytest.raises(BackendRefusal):
            await host.write(path, "pwned")
    assert (outside / "secret.txt").read_text() == "top secret\n"


async def test_host_symlink_to_outside_file_refused(host_dirs: tuple[Path, Path]) -> None:
    root, outside = host_dirs
    (root / "link.txt").symlink_to(outside / "secret.txt")
    (root / "keep.txt").write_text("top secret here too\n")
    host = HostBackend(root)
    with pytest.raises(BackendRefusal, match="outside the root") as info:
        await host.read("/link.txt")
    assert info.value.path == "/link.txt"
    with pytest.raises(BackendRefusal):
        await host.write("/link.txt", "pwned")
    with pytest.raises(BackendRefusal):
        await host.edit("/link.txt", "top", "pwned")
    with pytest.raises(BackendRefusal):
        await host.stat("/link.txt")
    assert (outside / "secret.txt").read_text() == "top secret\n"
    # Walking never follows it out either.
    assert [i.path for i in await host.list("/")] == ["/keep.txt"]
    assert await host.glob("**") == ["/keep.txt"]
    assert [m.path for m in await host.grep("secret")] == ["/keep.txt"]


async def test_host_symlink_to_outside_dir_refused(host_dirs: tuple[Path, Path]) -> None:
    root, outside = host_dirs
    (root / "out").symlink_to(outside, target_is_directory=True)
    host = HostBackend(root)
    with pytest.raises(BackendRefusal, match="outside the root"):
        await host.read("/out/secret.txt")
    with pytest.raises(BackendRefusal):
        await host.write("/out/new.txt", "pwned")
    with pytest.raises(BackendRefusal):
        await host.write("/out/deeper/new.txt", "pwned")
    with pytest.raises(BackendRefusal):
        await host.list("/out")
    with pytest.raises(BackendRefusal):
        await host.glob("*.txt", "/out")
    with pytest.raises(BackendRefusal):
        await host.grep("secret", "/out")
    with pytest.raises(BackendRefusal):
        await host.exists("/out/secret.txt")
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert await host.grep("secret") == []


async def test_host_dangling_symlink_outside_refused(host_dirs: tuple[Path, Path]) -> None:
    root, outside = host_dirs
    (root / "dangling.txt").symlink_to(outside / "not-yet.txt")
    host = HostBackend(root)
    with pytest.raises(BackendRefusal):
        await host.write("/dangling.txt", "pwned")
    assert not (outside / "not-yet.txt").exists()


async def test_host_symlink_inside_root_works(host_dirs: tuple[Path, Path]) -> None:
    root, _ = host_dirs
    (root / "real").mkdir()
    (root / "real" / "f.txt").write_text("inside\n")
    (root / "alias").symlink_to(root / "real", target_is_directory=True)
    (root / "f-link.txt").symlink_to(root / "real" / "f.txt")
    host = HostBackend(root)
    assert await host.read("/alias/f.txt") == "inside\n"
    assert await host.read("/f-link.txt") == "inside\n"
    assert [i.path for i in await host.list("/alias")] == ["/alias/f.txt"]
    await host.write("/f-link.txt", "changed\n")
    assert (root / "f-link.txt").is_symlink()  # the link survives the atomic write
    assert (root / "real" / "f.txt").read_text() == "changed\n"
    await host.write("/alias/g.txt", "new")
    assert (root / "real" / "g.txt").read_text() == "new"
    assert "/f-link.txt" in await host.glob("*.txt")


async def test_host_io_errors_are_not_refusals(host_dirs: tuple[Path, Path]) -> None:
    root, _ = host_dirs
    (root / "bad.txt").write_bytes(b"ok \xff\xfe not utf-8")
    (root / "folder").mkdir()
    host = HostBackend(root)
    with pytest.raises(BackendIOError, match="UTF-8") as info:
        await host.read("/bad.txt")
    assert info.value.path == "/bad.txt"
    assert not isinstance(info.value, (BackendRefusal, FileNotFound))
    with pytest.raises(BackendIOError, match="is a directory") as info2:
        await host.read("/folder")
    assert not isinstance(info2.value, BackendRefusal)
    with pytest.raises(BackendIOError):
        await host.edit("/bad.txt", "ok", "ko")
    assert (root / "bad.txt").read_bytes() == b"ok \xff\xfe not utf-8"
    # A walk skips the undecodable file rather than failing the whole grep.
    (root / "good.txt").write_text("ok fine\n")
    assert [m.path for m in await host.grep("ok")] == ["/good.txt"]


async def test_host_os_error_maps_to_backend_io_error(
    host_dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, _ = host_dirs
    (root / "f.txt").write_text("x")
    host = HostBackend(root)
    real_open = os.open  # the backend opens with os.open (non-blocking, F3)

    def failing_open(file: Any, *args: Any, **kwargs: Any) -> Any:
        if str(file).endswith("f.txt"):
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(os, "open", failing_open)
    with pytest.raises(BackendIOError, match="Permission denied") as caught:
        await host.read("/f.txt")
    assert not isinstance(caught.value, NotTextFile)  # a real I/O failure, not "not a text file" (I5)


async def test_host_write_is_atomic_and_keeps_mode(host_dirs: tuple[Path, Path]) -> None:
    root, _ = host_dirs
    host = HostBackend(root)
    await host.write("/f.txt", "one")
    os.chmod(root / "f.txt", 0o640)
    await host.write("/f.txt", "two")
    assert (root / "f.txt").read_text() == "two"
    assert (root / "f.txt").stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in root.iterdir()) == ["f.txt"]  # no temp file left behind
    await host.write("/new.txt", "n")
    umask = os.umask(0o022)
    os.umask(umask)
    assert (root / "new.txt").stat().st_mode & 0o777 == 0o666 & ~umask  # not mkstemp's 0600


async def test_host_glob_and_grep_skip_git_and_workbench(host_dirs: tuple[Path, Path]) -> None:
    root, _ = host_dirs
    host = HostBackend(root)
    await host.write("/.git/config", "needle")
    await host.write("/.workbench/threads.db", "needle")
    await host.write("/sub/.git/HEAD", "needle")
    await host.write("/src/a.txt", "needle")
    assert await host.glob("**") == ["/src/a.txt"]
    assert [m.path for m in await host.grep("needle")] == ["/src/a.txt"]
    assert await host.read("/.git/config") == "needle"  # still readable by path


async def test_host_readonly(host_dirs: tuple[Path, Path]) -> None:
    root, _ = host_dirs
    (root / "f.txt").write_text("x")
    host = HostBackend(root, readonly=True)
    assert host.readonly
    assert await host.read("/f.txt") == "x"
    with pytest.raises(BackendRefusal, match="read-only"):
        await host.write("/f.txt", "y")
    with pytest.raises(BackendRefusal, match="read-only"):
        await host.edit("/f.txt", "x", "y")
    with pytest.raises(BackendRefusal, match="read-only"):
        await host.write("/new.txt", "y")
    assert (root / "f.txt").read_text() == "x"
    assert not (root / "new.txt").exists()


async def test_host_missing_root_reads_as_missing(tmp_path: Path) -> None:
    host = HostBackend(tmp_path / "not-there")
    with pytest.raises(FileNotFound):
        await host.read("/AGENTS.md")
    assert await host.glob("**") == []


# --------------------------------------------------------------------------------------- state


async def test_state_writes_produce_new_dicts() -> None:
    holder = Holder()
    b = holder.backend()
    await b.write("/a.txt", "one")
    first = holder.files
    first_copy = {k: dict(v) for k, v in first.items()}
    await b.write("/b.txt", "two")
    assert holder.files is not first
    assert first == first_copy  # the old snapshot is untouched
    assert set(holder.files) == {"/a.txt", "/b.txt"}
    second = holder.files
    await b.edit("/a.txt", "one", "uno")
    assert holder.files is not second
    assert second["/a.txt"]["content"] == "one"
    assert holder.files["/a.txt"]["content"] == "uno"
    assert len(holder.snapshots) == 3
    assert isinstance(holder.files["/a.txt"]["modified"], float)


async def test_state_reads_and_failed_edits_do_not_set() -> None:
    holder = Holder()
    b = holder.backend()
    await b.write("/a.txt", "one")
    await b.read("/a.txt")
    await b.list("/")
    await b.glob("**")
    await b.grep("o")
    with pytest.raises(EditMismatch):
        await b.edit("/a.txt", "zzz", "y")
    assert len(holder.snapshots) == 1


async def test_state_reads_state_as_given() -> None:
    files = {"/notes/a.md": {"content": "hello", "modified": 5.0}}
    b = StateBackend(lambda: files, lambda new: None)
    assert await b.read("/notes/a.md") == "hello"
    assert await b.stat("/notes") == FileInfo("/notes", True, 0, 5.0)
    assert await b.list("/") == [FileInfo("/notes", True, 0, 5.0)]
    empty = StateBackend(lambda: None, lambda new: None)  # type: ignore[arg-type,return-value]
    assert await empty.list("/") == []


# --------------------------------------------------------------------------------------- store


async def test_store_instances_share_the_database(tmp_path: Path) -> None:
    db = tmp_path / "ws" / "files.db"
    one, two = StoreBackend(db), StoreBackend(db)
    try:
        await one.write("/shared/a.txt", "from one")
        assert await two.read("/shared/a.txt") == "from one"
        await two.edit("/shared/a.txt", "one", "two")
        assert await one.read("/shared/a.txt") == "from two"
        assert await one.glob("**") == ["/shared/a.txt"]
    finally:
        one.close()
        two.close()
    again = StoreBackend(db)
    assert await again.read("/shared/a.txt") == "from two"
    again.close()


async def test_store_namespaces_isolate(tmp_path: Path) -> None:
    db = tmp_path / "files.db"
    a, b = StoreBackend(db, "alpha"), StoreBackend(db, namespace="beta")
    try:
        await a.write("/x.txt", "alpha x")
        await b.write("/x.txt", "beta x")
        await b.write("/only-beta.txt", "b")
        assert await a.read("/x.txt") == "alpha x"
        assert await b.read("/x.txt") == "beta x"
        with pytest.raises(FileNotFound):
            await a.read("/only-beta.txt")
        assert await a.glob("**") == ["/x.txt"]
        assert [i.path for i in await a.list("/")] == ["/x.txt"]
        assert [m.path for m in await a.grep("x")] == ["/x.txt"]
    finally:
        a.close()
        b.close()


async def test_store_usable_from_another_threads_loop(tmp_path: Path) -> None:
    store = StoreBackend(tmp_path / "files.db")
    await store.write("/a.txt", "main loop")
    result: list[str] = []
    errors: list[BaseException] = []

    def other_thread() -> None:
        async def work() -> None:
            result.append(await store.read("/a.txt"))
            await store.write("/b.txt", "other loop")

        try:
            asyncio.run(work())
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    t = threading.Thread(target=other_thread)
    t.start()
    await asyncio.to_thread(t.join)
    assert errors == []
    assert result == ["main loop"]
    assert await store.read("/b.txt") == "other loop"
    store.close()


async def test_store_database_error_is_io_error(tmp_path: Path) -> None:
    db = tmp_path / "files.db"
    db.write_bytes(b"this is not a sqlite database, not at all" * 100)
    store = StoreBackend(db)
    with pytest.raises(BackendIOError, match="database") as info:
        await store.read("/a.txt")
    assert info.value.path == "/a.txt"
    store.close()


# ----------------------------------------------------------------------------------- read-only


async def test_readonly_wrapper() -> None:
    holder = Holder()
    inner = holder.backend()
    await write_tree(inner)
    ro = ReadOnlyBackend(inner)
    assert ro.readonly and not inner.readonly
    assert await ro.read("/a.py") == TREE["/a.py"]
    assert await ro.glob("**/*.md") == ["/docs/e.md"]
    assert [i.path for i in await ro.list("/")] == ["/a.py", "/docs", "/src"]
    assert len(await ro.grep("^def", glob="*.py")) == 3
    assert (await ro.stat("/src")).is_dir
    assert await ro.exists("/a.py")
    before = len(holder.snapshots)
    with pytest.raises(BackendRefusal, match="read-only") as info:
        await ro.write("/a.py", "x")
    assert info.value.path == "/a.py"
    with pytest.raises(BackendRefusal, match="read-only"):
        await ro.edit("/a.py", "def", "xyz")
    assert len(holder.snapshots) == before
    assert await inner.read("/a.py") == TREE["/a.py"]


# ----------------------------------------------------------------------------------- composite


@pytest.fixture
async def mounted(tmp_path: Path) -> dict[str, Any]:
    (tmp_path / "project").mkdir()
    project = HostBackend(tmp_path / "project")
    docs = state_backend()
    scratch = state_backend()
    ro_inner = state_backend()
    await ro_inner.write("/ref.md", "reference text\n")
    comp = CompositeBackend(
        {"/project": project, "/project/docs": docs, "/scratch/": scratch, "/ro": ReadOnlyBackend(ro_inner)}
    )
    return {"comp": comp, "project": project, "docs": docs, "scratch": scratch, "ro_inner": ro_inner, "dir": tmp_path}


async def test_composite_longest_prefix_wins(mounted: dict[str, Any]) -> None:
    comp, project, docs = mounted["comp"], mounted["project"], mounted["docs"]
    await comp.write("/project/docs/guide.md", "guide")
    await comp.write("/project/src/a.py", "print('a')\n")
    assert await docs.read("/guide.md") == "guide"
    assert not await project.exists("/docs/guide.md")
    assert await project.read("/src/a.py") == "print('a')\n"
    assert (mounted["dir"] / "project" / "src" / "a.py").exists()
    backend, inner = comp.backend_for("/project/docs/guide.md")
    assert backend is docs and inner == "/guide.md"
    backend, inner = comp.backend_for("/project/docsx/a")
    assert backend is project and inner == "/docsx/a"
    backend, inner = comp.backend_for("/scratch")
    assert backend is mounted["scratch"] and inner == "/"


async def test_composite_reprefixes_results(mounted: dict[str, Any]) -> None:
    comp = mounted["comp"]
    await comp.write("/project/src/a.py", "needle = 1\n")
    await comp.write("/project/README.md", "needle in readme\n")
    await comp.write("/project/docs/guide.md", "needle in guide\n")
    await comp.write("/scratch/notes.md", "needle in notes\n")
    # A file in the project folder that the docs mount shadows never shows up.
    (mounted["dir"] / "project" / "docs").mkdir()
    (mounted["dir"] / "project" / "docs" / "hidden.md").write_text("needle hidden\n")

    assert [(i.path, i.is_dir) for i in await comp.list("/project")] == [
        ("/project/README.md", False),
        ("/project/docs", True),
        ("/project/src", True),
    ]
    assert [i.path for i in await comp.list("/project/docs")] == ["/project/docs/guide.md"]
    assert await comp.glob("**/*.md") == [
        "/project/README.md",
        "/project/docs/guide.md",
        "/ro/ref.md",
        "/scratch/notes.md",
    ]
    assert await comp.glob("*.md", "/project") == ["/project/README.md"]
    assert await comp.glob("project/**/*.md") == ["/project/README.md", "/project/docs/guide.md"]
    assert await comp.glob("*/notes.md") == ["/scratch/notes.md"]
    assert await comp.glob("/project/docs/*.md") == ["/project/docs/guide.md"]
    hits = await comp.grep("needle")
    assert [(m.path, m.line) for m in hits] == [
        ("/project/README.md", 1),
        ("/project/docs/guide.md", 1),
        ("/project/src/a.py", 1),
        ("/scratch/notes.md", 1),
    ]
    assert [m.path for m in await comp.grep("needle", glob="*.md")] == [
        "/project/README.md",
        "/project/docs/guide.md",
        "/scratch/notes.md",
    ]
    assert [m.path for m in await comp.grep("needle", "/", glob="scratch/*.md")] == ["/scratch/notes.md"]
    assert [m.path for m in await comp.grep("needle", "/project", glob="docs/*.md")] == ["/project/docs/guide.md"]
    info = await comp.stat("/project/src/a.py")
    assert info.path == "/project/src/a.py" and not info.is_dir


async def test_composite_root_lists_mount_points(mounted: dict[str, Any]) -> None:
    comp = mounted["comp"]
    assert await comp.list("/") == [
        FileInfo("/project", True, 0, 0.0),
        FileInfo("/ro", True, 0, 0.0),
        FileInfo("/scratch", True, 0, 0.0),
    ]
    assert (await comp.stat("/")).is_dir
    assert await comp.exists("/scratch")  # an empty mount still exists
    assert await comp.list("/scratch") == []


async def test_composite_no_mount_refused(mounted: dict[str, Any]) -> None:
    comp = mounted["comp"]
    for call in (
        comp.read("/elsewhere/x.txt"),
        comp.write("/elsewhere/x.txt", "x"),
        comp.edit("/elsewhere/x.txt", "a", "b"),
        comp.list("/elsewhere"),
        comp.stat("/elsewhere"),
        comp.exists("/elsewhere"),
        comp.glob("*.md", "/elsewhere"),
        comp.grep("x", "/elsewhere"),
    ):
        with pytest.raises(BackendRefusal, match="no mount") as info:
            await call
        assert info.value.path.startswith("/elsewhere")
        assert "/project" in str(info.value)
    with pytest.raises(BackendRefusal):
        comp.backend_for("/elsewhere")
    with pytest.raises(BackendRefusal, match="no mount"):
        await CompositeBackend({}).read("/a")


async def test_composite_errors_name_the_outer_path(mounted: dict[str, Any]) -> None:
    comp = mounted["comp"]
    with pytest.raises(FileNotFound) as info:
        await comp.read("/project/src/missing.py")
    assert info.value.path == "/project/src/missing.py"
    await comp.write("/scratch/f.txt", "a a")
    with pytest.raises(EditMismatch, match="2 times") as info2:
        await comp.edit("/scratch/f.txt", "a", "b")
    assert info2.value.path == "/scratch/f.txt"
    assert await comp.edit("/scratch/f.txt", "a", "b", replace_all=True) == 2
    assert await mounted["scratch"].read("/f.txt") == "b b"


async def test_composite_readonly_mount_refused(mounted: dict[str, Any]) -> None:
    comp, ro_inner = mounted["comp"], mounted["ro_inner"]
    assert await comp.read("/ro/ref.md") == "reference text\n"
    with pytest.raises(BackendRefusal, match=r"read-only mount \(/ro\)") as info:
        await comp.write("/ro/ref.md", "changed")
    assert info.value.path == "/ro/ref.md"
    assert not isinstance(info.value, BackendIOError)
    with pytest.raises(BackendRefusal, match="read-only"):
        await comp.edit("/ro/ref.md", "reference", "changed")
    with pytest.raises(BackendRefusal, match="read-only"):
        await comp.write("/ro/new.md", "x")
    assert await ro_inner.read("/ref.md") == "reference text\n"
    assert not await ro_inner.exists("/new.md")
    assert not comp.readonly
    assert CompositeBackend({"/a": ReadOnlyBackend(state_backend()), "/b": HostBackend("/x", True)}).readonly


async def test_composite_refusal_inside_a_mount_keeps_outer_path(mounted: dict[str, Any]) -> None:
    comp = mounted["comp"]
    outside = mounted["dir"] / "outside"
    outside.mkdir()
    (outside / "s.txt").write_text("secret")
    (mounted["dir"] / "project" / "out").symlink_to(outside, target_is_directory=True)
    with pytest.raises(BackendRefusal, match="outside the root") as info:
        await comp.read("/project/out/s.txt")
    assert info.value.path == "/project/out/s.txt"


def test_composite_duplicate_mounts_rejected() -> None:
    with pytest.raises(ValueError, match="twice"):
        CompositeBackend({"/a": state_backend(), "/a/": state_backend()})



# -- P5, F3: targets and linear globs ---------------------------------------------------------------------


async def test_P5_target_names_where_a_symlink_leads_and_the_path_itself_otherwise(tmp_path: Path) -> None:
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "k.txt").write_text("x")
    os.symlink("secret", tmp_path / "notes")
    host = HostBackend(tmp_path)
    comp = CompositeBackend({"/project": host})
    assert await host.target("/notes/k.txt") == "/secret/k.txt"
    assert await host.target("/notes/new/file.txt") == "/secret/new/file.txt"  # not there yet
    assert await host.target("/secret/./k.txt") == "/secret/k.txt"
    assert await comp.target("/project/notes/k.txt") == "/project/secret/k.txt"
    assert await ReadOnlyBackend(comp).target("/project/notes") == "/project/secret"


async def test_P5_on_a_case_insensitive_disk_the_target_is_spelt_as_on_disk(tmp_path: Path) -> None:
    """Forced: on such a disk /SECRET/k.txt opens /Secret/k.txt, so rules must see '/Secret/k.txt'."""
    (tmp_path / "Secret").mkdir()
    (tmp_path / "Secret" / "K.txt").write_text("x")
    host = HostBackend(tmp_path)
    host._icase = True  # this machine's disk is case-sensitive; the spelling logic is what is tested
    assert await host.target("/secret/k.txt") == "/Secret/K.txt"
    assert await host.target("/Secret/K.txt") == "/Secret/K.txt"


def test_F3_strip_glob_prefix_with_many_stars_in_a_segment_is_linear() -> None:
    import time

    t = time.monotonic()
    assert strip_glob_prefix("*a*a*a*a*a*a*a*a*b/**", "a" * 200 + "c") == []
    assert time.monotonic() - t < 0.5
