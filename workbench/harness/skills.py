"""Skills: folders with a SKILL.md, listed by name and description in one cacheable section (S1–S6).

``scan_skills`` finds the skills under the sources (the UI's Skills panel calls it too);
``SkillsMiddleware`` scans on a run's first model call, caches the result for the run like the
instruction files (S2, see ``instructions.RunCache``), lists the skills and reports every skipped
one in a durable ``documents_reported`` event. Of each SKILL.md only its YAML frontmatter counts,
and only within the first ``FRONTMATTER_MAX_CHARS`` characters (S4): the backend's bounded
``read_head`` reads at most ``FRONTMATTER_MAX_BYTES`` of it, so a huge SKILL.md costs no more than a
small one (F3); a frontmatter that does not close within the cap is malformed.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from workbench.backends.base import AccessDenied, BackendRefusal, FileNotFound, NotTextFile, PathError, join, looks_binary
from workbench.backends.guard import PathGuard, guarding
from workbench.backends.host import OUTSIDE_REASON, noting_links_outside
from workbench.config import YAML_VALUE_ERRORS
from workbench.engine.messages import ToolCall
from workbench.engine.middleware import AgentMiddleware, CallTool, HookContext, Section, ToolContext
from workbench.engine.tokens import estimate_tokens
from workbench.engine.tools import NeedsApproval, ToolOutcome
from workbench.harness.instructions import RunCache

__all__ = [
    "FRONTMATTER_MAX_BYTES",
    "FRONTMATTER_MAX_CHARS",
    "MAX_NAME_CHARS",
    "SkillFormatError",
    "SkillInfo",
    "SkillScan",
    "SkillsMiddleware",
    "SkippedSkill",
    "parse_skill",
    "render_skills",
    "scan_skills",
]

log = logging.getLogger(__name__)

FRONTMATTER_MAX_CHARS = 4096
"""The most characters of a SKILL.md examined for its frontmatter (S4)."""
FRONTMATTER_MAX_BYTES = 4 * (FRONTMATTER_MAX_CHARS + 1)
"""The most bytes of a SKILL.md ever read (F3): enough for ``FRONTMATTER_MAX_CHARS + 1`` characters."""
MAX_NAME_CHARS = 128
SECTION_NAME = "skills"
GUIDE = (
    "# Skills\n"
    "Skills are folders of instructions for particular tasks. When a task matches a skill's description, "
    "load the skill first: call read_file on its SKILL.md path below, then follow it (it may point to "
    "other files in its folder)."
)


class SkillFormatError(ValueError):
    """A SKILL.md whose frontmatter is missing, unterminated, not YAML, or lacks a required field."""


@dataclass(frozen=True)
class SkillInfo:
    """One listed skill: its frontmatter fields and where its SKILL.md lives."""

    name: str
    description: str
    path: str
    source: str
    allowed_tools: tuple[str, ...] = ()
    license: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "path": self.path, "source": self.source,
                "allowed_tools": list(self.allowed_tools), "license": self.license, "metadata": dict(self.metadata)}


@dataclass(frozen=True)
class SkippedSkill:
    """A skill (or a source) not listed: fate is shadowed, malformed, unlisted, unreadable or refused."""

    path: str
    name: str
    fate: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "name": self.name, "fate": self.fate, "reason": self.reason}


@dataclass
class SkillScan:
    """What a scan found: the skills to list, in order, and the ones skipped."""

    skills: list[SkillInfo] = field(default_factory=list)
    skipped: list[SkippedSkill] = field(default_factory=list)
    scanned: int = 0

    def documents(self) -> list[dict[str, Any]]:
        """Every skill named for a ``documents_reported`` event (no content)."""
        listed = [{"path": s.path, "name": s.name, "fate": "listed", "reason": ""} for s in self.skills]
        return listed + [s.to_dict() for s in self.skipped]


# ------------------------------------------------------------------------------------------ parsing


def _frontmatter(text: str) -> str:
    """The YAML between a leading ``---`` line and the next ``---`` line, within the character limit."""
    complete = len(text) <= FRONTMATTER_MAX_CHARS
    head = text[:FRONTMATTER_MAX_CHARS]
    if head.startswith("\ufeff"):
        head = head[1:]
    lines = head.split("\n")
    if lines[0].rstrip() != "---":
        raise SkillFormatError("SKILL.md does not start with a '---' frontmatter line")
    for i in range(1, len(lines)):
        if lines[i].rstrip() in ("---", "..."):
            if i < len(lines) - 1 or complete:
                return "\n".join(lines[1:i])
            break
    raise SkillFormatError(f"no closing '---' line within the first {FRONTMATTER_MAX_CHARS} characters")


_FRONTMATTER_FIRST_LINE = 2
"""The SKILL.md line the frontmatter's YAML starts on (after the opening ``---``)."""
MAX_PROBLEM_CHARS = 300


