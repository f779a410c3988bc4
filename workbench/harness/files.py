"""File tools for the model (F1): ls, read_file, write_file, edit_file, glob, grep over a FileBackend.

Each tool names its path argument (``reads`` / ``writes_paths``) so permissions judge the path (P2);
the read-only tools say ``changes_outside=False``. ``write_file`` and ``edit_file`` share the lock
``"files"`` so two edits in one message apply in order (R4). Backend refusals, I/O errors and missing
files come back to the model as error outcomes naming the path; nothing here fails the run.

``ls``, ``glob`` and ``grep`` leave out what the call's rules do not allow reading outright (deny or
ask, P6; the permissions' ``PathGuard``) and end with a note saying how many and under which rule.

``FilesMiddleware.state_backend()`` gives a StateBackend over the state key ``files`` of the run in
flight, so a ``/scratch`` state mount is checkpointed with the thread.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from workbench.backends.base import (
    BackendIOError,
    BackendRefusal,
    EditMismatch,
    FileBackend,
    FileNotFound,
    PathError,
)
from workbench.backends.guard import current_guard, hidden
from workbench.backends.state import StateBackend
from workbench.engine.middleware import AgentMiddleware, ToolContext
from workbench.engine.tools import Tool, ToolOutcome, schema

__all__ = ["FilesMiddleware", "state_backend"]

FILES_KEY = "files"
MAX_LINE_CHARS = 2000  # longer lines are cut in read_file output
MAX_GREP_TEXT = 300  # chars of a matching line shown by grep

_PATH = {"type": "string", "description": "An absolute virtual path, e.g. /project/src/app.py"}


def _error(e: Exception, path: str) -> ToolOutcome:
    """The message the model sees for a backend error (F2: refusals read differently from failures)."""
    if isinstance(e, FileNotFound):
        return ToolOutcome.error(f"Error: {e.path or path} not found")
    if isinstance(e, BackendRefusal):
        return ToolOutcome.error(str(e))  # "Refused: <path>: <why>"
    if isinstance(e, EditMismatch):
        return ToolOutcome.error(f"Error: {e}")
    if isinstance(e, BackendIOError):
        return ToolOutcome.error(f"Error: {e}")
    if isinstance(e, PathError):
        return ToolOutcome.error(f"Error: {e}")
    return ToolOutcome.error(f"Error: {path}: {e}")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _left_out_note() -> str:
    """P6: how many entries the call's rules left out of a search, and under which rule."""
    guard = current_guard()
    if guard is None or not guard.omitted:
        return ""
    total = sum(guard.omitted.values())
    rules = "; ".join(f"{n} under '{rule}'" for rule, n in sorted(guard.omitted.items()))
    return (f"\n[{_plural(total, 'entry')} left out: reading them is not allowed outright ({rules}). "
            "To see one, name its path in read_file, which asks the user or is refused.]")


def state_backend() -> StateBackend:
    """A StateBackend over the state key ``files`` of the run in flight (``CURRENT_RUN``).

    Outside a run it reads as empty and refuses writes.
    """
    from workbench.engine.agent import CURRENT_RUN

    def get_files() -> dict[str, Any]:
        rt = CURRENT_RUN.get()
        if rt is None:
            return {}
        files = rt.state_view().get(FILES_KEY, {})
        return files if isinstance(files, dict) else {}

    def set_files(new: dict[str, Any]) -> None:
        rt = CURRENT_RUN.get()
        if rt is None:
            raise BackendRefusal("/", "state files can only be written during a run")
        rt.write_state(FILES_KEY, new)

    return StateBackend(get_files, set_files)


