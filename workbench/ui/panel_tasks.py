"""Coroutines a dock panel starts from its slots (reading files, scanning skills, saving).

The window hands each panel a ``start`` callable (``workbench.ui.qt_async.start``: strong references
and the error hook); without one the panel falls back to ``asyncio.ensure_future``. Either way
``PanelTasks`` keeps its own strong reference to every task until it ends, so a task is never
collected mid-run, and a task that dies is logged and handed to the panel (nothing fails silently).
``wait_idle`` lets tests (and shutdown) wait for the panel's work without nested event loops.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

log = logging.getLogger(__name__)

Start = Callable[[Coroutine[Any, Any, Any]], Any]
ErrorSink = Callable[[BaseException], None]


class PanelTasks:
    """The tasks one panel started: strongly referenced, failures logged and shown."""

    def __init__(self, start: Start | None = None, on_error: ErrorSink | None = None) -> None:
        self._start: Start = start or asyncio.ensure_future
        self._on_error = on_error
        self._tasks: set[asyncio.Future[Any]] = set()
        self.errors: list[BaseException] = []
        """Failures of tasks this panel started (newest last), for the panel and for tests."""

    def run(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Future[Any] | None:
        """Start ``coro``; returns its task (None when no event loop could take it)."""
        try:
            task = self._start(coro)
        except RuntimeError as exc:  # no event loop at all: say so rather than drop the work silently
            coro.close()
            log.error("could not start %s: %s", getattr(coro, "__qualname__", coro), exc)
            self._fail(exc)
            return None
        if isinstance(task, asyncio.Future):
            self._tasks.add(task)
            task.add_done_callback(self._done)
            return task
        return None

    def _done(self, task: asyncio.Future[Any]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            log.error("panel task failed: %s", exc, exc_info=(type(exc), exc, exc.__traceback__))
            self._fail(exc)

    def _fail(self, exc: BaseException) -> None:
        self.errors.append(exc)
        if self._on_error is not None:
            try:
                self._on_error(exc)
            except Exception:  # noqa: BLE001 - a broken sink must not hide the failure
                log.exception("panel error sink failed")

    @property
    def busy(self) -> bool:
        return any(not t.done() for t in self._tasks)

    async def wait_idle(self, timeout: float = 10.0) -> None:
        """Wait until every task started so far (and any they started) has ended; re-raise a failure."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            pending = {t for t in self._tasks if not t.done()}
            if not pending:
                break
            left = deadline - loop.time()
            if left <= 0:
                raise TimeoutError(f"{len(pending)} panel task(s) still running after {timeout} s")
            await asyncio.wait(pending, timeout=left)
        # Let done-callbacks (which record failures) run.
        await asyncio.sleep(0)
        if self.errors:
            raise self.errors[-1]

    def cancel_all(self) -> None:
        for task in list(self._tasks):
            task.cancel()


__all__ = ["PanelTasks", "Start"]
