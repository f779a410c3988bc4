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
import sys
from collections.abc import Callable
from typing import Any

_windows: dict[str, int | None] = {}
#: model -> (USD per input token, USD per output token); None: litellm cannot price it
_prices: dict[str, tuple[float, float] | None] = {}
_pending: dict[str, concurrent.futures.Future[Any]] = {}


def expect(model_name: str, lookup: concurrent.futures.Future[Any]) -> None:
    """A model host is looking ``model_name`` up (its warm-up): ``settled`` waits for it."""
    _pending[model_name] = lookup


async def settled(model_name: str, timeout: float = 120.0, stopped: Callable[[], bool] | None = None) -> None:
    """Wait for a look-up of ``model_name`` in flight, if any (a failed one, or one already waited for in
    vain, is not waited for again), up to ``timeout`` seconds, or until ``stopped()`` says the run is
    stopping (R6: a stop at any moment ends the run; a host that never answers kept Ctrl-C waiting here,
    a review found)."""
    lookup = _pending.get(model_name)
    if lookup is None or lookup.done():
        return
    # never cancelled: the look-up is the model's own (its calls read it); giving up only stops waiting
    # (a cancelled warm-up raised concurrent.futures.CancelledError into the run, a review found)
    waited = asyncio.wrap_future(lookup)
    waited.add_done_callback(lambda f: f.cancelled() or f.exception())  # a failure is read: asyncio logs none
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not waited.done() and not (stopped is not None and stopped()):
        left = deadline - loop.time()
        if left <= 0:
            if _pending.get(model_name) is lookup:  # waited for once: later calls do not wait for it again
                del _pending[model_name]
            return
        await asyncio.wait({waited}, timeout=min(left, 0.25))


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
