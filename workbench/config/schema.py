"""The typed workbench.yaml schema: frozen dataclasses whose defaults are DESIGN §6's values."""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Mapping
from typing import Any, Literal

from workbench.errors import ConfigError

CONFIG_FILENAME = "workbench.yaml"

Effect = Literal["allow", "ask", "deny"]
Action = Literal["read", "write", "invoke", "execute"]
MountKind = Literal["host", "state", "store"]
BudgetScope = Literal["run", "session"]
ArtifactStrategy = Literal["inline", "session"]

EFFECTS: tuple[str, ...] = ("allow", "ask", "deny")
ACTIONS: tuple[str, ...] = ("read", "write", "invoke", "execute")
MOUNT_KINDS: tuple[str, ...] = ("host", "state", "store")
BUDGET_SCOPES: tuple[str, ...] = ("run", "session")
ARTIFACT_STRATEGIES: tuple[str, ...] = ("inline", "session")
DEDUPE_MATCH_BY: tuple[str, ...] = ("name-and-input",)
#: Budget fields the engine counts itself (B1); any other name in ``limit`` is a custom counter.
#: ``steps`` (B5) counts one run's model calls.
BUDGET_FIELDS: tuple[str, ...] = ("input_tokens", "output_tokens", "thoughts_tokens", "total_tokens", "cost_usd",
                                  "steps")
#: B5: the step limit of every run whose workspace sets none (a hold the person can extend).
DEFAULT_STEP_LIMIT = 200

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
    """``effect`` on ``action`` for resources matching ``pattern`` (a path glob, a tool-name glob for
    ``invoke``, or a command glob for ``execute``, E2) (P1). ``line`` is the rule's line in workbench.yaml
    (0 when not from a file)."""

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


def with_step_budget(budgets: tuple[BudgetConfig, ...]) -> tuple[BudgetConfig, ...]:
    """B5: a workspace's budgets plus the default run step hold ``{scope: run, limit: {steps: 200},
    interrupt: true}`` — unless one of them limits ``steps`` itself, which then replaces it. Added last,
    so the workspace's budgets keep their numbers."""
    if any("steps" in b.limit for b in budgets):
        return tuple(budgets)
    return (*budgets, BudgetConfig(scope="run", limit={"steps": float(DEFAULT_STEP_LIMIT)}, interrupt=True))


@dataclass(frozen=True)
class ArtifactsConfig:
    """Artifacts (A1): ``readonly`` drops the write_artifact tool."""

    readonly: bool = False


@dataclass(frozen=True)
class ExecuteConfig:
    """The shell tool (E1–E5): the output kept in a result (head and tail), the longest timeout a call
    may ask for, whether sandboxed commands may reach the network, and the environment variables
    (names or ``*`` globs) passed to commands besides the minimal set (E3)."""

    max_output_chars: int = 30000
    max_timeout_seconds: float = 600.0
    network: bool = False
    env_allow: tuple[str, ...] = ()


@dataclass(frozen=True)
class SubagentConfig:
    """One sub-agent (D1). ``model``/``instructions`` None = inherit the parent's model / a default prompt."""

    name: str
    description: str
    model: str | None = None
    instructions: str | None = None
    budget: Mapping[str, float] | None = None  # D8: its run-scope envelope (fields as in `budget:` limits)


@dataclass(frozen=True)
class SubagentsConfig:
    """Delegation settings (D1–D5). YAML key ``async`` is the field ``async_``."""

    prefix: str = "delegate_to"
    max_delegations: int = 5
    history_length: int = 4
    artifact_strategy: ArtifactStrategy = "inline"
    async_: bool = False
    max_wait_seconds: float = 60.0
    max_concurrent: int = 4  # D7: background tasks running at once; more wait `queued`
    max_depth: int = 1  # D9: a sub-agent may delegate only when this is > 1
    timeout_seconds: float = 600.0  # D7: a task's wall-clock limit, then `expired`
    agents: tuple[SubagentConfig, ...] = ()

    def tool_name(self, agent: str) -> str:
        """The delegation tool for ``agent``: ``<prefix>_<agent>``, or the bare name if the prefix is empty."""
        return f"{self.prefix}_{agent}" if self.prefix else agent


@dataclass(frozen=True)
class DedupeConfig:
    """C2 dedupe: older duplicate tool responses go, the newest ``keep_recent`` stay."""

    match_by: str = "name-and-input"
    keep_recent: int = 1
    enabled: bool = True


@dataclass(frozen=True)
class TruncateConfig:
    """C2 truncate: older tool responses cut to ``max_chars``; the newest ``preserve_recent`` intact."""

    max_chars: int = 2000
    preserve_recent: int = 2
    enabled: bool = True


@dataclass(frozen=True)
class SummarizeConfig:
    """C2 summarize: older messages summarised by ``model`` (None = the run's model)."""

    model: str | None = "openai/gpt-4.1-nano"
    preserve_recent: int = 6
    enabled: bool = True


@dataclass(frozen=True)
class DropConfig:
    """C2 drop: the last resort, older messages replaced by a notice of what went."""

    enabled: bool = True


@dataclass(frozen=True)
class CompressionConfig:
    """Context compression triggers and strategies (C1–C3, C7). ``max_messages`` 0 = no message-count
    trigger; ``max_input_tokens`` None (or 0) = 85% of the model's context window (litellm's model info),
    else 100,000."""

    max_input_tokens: int | None = None
    max_messages: int = 0
    preserve_recent: int = 4
    max_tool_response_chars: int = 400000
    dedupe: DedupeConfig = field(default_factory=DedupeConfig)
    truncate: TruncateConfig = field(default_factory=TruncateConfig)
    summarize: SummarizeConfig = field(default_factory=SummarizeConfig)
    drop: DropConfig = field(default_factory=DropConfig)
    skip_summarization_threshold: float = 0.0


#: An MCP server's name (X1): letters and digits, single ``-``/``_`` between them, at most 32 characters —
#: so ``mcp__<server>__<tool>`` always splits at the first ``__`` after the prefix (an ``invoke`` rule on
#: ``mcp__git__*`` never covers a server ``git__x``) and leaves the tool at least 25 of 64 characters.
MCP_SERVER_NAME_RE = re.compile(r"^[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)*$")
MCP_SERVER_NAME_MAX = 32


@dataclass(frozen=True)
class McpServerConfig:
    """One MCP tool server (X1): ``command`` (with ``args``, ``env``, ``cwd``) run over stdio, or a
    streamable-HTTP ``url`` (with ``headers``). ``${VAR}`` in ``env`` and ``headers`` values is resolved
    when the server starts (the environment, else the keyring), never stored."""

    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    enabled: bool = True
    startup_timeout: float = 30.0
    tool_timeout: float = 60.0

    @property
    def transport(self) -> str:
        """``stdio`` (a command) or ``http`` (a URL)."""
        return "http" if self.url else "stdio"

    @property
    def target(self) -> str:
        """What the server is, in one line: the command line or the URL."""
        if self.url:
            return self.url
        import shlex

        return " ".join(shlex.quote(p) for p in (self.command or "", *self.args))


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
    execute: ExecuteConfig = field(default_factory=ExecuteConfig)
    mcp_servers: dict[str, McpServerConfig] = field(default_factory=dict)

    @property
    def effective_budget(self) -> tuple[BudgetConfig, ...]:
        """The budgets every run of this workspace has: ``budget`` and the default step hold (B5)."""
        return with_step_budget(self.budget)

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
