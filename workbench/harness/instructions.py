"""Instruction memory: AGENTS.md files shown to the model as one cacheable section (DESIGN §4, I1–I6).

The files are read through the agent's backend on a run's first model call and kept for that run
(I2). The cache belongs to a *runtime* (one ``run``, ``resume`` or ``recover`` invocation): an entry
is keyed by run id and remembers, by weak reference, the invocation that filled it (``ctx.invocation``,
an opaque token the runtime holds for its lifetime), so a resumed or recovered run — same run id, new
runtime, new token — reads the files again. ``on_run_end`` drops
the entry for any status; the engine does not call it on interrupt, which the runtime check covers.

Placement: the engine puts every cacheable section before the others, in stack order. The stack
builder (``harness/stack.py``) registers this middleware after todos and skills, so its section is
the last cacheable one: editing AGENTS.md leaves the cached prefix (todos guide, skills) intact.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from workbench.backends.base import AccessDenied, BackendRefusal, FileNotFound, NotTextFile, looks_binary
from workbench.backends.guard import PathGuard, guarding
from workbench.engine.middleware import AgentMiddleware, HookContext, Section
from workbench.engine.tokens import estimate_tokens, truncate_to_tokens

__all__ = [
    "GUIDE",
    "InstructionsMiddleware",
    "InstructionsReport",
    "RunCache",
    "load_instructions",
]

SECTION_NAME = "instructions"
GUIDE = (
    "# Instructions (AGENTS.md)\n"
    "Standing instructions from these files, in order; a later file refines an earlier one. Follow them. "
    "To change one, edit it with edit_file on the path in its heading; the change shows from the next run."
)

T = TypeVar("T")


def _runtime_of(ctx: Any) -> Any:
    """The token of the invocation behind a hook context (one per run/resume/recover; it lives as long
    as the engine's runtime, so a weak reference to it dies with the runtime). A test double without
    ``invocation`` is its own key."""
    return getattr(ctx, "invocation", ctx)


class RunCache(Generic[T]):
    """A bounded per-run cache (I2, S2) whose entries are valid only for the runtime that made them."""

    def __init__(self, max_runs: int) -> None:
        if max_runs < 1:
            raise ValueError(f"max_cached_runs must be at least 1, got {max_runs}")
        self.max_runs = max_runs
        self._entries: OrderedDict[str, tuple[Any, T]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    @staticmethod
    def _ref(rt: Any) -> Any:
        try:
            return weakref.ref(rt)
        except TypeError:  # not weak-referenceable (a test double): keep it strongly
            return lambda: rt

    def get(self, ctx: Any) -> T | None:
        """The value cached for this run by this runtime, else None (a stale entry is dropped)."""
        entry = self._entries.get(ctx.run_id)
        if entry is None:
            return None
        ref, value = entry
        if ref() is not _runtime_of(ctx):
            del self._entries[ctx.run_id]
            return None
        self._entries.move_to_end(ctx.run_id)
        return value

    def put(self, ctx: Any, value: T) -> None:
        self._entries[ctx.run_id] = (self._ref(_runtime_of(ctx)), value)
        self._entries.move_to_end(ctx.run_id)
        while len(self._entries) > self.max_runs:
            self._entries.popitem(last=False)

    def drop(self, run_id: str) -> None:
        self._entries.pop(run_id, None)


@dataclass(frozen=True)
class InstructionsReport:
    """What one read produced: the section (None when no file is shown) and every file's fate."""

    section: Section | None
    documents: list[dict[str, Any]] = field(default_factory=list)


def _doc(path: str, fate: str, tokens: int = 0, shown_tokens: int = 0, reason: str = "") -> dict[str, Any]:
    return {"path": path, "fate": fate, "tokens": tokens, "shown_tokens": shown_tokens, "reason": reason}


def _block(heading: str, text: str, marker: str | None) -> str:
    return heading + "\n" + text + ("\n" + marker if marker else "")


def _join(parts: Sequence[str]) -> str:
    return "\n\n".join(parts)


async def _estimated_tokens_of_whole(backend: Any, path: str) -> int:
    """A file's size in tokens, estimated from its byte size (it is too big to tokenize, F3); 0 if unknown."""
    try:
        info = await backend.stat(path)
    except Exception:  # noqa: BLE001 - only the figure shown next to the file's name
        return 0
    return int(info.size) // 4


async def load_instructions(
    backend: Any,
    paths: Sequence[str],
    *,
    max_file_tokens: int = 4000,
    max_total_tokens: int = 8000,
) -> InstructionsReport:
    """Read the files and build the bounded section (I1, I4, I5, F3).

    Of each file at most ``4 × max_file_tokens`` bytes are read (``read_head``), before any
    tokenizing: a longer file is shown cut. A missing or whitespace-only file (a BOM counts as
    whitespace) is skipped; a refused one (by the rules, the root, or the OS: ``AccessDenied``),
    and one that is not a UTF-8 text file (a directory, FIFO, symlink loop, other encoding,
    binary), is skipped and reported with the reason; any other ``BackendIOError`` propagates
    (the step fails and ``recover`` runs it again).
    """
    docs: list[dict[str, Any]] = []
    parts: list[str] = [GUIDE]
    shown = 0
    full = estimate_tokens(GUIDE) >= max_total_tokens
    file_marker = f"[… cut: file over max_file_tokens ({max_file_tokens})]"
    total_marker = f"[… cut: section over max_total_tokens ({max_total_tokens})]"
    max_bytes = 4 * max_file_tokens
    for path in paths:
        if backend is None:
            docs.append(_doc(path, "skipped", reason="the agent has no file backend"))
            continue
        try:
            raw, over_bytes = await backend.read_head(path, max_bytes)
        except FileNotFound:
            docs.append(_doc(path, "skipped", reason="missing"))
            continue
        except (BackendRefusal, AccessDenied) as e:
            # The OS refusing the file (mode 000, another user's) is the file's condition: a retry
            # would fail the same way, so it is reported like a refusal rather than failing every run.
            docs.append(_doc(path, "refused", reason=e.detail or str(e)))
            continue
        except NotTextFile as e:
            docs.append(_doc(path, "skipped", reason=e.detail or str(e)))
            continue
        if looks_binary(raw):
            docs.append(_doc(path, "skipped", reason="binary content (a NUL byte), not text"))
            continue
        # A byte-order mark is never shown and counts as whitespace; CRLF is shown as LF (I5).
        raw = raw.replace("\ufeff", "").replace("\r\n", "\n")
        if not raw.strip():
            docs.append(_doc(path, "skipped", reason="only whitespace"))
            continue
        body = raw.rstrip().lstrip("\r\n")
        tokens = estimate_tokens(body)
        if over_bytes:
            tokens = max(tokens, await _estimated_tokens_of_whole(backend, path))
        if full:
            docs.append(_doc(path, "left_out", tokens, reason=f"the section is full (max_total_tokens {max_total_tokens})"))
            continue
        heading = f"## {path}"
        text, cut = truncate_to_tokens(body, max_file_tokens)
        reasons = [f"over max_file_tokens ({max_file_tokens})"] if cut else []
        if over_bytes:
            cut = True
            reasons = [f"over max_file_tokens ({max_file_tokens}): only its first {max_bytes} bytes were read"]
        block = _block(heading, text, file_marker if cut else None)
        if estimate_tokens(_join([*parts, block])) > max_total_tokens:
            # Cut further so the heading, the text and the marker fit in what the section has left.
            full = True
            budget = max_total_tokens - estimate_tokens(_join([*parts, _block(heading, "", total_marker)]))
            fitted: str | None = None
            for _ in range(8):
                if budget <= 0:
                    break
                candidate, _cut = truncate_to_tokens(text, budget)
                if not candidate.strip():
                    break
                block = _block(heading, candidate, total_marker)
                over = estimate_tokens(_join([*parts, block])) - max_total_tokens
                if over <= 0:
                    fitted = candidate
                    break
                budget -= max(over, 1)
            if fitted is None:
                docs.append(_doc(path, "left_out", tokens, reason=f"the section is full (max_total_tokens {max_total_tokens})"))
                continue
            text, cut = fitted, True
            reasons.append(f"over max_total_tokens ({max_total_tokens})")
        parts.append(block)
        shown += 1
        fate = "cut" if cut else "shown"
        docs.append(_doc(path, fate, tokens, estimate_tokens(text), "; ".join(reasons)))
    section = Section(SECTION_NAME, _join(parts), cacheable=True) if shown else None
    return InstructionsReport(section, docs)


class InstructionsMiddleware(AgentMiddleware):
    """Shows AGENTS.md files (user's, then project's) as one cacheable section; writes no state (I6).

    Register it after todos and skills (see the module docstring).
    """

    writes: frozenset[str] = frozenset()

    def __init__(
        self,
        paths: Sequence[str],
        *,
        max_file_tokens: int = 4000,
        max_total_tokens: int = 8000,
        max_cached_runs: int = 16,
        read_guard: Callable[[Sequence[str]], PathGuard] | None = None,
    ) -> None:
        if max_file_tokens < 1 or max_total_tokens < 1:
            raise ValueError("max_file_tokens and max_total_tokens must be at least 1")
        self.paths = tuple(paths)
        self.max_file_tokens = max_file_tokens
        self.max_total_tokens = max_total_tokens
        self.max_cached_runs = max_cached_runs
        self._cache: RunCache[InstructionsReport] = RunCache(max_cached_runs)
        # The permissions' rules on the paths the backend really opens (P5): a symlinked AGENTS.md
        # never carries a denied file into the prompt.
        self.read_guard = read_guard

    async def sections(self, ctx: HookContext) -> Sequence[Section]:
        report = self._cache.get(ctx)
        if report is None:
            with guarding(self.read_guard(self.paths) if self.read_guard is not None else None):
                report = await load_instructions(
                    ctx.backend, self.paths, max_file_tokens=self.max_file_tokens,
                    max_total_tokens=self.max_total_tokens,
                )
            self._cache.put(ctx, report)
            ctx.emit("documents_reported", source="instructions", documents=[dict(d) for d in report.documents])
        return (report.section,) if report.section is not None else ()

    async def on_run_end(self, status: str, ctx: HookContext) -> None:
        self._cache.drop(ctx.run_id)
