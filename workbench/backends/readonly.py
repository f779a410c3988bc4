"""A read-only view of another backend: reads pass through, writes are refused (F1, F2)."""

from __future__ import annotations

from workbench.backends.base import BackendRefusal, FileBackend, FileInfo, GrepMatch, normalize

__all__ = ["ReadOnlyBackend"]


class ReadOnlyBackend(FileBackend):
    """Wraps ``inner``; ``write`` and ``edit`` raise BackendRefusal("read-only")."""

    def __init__(self, inner: FileBackend) -> None:
        self._inner = inner

    def __repr__(self) -> str:
        return f"ReadOnlyBackend({self._inner!r})"

    @property
    def inner(self) -> FileBackend:
        return self._inner

    @property
    def readonly(self) -> bool:
        return True

    async def read(self, path: str) -> str:
        return await self._inner.read(path)

    async def read_head(self, path: str, max_bytes: int) -> tuple[str, bool]:
        return await self._inner.read_head(path, max_bytes)

    async def write(self, path: str, content: str) -> None:
        raise BackendRefusal(normalize(path), "read-only")

    async def edit(self, path: str, old: str, new: str, replace_all: bool = False) -> int:
        raise BackendRefusal(normalize(path), "read-only")

    async def list(self, path: str) -> list[FileInfo]:
        return await self._inner.list(path)

    async def glob(self, pattern: str, path: str = "/") -> list[str]:
        return await self._inner.glob(pattern, path)

    async def grep(self, pattern: str, path: str = "/", glob: str | None = None) -> list[GrepMatch]:
        return await self._inner.grep(pattern, path, glob)

    async def stat(self, path: str) -> FileInfo:
        return await self._inner.stat(path)

    async def target(self, path: str) -> str:
        return await self._inner.target(path)

    async def exists(self, path: str) -> bool:
        return await self._inner.exists(path)
