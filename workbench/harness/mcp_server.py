"""MCP tool servers (X1, X3, X5): the servers of a workspace's ``mcp_servers:``, each owned by one
long-lived task, on the official ``mcp`` SDK. No Qt.

Threading: every server lives on one private asyncio loop in a daemon thread (``McpServers``), started
when a server is first needed. The engine (the window's GUI loop, the CLI's loop) never runs the SDK:
it hands requests over (``asyncio.run_coroutine_threadsafe``) and awaits the answer. So a server's
start-up, its pipes and its log never stall the window, and the SDK's AnyIO cancel scopes are entered
and left inside one task of one loop whatever loop the caller is on ("exit cancel scope in a different
task" cannot happen).

One task per server (``Server._own``) does everything with it: spawn or connect, ``initialize``, list
the tools, run the calls (each in a child task of its task group, so a message's calls run at once,
R4), notice a crash, restart with backoff, and shut it down. A lifetime is one cancel scope: a timer
fails it at ``startup_timeout`` unless its tools are listed by then; Stop, Restart and Session.close
cancel that scope, so the same task unwinds the SDK and stops the process.

A stdio server's process is the workbench's own transport, not the SDK's (``mcp_stdio.py``: its pid, its
stderr in the log, its untrusted output read within MAX_MESSAGE_BYTES, its process group stopped).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from workbench.config import McpServerConfig
from workbench.harness import mcp_stdio  # MAX_MESSAGE_BYTES read at use: one limit for both transports
from workbench.harness.mcp_stdio import INVALID_ANSWER, STOP_GRACE, StdioTransport
from workbench.harness.mcp_tools import McpCallError, McpServerInfo, McpToolInfo, one_line, result_of, tool_infos

if TYPE_CHECKING:
    from workbench.harness.mcp_servers import McpServers

log = logging.getLogger(__name__)

__all__ = ["LOG_LINES", "STATUSES", "Server"]

STATUSES = ("starting", "ready", "failed", "stopped")
LOG_LINES = 200
"""Lines of a server's log (stderr and the workbench's notes) kept for the panel and ``mcp check``."""
MAX_LINE_CHARS = 500
BACKOFF = 1.0
"""Seconds before the first automatic restart; doubled after each failure in a row, up to MAX_BACKOFF."""
MAX_BACKOFF = 30.0
STABLE_SECONDS = 30.0
"""A server ready this long before it stopped counts as a fresh start: its backoff begins again."""
MAX_START_FAILURES = 5
"""Starts in a row that never got ready before the workbench gives up (Restart or Check tries again)."""
LOG_PUBLISH_SECONDS = 0.5
"""At most this often a server's log alone (its stderr, the workbench's notes) tells the listeners (the
panel's log tail) of a change; the snapshot (``info``) has every line at once."""
RELIST_SECONDS = 1.0
"""At most this often a server's tools are listed again after it says they changed
(``notifications/tools/list_changed``): notifications meanwhile make one more listing, never a queue of
them, so a server that says so after every listing cannot keep the MCP loop, and the listeners (the
session's events on the window's loop), busy."""
MAX_LISTED_TOOLS = 500
"""Tools of one server read from its listing, in its order (F3: each is checked, its schema measured and
maybe trimmed, and all of them shown in the Servers panel). Five times what may be offered
(``mcp_servers.MAX_TOOLS_PER_SERVER``): room to switch some off and others on; the rest are left out
unread, and the log says how many."""


# ------------------------------------------------------------------------------------------ one server


class _ListFailed(Exception):
    """The server's tools list came but could not be read (the SDK's own error, not the transport's)."""


def _transport_error(e: BaseException) -> bool:
    """Whether ``e`` is the connection to the server failing (closed, broken, reset) rather than
    something wrong with what it sent."""
    import anyio
    from mcp import MCPError
    from mcp_types import CONNECTION_CLOSED

    if isinstance(e, MCPError):
        return e.code == CONNECTION_CLOSED
    if isinstance(e, (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, EOFError, OSError)):
        return True
    try:
        import httpx
    except ImportError:  # pragma: no cover - the SDK depends on it
        return False
    return isinstance(e, httpx.TransportError)


def _what_went_wrong(e: BaseException) -> str:
    from mcp import MCPError

    if isinstance(e, MCPError):
        return one_line(e.message) if e.code == INVALID_ANSWER else f"error {e.code}: {one_line(e.message)}"
    return f"{type(e).__name__}: {one_line(str(e)) or type(e).__name__}"


@dataclass
class _Call:
    tool: str
    arguments: dict[str, Any]
    future: asyncio.Future[Any]
    relist: bool = False
    asked: bool = False  # a relisting the server asked for (tools/list_changed): coalesced, rate-limited
    cancelled: bool = False
    scope: Any = None


class Server(StdioTransport):
    """One configured server and the task that owns it (see the module). Every method runs on the MCP
    loop; other threads read only ``info`` (an immutable snapshot, replaced whole)."""

    def __init__(self, manager: McpServers, name: str, config: McpServerConfig) -> None:
        self.m = manager
        self.name = name
        self.config = config
        self.log: deque[str] = deque(maxlen=LOG_LINES)
        self.status = "stopped"
        self.error: str | None = None
        self.tools: tuple[McpToolInfo, ...] = ()
        self.pid: int | None = None
        self.restarts = 0
        self.retry_at: float | None = None
        self.server_info: str | None = None
        self.gave_up = False
        self.started = False  # started in this session (a run starts only those never started)
        self.first_settled = False  # its first start ended (ready or failed): runs wait only for that one
        self.generation = 0  # lifetimes begun (Restart waits for the next one to settle)
        self.info = self._make_info()
        self._task: asyncio.Task[None] | None = None
        self._scope: Any = None
        self._queue: asyncio.Queue[_Call] | None = None
        self._settled: asyncio.Event | None = None
        self._wake: asyncio.Event | None = None
        self._disconnected: Any = None
        self._stopping = False
        self._restart = False
        self._exit_code: int | None = None
        self._secrets: tuple[str, ...] = ()
        self._too_long: int | None = None  # bytes of a message over MAX_MESSAGE_BYTES that ended this lifetime
        self._relist_wanted = False  # the server said its tools changed since the last listing began
        self._relist_queued = False  # a relisting (of those it asked for) is queued or running
        self._relisted_at = 0.0  # when its last listing began (RELIST_SECONDS)
        self._unread: tuple[int, bool] | None = None  # its last listing over MAX_LISTED_TOOLS (how many, more pages)
        self._shown = 0.0  # when the log last told the listeners (LOG_PUBLISH_SECONDS)
        self._show_later: asyncio.TimerHandle | None = None

    # -- state, seen from outside ----------------------------------------------------------------------
    def _make_info(self) -> McpServerInfo:
        return McpServerInfo(self.name, self.config.transport, self.config.target, self.config.enabled,
                             self.status, self.error, tuple(self.log), self.tools, self.pid, self.restarts,
                             self.retry_at, self.server_info)

    def _publish(self) -> None:
        self.info = self._make_info()
        self.m._changed(self.name)

    def _set(self, status: str, **changes: Any) -> None:
        self.status = status
        for k, v in changes.items():
            setattr(self, k, v)
        if status != "starting" and self.started:
            self.first_settled = True
        if self._settled is not None:
            (self._settled.clear if status == "starting" else self._settled.set)()
        self._publish()

    def note(self, line: str) -> None:
        """A line in the server's log (stderr, or what the workbench noticed), secrets scrubbed: in the
        snapshot (``info``: the Servers panel, ``workbench mcp``) at once, the listeners told at most every
        LOG_PUBLISH_SECONDS (X5)."""
        from workbench.redact import scrub

        line = scrub(line[: 4 * MAX_LINE_CHARS].rstrip("\r\n"), *self._secrets)  # a 30 MB line is not scanned
        self.log.append(line if len(line) <= MAX_LINE_CHARS else line[: MAX_LINE_CHARS - 1] + "…")
        self.info = self._make_info()
        now = time.monotonic()
        if now - self._shown >= LOG_PUBLISH_SECONDS:
            self._shown = now
            self.m._changed(self.name)
        elif self._show_later is None:  # the last line of a burst is told too, a moment later
            with contextlib.suppress(RuntimeError):
                self._show_later = asyncio.get_running_loop().call_later(
                    LOG_PUBLISH_SECONDS - (now - self._shown), self._show_log)

    def _show_log(self) -> None:
        self._show_later = None
        self._shown = time.monotonic()
        self.info = self._make_info()
        self.m._changed(self.name)

    def _fail(self, error: str) -> None:
        from workbench.redact import scrub

        error = scrub(error, *self._secrets)
        self.note(f"[workbench] {error}")
        self._set("failed", error=error)

    # -- the owner task --------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the owner task unless it runs (a stopped or given-up server starts afresh)."""
        loop = asyncio.get_running_loop()
        if self._settled is None:
            self._settled, self._wake = asyncio.Event(), asyncio.Event()
        if self._task is None or self._task.done():
            self._stopping = False
            self.gave_up = False
            self.started = True
            self._set("starting", retry_at=None)
            self._task = loop.create_task(self._own(), name=f"mcp-server-{self.name}")

    async def _own(self) -> None:
        failures = 0
        while not self._stopping:
            began = time.monotonic()
            ready = await self._lifetime()
            if self._stopping:
                break
            if self._restart:
                self._restart, failures = False, 0
                self.restarts += 1
                continue
            stable = ready and time.monotonic() - began >= STABLE_SECONDS
            failures = 1 if stable else failures + 1
            if not ready and failures >= MAX_START_FAILURES:
                self.gave_up = True
                self._fail(f"{self.error or 'it did not start'} — gave up after {failures} attempts in a row; "
                           "Restart (or Check) tries again")
                self._set("failed", retry_at=None)
                return
            delay = min(MAX_BACKOFF, BACKOFF * 2 ** (failures - 1))
            self._set("failed", retry_at=time.time() + delay)
            assert self._wake is not None
            self._wake.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), delay)
            if self._stopping:
                break
            if self._restart:
                self._restart, failures = False, 0
            self.restarts += 1
        self._set("stopped", retry_at=None, pid=None)

    async def _lifetime(self) -> bool:
        """One start of the server, through its time ready, to its end; True if it got ready."""
        import anyio

        self.generation += 1
        self._set("starting", retry_at=None, pid=None)  # the last error stays in sight until it is ready
        self._exit_code = None
        self._disconnected = None
        self._too_long = None
        self._relist_wanted = self._relist_queued = False
        ready = False
        cfg = self.config
        queue: asyncio.Queue[_Call] = asyncio.Queue()
        timer: asyncio.TimerHandle | None = None
        try:
            with anyio.CancelScope() as scope:
                self._scope = scope
                # Failed the moment the time is up (a run waiting for it goes on now), then stopped:
                # stopping a server that ignores its closed stdin takes seconds more.
                timer = asyncio.get_running_loop().call_later(cfg.startup_timeout, self._timed_out, scope)
                async with contextlib.AsyncExitStack() as stack:
                    client = await self._connect(stack)
                    tools = await self._list(client)
                    timer.cancel()
                    ready = True
                    self._queue = queue
                    info = client.server_info
                    self.note(f"[workbench] ready: {len(tools)} tool(s)")
                    self._set("ready", tools=tools, error=None,
                              server_info=f"{info.name} {info.version}".strip() if info is not None else None)
                    self._queue_relist()  # it said its tools changed while it started
                    await self._serve(client, queue)
            if self._stopping or self._restart:
                return ready
            if not ready and scope.cancelled_caught:
                pass  # _timed_out said so already
            elif self._too_long is not None:
                self._fail(self._too_long_text())
            elif ready:
                self._fail(f"the server stopped{self._code()}{self._last_words()}")
            else:
                self._fail(f"the server closed the connection before it was ready{self._code()}{self._last_words()}")
        except asyncio.CancelledError:
            raise
        except BaseException as e:  # noqa: BLE001 - every way a start can fail is shown, never raised
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            if not (self._stopping or self._restart):
                self._fail(self._too_long_text() if self._too_long is not None else self._describe(e, ready))
        finally:
            if timer is not None:
                timer.cancel()
            self._scope = None
            self._queue = None
            while not queue.empty():
                call = queue.get_nowait()
                if not call.future.done():
                    call.future.set_exception(McpCallError(self._not_running()))
        return ready

    def _timed_out(self, scope: Any) -> None:
        if self.status == "starting" and not (self._stopping or self._restart):
            self._fail(f"it did not answer within startup_timeout ({self.config.startup_timeout:g} s)"
                       + self._last_words() + "; a first `uvx`/`npx` run may need longer: raise "
                       f"mcp_servers.{self.name}.startup_timeout")
        scope.cancel()

    def _warn_written_secrets(self) -> None:
        """A value that looks like a key written into workbench.yaml itself (X1: it belongs in ``${VAR}``)."""
        from workbench.redact import scrub

        for where, values in (("env", self.config.env), ("headers", self.config.headers)):
            for key, value in values.items():
                if "${" not in value and scrub(value) != value:
                    self.note(f"[workbench] mcp_servers.{self.name}.{where}.{key} looks like a secret written into "
                              "workbench.yaml: write ${VAR} there and keep the value in your environment or the "
                              "keyring")

    async def _connect(self, stack: contextlib.AsyncExitStack) -> Any:
        import anyio.to_thread
        from mcp import Client
        from mcp.types import Implementation

        from workbench import __version__

        self._warn_written_secrets()
        if self.config.url:
            from mcp.client.streamable_http import streamable_http_client

            from workbench.harness.mcp_http import capped_client
            from workbench.harness.mcp_launch import resolve_vars

            headers, secrets = await anyio.to_thread.run_sync(
                resolve_vars, dict(self.config.headers), f"mcp_servers.{self.name}.headers")
            self._secrets = tuple(secrets)
            # F3: its answers are capped as a stdio server's messages are (mcp_http.py)
            http = await stack.enter_async_context(
                capped_client(self.name, headers, mcp_stdio.MAX_MESSAGE_BYTES, self.note))
            transport: Any = streamable_http_client(self.config.url, http_client=http,
                                                    max_sse_event_size=mcp_stdio.MAX_MESSAGE_BYTES)
        else:
            from workbench.harness.mcp_launch import launch_spec

            spec = await anyio.to_thread.run_sync(
                launch_spec, self.name, self.config.command or "", tuple(self.config.args), dict(self.config.env),
                self.config.cwd, self.m.workspace)
            self._secrets = spec.secrets
            transport = self._stdio(spec)
        client = Client(transport, cache=None, message_handler=self._on_message, logging_callback=self._on_log,
                        client_info=Implementation(name="workbench", version=__version__))
        return await stack.enter_async_context(client)

    async def _list(self, client: Any) -> tuple[McpToolInfo, ...]:
        """The server's tools in its own order (the order they are offered in, and the caps go by,
        ``mcp_servers.offer_caps``), at most MAX_LISTED_TOOLS of them."""
        self._relisted_at = time.monotonic()
        listed: list[Any] = []
        cursor = None
        for _ in range(100):  # a paginator that never ends cannot hang a start
            try:
                page = await client.list_tools(cursor=cursor, cache_mode="bypass")
            except Exception as e:
                if _transport_error(e):
                    raise
                # What could not be read (a schema nested too deep for the SDK to serialise), said as such,
                # not as "the server stopped" (the transport is closed by the time a start's error is told).
                raise _ListFailed(_what_went_wrong(e)) from e
            listed.extend(page.tools)
            cursor = page.next_cursor
            if not cursor or len(listed) > MAX_LISTED_TOOLS:  # F3: no more pages are read than are kept
                break
        unread = (len(listed) - MAX_LISTED_TOOLS, bool(cursor)) if len(listed) > MAX_LISTED_TOOLS else None
        if unread is not None and unread != self._unread:  # once per change, not at every relisting
            self.note(f"[workbench] it lists {'more than ' if cursor else ''}{len(listed):,} tools: only the first "
                      f"{MAX_LISTED_TOOLS} in its order are read (and shown); the rest are left out")
        self._unread = unread
        del listed[MAX_LISTED_TOOLS:]
        order: dict[str, int] = {}
        for i, t in enumerate(listed):
            order.setdefault(t.name, i)
        tools = tuple(sorted(tool_infos(self.name, listed), key=lambda t: order.get(t.tool, len(order))))
        before = {(t.tool, t.note, t.problem) for t in self.tools}
        for t in tools:  # X5: why a tool is offered changed or not at all, in the log (once per change)
            if (t.note or t.problem) and (t.tool, t.note, t.problem) not in before:
                what = f" is not offered: {t.problem}" if t.problem else f": {t.note}"
                self.note(f"[workbench] tool {one_line(t.tool, 80)!r}{what}")
        return tools

    async def _relist(self, client: Any) -> None:
        """List the tools again (bounded by startup_timeout, as at a start); the listeners are told only
        when the list really changed."""
        import anyio

        with anyio.fail_after(self.config.startup_timeout):
            tools = await self._list(client)
        if tools != self.tools:
            self._set(self.status, tools=tools)

    async def _relist_while_wanted(self, client: Any) -> None:
        """The listings the server asked for: one at a time, at most one every RELIST_SECONDS, as long as
        it asked again since the last one began."""
        import anyio

        try:
            while self._relist_wanted:
                wait = self._relisted_at + RELIST_SECONDS - time.monotonic()
                if wait > 0:
                    await anyio.sleep(wait)
                self._relist_wanted = False
                await self._relist(client)
        finally:
            self._relist_queued = False

    async def _serve(self, client: Any, queue: asyncio.Queue[_Call]) -> None:
        """Run calls until the server goes away or the lifetime is cancelled."""
        import anyio

        async with anyio.create_task_group() as tg:
            disconnected = self._disconnected

            async def watch() -> None:
                if disconnected is not None:
                    await disconnected.wait()
                    tg.cancel_scope.cancel()

            tg.start_soon(watch)
            while True:
                call = await queue.get()
                tg.start_soon(self._run_call, client, call)

    async def _run_call(self, client: Any, call: _Call) -> None:
        import anyio
        from mcp import MCPError

        fut = call.future
        try:
            if fut.done() or call.cancelled:
                return
            with anyio.CancelScope() as scope:
                call.scope = scope
                if call.relist:
                    try:
                        await (self._relist_while_wanted(client) if call.asked else self._relist(client))
                    except TimeoutError:
                        fut.set_exception(McpCallError(
                            f"MCP server {self.name!r} did not list its tools again within startup_timeout "
                            f"({self.config.startup_timeout:g} s); the tools listed before stay"))
                    except Exception as e:  # noqa: BLE001 - the tools listed before stay
                        why = str(e) if isinstance(e, _ListFailed) else self._describe(e, True)
                        fut.set_exception(McpCallError(self._crashed() if self._gone() else
                                                       f"MCP server {self.name!r}: its tools could not be listed "
                                                       f"again ({why}); the tools listed before stay"))
                    else:
                        fut.set_result(None)
                    return
                try:
                    with anyio.fail_after(self.config.tool_timeout):
                        raw = await client.call_tool(call.tool, call.arguments)
                except TimeoutError:
                    fut.set_exception(McpCallError(
                        f"MCP server {self.name!r} did not answer within tool_timeout ({self.config.tool_timeout:g} s); "
                        f"the call was cancelled (raise mcp_servers.{self.name}.tool_timeout for slow tools)"))
                except MCPError as e:
                    if self._gone():
                        fut.set_exception(McpCallError(self._crashed()))
                    elif e.code == INVALID_ANSWER:
                        fut.set_exception(McpCallError(f"MCP server {self.name!r} sent an answer that is not valid "
                                                       f"MCP: {one_line(e.message)}"))
                    else:
                        fut.set_exception(McpCallError(f"MCP server {self.name!r} refused the call: {one_line(str(e))}"))
                else:
                    fut.set_result(result_of(raw))
        except Exception as e:  # noqa: BLE001 - a transport error mid-call is the call's error
            if not fut.done():
                fut.set_exception(McpCallError(self._crashed() if self._gone() else
                                               f"MCP server {self.name!r} failed the call: {self._describe(e, True)}"))
        finally:
            if not fut.done():
                fut.set_exception(McpCallError(self._crashed() if self._gone() else self._not_running()))

    def _gone(self) -> bool:
        return self._disconnected is not None and self._disconnected.is_set()

    def _crashed(self) -> str:
        if self._too_long is not None:
            return f"{self._too_long_text()}. It is restarted; call again once it is back (asking for less)"
        return (f"the MCP server {self.name!r} stopped during the call{self._code()}{self._last_words()}. "
                "It is restarted; call again once it is back")

    def _not_running(self) -> str:
        if self._stopping:
            return f"MCP server {self.name!r} is stopped (the session is closing)"
        why = f": {self.error}" if self.error else ""
        when = ""
        if self.retry_at is not None:
            when = f"; it restarts in {max(0.0, self.retry_at - time.time()):.0f} s"
        return f"MCP server {self.name!r} is not running ({self.status}{why}){when}"

    def _too_long_text(self) -> str:
        limit = mcp_stdio.MAX_MESSAGE_BYTES
        return (f"MCP server {self.name!r} sent a message of {self._too_long or 0:,} bytes or more, over the "
                f"limit of {limit:,} bytes ({limit / 2**20:g} MB) for one message: it was "
                "dropped, so the call it answered has no result, and the server was stopped")

    def _code(self) -> str:
        return f" (exit code {self._exit_code})" if self._exit_code is not None else ""

    def _last_words(self) -> str:
        lines = [ln for ln in self.log if not ln.startswith("[workbench]")]
        return f"; its last output: {one_line(lines[-1], 200)}" if lines else ""

    def _describe(self, e: BaseException, ready: bool) -> str:
        """One line for what went wrong, however deep the exception groups nest."""
        while isinstance(e, BaseExceptionGroup) and e.exceptions:
            e = e.exceptions[0]
        from workbench.harness.mcp_launch import LaunchError

        if isinstance(e, LaunchError):
            return str(e)
        where = "" if ready else " while starting"
        if isinstance(e, _ListFailed):  # the workbench stopped the server: its exit code says nothing
            return f"its tools list could not be read{where} ({e}){self._last_words()}"
        from mcp import MCPError

        if isinstance(e, MCPError) and e.code == INVALID_ANSWER:
            return f"it sent an answer that is not valid MCP{where}: {one_line(e.message)}{self._last_words()}"
        # The transport is closed by the time a failed start is described (the process stopped): only an
        # error of the transport itself means the server stopped; any other says what went wrong.
        if self._gone() and _transport_error(e):
            return f"the server stopped{where}{self._code()}{self._last_words()}"
        text = one_line(str(e)) or type(e).__name__
        return f"{type(e).__name__}{where}: {text}{self._code()}{self._last_words()}"

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, Exception):
            self.note(f"[workbench] transport: {one_line(str(message)) or type(message).__name__}")
            return
        if getattr(message, "method", "") == "notifications/tools/list_changed":
            # One listing at a time, at most one a RELIST_SECONDS: a notification meanwhile marks one more
            # (one while it starts is listed once it is ready).
            self._relist_wanted = True
            self._queue_relist()

    def _queue_relist(self) -> None:
        if self._queue is not None and self._relist_wanted and not self._relist_queued:
            self._relist_queued = True
            fut = asyncio.get_running_loop().create_future()
            fut.add_done_callback(self._relisted)  # nobody awaits it: its error is noted, not lost
            self._queue.put_nowait(_Call("", {}, fut, relist=True, asked=True))

    def _relisted(self, fut: asyncio.Future[Any]) -> None:
        """A relisting the server asked for ended: its error (if any) in the log; the tools before stay."""
        if fut.cancelled():
            return
        e = fut.exception()
        # A server gone, stopped or restarting: its lifetime's end says so (no note per relisting cut short).
        if e is not None and not (self._stopping or self._restart or self._gone()):
            log.info("MCP server %r: %s", self.name, e)
            self.note(f"[workbench] {e}")

    async def _on_log(self, params: Any) -> None:
        data = params.data if isinstance(params.data, str) else json.dumps(params.data, ensure_ascii=False, default=str)
        self.note(f"[{params.level}] {data}")

    # -- requests from other threads (scheduled on the MCP loop) ----------------------------------------
    async def wait_settled(self, timeout: float) -> None:
        if self._settled is not None and self.status == "starting":
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._settled.wait(), timeout)

    async def call(self, tool: str, arguments: dict[str, Any], *, relist: bool = False) -> Any:
        await self.wait_settled(self.config.startup_timeout + 1)
        if self.status != "ready" or self._queue is None:
            raise McpCallError(self._not_running())
        call = _Call(tool, arguments, asyncio.get_running_loop().create_future(), relist)
        self._queue.put_nowait(call)
        try:
            return await call.future
        except asyncio.CancelledError:  # the run was stopped: the call in flight ends too
            call.cancelled = True
            if call.scope is not None:
                call.scope.cancel()
            raise

    async def settle_after(self, generation: int, timeout: float) -> None:
        """Wait until a lifetime after ``generation`` has begun and is no longer starting."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and (self.generation <= generation or self.status == "starting"):
            if self._task is None or self._task.done():
                return
            await asyncio.sleep(0.02)

    async def restart(self) -> None:
        if self._task is None or self._task.done():
            self.start()
            return
        self._restart = True
        if self._scope is not None:
            self._scope.cancel()
        if self._wake is not None:
            self._wake.set()

    async def stop(self) -> None:
        self._stopping = True
        if self._scope is not None:
            self._scope.cancel()
        if self._wake is not None:
            self._wake.set()
        task = self._task
        if task is not None and not task.done():
            try:
                await asyncio.wait_for(asyncio.shield(task), 4 * STOP_GRACE + 4)
            except asyncio.TimeoutError:
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
        if self.status != "stopped":
            self._set("stopped", retry_at=None, pid=None)