def _yaml_problem(e: yaml.YAMLError) -> str:
    """What PyYAML found wrong and where, as a line and column of the SKILL.md (S6: the Skills panel
    names the line). PyYAML's own first line ("while scanning for the next token") is only the context."""
    if not isinstance(e, yaml.MarkedYAMLError):
        text = str(e).strip()
        return _cut(text.splitlines()[0] if text else type(e).__name__, MAX_PROBLEM_CHARS)

    def at(mark: Any) -> str:
        return f"line {mark.line + _FRONTMATTER_FIRST_LINE}, column {mark.column + 1}"

    what = e.problem or e.context or type(e).__name__
    out = f"{at(e.problem_mark)}: {what}" if e.problem_mark is not None else what
    if e.problem and e.context:
        started = e.context_mark is not None and e.context_mark.line != getattr(e.problem_mark, "line", None)
        out += f" ({e.context}" + (f" that starts at {at(e.context_mark)}" if started else "") + ")"
    return _cut(out, MAX_PROBLEM_CHARS)


_NOT_ON_ONE_LINE = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
"""Unicode categories that break or hide a line of the prompt: controls (CR, LF, NUL, tab, escapes),
format characters (bidi overrides, zero-width), surrogates, and the line and paragraph separators."""


def _line_breaker(text: str) -> str | None:
    """The first character of ``text`` that keeps it from being one plain line of the prompt, as U+XXXX."""
    bad = next((c for c in text if unicodedata.category(c) in _NOT_ON_ONE_LINE), None)
    return None if bad is None else f"U+{ord(bad):04X}"


def _cut(text: str, limit: int) -> str:
    """``text`` at most ``limit`` code points, with an ellipsis when cut."""
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + "…"


def _tools(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(t for t in re.split(r"[\s,]+", value) if t)
    if isinstance(value, list) and all(isinstance(t, str) for t in value):
        return tuple(t.strip() for t in value if t.strip())
    raise SkillFormatError("'allowed-tools' must be a list of tool names or a space- or comma-separated string")


def parse_skill(text: str, path: str, source: str, *, max_description_chars: int = 1024) -> SkillInfo:
    """Parse a SKILL.md's frontmatter into a SkillInfo; SkillFormatError says what is wrong."""
    raw = _frontmatter(text)
    try:
        data = yaml.safe_load(raw)
    except yaml.YAMLError as e:
        raise SkillFormatError(f"the frontmatter is not valid YAML: {_yaml_problem(e)}") from None
    except RecursionError:  # PyYAML composes recursively: a hostile file nests past the stack
        raise SkillFormatError("the frontmatter is nested too deeply to be a skill's fields") from None
    except YAML_VALUE_ERRORS as e:  # PyYAML's constructors: `name: !!int abc`, `!!bool maybe`
        raise SkillFormatError(f"a tagged value in the frontmatter cannot be read "
                               f"({type(e).__name__}: {str(e)[:80]})") from None
    if not isinstance(data, dict):
        raise SkillFormatError("the frontmatter is not a mapping of fields")
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise SkillFormatError("'name' is missing or not a non-empty string")
    name = name.strip()
    if len(name) > MAX_NAME_CHARS:
        raise SkillFormatError(f"'name' must be one line of at most {MAX_NAME_CHARS} characters")
    # The name goes verbatim into the system prompt: a CR, NUL, U+2028 or escape in it could start a
    # line of its own there (S6: refused and reported, never listed).
    breaker = _line_breaker(name)
    if breaker is not None:
        raise SkillFormatError(f"'name' must be one line of plain text: it holds the control or separator "
                               f"character {breaker}")
    description = data.get("description")
    if not isinstance(description, str) or not description.strip():
        raise SkillFormatError("'description' is missing or not a non-empty string")
    # One line in the prompt too: a control, format or separator character (NUL, ESC, U+2028, a bidi
    # override) becomes a space, like every run of whitespace (S6)
    plain = "".join(" " if unicodedata.category(c) in _NOT_ON_ONE_LINE else c for c in description)
    description = _cut(" ".join(plain.split()), max_description_chars)
    license_ = data.get("license")
    if license_ is not None and not isinstance(license_, str):
        raise SkillFormatError("'license' must be a string")
    metadata = data.get("metadata")
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict):
        raise SkillFormatError("'metadata' must be a mapping")
    return SkillInfo(
        name=name,
        description=description,
        path=path,
        source=source,
        allowed_tools=_tools(data.get("allowed-tools")),
        license=license_,
        metadata={str(k): v for k, v in metadata.items()},
    )


