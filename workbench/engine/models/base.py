"""The model protocol every implementation (litellm, demo, scripted) follows."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol, runtime_checkable

from workbench.engine.messages import ModelDelta, ModelRequest, ModelResponse


@runtime_checkable
class Model(Protocol):
    """``stream`` yields text deltas and ends with exactly one ModelResponse (with usage).

    Errors are raised as ``workbench.errors.ModelError`` with one clear line naming the provider.
    """

    name: str

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelDelta | ModelResponse]: ...


async def complete(model: Model, request: ModelRequest) -> ModelResponse:
    """Drain a stream and return its final response (for callers that need no deltas)."""
    final: ModelResponse | None = None
    async for item in model.stream(request):
        if isinstance(item, ModelResponse):
            final = item
    if final is None:
        from workbench.errors import ModelError

        raise ModelError(f"model {model.name!r} ended its stream without a response")
    return final
