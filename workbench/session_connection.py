"""The connection test of the Settings dialog (G4): one tiny call with a model, API base and key.

A facade call, so the window never builds or calls engine models itself (AGENTS.md, layering rules).
The call (``max_tokens=1``) goes through ``LiteLLMModel`` the way the window's own calls do: in the model
host process, or with ``WORKBENCH_MODEL_PROCESS=0`` on a worker thread's loop (``ThreadedModel``), so
litellm's import and the request never run on the caller's thread. The outcome comes back in words.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

from workbench.errors import ModelError

log = logging.getLogger(__name__)

__all__ = ["check_connection"]


async def check_connection(model: str, api_base: str | None, api_key: str | None, *,
                           timeout: float) -> tuple[bool, str]:
    """``(True, "Connected: … answered in 0.42 s")`` or ``(False, why)``; cancelling it cancels the call.

    ``timeout`` bounds the request (seconds). The worker or host connection is closed on a thread of
    its own: joining it can take a moment, which a GUI thread must not wait for."""
    from workbench.engine.messages import Message, ModelRequest, ModelResponse
    from workbench.engine.models import process_model
    from workbench.engine.models.litellm_model import LiteLLMModel
    from workbench.engine.models.threaded import ThreadedModel

    worker: Any = None
    try:
        inner = LiteLLMModel(model, api_base=api_base, api_key=api_key, max_retries=0, timeout=timeout)
        worker = (process_model.ProcessModel(inner) if process_model.enabled()
                  else ThreadedModel(inner, thread_name="workbench-settings-test"))
        # litellm's first import takes seconds: done on the worker, outside the timed call.
        await asyncio.wrap_future(worker.warm_up())
        request = ModelRequest(system="", messages=(Message.user("Reply with OK."),), settings={"max_tokens": 1})
        started = time.monotonic()
        answered = False
        async for item in worker.stream(request):
            if isinstance(item, ModelResponse):
                answered = True
        elapsed = time.monotonic() - started
        if not answered:
            return False, f"{model} ended the stream without an answer — check the model name and API base"
        took = f"{elapsed:.2f}" if elapsed < 1 else f"{elapsed:.1f}"
        return True, f"Connected: {model} answered in {took} s"
    except ModelError as exc:
        return False, str(exc)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # noqa: BLE001 - reported in words, not a traceback dialog
        log.debug("connection test failed", exc_info=True)
        first_line = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), "")
        return False, f"The test failed: {type(exc).__name__}" + (f": {first_line}" if first_line else "")
    finally:
        if worker is not None:
            threading.Thread(target=worker.close, name="workbench-settings-test-close", daemon=True).start()
