"""The ``Session`` facade's calls on MCP tool servers (X1–X5): what the Servers panel and ``workbench
mcp`` show and do — each server's status, tools, last error and log tail; Check, Restart; a tool
switched on or off.

A mixin of ``workbench.session.Session`` (one facade, split along its seams). Value types go out as
``McpServerInfo`` / ``McpToolInfo`` (frozen snapshots, exported by ``workbench.session``). A server's
changes reach the window as live ``mcp_server_status`` events on the current thread (the panel reads
``mcp_servers()`` again on one): the servers run on their own thread, so each change is handed to the
loop the session was opened on first.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.errors import ConfigError, RunError
from workbench.harness.mcp_servers import McpServers
from workbench.harness.mcp_tools import McpServerInfo, McpToolInfo

if TYPE_CHECKING:
    from workbench.engine.agent import Engine

log = logging.getLogger(__name__)

__all__ = ["McpCalls", "McpServerInfo", "McpToolInfo"]

UNTRUSTED_NOTE = ("not started: the workspace is not trusted, so its MCP servers are ignored (W1); trust it "
                  "(window: reopen it and choose Trust; CLI: --trust)")


class McpCalls:
    """MCP servers of the session's workspace (see the module)."""

    if TYPE_CHECKING:
        engine: Engine
        thread_id: str
        workspace: Path
        ignored: tuple[Any, ...]

    _mcp_unlisten: Callable[[], None] | None = None

    def _mcp(self) -> McpServers | None:
        from workbench.harness.mcp import servers_of

        return servers_of(self.engine.agent.middleware)

    def _mcp_middleware(self) -> Any:
        from workbench.harness.mcp import McpMiddleware

        return next((m for m in self.engine.agent.middleware if isinstance(m, McpMiddleware)), None)

    def _attach_mcp(self) -> None:
        """Session.open: the servers' changes become ``mcp_server_status`` events on this loop."""
        servers = self._mcp()
        if servers is None:
            return
        servers.hold()
        loop = asyncio.get_running_loop()

        def changed(name: str) -> None:  # on the MCP thread
            try:
                loop.call_soon_threadsafe(self._post_mcp, name)
            except RuntimeError:  # the loop closed under a late change: nobody is listening
                pass

        self._mcp_unlisten = servers.add_listener(changed)

    def _post_mcp(self, name: str) -> None:
        servers = self._mcp()
        if servers is None or servers.closed:
            return
        info = servers.info(name)
        try:
            self.engine.post_event(self.thread_id, "mcp_server_status", server=name, status=info.status,
                                   tools=len(info.offered), error=info.error)
        except Exception:  # noqa: BLE001 - a store closing under a late change
            log.debug("mcp_server_status not posted for %s", name, exc_info=True)

    def _require_mcp(self, name: str) -> McpServers:
        servers = self._mcp()
        if servers is None or name not in servers.names:
            if any(getattr(r, "key", "") == f"mcp_servers.{name}" for r in self.ignored):
                raise ConfigError(f"MCP server {name!r} is {UNTRUSTED_NOTE}")
            known = ", ".join(servers.names) if servers is not None else "none"
            raise RunError(f"no MCP server {name!r} in this workspace's workbench.yaml (mcp_servers: {known})")
        return servers

    # -- what the panel shows ------------------------------------------------------------------------
    def mcp_servers(self) -> list[McpServerInfo]:
        """X5: every server of workbench.yaml — status, tools (each with its switch), last error, log tail;
        the servers an untrusted workspace asked for, with why they do not start. Reads no file, starts
        nothing."""
        servers = self._mcp()
        out = servers.snapshot() if servers is not None else []
        return out + _untrusted(self.ignored)

    async def start_mcp_servers(self) -> list[McpServerInfo]:
        """Start the enabled servers not started yet (a run does this itself, on its first step) and
        offer their tools; returns the servers once none is starting."""
        servers = self._mcp()
        if servers is not None:
            await servers.ensure_started()
            self._sync_mcp()
        return self.mcp_servers()

    async def check_mcp_server(self, name: str) -> McpServerInfo:
        """X5 "Check": start the server if it is not up (a failed one at once) and list its tools afresh."""
        info = await self._require_mcp(name).check(name)
        self._sync_mcp()
        return info

    async def restart_mcp_server(self, name: str) -> McpServerInfo:
        """X5 "Restart": stop the server and start it again; returns once it is ready or failed."""
        info = await self._require_mcp(name).restart(name)
        self._sync_mcp()
        return info

    def set_mcp_tool_enabled(self, server: str, tool: str, on: bool) -> None:
        """X5: switch one tool on or off (off = not offered from the next model call); ``tool`` is the
        server's name for it or the offered ``mcp__…`` name. Kept in the workspace's ``.workbench/``."""
        self._require_mcp(server).set_tool_enabled(server, tool, on)
        self._sync_mcp()

    def _sync_mcp(self) -> None:
        mw = self._mcp_middleware()
        if mw is not None:
            mw.sync(self.engine.agent)

    async def _close_mcp(self) -> None:
        """Session.close: every server process stops (X3)."""
        if self._mcp_unlisten is not None:
            self._mcp_unlisten()
            self._mcp_unlisten = None
        servers = self._mcp()
        if servers is not None:
            await servers.release()  # the last session using them stops them

    # -- without a session (``workbench mcp``) ---------------------------------------------------------
    @staticmethod
    def list_mcp_servers(workspace: Path | str, *, trust: bool | str | None = None) -> list[McpServerInfo]:
        """The servers of a workspace's workbench.yaml as configured (nothing is started): each
        ``stopped``, with a note when it is disabled or its workspace not trusted (W1)."""
        ws, cfg, ignored = _config(workspace, trust)
        return McpServers(cfg.mcp_servers, ws).snapshot() + _untrusted(ignored)

    @staticmethod
    async def check_mcp_server_in(workspace: Path | str, name: str, *, trust: bool | str | None = None
                                  ) -> McpServerInfo:
        """``workbench mcp check NAME``: start one server of the workspace on its own (no agent, no
        model), list its tools, stop it. ConfigError when there is no such server or it is not trusted."""
        ws, cfg, ignored = _config(workspace, trust)
        if name not in cfg.mcp_servers:
            if any(getattr(r, "key", "") == f"mcp_servers.{name}" for r in ignored):
                raise ConfigError(f"MCP server {name!r} is {UNTRUSTED_NOTE}")
            known = ", ".join(cfg.mcp_servers) or "none"
            raise ConfigError(f"no MCP server {name!r} in {ws / 'workbench.yaml'} (mcp_servers: {known})")
        servers = McpServers({name: cfg.mcp_servers[name]}, ws,
                             state_file=ws / ".workbench" / "mcp_tools.json")
        try:
            return await servers.check(name)
        finally:
            await servers.close()