# ------------------------------------------------------------------------------------------ scanning


async def _read_head(backend: Any, path: str) -> str:
    """At most ``FRONTMATTER_MAX_CHARS + 1`` characters of a SKILL.md, from a bounded read (S4, F3).

    Longer than ``FRONTMATTER_MAX_CHARS`` means "there is more": ``_frontmatter`` then needs the
    closing line within the cap.
    """
    text, _cut = await backend.read_head(path, FRONTMATTER_MAX_BYTES)
    return text[: FRONTMATTER_MAX_CHARS + 1]


async def scan_skills(
    backend: Any,
    sources: Sequence[str],
    *,
    max_skills: int = 64,
    max_description_chars: int = 1024,
    max_scanned: int = 512,
) -> SkillScan:
    """Find the skills under ``sources`` (S1, S3, S4, S6).

    Sources in order, folders in path order; a later skill replaces an earlier one of the same name.
    A missing source and a folder without SKILL.md are skipped silently; refused (by the rules, or
    a folder linked outside the root), malformed, unreadable (``NotTextFile``, or the OS refused it:
    ``AccessDenied``), shadowed and unlisted skills are in ``skipped``, and so is a SKILL.md in a
    folder whose name starts with "." (such folders are not scanned). Any other ``BackendIOError``
    is a real I/O failure and propagates (the step fails).
    """
    scan = SkillScan()
    found: dict[str, SkillInfo] = {}
    if backend is None:
        return scan
    for source in sources:
        try:
            with noting_links_outside() as links_outside:
                entries = await backend.list(source)
        except FileNotFound:
            continue
        except BackendRefusal as e:
            scan.skipped.append(SkippedSkill(source, "", "refused", e.detail or str(e)))
            continue
        except AccessDenied as e:
            scan.skipped.append(SkippedSkill(source, "", "unreadable", e.detail or str(e)))
            continue
        # The listing leaves out folders linked outside the root; they are named here, refused (S6),
        # in path order with the rest.
        outside = {link.name for link in links_outside if link.is_dir}
        folders = sorted([e.path.rstrip("/") for e in entries if e.is_dir] + [join(source, n) for n in outside])
        for i, folder in enumerate(folders):
            if scan.scanned >= max_scanned:
                left = len(folders) - i
                scan.skipped.append(SkippedSkill(
                    source, "", "unlisted",
                    f"{left} folder(s) not examined: max_scanned ({max_scanned}) folders were examined"))
                break
            scan.scanned += 1
            name = folder.rsplit("/", 1)[-1]
            if name.startswith("."):
                note = await _hidden_skill(backend, folder)
                if note is not None:
                    scan.skipped.append(note)
                continue
            unfit = _unfit_folder(folder, name, outside)
            if unfit is not None:
                scan.skipped.append(unfit)
                continue
            path = join(folder, "SKILL.md")
            try:
                text = await _read_head(backend, path)
            except FileNotFound:
                continue
            except BackendRefusal as e:
                scan.skipped.append(SkippedSkill(path, "", "refused", e.detail or str(e)))
                continue
            except (NotTextFile, AccessDenied) as e:  # a directory, FIFO, loop, not UTF-8, mode 000 (S6)
                scan.skipped.append(SkippedSkill(path, "", "unreadable", e.detail or str(e)))
                continue
            if looks_binary(text):
                scan.skipped.append(SkippedSkill(path, "", "unreadable", "binary content"))
                continue
            try:
                skill = parse_skill(text, path, source, max_description_chars=max_description_chars)
            except SkillFormatError as e:
                scan.skipped.append(SkippedSkill(path, "", "malformed", str(e)))
                continue
            previous = found.pop(skill.name, None)
            if previous is not None:
                scan.skipped.append(SkippedSkill(previous.path, previous.name, "shadowed",
                                                 f"replaced by {skill.path}"))
            found[skill.name] = skill
    skills = list(found.values())
    scan.skills = skills[:max_skills]
    for s in skills[max_skills:]:
        scan.skipped.append(SkippedSkill(s.path, s.name, "unlisted", f"over max_skills ({max_skills})"))
    return scan


