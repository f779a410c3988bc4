"""What a backend checks at the moment it touches a path: the call's guard (P5, P6) and walk limits (F3).

The permission rules are judged before a tool runs, on the paths as the model named them. A symlink
can make the backend touch another path, and the link can change between that check and the open
(TOCTOU). So the permissions middleware also installs a ``PathGuard`` for the duration of each tool
call, and the backends call ``check`` with the *resolved* path they are about to open, and ``hidden``
for every entry a search would show. The guard lives in a context variable: it follows the call
into ``asyncio.to_thread`` workers, and a composite backend adds its mount point with ``mounted`` so
the guard always sees full virtual paths.

Walks (grep, glob) also run under a ``WalkLimit``: a deadline and a cancel flag set when the awaiting
task is cancelled (Stop), checked between files and every few thousand lines (``walk_tick``).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TypeVar

from workbench.errors import BackendIOError, BackendRefusal

__all__ = [
    "PathGuard",
    "WALK_SECONDS",
    "WalkLimit",
    "check",
    "current_guard",
    "guarding",
    "hidden",
    "mounted",
    "run_walk",
    "walk_tick",
]

T = TypeVar("T")


@dataclass
class PathGuard:
    """The rules of one tool call, as the backend applies them at open time.

    ``refusal(action, path)`` returns None to go ahead or the reason to refuse; ``hidden_by(path)``
    returns None when a search may show ``path``, else the rule that hides it. ``omitted`` counts the
    entries left out per rule, for the tool's closing note (P6).
    """

    refusal: Callable[[str, str], str | None]
    hidden_by: Callable[[str], str | None]
    omitted: Counter[str] = field(default_factory=Counter)
    #: ``hidden_by``'s answers so far: a listing's entries are asked about by the backend and again by
    #: the tool (issue 9); a guard lives for one call, and the answer depends on the path alone.
    answers: dict[str, str | None] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class _Bound:
    guard: PathGuard
    prefix: str  # the mount point the backend in hand is mounted at ("" at the top)

    def full(self, path: str) -> str:
        if not self.prefix:
            return path
        return self.prefix if path == "/" else self.prefix + path


_CURRENT: ContextVar[_Bound | None] = ContextVar("workbench_path_guard", default=None)


def current_guard() -> PathGuard | None:
    """The guard of the tool call in flight, if any."""
    b = _CURRENT.get()
    return b.guard if b is not None else None


@contextlib.contextmanager
def guarding(guard: PathGuard | None) -> Iterator[None]:
    """Install ``guard`` for the code inside (a tool call); None removes any guard."""
    token = _CURRENT.set(_Bound(guard, "") if guard is not None else None)
    try:
        yield
    finally:
        _CURRENT.reset(token)


@contextlib.contextmanager
def mounted(point: str) -> Iterator[None]:
    """Paths checked inside are relative to mount ``point`` (a composite delegating to a mount)."""
    b = _CURRENT.get()
    if b is None or point == "/":
        yield
        return
    token = _CURRENT.set(_Bound(b.guard, b.prefix + point))
    try:
        yield
    finally:
        _CURRENT.reset(token)


def check(action: str, path: str) -> None:
    """BackendRefusal unless the guard lets ``action`` touch ``path`` (a path of the calling backend)."""
    b = _CURRENT.get()
    if b is None:
        return
    why = b.guard.refusal(action, b.full(path))
    if why:
        raise BackendRefusal(path, why)


_UNASKED: Any = object()
MAX_ANSWERS = 1024


def hidden(path: str) -> bool:
    """True (and counted) when a search must leave ``path`` out (P6)."""
    b = _CURRENT.get()
    if b is None:
        return False
    full = b.full(path)
    answers = b.guard.answers
    rule = answers.get(full, _UNASKED)
    if rule is _UNASKED:
        rule = b.guard.hidden_by(full)
        if len(answers) < MAX_ANSWERS:  # a walk over a large tree asks once per file: no use keeping those
            answers[full] = rule
    if rule is None:
        return False
    b.guard.omitted[rule] += 1
    return True


# ------------------------------------------------------------------------------------- walk limits

WALK_SECONDS = 20.0
"""The hard time limit of one grep or glob walk (F3)."""


@dataclass
class WalkLimit:
    """A deadline and a cancel flag for one walk; ``what`` names it in the error."""

    what: str
    seconds: float
    deadline: float
    cancelled: threading.Event = field(default_factory=threading.Event)


_WALK: ContextVar[WalkLimit | None] = ContextVar("workbench_walk_limit", default=None)


def walk_tick(path: str = "/") -> None:
    """Raise BackendIOError if the walk in flight ran out of time or was stopped."""
    w = _WALK.get()
    if w is None:
        return
    if w.cancelled.is_set():
        raise BackendIOError(path, f"{w.what} was stopped")
    if time.monotonic() > w.deadline:
        raise BackendIOError(path, f"{w.what} took longer than {w.seconds:g} s and was ended; "
                                   "search a narrower path or glob, or a simpler pattern")


async def run_walk(what: str, fn: Callable[..., T], *args: Any, seconds: float | None = None) -> T:
    """Run blocking ``fn(*args)`` in a worker thread under a time limit; the event loop stays free.

    If the awaiting task is cancelled (Stop), the worker is told to stop at its next ``walk_tick``
    and the cancellation goes on at once.
    """
    limit = seconds if seconds is not None else WALK_SECONDS
    w = WalkLimit(what, limit, time.monotonic() + limit)
    token = _WALK.set(w)
    try:
        return await asyncio.to_thread(fn, *args)  # to_thread copies the context, limit included
    except asyncio.CancelledError:
        w.cancelled.set()
        raise
    finally:
        _WALK.reset(token)
