"""A folder on disk as a file backend: virtual ``/a/b`` is ``<root>/a/b`` (F1).

Every path is resolved (symlinks included) and must stay inside the root's real path; anything
else is a refusal. Disk work runs in a worker thread so a big grep never stalls the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat as stat_mod
import tempfile
from collections.abc import Iterator
from pathlib import Path

from workbench.backends.base import (
    BackendIOError,
    BackendRefusal,
    FileBackend,
    FileInfo,
    FileNotFound,
    GrepMatch,
    PathError,
    apply_edit,
    compile_grep,
    glob_regex,
    grep_filter,
    grep_text,
    join,
    normalize,
    require_text,
    split_glob,
)

__all__ = ["HostBackend", "SKIPPED_DIRS"]

SKIPPED_DIRS = frozenset({".git", ".workbench"})
"""Folders glob and grep never walk into (they are still readable by path)."""

GREP_MAX_BYTES = 16 * 1024 * 1024
"""Files larger than this are skipped when grep walks a folder (a file named directly is searched)."""


def _umask() -> int:
    """The process umask, so new files get the usual permissions (mkstemp makes them 0600)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_NEW_FILE_MODE = 0o666 & ~_umask()


class HostBackend(FileBackend):
    """Files under ``root`` on the host; ``readonly=True`` refuses every write."""

    def __init__(self, root: Path | str, readonly: bool = False) -> None:
        self._root = os.path.realpath(os.fspath(root))
        self._root_key = os.path.normcase(self._root)
        self._readonly = readonly

    def __repr__(self) -> str:
        return f"HostBackend({self._root!r}, readonly={self._readonly})"

    @property
    def root(self) -> Path:
        """The real path of the root folder."""
        return Path(self._root)

    @property
    def readonly(self) -> bool:
        return self._readonly

    # ------------------------------------------------------------------------------ paths

    def _inside(self, real: str) -> bool:
        key = os.path.normcase(real)
        root = self._root_key
        return key == root or key.startswith(root.rstrip(os.sep) + os.sep)

    def _resolve(self, path: str) -> tuple[str, str]:
        """The normalized virtual path and its real path, refused if it resolves outside the root."""
        v = normalize(path)
        rel = v.lstrip("/")
        joined = os.path.join(self._root, *rel.split("/")) if rel else self._root
        real = os.path.realpath(joined)
        if not self._inside(real):
            raise BackendRefusal(v, "path resolves outside the root (through a symlink)")
        return v, real

    def _refuse_write(self, path: str) -> None:
        if self._readonly:
            raise BackendRefusal(normalize(path), "read-only")

    # --------------------------------------------------------------------------- blocking

    @staticmethod
    def _os_error(v: str, exc: OSError) -> PathError:
        if isinstance(exc, (FileNotFoundError, NotADirectoryError)):
            return FileNotFound(v)
        if isinstance(exc, IsADirectoryError):
            return BackendIOError(v, "is a directory")
        return BackendIOError(v, exc.strerror or str(exc))

    def _stat(self, v: str, real: str) -> os.stat_result:
        try:
            return os.stat(real)
        except OSError as exc:
            raise self._os_error(v, exc) from exc

    @staticmethod
    def _info(v: str, st: os.stat_result) -> FileInfo:
        is_dir = stat_mod.S_ISDIR(st.st_mode)
        return FileInfo(v, is_dir, 0 if is_dir else st.st_size, st.st_mtime)

    def _read_text(self, v: str, real: str) -> str:
        st = self._stat(v, real)
        if stat_mod.S_ISDIR(st.st_mode):
            raise BackendIOError(v, "is a directory")
        if not stat_mod.S_ISREG(st.st_mode):
            raise BackendIOError(v, "not a regular file")
        try:
            with open(real, "rb") as f:
                data = f.read()
        except OSError as exc:
            raise self._os_error(v, exc) from exc
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BackendIOError(v, f"not UTF-8 text (bad byte at offset {exc.start})") from exc

    def _write_text(self, v: str, real: str, content: str) -> None:
        """Atomic write: a temp file in the same folder, then os.replace (keeps the file's mode)."""
        try:
            data = content.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise BackendIOError(v, f"content cannot be encoded as UTF-8: {exc.reason}") from exc
        if os.path.isdir(real):
            raise BackendIOError(v, "is a directory")
        parent = os.path.dirname(real)
        try:
            os.makedirs(parent, exist_ok=True)
        except OSError as exc:
            detail = exc.strerror or str(exc)
            if isinstance(exc, (FileExistsError, NotADirectoryError)):
                detail = "a parent is a file, not a folder"
            raise BackendIOError(v, f"cannot create the parent folder: {detail}") from exc
        try:
            mode = stat_mod.S_IMODE(os.stat(real).st_mode)
        except OSError:
            mode = _NEW_FILE_MODE
        tmp = None
        try:
            fd, tmp = tempfile.mkstemp(dir=parent, prefix=".wb-", suffix=".tmp")
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, mode)
            os.replace(tmp, real)
            tmp = None
        except OSError as exc:
            raise BackendIOError(v, exc.strerror or str(exc)) from exc
        finally:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)

    def _walk_files(self, top: str, max_depth: int | None = None) -> Iterator[tuple[str, str]]:
        """(relative path, real path) of files under ``top``, skipping SKIPPED_DIRS.

        Directory symlinks are not followed; a file symlink counts only if it stays inside the root.
        Unreadable folders are skipped.
        """
        stack: list[tuple[str, str, int]] = [("", top, 0)]
        while stack:
            rel, folder, depth = stack.pop()
            try:
                it = os.scandir(folder)
            except OSError:
                continue
            with it:
                for entry in it:
                    r = f"{rel}/{entry.name}" if rel else entry.name
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            if entry.name not in SKIPPED_DIRS and (max_depth is None or depth + 1 < max_depth):
                                stack.append((r, entry.path, depth + 1))
                        elif entry.is_symlink():
                            target = os.path.realpath(entry.path)
                            if self._inside(target) and os.path.isfile(target):
                                yield r, target
                        elif entry.is_file(follow_symlinks=False):
                            yield r, entry.path
                    except OSError:
                        continue

    def _entry_info(self, v: str, entry: os.DirEntry[str]) -> FileInfo | None:
        """Info on one listed entry; None for a symlink leading outside the root or nowhere."""
        try:
            if entry.is_symlink() and not self._inside(os.path.realpath(entry.path)):
                return None
            return self._info(v, entry.stat())
        except OSError:
            return None

    # ------------------------------------------------------------------ blocking operations

    def _do_read(self, path: str) -> str:
        v, real = self._resolve(path)
        return self._read_text(v, real)

    def _do_write(self, path: str, content: str) -> None:
        v, real = self._resolve(path)
        self._refuse_write(v)
        self._write_text(v, real, content)

    def _do_edit(self, path: str, old: str, new: str, replace_all: bool) -> int:
        v, real = self._resolve(path)
        self._refuse_write(v)
        text = self._read_text(v, real)
        updated, count = apply_edit(v, text, old, new, replace_all)
        if updated != text:
            self._write_text(v, real, updated)
        return count

    def _do_list(self, path: str) -> list[FileInfo]:
        v, real = self._resolve(path)
        st = self._stat(v, real)
        if not stat_mod.S_ISDIR(st.st_mode):
            return [self._info(v, st)]
        try:
            with os.scandir(real) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            raise self._os_error(v, exc) from exc
        out = []
        for entry in entries:
            info = self._entry_info(join(v, entry.name), entry)
            if info is not None:
                out.append(info)
        return out

    def _do_glob(self, pattern: str, path: str) -> list[str]:
        base, rel = split_glob(pattern, path)
        v, real = self._resolve(base)
        if not rel:
            return [v] if os.path.isfile(real) else []
        if not os.path.isdir(real):
            return []
        rx = glob_regex(rel)
        segs = rel.split("/")
        depth = None if "**" in segs else len(segs)
        return sorted(join(v, r) for r, _ in self._walk_files(real, depth) if rx.fullmatch(r))

    def _do_grep(self, pattern: str, path: str, glob: str | None) -> list[GrepMatch]:
        rx = compile_grep(pattern)
        keep = grep_filter(glob)
        v, real = self._resolve(path)
        st = self._stat(v, real)
        if not stat_mod.S_ISDIR(st.st_mode):
            return grep_text(v, self._read_text(v, real), rx)
        out: list[GrepMatch] = []
        for r, file in self._walk_files(real):
            if not keep(r):
                continue
            try:
                if os.path.getsize(file) > GREP_MAX_BYTES:
                    continue
                with open(file, "rb") as f:
                    data = f.read()
                if b"\x00" in data[:8192]:
                    continue
                text = data.decode("utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            out.extend(grep_text(join(v, r), text, rx))
        out.sort(key=lambda m: (m.path, m.line))
        return out

    def _do_stat(self, path: str) -> FileInfo:
        v, real = self._resolve(path)
        return self._info(v, self._stat(v, real))

    def _do_exists(self, path: str) -> bool:
        _, real = self._resolve(path)
        return os.path.exists(real)

    # ---------------------------------------------------------------------------- the API

    async def read(self, path: str) -> str:
        return await asyncio.to_thread(self._do_read, path)

    async def write(self, path: str, content: str) -> None:
        require_text(content)
        await asyncio.to_thread(self._do_write, path, content)

    async def edit(self, path: str, old: str, new: str, replace_all: bool = False) -> int:
        return await asyncio.to_thread(self._do_edit, path, old, new, replace_all)

    async def list(self, path: str) -> list[FileInfo]:
        return await asyncio.to_thread(self._do_list, path)

    async def glob(self, pattern: str, path: str = "/") -> list[str]:
        return await asyncio.to_thread(self._do_glob, pattern, path)

    async def grep(self, pattern: str, path: str = "/", glob: str | None = None) -> list[GrepMatch]:
        return await asyncio.to_thread(self._do_grep, pattern, path, glob)

    async def stat(self, path: str) -> FileInfo:
        return await asyncio.to_thread(self._do_stat, path)

    async def exists(self, path: str) -> bool:
        return await asyncio.to_thread(self._do_exists, path)
