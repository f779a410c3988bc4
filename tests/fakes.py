"""Stand-ins the tests share: a backend whose reads fail on demand, an in-memory OS keyring,
``until``, the one way an asyncio test polls for a condition (with a deadline, checking it), and the
process table read from /proc (``alive``, ``with_marker``: psutil is not a dependency)."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
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


def alive(pid: int) -> bool:
    """Whether a process exists and is not a zombie (read from /proc: psutil is not a dependency)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def with_marker(marker: str) -> list[int]:
    """The live processes whose command line holds ``marker``."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if marker in cmdline and int(entry.name) != os.getpid() and alive(int(entry.name)):
            out.append(int(entry.name))
    return out


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


class SlowKeyring(MemoryKeyring):
    """A keyring that takes ``delay`` seconds to answer (D-Bus, or a prompt to unlock it), noting when each
    read began and ended and on which thread it ran."""

    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay = delay
        self.reads: list[tuple[float, float, bool]] = []  # (start, end, on the main thread)

    def get_password(self, service: str, username: str) -> str | None:
        import threading

        start = time.monotonic()
        time.sleep(self.delay)
        self.reads.append((start, time.monotonic(), threading.current_thread() is threading.main_thread()))
        return super().get_password(service, username)


async def ticks_during(work: Awaitable[Any]) -> tuple[Any, list[float]]:
    """``work``'s result, and the times at which this loop ran a 10 ms ticker meanwhile: a loop that
    something blocked shows a gap."""
    times: list[float] = []

    async def tick() -> None:
        while True:
            times.append(time.monotonic())
            await asyncio.sleep(0.01)

    ticker = asyncio.ensure_future(tick())
    try:
        return await work, times
    finally:
        ticker.cancel()


def server_marker_fixtures(prefix: str) -> tuple[Any, Any]:
    """For a test module to take as its own (``marker, _no_leftovers = server_marker_fixtures("wbtest")``):
    ``marker``, a text unique to the test that its MCP server processes carry in their command line, and
    an autouse fixture that ends every test with none of them left running (X3)."""
    import uuid

    import pytest

    @pytest.fixture
    def marker() -> str:
        return f"{prefix}-{uuid.uuid4().hex[:10]}"

    @pytest.fixture(autouse=True)
    def _no_leftovers(marker: str) -> Any:
        """Every test ends with no server process of its own left (X3)."""
        yield
        deadline = time.monotonic() + 5
        while with_marker(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not with_marker(marker), "server processes outlived the test"

    return marker, _no_leftovers


def subagent_workspace(tmp_path: Path, api_base: str) -> Path:
    """A workspace whose agent (``openai/parent``) may launch the background sub-agent ``researcher``
    (``openai/researcher``), both against the stub at ``api_base``, every call allowed."""
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    (ws / "workbench.yaml").write_text(
        f"model: openai/parent\napi_base: {api_base}\npermissions: {{default: allow}}\n"
        "subagents:\n  async: true\n  agents:\n"
        "    - {name: researcher, description: Reads., model: openai/researcher}\n", encoding="utf-8")
    return ws


def sessions_on_the_task_loop(monkeypatch: Any) -> None:
    """Open every ``Session`` as the window does (``threaded_model=True``): sub-agents on the task loop's
    own thread and store connection, not the caller's loop (the CLI's and scripts')."""
    from workbench.session import Session

    original = Session.open.__func__  # type: ignore[attr-defined]

    async def open_threaded(cls: type[Session], *args: Any, **kwargs: Any) -> Session:
        kwargs.setdefault("threaded_model", True)
        return await original(cls, *args, **kwargs)

    monkeypatch.setattr(Session, "open", classmethod(open_threaded))


def kill_9(proc: Any) -> None:
    """The crash a test stages: SIGKILL the process, and wait for it."""
    import signal

    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)


def reap(proc: Any) -> None:
    """After a test, whatever happened: a process still running is killed and waited for."""
    if proc.poll() is None:
        proc.kill()
        proc.communicate(timeout=30)
