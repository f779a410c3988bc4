"""The model protocol every implementation (litellm, demo, scripted) follows."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol, runtime_checkable

from workbench.engine.messages import ModelDelta, ModelRequest, ModelResponse
from workbench.engine.usage import Usage


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


def estimated_usage(model: object, request: ModelRequest, text: str) -> Usage:
    """What a call cut mid-stream cost, estimated: the request's tokens in, the streamed text out.

    A model that can price it has ``estimate_usage`` (litellm's price list; a wrapper such as
    ``ThreadedModel`` is looked through via ``inner``); otherwise token counts only, as an unpriced call.
    """
    while model is not None:
        estimate = getattr(model, "estimate_usage", None)
        if estimate is not None:
            return estimate(request, text)
        model = getattr(model, "inner", None)
    from workbench.engine.tokens import estimate_messages_tokens, estimate_tokens

    return Usage(input_tokens=estimate_messages_tokens(request.system, request.messages),
                 output_tokens=estimate_tokens(text), calls=1, unpriced_calls=1)
