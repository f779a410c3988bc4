"""A workspace's MCP servers (X1, X3, X5): ``McpServers`` starts them on demand on its own thread and
loop, hands calls over to them from any thread or loop, restarts, checks and stops them, and keeps the
tool switches and the caps on what is offered (X2, M2, F3: ``offer_caps``). ``shared_servers`` gives a
session's agent and its sub-agents one set of processes. What one server does is in ``mcp_server.py``; the
values it hands out, in ``mcp_tools.py``.
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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from workbench.config import McpServerConfig
from workbench.errors import RunError
from workbench.harness.mcp_server import Server
from workbench.harness.mcp_stdio import STOP_GRACE, signal_group
from workbench.harness.mcp_tools import McpCallError, McpResult, McpServerInfo, McpToolInfo

log = logging.getLogger(__name__)

__all__ = ["MAX_TOOLS", "MAX_TOOLS_PER_SERVER", "MAX_TOOL_CHARS", "MAX_TOOL_CHARS_PER_SERVER", "McpServers",
           "offer_caps", "shared_servers", "tool_chars"]


# ------------------------------------------------------------------------------------------ the caps
# Every model request carries the offered tools' schemas and descriptions (X2), and the prompt's parts
# are bounded (M2, F3); one tool is bounded already (mcp_tools: a 4,000-character description, a
# 16,000-character schema), these bound them all. Past a cap, tools are left out in each server's own
# listing order (first come, first offered), the servers taking turns for what all of them may have, so
# one server's thousand tools cannot crowd out another's five. What is left out is said, naming the
# server and how many, on each tool left out (the Servers panel, ``workbench mcp check``) and in its log.
# Tools switched off in the panel count for nothing: switching some off makes room for others.

MAX_TOOLS = 100
"""MCP tools offered in all. OpenAI refuses a request with more than 128 tools (the whole run fails, with
an error that names no server); the agent's own tools (files, shell, todos, sub-agents, tasks) take up
to some twenty of those, so 100 leaves them room. Models also choose worse among many tools."""
MAX_TOOLS_PER_SERVER = 100
"""MCP tools one server may offer: all of MAX_TOOLS, so a workspace with one big server loses nothing to
the per-server cap; it matters, with MAX_TOOL_CHARS_PER_SERVER, when there are several."""
MAX_TOOL_CHARS = 200_000
"""Characters of all the MCP tools' schemas (as compact JSON) and descriptions, together: some 50,000
tokens sent with every request, already a large part of a model's window (a real tool takes a few hundred
to a few thousand characters: 100 of them fit)."""
MAX_TOOL_CHARS_PER_SERVER = 100_000
"""The same for one server: half of MAX_TOOL_CHARS, so the other servers keep room."""


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
        # (version it was made at, the offer, {server: (its tools left out by a cap, why)})
        self._offered: tuple[int, tuple[McpToolInfo, ...], dict[str, tuple[frozenset[str], str]]] | None = None
        self._capped_noted: dict[str, str] = {}  # server -> the cap problem last written to its log
        self._chars: dict[str, tuple[tuple[McpToolInfo, ...], dict[str, int]]] = {}  # tool_chars per listing
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

    def _with_switches(self, info: McpServerInfo, capped: tuple[frozenset[str], str] | None = None) -> McpServerInfo:
        """``info`` with the person's switches and, given ``capped``, the cap's problem on the tools left out."""
        tools = tuple(replace(t, enabled=(info.name, t.tool) not in self._disabled) for t in info.tools)
        if capped is not None:
            out, why = capped
            tools = tuple(replace(t, problem=why) if t.offered and t.tool in out else t for t in tools)
        return replace(info, tools=tools)

    # -- what the UI, the CLI and the middleware read -----------------------------------------------------
    def snapshot(self) -> list[McpServerInfo]:
        """Every configured server, in workbench.yaml's order."""
        out = []
        capped = self._offer()[1]
        for srv in self._servers.values():
            info = self._with_switches(srv.info, capped.get(srv.name))
            if not srv.config.enabled and info.status == "stopped":
                info = replace(info, note=f"disabled in workbench.yaml (mcp_servers.{srv.name}.enabled: false)")
            out.append(info)
        return out

    def info(self, name: str) -> McpServerInfo:
        return next(i for i in self.snapshot() if i.name == self._server(name).name)

    def offered(self) -> tuple[McpToolInfo, ...]:
        """The tools to offer now: switched on, valid, of enabled servers that are up or coming back
        (a crashed server's tools stay, their calls say it restarts; a given-up one's go), within the
        caps (``offer_caps``), server by server in each one's listing order. The same tuple object until
        something changes, so the middleware's check is one comparison."""
        return self._offer()[0]

    def _offer(self) -> tuple[tuple[McpToolInfo, ...], dict[str, tuple[frozenset[str], str]]]:
        """``offered()`` and, per server with tools left out by a cap, which (its own names) and why."""
        version = self._version
        cached = self._offered
        if cached is not None and cached[0] == version:
            return cached[1], cached[2]
        live: list[tuple[str, tuple[McpToolInfo, ...]]] = []
        sizes: dict[str, dict[str, int]] = {}
        for srv in self._servers.values():
            info = srv.info
            up = info.status in ("ready", "starting") or (info.status == "failed" and info.retry_at is not None)
            if srv.config.enabled and up:
                live.append((srv.name, self._with_switches(info).tools))
                sizes[srv.name] = self._sizes(srv.name, info.tools)
        capped = offer_caps(live, lambda server, t: sizes[server].get(t.tool) or tool_chars(t))
        out = [t for name, tools in live for t in tools
               if t.offered and t.tool not in capped.get(name, (frozenset(), ""))[0]]
        result = tuple(out)
        self._offered = (version, result, capped)  # made from what was there at ``version``: stale after any change
        self._note_capped(capped)
        return result, capped

    def _sizes(self, name: str, tools: tuple[McpToolInfo, ...]) -> dict[str, int]:
        """``tool_chars`` of a server's tools, measured once per listing."""
        kept = self._chars.get(name)
        if kept is not None and kept[0] is tools:
            return kept[1]
        sizes = {t.tool: tool_chars(t) for t in tools}
        self._chars[name] = (tools, sizes)
        return sizes

    def _note_capped(self, capped: Mapping[str, tuple[frozenset[str], str]]) -> None:
        """What a cap left out, in the server's log (the Servers panel, ``workbench mcp check``) and the
        workbench's, once per change."""
        with self._lock:
            news = {name: why for name, (_, why) in capped.items() if self._capped_noted.get(name) != why}
            for name in [n for n in self._capped_noted if n not in capped]:
                del self._capped_noted[name]
            self._capped_noted.update(news)
            loop, thread = self._loop, self._thread
        for name, why in news.items():
            log.warning("%s", why)
            srv = self._servers[name]
            if threading.current_thread() is thread:
                srv.note(f"[workbench] {why}")
            elif loop is not None and not loop.is_closed():
                with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                    loop.call_soon_threadsafe(srv.note, f"[workbench] {why}")

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
            elif srv.status == "starting":
                await srv.wait_settled(srv.config.startup_timeout + 1)
            else:
                generation = srv.generation
                await srv.restart()
                await srv.settle_after(generation, srv.config.startup_timeout + STOP_GRACE * 2 + 2)
            self._offer()  # what a cap leaves out is in its log before the snapshot is returned

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


