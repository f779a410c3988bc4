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

The listing is bounded in tokens, not only in names (A2): a name of 200 rare characters costs about 600
tokens, so 100 of them would push the prompt sections over the engine's ``max_prompt_section_tokens``
and fail every later step of the thread. Each listed name is cut at ``MAX_LISTED_NAME_TOKENS`` (marked
``…``; ``read_artifact`` takes a cut name as listed when only one artifact is listed so) and the listing
stops at ``max_section_tokens`` with "… and N more".

A sub-agent's artifacts merge under ``<agent>_<n>/`` (A3) but never replace an artifact that came from
elsewhere (the agent's own ``write_artifact`` may use any name, that namespace included): a name taken by
another source makes the merged artifact take the first free ``<stem> (2)<ext>``, ``(3)``, …, and the
merge returns the names it used. The same task merging again (it was continued) replaces its own.
"""

from __future__ import annotations

import logging
import mimetypes
import posixpath
import time
from collections.abc import Iterable, Mapping
from typing import Any

from workbench.engine.middleware import AgentMiddleware, HookContext, Section, ToolContext
from workbench.engine.tokens import truncate_to_tokens
from workbench.engine.tools import Tool, schema
from workbench.errors import ToolError
from workbench.harness.todos import fit_lines_to_tokens

log = logging.getLogger(__name__)

__all__ = ["KEY", "ArtifactsMiddleware", "guess_mime", "merge_subagent_artifacts"]

KEY = "artifacts"
DEFAULT_MIME = "text/plain"
MAX_NAME_CHARS = 200
# A name of 200 ASCII characters is about 50 tokens: only names of costly characters are cut.
MAX_LISTED_NAME_TOKENS = 64
CUT_MARK = "…"
# 100 listed names of ordinary length are about 2,000 tokens; the rest of the engine's
# max_prompt_section_tokens (24,000) is for AGENTS.md, skills and the plan.
DEFAULT_MAX_SECTION_TOKENS = 3000
MAX_KNOWN_IN_ERROR = 20


def guess_mime(name: str) -> str:
    """The mime type for a name by its extension, ``text/plain`` when unknown."""
    mime, _ = mimetypes.guess_type(name, strict=False)
    return mime or DEFAULT_MIME


class ArtifactsMiddleware(AgentMiddleware):
    """The artifact tools and the per-step listing (A1–A3)."""

    writes = frozenset({KEY})
    lends = frozenset({KEY})  # M3: merge_subagent_artifacts, from another middleware's tool
    state_defaults = {KEY: {}}

    def __init__(self, readonly: bool = False, *, max_bytes: int = 1_000_000, max_listed: int = 100,
                 max_section_tokens: int = DEFAULT_MAX_SECTION_TOKENS) -> None:
        if max_section_tokens < 1:
            raise ValueError("max_section_tokens must be at least 1")
        self.readonly = readonly
        self.max_bytes = max_bytes
        self.max_listed = max_listed
        self.max_section_tokens = max_section_tokens

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
        name = _resolve(items, args["name"].strip())
        if name not in items:
            known = ", ".join(_listed_name(n) for n in sorted(items)[:MAX_KNOWN_IN_ERROR]) or "none yet"
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
        previous = _artifacts(ctx).get(name)
        _put(ctx, {name: _entry(content, mime, "agent")})
        if previous is None:
            return f"Wrote artifact '{name}' ({mime}, {size} bytes)."
        source = previous.get("source", "agent") if isinstance(previous, Mapping) else "agent"
        whose = f"; the one replaced came from {source}" if source != "agent" else ""
        return f"Replaced artifact '{name}' ({mime}, {size} bytes{whose})."

    async def sections(self, ctx: HookContext) -> list[Section]:
        """A2: names, types and sizes of the thread's artifacts, never their content; at most
        ``max_listed`` names, each cut at ``MAX_LISTED_NAME_TOKENS``, the whole at most
        ``max_section_tokens``."""
        items = _artifacts(ctx)
        if not items:
            return []
        how = "read one with read_artifact" + ("" if self.readonly else "; write_artifact creates or replaces one")
        names = sorted(items)
        lines: list[str] = []
        any_cut = False
        for name in names[: self.max_listed]:
            a = items[name] if isinstance(items[name], Mapping) else {}
            listed = _listed_name(name)
            any_cut = any_cut or listed != name
            lines.append(f"- {listed} — {_cut_chars(str(a.get('mime', DEFAULT_MIME)), 100)}, "
                         f"{_int(a.get('size', 0))} bytes")
        if any_cut:
            how += f"; a name cut with {CUT_MARK} is read by giving it as listed"
        head = f"## Artifacts\nThis thread's artifacts (name — type, size); {how}."
        text, _shown = fit_lines_to_tokens(head, lines, self.max_section_tokens, lambda n: f"- … and {n} more",
                                           hidden=max(len(names) - self.max_listed, 0))
        return [Section("artifacts", text, cacheable=False)]


def merge_subagent_artifacts(ctx: HookContext, agent_name: str, n: int, artifacts: Mapping[str, Any]) -> list[str]:
    """Merge a sub-agent's artifacts under ``<agent>_<n>/<name>`` (A3); returns the names used, one per
    artifact in the order given.

    ``artifacts`` maps names to content strings or to entries like the state's (``content``, ``mime``).
    A name another source holds (the agent's own write, an MCP result, another task) is never replaced:
    the artifact takes the first free ``<stem> (k)<ext>`` instead (see the module docstring). The write is
    made on behalf of the stack's ArtifactsMiddleware; without one nothing is merged.
    """
    actx = _artifacts_context(ctx)
    if actx is None:
        log.warning("sub-agent %s_%s returned %d artifact(s), but the stack has no ArtifactsMiddleware",
                    agent_name, n, len(artifacts))
        return []
    source = f"{agent_name}_{n}"
    existing = _artifacts(actx)
    merged: dict[str, dict[str, Any]] = {}
    for name, value in artifacts.items():
        content = value.get("content", "") if isinstance(value, Mapping) else value
        mime = (value.get("mime") if isinstance(value, Mapping) else None) or guess_mime(str(name))
        merged[_free_name(f"{source}/{name}", source, existing, merged)] = _entry(str(content), str(mime), source)
    _put(actx, merged)
    return list(merged)


# -- helpers ------------------------------------------------------------------------------------------------
def _free_name(wanted: str, source: str, existing: Mapping[str, Any], used: Iterable[str]) -> str:
    """``wanted``, or the first ``<stem> (k)<ext>`` that neither another source's artifact nor this merge
    (``used``) holds: a merge replaces only what the same task merged before."""
    used = set(used)
    stem, ext = posixpath.splitext(wanted)
    for k in range(1, len(existing) + len(used) + 2):
        name = wanted if k == 1 else f"{stem} ({k}){ext}"
        held = existing.get(name)
        if name not in used and (held is None or (isinstance(held, Mapping) and held.get("source") == source)):
            return name
    raise AssertionError("unreachable: more candidates than names taken")


def _listed_name(name: str) -> str:
    """A name as listed: cut at ``MAX_LISTED_NAME_TOKENS`` and marked (A2)."""
    shown, cut = truncate_to_tokens(name, MAX_LISTED_NAME_TOKENS)
    return shown + CUT_MARK if cut else name


def _resolve(items: Mapping[str, Any], name: str) -> str:
    """The artifact a name as listed stands for: itself, or the one artifact listed as that cut name."""
    if name in items or not name.endswith(CUT_MARK):
        return name
    prefix = name[: -len(CUT_MARK)]
    matches = [n for n in items if n.startswith(prefix) and _listed_name(n) == name]
    return matches[0] if len(matches) == 1 else name


def _cut_chars(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + CUT_MARK


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


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
