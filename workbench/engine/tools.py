"""Tools: a name, a JSON schema, an async function, an optional lock, and the resources it touches."""

from __future__ import annotations

import json
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal

from workbench.engine.messages import ToolCall, ToolSpec

if TYPE_CHECKING:
    from workbench.engine.middleware import ToolContext


@dataclass(frozen=True)
class ToolOutcome:
    """What a tool call returns to the model. ``error`` outcomes are shown as errors (M5, M6)."""

    status: Literal["ok", "error", "denied", "rejected", "stopped"]
    content: str
    #: Counts and statuses the durable ``tool_call_finished`` event carries besides the status (E6: a
    #: command's exit code and duration) — never content (M8). Not stored with the result.
    details: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @classmethod
    def ok(cls, content: str) -> ToolOutcome:
        return cls("ok", content)

    @classmethod
    def error(cls, content: str) -> ToolOutcome:
        # "Denied: …" errors come from permission rules (P3); they are reported with status denied.
        return cls("denied" if content.startswith("Denied:") else "error", content)

    @property
    def is_error(self) -> bool:
        return self.status != "ok"


@dataclass(frozen=True)
class NeedsApproval:
    """Returned by a ``wrap_tool_call`` to ask the user before the call runs (M6, P3)."""

    reason: str
    rule: str | None = None
    #: The allow rules an "always" answer would save, as text ("allow write /project/a.py"): shown
    #: with the approval so the person sees the scope before choosing it (Q3).
    always: tuple[str, ...] = ()
    #: More for the question's payload, beside tool, arguments and reason (E2: a command's folder,
    #: whether a sandbox is on, the rules it could make).
    details: Mapping[str, Any] = field(default_factory=dict, compare=False)


class Fatal(Exception):
    """Raised (or returned) by a hook to fail the run with this message (M6)."""


Resource = tuple[str, str]  # (action, resource): ("invoke", "write_file"), ("write", "/project/a.py")
ToolFunc = Callable[[dict[str, Any], "ToolContext"], Awaitable["ToolOutcome | str"]]


@dataclass(frozen=True)
class Tool:
    """A tool the model may call.

    ``lock``: calls holding the same lock run one after another in message order (R4).
    ``resources``: the (action, resource) pairs a call touches, for permissions (P2); every tool also
    has ("invoke", its name). ``path_args`` names arguments that are virtual paths (read or write).
    """

    name: str
    description: str
    parameters: dict[str, Any]
    func: ToolFunc
    lock: str | None = None
    reads: Sequence[str] = ()
    writes_paths: Sequence[str] = ()
    changes_outside: bool = True  # False for tools that only read; the default permission treats them as reads
    owner: Any = field(default=None, compare=False)

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, self.description, self.parameters)

    @property
    def server_labelled(self) -> bool:
        """Whether ``changes_outside`` is a claim from outside the workbench: an MCP server's tool,
        read-only because the server annotates it so (``readOnlyHint``, X2) — named ``mcp__<server>__<tool>``
        and owned by the MCP middleware (``harness/mcp.py``). The workbench's own tools (files, todos,
        artifacts, the task tools) are labelled in its own code."""
        if self.name.startswith("mcp__"):
            return True
        owner = type(self.owner).__module__ if self.owner is not None else ""
        return owner == "workbench.harness.mcp" or owner.startswith("workbench.harness.mcp_")

    @property
    def only_reads(self) -> bool:
        """The workbench's own word that a call changes nothing outside the run: running it again
        after a crash is harmless (R9). A server's label is not enough: it may lie."""
        return not self.changes_outside and not self.server_labelled

    def resources(self, arguments: dict[str, Any]) -> list[Resource]:
        out: list[Resource] = [("invoke", self.name)]
        for action, names in (("read", self.reads), ("write", self.writes_paths)):
            for arg in names:
                value = arguments.get(arg, self._default(arg))  # an omitted path is its default (P2)
                if isinstance(value, str):
                    out.append((action, value))
        return out

    def _default(self, arg: str) -> Any:
        return (self.parameters.get("properties", {}).get(arg) or {}).get("default")


