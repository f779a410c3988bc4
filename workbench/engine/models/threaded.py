"""``ThreadedModel``: run a model's I/O on its own event loop in a worker thread.

DESIGN §2: a litellm call costs tens of ms of CPU (the first one ~700 ms) and a litellm stream does not
yield to the event loop while chunks are buffered, which stalls a GUI loop. So the inner stream runs on
a private loop in a daemon thread; the caller's loop receives the items through an ``asyncio.Queue``
fed with ``call_soon_threadsafe``, with text deltas batched (~30 ms) so the UI gets few, larger updates.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

from workbench.engine.messages import ModelDelta, ModelRequest, ModelResponse
from workbench.engine.models.base import Model
from workbench.errors import ModelError

log = logging.getLogger(__name__)

_ITEM, _ERROR, _DONE = "item", "error", "done"


def _merge(deltas: list[ModelDelta]) -> ModelDelta:
    if len(deltas) == 1:
        return deltas[0]
    return ModelDelta(text="".join(d.text for d in deltas), reasoning="".join(d.reasoning for d in deltas))


def with_queued_deltas(first: ModelDelta, queue: asyncio.Queue[tuple[str, Any]]) -> ModelDelta:
    """``first`` merged with the text deltas already queued right behind it (``("item", delta)``
    entries): one UI update per wake-up. Used by ``ThreadedModel`` and ``ProcessModel``."""
    batch = [first]
    while not queue.empty() and queue._queue[0][0] == _ITEM and isinstance(queue._queue[0][1], ModelDelta):  # noqa: SLF001
        batch.append(queue.get_nowait()[1])
    return _merge(batch)


class ThreadedModel:
    """A ``Model`` that wraps another and runs its stream on a dedicated worker thread's loop."""

    def __init__(self, inner: Model, *, batch_interval: float = 0.03, thread_name: str = "workbench-model-io") -> None:
        self.inner = inner
        self.name = inner.name
        self.batch_interval = batch_interval
        self._thread_name = thread_name
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def __repr__(self) -> str:
        return f"ThreadedModel({self.inner!r})"

    # --- the worker thread -----------------------------------------------------------------

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The worker loop (started on first use)."""
        return self.start()

    @property
    def thread(self) -> threading.Thread | None:
        return self._thread

    def start(self) -> asyncio.AbstractEventLoop:
        """Start the worker thread and its loop if not running yet; returns the loop."""
        with self._lock:
            if self._loop is not None and self._thread is not None and self._thread.is_alive():
                return self._loop
            loop = asyncio.new_event_loop()
            ready = threading.Event()

            def run() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(ready.set)
                try:
                    loop.run_forever()
                finally:
                    try:
                        loop.run_until_complete(loop.shutdown_asyncgens())
                    finally:
                        loop.close()

            thread = threading.Thread(target=run, name=self._thread_name, daemon=True)
            thread.start()
            ready.wait()
            self._loop, self._thread = loop, thread
            return loop

    def warm_up(self) -> concurrent.futures.Future[float]:
        """Import and warm litellm on the worker loop (``llm_setup.warm_up_async``); returns its Future."""
        from workbench.engine import llm_setup

        return asyncio.run_coroutine_threadsafe(llm_setup.warm_up_async(), self.start())

    def close(self, timeout: float = 5.0) -> None:
        """Cancel what runs on the worker loop, stop it and join the thread."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        if thread.is_alive() and not loop.is_closed():

            async def shutdown() -> None:
                tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
                for t in tasks:
                    t.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                asyncio.get_running_loop().stop()

            try:
                asyncio.run_coroutine_threadsafe(shutdown(), loop)
            except RuntimeError:  # loop already closed
                pass
        if thread is not threading.current_thread():
            thread.join(timeout)

    # --- the stream ------------------------------------------------------------------------

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelDelta | ModelResponse]:
        """Re-yield the inner stream on the caller's loop; cancelling the consumer cancels the worker."""
        worker = self.start()
        caller = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

        def post(kind: str, payload: Any = None) -> None:
            try:
                caller.call_soon_threadsafe(queue.put_nowait, (kind, payload))
            except RuntimeError:  # the caller's loop is closed: nobody is listening
                pass

        future = asyncio.run_coroutine_threadsafe(self._pump(request, post), worker)
        try:
            while True:
                kind, payload = await queue.get()
                if kind == _ITEM:
                    yield with_queued_deltas(payload, queue) if isinstance(payload, ModelDelta) else payload
                elif kind == _ERROR:
                    raise payload
                else:
                    return
        finally:
            if not future.done():
                future.cancel()

    async def _pump(self, request: ModelRequest, post: Any) -> None:
        """Worker side: drain the inner stream, batching text deltas for ``batch_interval`` seconds."""
        await pump_batched(self.inner, request, post, self.batch_interval)


async def pump_batched(model: Model, request: ModelRequest, post: Any, batch_interval: float) -> None:
    """Drain ``model.stream(request)`` into ``post(kind, payload)``: text deltas merged for
    ``batch_interval`` seconds, other items as they come, then ``done`` — or ``error`` with the exception.
    Used by ``ThreadedModel``'s worker thread and by the model host process (``model_host.py``)."""
    loop = asyncio.get_running_loop()
    pending: list[ModelDelta] = []
    started = 0.0
    timer: asyncio.TimerHandle | None = None

    def flush() -> None:
        nonlocal timer
        if timer is not None:
            timer.cancel()
            timer = None
        if pending:
            post(_ITEM, _merge(pending))
            pending.clear()

    agen = model.stream(request)
    try:
        async for item in agen:
            if isinstance(item, ModelDelta):
                if not pending:
                    started = time.monotonic()
                pending.append(item)
                # A burst of buffered chunks never yields to the loop, so the timer alone can't
                # flush it: check the batch's age on every arrival as well.
                if time.monotonic() - started >= batch_interval:
                    flush()
                elif timer is None:
                    timer = loop.call_later(batch_interval, flush)
            else:
                flush()
                post(_ITEM, item)
        flush()
        post(_DONE)
    except asyncio.CancelledError:
        # Either the consumer went away (nobody reads this) or the worker stopped while a consumer
        # still waits: tell it, rather than leave it waiting forever.
        post(_ERROR, ModelError(f"the call to {model.name} was cancelled: the model worker stopped"))
        raise
    except BaseException as exc:  # noqa: BLE001 - handed to the consumer
        flush()
        post(_ERROR, exc)
    finally:
        if timer is not None:
            timer.cancel()
        aclose = getattr(agen, "aclose", None)
        if aclose is not None:
            try:
                await aclose()
            except Exception:  # noqa: BLE001 - closing a failed stream is best effort
                log.debug("closing the inner stream failed", exc_info=True)
