"""The one module that owns qasync (CONVENTIONS 2): the loop factory, tasks started from slots, the
error hook, and dialogs awaited as futures.

- ``loop_factory()`` makes a ``qasync.QEventLoop`` over the (single) ``QApplication``; start with
  ``asyncio.Runner(loop_factory=loop_factory)`` on Python 3.11.
- ``start(coro)`` runs a coroutine from a slot as a task and keeps a strong reference to it until it
  ends (qasync's ``asyncSlot`` keeps none, so a task could be collected mid-run). A task that dies
  with an exception is logged and handed to the error hook, which the main window points at its
  error bar: nothing fails silently.
- ``ask_dialog(dialog)`` ``open()``s a dialog and returns a Future with its result code: never
  ``exec()`` (a nested loop would freeze the engine's asyncio work and the streaming).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

os.environ.setdefault("QT_API", "pyside6")  # qasync must bind to PySide6, even if PyQt is installed

from PySide6.QtCore import Qt  # noqa: E402
from PySide6.QtWidgets import QApplication, QDialog  # noqa: E402

import qasync  # noqa: E402
import shiboken6  # noqa: E402

log = logging.getLogger(__name__)

T = TypeVar("T")
ErrorHook = Callable[[BaseException, str], None]

_tasks: set[asyncio.Task[Any]] = set()
_error_hooks: list[ErrorHook] = []


def application(argv: list[str] | None = None) -> QApplication:
    """The process's QApplication (created on first use)."""
    app = QApplication.instance()
    if app is None:
        app = QApplication(list(argv) if argv is not None else sys.argv[:1])
    assert isinstance(app, QApplication)
    return app


class QtEventLoop(qasync.QEventLoop):  # type: ignore[misc]
    """qasync's loop, whose ``close()`` also frees its Qt helper objects on the GUI thread.

    qasync's ``close()`` only flags its timer object as stopped: Qt timers it started for ``call_later``
    handles (an ``asyncio.wait_for`` timeout, say) stay registered. If the garbage collector later frees
    that object on another thread (a worker importing litellm triggers collections), Qt cannot stop those
    timers there, and the next one to fire reaches a deleted object: a crash. Deleting the helpers here,
    on the loop's own thread, stops their timers properly.
    """

    def close(self) -> None:
        super().close()
        for name in ("_timer", "_QEventLoop__call_soon_signaller"):
            obj = getattr(self, name, None)
            if obj is not None:
                try:
                    shiboken6.delete(obj)
                except RuntimeError:  # already gone
                    pass


def loop_factory() -> asyncio.AbstractEventLoop:
    """A qasync loop over the QApplication; for ``asyncio.Runner(loop_factory=...)`` and tests."""
    loop = QtEventLoop(application())
    loop.set_exception_handler(_loop_exception_handler)
    return loop


def _loop_exception_handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    exc = context.get("exception")
    message = str(context.get("message") or "unhandled error in the event loop")
    if isinstance(exc, BaseException) and not isinstance(exc, asyncio.CancelledError):
        report_error(exc, message)
    else:
        loop.default_exception_handler(context)


# --------------------------------------------------------------------------------------------------
# The error hook


def add_error_hook(hook: ErrorHook) -> Callable[[], None]:
    """Register ``hook(exc, context)``; returns a function that removes it."""
    _error_hooks.append(hook)

    def remove() -> None:
        if hook in _error_hooks:
            _error_hooks.remove(hook)

    return remove


def report_error(exc: BaseException, context: str = "") -> None:
    """Log a failure and show it through the hooks (the window's error bar)."""
    log.error("%s: %s", context or "background task failed", exc, exc_info=(type(exc), exc, exc.__traceback__))
    for hook in list(_error_hooks):
        try:
            hook(exc, context)
        except Exception:  # a broken hook must not hide the original error
            log.exception("error hook %r failed", hook)


# --------------------------------------------------------------------------------------------------
# Tasks started from slots


def start(coro: Coroutine[Any, Any, T], *, name: str | None = None) -> asyncio.Task[T]:
    """Run ``coro`` as a task on the running loop, strongly referenced until it ends; a failure goes to
    the error hook. Use this from slots (``button.clicked.connect(lambda: start(self.send()))``)."""
    task = asyncio.get_event_loop().create_task(coro, name=name)
    _tasks.add(task)
    task.add_done_callback(_task_done)
    return task