class FilesMiddleware(AgentMiddleware):
    """Contributes the file tools over ``backend``; owns the state key ``files`` (state-mounted files)."""

    writes = frozenset({FILES_KEY})
    state_defaults = {FILES_KEY: {}}

    def __init__(self, backend: FileBackend, *, max_read_lines: int = 2000, max_results: int = 200,
                 max_listed: int = 1000, readable: Callable[[str], bool] | None = None) -> None:
        self.backend = backend
        # Searches reach files below the path they were allowed on: ls, glob and grep leave out what
        # ``readable`` refuses (the permissions' deny-read rules), so a search never leaks a denied file.
        self.readable = readable or (lambda _path: True)
        self.max_read_lines = max(1, int(max_read_lines))
        self.max_results = max(1, int(max_results))
        self.max_listed = max(1, int(max_listed))
        self._tools = self._build_tools()

    def _visible(self, path: str) -> bool:
        """True if a search may show ``path``: under a tool call's guard, only what its rules allow
        outright (P6, counted for the note); otherwise what ``readable`` allows."""
        if current_guard() is not None:
            return not hidden(path)
        return self.readable(path)

    @classmethod
    def state_backend(cls) -> StateBackend:
        """A StateBackend wired to the current run's ``files`` state key (see module ``state_backend``)."""
        return state_backend()

    def tools(self) -> Sequence[Tool]:
        return self._tools

    # ------------------------------------------------------------------------------------- tools

    def _build_tools(self) -> tuple[Tool, ...]:
        n = self.max_read_lines
        return (
            Tool("ls", "List a directory: its files (with sizes) and sub-directories (ending in /).",
                 schema({"path": {**_PATH, "default": "/"}}), self._ls, reads=("path",), changes_outside=False),
            Tool("read_file",
                 f"Read a text file with line numbers (like cat -n). offset is the 0-based first line; "
                 f"limit the number of lines (at most {n}). Read long files in pieces.",
                 schema({"path": _PATH,
                         "offset": {"type": "integer", "minimum": 0, "default": 0},
                         "limit": {"type": "integer", "minimum": 1, "default": n}}, ["path"]),
                 self._read, reads=("path",), changes_outside=False),
            Tool("write_file", "Create or overwrite a file with the given content (parent folders are created).",
                 schema({"path": _PATH, "content": {"type": "string"}}, ["path", "content"]),
                 self._write, lock="files", writes_paths=("path",)),
            Tool("edit_file",
                 "Replace exact text in a file. old_string must match exactly once (whitespace included) "
                 "unless replace_all is true. Read the file first.",
                 schema({"path": _PATH, "old_string": {"type": "string"}, "new_string": {"type": "string"},
                         "replace_all": {"type": "boolean", "default": False}},
                        ["path", "old_string", "new_string"]),
                 self._edit, lock="files", writes_paths=("path",)),
            Tool("glob", "Find files by glob pattern (** any depth, * and ? within a name) under path.",
                 schema({"pattern": {"type": "string"}, "path": {**_PATH, "default": "/"}}, ["pattern"]),
                 self._glob, reads=("path",), changes_outside=False),
            Tool("grep",
                 "Search file contents with a regular expression under path (a folder or a file); glob "
                 "filters file names (e.g. *.py). Results are path:line: text.",
                 schema({"pattern": {"type": "string"}, "path": {**_PATH, "default": "/"},
                         "glob": {"type": ["string", "null"], "default": None}}, ["pattern"]),
                 self._grep, reads=("path",), changes_outside=False),
        )

    async def _ls(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome | str:
        path = args.get("path") or "/"
        try:
            entries = await self.backend.list(path)
        except (PathError, ValueError) as e:
            return _error(e, path)
        entries = [e for e in entries if self._visible(e.path)]
        if not entries:
            return f"{path} is an empty directory." + _left_out_note()
        lines = [f"{e.path}/" if e.is_dir else f"{e.path} ({_plural(e.size, 'byte')})"
                 for e in entries[: self.max_listed]]
        if len(entries) > self.max_listed:
            lines.append(f"… {len(entries) - self.max_listed} more entries not shown; use glob to narrow down.")
        return "\n".join(lines) + _left_out_note()

    async def _read(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome | str:
        path = args["path"]
        offset = int(args.get("offset") or 0)
        limit = min(int(args.get("limit") or self.max_read_lines), self.max_read_lines)
        try:
            text = await self.backend.read(path)
        except (PathError, ValueError) as e:
            return _error(e, path)
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        total = len(lines)
        if total == 0:
            return f"{path} is empty."
        if offset >= total:
            return ToolOutcome.error(f"Error: offset {offset} is past the end of {path} "
                                     f"({_plural(total, 'line')}); use an offset below {total}.")
        chunk = lines[offset : offset + limit]
        out = []
        for no, line in enumerate(chunk, offset + 1):
            line = line.rstrip("\r")
            if len(line) > MAX_LINE_CHARS:
                line = line[:MAX_LINE_CHARS] + f"… [line cut at {MAX_LINE_CHARS} characters]"
            out.append(f"{no:>6}\t{line}")
        end = offset + len(chunk)
        if end < total:
            out.append(f"… {_plural(total - end, 'more line')} ({total} in all). Read on with "
                       f"read_file(path={path!r}, offset={end}, limit={limit}).")
        return "\n".join(out)

    async def _write(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome | str:
        path, content = args["path"], args["content"]
        try:
            await self.backend.write(path, content)
        except (PathError, ValueError) as e:
            return _error(e, path)
        return f"Wrote {path} ({_plural(len(content.encode('utf-8', 'surrogatepass')), 'byte')})."

    async def _edit(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome | str:
        path = args["path"]
        try:
            count = await self.backend.edit(path, args["old_string"], args["new_string"],
                                            bool(args.get("replace_all", False)))
        except (PathError, ValueError) as e:
            return _error(e, path)
        return f"Edited {path}: {_plural(count, 'replacement')}."

    async def _glob(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome | str:
        pattern, path = args["pattern"], args.get("path") or "/"
        try:
            paths = [p for p in await self.backend.glob(pattern, path) if self._visible(p)]
        except (PathError, ValueError) as e:
            return _error(e, path)
        if not paths:
            return f"No files match {pattern!r} under {path}." + _left_out_note()
        shown = paths[: self.max_listed]
        if len(paths) > len(shown):
            shown.append(f"… {len(paths) - len(shown)} more files not shown; use a narrower pattern.")
        return "\n".join(shown) + _left_out_note()

    async def _grep(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome | str:
        pattern, path, glob = args["pattern"], args.get("path") or "/", args.get("glob")
        try:
            found = await self.backend.grep(pattern, path, glob)
        except (PathError, ValueError) as e:
            return _error(e, path)
        visible: dict[str, bool] = {}  # one verdict (and one count) per file, not per line
        matches = [m for m in found if visible.setdefault(m.path, self._visible(m.path))]
        if not matches:
            where = f"{path} (files matching {glob!r})" if glob else path
            return f"No matches for {pattern!r} under {where}." + _left_out_note()
        out = []
        for m in matches[: self.max_results]:
            text = m.text if len(m.text) <= MAX_GREP_TEXT else m.text[:MAX_GREP_TEXT] + "…"
            out.append(f"{m.path}:{m.line}: {text}")
        if len(matches) > self.max_results:
            out.append(f"… {len(matches) - self.max_results} more matches not shown "
                       f"(showing the first {self.max_results}); narrow the pattern, path or glob.")
        return "\n".join(out) + _left_out_note()
