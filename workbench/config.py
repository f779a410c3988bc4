"""workbench.yaml (the workspace's configuration) and the per-user settings file (DESIGN §6).

``load_config`` turns a workspace's ``workbench.yaml`` into frozen, typed dataclasses. Validation is
strict: an unknown key, a wrong type or a bad value raises ``ConfigError`` with one line naming the
file, the line and the dotted key, so a typo never silently falls back to a default.

``UserSettings`` (model, API base, window layout, recent workspaces) live as JSON in the platform's
config folder. They never hold an API key: keys come from the environment or the OS keyring.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import logging
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from workbench.atomic import write_text_atomic
from workbench.errors import ConfigError

log = logging.getLogger(__name__)

CONFIG_FILENAME = "workbench.yaml"

Effect = Literal["allow", "ask", "deny"]
Action = Literal["read", "write", "invoke"]
MountKind = Literal["host", "state", "store"]
BudgetScope = Literal["run", "session"]
ArtifactStrategy = Literal["inline", "session"]

EFFECTS: tuple[str, ...] = ("allow", "ask", "deny")
ACTIONS: tuple[str, ...] = ("read", "write", "invoke")
MOUNT_KINDS: tuple[str, ...] = ("host", "state", "store")
BUDGET_SCOPES: tuple[str, ...] = ("run", "session")
ARTIFACT_STRATEGIES: tuple[str, ...] = ("inline", "session")
DEDUPE_MATCH_BY: tuple[str, ...] = ("name-and-input",)
#: Budget fields the engine counts itself (B1); any other name in ``limit`` is a custom counter.
BUDGET_FIELDS: tuple[str, ...] = ("input_tokens", "output_tokens", "thoughts_tokens", "total_tokens", "cost_usd")

_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")
_PREFIX_RE = re.compile(r"^[A-Za-z0-9_-]*$")


# --------------------------------------------------------------------------------------------------
# The configuration dataclasses


@dataclass(frozen=True)
class MountConfig:
    """One mount point: a host folder, thread state, or the shared SQLite store (F1).

    ``host`` is kept as written (``~`` and relative paths unresolved); use ``resolve_host``.
    """

    kind: MountKind
    host: str | None = None
    readonly: bool = False

    def resolve_host(self, workspace: Path | str) -> Path:
        """The host folder as an absolute path: ``~`` expanded, relative paths taken from the workspace."""
        if self.kind != "host" or self.host is None:
            raise ValueError(f"a {self.kind} mount has no host folder")
        p = Path(os.path.expanduser(self.host))
        if not p.is_absolute():
            p = Path(workspace).expanduser() / p
        return p.resolve()


def default_mounts() -> dict[str, MountConfig]:
    """The mounts a workspace gets when workbench.yaml names none."""
    return {
        "/project": MountConfig(kind="host", host="."),
        "/user": MountConfig(kind="host", host="~/.config/workbench"),
        "/scratch": MountConfig(kind="state"),
        "/memories": MountConfig(kind="store"),
    }


@dataclass(frozen=True)
class MemoryConfig:
    """AGENTS.md instruction files, in order, and their bounds (I1–I4)."""

    paths: tuple[str, ...] = ("/user/AGENTS.md", "/project/AGENTS.md")
    max_file_tokens: int = 4000
    max_total_tokens: int = 8000
    max_cached_runs: int = 16


@dataclass(frozen=True)
class SkillsConfig:
    """Skill source folders, in order, and their bounds (S1–S4)."""

    sources: tuple[str, ...] = ("/user/skills", "/project/skills")
    max_skills: int = 64
    max_description_chars: int = 1024
    max_section_tokens: int = 4000
    max_scanned: int = 512


@dataclass(frozen=True)
class TodosConfig:
    """Limits of the write_todos plan (T3)."""

    max_todos: int = 30
    max_todo_chars: int = 400


@dataclass(frozen=True)
class PermissionRule:
    """``effect`` on ``action`` for resources matching ``pattern`` (a path glob, or a tool-name glob
    for ``invoke``) (P1). ``line`` is the rule's line in workbench.yaml (0 when not from a file)."""

    effect: Effect
    action: Action
    pattern: str
    line: int = 0

    def __str__(self) -> str:
        return f"{self.effect} {self.action} {self.pattern}"


