"""What the MCP servers give (X2): the value types the Servers panel, the CLI and the middleware share
(``McpServerInfo``, ``McpToolInfo``, ``McpResult``), the names tools are offered under, and a call's
result in plain values. No Qt, no SDK object: everything here is made on the MCP thread from the SDK's
replies and read on any other.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import unicodedata
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from workbench.errors import ToolError
from workbench.terminal_text import escape_code

__all__ = ["MAX_SCHEMA_CHARS", "NAME_RE", "McpCallError", "McpResult", "McpServerInfo", "McpToolInfo", "clean_text",
           "decoded_size", "offered_names", "one_line", "result_of", "tool_infos", "trimmed_schema"]

MAX_DESCRIPTION_CHARS = 4000
"""A tool's description is cut here: a server's essay must not crowd the prompt."""
MAX_SERVER_INFO_CHARS = 200
"""A server's own name and version (``McpServerInfo.server_info``) are cut here."""
MAX_SCHEMA_CHARS = 16_000
"""A tool's input schema, as JSON, may be this long (about 4,000 tokens, four descriptions' worth: a
real tool's schema with a few dozen documented parameters takes 1–10 K). It goes to the model with every
request, so a longer one is trimmed (``trimmed_schema``); one still too long is not offered (X2)."""
MAX_SCHEMA_DESCRIPTION_CHARS = 500
"""In a schema over MAX_SCHEMA_CHARS, each ``description`` and ``title`` is cut here."""
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas",
                          "dependencies"})
"""Schema keywords whose value maps names (a property's, a definition's) to schemas."""
_SCHEMA_DATA = frozenset({"default", "const", "enum", "required", "dependentRequired"})
"""Schema keywords whose value is data (names, values the arguments are checked against or filled
from): kept whole."""
_SCHEMA_DROPPED = frozenset({"examples", "$comment"})
"""Annotation keywords a trimmed schema does without (they never change what is valid)."""
NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
"""A tool name every provider accepts (OpenAI's rule, the strictest)."""


class McpCallError(ToolError):
    """A call the model made to an MCP tool failed (server not running, crashed, timed out, refused):
    the message names the server and what to do; the model sees it as the tool's error."""


@dataclass(frozen=True)
class McpToolInfo:
    """One tool of a server, as offered: ``name`` is ``mcp__<server>__<tool>`` (sanitised, see
    ``offered_names``), ``tool`` the server's own name. ``enabled`` is the person's switch (off = not
    offered); ``problem`` says why it cannot be offered at all (an input schema that is not JSON Schema,
    or one too long even trimmed); ``note`` what was changed to offer it (its schema trimmed)."""

    server: str
    name: str
    tool: str
    description: str
    schema: Mapping[str, Any]
    read_only: bool
    destructive: bool = False
    enabled: bool = True
    problem: str | None = None
    note: str | None = None  # what the workbench changed in what the server gave (a schema trimmed)

    @property
    def offered(self) -> bool:
        return self.enabled and self.problem is None


@dataclass(frozen=True)
class McpServerInfo:
    """A snapshot of one configured server (what the Servers panel and ``workbench mcp`` show)."""

    name: str
    transport: str  # stdio | http
    target: str  # the command line or the URL, as configured (``${VAR}`` unresolved)
    enabled: bool  # workbench.yaml's ``enabled``
    status: str  # starting | ready | failed | stopped
    error: str | None = None
    log: tuple[str, ...] = ()
    tools: tuple[McpToolInfo, ...] = ()
    pid: int | None = None
    restarts: int = 0
    retry_at: float | None = None  # when the next automatic start is due (wall clock), while failed
    server_info: str | None = None  # the server's own name and version
    note: str | None = None  # why it does not start (disabled, not trusted)

    def __post_init__(self) -> None:
        # X5: the server's own name and version are the server's words: on one line, with no control
        # or format character (an ANSI escape, a bidi override) left to reach a terminal or the panel.
        if self.server_info is not None:
            object.__setattr__(self, "server_info", one_line(self.server_info, MAX_SERVER_INFO_CHARS) or None)

    @property
    def offered(self) -> tuple[McpToolInfo, ...]:
        return tuple(t for t in self.tools if t.offered)


