"""``os.path.realpath`` with a bound on its work, for a caller that must not stall: the window's GUI thread.

A workspace can hold a chain of symlinks whose targets are long paths through more links; resolving it
is one ``lstat`` a path component, unbounded (thousands of links of thousands of components each: seconds
of system calls). ``realpath(path, max_steps)`` answers exactly what this Python's ``os.path.realpath``
answers (non-strict, POSIX) — the algorithm of ``posixpath`` up to 3.12 (``_joinrealpath``, recursive),
or from 3.13 on its iterative one, which differs on a path through a symlink loop — but raises
``TooManySteps`` once it has taken ``max_steps`` path components (every one: a name, an empty one, ``.``
or ``..``, each copied or looked at), once the path it resolves grows past ``MAX_PATH_CHARS``, and up to
3.12 when links nest deeper than Python's recursion allows (where ``os.path.realpath`` raises
``RecursionError``). Elsewhere than POSIX it is ``os.path.realpath``.
"""

from __future__ import annotations

import os
import stat
import sys


class TooManySteps(Exception):
    """The path leads through more components (or links within links) than the caller allowed."""


#: The longest resolved path followed under a bound: twice Linux's PATH_MAX. A longer one cannot be
#: opened anyway, and each step copies the path so far: without this, long names through nested links
#: make the work grow with the square of the path (0.5 s and 200 MB within 2,048 steps).
MAX_PATH_CHARS = 8192


class _Steps:
    """The components taken so far, against the bound."""

    __slots__ = ("limit", "taken")

    def __init__(self, limit: int | None) -> None:
        self.limit, self.taken = limit, 0

    def take(self, path: str, count: int = 1) -> None:
        """``count`` more components, the path resolved so far being ``path``."""
        if self.limit is None:
            return
        self.taken += count
        if self.taken > self.limit:
            raise TooManySteps(f"more than {self.limit} path components to follow")
        if len(path) > MAX_PATH_CHARS:
            raise TooManySteps(f"the path grows past {MAX_PATH_CHARS} characters")


def realpath(path: str, max_steps: int | None = None) -> str:
    """``os.path.realpath(path)``, or ``TooManySteps`` after ``max_steps`` components (None: no bound)."""
    if os.name != "posix":
        return os.path.realpath(path)
    path = os.fspath(path)
    steps = _Steps(max_steps)
    if sys.version_info >= (3, 13):
        return _iterative(path, steps)
    try:
        resolved, _ = _join("", path, {}, steps)
    except RecursionError:
        raise TooManySteps(f"links nested too deep to follow ({steps.taken} components)") from None
    return os.path.abspath(resolved)


def _join(path: str, rest: str, seen: dict[str, str | None], steps: _Steps) -> tuple[str, bool]:
    """``posixpath._joinrealpath`` (3.11, 3.12): ``path`` (resolved) joined with ``rest``, links followed;
    False when a loop was met (the rest is then joined unresolved, as realpath does)."""
    if os.path.isabs(rest):
        rest = rest[1:]
        path = "/"
    while rest:
        steps.take(path)
        name, _, rest = rest.partition("/")
        if not name or name == ".":
            continue
        if name == "..":
            if path:
                path, name = os.path.split(path)
                if name == "..":
                    path = os.path.join(path, "..", "..")
            else:
                path = ".."
            continue
        newpath = os.path.join(path, name)
        try:
            is_link = stat.S_ISLNK(os.lstat(newpath).st_mode)
        except OSError:
            is_link = False
        if not is_link:
            path = newpath
            continue
        if newpath in seen:
            known = seen[newpath]
            if known is not None:
                path = known  # already resolved
                continue
            return os.path.join(newpath, rest), False  # a loop: realpath leaves the rest as it is
        seen[newpath] = None  # being resolved
        path, ok = _join(path, os.readlink(newpath), seen, steps)
        if not ok:
            return os.path.join(path, rest), False
        seen[newpath] = path
    return path, True


def _iterative(filename: str, steps: _Steps) -> str:
    """``posixpath.realpath`` from 3.13 on (non-strict): a stack of the parts still to resolve."""
    rest: list[str | None] = filename.split("/")[::-1]
    path = "/" if filename.startswith("/") else os.getcwd()
    steps.take(path, len(rest))  # every part is paid for as it is pushed, before the stack can grow
    seen: dict[str, str | None] = {}
    while rest:
        name = rest.pop()
        if name is None:  # a link's target is resolved: the link itself is next on the stack
            seen[rest.pop()] = path  # type: ignore[index]
            continue
        steps.take(path, 0)
        if not name or name == ".":
            continue
        if name == "..":
            path = path[:path.rindex("/")] or "/"
            continue
        newpath = path + name if path == "/" else path + "/" + name
        try:
            st = os.lstat(newpath)
            if not stat.S_ISLNK(st.st_mode):
                path = newpath
                continue
            if newpath in seen:
                known = seen[newpath]
                path = known if known is not None else newpath  # resolved before, or a loop
                continue
            target = os.readlink(newpath)
        except OSError:
            path = newpath
            continue
        seen[newpath] = None  # being resolved
        if target.startswith("/"):
            path = "/"
        parts = target.split("/")
        steps.take(path, len(parts))
        rest.append(newpath)
        rest.append(None)
        rest.extend(parts[::-1])
    return path


__all__ = ["TooManySteps", "realpath"]