def _task_done(task: asyncio.Task[Any]) -> None:
    _tasks.discard(task)
    if task.cancelled():
        return
    exc = task.exception()
    if exc is not None:
        report_error(exc, f"task {task.get_name()} failed")


def running_tasks() -> set[asyncio.Task[Any]]:
    """The tasks ``start`` launched that have not finished (a copy)."""
    return set(_tasks)


async def cancel_all(timeout: float = 5.0) -> None:
    """Cancel every task ``start`` launched and wait for them (window shutdown, test teardown)."""
    tasks = [t for t in _tasks if not t.done()]
    for t in tasks:
        t.cancel()
    if tasks:
        await asyncio.wait(tasks, timeout=timeout)


# --------------------------------------------------------------------------------------------------
# Dialogs and worker-thread futures


def ask_dialog(dialog: QDialog, *, modal: bool = True) -> asyncio.Future[int]:
    """``open()`` a dialog (window-modal, no nested loop) and return a Future resolved with its result
    code when it finishes. Cancelling the Future rejects (closes) the dialog. ``modal=False`` shows it
    modeless instead (G12: the window stays usable while deciding)."""
    loop = asyncio.get_event_loop()
    fut: asyncio.Future[int] = loop.create_future()

    def finished(code: int) -> None:
        if not fut.done():
            fut.set_result(int(code))

    def on_done(f: asyncio.Future[int]) -> None:
        try:
            dialog.finished.disconnect(finished)
        except (RuntimeError, TypeError):  # the dialog is already gone
            pass
        if f.cancelled():
            try:
                if dialog.isVisible():
                    dialog.reject()
            except RuntimeError:  # C++ object already deleted
                pass

    dialog.finished.connect(finished)
    fut.add_done_callback(on_done)
    if modal:
        dialog.open()
    else:
        dialog.setWindowModality(Qt.WindowModality.NonModal)
        dialog.show()
        dialog.raise_()
        dialog.activateWindow()
    return fut


def release_dialog(dialog: QDialog) -> None:
    """Free a finished dialog, here on the GUI thread: ``deleteLater()`` when Qt owns it (it has a
    parent); a parentless one is deleted now. Left to Python, a dialog caught in a reference cycle
    (slots that close over it) is freed whenever the garbage collector runs — possibly on a worker
    thread (litellm's import allocates plenty), where Qt cannot stop its timers: a crash later on."""
    try:
        if dialog.parent() is not None:
            dialog.deleteLater()
        else:
            shiboken6.delete(dialog)
    except RuntimeError:  # already deleted
        pass


async def run_in_thread(func: Callable[..., T], *args: Any) -> T:
    """Run blocking ``func`` in a short-lived daemon thread and await its result (so closing the loop
    never waits on a default executor)."""
    import threading

    loop = asyncio.get_event_loop()
    fut: asyncio.Future[T] = loop.create_future()

    def deliver(setter: Callable[[Any], None], value: Any) -> None:
        if not fut.done():
            setter(value)

    def work() -> None:
        try:
            result = func(*args)
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting coroutine
            try:
                loop.call_soon_threadsafe(deliver, fut.set_exception, exc)
            except RuntimeError:
                pass
        else:
            try:
                loop.call_soon_threadsafe(deliver, fut.set_result, result)
            except RuntimeError:
                pass

    threading.Thread(target=work, name=f"workbench-{getattr(func, '__name__', 'worker')}", daemon=True).start()
    return await fut


def run(main: Coroutine[Any, Any, T], argv: list[str] | None = None) -> T:
    """Run ``main`` on a qasync loop over the QApplication (Python 3.11: ``asyncio.Runner``)."""
    application(argv)
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        return runner.run(main)


__all__ = [
    "add_error_hook",
    "application",
    "ask_dialog",
    "cancel_all",
    "loop_factory",
    "release_dialog",
    "report_error",
    "run",
    "run_in_thread",
    "running_tasks",
    "start",
]