def _unfit_folder(folder: str, name: str, outside: set[str]) -> SkippedSkill | None:
    """Why a source's folder named ``name`` is no skill to read, or None to read its SKILL.md (S6).

    A folder linked outside the root is refused: the listing left it out and its SKILL.md is never
    opened. A folder whose name holds a line break would put the break into the prompt with its path.
    """
    if name in outside:
        return SkippedSkill(folder, "", "refused", OUTSIDE_REASON)
    breaker = _line_breaker(name)
    if breaker is not None:
        return SkippedSkill(join(folder, "SKILL.md"), "", "malformed",
                            f"the folder's name holds the control or separator character {breaker}, "
                            "which would break its line in the prompt")
    return None


async def _hidden_skill(backend: Any, folder: str) -> SkippedSkill | None:
    """The note for a SKILL.md in a dot-folder, else None (S6).

    Dot-folders (``.git``, ``.cache``, a hidden draft) are not scanned for skills, but one holding a
    SKILL.md is named, so no skill disappears without a word; its SKILL.md is not read.
    """
    path = join(folder, "SKILL.md")
    try:
        if not await backend.exists(path):
            return None
    except PathError:  # refused or unreadable: a folder that is not scanned anyway
        return None
    return SkippedSkill(path, "", "unlisted", "in a folder whose name starts with '.': such folders are not "
                                              "scanned for skills (rename the folder to list it)")


def _entry(skill: SkillInfo) -> str:
    lines = [f"- {skill.name}: {skill.description}", f"  SKILL.md: {skill.path}"]
    if skill.allowed_tools:
        lines.append("  allowed-tools: " + ", ".join(skill.allowed_tools))
    return "\n".join(lines)


def render_skills(scan: SkillScan, max_section_tokens: int) -> tuple[Section | None, list[SkippedSkill]]:
    """The bounded section (S1, S4) and the skills that did not fit in it (fate unlisted)."""
    if not scan.skills:
        return None, []
    parts = [GUIDE]
    listed = 0
    unlisted: list[SkippedSkill] = []
    full = estimate_tokens(GUIDE) >= max_section_tokens
    for skill in scan.skills:
        if not full and estimate_tokens("\n".join([*parts, _entry(skill)])) <= max_section_tokens:
            parts.append(_entry(skill))
            listed += 1
            continue
        full = True
        unlisted.append(SkippedSkill(skill.path, skill.name, "unlisted",
                                     f"the section is full (max_section_tokens {max_section_tokens})"))
    if not listed:
        return None, unlisted
    return Section(SECTION_NAME, "\n".join(parts), cacheable=True), unlisted


@dataclass(frozen=True)
class _Listing:
    section: Section | None
    skills: tuple[SkillInfo, ...]


# ------------------------------------------------------------------------------------------ middleware


