"""The file backend contract (F1) and the helpers every backend shares.

Paths are *virtual*: absolute, POSIX-style, starting with ``/``. A backend returns its value on
success and raises one of three kinds of error, which callers must tell apart (F2, I5, S6):

- ``BackendRefusal``: the backend will not do it (read-only, path outside the root, no mount).
- ``FileNotFound``: the file is simply not there (instruction files and skills skip it).
- ``BackendIOError``: a real failure (OS error, undecodable text, database error).
"""

from __future__ import annotations

import abc
import re
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol

import re2

from workbench.errors import (
    AccessDenied,
    BackendIOError,
    BackendRefusal,
    EditMismatch,
    FileNotFound,
    LinksTooDeep,
    NotTextFile,
    PathError,
)

__all__ = [
    "BackendIOError",
    "BackendRefusal",
    "EditMismatch",
    "FileBackend",
    "FileInfo",
    "FileNotFound",
    "GrepMatch",
    "LinksTooDeep",
    "MAX_PATTERN_CHARS",
    "NotTextFile",
    "AccessDenied",
    "PathError",
    "ancestors",
    "apply_edit",
    "check_pattern_length",
    "compile_grep",
    "glob_files",
    "glob_regex",
    "grep_filter",
    "grep_text",
    "head_of_bytes",
    "head_of_text",
    "is_under",
    "join",
    "looks_binary",
    "normalize",
    "path_rule_regex",
    "relative",
    "require_text",
    "shown_pattern",
    "split_glob",
    "strip_glob_prefix",
    "tree_children",
]


# --------------------------------------------------------------------------------------------- errors


# Defined with the rest of the hierarchy in workbench.errors (the UI catches them there).


# ---------------------------------------------------------------------------------------- values


@dataclass(frozen=True)
class FileInfo:
    """One file or directory. ``size`` is in bytes of UTF-8 (0 for directories)."""

    path: str
    is_dir: bool
    size: int
    modified: float


@dataclass(frozen=True)
class GrepMatch:
    """One matching line: ``line`` is 1-based, ``text`` has no line ending."""

    path: str
    line: int
    text: str


# ------------------------------------------------------------------------------------------ paths


def normalize(path: str) -> str:
    """The canonical form of a virtual path: ``/a/b``, no ``.``, ``..``, ``//`` or trailing ``/``.

    ``..`` is resolved lexically; one that would climb above ``/`` is a refusal, as is a relative
    path or one with a NUL character.
    """
    if not isinstance(path, str) or not path.startswith("/"):
        raise BackendRefusal(str(path), "not an absolute virtual path (it must start with '/')")
    if "\x00" in path:
        raise BackendRefusal(path.replace("\x00", "\\0"), "path contains a NUL character")
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                raise BackendRefusal(path, "path leaves the root")
            parts.pop()
        else:
            parts.append(part)
    return "/" + "/".join(parts)


def join(base: str, rel: str) -> str:
    """``base`` (normalized) joined with a relative ``rel`` (may be empty)."""
    if not rel:
        return base
    return base.rstrip("/") + "/" + rel


def is_under(path: str, prefix: str) -> bool:
    """True if normalized ``path`` is ``prefix`` or inside it."""
    return prefix == "/" or path == prefix or path.startswith(prefix + "/")


def relative(path: str, base: str) -> str:
    """``path`` relative to ``base`` (``path`` must be under it); ``""`` when equal."""
    if path == base:
        return ""
    return path[1:] if base == "/" else path[len(base) + 1 :]


# ------------------------------------------------------------------------------------------ globs

_MAGIC = re.compile(r"[*?\[{]")


