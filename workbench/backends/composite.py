"""Several backends under mount points, one namespace for the agent (F1).

``/project/src/a.py`` goes to the backend mounted at ``/project`` as ``/src/a.py``; the longest
mount point wins, and paths coming back are re-prefixed, errors included. Directories above the
mount points (``/`` itself, usually) exist implicitly and list the mount points.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator, Mapping

from workbench.backends.base import (
    BackendRefusal,
    FileBackend,
    FileInfo,
    FileNotFound,
    GrepMatch,
    PathError,
    check_pattern_length,
    compile_grep,
    grep_filter,
    is_under,
    join,
    normalize,
    relative,
    split_glob,
    strip_glob_prefix,
)
from workbench.backends.guard import mounted
from workbench.backends.host import PROTECTED_REASON

__all__ = ["CompositeBackend"]


class CompositeBackend(FileBackend):
    """Mounts ``{"/project": host, "/scratch": state, ...}``; a path under no mount is refused."""

    def __init__(self, mounts: Mapping[str, FileBackend]) -> None:
        self._mounts: dict[str, FileBackend] = {}
        for point, backend in mounts.items():
            key = normalize(point)
            if key in self._mounts:
                raise ValueError(f"mount point {point!r} given twice")
            self._mounts[key] = backend
        self._order = sorted(self._mounts, key=len, reverse=True)

    def __repr__(self) -> str:
        return f"CompositeBackend({self._mounts!r})"

    @property
    def mounts(self) -> dict[str, FileBackend]:
        """A copy of the mount table (normalized mount point → backend)."""
        return dict(self._mounts)

    @property
    def readonly(self) -> bool:
        return all(b.readonly for b in self._mounts.values())

    # ------------------------------------------------------------------------------ routing

    def _mount_of(self, v: str) -> str | None:
        for point in self._order:
            if is_under(v, point):
                return point
        return None

    def _below(self, v: str) -> list[str]:
        """Mount points strictly inside directory ``v``, sorted."""
        return sorted(p for p in self._mounts if p != v and is_under(p, v))

    def _implied_dir(self, v: str) -> bool:
        """True if ``v`` is a mount point or lies above one: it exists as a directory."""
        return any(is_under(p, v) for p in self._mounts)

    def _no_mount(self, v: str) -> BackendRefusal:
        points = ", ".join(sorted(self._mounts)) or "none"
        return BackendRefusal(v, f"no mount for this path (mounts: {points})")

    @staticmethod
    def _inner(v: str, point: str) -> str:
        return v if point == "/" else (v[len(point) :] or "/")

    @staticmethod
    def _outer(point: str, p: str) -> str:
        if point == "/":
            return p
        return point if p == "/" else point + p

    @contextlib.contextmanager
    def _translated(self, point: str) -> Iterator[None]:
        """Re-raise a mount's error with the path as the caller named it; the call's guard sees full
        virtual paths (P5)."""
        try:
            with mounted(point):
                yield
        except PathError as exc:
            raise exc.with_path(self._outer(point, exc.path)) from exc

    def backend_for(self, path: str) -> tuple[FileBackend, str]:
        """The backend mounted for ``path`` and the path within it; BackendRefusal if none."""
        v = normalize(path)
        point = self._mount_of(v)
        if point is None:
            raise self._no_mount(v)
        return self._mounts[point], self._inner(v, point)

    def _route(self, path: str) -> tuple[str, str, FileBackend, str]:
        v = normalize(path)
        backend, inner = self.backend_for(v)
        point = self._mount_of(v)
        assert point is not None
        return v, point, backend, inner

    # ----------------------------------------------------------------------------- the API

    async def read(self, path: str) -> str:
        _, point, backend, inner = self._route(path)
        with self._translated(point):
            return await backend.read(inner)

    async def read_head(self, path: str, max_bytes: int) -> tuple[str, bool]:
        _, point, backend, inner = self._route(path)
        with self._translated(point):
            return await backend.read_head(inner, max_bytes)

    async def target(self, path: str) -> str:
        _, point, backend, inner = self._route(path)
        with self._translated(point):
            return self._outer(point, await backend.target(inner))

    async def write(self, path: str, content: str) -> None:
        v, point, backend, inner = self._route(path)
        if backend.readonly:
            raise BackendRefusal(v, f"read-only mount ({point})")
        with self._translated(point):
            await backend.write(inner, content)

    async def edit(self, path: str, old: str, new: str, replace_all: bool = False) -> int:
        v, point, backend, inner = self._route(path)
        if backend.readonly:
            raise BackendRefusal(v, f"read-only mount ({point})")
        with self._translated(point):
            return await backend.edit(inner, old, new, replace_all)

    async def list(self, path: str) -> list[FileInfo]:
        v = normalize(path)
        point = self._mount_of(v)
        below = self._below(v)
        if point is None and not below:
            raise self._no_mount(v)
        entries: dict[str, FileInfo] = {}
        if point is not None:
            try:
                with self._translated(point):
                    infos = await self._mounts[point].list(self._inner(v, point))
            except FileNotFound:
                if not self._implied_dir(v):
                    raise
                infos = []
            for info in infos:
                p = self._outer(point, info.path)
                if self._mount_of(p) == point:  # else a deeper mount shadows it
                    entries[p] = FileInfo(p, info.is_dir, info.size, info.modified)  # not replace(): 4x the cost
        for mount in below:
            child = join(v, relative(mount, v).split("/", 1)[0])
            if child not in entries or not entries[child].is_dir:
                entries[child] = FileInfo(child, True, 0, 0.0)
        return [entries[k] for k in sorted(entries, key=lambda k: k.rsplit("/", 1)[-1])]

    async def glob(self, pattern: str, path: str = "/") -> list[str]:
        check_pattern_length(pattern)  # before any work on the event loop (F3)
        base, rel = split_glob(pattern, path)
        point = self._mount_of(base)
        below = self._below(base)
        if point is None and not below:
            raise self._no_mount(base)
        found: set[str] = set()
        if point is not None:
            with self._translated(point):
                hits = await self._mounts[point].glob(rel, self._inner(base, point))
            found.update(p for p in (self._outer(point, h) for h in hits) if self._mount_of(p) == point)
        for mount in below if rel else []:
            for sub in strip_glob_prefix(rel, relative(mount, base)):
                if not sub:
                    continue  # the pattern names the mount point itself, a directory
                try:
                    with self._translated(mount):
                        hits = await self._mounts[mount].glob(sub, "/")
                except BackendRefusal as exc:
                    if exc.detail != PROTECTED_REASON:
                        raise
                    break  # a mount of a protected folder is invisible to searches, as in grep (F4)
                found.update(p for p in (self._outer(mount, h) for h in hits) if self._mount_of(p) == mount)
        return sorted(found)

    async def grep(self, pattern: str, path: str = "/", glob: str | None = None) -> list[GrepMatch]:
        compile_grep(pattern)
        v = normalize(path)
        point = self._mount_of(v)
        below = self._below(v)
        if point is None and not below:
            raise self._no_mount(v)
        whole_path_glob = bool(glob) and "/" in glob.strip("/")
        keep = grep_filter(glob)
        out: list[GrepMatch] = []
        if point is not None:
            try:
                with self._translated(point):
                    hits = await self._mounts[point].grep(pattern, self._inner(v, point), glob)
            except FileNotFound:
                if not self._implied_dir(v):
                    raise
                hits = []
            for m in hits:
                p = self._outer(point, m.path)
                if self._mount_of(p) == point:
                    out.append(dataclasses.replace(m, path=p))
        for mount in below:
            sub_glob = glob
            if whole_path_glob:
                subs = [s for s in strip_glob_prefix(glob, relative(mount, v)) if s]
                if not subs:
                    continue
                sub_glob = subs[0] if len(subs) == 1 else None
            try:
                with self._translated(mount):
                    hits = await self._mounts[mount].grep(pattern, "/", sub_glob)
            except FileNotFound:
                continue  # a mount whose folder does not exist (yet): search what exists
            except BackendRefusal as exc:
                if exc.detail != PROTECTED_REASON:
                    raise
                continue  # a mount of a protected folder is invisible to searches (F4)
            for m in hits:
                p = self._outer(mount, m.path)
                if self._mount_of(p) != mount or (whole_path_glob and not keep(relative(p, v))):
                    continue
                out.append(dataclasses.replace(m, path=p))
        out.sort(key=lambda m: (m.path, m.line))
        return out

    async def stat(self, path: str) -> FileInfo:
        v = normalize(path)
        point = self._mount_of(v)
        implied = self._implied_dir(v)
        if point is None and not implied:
            raise self._no_mount(v)
        if point is not None:
            try:
                with self._translated(point):
                    info = await self._mounts[point].stat(self._inner(v, point))
            except FileNotFound:
                if not implied:
                    raise
            else:
                if info.is_dir or not implied:
                    return dataclasses.replace(info, path=v)
        return FileInfo(v, True, 0, 0.0)