# ------------------------------------------------------------------------------------------ the caps


def tool_chars(tool: McpToolInfo) -> int:
    """Characters a tool adds to every request: its description and its schema as compact JSON."""
    return len(tool.description) + len(json.dumps(tool.schema, ensure_ascii=False, separators=(",", ":"), default=str))


def offer_caps(servers: Sequence[tuple[str, Sequence[McpToolInfo]]],
               chars: Callable[[str, McpToolInfo], int] | None = None) -> dict[str, tuple[frozenset[str], str]]:
    """Which tools the caps leave out (see MAX_TOOLS …): ``{server: (its own names of the tools left out,
    why — naming the server and how many)}``, for the servers with any left out. ``servers``: each live
    server's tools, switches applied, in its listing order; only those it offers (``offered``) count.

    First each server alone: its tools in its order while they fit MAX_TOOLS_PER_SERVER and
    MAX_TOOL_CHARS_PER_SERVER; the first that does not fit and all after it are left out. Then all
    together: the servers take turns, one tool each, in workbench.yaml's order, while MAX_TOOLS and
    MAX_TOOL_CHARS allow; a server whose next tool does not fit is done. So what a server keeps is always
    the first of its tools, and a server with few tools keeps them all beside one with many."""
    size = chars or (lambda server, tool: tool_chars(tool))
    candidates: dict[str, list[tuple[McpToolInfo, int]]] = {}
    kept: dict[str, int] = {}  # server -> how many of its first candidates are within its own caps
    for name, tools in servers:
        sized = [(t, size(name, t)) for t in tools if t.offered]
        candidates[name] = sized
        n = total = 0
        for _, c in sized:
            if n + 1 > MAX_TOOLS_PER_SERVER or total + c > MAX_TOOL_CHARS_PER_SERVER:
                break
            n, total = n + 1, total + c
        kept[name] = n
    taken = {name: 0 for name in candidates}
    count = total = 0
    turn = [name for name in candidates if kept[name]]
    while turn:
        going = []
        for name in turn:
            c = candidates[name][taken[name]][1]
            if count + 1 > MAX_TOOLS or total + c > MAX_TOOL_CHARS:
                continue  # this server is done; the others may still have tools that fit
            count, total = count + 1, total + c
            taken[name] += 1
            if taken[name] < kept[name]:
                going.append(name)
        turn = going
    out: dict[str, tuple[frozenset[str], str]] = {}
    for name, sized in candidates.items():
        n = taken[name]
        if n == len(sized):
            continue
        left = len(sized) - n
        over = []
        if kept[name] < len(sized):
            over.append(f"one server may offer at most {MAX_TOOLS_PER_SERVER} tools and "
                        f"{MAX_TOOL_CHARS_PER_SERVER:,} characters of schemas and descriptions")
        if n < kept[name]:
            over.append(f"all MCP servers together may offer at most {MAX_TOOLS} tools and {MAX_TOOL_CHARS:,} "
                        "characters, the servers taking turns")
        why = (f"MCP server {name!r} offers {len(sized):,} tools ({sum(c for _, c in sized):,} characters of schemas "
               f"and descriptions): only the first {n:,} in its listing order are offered, {left:,} are left out "
               f"({'; '.join(over)}). Switch off tools you do not need (Servers panel) to make room for others")
        out[name] = (frozenset(t.tool for t, _ in sized[n:]), why)
    return out


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