@dataclass(frozen=True)
class McpResult:
    """A tool call's result in plain values: texts, binary parts ``(kind, mime, base64)``, structured
    content, and whether the server flagged it an error."""

    texts: tuple[str, ...] = ()
    binaries: tuple[tuple[str, str, str], ...] = ()
    structured: Any = None
    is_error: bool = False


# ------------------------------------------------------------------------------------------ naming


def offered_names(server: str, tools: Iterable[str]) -> dict[str, str]:
    """``{server's tool name: offered name}``: ``mcp__<server>__<tool>``, valid for every provider
    (``^[A-Za-z0-9_-]{1,64}$``). A name with other characters has them replaced by ``_``; one that is
    changed or too long is cut and ends in ``_`` + 6 hex digits of its original's hash, so it stays the
    same from one start to the next (rules and history keep meaning the same tool); two that still meet
    get more of the hash. Deterministic: the names are given out in sorted order."""
    prefix = f"mcp__{server}__"
    room = 64 - len(prefix)
    out: dict[str, str] = {}
    taken: set[str] = set()
    for tool in sorted(set(tools)):
        digest = hashlib.sha256(tool.encode("utf-8", "surrogatepass")).hexdigest()
        base = re.sub(r"[^A-Za-z0-9_-]", "_", tool)
        name = prefix + base
        n = 6
        if base != tool or not tool or len(name) > 64:
            name = prefix + base[: room - n - 1] + "_" + digest[:n]
        while name in taken:
            n += 2
            name = prefix + base[: max(0, room - n - 1)] + "_" + digest[:n]
        taken.add(name)
        out[tool] = name
    return out


def _schema(raw: Any) -> tuple[dict[str, Any], str | None]:
    """The tool's input schema as an object schema, and a problem if it is not valid JSON Schema."""
    schema = dict(raw) if isinstance(raw, Mapping) else {}
    schema.setdefault("type", "object")
    if schema.get("type") == "object":
        schema.setdefault("properties", {})
    try:
        import jsonschema

        jsonschema.Draft202012Validator.check_schema(schema)
    except Exception as e:  # noqa: BLE001 - SchemaError, or a schema too odd to check
        return schema, f"its input schema is not valid JSON Schema ({one_line(getattr(e, 'message', str(e)))})"
    if schema.get("type") != "object":
        return schema, f"its input schema is of type {schema.get('type')!r}, not an object"
    ref = _unresolvable_ref(schema)
    if ref is not None:
        return schema, (f"its input schema has a $ref that points to nothing in the schema ({one_line(ref, 100)!r}); "
                        "a schema's references are never fetched")
    return schema, None


def _unresolvable_ref(schema: dict[str, Any]) -> str | None:
    """The first ``$ref``/``$dynamicRef`` of ``schema`` that cannot be resolved, each looked up once
    the way the engine's check of a call would (``engine.tools.validate_call``), in a registry that
    never fetches: only the schema itself and the drafts' own meta-schemas (X2, M5). None when all
    resolve. A schema too deep to walk, or one ``referencing`` cannot read, names itself."""
    from jsonschema.validators import SPECIFICATIONS  # the drafts' meta-schemas, shipped: no fetch
    from referencing import Registry
    from referencing.exceptions import Unresolvable
    from referencing.jsonschema import DRAFT202012

    root = DRAFT202012.create_resource(schema)
    resolver = SPECIFICATIONS.combine(Registry()).resolver_with_root(root)
    stack = [(root, resolver)]
    try:
        while stack:
            resource, resolver = stack.pop()
            contents = resource.contents
            if isinstance(contents, Mapping):
                for key in ("$ref", "$dynamicRef"):
                    ref = contents.get(key)
                    if isinstance(ref, str):
                        try:
                            resolver.lookup(ref)
                        except Unresolvable:
                            return ref
            for sub in resource.subresources():
                stack.append((sub, resolver.in_subresource(sub)))
    except Exception as e:  # noqa: BLE001 - an odd $id, a resource referencing cannot read
        return f"(the schema cannot be read: {one_line(str(e) or type(e).__name__, 80)})"
    return None


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _trim(node: Any) -> Any:
    """A schema with every ``description``/``title`` cut to MAX_SCHEMA_DESCRIPTION_CHARS and its
    ``examples``/``$comment`` left out, at every depth; what it accepts is unchanged (names of properties
    and definitions, and data such as ``enum``, are never touched)."""
    return _texts(node, lambda _key, text: _cut(text, MAX_SCHEMA_DESCRIPTION_CHARS), _SCHEMA_DROPPED)


