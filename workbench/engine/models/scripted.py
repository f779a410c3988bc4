"""``ScriptedModel``: a deterministic in-process model for unit tests (no litellm, no network).

Each call consumes the next scripted item: a ModelResponse, a callable building one from the request,
or an exception to raise. Every request is recorded so tests can inspect what the model was shown.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any, Union

from workbench.engine.messages import Message, ModelDelta, ModelRequest, ModelResponse, ToolCall
from workbench.engine.usage import Usage

Reply = Union[ModelResponse, Callable[[ModelRequest], ModelResponse], BaseException, type, str]

DEFAULT_USAGE = Usage(input_tokens=10, output_tokens=5, calls=1)
_call_ids = itertools.count(1)


def reply(text: str, usage: Usage | None = None, *, finish_reason: str = "stop", model: str = "scripted") -> ModelResponse:
    """A plain text answer with the default test usage."""
    return ModelResponse(
        message=Message.assistant(text),
        usage=usage if usage is not None else DEFAULT_USAGE,
        model=model,
        finish_reason=finish_reason,
    )


def tool_reply(
    *calls: ToolCall | tuple[str, dict[str, Any]] | tuple[str, dict[str, Any], str],
    text: str = "",
    usage: Usage | None = None,
    model: str = "scripted",
) -> ModelResponse:
    """An answer asking for tool calls, given as ToolCalls or ``(name, args)`` (ids are generated)."""
    built: list[ToolCall] = []
    for call in calls:
        if isinstance(call, ToolCall):
            built.append(call)
            continue
        name, args = call[0], call[1]
        call_id = call[2] if len(call) > 2 else f"call_{next(_call_ids)}"  # type: ignore[misc]
        built.append(ToolCall.parse(call_id, name, args))
    return ModelResponse(
        message=Message.assistant(text, tuple(built)),
        usage=usage if usage is not None else DEFAULT_USAGE,
        model=model,
        finish_reason="tool_calls" if built else "stop",
    )


class ScriptedModel:
    """Plays ``replies`` in order; streams each reply's text (in ``chunk_size`` pieces) then the response.

    Every request is kept in ``requests`` for tests to inspect; ``keep_requests=False`` keeps none (a
    long benchmark session would otherwise hold every step's request, and the garbage collector would
    walk them all: a cost of the test model, not of the harness it measures).
    """

    def __init__(self, replies: Iterable[Reply], name: str = "scripted", chunk_size: int | None = None, *,
                 keep_requests: bool = True) -> None:
        self.name = name
        self.replies: list[Reply] = list(replies)
        self.chunk_size = chunk_size
        self.requests: list[ModelRequest] = []
        self.keep_requests = keep_requests
        self._calls = 0
        self._next = 0

    def __repr__(self) -> str:
        return f"ScriptedModel({self.name!r}, {self._next}/{len(self.replies)} used)"

    @property
    def calls(self) -> int:
        # Kept requests are the count (a test's subclass may record a request of its own); else the counter.
        return len(self.requests) if self.keep_requests else self._calls

    @property
    def remaining(self) -> int:
        return len(self.replies) - self._next

    def add(self, *replies: Reply) -> ScriptedModel:
        """Append more replies to the script."""
        self.replies.extend(replies)
        return self

    def assert_all_used(self) -> None:
        if self.remaining:
            raise AssertionError(
                f"ScriptedModel {self.name!r}: {self.remaining} of {len(self.replies)} replies were never used"
            )

    def _take(self, request: ModelRequest) -> ModelResponse:
        self._calls += 1
        if self.keep_requests:
            self.requests.append(request)
        if self._next >= len(self.replies):
            raise AssertionError(f"ScriptedModel ran out of replies after {len(self.replies)} calls")
        item = self.replies[self._next]
        self._next += 1
        if isinstance(item, BaseException):
            raise item
        if isinstance(item, type) and issubclass(item, BaseException):
            raise item()
        if isinstance(item, str):
            return reply(item, model=self.name)
        if isinstance(item, ModelResponse):
            return item
        if callable(item):
            result = item(request)
            if isinstance(result, str):
                return reply(result, model=self.name)
            if not isinstance(result, ModelResponse):
                raise TypeError(f"ScriptedModel: a reply callable returned {type(result).__name__}, not ModelResponse")
            return result
        raise TypeError(f"ScriptedModel: cannot play a {type(item).__name__} reply")

    def _chunks(self, text: str) -> list[str]:
        if not text:
            return []
        if not self.chunk_size or self.chunk_size <= 0:
            return [text]
        return [text[i : i + self.chunk_size] for i in range(0, len(text), self.chunk_size)]

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelDelta | ModelResponse]:
        response = self._take(request)
        for piece in self._chunks(response.message.content):
            yield ModelDelta(text=piece)
        yield response