def default_permission_rules() -> tuple[PermissionRule, ...]:
    """Reads are allowed everywhere; everything else falls to the default (``ask``)."""
    return (PermissionRule(effect="allow", action="read", pattern="/**"),)


@dataclass(frozen=True)
class PermissionsConfig:
    """Permission rules (deny, then ask, then allow) and the effect when none matches (P1)."""

    default: Effect = "ask"
    rules: tuple[PermissionRule, ...] = field(default_factory=default_permission_rules)


@dataclass(frozen=True)
class BudgetConfig:
    """One budget (B1–B4). ``limit`` maps a field of ``BUDGET_FIELDS`` or a custom counter to its cap."""

    scope: BudgetScope
    limit: dict[str, float]
    interrupt: bool = False

    @property
    def custom_counters(self) -> tuple[str, ...]:
        """The names in ``limit`` that are not built-in usage fields."""
        return tuple(k for k in self.limit if k not in BUDGET_FIELDS)


@dataclass(frozen=True)
class ArtifactsConfig:
    """Artifacts (A1): ``readonly`` drops the write_artifact tool."""

    readonly: bool = False


@dataclass(frozen=True)
class SubagentConfig:
    """One sub-agent (D1). ``model``/``instructions`` None = inherit the parent's model / a default prompt."""

    name: str
    description: str
    model: str | None = None
    instructions: str | None = None


@dataclass(frozen=True)
class SubagentsConfig:
    """Delegation settings (D1–D5). YAML key ``async`` is the field ``async_``."""

    prefix: str = "delegate_to"
    max_delegations: int = 5
    history_length: int = 4
    artifact_strategy: ArtifactStrategy = "inline"
    async_: bool = False
    max_wait_seconds: float = 60.0
    agents: tuple[SubagentConfig, ...] = ()

    def tool_name(self, agent: str) -> str:
        """The delegation tool for ``agent``: ``<prefix>_<agent>``, or the bare name if the prefix is empty."""
        return f"{self.prefix}_{agent}" if self.prefix else agent


@dataclass(frozen=True)
class DedupeConfig:
    """C2 dedupe: older duplicate tool responses go, the newest ``keep_recent`` stay."""

    match_by: str = "name-and-input"
    keep_recent: int = 1


@dataclass(frozen=True)
class TruncateConfig:
    """C2 truncate: older tool responses cut to ``max_chars``; the newest ``preserve_recent`` intact."""

    max_chars: int = 2000
    preserve_recent: int = 2


@dataclass(frozen=True)
class SummarizeConfig:
    """C2 summarize: older messages summarised by ``model`` (None = the run's model)."""

    model: str | None = "openai/gpt-4.1-nano"
    preserve_recent: int = 6


@dataclass(frozen=True)
class CompressionConfig:
    """Context compression triggers and strategies (C1–C3). 0 turns a trigger off."""

    max_input_tokens: int = 80000
    max_messages: int = 0
    preserve_recent: int = 4
    max_tool_response_chars: int = 400000
    dedupe: DedupeConfig = field(default_factory=DedupeConfig)
    truncate: TruncateConfig = field(default_factory=TruncateConfig)
    summarize: SummarizeConfig = field(default_factory=SummarizeConfig)
    skip_summarization_threshold: float = 0.0


