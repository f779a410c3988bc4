"""What litellm's model info says of a model, for a process that does not import litellm.

The window's model calls run in the model host (``models/process_model.py``), so the window's own
process never imports litellm (seconds, ~200 MB). Two facts it still needs: a model's input window
(C7: the default compression trigger is a share of it) and its price per token (to price a call cut
mid-stream, B2). The host looks both up at its warm-up and the answers are remembered here; without
them, litellm's model info is asked directly when litellm is imported in this process.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import sys
from typing import Any

_windows: dict[str, int | None] = {}
#: model -> (USD per input token, USD per output token); None: litellm cannot price it
_prices: dict[str, tuple[float, float] | None] = {}
_pending: dict[str, concurrent.futures.Future[Any]] = {}


def expect(model_name: str, lookup: concurrent.futures.Future[Any]) -> None:
    """A model host is looking ``model_name`` up (its warm-up): ``settled`` waits for it."""
    _pending[model_name] = lookup


async def settled(model_name: str, timeout: float = 120.0) -> None:
    """Wait for a look-up of ``model_name`` in flight, if any (a failed one is not waited for again)."""
    lookup = _pending.get(model_name)
    if lookup is not None and not lookup.done():
        # shielded: giving up waiting must not cancel the look-up itself, which the model's own calls
        # read (a cancelled warm-up raised concurrent.futures.CancelledError into the run, a review found)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(lookup)), timeout)


def remember(model_name: str, window: int | None, prices: tuple[float, float] | None) -> None:
    """What a model host found for ``model_name``."""
    _windows[model_name] = window
    _prices[model_name] = prices


def known(model_name: str) -> bool:
    """Whether ``context_window`` can answer now without importing litellm."""
    return model_name in _windows or "litellm" in sys.modules


def prices(model_name: str) -> tuple[float, float] | None:
    """The remembered price per token, or None (never looked up, or not priced)."""
    return _prices.get(model_name)


def context_window(model_name: str) -> int | None:
    """The model's input window: remembered from a model host, else litellm's model info when litellm
    is imported (None when neither has one)."""
    if model_name in _windows:
        return _windows[model_name]
    if model_name in ("demo", "scripted") or "litellm" not in sys.modules:
        return None
    try:
        import litellm

        info = litellm.get_model_info(model_name)
        value = info.get("max_input_tokens") or info.get("max_tokens")
        return int(value) if value else None
    except Exception:  # noqa: BLE001 - litellm raises for models it does not know
        return None


def look_up(litellm: object, model_name: str) -> tuple[int | None, tuple[float, float] | None]:
    """In a process that has litellm: the model's window and price per token (the host's warm-up)."""
    window = context_window(model_name)
    try:
        cost = litellm.cost_per_token  # type: ignore[attr-defined]
        per_in = cost(model=model_name, prompt_tokens=1, completion_tokens=0)[0]
        per_out = cost(model=model_name, prompt_tokens=0, completion_tokens=1)[1]
        price: tuple[float, float] | None = (float(per_in), float(per_out))
    except Exception:  # noqa: BLE001 - litellm raises for models it cannot price
        price = None
    return window, price


__all__ = ["context_window", "expect", "known", "look_up", "prices", "remember", "settled"]