def segment_regex(seg: str) -> str:
    """Regex for one path segment: ``*``, ``?``, ``[abc]``/``[!abc]`` and ``{a,b}``; never crosses '/'."""
    out: list[str] = []
    i, n = 0, len(seg)
    while i < n:
        c = seg[i]
        if c == "*":
            while i + 1 < n and seg[i + 1] == "*":
                i += 1
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = i + 1
            if j < n and seg[j] in "!^":
                j += 1
            if j < n and seg[j] == "]":
                j += 1
            while j < n and seg[j] != "]":
                j += 1
            if j >= n:
                out.append(re.escape(c))
            else:
                body = seg[i + 1 : j]
                neg = body[:1] in ("!", "^")
                if neg:
                    body = body[1:]
                body = body.replace("\\", "\\\\").replace("[", "\\[")
                out.append(("[^/" if neg else "[") + body + "]")
                i = j
        elif c == "{":
            j = seg.find("}", i)
            if j < 0:
                out.append(re.escape(c))
            else:
                alts = seg[i + 1 : j].split(",")
                out.append("(?:" + "|".join(segment_regex(a) for a in alts) + ")")
                i = j
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def _segments(pattern: str) -> list[str]:
    return [s for s in pattern.split("/") if s not in ("", ".")]


class Matcher(Protocol):
    """A compiled pattern: ``re.Pattern`` or an RE2 pattern (same ``search``/``fullmatch``)."""

    def search(self, text: str) -> Any: ...

    def fullmatch(self, text: str) -> Any: ...


def _re2_options(dot_nl: bool) -> Any:
    opts = re2.Options()
    opts.log_errors = False  # a refused pattern is our error message, not a line on stderr
    opts.dot_nl = dot_nl
    return opts


#: The longest glob or rule pattern accepted (characters): RE2's work grows with the pattern, so a
#: pattern of megabytes would still cost seconds a path. Linux's PATH_MAX is 4096 too.
MAX_PATTERN_CHARS = 4096


def shown_pattern(pattern: str) -> str:
    """``pattern`` quoted for an error message, cut after 40 characters (it may be 100 KB long)."""
    return repr(pattern if len(pattern) <= 40 else pattern[:40] + "…")


