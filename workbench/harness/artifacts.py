"""Artifacts (A1–A3): named documents the agent writes for the user, stored with the thread.

State key ``artifacts``: ``{name: {"content": str, "mime": str, "size": int, "source": str,
"updated": float}}``. ``size`` is the UTF-8 byte length of ``content``; ``source`` is ``"agent"`` or
``"<agent>_<n>"`` for artifacts merged from a sub-agent's n-th invocation (under ``<agent>_<n>/<name>``).
The key is checkpointed with the thread (A3), so artifacts survive restarts.

Tools: ``read_artifact(name)`` and, unless ``readonly``, ``write_artifact(name, content, mime?)``;
writing an existing name replaces it, and the mime type is guessed from the name when absent
(``text/plain`` when nothing matches). Every model step's system prompt lists the artifacts by name,
type and size, never their content (A2). Each write emits a durable ``artifact_written``.

Binary content (e.g. an ``image/png``) is given base64-encoded with its mime type; it is stored and
returned exactly as given (``size`` is then the size of the base64 text).
"""

from __future__ import annotations

import logging
import mimetypes
import time
from collections.abc import Mapping
from typing import Any

from workbench.engine.middleware import AgentMiddleware, HookContext, Section, ToolContext
from workbench.engine.tools import Tool, schema
from workbench.errors import ToolError

log = logging.getLogger(__name__)

__all__ = ["KEY", "ArtifactsMiddleware", "guess_mime", "merge_subagent_artifacts"]

KEY = "artifacts"
DEFAULT_MIME = "text/plain"
MAX_NAME_CHARS = 200


def guess_mime(name: str) -> str:
    """The mime type for a name by its extension, ``text/plain`` when unknown."""
    mime, _ = mimetypes.guess_type(name, strict=False)
    return mime or DEFAULT_MIME


class ArtifactsMiddleware(AgentMiddleware):
    """The artifact tools and the per-step listing (A1–A3)."""

    writes = frozenset({KEY})
    lends = frozenset({KEY})  # M3: merge_subagent_artifacts, from another middleware's tool
    state_defaults = {KEY: {}}

    def __init__(self, readonly: bool = False, *, max_bytes: int = 1_000_000, max_listed: int = 100) -> None:
        self.readonly = readonly
        self.max_bytes = max_bytes
        self.max_listed = max_listed

    def tools(self) -> list[Tool]:
        read = Tool(
            "read_artifact",
            "Read an artifact of this thread by name and return its content.",
            schema({"name": {"type": "string", "description": "The artifact's name, as listed."}}, ["name"]),
            self._read,
            lock=KEY,  # a read after a write in the same message sees the write (R4)
            changes_outside=False,
        )
        if self.readonly:
            return [read]
        write = Tool(
            "write_artifact",
            "Create or replace an artifact of this thread (a document for the user). Writing an existing "
            "name replaces it. mime is guessed from the name when omitted.",
            schema(
                {
                    "name": {"type": "string", "description": "e.g. report.md"},
                    "content": {"type": "string", "description": "The whole content (base64 for binary)."},
                    "mime": {"type": "string", "description": "e.g. text/markdown, image/png"},
                },
                ["name", "content"],
            ),
            self._write,
            lock=KEY,
            changes_outside=False,
        )
        return [read, write]

    async def _read(self, args: dict[str, Any], ctx: ToolContext) -> str:
        items = _artifacts(ctx)
        name = args["name"].strip()
        if name not in items:
            known = ", ".join(sorted(items)[:20]) or "none yet"
            raise ToolError(f"no artifact named '{name}'. Artifacts: {known}")
        return str(items[name].get("content", ""))

    async def _write(self, args: dict[str, Any], ctx: ToolContext) -> str:
        name = _check_name(args["name"])
        content = args["content"]
        mime = args.get("mime") or guess_mime(name)
        if "/" not in mime or len(mime) > 100:
            raise ToolError(f"mime must look like 'type/subtype' (e.g. text/markdown), got {mime!r}")
        size = _size(content)
        if size > self.max_bytes:
            raise ToolError(f"artifact '{name}' is {size} bytes, over the limit of {self.max_bytes}: split it")
        replaced = name in _artifacts(ctx)
        _put(ctx, {name: _entry(content, mime, "agent")})
        return f"{'Replaced' if replaced else 'Wrote'} artifact '{name}' ({mime}, {size} bytes)."

    async def sections(self, ctx: HookContext) -> list[Section]:
        """A2: names, types and sizes of the thread's artifacts, never their content."""
        items = _artifacts(ctx)
        if not items:
            return []
        how = "read one with read_artifact" + ("" if self.readonly else "; write_artifact creates or replaces one")
        lines = [f"## Artifacts\nThis thread's artifacts (name — type, size); {how}."]
        names = sorted(items)
        for name in names[: self.max_listed]:
            a = items[name]
            lines.append(f"- {name} — {a.get('mime', DEFAULT_MIME)}, {int(a.get('size', 0))} bytes")
        if len(names) > self.max_listed:
            lines.append(f"- … and {len(names) - self.max_listed} more")
        return [Section("artifacts", "\n".join(lines), cacheable=False)]


def merge_subagent_artifacts(ctx: HookContext, agent_name: str, n: int, artifacts: Mapping[str, Any]) -> list[str]:
    """Merge a sub-agent's artifacts under ``<agent>_<n>/<name>`` (A3); returns the merged names.

    ``artifacts`` maps names to content strings or to entries like the state's (``content``, ``mime``).
    The write is made on behalf of the stack's ArtifactsMiddleware; without one nothing is merged.
    """
    actx = _artifacts_context(ctx)
    if actx is None:
        log.warning("sub-agent %s_%s returned %d artifact(s), but the stack has no ArtifactsMiddleware",
                    agent_name, n, len(artifacts))
        return []
    source = f"{agent_name}_{n}"
    merged: dict[str, dict[str, Any]] = {}
    for name, value in artifacts.items():
        content = value.get("content", "") if isinstance(value, Mapping) else value
        mime = (value.get("mime") if isinstance(value, Mapping) else None) or guess_mime(str(name))
        merged[f"{source}/{name}"] = _entry(str(content), str(mime), source)
    _put(actx, merged)
    return list(merged)


# -- helpers ------------------------------------------------------------------------------------------------
def _artifacts(ctx: HookContext) -> dict[str, dict[str, Any]]:
    value = ctx.get(KEY) or {}
    return dict(value) if isinstance(value, Mapping) else {}


def _entry(content: str, mime: str, source: str) -> dict[str, Any]:
    return {"content": content, "mime": mime, "size": _size(content), "source": source, "updated": time.time()}


def _put(ctx: HookContext, entries: dict[str, dict[str, Any]]) -> None:
    """Write entries (a new dict each time) and announce each one without its content."""
    ctx.write(KEY, {**_artifacts(ctx), **entries})
    for name, e in entries.items():
        ctx.emit("artifact_written", name=name, size=e["size"], mime=e["mime"], source=e["source"])


def _size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _check_name(name: str) -> str:
    name = name.strip()
    if not name:
        raise ToolError("an artifact needs a non-empty name, e.g. report.md")
    if len(name) > MAX_NAME_CHARS:
        raise ToolError(f"artifact names are at most {MAX_NAME_CHARS} characters; got {len(name)}")
    if any(ord(c) < 32 for c in name):
        raise ToolError(f"artifact name {name!r} contains control characters")
    return name


def _artifacts_context(ctx: HookContext) -> HookContext | None:
    """A context owned by the stack's ArtifactsMiddleware, whoever's context ``ctx`` is."""
    return ctx.context_for(ArtifactsMiddleware)