@dataclass(frozen=True)
class WorkbenchConfig:
    """Everything in one workspace's workbench.yaml; each field defaults to DESIGN §6's value."""

    model: str = "demo"
    api_base: str | None = None
    instructions: str = "You are a careful engineering assistant."
    max_prompt_section_tokens: int = 24000
    mounts: dict[str, MountConfig] = field(default_factory=default_mounts)
    memory: MemoryConfig = field(default_factory=MemoryConfig)
    skills: SkillsConfig = field(default_factory=SkillsConfig)
    todos: TodosConfig = field(default_factory=TodosConfig)
    permissions: PermissionsConfig = field(default_factory=PermissionsConfig)
    budget: tuple[BudgetConfig, ...] = ()
    artifacts: ArtifactsConfig = field(default_factory=ArtifactsConfig)
    subagents: SubagentsConfig = field(default_factory=SubagentsConfig)
    compression: CompressionConfig = field(default_factory=CompressionConfig)

    def with_overrides(self, **overrides: Any) -> WorkbenchConfig:
        """A copy with command-line values (``model=``, ``api_base=`` …) applied; None values are skipped
        so an absent flag keeps the file's value."""
        changes = {k: v for k, v in overrides.items() if v is not None}
        for key in ("model", "instructions"):
            if key in changes and (not isinstance(changes[key], str) or not changes[key].strip()):
                raise ConfigError(f"{key}: expected a non-empty string, got {changes[key]!r}")
        if "api_base" in changes and not isinstance(changes["api_base"], str):
            raise ConfigError(f"api_base: expected a string, got {changes['api_base']!r}")
        return dataclasses.replace(self, **changes)


# --------------------------------------------------------------------------------------------------
# Loading and validation


def config_path(workspace: Path | str) -> Path:
    """Where a workspace's workbench.yaml lives."""
    return Path(workspace) / CONFIG_FILENAME


