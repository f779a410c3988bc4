"""MCP tool servers as tool sources (X1–X3): the middleware that offers a workspace's MCP tools to the
agent, under the same permissions as any tool. The servers themselves (processes, connections, the one
task that owns each) are in ``mcp_servers.py`` and ``mcp_server.py``; how a command is found and its ``${VAR}`` resolved, in
``mcp_launch.py``.

- Tools appear as ``mcp__<server>__<tool>`` with the server's own JSON schemas (names made valid for
  every provider, ``mcp_tools.offered_names``). They join the agent's tools when the servers are
  started — on the first run that needs them (``before_agent``; a resumed run too, ``on_decision``) —
  and follow the servers from then on: checked before every model call (``sections``), so a server
  that comes back, a tool switched off in the Servers panel (not offered) or a changed tool list
  shows at the next step. Only this middleware's own ``mcp__`` tools are ever added or removed.
- Permissions as for any tool (P1, P2): ``invoke`` on the tool's name, so ``{allow: invoke, tool:
  "mcp__git__*"}`` works; a tool the server annotates read-only (``readOnlyHint``) is a tool that does
  not change the outside world, so the default ``ask`` lets it run, everything else asks (X2).
- Results: text as text; structured content as JSON (unless the text already is that JSON); images,
  audio and binary resources become artifacts of the thread (``mcp/<server>/<tool>-s<step>-<call>-<n>.<ext>``)
  named in the result; an ``isError`` result is the tool's error. Every result is then capped like any
  other (C3, compression's ``max_tool_response_chars``).
- A call to a server that is down, crashed mid-call or timed out is the tool's error with the reason;
  it never fails the run (X3).
"""

from __future__ import annotations

import json
import logging
import mimetypes
import re
import time
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from workbench.config import McpServerConfig
from workbench.engine.middleware import AgentMiddleware, HookContext, Question, Section, ToolContext
from workbench.engine.tools import Tool, ToolOutcome
from workbench.harness.mcp_servers import McpServers, shared_servers
from workbench.harness.mcp_tools import McpResult, McpToolInfo, decoded_size

log = logging.getLogger(__name__)

__all__ = ["McpMiddleware", "build_mcp", "outcome_of", "servers_of"]


def build_mcp(servers: Mapping[str, McpServerConfig], workspace: Path) -> McpMiddleware | None:
    """The middleware for a workspace's ``mcp_servers`` (None without any): shared by the session's
    agent and its sub-agents (``mcp_servers.shared_servers``)."""
    if not servers:
        return None
    return McpMiddleware(shared_servers(servers, workspace))


def servers_of(stack: Sequence[AgentMiddleware]) -> McpServers | None:
    """The ``McpServers`` behind a stack's MCP middleware, or None."""
    for mw in stack:
        if isinstance(mw, McpMiddleware):
            return mw.servers
    return None