def check_pattern_length(pattern: str, what: str = "glob pattern") -> None:
    """ValueError if ``pattern`` is longer than MAX_PATTERN_CHARS (F3: bounded work per path)."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise ValueError(f"{what} {shown_pattern(pattern)} is too long: {len(pattern)} characters "
                         f"(at most {MAX_PATTERN_CHARS}); use a shorter pattern")


def linear_regex(regex: str, *, pattern: str | None = None, what: str = "glob pattern") -> Matcher:
    """``regex`` (as built from glob ``pattern``) compiled by RE2: linear time, so a pattern full of
    ``**`` can never backtrack for seconds (F3).

    What RE2 refuses (too large, a bad class range) is a ValueError naming the pattern and RE2's
    reason. Never Python's ``re`` instead: it backtracks exponentially on such patterns, holding the
    GIL, so neither Stop nor the walk's time limit could end it.
    """
    try:
        return re2.compile(regex, _re2_options(True))
    except re2.error as exc:
        reason = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
    shown = shown_pattern(regex if pattern is None else pattern)
    raise ValueError(f"{what} {shown} cannot be used: {reason}; fix or simplify the pattern") from None


@lru_cache(maxsize=256)
def glob_regex(pattern: str) -> Matcher:
    """Compile a relative glob to a regex matched (fullmatch) against relative file paths.

    ``**`` as a whole segment spans any number of directories (zero included); ``*`` and ``?``
    stay inside one segment and match dot-files too. A pattern over MAX_PATTERN_CHARS or one RE2
    refuses is a ValueError (F3).
    """
    check_pattern_length(pattern)
    segs = _segments(pattern)
    out: list[str] = []
    for i, seg in enumerate(segs):
        last = i == len(segs) - 1
        if seg == "**":
            out.append(".*" if last else "(?:[^/]+/)*")
        else:
            out.append(segment_regex(seg) + ("" if last else "/"))
    return linear_regex("".join(out), pattern=pattern)


@lru_cache(maxsize=512)
def path_rule_regex(pattern: str) -> Matcher:
    """Compile a permission rule's path glob (P1), matched (fullmatch) against a virtual path.

    A relative pattern matches at any depth; ``**`` spans any number of folders. RE2, so a pattern
    with many ``**`` costs microseconds a path (F3); too long or refused by RE2 is a ValueError.
    """
    check_pattern_length(pattern, "rule pattern")
    full = unicodedata.normalize("NFC", pattern)
    if not full.startswith("/"):
        full = "/**/" + full
    out: list[str] = []
    for seg in (s for s in full.split("/") if s not in ("", ".")):
        out.append("(?:/[^/]+)*" if seg == "**" else "/" + segment_regex(seg))
    return linear_regex("".join(out), pattern=pattern, what="rule pattern")


@lru_cache(maxsize=256)
def _segment_matcher(seg: str) -> Matcher:
    """One glob segment, compiled in linear time (``*a*a*a*b`` never backtracks)."""
    check_pattern_length(seg)
    return linear_regex(segment_regex(seg), pattern=seg)


def split_glob(pattern: str, path: str = "/") -> tuple[str, str]:
    """Split a glob into a normalized base directory and a relative pattern without literal head.

    A relative pattern is taken from ``path``; an absolute one (``/src/**/*.py``) ignores it.
    Literal leading segments move into the base, so ``src/*.py`` from ``/`` walks only ``/src``.
    """
    if pattern.startswith("/"):
        base_parts: list[str] = ["/"]
    else:
        base_parts = [normalize(path)]
    segs = pattern.split("/")
    i = 0
    while i < len(segs) and not _MAGIC.search(segs[i]):
        base_parts.append(segs[i])
        i += 1
    base = normalize("/".join(base_parts))
    rel = "/".join(_segments("/".join(segs[i:])))
    return base, rel


def strip_glob_prefix(pattern: str, prefix: str) -> list[str]:
    """The relative patterns that match what lies under ``prefix`` (a relative dir path).

    Used to hand a glob over ``/`` down to a mount at ``/project``: ``**/*.py`` stripped of
    ``project`` gives ``**/*.py`` and ``*.py``; ``docs/*`` stripped of ``project`` gives nothing.
    An empty pattern in the result means the prefix itself matched.
    """
    pat = _segments(pattern)
    pre = _segments(prefix)
    found: set[tuple[str, ...]] = set()
    seen: set[tuple[int, int]] = set()

    def walk(i: int, j: int) -> None:
        if (i, j) in seen:
            return
        seen.add((i, j))
        if j == len(pre):
            found.add(tuple(pat[i:]))
            return
        if i == len(pat):
            return
        if pat[i] == "**":
            walk(i + 1, j)
            walk(i, j + 1)
        elif _segment_matcher(pat[i]).fullmatch(pre[j]):
            walk(i + 1, j + 1)

    walk(0, 0)
    # "**/x" already covers "x": keep only the wider one.
    kept = {p for p in found if ("**", *p) not in found}
    return sorted("/".join(p) for p in kept)


def glob_files(paths: Iterable[str], pattern: str, path: str = "/") -> list[str]:
    """Filter normalized file paths by a glob taken from ``path``; sorted, for in-memory backends."""
    paths = list(paths)
    base, rel = split_glob(pattern, path)
    if not rel:
        return [base] if base in paths else []
    rx = glob_regex(rel)
    return sorted(p for p in paths if p != base and is_under(p, base) and rx.fullmatch(relative(p, base)))


# ------------------------------------------------------------------------------------------- grep


_RE2_REFUSED = (
    (re.compile(r"\\[1-9]|\(\?P=|\\k<|\\g<"), "a backreference"),
    (re.compile(r"\(\?<?[=!]"), "a lookahead or lookbehind"),
    (re.compile(r"\(\?>"), "an atomic group"),
    (re.compile(r"[*+?}][+]"), "a possessive quantifier"),
    (re.compile(r"\(\?\("), "a conditional group"),
)