def load_config(workspace: Path | str, *, path: Path | None = None) -> WorkbenchConfig:
    """Read and validate ``<workspace>/workbench.yaml`` (or ``path``).

    A missing or empty file gives the defaults. Anything invalid raises a one-line ``ConfigError``
    naming the file, line and key.
    """
    file = Path(path) if path is not None else config_path(workspace)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        return WorkbenchConfig()
    except UnicodeDecodeError as e:
        raise ConfigError(f"{file}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    except OSError as e:
        raise ConfigError(f"{file}: cannot read: {e.strerror or e}") from None
    return parse_config(text, source=str(file))


def parse_config(text: str, *, source: str = CONFIG_FILENAME) -> WorkbenchConfig:
    """Validate workbench.yaml text (e.g. from an editor before saving); ``source`` names it in errors."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = mark.line + 1 if mark is not None else 1
        problem = str(e.problem or e.context or "invalid YAML")
        if e.context and e.problem and e.problem.startswith("but "):
            problem = f"{e.context} {e.problem}"
        problem = " ".join(problem.split())
        raise ConfigError(f"{source}:{line}: invalid YAML: {problem}") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{source}:1: invalid YAML: {' '.join(str(e).split())}") from None
    if root is None:
        return WorkbenchConfig()
    return _Reader(source).config(root)


_MISSING = object()


class _Reader:
    """Walks the composed YAML node tree, checking each value against the schema."""

    def __init__(self, source: str) -> None:
        self.source = source
        self._constructor = yaml.SafeLoader("")

    # -- errors and primitives ------------------------------------------------------------------

    def error(self, node: Node, message: str) -> ConfigError:
        return ConfigError(f"{self.source}:{node.start_mark.line + 1}: {message}")

    def value(self, node: Node) -> Any:
        """The Python value of a scalar node (None for a mapping or sequence)."""
        if not isinstance(node, ScalarNode):
            return None
        try:
            return self._constructor.construct_object(node, deep=True)
        except yaml.YAMLError:
            raise self.error(node, f"unsupported YAML tag {node.tag!r}") from None

    def describe(self, node: Node) -> str:
        if isinstance(node, MappingNode):
            return "a mapping"
        if isinstance(node, SequenceNode):
            return "a list"
        v = self.value(node)
        if v is None:
            return "null"
        if isinstance(v, bool):
            return "true" if v else "false"
        return repr(v) if isinstance(v, (str, int, float)) else repr(node.value)

    def expected(self, node: Node, key: str, what: str) -> ConfigError:
        return self.error(node, f"{key}: expected {what}, got {self.describe(node)}")

    def is_null(self, node: Node) -> bool:
        return isinstance(node, ScalarNode) and node.tag == "tag:yaml.org,2002:null"

    def mapping(self, node: Node, key: str, allowed: tuple[str, ...], *, required: tuple[str, ...] = ()
                ) -> dict[str, Node]:
        """The mapping's value nodes by key; refuses unknown, duplicate and missing keys."""
        if not isinstance(node, MappingNode):
            raise self.expected(node, key, "a mapping")
        self._constructor.flatten_mapping(node)  # support YAML merge keys (<<: *anchor)
        out: dict[str, Node] = {}
        lines: dict[str, int] = {}
        for knode, vnode in node.value:
            name = self.value(knode)
            dotted = f"{key}.{name}" if key else str(name)
            if not isinstance(name, str):
                raise self.error(knode, f"{key or 'top level'}: keys must be strings, got {self.describe(knode)}")
            if name in out:
                raise self.error(knode, f"duplicate key '{dotted}' (first at line {lines[name]})")
            if name not in allowed:
                raise self.error(knode, f"unknown key '{dotted}'{self._suggest(name, allowed)}")
            out[name] = vnode
            lines[name] = knode.start_mark.line + 1
        for name in required:
            if name not in out:
                raise self.error(node, f"{key}: missing key '{name}'")
        return out

    @staticmethod
    def _suggest(name: str, allowed: tuple[str, ...]) -> str:
        close = difflib.get_close_matches(name, allowed, n=1, cutoff=0.6)
        if close:
            return f" (did you mean '{close[0]}'?)"
        return f" (expected one of: {', '.join(allowed)})"

    def seq(self, node: Node, key: str) -> list[Node]:
        if not isinstance(node, SequenceNode):
            raise self.expected(node, key, "a list")
        return list(node.value)

    def string(self, node: Node, key: str, *, optional: bool = False, nonempty: bool = True) -> str | None:
        if optional and self.is_null(node):
            return None
        v = self.value(node)
        if not isinstance(v, str) or (nonempty and not v.strip()):
            raise self.expected(node, key, "a non-empty string" if nonempty else "a string")
        return v

    def integer(self, node: Node, key: str, *, minimum: int = 0) -> int:
        v = self.value(node)
        if not isinstance(v, int) or isinstance(v, bool) or v < minimum:
            what = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
            raise self.expected(node, key, what)
        return v

    def number(self, node: Node, key: str, *, minimum: float = 0.0) -> float:
        v = self.value(node)
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or v < minimum:
            raise self.expected(node, key, f"a number >= {minimum:g}")
        return float(v)

    def boolean(self, node: Node, key: str) -> bool:
        v = self.value(node)
        if not isinstance(v, bool):
            raise self.expected(node, key, "true or false")
        return v

    def choice(self, node: Node, key: str, options: tuple[str, ...]) -> str:
        v = self.value(node)
        if not isinstance(v, str) or v not in options:
            raise self.expected(node, key, f"one of {', '.join(options)}")
        return v

    def vpath(self, node: Node, key: str) -> str:
        """An absolute virtual path such as /project/AGENTS.md."""
        v = self.value(node)
        if not isinstance(v, str) or not v.startswith("/"):
            raise self.expected(node, key, "an absolute virtual path such as /project/AGENTS.md")
        return v

    def vpaths(self, node: Node, key: str) -> tuple[str, ...]:
        return tuple(self.vpath(n, f"{key}[{i}]") for i, n in enumerate(self.seq(node, key)))

    def section(self, node: Node, key: str, allowed: tuple[str, ...]) -> dict[str, Node]:
        """A section mapping; ``key:`` with nothing after it means all defaults."""
        if self.is_null(node):
            return {}
        return self.mapping(node, key, allowed)

    # -- sections -----------------------------------------------------------------------------------

    def config(self, root: Node) -> WorkbenchConfig:
        if not isinstance(root, MappingNode):
            raise self.error(root, f"expected a mapping of settings at the top level, got {self.describe(root)}")
        names = tuple(f.name for f in dataclasses.fields(WorkbenchConfig))
        m = self.mapping(root, "", names)
        kw: dict[str, Any] = {}
        if "model" in m:
            kw["model"] = self.string(m["model"], "model")
        if "api_base" in m:
            kw["api_base"] = self.string(m["api_base"], "api_base", optional=True)
        if "instructions" in m:
            kw["instructions"] = self.string(m["instructions"], "instructions", nonempty=False)
        if "max_prompt_section_tokens" in m:
            kw["max_prompt_section_tokens"] = self.integer(
                m["max_prompt_section_tokens"], "max_prompt_section_tokens", minimum=1)
        sections = {
            "mounts": self.mounts, "memory": self.memory, "skills": self.skills, "todos": self.todos,
            "permissions": self.permissions, "budget": self.budget, "artifacts": self.artifacts,
            "subagents": self.subagents, "compression": self.compression,
        }
        for name, parse in sections.items():
            if name in m:
                kw[name] = parse(m[name])
        return WorkbenchConfig(**kw)

    def mounts(self, node: Node) -> dict[str, MountConfig]:
        """Mounts merge over the defaults; ``/name: null`` removes a default mount."""
        out = default_mounts()
        if self.is_null(node):
            return out
        if not isinstance(node, MappingNode):
            raise self.expected(node, "mounts", "a mapping of virtual paths to mounts")
        self._constructor.flatten_mapping(node)
        seen: dict[str, int] = {}
        for knode, vnode in node.value:
            vp = self.value(knode)
            if not isinstance(vp, str) or not _valid_mount_point(vp):
                raise self.error(knode, f"mounts: expected a virtual path such as /docs, got {self.describe(knode)}")
            if vp in seen:
                raise self.error(knode, f"duplicate key 'mounts.{vp}' (first at line {seen[vp]})")
            seen[vp] = knode.start_mark.line + 1
            key = f"mounts.{vp}"
            if self.is_null(vnode):
                if vp not in out:
                    raise self.expected(vnode, key, "a mapping such as {host: PATH} (null only removes a default mount)")
                del out[vp]
                continue
            m = self.mapping(vnode, key, ("host", "state", "store", "readonly"))
            kinds = [k for k in ("host", "state", "store") if k in m]
            if len(kinds) != 1:
                raise self.error(vnode, f"{key}: expected exactly one of host, state, store, got "
                                        f"{', '.join(kinds) if kinds else 'none'}")
            kind = kinds[0]
            host: str | None = None
            if kind == "host":
                host = self.string(m["host"], f"{key}.host")
            elif self.value(m[kind]) is not True:
                raise self.expected(m[kind], f"{key}.{kind}", "true")
            readonly = self.boolean(m["readonly"], f"{key}.readonly") if "readonly" in m else False
            out[vp] = MountConfig(kind=kind, host=host, readonly=readonly)  # type: ignore[arg-type]
        return out

    def memory(self, node: Node) -> MemoryConfig:
        m = self.section(node, "memory", ("paths", "max_file_tokens", "max_total_tokens", "max_cached_runs"))
        kw: dict[str, Any] = {}
        if "paths" in m:
            kw["paths"] = self.vpaths(m["paths"], "memory.paths")
        for k in ("max_file_tokens", "max_total_tokens", "max_cached_runs"):
            if k in m:
                kw[k] = self.integer(m[k], f"memory.{k}", minimum=1)
        return MemoryConfig(**kw)

    def skills(self, node: Node) -> SkillsConfig:
        ints = ("max_skills", "max_description_chars", "max_section_tokens", "max_scanned")
        m = self.section(node, "skills", ("sources", *ints))
        kw: dict[str, Any] = {}
        if "sources" in m:
            kw["sources"] = self.vpaths(m["sources"], "skills.sources")
        for k in ints:
            if k in m:
                kw[k] = self.integer(m[k], f"skills.{k}", minimum=1)
        return SkillsConfig(**kw)

    def todos(self, node: Node) -> TodosConfig:
        m = self.section(node, "todos", ("max_todos", "max_todo_chars"))
        return TodosConfig(**{k: self.integer(v, f"todos.{k}", minimum=1) for k, v in m.items()})

    def permissions(self, node: Node) -> PermissionsConfig:
        m = self.section(node, "permissions", ("default", "rules"))
        kw: dict[str, Any] = {}
        if "default" in m:
            kw["default"] = self.choice(m["default"], "permissions.default", EFFECTS)
        if "rules" in m and not self.is_null(m["rules"]):
            kw["rules"] = tuple(self.rule(n, f"permissions.rules[{i}]")
                                for i, n in enumerate(self.seq(m["rules"], "permissions.rules")))
        return PermissionsConfig(**kw)

    def rule(self, node: Node, key: str) -> PermissionRule:
        m = self.mapping(node, key, ("allow", "ask", "deny", "path", "tool"))
        effects = [e for e in EFFECTS if e in m]
        if len(effects) != 1:
            raise self.error(node, f"{key}: expected exactly one of allow, ask, deny, got "
                                   f"{', '.join(effects) if effects else 'none'}")
        targets = [t for t in ("path", "tool") if t in m]
        if len(targets) != 1:
            raise self.error(node, f"{key}: expected exactly one of path, tool, got "
                                   f"{', '.join(targets) if targets else 'none'}")
        effect, target = effects[0], targets[0]
        action = self.choice(m[effect], f"{key}.{effect}", ACTIONS)
        wanted = "tool" if action == "invoke" else "path"
        if target != wanted:
            raise self.error(m[target], f"{key}.{target}: {'an' if action == 'invoke' else 'a'} {action} rule "
                                         f"takes {wanted}:, not {target}:")
        pattern = self.string(m[target], f"{key}.{target}")
        assert pattern is not None
        return PermissionRule(effect=effect, action=action, pattern=pattern,  # type: ignore[arg-type]
                              line=node.start_mark.line + 1)

    def budget(self, node: Node) -> tuple[BudgetConfig, ...]:
        if self.is_null(node):
            return ()
        out = []
        for i, item in enumerate(self.seq(node, "budget")):
            key = f"budget[{i}]"
            m = self.mapping(item, key, ("scope", "limit", "interrupt"), required=("scope", "limit"))
            scope = self.choice(m["scope"], f"{key}.scope", BUDGET_SCOPES)
            lim_node = m["limit"]
            if not isinstance(lim_node, MappingNode) or not lim_node.value:
                raise self.expected(lim_node, f"{key}.limit",
                                    f"a non-empty mapping of {', '.join(BUDGET_FIELDS)} or custom counters to numbers")
            limit: dict[str, float] = {}
            for knode, vnode in lim_node.value:
                name = self.value(knode)
                if not isinstance(name, str) or not name:
                    raise self.error(knode, f"{key}.limit: keys must be counter names, got {self.describe(knode)}")
                if name in limit:
                    raise self.error(knode, f"duplicate key '{key}.limit.{name}'")
                limit[name] = self.number(vnode, f"{key}.limit.{name}")
            interrupt = False
            if "interrupt" in m:
                interrupt = self.boolean(m["interrupt"], f"{key}.interrupt")
                if interrupt and scope == "session":
                    raise self.error(m["interrupt"], f"{key}.interrupt: interrupt is allowed only with scope run, "
                                                     f"not session (B3)")
            out.append(BudgetConfig(scope=scope, limit=limit, interrupt=interrupt))  # type: ignore[arg-type]
        return tuple(out)

    def artifacts(self, node: Node) -> ArtifactsConfig:
        m = self.section(node, "artifacts", ("readonly",))
        return ArtifactsConfig(**{k: self.boolean(v, f"artifacts.{k}") for k, v in m.items()})

    def subagents(self, node: Node) -> SubagentsConfig:
        m = self.section(node, "subagents", ("prefix", "max_delegations", "history_length", "artifact_strategy",
                                             "async", "max_wait_seconds", "agents"))
        kw: dict[str, Any] = {}
        if "prefix" in m:
            prefix = self.value(m["prefix"])
            if prefix is None:
                prefix = ""
            if not isinstance(prefix, str) or not _PREFIX_RE.match(prefix):
                raise self.expected(m["prefix"], "subagents.prefix", "letters, digits, _ or - (or empty)")
            kw["prefix"] = prefix
        for k in ("max_delegations", "history_length"):
            if k in m:
                kw[k] = self.integer(m[k], f"subagents.{k}")
        if "artifact_strategy" in m:
            kw["artifact_strategy"] = self.choice(m["artifact_strategy"], "subagents.artifact_strategy",
                                                  ARTIFACT_STRATEGIES)
        if "async" in m:
            kw["async_"] = self.boolean(m["async"], "subagents.async")
        if "max_wait_seconds" in m:
            kw["max_wait_seconds"] = self.number(m["max_wait_seconds"], "subagents.max_wait_seconds")
        if "agents" in m and not self.is_null(m["agents"]):
            agents: list[SubagentConfig] = []
            seen: set[str] = set()
            for i, item in enumerate(self.seq(m["agents"], "subagents.agents")):
                key = f"subagents.agents[{i}]"
                a = self.mapping(item, key, ("name", "description", "model", "instructions"),
                                 required=("name", "description"))
                name = self.value(a["name"])
                if not isinstance(name, str) or not _NAME_RE.match(name) or len(name) > 48:
                    raise self.expected(a["name"], f"{key}.name",
                                        "a name of letters, digits, _ or - starting with a letter")
                if name in seen:
                    raise self.error(a["name"], f"{key}.name: duplicate sub-agent name {name!r}")
                seen.add(name)
                agents.append(SubagentConfig(
                    name=name,
                    description=self.string(a["description"], f"{key}.description") or "",
                    model=self.string(a["model"], f"{key}.model", optional=True) if "model" in a else None,
                    instructions=(self.string(a["instructions"], f"{key}.instructions", optional=True)
                                  if "instructions" in a else None),
                ))
            kw["agents"] = tuple(agents)
        return SubagentsConfig(**kw)

    def compression(self, node: Node) -> CompressionConfig:
        ints = ("max_input_tokens", "max_messages", "preserve_recent", "max_tool_response_chars")
        m = self.section(node, "compression",
                         (*ints, "dedupe", "truncate", "summarize", "skip_summarization_threshold"))
        kw: dict[str, Any] = {k: self.integer(m[k], f"compression.{k}") for k in ints if k in m}
        if "dedupe" in m:
            d = self.section(m["dedupe"], "compression.dedupe", ("match_by", "keep_recent"))
            dkw: dict[str, Any] = {}
            if "match_by" in d:
                dkw["match_by"] = self.choice(d["match_by"], "compression.dedupe.match_by", DEDUPE_MATCH_BY)
            if "keep_recent" in d:
                dkw["keep_recent"] = self.integer(d["keep_recent"], "compression.dedupe.keep_recent")
            kw["dedupe"] = DedupeConfig(**dkw)
        if "truncate" in m:
            t = self.section(m["truncate"], "compression.truncate", ("max_chars", "preserve_recent"))
            kw["truncate"] = TruncateConfig(**{k: self.integer(v, f"compression.truncate.{k}") for k, v in t.items()})
        if "summarize" in m:
            s = self.section(m["summarize"], "compression.summarize", ("model", "preserve_recent"))
            skw: dict[str, Any] = {}
            if "model" in s:
                skw["model"] = self.string(s["model"], "compression.summarize.model", optional=True)
            if "preserve_recent" in s:
                skw["preserve_recent"] = self.integer(s["preserve_recent"], "compression.summarize.preserve_recent")
            kw["summarize"] = SummarizeConfig(**skw)
        if "skip_summarization_threshold" in m:
            kw["skip_summarization_threshold"] = self.number(
                m["skip_summarization_threshold"], "compression.skip_summarization_threshold")
        return CompressionConfig(**kw)


def _valid_mount_point(vp: str) -> bool:
    if vp == "/":
        return True
    if not vp.startswith("/") or vp.endswith("/"):
        return False
    return all(part not in ("", ".", "..") for part in vp[1:].split("/"))


# --------------------------------------------------------------------------------------------------
# User settings (per user, not per workspace)

MAX_RECENT_WORKSPACES = 10
SETTINGS_FILENAME = "settings.json"


def user_config_dir() -> Path:
    """The per-user config folder: ``$WORKBENCH_CONFIG_DIR`` if set, else the platform's."""
    env = os.environ.get("WORKBENCH_CONFIG_DIR")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return platformdirs.user_config_path("workbench", appauthor=False)


def user_data_dir() -> Path:
    """The per-user data folder: ``$WORKBENCH_DATA_DIR`` if set, else the platform's."""
    env = os.environ.get("WORKBENCH_DATA_DIR")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return platformdirs.user_data_path("workbench", appauthor=False)


def user_settings_path() -> Path:
    """Where ``UserSettings`` are stored."""
    return user_config_dir() / SETTINGS_FILENAME


@dataclass
class UserSettings:
    """Per-user preferences. Deliberately has no API key field: keys live in the environment or keyring.

    ``window`` holds Qt geometry/state blobs as base64 strings by name.
    """

    model: str | None = None
    api_base: str | None = None
    default_permission: str = "ask"
    recent_workspaces: list[str] = field(default_factory=list)
    last_workspace: str | None = None
    window: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> UserSettings:
        """Lenient: unknown keys are ignored and a wrongly typed field takes its default."""

        def opt_str(v: Any) -> str | None:
            return v if isinstance(v, str) and v else None

        recent = data.get("recent_workspaces")
        window = data.get("window")
        perm = data.get("default_permission")
        return cls(
            model=opt_str(data.get("model")),
            api_base=opt_str(data.get("api_base")),
            default_permission=perm if perm in EFFECTS else "ask",
            recent_workspaces=([p for p in recent if isinstance(p, str) and p][:MAX_RECENT_WORKSPACES]
                               if isinstance(recent, list) else []),
            last_workspace=opt_str(data.get("last_workspace")),
            window=({k: v for k, v in window.items() if isinstance(k, str) and isinstance(v, str)}
                    if isinstance(window, dict) else {}),
        )


def load_user_settings() -> UserSettings:
    """Read the settings file; missing → defaults; corrupt → defaults, the file kept as settings.json.bad."""
    path = user_settings_path()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return UserSettings()
    except (OSError, UnicodeDecodeError) as e:
        log.warning("cannot read %s (%s); using default settings", path, e)
        if isinstance(e, UnicodeDecodeError):
            _keep_bad(path)
        return UserSettings()
    try:
        data = json.loads(text)
    except ValueError as e:
        log.warning("%s is not valid JSON (%s); using default settings", path, e)
        _keep_bad(path)
        return UserSettings()
    if not isinstance(data, dict):
        log.warning("%s does not hold a JSON object; using default settings", path)
        _keep_bad(path)
        return UserSettings()
    return UserSettings.from_dict(data)


def _keep_bad(path: Path) -> None:
    try:
        os.replace(path, path.with_name(path.name + ".bad"))
    except OSError as e:  # never crash over a settings file
        log.warning("cannot move %s aside: %s", path, e)


def save_user_settings(settings: UserSettings) -> Path:
    """Write the settings atomically (temp file + os.replace); returns the file's path.

    Raises OSError if the folder cannot be written.
    """
    path = user_settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    data = json.dumps(settings.to_dict(), indent=2, ensure_ascii=False) + "\n"
    write_text_atomic(path, data)
    return path


def add_recent_workspace(settings: UserSettings, path: Path | str) -> UserSettings:
    """Put ``path`` (made absolute) first in the recent list, without duplicates, at most
    ``MAX_RECENT_WORKSPACES``; it also becomes ``last_workspace``. Mutates and returns ``settings``."""
    p = str(Path(path).expanduser().resolve())
    recent = [r for r in settings.recent_workspaces if not _same_path(r, p)]
    settings.recent_workspaces = [p, *recent][:MAX_RECENT_WORKSPACES]
    settings.last_workspace = p
    return settings


def _same_path(a: str, b: str) -> bool:
    try:
        return str(Path(a).expanduser().resolve()) == b
    except (OSError, RuntimeError):
        return a == b