class McpMiddleware(AgentMiddleware):
    """Offers the MCP servers' tools (see the module). Writes no state of its own; images reach the
    thread's artifacts through the artifacts middleware (what it lends, M3)."""

    def __init__(self, servers: McpServers) -> None:
        self.servers = servers
        self._tools: dict[str, tuple[McpToolInfo, Tool]] = {}
        self._synced: tuple[Any, tuple[McpToolInfo, ...]] | None = None  # (weakref to the agent, its offer)
        self._ensured: Any = None

    # -- hooks ---------------------------------------------------------------------------------------
    async def before_agent(self, input: str, ctx: HookContext) -> str | None:
        await self._ready(ctx)
        return None

    async def on_decision(self, question: Question, decision: dict[str, Any], ctx: HookContext) -> None:
        # A resumed run runs its approved calls before any model call: their tools must be there (a
        # session reopened since the run suspended has not started its servers yet).
        if self._ensured is not ctx.invocation:
            await self._ready(ctx)

    async def sections(self, ctx: HookContext) -> Sequence[Section]:
        """No prompt text: the tools say what they do. The step's tools follow the servers (see the module)."""
        agent = _agent()
        if agent is not None:
            self.sync(agent)
        return ()

    async def _ready(self, ctx: HookContext) -> None:
        self._ensured = ctx.invocation
        rt = _runtime()
        await self.servers.ensure_started(should_stop=(lambda: bool(rt.stop_requested)) if rt is not None else None)
        if rt is not None:
            self.sync(rt.agent)

    # -- the agent's tools ---------------------------------------------------------------------------
    def sync(self, agent: Any) -> None:
        """Make ``agent``'s MCP tools what the servers offer now (a no-op when nothing changed)."""
        offered = self.servers.offered()
        if self._synced is not None and self._synced[0]() is agent and self._synced[1] is offered:
            return
        tool_map: dict[str, Tool] = agent.tool_map
        want = {info.name: self._tool(info) for info in offered}
        for name, tool in list(tool_map.items()):
            if tool.owner is self and name not in want:
                del tool_map[name]
        for name, tool in want.items():
            current = tool_map.get(name)
            if current is tool:
                continue
            if current is not None and current.owner is not self:
                log.warning("MCP tool %s not offered: the agent has a tool of that name already (M10)", name)
                continue
            tool_map[name] = tool
        self._synced = (weakref.ref(agent), offered)

    def _tool(self, info: McpToolInfo) -> Tool:
        cached = self._tools.get(info.name)
        if cached is not None and _same(cached[0], info):
            return cached[1]
        server, name = info.server, info.tool

        async def call(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
            result = await self.servers.call(server, name, args)
            return outcome_of(result, server, name, ctx)

        tool = Tool(info.name, info.description, dict(info.schema), call,
                    changes_outside=not info.read_only, owner=self)
        self._tools[info.name] = (info, tool)
        return tool


def _same(a: McpToolInfo, b: McpToolInfo) -> bool:
    return (a.description, a.read_only, a.tool) == (b.description, b.read_only, b.tool) and a.schema == b.schema


def _runtime() -> Any:
    from workbench.engine.agent import CURRENT_RUN

    return CURRENT_RUN.get()


def _agent() -> Any:
    rt = _runtime()
    return rt.agent if rt is not None else None


# ------------------------------------------------------------------------------------------ results


def outcome_of(result: McpResult, server: str, tool: str, ctx: ToolContext | None = None) -> ToolOutcome:
    """What the model is told of a call's result (see the module)."""
    parts = [t for t in result.texts if t]
    if result.structured is not None and not _text_is(list(result.texts), result.structured):
        parts.append("Structured content (JSON):\n" + json.dumps(result.structured, ensure_ascii=False, default=str))
    for i, (kind, mime, data) in enumerate(result.binaries, 1):
        parts.append(_keep_binary(kind, mime, data, server, tool, i, ctx))
    text = "\n\n".join(parts) if parts else "(the tool returned nothing)"
    if result.is_error:
        return ToolOutcome.error(f"Error from MCP server {server!r} ({tool}): {text}")
    return ToolOutcome.ok(text)


def _text_is(texts: list[str], structured: Any) -> bool:
    """Whether the text parts already say what the structured content does: servers often send both —
    the same JSON twice, or a plain value and the SDK's ``{"result": value}`` around it."""
    joined = "\n".join(texts).strip()
    wrapped = structured.get("result") if isinstance(structured, dict) and len(structured) == 1 else None
    if wrapped is not None and (wrapped == joined or (isinstance(wrapped, str) and wrapped.strip() == joined)):
        return True
    if not joined:
        return False
    try:
        value = json.loads(joined)
    except ValueError:
        return False
    return bool(value == structured or (wrapped is not None and value == wrapped))


def _plain_name(text: str, most: int) -> str:
    """``text`` as a piece of an artifact name: letters, digits, ``.``, ``-`` and ``_`` only, at most ``most``."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)[:most]


def _keep_binary(kind: str, mime: str, data: str, server: str, tool: str, n: int, ctx: ToolContext | None) -> str:
    """A binary part as an artifact of the thread (its content base64, as artifacts keep binaries)."""
    from workbench.harness.artifacts import KEY, ArtifactsMiddleware

    size = decoded_size(data)
    what = {"image": "An image", "audio": "Audio"}.get(kind, "A binary resource")
    actx = ctx.context_for(ArtifactsMiddleware) if ctx is not None else None
    if actx is None:
        return f"{what} ({mime}, {size:,} bytes) was returned; it was not kept (this agent has no artifacts)."
    limit = getattr(actx.owner, "max_bytes", None)
    stored = len(data.encode("ascii", "replace"))
    if limit is not None and stored > limit:  # the artifacts' own cap holds for a server's binaries too
        return (f"{what} ({mime}, {size:,} bytes) was returned; it was not kept: over the artifacts limit "
                f"of {limit:,} bytes.")
    ext = mimetypes.guess_extension(mime, strict=False) or ".bin"
    # a name of its own: providers number calls call_0, call_1 in every message, so the call id alone let a
    # later image replace an earlier one; the server's names are its words, cut to plain characters
    call = _plain_name(ctx.call.id if ctx is not None else "call", 40) or "call"
    step = f"s{ctx.step}-" if ctx is not None else ""
    items = dict(actx.get(KEY) or {})
    base = f"mcp/{_plain_name(server, 40)}/{_plain_name(tool, 60)}-{step}{call}-{n}"
    name, again = f"{base}{ext}", 1
    while name in items:  # never replaces an artifact already kept
        again += 1
        name = f"{base}-{again}{ext}"
    entry = {"content": data, "mime": mime, "size": stored, "source": f"mcp:{server}", "updated": time.time()}
    actx.write(KEY, {**items, name: entry})
    actx.emit("artifact_written", name=name, size=entry["size"], mime=mime, source=entry["source"])
    return (f"{what} ({mime}, {size:,} bytes) was saved as the artifact '{name}'; the person sees it in the "
            "Artifacts panel.")
