"""A workspace's MCP servers (X1, X3, X5): ``McpServers`` starts them on demand on its own thread and
loop, hands calls over to them from any thread or loop, restarts, checks and stops them, and keeps the
tool switches. ``shared_servers`` gives a session's agent and its sub-agents one set of processes. What
one server does is in ``mcp_server.py``; the values it hands out, in ``mcp_tools.py``.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import json
import logging
import signal
import threading
import weakref
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from workbench.config import McpServerConfig
from workbench.errors import RunError
from workbench.harness.mcp_server import Server
from workbench.harness.mcp_stdio import STOP_GRACE, signal_group
from workbench.harness.mcp_tools import McpCallError, McpResult, McpServerInfo, McpToolInfo

log = logging.getLogger(__name__)

__all__ = ["McpServers", "shared_servers"]


# ------------------------------------------------------------------------------------------ the manager

_LIVE_PIDS: set[int] = set()
"""Server processes (group leaders) alive in this process: killed at interpreter exit if a session was
never closed, so no server outlives the workbench."""


@atexit.register
def _kill_leftovers() -> None:
    for pid in list(_LIVE_PIDS):
        signal_group(pid, getattr(signal, "SIGKILL", signal.SIGTERM))


class McpServers:
    """A workspace's MCP servers (see the module): started on demand, called, restarted, stopped.
    Thread-safe: any thread (and any loop) may call it; the servers live on its own loop."""

    def __init__(self, servers: Mapping[str, McpServerConfig], workspace: Path | str, *,
                 state_file: Path | None = None) -> None:
        self.configs = dict(servers)
        self.workspace = Path(workspace)
        self.state_file = state_file
        self._servers = {name: Server(self, name, cfg) for name, cfg in self.configs.items()}
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._closed = False
        self._listeners: list[Callable[[str], None]] = []
        self._disabled: set[tuple[str, str]] = self._load_switches()
        self._offered: tuple[int, tuple[McpToolInfo, ...]] | None = None  # (version it was made at, the offer)
        self._version = 0  # bumped on every change (any thread): a cached offer from before is stale
        self._pids: set[int] = set()
        self._source: Any = None  # the config mapping it was made for (``shared_servers``)
        # Sessions using this set (``hold``/``release``): two sessions opened with one config object share
        # it, and the processes stop only when the last of them closes.
        self._holders = 0

    # -- plumbing --------------------------------------------------------------------------------------
    @property
    def names(self) -> list[str]:
        return list(self._servers)

    @property
    def closed(self) -> bool:
        return self._closed

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._closed:
                raise RunError("the MCP servers of this session are closed")
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="workbench-mcp", daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    async def _on_loop(self, coro: Any) -> Any:
        """Run ``coro`` on the MCP loop and await it here (cancelling here cancels it there)."""
        try:
            loop = self._ensure_loop()
        except BaseException:
            coro.close()
            raise
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, loop))

    def _server(self, name: str) -> Server:
        srv = self._servers.get(name)
        if srv is None:
            known = ", ".join(self._servers) or "none"
            raise RunError(f"no MCP server {name!r} in workbench.yaml (mcp_servers: {known})")
        return srv

    def _track(self, pid: int, alive: bool) -> None:
        (self._pids.add if alive else self._pids.discard)(pid)
        (_LIVE_PIDS.add if alive else _LIVE_PIDS.discard)(pid)

    @property
    def pids(self) -> set[int]:
        """The server processes alive now (group leaders)."""
        return set(self._pids)

    def add_listener(self, listener: Callable[[str], None]) -> Callable[[], None]:
        """``listener(server name)`` after every change of a server's status, tools or log (called on the
        MCP thread: hand it to your own loop)."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def _changed(self, name: str) -> None:
        self._version += 1
        for listener in list(self._listeners):
            try:
                listener(name)
            except Exception:  # noqa: BLE001 - a broken listener must not stop a server
                log.exception("MCP listener failed")

    # -- switches (X5: a tool switched off is not offered) ----------------------------------------------
    def _load_switches(self) -> set[tuple[str, str]]:
        if self.state_file is None:
            return set()
        try:
            data = json.loads(self.state_file.read_text(encoding="utf-8"))
            return {(str(s), str(t)) for s, t in data.get("disabled_tools", []) if s in self._servers}
        except FileNotFoundError:
            return set()
        except (OSError, ValueError, TypeError, AttributeError) as e:
            log.warning("ignoring %s (%s): every MCP tool is switched on", self.state_file, e)
            return set()

    def set_tool_enabled(self, server: str, tool: str, on: bool) -> None:
        """Switch one tool on or off (``tool``: the server's name or the offered name); kept in the
        workspace's ``.workbench/`` for the next sessions."""
        srv = self._server(server)
        match = next((t for t in srv.info.tools if tool in (t.tool, t.name)), None)
        key = (server, match.tool if match is not None else tool)
        with self._lock:
            (self._disabled.discard if on else self._disabled.add)(key)
            disabled = sorted(self._disabled)
        if self.state_file is not None:
            from workbench.atomic import write_text_atomic

            try:
                self.state_file.parent.mkdir(parents=True, exist_ok=True)
                write_text_atomic(self.state_file, json.dumps({"disabled_tools": disabled}, indent=1) + "\n")
            except OSError as e:
                log.warning("could not keep the MCP tool switches in %s: %s", self.state_file, e)
        self._changed(server)

    def _with_switches(self, info: McpServerInfo) -> McpServerInfo:
        tools = tuple(replace(t, enabled=(info.name, t.tool) not in self._disabled) for t in info.tools)
        return replace(info, tools=tools)

    # -- what the UI, the CLI and the middleware read -----------------------------------------------------
    def snapshot(self) -> list[McpServerInfo]:
        """Every configured server, in workbench.yaml's order."""
        out = []
        for srv in self._servers.values():
            info = self._with_switches(srv.info)
            if not srv.config.enabled and info.status == "stopped":
                info = replace(info, note=f"disabled in workbench.yaml (mcp_servers.{srv.name}.enabled: false)")
            out.append(info)
        return out

    def info(self, name: str) -> McpServerInfo:
        return next(i for i in self.snapshot() if i.name == self._server(name).name)

    def offered(self) -> tuple[McpToolInfo, ...]:
        """The tools to offer now: switched on, valid, of enabled servers that are up or coming back
        (a crashed server's tools stay, their calls say it restarts; a given-up one's go). The same
        tuple object until something changes, so the middleware's check is one comparison."""
        version = self._version
        cached = self._offered
        if cached is not None and cached[0] == version:
            return cached[1]
        out: list[McpToolInfo] = []
        for srv in self._servers.values():
            info = srv.info
            live = info.status in ("ready", "starting") or (info.status == "failed" and info.retry_at is not None)
            if srv.config.enabled and live:
                out.extend(t for t in self._with_switches(info).tools if t.offered)
        result = tuple(out)
        self._offered = (version, result)  # made from what was there at ``version``: stale after any change
        return result

    # -- actions ---------------------------------------------------------------------------------------
    async def ensure_started(self, *, should_stop: Callable[[], bool] | None = None) -> None:
        """Start every enabled server never started in this session and wait (each at most its
        ``startup_timeout``) until none is starting. ``should_stop``: polled; True ends the wait early."""
        if self._closed or not any(c.enabled for c in self.configs.values()):
            return
        # A server restarting after a crash does not hold a run up (its tools say it is coming back);
        # one on its first start does: the run would start without its tools.
        fresh = [s for s in self._servers.values() if s.config.enabled and not s.started]
        if not fresh and all(s.first_settled for s in self._servers.values() if s.started):
            return
        task = asyncio.ensure_future(self._on_loop(self._start_and_wait([s.name for s in fresh])))
        while not task.done():
            await asyncio.wait({task}, timeout=0.1)
            if should_stop is not None and should_stop() and not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
                return
        task.result()

    async def _start_and_wait(self, names: list[str]) -> None:
        for name in names:
            self._servers[name].start()
        waits = [s.wait_settled(s.config.startup_timeout + 1) for s in self._servers.values()
                 if s.started and not s.first_settled]
        await asyncio.gather(*waits)

    async def call(self, server: str, tool: str, arguments: Mapping[str, Any]) -> McpResult:
        """Call ``tool`` (the server's own name) on ``server``; McpCallError says why it failed."""
        srv = self._server(server)
        return await self._on_loop(srv.call(tool, dict(arguments)))

    async def restart(self, name: str) -> McpServerInfo:
        """Stop the server (if it runs) and start it again now; returns once it is ready or failed."""
        srv = self._server(name)

        async def go() -> None:
            generation = srv.generation
            await srv.restart()
            await srv.settle_after(generation, srv.config.startup_timeout + STOP_GRACE * 2 + 2)

        await self._on_loop(go())
        return self.info(name)

    async def check(self, name: str) -> McpServerInfo:
        """X5 "Check": start the server if it is not up (a failed one at once, not after its backoff) and
        list its tools afresh; returns its snapshot."""
        srv = self._server(name)
        if not srv.config.enabled:
            raise RunError(f"MCP server {name!r} is disabled in workbench.yaml (mcp_servers.{name}.enabled: false)")

        async def go() -> None:
            if srv.status == "ready":
                with contextlib.suppress(McpCallError):
                    await srv.call("", {}, relist=True)
                return
            if srv.status == "starting":
                await srv.wait_settled(srv.config.startup_timeout + 1)
                return
            generation = srv.generation
            await srv.restart()
            await srv.settle_after(generation, srv.config.startup_timeout + STOP_GRACE * 2 + 2)

        await self._on_loop(go())
        return self.info(name)

    def hold(self) -> None:
        """A session uses these servers (Session.open)."""
        with self._lock:
            self._holders += 1

    async def release(self) -> None:
        """A session using these servers closed: the last one stops every server process (X3)."""
        with self._lock:
            self._holders = max(0, self._holders - 1)
            last = self._holders == 0
        if last:
            await self.close()

    async def close(self) -> None:
        """Stop every server (their processes end, X3) and the MCP thread. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        try:
            await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self._stop_all(), loop))
        finally:
            loop.call_soon_threadsafe(loop.stop)
            await asyncio.to_thread(thread.join, 10)
            if not thread.is_alive():
                loop.close()
            for pid in list(self._pids):  # a server that resisted: its group is killed anyway
                signal_group(pid, getattr(signal, "SIGKILL", signal.SIGTERM))
                self._track(pid, False)

    def close_now(self) -> None:
        """``close`` for code without a loop (a script's exit): blocks until every server has stopped."""
        if self._closed:
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            asyncio.run(self.close())
            return
        concurrent.futures.ThreadPoolExecutor(1).submit(asyncio.run, self.close()).result()

    async def _stop_all(self) -> None:
        await asyncio.gather(*(s.stop() for s in self._servers.values()), return_exceptions=True)


# ------------------------------------------------------------------------------------------ sharing

_SHARED: weakref.WeakValueDictionary[tuple[int, str], McpServers] = weakref.WeakValueDictionary()
_SHARED_LOCK = threading.Lock()


def shared_servers(servers: Mapping[str, McpServerConfig], workspace: Path | str) -> McpServers:
    """The ``McpServers`` for this ``mcp_servers`` mapping: a session's agent and its sub-agents' engines
    (built from the same config object, ``build_child_engine``) share one set of server processes.
    A closed one is replaced."""
    key = (id(servers), str(Path(workspace)))
    with _SHARED_LOCK:  # sub-agents' engines are built on the task loop's thread too
        found = _SHARED.get(key)
        if found is not None and not found.closed and found.configs == dict(servers):
            return found
        made = McpServers(servers, workspace, state_file=Path(workspace) / ".workbench" / "mcp_tools.json")
        made._source = servers  # keeps the mapping (and so its id) alive as long as the servers are
        _SHARED[key] = made
        return made