def validate_call(tool: Tool | None, call: ToolCall, known: Sequence[str]) -> str | None:
    """Return an error message for the model when a call can't run (M5), else None.

    The tool's schema may come from an MCP server (X2), so checking the arguments against it is bounded
    work on untrusted input (F3, R6): its regular expressions run in RE2 (linear time, ``_linear_class``),
    never Python's ``re``; its ``$ref``s are looked up in the schema itself, never fetched; and a schema
    that cannot be checked at all (a ``$ref`` to nowhere, a loop of ``$ref``s) is the call's error, the
    model's to see, never a failed run (M5)."""
    if tool is None:
        names = ", ".join(sorted(known)) or "none"
        return f"Error: unknown tool '{call.name}'. Available tools: {names}."
    if call.arguments is None:
        raw = call.raw_arguments if len(call.raw_arguments) <= 200 else call.raw_arguments[:200] + "…"
        return f"Error: the arguments for '{call.name}' are not a valid JSON object: {raw!r}. Send a JSON object."
    _WORK.left = MAX_CHECK_STEPS + STEPS_PER_VALUE * _values(call.arguments)
    try:
        validator = _validator(tool)
        errors = sorted(validator.iter_errors(call.arguments), key=lambda e: list(e.absolute_path))
    except Exception as e:  # noqa: BLE001 - an unresolvable $ref, a $ref loop (RecursionError), an odd schema
        return f"Error: the input schema of '{call.name}' cannot be checked: {_reason(e)}"
    finally:
        _WORK.left = None
    if errors:
        parts = []
        for e in errors[:5]:
            where = "/".join(str(p) for p in e.absolute_path) or "(arguments)"
            parts.append(f"{where}: {e.message}")
        return f"Error: invalid arguments for '{call.name}': " + "; ".join(parts)
    return None


def _reason(exc: BaseException) -> str:
    """One line saying why a schema could not be checked (a referencing error names the ``$ref``)."""
    if isinstance(exc, RecursionError):
        return "it refers to itself without end (a loop of $ref)"
    if isinstance(exc, _TooMuchWork):
        return ("checking these arguments against it takes too long (the schema branches at every level, "
                "as a chain of anyOf/allOf/oneOf of $refs does); the call was not made")
    cause = exc.__cause__ if exc.__cause__ is not None else exc
    ref = getattr(cause, "ref", None)
    if isinstance(ref, str):
        anchor = getattr(cause, "anchor", None)
        if type(cause).__name__ == "PointerToNowhere":  # its ref is the pointer: "/$defs/missing"
            ref = "#" + ref
        elif isinstance(anchor, str) and not ref.endswith("#" + anchor):
            ref = f"{ref}#{anchor}"
        shown = ref if len(ref) <= 100 else ref[:99] + "…"
        return f"its $ref {shown!r} points to nothing in the schema (a schema's references are never fetched)"
    text = " ".join(str(getattr(exc, "message", "") or exc or type(exc).__name__).split())
    return text if len(text) <= 300 else text[:299] + "…"


_VALIDATORS: dict[int, tuple[Tool, Any]] = {}


def _validator(tool: Tool) -> Any:
    """One compiled validator per tool (building one costs more than validating a call)."""
    entry = _VALIDATORS.get(id(tool))
    if entry is None or entry[0] is not tool:
        from referencing import Registry

        cls = _linear_class("patternProperties" in json.dumps(tool.parameters, default=str))
        # Registry(): a $ref is looked up in the schema (and the drafts' own meta-schemas) only, never
        # retrieved from the network or a file; no format checker (``format`` is an annotation here).
        entry = (tool, cls(tool.parameters, registry=Registry(), format_checker=None))
        _VALIDATORS[id(tool)] = entry
    return entry[1]


