"""``os.path.realpath`` with a bound on its work, for a caller that must not stall: the window's GUI thread.

A workspace can hold a chain of symlinks whose targets are long paths through more links; resolving it
is one ``lstat`` a path component, unbounded (thousands of links of thousands of components each: seconds
of system calls). ``realpath(path, max_steps)`` answers exactly what ``os.path.realpath`` answers (the
same algorithm: POSIX ``posixpath._joinrealpath``, non-strict) but raises ``TooManySteps`` once it has
looked at ``max_steps`` path components, and when a chain nests deeper than Python's recursion allows
(where ``os.path.realpath`` raises ``RecursionError``). Elsewhere than POSIX it is ``os.path.realpath``.
"""

from __future__ import annotations

import os
import stat


class TooManySteps(Exception):
    """The path leads through more components (or links within links) than the caller allowed."""


def realpath(path: str, max_steps: int | None = None) -> str:
    """``os.path.realpath(path)``, or ``TooManySteps`` after ``max_steps`` components (None: no bound)."""
    if os.name != "posix":
        return os.path.realpath(path)
    steps = [0]
    try:
        resolved, _ = _join("", os.fspath(path), {}, steps, max_steps)
    except RecursionError:
        raise TooManySteps(f"links nested too deep to follow ({steps[0]} components)") from None
    return os.path.abspath(resolved)


def _join(path: str, rest: str, seen: dict[str, str | None], steps: list[int],
          max_steps: int | None) -> tuple[str, bool]:
    """``posixpath._joinrealpath``: ``path`` (resolved) joined with ``rest``, links followed; False when a
    loop was met (the rest is then joined unresolved, as realpath does)."""
    if os.path.isabs(rest):
        rest = rest[1:]
        path = "/"
    while rest:
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
        steps[0] += 1
        if max_steps is not None and steps[0] > max_steps:
            raise TooManySteps(f"more than {max_steps} path components to follow")
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
        path, ok = _join(path, os.readlink(newpath), seen, steps, max_steps)
        if not ok:
            return os.path.join(path, rest), False
        seen[newpath] = path
    return path, True


__all__ = ["TooManySteps", "realpath"]
