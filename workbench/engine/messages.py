"""Provider-neutral messages, tool calls and the model request/response pair."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from workbench.engine.usage import Usage

Role = Literal["system", "user", "assistant", "tool"]


def clean_text(text: str) -> str:
    """``text`` made storable as UTF-8 (R10): a surrogate pair split across streamed chunks is joined,
    a lone surrogate becomes U+FFFD. NUL and every other code point are kept. O(1) extra on the usual
    path (ASCII, or text that already encodes)."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def clean_value(value: Any) -> Any:
    """``clean_text`` over a JSON value (keys and strings at every depth)."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_text(str(k)): clean_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean_value(v) for v in value]
    return value


EDIT_NOTE = "\n\n[The person edited this call's arguments before it ran; the call used: "


def edit_note(arguments: Any) -> str:
    """The last line of an edited call's result (P6): the model learns what ran, not what it asked.

    Appended, so a result's own first line ("Denied: …", "Error: …") stays first. One line of compact
    JSON, so ``split_edit_note`` reads it back from the stored result (results travel through
    checkpoints and the tool journal as text)."""
    return EDIT_NOTE + json.dumps(arguments, ensure_ascii=False, sort_keys=True) + "]"


#: Appended to a result that ends like an edit note although nobody edited the call (P6): it no longer reads
#: back as edited.
FORGED_EDIT_NOTE = "\n\n(The line above is the tool's own output: nobody edited this call.)"


def split_edit_note(content: str) -> tuple[str, dict[str, Any] | None]:
    """(the result without the note, the arguments the edited call used) — (content, None) if not edited."""
    at = content.rfind(EDIT_NOTE)
    if at < 0 or not content.endswith("]"):
        return content, None
    line = content[at + len(EDIT_NOTE):-1]
    if "\n" in line:
        return content, None
    try:
        value = json.loads(line)
    except json.JSONDecodeError:
        return content, None
    return (content[:at], value) if isinstance(value, dict) else (content, None)


def edited_arguments(content: str) -> dict[str, Any] | None:
    """The arguments an edited call ran with (see ``edit_note``); None when not edited."""
    return split_edit_note(content)[1] if content.endswith("]") else None


def _encodes(value: Any) -> bool:
    if isinstance(value, str):
        return value.isascii() or clean_text(value) is value
    if isinstance(value, dict):
        return all(_encodes(k) and _encodes(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return all(_encodes(v) for v in value)
    return True


def canonical_arguments(arguments: Mapping[str, Any]) -> str:
    """The JSON text of parsed tool arguments, as sent back to the provider and derived on load."""
    return json.dumps(arguments, ensure_ascii=False)


@dataclass(frozen=True)
class ToolCall:
    """One call the model asked for. ``arguments`` is None when ``raw_arguments`` is not valid JSON."""

    id: str
    name: str
    arguments: dict[str, Any] | None
    raw_arguments: str = ""

    @classmethod
    def parse(cls, id: str, name: str, raw: str | dict[str, Any] | None) -> ToolCall:
        """A call from the model's argument text (or a dict). Valid JSON arguments are kept parsed, with
        ``raw_arguments`` their canonical JSON — the text the history sends back, the same before and
        after a restart; text that is not a JSON object is kept as it came."""
        if isinstance(raw, dict):
            return cls(id=id, name=name, arguments=raw, raw_arguments=canonical_arguments(raw))
        text = raw or ""
        try:
            value = json.loads(text) if text.strip() else {}
        except json.JSONDecodeError:
            return cls(id=id, name=name, arguments=None, raw_arguments=text)
        if not isinstance(value, dict):
            return cls(id=id, name=name, arguments=None, raw_arguments=text)
        return cls(id=id, name=name, arguments=value, raw_arguments=canonical_arguments(value))

    def to_dict(self) -> dict[str, Any]:
        # Parsed arguments are stored once: their text is derived again on load. A 2 MB write_file
        # call costs 2 MB of history, not 4 (F3).
        if self.arguments is not None:
            return {"id": self.id, "name": self.name, "arguments": self.arguments}
        return {"id": self.id, "name": self.name, "arguments": None, "raw_arguments": self.raw_arguments}

    def cleaned(self) -> ToolCall:
        """This call with every text storable (see ``clean_text``); itself when it already is."""
        if _encodes(self.id) and _encodes(self.name) and _encodes(self.raw_arguments) and _encodes(self.arguments):
            return self
        args = clean_value(self.arguments) if self.arguments is not None else None
        return ToolCall(clean_text(self.id), clean_text(self.name), args, clean_text(self.raw_arguments))

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ToolCall:
        arguments = d.get("arguments")
        raw = d.get("raw_arguments")
        if raw is None:
            raw = canonical_arguments(arguments) if arguments is not None else ""
        return cls(id=d["id"], name=d["name"], arguments=arguments, raw_arguments=raw)


@dataclass(frozen=True)
class Message:
    """One message of a thread. ``meta`` holds engine bookkeeping (tool status, run id), never sent."""

    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    meta: dict[str, Any] = field(default_factory=dict, compare=False)

    @classmethod
    def user(cls, text: str, **meta: Any) -> Message:
        return cls(role="user", content=text, meta=dict(meta))

    @classmethod
    def system(cls, text: str) -> Message:
        return cls(role="system", content=text)

    @classmethod
    def assistant(cls, text: str = "", tool_calls: tuple[ToolCall, ...] = (), **meta: Any) -> Message:
        return cls(role="assistant", content=text, tool_calls=tuple(tool_calls), meta=dict(meta))

    @classmethod
    def tool(cls, call: ToolCall, content: str, status: str = "ok", **meta: Any) -> Message:
        edited = edited_arguments(content)
        if edited is not None:  # P6: the record of an edit decision travels with the result
            meta = {"edited": True, "arguments": edited, **meta}
        return cls(
            role="tool", content=content, tool_call_id=call.id, name=call.name, meta={"status": status, **meta}
        )

    def cleaned(self) -> Message:
        """This message with every text storable as UTF-8 (R10); itself when it already is."""
        calls = tuple(c.cleaned() for c in self.tool_calls)
        content = clean_text(self.content)
        if content is self.content and all(a is b for a, b in zip(calls, self.tool_calls)):
            return self
        from dataclasses import replace

        return replace(self, content=content, tool_calls=calls)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            d["tool_calls"] = [c.to_dict() for c in self.tool_calls]
        if self.tool_call_id is not None:
            d["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            d["name"] = self.name
        if self.meta:
            d["meta"] = self.meta
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Message:
        return cls(
            role=d["role"],
            content=d.get("content") or "",
            tool_calls=tuple(ToolCall.from_dict(c) for c in d.get("tool_calls", ())),
            tool_call_id=d.get("tool_call_id"),
            name=d.get("name"),
            meta=dict(d.get("meta") or {}),
        )

    def to_openai(self) -> dict[str, Any]:
        """The OpenAI chat format litellm takes."""
        d: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.role == "assistant" and self.tool_calls:
            if not self.content:  # no text beside the calls: no content (litellm drops a None one anyway)
                del d["content"]
            d["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.raw_arguments or "{}"}}
                for c in self.tool_calls
            ]
        if self.role == "tool":
            d["tool_call_id"] = self.tool_call_id
        return d


@dataclass(frozen=True)
class ToolSpec:
    """What the model is offered: a tool's name, description and JSON schema."""

    name: str
    description: str
    parameters: dict[str, Any]

    def to_openai(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


@dataclass(frozen=True)
class ModelRequest:
    """One model call: the system prompt, the history the model sees, the tools offered."""

    system: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    settings: dict[str, Any] = field(default_factory=dict)
    #: Bookkeeping wrappers leave for the engine, never sent (V1: ``compression_records``, how many of
    #: the thread's compression records made the view).
    meta: dict[str, Any] = field(default_factory=dict, compare=False)

    def replace(self, **changes: Any) -> ModelRequest:
        from dataclasses import replace

        return replace(self, **changes)

    def to_openai_messages(self) -> list[dict[str, Any]]:
        out = [{"role": "system", "content": self.system}] if self.system else []
        out += [m.to_openai() for m in self.messages]
        return out


@dataclass(frozen=True)
class ModelDelta:
    """A streamed piece of the answer (live only, never stored)."""

    text: str = ""
    reasoning: str = ""


@dataclass(frozen=True)
class ModelResponse:
    """The whole reply of one model call, with its usage."""

    message: Message
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    finish_reason: str = ""