# ----------------------------------------------------------------- bounded work (F3, R6)

MAX_CHECK_STEPS = 10_000
"""Checking one call's arguments may take this many steps (subschemas applied to a value), plus
STEPS_PER_VALUE for each value in the arguments: a real schema applies a handful of subschemas to each
value, so only a schema whose work grows faster than its arguments reaches it — a chain of ``anyOf``
of two ``$ref``s, 30 levels deep and 2 KB long, asks for 2**30 steps (16 levels took 17 s on the
engine's loop). Over it, the call is the tool's error. A step costs 10–50 µs."""
STEPS_PER_VALUE = 100

_WORK = threading.local()  # .left: the steps the call being checked on this thread may still take


class _TooMuchWork(Exception):
    """Raised inside jsonschema when a call's check runs out of steps (``MAX_CHECK_STEPS``)."""


def _values(arguments: Any) -> int:
    """How many values (objects, arrays, strings, numbers …) the arguments hold, at every depth."""
    count, stack = 0, [arguments]
    while stack:
        value = stack.pop()
        count += 1
        if isinstance(value, Mapping):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return count


def _step() -> None:
    left = getattr(_WORK, "left", None)
    if left is not None:
        if left <= 0:
            raise _TooMuchWork
        _WORK.left = left - 1


def _canonical(value: Any) -> Any:
    """``value`` as a hashable key equal for values JSON Schema calls equal: ``1`` and ``1.0`` alike,
    ``true`` and ``1`` not, objects whatever their keys' order (jsonschema's ``equal``)."""
    if isinstance(value, bool):
        return (1, value)
    if isinstance(value, (int, float)):
        return (2, value)
    if isinstance(value, str):
        return (3, value)
    if isinstance(value, Mapping):
        return (4, frozenset((k, _canonical(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return (5, tuple(_canonical(v) for v in value))
    try:
        hash(value)
    except TypeError:
        return (6, id(value))
    return (0, value)


# ----------------------------------------------------------------- linear-time regular expressions (F3)

_LINEAR: dict[bool, Any] = {}


@lru_cache(maxsize=512)
def _rx(pattern: Any) -> Any:
    """``pattern`` compiled by RE2 (linear time in the text it is matched against), or None when RE2
    cannot compile it (backreferences, lookaround, too large): such a pattern is not checked here — the
    tool's own server checks its arguments anyway — and never run by Python's ``re``, whose backtracking
    can hold the engine's loop for minutes on a 30-character string (R6: Stop could not work)."""
    if not isinstance(pattern, str):
        return None
    import re2

    options = re2.Options()
    options.log_errors = False  # a refused pattern is not a line on stderr
    try:
        return re2.compile(pattern, options)
    except Exception:  # noqa: BLE001 - re2.error, or what the binding raises for odd input
        return None


def _matches(pattern: Any, text: str) -> bool:
    """``re.search(pattern, text)`` in linear time; a pattern RE2 cannot compile matches everything
    (not checked here: the lenient answer, so a valid call is never refused)."""
    rx = _rx(pattern)
    return True if rx is None else rx.search(text) is not None


def _linear_class(with_pattern_properties: bool) -> Any:
    """The Draft 2020-12 validator class whose every regular expression runs in RE2 (``pattern``,
    ``patternProperties`` and the ``additionalProperties`` that depends on it) and whose ``uniqueItems``
    takes one pass. Its ``evolve`` keeps the class, so a subschema's ``$schema`` cannot switch the check
    to a stock class that runs ``re``, and counts the steps a call's check takes (``MAX_CHECK_STEPS``).

    ``unevaluatedProperties`` looks at ``patternProperties`` through jsonschema's own helper, which uses
    ``re``: in a schema that has ``patternProperties`` it is not checked here (its server checks it)."""
    cls = _LINEAR.get(with_pattern_properties)
    if cls is not None:
        return cls
    from attrs import fields
    from jsonschema import Draft202012Validator, ValidationError, validators

    def pattern(validator: Any, patrn: Any, instance: Any, schema: Any) -> Any:
        if validator.is_type(instance, "string") and not _matches(patrn, instance):
            yield ValidationError(f"{instance!r} does not match {patrn!r}")

    def pattern_properties(validator: Any, pp: Any, instance: Any, schema: Any) -> Any:
        if not validator.is_type(instance, "object"):
            return
        for patrn, subschema in pp.items():
            if _rx(patrn) is None:
                continue  # not checked here
            for k, v in instance.items():
                if _matches(patrn, k):
                    yield from validator.descend(v, subschema, path=k, schema_path=patrn)

    def additional_properties(validator: Any, ap: Any, instance: Any, schema: Any) -> Any:
        if not validator.is_type(instance, "object"):
            return
        properties = schema.get("properties", {})
        patterns = list(schema.get("patternProperties", {}))
        extras = {k for k in instance if k not in properties and not any(_matches(p, k) for p in patterns)}
        if validator.is_type(ap, "object"):
            for extra in extras:
                yield from validator.descend(instance[extra], ap, path=extra)
        elif not ap and extras:
            joined = ", ".join(repr(each) for each in sorted(extras))
            if patterns:
                verb = "does" if len(extras) == 1 else "do"
                shown = ", ".join(repr(each) for each in sorted(patterns))
                yield ValidationError(f"{joined} {verb} not match any of the regexes: {shown}")
            else:
                verb = "was" if len(extras) == 1 else "were"
                yield ValidationError(f"Additional properties are not allowed ({joined} {verb} unexpected)")

    def unique_items(validator: Any, ui: Any, instance: Any, schema: Any) -> Any:
        # jsonschema compares every pair of objects (4,000 of them took 37 s): one pass with a set here
        if ui and validator.is_type(instance, "array"):
            seen: set[Any] = set()
            for item in instance:
                key = _canonical(item)
                if key in seen:
                    yield ValidationError(f"{instance!r} has non-unique elements")
                    return
                seen.add(key)

    keywords: dict[str, Any] = {"pattern": pattern, "patternProperties": pattern_properties,
                                "additionalProperties": additional_properties, "uniqueItems": unique_items}
    if with_pattern_properties:
        keywords["unevaluatedProperties"] = lambda validator, value, instance, schema: ()
    cls = validators.extend(Draft202012Validator, keywords)

    passed_on = [(f.name, f.alias) for f in fields(cls) if f.init]

    def evolve(self: Any, **changes: Any) -> Any:
        # jsonschema's own evolve picks the class by the subschema's "$schema" (a stock class, whose
        # keywords run ``re``); this one keeps the linear class whatever the subschema says. Every
        # subschema applied comes through here: one step of the call's budget (MAX_CHECK_STEPS).
        _step()
        changes.setdefault("schema", self.schema)
        for name, alias in passed_on:
            if alias not in changes:
                changes[alias] = getattr(self, name)
        return cls(**changes)

    cls.evolve = evolve
    _LINEAR[with_pattern_properties] = cls
    return cls


def schema(properties: dict[str, Any], required: Sequence[str] = ()) -> dict[str, Any]:
    """A JSON schema for an object with these properties; no other keys allowed."""
    return {"type": "object", "properties": properties, "required": list(required), "additionalProperties": False}


def inner_question_id(call_id: str, key: str) -> str:
    """The id of a question a tool asks from inside its running call (D9: a sub-agent's approval passed
    up by the delegation tool). Such a question means every wrapper let the call run already, so
    answering it re-runs the call as approved: it is not asked about again."""
    return f"sub-{call_id}-{key}"


def short_json(value: Any, limit: int = 200) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= limit else text[: limit - 1] + "…"
