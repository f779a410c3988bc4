"""Files kept in the thread's state, so they are checkpointed with it (F1).

The state holds ``{virtual_path: {"content": str, "modified": float}}``. Directories are implied
by path prefixes. Every write hands ``set_files`` a new dict and never mutates the old one: the
engine compares snapshots to see what changed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from workbench.backends.base import (
    BackendIOError,
    FileBackend,
    FileInfo,
    FileNotFound,
    GrepMatch,
    NotTextFile,
    ancestors,
    apply_edit,
    compile_grep,
    glob_files,
    grep_filter,
    grep_text,
    is_under,
    looks_binary,
    normalize,
    relative,
    require_text,
    tree_children,
)

__all__ = ["StateBackend"]

Files = dict[str, dict[str, Any]]


def _size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


class StateBackend(FileBackend):
    """Files in thread state, read through ``get_files`` and replaced through ``set_files``."""

    def __init__(self, get_files: Callable[[], Files], set_files: Callable[[Files], None]) -> None:
        self._get_files = get_files
        self._set_files = set_files

    # ----------------------------------------------------------------------------- helpers

    def _files(self) -> Files:
        return self._get_files() or {}

    @staticmethod
    def _content(v: str, entry: dict[str, Any]) -> str:
        content = entry.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list) and all(isinstance(line, str) for line in content):
            return "\n".join(content)
        raise NotTextFile(v, "the stored file has no text content")

    @staticmethod
    def _modified(entry: dict[str, Any]) -> float:
        try:
            return float(entry.get("modified") or 0.0)
        except (TypeError, ValueError):
            return 0.0

    @staticmethod
    def _is_dir(files: Files, v: str) -> bool:
        return v == "/" or any(p != v and is_under(p, v) for p in files)

    def _entries(self, files: Files) -> Iterator[tuple[str, int, float]]:
        for p, entry in files.items():
            try:
                size = _size(self._content(p, entry))
            except BackendIOError:
                size = 0
            yield p, size, self._modified(entry)

    def _text(self, files: Files, v: str) -> str:
        entry = files.get(v)
        if entry is not None:
            return self._content(v, entry)
        if self._is_dir(files, v):
            raise NotTextFile(v, "is a directory")
        raise FileNotFound(v)

    def _store(self, files: Files, v: str, content: str) -> None:
        if v not in files:
            if self._is_dir(files, v):
                raise BackendIOError(v, "is a directory")
            for parent in ancestors(v):
                if parent in files:
                    raise BackendIOError(v, f"cannot create the parent folder: {parent} is a file")
        new = dict(files)
        new[v] = {**files.get(v, {}), "content": content, "modified": time.time()}
        self._set_files(new)

    # ----------------------------------------------------------------------------- the API

    async def read(self, path: str) -> str:
        v = normalize(path)
        return self._text(self._files(), v)

    async def write(self, path: str, content: str) -> None:
        require_text(content)
        v = normalize(path)
        self._store(self._files(), v, content)

    async def edit(self, path: str, old: str, new: str, replace_all: bool = False) -> int:
        v = normalize(path)
        files = self._files()
        text = self._text(files, v)
        updated, count = apply_edit(v, text, old, new, replace_all)
        if updated != text:
            self._store(files, v, updated)
        return count

    async def list(self, path: str) -> list[FileInfo]:
        v = normalize(path)
        files = self._files()
        if v in files:
            return [await self.stat(v)]
        kids = tree_children(v, self._entries(files))
        if kids is None:
            raise FileNotFound(v)
        return kids

    async def glob(self, pattern: str, path: str = "/") -> list[str]:
        return glob_files(self._files().keys(), pattern, path)

    async def grep(self, pattern: str, path: str = "/", glob: str | None = None) -> list[GrepMatch]:
        rx = compile_grep(pattern)
        keep = grep_filter(glob)
        v = normalize(path)
        files = self._files()
        if v in files:
            return grep_text(v, self._content(v, files[v]), rx)
        if not self._is_dir(files, v):
            raise FileNotFound(v)
        out: list[GrepMatch] = []
        for p in sorted(files):
            if p == v or not is_under(p, v) or not keep(relative(p, v)):
                continue
            try:
                text = self._content(p, files[p])
            except BackendIOError:
                continue
            if not looks_binary(text):
                out.extend(grep_text(p, text, rx))
        return out

    async def stat(self, path: str) -> FileInfo:
        v = normalize(path)
        files = self._files()
        entry = files.get(v)
        if entry is not None:
            return FileInfo(v, False, _size(self._content(v, entry)), self._modified(entry))
        if not self._is_dir(files, v):
            raise FileNotFound(v)
        times = [self._modified(e) for p, e in files.items() if is_under(p, v)]
        return FileInfo(v, True, 0, max(times, default=0.0))
