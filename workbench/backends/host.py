"""A folder on disk as a file backend: virtual ``/a/b`` is ``<root>/a/b`` (F1).

Every path is resolved (symlinks included) and must stay inside the root's real path; anything
else is a refusal. Disk work runs in a worker thread so a big grep never stalls the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import errno
import os
import stat as stat_mod
import tempfile
import time
import unicodedata
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO, NamedTuple

from workbench.backends.base import (
    AccessDenied,
    BackendIOError,
    BackendRefusal,
    FileBackend,
    FileInfo,
    FileNotFound,
    GrepMatch,
    LinksTooDeep,
    Matcher,
    NotTextFile,
    PathError,
    apply_edit,
    compile_grep,
    glob_regex,
    grep_filter,
    grep_text,
    head_of_bytes,
    join,
    normalize,
    require_text,
    split_glob,
)
from workbench.backends.guard import check, current_guard, hidden, run_walk, walk_tick
from workbench.backends.realpath import TooManySteps, realpath

__all__ = ["HostBackend", "LinkOutside", "OUTSIDE_REASON", "SKIPPED_DIRS", "noting_links_outside"]

SKIPPED_DIRS = frozenset({".git", ".workbench"})
"""Folders glob and grep never walk into (they are still readable by path)."""

# A folder a walk lists is opened as a folder and never through a symlink (F4): see _walk_files.
# Where the flags do not exist (Windows) the walk lists folders by path, as before.
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)

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


OUTSIDE_REASON = "path resolves outside the root (through a symlink)"
"""The refusal for a path that leads out of the root."""


class LinkOutside(NamedTuple):
    """An entry a listing left out because it is a symlink leading outside the root."""

    name: str
    is_dir: bool


_LINKS_OUTSIDE: contextvars.ContextVar[list[LinkOutside] | None] = contextvars.ContextVar(
    "workbench_links_outside", default=None)


@contextlib.contextmanager
def noting_links_outside() -> Iterator[list[LinkOutside]]:
    """Inside, each ``list`` names in the list yielded the entries it leaves out as symlinks leading
    outside the root, so a caller can report them (a skill folder linked out of the workspace, S6)
    where the listing itself stays silent about them. Links into a protected folder are never named
    (F4). The list is shared with the listing's worker thread (``asyncio.to_thread`` copies the
    context, not the list)."""
    noted: list[LinkOutside] = []
    token = _LINKS_OUTSIDE.set(noted)
    try:
        yield noted
    finally:
        _LINKS_OUTSIDE.reset(token)


class _InlineBudget:
    """How much of a listing may run on the event loop before it moves to a worker thread (issue 9):
    ``ENTRIES`` names read plus as many looked at, or ``SECONDS``, whichever comes first; no symlink is
    resolved there (``_do_list``). A slow disk blocks the loop at most that long plus one system call."""

    ENTRIES = 128
    SECONDS = 0.002

    class Spent(Exception):
        """The folder is large or slow: list it in a worker."""

    def __init__(self) -> None:
        self._left = self.ENTRIES
        self._deadline = time.monotonic() + self.SECONDS

    def spend(self) -> None:
        self._left -= 1
        if self._left < 0 or time.monotonic() > self._deadline:
            raise self.Spent()


PROTECTED_REASON = ("protected path: the workbench's own data (the thread store or the API key folder); "
                    "no rule or approval opens it")
"""The refusal for a protected path (F4)."""


def _case_insensitive(root: str) -> bool:
    """True when the disk under ``root`` ignores case (``/A`` and ``/a`` are one file)."""
    flipped = root.swapcase()
    if flipped == root:
        return False
    try:
        return os.path.samefile(root, flipped)
    except OSError:
        return False


def _fold(path: str) -> str:
    """``path`` as a case- and normalization-insensitive disk sees it (APFS, HFS+: NFC, any case)."""
    return unicodedata.normalize("NFC", os.path.normcase(path)).casefold()


def _true_case(root: str, parts: list[str]) -> list[str]:
    """``parts`` (a path below ``root``) spelt as the disk spells each name; unknown names kept."""
    out: list[str] = []
    folder = root
    for part in parts:
        name = part
        try:
            with os.scandir(folder) as it:
                names = [e.name for e in it]
            if part not in names:
                name = next((n for n in names if n.casefold() == part.casefold()), part)
        except OSError:
            pass
        out.append(name)
        folder = os.path.join(folder, name)
    return out


class HostBackend(FileBackend):
    """Files under ``root`` on the host; ``readonly=True`` refuses every write."""

    def __init__(self, root: Path | str, readonly: bool = False, *, protected: Iterable[Path | str] = ()) -> None:
        self._root = os.path.realpath(os.fspath(root))
        self._root_key = os.path.normcase(self._root)
        self._readonly = readonly
        # F4: real paths no call may touch, list or search (the thread store, the key folder), even
        # when this root is one of their parents or a symlink leads there.
        self._protected = tuple(os.path.normcase(os.path.realpath(os.fspath(p))) for p in protected)
        self._protected_folded = tuple(_fold(p) for p in self._protected)
        # The same as folder prefixes, so one ``startswith`` tests them all (every listed entry asks).
        self._protected_under = tuple(p.rstrip(os.sep) + os.sep for p in self._protected)
        self._protected_folded_under = tuple(p.rstrip(os.sep) + os.sep for p in self._protected_folded)
        self._root_under = self._root.rstrip(os.sep) + os.sep
        self._icase = _case_insensitive(self._root)

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

    def _is_protected(self, real: str) -> bool:
        """True if ``real`` is a protected folder or lies in one (F4). On a disk that ignores case
        (macOS), realpath keeps the case as typed and normcase does nothing there, so both sides are
        compared folded: ``.WORKBENCH`` is ``.workbench`` on such a disk (P5)."""
        if self._icase:
            key, protected, under = _fold(real), self._protected_folded, self._protected_folded_under
        else:
            key, protected, under = os.path.normcase(real), self._protected, self._protected_under
        return key in protected or key.startswith(under)

    def _virtual(self, real: str) -> str:
        """The virtual path of a real path inside the root, spelt as on disk (P5)."""
        if not self._icase and real.startswith(self._root_under) and os.path.normpath(real) == real:
            # Already normal and below the root: the rest of it is the path (what relpath, ten
            # times slower, would give; it is asked for every listed entry).
            return "/" + real[len(self._root_under):].replace(os.sep, "/")
        rel = os.path.relpath(real, self._root)
        if rel == os.curdir:
            return "/"
        parts = rel.split(os.sep)
        if self._icase:  # a case-insensitive disk: name the file as the disk spells it
            parts = _true_case(self._root, parts)
        return "/" + "/".join(parts)

    def _resolve(self, path: str, action: str = "read") -> tuple[str, str]:
        """The normalized virtual path and its real path, refused if it resolves outside the root,
        into a protected folder (F4), or to a path the call's guard refuses ``action`` on (P5)."""
        v = normalize(path)
        rel = v.lstrip("/")
        joined = os.path.join(self._root, *rel.split("/")) if rel else self._root
        real = os.path.realpath(joined)
        if self._is_protected(real) or self._is_protected(joined):
            raise BackendRefusal(v, PROTECTED_REASON)
        if not self._inside(real):
            raise BackendRefusal(v, OUTSIDE_REASON)
        # Judge the path as named and as the path the backend will open: a symlink in the root
        # must not lead around a rule (P5). ``real`` is what the caller opens next.
        check(action, v)
        target = self._virtual(real)
        if target != v:
            check(action, target)
        return v, real

    def _hidden(self, v: str, real: str) -> bool:
        """True when a search must leave out ``v`` (real path ``real``): protected, or hidden by the
        call's rules as named or as its symlink target (F4, P6)."""
        if self._is_protected(real):
            return True
        if hidden(v):
            return True
        target = self._virtual(real)
        return target != v and hidden(target)

    def _refuse_write(self, path: str) -> None:
        if self._readonly:
            raise BackendRefusal(normalize(path), "read-only")

    # --------------------------------------------------------------------------- blocking

    @staticmethod
    def _os_error(v: str, exc: OSError) -> PathError:
        if isinstance(exc, (FileNotFoundError, NotADirectoryError)):
            return FileNotFound(v)
        if isinstance(exc, IsADirectoryError):
            return NotTextFile(v, "is a directory")
        if exc.errno == errno.ELOOP:
            return NotTextFile(v, "a symlink loop (too many levels of symbolic links)")
        if isinstance(exc, PermissionError):
            return AccessDenied(v, exc.strerror or str(exc))
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

    @staticmethod
    def _regular(v: str, st: os.stat_result) -> None:
        if stat_mod.S_ISDIR(st.st_mode):
            raise NotTextFile(v, "is a directory")
        if not stat_mod.S_ISREG(st.st_mode):
            raise NotTextFile(v, "not a regular file (a FIFO, socket or device)")

    def _open_regular(self, v: str, real: str) -> BinaryIO:
        """The file opened for binary reading. Opened non-blocking and checked again once open, so a
        FIFO swapped in after the stat never blocks the read (F3, I5), nor a symlink a rule (P5)."""
        self._regular(v, self._stat(v, real))
        try:
            fd = os.open(real, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
        except OSError as exc:
            raise self._os_error(v, exc) from exc
        try:
            self._regular(v, os.fstat(fd))
            self._check_opened(v, fd, real)
            f = os.fdopen(fd, "rb")
        except OSError as exc:
            os.close(fd)
            raise self._os_error(v, exc) from exc
        except BaseException:
            os.close(fd)
            raise
        return f

    def _read_bytes(self, v: str, real: str, limit: int | None = None) -> bytes:
        """The file's bytes (at most ``limit``)."""
        with self._open_regular(v, real) as f:
            try:
                return f.read() if limit is None else f.read(limit)
            except OSError as exc:
                raise self._os_error(v, exc) from exc

    def _grep_file(self, v: str, real: str, rx: Matcher) -> list[GrepMatch]:
        """Grep one file named directly, streamed line by line (F3): memory stays bounded by the longest
        line (at most GREP_MAX_BYTES, else an error naming the line), not the file, and the walk's
        time limit and Stop are checked every few thousand lines. Same lines as ``grep_text``: split
        on ``\n`` only, one trailing ``\r`` dropped, UTF-8 or NotTextFile."""
        cap = GREP_MAX_BYTES
        out: list[GrepMatch] = []
        offset = 0
        no = 0
        walk_tick(v)
        with self._open_regular(v, real) as f:
            while True:
                try:
                    raw = f.readline(cap + 1)
                except OSError as exc:
                    raise self._os_error(v, exc) from exc
                if not raw:
                    return out
                no += 1
                if not no & 0xFFF:
                    walk_tick(v)
                body = raw[:-1] if raw.endswith(b"\n") else raw
                if len(body) > cap:
                    raise NotTextFile(v, f"line {no} is longer than {cap} bytes; grep searches lines up to "
                                         "that length (read_file reads such a file in pieces)")
                try:
                    line = body.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise NotTextFile(v, f"not UTF-8 text (bad byte at offset {offset + exc.start})") from exc
                offset += len(raw)
                if line.endswith("\r"):
                    line = line[:-1]
                if rx.search(line):
                    out.append(GrepMatch(v, no, line))

    @staticmethod
    def _check_opened(v: str, fd: int, expected: str, *, parent: bool = False) -> None:
        """P5, no TOCTOU: the file just opened must be the one whose path was judged (or, for a new
        file, lie in the judged folder). A folder swapped for a symlink between the check and the
        open is refused. Needs /proc/self/fd (Linux); elsewhere the check before the open stands."""
        try:
            opened = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            return
        if parent:
            opened = os.path.dirname(opened)
        if os.path.normcase(opened) != os.path.normcase(expected):
            raise BackendRefusal(v, "the path changed on disk while it was being opened (a symlink swapped "
                                    "in?); nothing was read or written, call the tool again")

    def _read_text(self, v: str, real: str) -> str:
        data = self._read_bytes(v, real)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise NotTextFile(v, f"not UTF-8 text (bad byte at offset {exc.start})") from exc

    def _do_read_head(self, path: str, max_bytes: int) -> tuple[str, bool]:
        v, real = self._resolve(path)
        return head_of_bytes(v, self._read_bytes(v, real, max_bytes + 1), max_bytes)

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
            try:
                self._check_opened(v, fd, parent, parent=True)
            except BackendRefusal:
                os.close(fd)
                raise
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
        Unreadable folders are skipped. Each folder is opened without following a symlink and checked
        once open (F4, P5): a folder swapped for a symlink after its parent was listed (say, into the
        key folder) is skipped, never listed. A file's real path is yielded as judged here; whoever
        opens it checks the opened file again (``_open_regular``), since the file can be swapped too.
        """
        stack: list[tuple[str, str, int]] = [("", top, 0)]
        while stack:
            rel, folder, depth = stack.pop()
            walk_tick(folder)
            if self._is_protected(folder):
                continue
            found: list[tuple[str, str]] = []
            try:
                with self._opened_folder(folder) as entries:
                    for entry in entries:
                        r = f"{rel}/{entry.name}" if rel else entry.name
                        path = os.path.join(folder, entry.name)
                        try:
                            if entry.is_dir(follow_symlinks=False):
                                if entry.name not in SKIPPED_DIRS and (max_depth is None or depth + 1 < max_depth):
                                    stack.append((r, path, depth + 1))
                            elif entry.is_symlink():
                                target = os.path.realpath(path)
                                if self._inside(target) and os.path.isfile(target):
                                    found.append((r, target))
                            elif entry.is_file(follow_symlinks=False):
                                found.append((r, path))
                        except OSError:
                            continue
            except (OSError, BackendRefusal):
                continue
            yield from found  # after the folder is closed: the caller may take its time over each

    @contextlib.contextmanager
    def _opened_folder(self, folder: str) -> Iterator[Iterator[os.DirEntry[str]]]:
        """The entries of ``folder``, opened as a folder without following a symlink and checked once
        open to be the folder named (BackendRefusal if it was swapped: F4, P5). The folder stays open
        while the entries are read, so an entry's type is looked up in it, not by path."""
        if not (_O_DIRECTORY and os.scandir in os.supports_fd):
            with os.scandir(folder) as it:
                yield it
            return
        fd = os.open(folder, os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW)
        try:
            self._check_opened(folder, fd, folder)
            with os.scandir(fd) as it:
                yield it
        finally:
            os.close(fd)

    def _entry_info(self, v: str, entry: os.DirEntry[str], outside: list[LinkOutside]) -> tuple[FileInfo | None, str]:
        """Info on one listed entry and its real path; None for a symlink leading outside the root or
        nowhere (one leading outside is put in ``outside``, for ``noting_links_outside``, unless it leads
        into a protected folder). The listed folder is already resolved, so an entry that is no symlink
        is its own real path: only a symlink needs ``realpath`` (seven lstat calls each)."""
        real = entry.path
        try:
            if entry.is_symlink():
                real = os.path.realpath(entry.path)
                if not self._inside(real):
                    if _LINKS_OUTSIDE.get() is not None and not self._is_protected(real):
                        outside.append(LinkOutside(entry.name, os.path.isdir(real)))
                    return None, real
            return self._info(v, entry.stat()), real
        except OSError:
            return None, real

    # ------------------------------------------------------------------ blocking operations

    def _do_read(self, path: str) -> str:
        v, real = self._resolve(path)
        return self._read_text(v, real)

    def _do_write(self, path: str, content: str) -> None:
        v, real = self._resolve(path, "write")
        self._refuse_write(v)
        self._write_text(v, real, content)

    def _do_edit(self, path: str, old: str, new: str, replace_all: bool) -> int:
        v, real = self._resolve(path, "write")
        self._refuse_write(v)
        text = self._read_text(v, real)
        updated, count = apply_edit(v, text, old, new, replace_all)
        if updated != text:
            self._write_text(v, real, updated)
        return count

    def _do_list(self, path: str, budget: _InlineBudget | None = None) -> list[FileInfo]:
        """The listing; with ``budget`` (on the loop) it gives up, raising ``_InlineBudget.Spent``, once
        the folder proves large or slow, or a symlink is met (resolving one can take seconds: a chain of
        links through a deep folder, which a workspace can hold), having told nobody anything yet."""
        if budget is not None:
            self._no_link_on_the_way(path)
        v, real = self._resolve(path)
        st = self._stat(v, real)
        if not stat_mod.S_ISDIR(st.st_mode):
            return [self._info(v, st)]
        try:
            with os.scandir(real) as it:
                if budget is None:
                    entries = sorted(it, key=lambda e: e.name)
                else:
                    entries = []
                    for entry in it:
                        if entry.is_symlink():  # the file type the listing gave: no system call
                            raise _InlineBudget.Spent()
                        entries.append(entry)
                        budget.spend()
                    entries.sort(key=lambda e: e.name)
        except OSError as exc:
            raise self._os_error(v, exc) from exc
        out = []
        outside: list[LinkOutside] = []  # told to ``noting_links_outside`` once the listing is whole
        for entry in entries:
            name = join(v, entry.name)
            info, entry_real = self._entry_info(name, entry, outside)
            if info is not None and not self._hidden(name, entry_real):
                out.append(info)
            if budget is not None:
                budget.spend()
        noted = _LINKS_OUTSIDE.get()
        if noted is not None:
            noted.extend(outside)
        return out

    def _no_link_on_the_way(self, path: str) -> None:
        """``_InlineBudget.Spent`` if a folder on the way from the root to ``path`` is a symlink: the
        realpath that follows would resolve it on the loop (one ``lstat`` a folder, as realpath's own)."""
        rel = normalize(path).lstrip("/")
        here = self._root
        for part in rel.split("/") if rel else ():
            here = os.path.join(here, part)
            try:
                if stat_mod.S_ISLNK(os.lstat(here).st_mode):
                    raise _InlineBudget.Spent()
            except OSError:
                return  # missing or unreadable: ``_resolve`` says so, following no link

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
        return sorted(join(v, r) for r, file in self._walk_files(real, depth)
                      if rx.fullmatch(r) and not self._hidden(join(v, r), file))

    def _do_grep(self, pattern: str, path: str, glob: str | None) -> list[GrepMatch]:
        rx = compile_grep(pattern)
        keep = grep_filter(glob)
        v, real = self._resolve(path)
        st = self._stat(v, real)
        if not stat_mod.S_ISDIR(st.st_mode):
            return self._grep_file(v, real, rx)
        out: list[GrepMatch] = []
        for r, file in self._walk_files(real):
            if not keep(r) or self._hidden(join(v, r), file):
                continue
            walk_tick(join(v, r))
            try:
                # Opened and checked like read_file's (F4, P5): the file judged above, not whatever a
                # process in the workspace swapped in since (a symlink to the key folder, a FIFO).
                with self._open_regular(join(v, r), file) as f:
                    if os.fstat(f.fileno()).st_size > GREP_MAX_BYTES:
                        continue
                    data = f.read()
                if b"\x00" in data[:8192]:
                    continue
                text = data.decode("utf-8")
            except (OSError, UnicodeDecodeError, PathError):
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

    async def read_head(self, path: str, max_bytes: int) -> tuple[str, bool]:
        if max_bytes < 0:
            raise ValueError(f"max_bytes must be at least 0, got {max_bytes}")
        return await asyncio.to_thread(self._do_read_head, path, max_bytes)

    async def write(self, path: str, content: str) -> None:
        require_text(content)
        await asyncio.to_thread(self._do_write, path, content)

    async def edit(self, path: str, old: str, new: str, replace_all: bool = False) -> int:
        return await asyncio.to_thread(self._do_edit, path, old, new, replace_all)

    async def list(self, path: str) -> list[FileInfo]:
        # Issue 9: a small folder is listed on the loop (a realpath and a stat a name, the kind of
        # work ``target`` does there before every call) instead of paying a worker thread's round trip,
        # the larger part of an ``ls`` step; one that is large or slow moves to a worker from the start.
        guard = current_guard()
        omitted = guard.omitted.copy() if guard is not None else None
        try:
            return self._do_list(path, _InlineBudget())
        except _InlineBudget.Spent:
            if guard is not None and omitted is not None:  # the entries it hid are hidden (counted) again
                guard.omitted.clear()
                guard.omitted.update(omitted)
            return await asyncio.to_thread(self._do_list, path)

    async def glob(self, pattern: str, path: str = "/") -> list[str]:
        return await run_walk(f"glob {pattern!r}", self._do_glob, pattern, path)

    async def grep(self, pattern: str, path: str = "/", glob: str | None = None) -> list[GrepMatch]:
        return await run_walk(f"grep {pattern!r}", self._do_grep, pattern, path, glob)

    async def target(self, path: str) -> str:
        # Inline, not in a worker: a realpath is a few syscalls, cheaper than the thread hop, and it
        # runs before every file tool call (the harness overhead budget is 2 ms a step). Not when a
        # symlink is on the way: a chain of links through a deep folder takes seconds to resolve.
        try:
            self._no_link_on_the_way(path)
        except _InlineBudget.Spent:
            return await asyncio.to_thread(self.link_target, path)
        return self.link_target(path)

    def link_target(self, path: str, max_steps: int | None = None) -> str:
        """What ``target`` answers, without awaiting: the virtual path ``path`` leads to through
        symlinks (``path`` itself when it leads nowhere else, or out of the root, which every call
        refuses anyway). For a caller that cannot await: the window's Save verdict (P5), which bounds
        the path components it follows (``max_steps``): ``LinksTooDeep`` past them, or when links nest
        deeper than can be followed at all."""
        v = normalize(path)
        rel = v.lstrip("/")
        try:
            real = realpath(os.path.join(self._root, *rel.split("/")) if rel else self._root, max_steps)
        except TooManySteps as exc:
            raise LinksTooDeep(v, f"it leads through too many symlinks to follow ({exc})") from None
        return self._virtual(real) if self._inside(real) else v

    async def stat(self, path: str) -> FileInfo:
        return await asyncio.to_thread(self._do_stat, path)

    async def exists(self, path: str) -> bool:
        return await asyncio.to_thread(self._do_exists, path)
