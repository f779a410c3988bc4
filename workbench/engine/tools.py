"""Tools: a name, a JSON schema, an async function, an optional lock, and the resources it touches."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
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
    """Return an error message for the model when a call can't run (M5), else None."""
    if tool is None:
        names = ", ".join(sorted(known)) or "none"
        return f"Error: unknown tool '{call.name}'. Available tools: {names}."
    if call.arguments is None:
        raw = call.raw_arguments if len(call.raw_arguments) <= 200 else call.raw_arguments[:200] + "…"
        return f"Error: the arguments for '{call.name}' are not a valid JSON object: {raw!r}. Send a JSON object."
    validator = _validator(tool)
    errors = sorted(validator.iter_errors(call.arguments), key=lambda e: list(e.absolute_path))
    if errors:
        parts = []
        for e in errors[:5]:
            where = "/".join(str(p) for p in e.absolute_path) or "(arguments)"
            parts.append(f"{where}: {e.message}")
        return f"Error: invalid arguments for '{call.name}': " + "; ".join(parts)
    return None


_VALIDATORS: dict[int, tuple[Tool, Any]] = {}


def _validator(tool: Tool) -> Any:
    """One compiled validator per tool (building one costs more than validating a call)."""
    entry = _VALIDATORS.get(id(tool))
    if entry is None or entry[0] is not tool:
        import jsonschema  # local: only tool calls pay for it

        entry = (tool, jsonschema.Draft202012Validator(tool.parameters))
        _VALIDATORS[id(tool)] = entry
    return entry[1]


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