def compile_grep(pattern: str) -> Matcher:
    """Compile a grep regex with RE2 (linear time in the text, whatever the pattern: F3).

    A pattern RE2 refuses is a ValueError naming the construct (backreferences, lookaround, …) and
    saying what to do; any other invalid pattern is a ValueError with the parser's reason.
    """
    if not isinstance(pattern, str):
        raise ValueError(f"Invalid regular expression {pattern!r}: it must be a string")
    try:
        return re2.compile(pattern, _re2_options(False))
    except re2.error as exc:
        reason = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
    for rx, what in _RE2_REFUSED:
        found = rx.search(pattern)
        if found:
            raise ValueError(
                f"Unsupported regular expression {pattern!r}: {what} ({found.group(0)!r}) is not supported; "
                "grep uses RE2, which runs in linear time and has no backreferences or lookaround. "
                "Rewrite the pattern without it (e.g. search a simpler pattern and read the file)."
            ) from None
    raise ValueError(f"Invalid regular expression {pattern!r}: {reason}") from None


def grep_filter(glob: str | None) -> Callable[[str], bool]:
    """A predicate on a file's path relative to the grep root.

    ``None`` keeps everything; a glob without ``/`` (``*.py``) matches the file name at any depth;
    one with ``/`` (``src/**/*.py``) matches the whole relative path.
    """
    if not glob:
        return lambda rel: True
    rx = glob_regex(glob)
    if "/" in glob.strip("/"):
        return lambda rel: rx.fullmatch(rel) is not None
    return lambda rel: rx.fullmatch(rel.rsplit("/", 1)[-1]) is not None


def grep_text(path: str, text: str, rx: Matcher) -> list[GrepMatch]:
    """Every line of ``text`` that ``rx`` matches (``search``); lines split on ``\\n`` only.

    Checks the walk's time limit and Stop every few thousand lines (F3).
    """
    from workbench.backends.guard import walk_tick

    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    out: list[GrepMatch] = []
    for no, line in enumerate(lines, 1):
        if not no & 0xFFF:
            walk_tick(path)
        if line.endswith("\r"):
            line = line[:-1]
        if rx.search(line):
            out.append(GrepMatch(path, no, line))
    return out


def head_of_bytes(v: str, data: bytes, max_bytes: int) -> tuple[str, bool]:
    """Decode the first ``max_bytes`` of ``data`` (read as ``max_bytes + 1``): the text and whether it
    was cut. A character split by the cut is dropped; bytes that are not UTF-8 are ``NotTextFile``."""
    cut = len(data) > max_bytes
    data = data[:max_bytes]
    try:
        return data.decode("utf-8"), cut
    except UnicodeDecodeError as exc:
        if cut and exc.reason == "unexpected end of data" and exc.start >= len(data) - 3:
            return data[: exc.start].decode("utf-8"), cut
        raise NotTextFile(v, f"not UTF-8 text (bad byte at offset {exc.start})") from exc


def head_of_text(v: str, text: str, max_bytes: int) -> tuple[str, bool]:
    """``head_of_bytes`` for text already in memory (state and store backends)."""
    return head_of_bytes(v, text[: max_bytes + 1].encode("utf-8", "surrogatepass"), max_bytes)


def looks_binary(text: str) -> bool:
    """True for content grep should skip (a NUL in the first 8 KiB)."""
    return "\x00" in text[:8192]


# ------------------------------------------------------------------------------------------- edit


def apply_edit(path: str, text: str, old: str, new: str, replace_all: bool) -> tuple[str, int]:
    """Replace ``old`` by ``new`` in ``text``: the new text and the count, or EditMismatch."""
    if old == "":
        raise EditMismatch(path, "the text to replace is empty; give the exact text to change")
    count = text.count(old)
    if count == 0:
        raise EditMismatch(path, "the text to replace was not found (it must match exactly, whitespace included)")
    if count > 1 and not replace_all:
        raise EditMismatch(
            path,
            f"the text to replace matched {count} times; give more surrounding context to make it "
            "unique, or set replace_all to replace every occurrence",
        )
    return text.replace(old, new), count


def require_text(content: object) -> None:
    """TypeError unless ``content`` is a str (a backend stores text, not bytes or objects)."""
    if not isinstance(content, str):
        raise TypeError(f"file content must be str, not {type(content).__name__}")


