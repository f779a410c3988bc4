"""Stand-ins the tests share: a backend whose reads fail on demand, an in-memory OS keyring, and
``until``, the one way an asyncio test polls for a condition (with a deadline, checking it)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from keyring.backend import KeyringBackend
from keyring.errors import PasswordDeleteError

from workbench.backends.base import BackendIOError, FileBackend, FileInfo, GrepMatch


async def until(predicate: Callable[[], Any], timeout: float = 10.0, what: str = "the condition") -> Any:
    """Poll ``predicate`` on the running loop until it is truthy and return its value; an
    AssertionError naming ``what`` once ``timeout`` seconds pass (a poll never runs blind rounds)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.005)


class FailingReads(FileBackend):
    """Wraps a backend; ``read`` raises a real I/O error (not a refusal) while ``broken``."""

    def __init__(self, inner: FileBackend, detail: str = "input/output error") -> None:
        self.inner = inner
        self.detail = detail
        self.broken = True

    async def read(self, path: str) -> str:
        if self.broken:
            raise BackendIOError(path, self.detail)
        return await self.inner.read(path)

    async def write(self, path: str, content: str) -> None:
        await self.inner.write(path, content)

    async def edit(self, path: str, old: str, new: str, replace_all: bool = False) -> int:
        return await self.inner.edit(path, old, new, replace_all)

    async def list(self, path: str) -> list[FileInfo]:
        return await self.inner.list(path)

    async def glob(self, pattern: str, path: str = "/") -> list[str]:
        return await self.inner.glob(pattern, path)

    async def grep(self, pattern: str, path: str = "/", glob: str | None = None) -> list[GrepMatch]:
        return await self.inner.grep(pattern, path, glob)

    async def stat(self, path: str) -> FileInfo:
        return await self.inner.stat(path)


class MemoryKeyring(KeyringBackend):
    """An in-memory keyring standing in for the OS one."""

    priority = 1  # type: ignore[assignment]

    def __init__(self) -> None:
        super().__init__()
        self.passwords: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.passwords.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.passwords[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        if self.passwords.pop((service, username), None) is None:
            raise PasswordDeleteError(username)
