"""``TaskLoop``: a private asyncio loop in a daemon thread, where background sub-agents' engines run.

Why (D11, issue 11's latency target): in the window the parent engine runs on the GUI loop (qasync).
Eight sub-agents streaming at once put every step of theirs — middleware hooks, checkpoints, events —
on that same loop, and the window stalled for 200 ms at a time. On their own loop the GUI thread keeps
only what the person sees: task progress and the settled status, which the runner posts back.

The runner hands a task's run to ``submit`` (a coroutine factory; its result comes back as a future on
the caller's loop), and ``call`` for plain calls such as ``Engine.stop`` — an engine is only ever used
from the loop its runs live on.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")


class TaskLoop:
    """One daemon thread running one asyncio loop (started at construction)."""

    def __init__(self, name: str = "workbench-tasks") -> None:
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(self.loop)
            self.loop.call_soon(ready.set)
            try:
                self.loop.run_forever()
            finally:
                with contextlib.suppress(Exception):
                    self.loop.run_until_complete(self.loop.shutdown_asyncgens())
                self.loop.close()

        self.thread = threading.Thread(target=run, name=name, daemon=True)
        self.thread.start()
        ready.wait(10)

    def submit(self, factory: Callable[[], Awaitable[T]]) -> asyncio.Future[T]:
        """Run ``factory()`` on this loop; the result (or its exception) on the caller's loop. Cancelling
        the returned future cancels the run here."""

        async def call() -> T:
            return await factory()

        return asyncio.wrap_future(asyncio.run_coroutine_threadsafe(call(), self.loop))

    def call(self, fn: Callable[..., Any], *args: Any) -> None:
        """``fn(*args)`` on this loop, soon (never waits)."""
        if not self.loop.is_closed():
            self.loop.call_soon_threadsafe(fn, *args)

    async def aclose(self, timeout: float = 30.0) -> None:
        """Cancel what still runs here, wait for it to unwind (runs store how they were cut), stop the
        loop and join the thread — without blocking the caller's loop."""
        if self.loop.is_closed() or not self.thread.is_alive():
            return

        async def drain() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            if tasks:
                await asyncio.wait(tasks, timeout=timeout)

        with contextlib.suppress(Exception, concurrent.futures.CancelledError):
            await asyncio.wait_for(asyncio.wrap_future(asyncio.run_coroutine_threadsafe(drain(), self.loop)),
                                   timeout + 1)
        self.loop.call_soon_threadsafe(self.loop.stop)
        await asyncio.get_running_loop().run_in_executor(None, self.thread.join, timeout)


__all__ = ["TaskLoop"]