def _texts(node: Any, text: Callable[[str, str], str], dropped: Collection[str] = ()) -> Any:
    """``node`` with each ``description``/``title`` string replaced by ``text(key, value)`` and the keys in
    ``dropped`` left out, at every depth; names of properties and definitions, and data such as ``enum``
    or ``default``, are never touched."""
    if isinstance(node, list):
        return [_texts(v, text, dropped) for v in node]
    if not isinstance(node, Mapping):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in dropped:
            continue
        if key in ("description", "title") and isinstance(value, str):
            out[key] = text(key, value)
        elif key in _SCHEMA_MAPS and isinstance(value, Mapping):
            out[key] = {name: _texts(sub, text, dropped) for name, sub in value.items()}
        elif key in _SCHEMA_DATA:
            out[key] = value
        else:
            out[key] = _texts(value, text, dropped)
    return out


def _clean_schema(node: Any) -> Any:
    """A schema with every ``description``/``title`` cleaned (``clean_text``), at every depth; nothing
    else changes (names of properties, ``enum``, ``default`` and other data are the server's to keep)."""
    return _texts(node, lambda key, text: clean_text(text, lines=key == "description"))


def _size(schema: Any) -> int:
    return len(json.dumps(schema, ensure_ascii=False, separators=(",", ":"), default=str))


def trimmed_schema(schema: dict[str, Any]) -> tuple[dict[str, Any], str | None, str | None]:
    """X2, the prompt's budget: ``(schema, note, problem)``. A schema up to MAX_SCHEMA_CHARS (as compact
    JSON) is kept as it is; a longer one is offered trimmed (``_trim``) with a note saying so, or, if
    still too long, not at all (the problem says why). Both are shown in the Servers panel."""
    size = _size(schema)
    if size <= MAX_SCHEMA_CHARS:
        return schema, None, None
    trimmed = _trim(schema)
    cut = _size(trimmed)
    if cut > MAX_SCHEMA_CHARS:
        return schema, None, (f"its input schema is {size:,} characters, over the {MAX_SCHEMA_CHARS:,}-character "
                              f"limit of one tool's schema even with its descriptions cut ({cut:,})")
    return trimmed, (f"its input schema ({size:,} characters) is over the {MAX_SCHEMA_CHARS:,}-character limit "
                     f"of one tool's schema: it is offered with each description cut to "
                     f"{MAX_SCHEMA_DESCRIPTION_CHARS} characters and no examples ({cut:,} characters)"), None


def one_line(text: str, limit: int = 300) -> str:
    """``text`` (a server's words) on one line of at most ``limit`` characters, with no control or format
    character left (``clean_text``)."""
    text = " ".join(str(text).split())
    text = text if len(text) <= limit else text[: limit - 1] + "…"
    if not text.isprintable():
        text = clean_text(text)
        text = text if len(text) <= limit else text[: limit - 1] + "…"
    return text


_KEPT_FORMAT = frozenset("\u200c\u200d")
"""Format characters a text needs: the zero-width non-joiner and joiner (Persian, Indic scripts, emoji)."""