def _config(workspace: Path | str, trust: bool | str | None) -> tuple[Path, Any, tuple[Any, ...]]:
    """The workspace, its config as Session.open would use it under ``trust`` (W1), and what was ignored."""
    from workbench import trust as trust_mod
    from workbench.config import load_config

    ws = Path(workspace).expanduser().resolve()
    if not ws.is_dir():
        raise ConfigError(f"workspace {ws} is not a folder")
    cfg = load_config(ws)
    if trust is None:
        trusted = trust_mod.env_trusted() or trust_mod.is_trusted(ws, cfg)
    elif isinstance(trust, str):
        trusted = trust_mod.settings_hash(trust_mod.requests(cfg, ws)) == trust
    else:
        trusted = bool(trust)
    if trusted:
        return ws, cfg, ()
    return ws, trust_mod.safe_config(cfg, ws), tuple(trust_mod.requests(cfg, ws))


def _untrusted(ignored: tuple[Any, ...]) -> list[McpServerInfo]:
    out = []
    for r in ignored:
        key = str(getattr(r, "key", ""))
        if key.startswith("mcp_servers."):
            value = str(getattr(r, "value", ""))
            transport = "http" if value.lower().startswith(("http://", "https://")) else "stdio"
            out.append(McpServerInfo(key.split(".", 1)[1], transport, value, True, "stopped", note=UNTRUSTED_NOTE))
    return out
