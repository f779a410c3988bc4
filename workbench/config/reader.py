"""Reading workbench.yaml: YAML text -> the typed schema, with one-line file:line:key errors.

Validation is strict: an unknown key, a wrong type or a bad value raises ``ConfigError`` naming the
file, the line and the dotted key, so a typo never silently falls back to a default.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
import re
import stat
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from workbench.backends.base import check_pattern_length, path_rule_regex
from workbench.config.schema import (
    _NAME_RE,
    _PREFIX_RE,
    ACTIONS,
    ARTIFACT_STRATEGIES,
    BUDGET_FIELDS,
    BUDGET_SCOPES,
    CONFIG_FILENAME,
    DEDUPE_MATCH_BY,
    EFFECTS,
    MCP_SERVER_NAME_MAX,
    MCP_SERVER_NAME_RE,
    ArtifactsConfig,
    BudgetConfig,
    CompressionConfig,
    DedupeConfig,
    DropConfig,
    ExecuteConfig,
    McpServerConfig,
    MemoryConfig,
    MountConfig,
    PermissionRule,
    PermissionsConfig,
    SkillsConfig,
    SubagentConfig,
    SubagentsConfig,
    SummarizeConfig,
    TodosConfig,
    TruncateConfig,
    WorkbenchConfig,
    default_mounts,
)
from workbench.errors import ConfigError

#: A workbench.yaml larger than this is refused before parsing (bounded work on hostile input, F3).
MAX_CONFIG_BYTES = 1024 * 1024
#: What PyYAML's constructors raise, besides YAMLError, for a tagged value they cannot read: `!!int abc`
#: (ValueError), `!!bool maybe` (KeyError), `!!timestamp 2020-99-99` (ValueError).
YAML_VALUE_ERRORS = (ValueError, KeyError, TypeError, OverflowError)


def loaded_mapping(text: str) -> dict[str, Any]:
    """What a YAML ``text`` loads to when that is a mapping, its sections copied (else {}): what the
    targeted edits of a workbench.yaml compare before and after (a rule added, a setting changed)."""
    data = yaml.safe_load(text) if text.strip() else None
    return {k: dict(v) if isinstance(v, dict) else v for k, v in data.items()} if isinstance(data, dict) else {}


def config_path(workspace: Path | str) -> Path:
    """Where a workspace's workbench.yaml lives."""
    return Path(workspace) / CONFIG_FILENAME


def load_config(workspace: Path | str, *, path: Path | None = None) -> WorkbenchConfig:
    """Read and validate ``<workspace>/workbench.yaml`` (or ``path``).

    A missing or empty file gives the defaults. Anything invalid raises a one-line ``ConfigError``
    naming the file, line and key. Only the workspace's own regular file is read (``read_config_text``).
    """
    file = Path(path) if path is not None else config_path(workspace)
    text = read_config_text(workspace, file)
    if text is None:
        return WorkbenchConfig()
    return parse_config(text, source=str(file))


def read_config_text(workspace: Path | str, file: Path) -> str | None:
    """The text of ``file`` if it is the workspace's own regular file; None if it does not exist.

    Refused (``ConfigError``, quoting nothing of the file): a symlink whose target lies outside the
    workspace — a cloned repository could point it at any file the person can read, and error messages
    quote the YAML they reject; anything that is not a regular file (a FIFO would block the read, a
    device never end); a file over ``MAX_CONFIG_BYTES``.
    """
    try:
        st = os.lstat(file)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise ConfigError(f"{file}: cannot read: {e.strerror or e}") from None
    target = file
    if stat.S_ISLNK(st.st_mode):
        try:
            target = file.resolve(strict=True)
        except FileNotFoundError:
            raise ConfigError(f"{file}: is a symlink to a missing file; replace it with a regular file") from None
        except (OSError, RuntimeError) as e:
            raise ConfigError(f"{file}: cannot follow the symlink ({getattr(e, 'strerror', None) or e})") from None
        root = Path(workspace).expanduser().resolve()
        if not (target == root or target.is_relative_to(root)):
            raise ConfigError(f"{file}: is a symlink to a file outside the workspace; refusing to read it — "
                              f"replace it with a regular file in the workspace")
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(target, flags)
    except IsADirectoryError:
        raise ConfigError(f"{file}: not a regular file; workbench.yaml must be a YAML file") from None
    except OSError as e:
        raise ConfigError(f"{file}: cannot read: {e.strerror or e}") from None
    try:
        fst = os.fstat(fd)
        if not stat.S_ISREG(fst.st_mode):
            raise ConfigError(f"{file}: not a regular file; workbench.yaml must be a YAML file")
        if fst.st_size > MAX_CONFIG_BYTES:
            raise ConfigError(f"{file}: too large ({fst.st_size} bytes; at most {MAX_CONFIG_BYTES})")
        with os.fdopen(fd, "rb") as f:
            fd = -1
            data = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as e:
        raise ConfigError(f"{file}: cannot read: {e.strerror or e}") from None
    finally:
        if fd >= 0:
            os.close(fd)
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{file}: too large (over {MAX_CONFIG_BYTES} bytes)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"{file}: not UTF-8 text ({e.reason} at byte {e.start})") from None