def tree_children(base: str, files: Iterable[tuple[str, int, float]]) -> list[FileInfo] | None:
    """Direct children of ``base`` among flat ``(path, size, modified)`` files, dirs implied by prefixes.

    None when nothing lies under ``base`` (it is not a directory).
    """
    kids: dict[str, FileInfo] = {}
    any_under = False
    for p, size, modified in files:
        if p == base or not is_under(p, base):
            continue
        any_under = True
        rest = relative(p, base)
        name, sep, _ = rest.partition("/")
        child = join(base, name)
        if sep:
            prev = kids.get(child)
            m = max(modified, prev.modified) if prev else modified
            kids[child] = FileInfo(child, True, 0, m)
        else:
            kids[child] = FileInfo(child, False, size, modified)
    if not any_under and base != "/":
        return None
    return [kids[k] for k in sorted(kids, key=lambda k: k.rsplit("/", 1)[-1])]


def ancestors(path: str) -> list[str]:
    """The proper ancestor directories of ``path`` except ``/``: ``/a/b/c`` → ``/a``, ``/a/b``."""
    parts = path.strip("/").split("/")
    return ["/" + "/".join(parts[:i]) for i in range(1, len(parts))]


# ---------------------------------------------------------------------------------------- backend


class FileBackend(abc.ABC):
    """Files over virtual paths (F1). Success returns a value; refusals and failures raise (F2)."""

    @property
    def readonly(self) -> bool:
        """True when every write will be refused."""
        return False

    @abc.abstractmethod
    async def read(self, path: str) -> str:
        """The file's text. FileNotFound if missing; BackendIOError for a directory or bad bytes."""

    async def read_head(self, path: str, max_bytes: int) -> tuple[str, bool]:
        """At most the first ``max_bytes`` bytes of the file as text, and whether the file is longer (F3).

        For untrusted files (AGENTS.md, SKILL.md): the cost is bounded by ``max_bytes``, not by the
        file. A character cut in half at the end is dropped. Errors as ``read``; this default reads
        the whole file (fine for backends that hold it in memory) and a disk backend overrides it.
        """
        if max_bytes < 0:
            raise ValueError(f"max_bytes must be at least 0, got {max_bytes}")
        return head_of_text(normalize(path), await self.read(path), max_bytes)

    @abc.abstractmethod
    async def write(self, path: str, content: str) -> None:
        """Create or replace the file, creating parent directories."""

    @abc.abstractmethod
    async def edit(self, path: str, old: str, new: str, replace_all: bool = False) -> int:
        """Replace exact text ``old`` by ``new``; the number replaced, or EditMismatch."""

    @abc.abstractmethod
    async def list(self, path: str) -> list[FileInfo]:
        """Direct children of a directory, sorted by name (a file lists as itself)."""

    @abc.abstractmethod
    async def glob(self, pattern: str, path: str = "/") -> list[str]:
        """Sorted virtual paths of files matching ``pattern`` (``**``, ``*``, ``?``) under ``path``."""

    @abc.abstractmethod
    async def grep(self, pattern: str, path: str = "/", glob: str | None = None) -> list[GrepMatch]:
        """Lines matching regex ``pattern`` in files under ``path`` (or the file), filtered by ``glob``.

        Sorted by path then line; binary files are skipped; an invalid regex is a ValueError.
        """

    @abc.abstractmethod
    async def stat(self, path: str) -> FileInfo:
        """Info on a file or directory; FileNotFound if missing."""

    async def target(self, path: str) -> str:
        """The normalized virtual path this backend would actually touch for ``path`` (P5).

        The same path unless a symlink inside the root leads elsewhere: then the virtual path of
        its target (for a file not there yet, of its resolved parent). Permissions judge both.
        """
        return normalize(path)

    async def exists(self, path: str) -> bool:
        """True if a file or directory is there (a refused path still raises)."""
        try:
            await self.stat(path)
        except FileNotFound:
            return False
        return True