class SkillsMiddleware(AgentMiddleware):
    """Lists the skills under ``sources`` in a cacheable section; writes no state.

    ``enforce_allowed_tools`` (off by default, S5): once the model has read a listed skill's SKILL.md
    in this run and that skill declares ``allowed-tools``, calls to other tools (``read_file`` aside)
    are denied until the run ends.
    """

    writes: frozenset[str] = frozenset()

    def __init__(
        self,
        sources: Sequence[str],
        *,
        max_skills: int = 64,
        max_description_chars: int = 1024,
        max_section_tokens: int = 4000,
        max_scanned: int = 512,
        max_cached_runs: int = 16,
        enforce_allowed_tools: bool = False,
        read_guard: Callable[[Sequence[str]], PathGuard] | None = None,
    ) -> None:
        if min(max_skills, max_description_chars, max_section_tokens, max_scanned) < 1:
            raise ValueError("skills limits must be at least 1")
        self.sources = tuple(sources)
        self.max_skills = max_skills
        self.max_description_chars = max_description_chars
        self.max_section_tokens = max_section_tokens
        self.max_scanned = max_scanned
        self.enforce_allowed_tools = enforce_allowed_tools
        self._cache: RunCache[_Listing] = RunCache(max_cached_runs)
        # The permissions' rules on the paths the backend really opens (P5): a skill folder linked
        # into a denied folder is refused, not listed.
        self.read_guard = read_guard

    async def _listing(self, ctx: HookContext) -> _Listing:
        listing = self._cache.get(ctx)
        if listing is None:
            guard = self.read_guard(()) if self.read_guard is not None else None
            with guarding(guard):
                scan = await scan_skills(ctx.backend, self.sources, max_skills=self.max_skills,
                                         max_description_chars=self.max_description_chars,
                                         max_scanned=self.max_scanned)
            for rule, n in sorted(guard.omitted.items()) if guard is not None else ():
                # Folders the rules hide from a listing are named by count and rule, never by content.
                scan.skipped.append(SkippedSkill(", ".join(self.sources), "", "refused",
                                                 f"{n} entr{'y' if n == 1 else 'ies'} left out under '{rule}'"))
            section, unlisted = render_skills(scan, self.max_section_tokens)
            left = {u.path for u in unlisted}
            shown = tuple(s for s in scan.skills if s.path not in left)
            listing = _Listing(section, shown)
            self._cache.put(ctx, listing)
            documents = [{"path": s.path, "name": s.name, "fate": "listed", "reason": ""} for s in shown]
            documents += [s.to_dict() for s in scan.skipped] + [u.to_dict() for u in unlisted]
            ctx.emit("documents_reported", source="skills", documents=documents)
        return listing

    async def sections(self, ctx: HookContext) -> Sequence[Section]:
        listing = await self._listing(ctx)
        return (listing.section,) if listing.section is not None else ()

    async def wrap_tool_call(self, call: ToolCall, ctx: ToolContext, call_next: CallTool) -> ToolOutcome | NeedsApproval:
        if not self.enforce_allowed_tools or call.name == "read_file":
            return await call_next(call, ctx)
        listing = await self._listing(ctx)
        active = _loaded_skills(ctx, listing.skills)
        limited = [s for s in active if s.allowed_tools]
        if limited and not any(call.name in s.allowed_tools for s in limited):
            names = ", ".join(s.name for s in limited)
            allowed = ", ".join(sorted({t for s in limited for t in s.allowed_tools} | {"read_file"}))
            return ToolOutcome.error(f"Denied: the loaded skill(s) {names} allow only these tools: {allowed}")
        return await call_next(call, ctx)

    async def on_run_end(self, status: str, ctx: HookContext) -> None:
        self._cache.drop(ctx.run_id)


def _loaded_skills(ctx: HookContext, skills: Sequence[SkillInfo]) -> list[SkillInfo]:
    """Listed skills whose SKILL.md the model read (successfully) with read_file in this run."""
    by_path = {s.path: s for s in skills}
    ok_calls = {m.get("tool_call_id") for m in ctx.get("messages", [])
                if m.get("role") == "tool" and (m.get("meta") or {}).get("status", "ok") == "ok"}
    active: dict[str, SkillInfo] = {}
    for m in ctx.get("messages", []):
        if m.get("role") != "assistant" or (m.get("meta") or {}).get("run") != ctx.run_id:
            continue
        for c in m.get("tool_calls") or ():
            if c.get("name") != "read_file" or c.get("id") not in ok_calls:
                continue
            for value in (c.get("arguments") or {}).values():
                if isinstance(value, str) and value in by_path:
                    active[value] = by_path[value]
    return list(active.values())


@dataclass(frozen=True)
class SkillSurvey:
    """What a Skills panel shows: the scan, the skills the section had no room for, and the
    descriptions of shadowed skills (re-read so a greyed row still says what it was)."""

    scan: SkillScan
    unlisted: list[SkippedSkill]
    shadowed_descriptions: dict[str, str]


async def survey_skills(backend: Any, sources: Sequence[str], *, max_skills: int, max_description_chars: int,
                        max_section_tokens: int, max_scanned: int) -> SkillSurvey:
    """Scan like a run's first model call would (S1-S6), for the UI's Reload; nothing is cached."""
    scan = await scan_skills(backend, sources, max_skills=max_skills, max_description_chars=max_description_chars,
                             max_scanned=max_scanned)
    _section, unlisted = render_skills(scan, max_section_tokens)
    descriptions: dict[str, str] = {}
    for k in scan.skipped:
        if k.fate != "shadowed":
            continue
        try:
            text = await _read_head(backend, k.path)
            descriptions[k.path] = parse_skill(text, k.path, "", max_description_chars=max_description_chars).description
        except Exception:  # noqa: BLE001 - only a nicety; the row still shows
            log.debug("could not re-read %s", k.path, exc_info=True)
    return SkillSurvey(scan, unlisted, descriptions)