def parse_config(text: str, *, source: str = CONFIG_FILENAME) -> WorkbenchConfig:
    """Validate workbench.yaml text (e.g. from an editor before saving); ``source`` names it in errors."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except RecursionError:
        raise ConfigError(_too_deep(source)) from None
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
    try:
        return _Reader(source).config(root)
    except RecursionError:
        raise ConfigError(_too_deep(source)) from None


def _too_deep(source: str) -> str:
    return (f"{source}:1: invalid YAML: nested too deeply (lists or mappings inside each other hundreds of "
            f"levels deep); workbench.yaml needs a few levels")


_MISSING = object()


class _Reader:
    """Walks the composed YAML node tree, checking each value against the schema."""

    def __init__(self, source: str) -> None:
        self.source = source
        self._constructor = yaml.SafeLoader("")
        self._merged: dict[int, int] = {}  # id of a flattened mapping node -> how many of its pairs were merged in

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
        except YAML_VALUE_ERRORS:  # PyYAML's own constructors: `!!int abc` (ValueError), `!!bool maybe` (KeyError)
            tag = str(node.tag).replace("tag:yaml.org,2002:", "!!")
            raise self.error(node, f"{str(node.value)[:60]!r} is not a valid {tag} value") from None

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

    def pairs(self, node: MappingNode) -> list[tuple[Node, Node, bool]]:
        """The mapping's (key, value, merged) pairs, YAML merge keys (``<<: *anchor``) expanded as PyYAML
        does: the merged pairs first, so a key written in the mapping itself overrides one merged in."""
        if id(node) not in self._merged:
            explicit = sum(1 for k, _ in node.value if k.tag != "tag:yaml.org,2002:merge")
            self._constructor.flatten_mapping(node)
            self._merged[id(node)] = len(node.value) - explicit
        merged = self._merged[id(node)]
        return [(k, v, i < merged) for i, (k, v) in enumerate(node.value)]

    def duplicate(self, knode: Node, dotted: str, first: tuple[int, bool] | None, merged: bool) -> None:
        """Refuse a key written twice; a key merged in (``<<``) is overridden by a later one, not a duplicate."""
        if first is not None and not merged and not first[1]:
            raise self.error(knode, f"duplicate key '{dotted}' (first at line {first[0]})")

    def mapping(self, node: Node, key: str, allowed: tuple[str, ...], *, required: tuple[str, ...] = ()
                ) -> dict[str, Node]:
        """The mapping's value nodes by key; refuses unknown, duplicate and missing keys."""
        if not isinstance(node, MappingNode):
            raise self.expected(node, key, "a mapping")
        out: dict[str, Node] = {}
        lines: dict[str, tuple[int, bool]] = {}
        for knode, vnode, merged in self.pairs(node):
            name = self.value(knode)
            dotted = f"{key}.{name}" if key else str(name)
            if not isinstance(name, str):
                raise self.error(knode, f"{key or 'top level'}: keys must be strings, got {self.describe(knode)}")
            self.duplicate(knode, dotted, lines.get(name), merged)
            if name not in allowed:
                raise self.error(knode, f"unknown key '{dotted}'{self._suggest(name, allowed)}")
            out[name] = vnode
            lines[name] = (knode.start_mark.line + 1, merged)
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

    def number(self, node: Node, key: str, *, minimum: float = 0.0, maximum: float | None = None) -> float:
        v = self.value(node)
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or v < minimum:
            raise self.expected(node, key, f"a number >= {minimum:g}" if maximum is None
                                else f"a number from {minimum:g} to {maximum:g}")
        if maximum is not None and v > maximum:
            raise self.expected(node, key, f"a number from {minimum:g} to {maximum:g}")
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
            "subagents": self.subagents, "compression": self.compression, "execute": self.execute, "mcp_servers": self.mcp_servers,
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
        seen: dict[str, tuple[int, bool]] = {}
        for knode, vnode, merged in self.pairs(node):
            vp = self.value(knode)
            if not isinstance(vp, str) or not _valid_mount_point(vp):
                raise self.error(knode, f"mounts: expected a virtual path such as /docs, got {self.describe(knode)}")
            self.duplicate(knode, f"mounts.{vp}", seen.get(vp), merged)
            seen[vp] = (knode.start_mark.line + 1, merged)
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
        m = self.mapping(node, key, ("allow", "ask", "deny", "path", "tool", "command"))
        effects = [e for e in EFFECTS if e in m]
        if len(effects) != 1:
            raise self.error(node, f"{key}: expected exactly one of allow, ask, deny, got "
                                   f"{', '.join(effects) if effects else 'none'}")
        targets = [t for t in ("path", "tool", "command") if t in m]
        if len(targets) != 1:
            raise self.error(node, f"{key}: expected exactly one of path, tool, command, got "
                                   f"{', '.join(targets) if targets else 'none'}")
        effect, target = effects[0], targets[0]
        action = self.choice(m[effect], f"{key}.{effect}", ACTIONS)
        wanted = {"invoke": "tool", "execute": "command"}.get(action, "path")  # E2: commands by pattern
        if target != wanted:
            raise self.error(m[target], f"{key}.{target}: {'a' if action in ('write', 'read') else 'an'} {action} rule "
                                         f"takes {wanted}:, not {target}:")
        pattern = self.string(m[target], f"{key}.{target}")
        assert pattern is not None
        try:  # F3: a pattern that cannot be matched in bounded time is refused here, before any run
            if target in ("tool", "command"):
                check_pattern_length(pattern, "rule pattern")
            else:
                path_rule_regex(pattern)
        except ValueError as e:
            raise self.error(m[target], f"{key}.{target}: {e}") from None
        return PermissionRule(effect=effect, action=action, pattern=pattern,  # type: ignore[arg-type]
                              line=node.start_mark.line + 1)

    def limit_mapping(self, lim_node: Node, key: str) -> dict[str, float]:
        """A budget ``limit:`` mapping: counter names to numbers."""
        if not isinstance(lim_node, MappingNode) or not lim_node.value:
            raise self.expected(lim_node, key,
                                f"a non-empty mapping of {', '.join(BUDGET_FIELDS)} or custom counters to numbers")
        limit: dict[str, float] = {}
        for knode, vnode in lim_node.value:
            name = self.value(knode)
            if not isinstance(name, str) or not name:
                raise self.error(knode, f"{key}: keys must be counter names, got {self.describe(knode)}")
            if name in limit:
                raise self.error(knode, f"duplicate key '{key}.{name}'")
            limit[name] = self.number(vnode, f"{key}.{name}")
        return limit

    def agent_budget(self, node: Node, key: str) -> dict[str, float] | None:
        """A sub-agent's budget envelope (D8): like a budget's ``limit:``; null = what the parent has left."""
        return None if self.is_null(node) else self.limit_mapping(node, key)

    def budget(self, node: Node) -> tuple[BudgetConfig, ...]:
        if self.is_null(node):
            return ()
        out = []
        for i, item in enumerate(self.seq(node, "budget")):
            key = f"budget[{i}]"
            m = self.mapping(item, key, ("scope", "limit", "interrupt"), required=("scope", "limit"))
            scope = self.choice(m["scope"], f"{key}.scope", BUDGET_SCOPES)
            limit = self.limit_mapping(m["limit"], f"{key}.limit")
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
                                             "async", "max_wait_seconds", "max_concurrent", "max_depth",
                                             "timeout_seconds", "agents"))
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
        for k in ("max_concurrent", "max_depth"):
            if k in m:
                kw[k] = self.integer(m[k], f"subagents.{k}")
                if kw[k] < 1:
                    raise self.expected(m[k], f"subagents.{k}", "a whole number of at least 1")
        if "timeout_seconds" in m:
            kw["timeout_seconds"] = self.number(m["timeout_seconds"], "subagents.timeout_seconds")
            if kw["timeout_seconds"] <= 0:
                raise self.expected(m["timeout_seconds"], "subagents.timeout_seconds", "a number of seconds above 0")
        if "agents" in m and not self.is_null(m["agents"]):
            agents: list[SubagentConfig] = []
            seen: set[str] = set()
            for i, item in enumerate(self.seq(m["agents"], "subagents.agents")):
                key = f"subagents.agents[{i}]"
                a = self.mapping(item, key, ("name", "description", "model", "instructions", "budget"),
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
                    budget=self.agent_budget(a["budget"], f"{key}.budget") if "budget" in a else None,
                ))
            kw["agents"] = tuple(agents)
        return SubagentsConfig(**kw)

    def compression(self, node: Node) -> CompressionConfig:
        ints = ("max_input_tokens", "max_messages", "preserve_recent", "max_tool_response_chars")
        m = self.section(node, "compression",
                         (*ints, "dedupe", "truncate", "summarize", "drop", "skip_summarization_threshold"))
        kw: dict[str, Any] = {k: self.integer(m[k], f"compression.{k}") for k in ints
                              if k in m and not (k == "max_input_tokens" and self.is_null(m[k]))}
        if "dedupe" in m:
            d = self.section(m["dedupe"], "compression.dedupe", ("match_by", "keep_recent", "enabled"))
            dkw: dict[str, Any] = {}
            if "enabled" in d:
                dkw["enabled"] = self.boolean(d["enabled"], "compression.dedupe.enabled")
            if "match_by" in d:
                dkw["match_by"] = self.choice(d["match_by"], "compression.dedupe.match_by", DEDUPE_MATCH_BY)
            if "keep_recent" in d:
                dkw["keep_recent"] = self.integer(d["keep_recent"], "compression.dedupe.keep_recent")
            kw["dedupe"] = DedupeConfig(**dkw)
        if "truncate" in m:
            t = self.section(m["truncate"], "compression.truncate", ("max_chars", "preserve_recent", "enabled"))
            kw["truncate"] = TruncateConfig(**{k: (self.boolean(v, f"compression.truncate.{k}") if k == "enabled"
                                                   else self.integer(v, f"compression.truncate.{k}"))
                                               for k, v in t.items()})
        if "summarize" in m:
            s = self.section(m["summarize"], "compression.summarize", ("model", "preserve_recent", "enabled"))
            skw: dict[str, Any] = {}
            if "enabled" in s:
                skw["enabled"] = self.boolean(s["enabled"], "compression.summarize.enabled")
            if "model" in s:
                skw["model"] = self.string(s["model"], "compression.summarize.model", optional=True)
            if "preserve_recent" in s:
                skw["preserve_recent"] = self.integer(s["preserve_recent"], "compression.summarize.preserve_recent")
            kw["summarize"] = SummarizeConfig(**skw)
        if "drop" in m:
            dr = self.section(m["drop"], "compression.drop", ("enabled",))
            kw["drop"] = DropConfig(**{k: self.boolean(v, f"compression.drop.{k}") for k, v in dr.items()})
        if "skip_summarization_threshold" in m:
            kw["skip_summarization_threshold"] = self.number(
                m["skip_summarization_threshold"], "compression.skip_summarization_threshold", maximum=1.0)
        return CompressionConfig(**kw)

    def execute(self, node: Node) -> ExecuteConfig:
        """E1–E5: ``execute: {max_output_chars, max_timeout_seconds, network, env_allow}``."""
        m = self.section(node, "execute", ("max_output_chars", "max_timeout_seconds", "network", "env_allow"))
        kw: dict[str, Any] = {}
        if "max_output_chars" in m:
            kw["max_output_chars"] = self.integer(m["max_output_chars"], "execute.max_output_chars", minimum=1000)
        if "max_timeout_seconds" in m:
            kw["max_timeout_seconds"] = self.number(m["max_timeout_seconds"], "execute.max_timeout_seconds")
            if kw["max_timeout_seconds"] < 1:
                raise self.expected(m["max_timeout_seconds"], "execute.max_timeout_seconds", "a number of seconds >= 1")
        if "network" in m:
            kw["network"] = self.boolean(m["network"], "execute.network")
        if "env_allow" in m and not self.is_null(m["env_allow"]):
            names = []
            for i, n in enumerate(self.seq(m["env_allow"], "execute.env_allow")):
                v = self.value(n)
                if not isinstance(v, str) or not _ENV_NAME_RE.match(v):
                    raise self.expected(n, f"execute.env_allow[{i}]",
                                        "an environment variable name such as JAVA_HOME (or a glob such as PIP_*)")
                names.append(v)
            kw["env_allow"] = tuple(names)
        return ExecuteConfig(**kw)

    def mcp_servers(self, node: Node) -> dict[str, McpServerConfig]:
        """X1: ``name: {command, args, env, cwd}`` (stdio) or ``name: {url, headers}`` (streamable HTTP),
        each with ``enabled``, ``startup_timeout``, ``tool_timeout``."""
        if self.is_null(node):
            return {}
        if not isinstance(node, MappingNode):
            raise self.expected(node, "mcp_servers", "a mapping of server names to servers")
        out: dict[str, McpServerConfig] = {}
        lines: dict[str, tuple[int, bool]] = {}
        keys = ("command", "args", "env", "cwd", "url", "headers", "enabled", "startup_timeout", "tool_timeout")
        for knode, vnode, merged in self.pairs(node):
            name = self.value(knode)
            if not isinstance(name, str) or not MCP_SERVER_NAME_RE.match(name) or len(name) > MCP_SERVER_NAME_MAX:
                raise self.error(knode, f"mcp_servers: a server name is letters and digits with single - or _ "
                                        f"between them, at most {MCP_SERVER_NAME_MAX} characters (e.g. git, "
                                        f"my-docs), got {self.describe(knode)}")
            self.duplicate(knode, f"mcp_servers.{name}", lines.get(name), merged)
            lines[name] = (knode.start_mark.line + 1, merged)
            key = f"mcp_servers.{name}"
            m = self.mapping(vnode, key, keys)
            kinds = [k for k in ("command", "url") if k in m]
            if len(kinds) != 1:
                raise self.error(vnode, f"{key}: expected exactly one of command (a program run over stdio) or "
                                        f"url (a streamable-HTTP server), got {' and '.join(kinds) or 'neither'}")
            for only, kind in (("args", "command"), ("env", "command"), ("cwd", "command"), ("headers", "url")):
                if only in m and kind not in m:
                    raise self.error(m[only], f"{key}.{only}: only a {kind} server takes {only}")
            kw: dict[str, Any] = {}
            if "command" in m:
                kw["command"] = self.string(m["command"], f"{key}.command")
                if "args" in m and not self.is_null(m["args"]):
                    kw["args"] = tuple(self.scalar_text(n, f"{key}.args[{i}]")
                                       for i, n in enumerate(self.seq(m["args"], f"{key}.args")))
                if "env" in m:
                    kw["env"] = self.text_mapping(m["env"], f"{key}.env")
                if "cwd" in m:
                    kw["cwd"] = self.string(m["cwd"], f"{key}.cwd", optional=True)
            else:
                url = self.string(m["url"], f"{key}.url") or ""
                if not url.lower().startswith(("http://", "https://")):
                    raise self.expected(m["url"], f"{key}.url", "an http:// or https:// URL")
                kw["url"] = url
                if "headers" in m:
                    kw["headers"] = self.text_mapping(m["headers"], f"{key}.headers")
            if "enabled" in m:
                kw["enabled"] = self.boolean(m["enabled"], f"{key}.enabled")
            for k in ("startup_timeout", "tool_timeout"):
                if k in m:
                    kw[k] = self.number(m[k], f"{key}.{k}")
                    if kw[k] <= 0:
                        raise self.expected(m[k], f"{key}.{k}", "a number of seconds above 0")
            out[name] = McpServerConfig(**kw)
        return out

    def scalar_text(self, node: Node, key: str) -> str:
        """A string, number or boolean written as a command-line argument or a variable's value."""
        v = self.value(node)
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (str, int, float)) and not isinstance(node, (MappingNode, SequenceNode)):
            return v if isinstance(v, str) else node.value  # type: ignore[union-attr]
        raise self.expected(node, key, "a string")

    def text_mapping(self, node: Node, key: str) -> dict[str, str]:
        """``env`` / ``headers``: names to text values (``${VAR}`` resolved when the server starts)."""
        if self.is_null(node):
            return {}
        if not isinstance(node, MappingNode):
            raise self.expected(node, key, "a mapping of names to values")
        out: dict[str, str] = {}
        for knode, vnode in node.value:
            name = self.value(knode)
            if not isinstance(name, str) or not name.strip() or any(c in name for c in "=:\0\n\r "):
                raise self.error(knode, f"{key}: names are non-empty, without spaces, '=' or ':', "
                                        f"got {self.describe(knode)}")
            if name in out:
                raise self.error(knode, f"duplicate key '{key}.{name}'")
            out[name] = self.scalar_text(vnode, f"{key}.{name}")
        return out


#: An ``execute.env_allow`` entry: a variable name, or a glob over names (``PIP_*``).
_ENV_NAME_RE = re.compile(r"^[A-Za-z_*?][A-Za-z0-9_*?]*$")


def _valid_mount_point(vp: str) -> bool:
    if vp == "/":
        return True
    if not vp.startswith("/") or vp.endswith("/"):
        return False
    return all(part not in ("", ".", "..") for part in vp[1:].split("/"))