def clean_text(text: str, *, lines: bool = False) -> str:
    """A server's text made safe to show in a terminal or the window and to give the model (X2, X5):
    every C0 and C1 control character and DEL, every format character (bidi embeddings, overrides and
    isolates, zero-width spaces, the byte-order mark, tag characters) but the joiners, and every lone
    surrogate becomes a visible escape (``\\x1b``, ``\\u202e``), so no escape sequence or reordering a
    server chose reaches a screen, and no hidden text reaches the model unseen. Whitespace controls
    (tab, CR, vertical tab, form feed, the line and paragraph separators) become a space; with
    ``lines`` (a description) a newline and a tab are kept, and CR, CRLF and the separators are
    newlines."""
    if text.isprintable():
        return text
    if lines:
        text = text.replace("\r\n", "\n")
    out: list[str] = []
    for ch in text:
        if ch.isprintable() or ch in _KEPT_FORMAT:
            out.append(ch)
            continue
        category = unicodedata.category(ch)
        if lines and ch in "\n\t":
            out.append(ch)
        elif lines and (ch == "\r" or category in ("Zl", "Zp")):
            out.append("\n")
        elif ch in "\t\n\r\v\f" or category in ("Zl", "Zp"):
            out.append(" ")
        elif category in ("Cc", "Cf", "Cs"):
            out.append(escape_code(ord(ch)))  # whitespace controls were handled above: never a named escape
        else:  # a space other than ASCII's (Zs), private use, unassigned: shown as they are
            out.append(ch)
    return "".join(out)


def tool_infos(server: str, listed: list[Any]) -> tuple[McpToolInfo, ...]:
    names = offered_names(server, [t.name for t in listed])
    out = []
    for t in listed:
        schema, problem = _schema(getattr(t, "input_schema", None))
        note = None
        if problem is None:
            try:
                schema = _clean_schema(schema)
            except RecursionError:  # deeper than check_schema went: not reached in practice
                problem = "its input schema is nested too deeply to read"
        if problem is None:
            schema, note, problem = trimmed_schema(schema)
        ann = getattr(t, "annotations", None)
        desc = str(getattr(t, "description", None) or getattr(t, "title", None) or "").strip()
        # X2, X5: the server's words, cut, with no control or format character left (clean_text)
        desc = _cut(clean_text(_cut(desc, MAX_DESCRIPTION_CHARS), lines=True).strip(), MAX_DESCRIPTION_CHARS)
        out.append(McpToolInfo(server, names[t.name], t.name, desc or f"The {t.name} tool of MCP server {server}.",
                               schema, bool(getattr(ann, "read_only_hint", False)),
                               bool(getattr(ann, "destructive_hint", False)), True, problem, note))
    return tuple(sorted(out, key=lambda i: i.name))


def result_of(raw: Any) -> McpResult:
    """Plain values from a ``CallToolResult`` (made on the MCP thread: no SDK object leaves it)."""
    texts: list[str] = []
    binaries: list[tuple[str, str, str]] = []
    for block in getattr(raw, "content", None) or ():
        kind = getattr(block, "type", "")
        if kind == "text":
            texts.append(str(block.text))
        elif kind in ("image", "audio"):
            binaries.append((kind, str(getattr(block, "mime_type", "") or "application/octet-stream"), str(block.data)))
        elif kind == "resource":
            res = block.resource
            if getattr(res, "text", None) is not None:
                texts.append(str(res.text))
            else:
                binaries.append(("resource", str(getattr(res, "mime_type", None) or "application/octet-stream"),
                                 str(getattr(res, "blob", ""))))
        elif kind == "resource_link":
            texts.append(f"Resource: {getattr(block, 'name', '')} <{getattr(block, 'uri', '')}>")
        else:
            texts.append(json.dumps(block.model_dump(mode="json", by_alias=True), ensure_ascii=False))
    return McpResult(tuple(texts), tuple(binaries), getattr(raw, "structured_content", None),
                     bool(getattr(raw, "is_error", False)))


def decoded_size(data: str) -> int:
    """Bytes a base64 text stands for (0 when it is not base64)."""
    try:
        return len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        return 0
