"""Builds the standard middleware stack and file backend from a workspace's ``workbench.yaml``.

Order matters (outermost first):
1. budget — outside every other model wrapper, so a retry inside can never hide a call (B2);
2. permissions — every tool call, offered or not, passes its rules (M5, M6);
3. files, execute (the shell tool), todos, skills, artifacts, delegation, MCP servers — tools and sections;
4. instructions last: its cacheable section comes after the others, so editing AGENTS.md leaves the
   cached prompt prefix (todos guide, skills) intact.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.backends.base import FileBackend
from workbench.backends.composite import CompositeBackend
from workbench.backends.host import HostBackend
from workbench.backends.readonly import ReadOnlyBackend
from workbench.backends.store import StoreBackend
from workbench.config import MemoryConfig, WorkbenchConfig
from workbench.engine.middleware import AgentMiddleware

if TYPE_CHECKING:
    from workbench.config import SubagentConfig
    from workbench.engine.agent import Engine
    from workbench.engine.store import Store
    from workbench.harness.permissions import PermissionsMiddleware

def protected_paths(workspace: Path, store_path: Path) -> list[Path]:
    """Host paths no tool, rule or mount may open (F4): the workspace's ``.workbench/`` (the thread
    store), the store file wherever it lies, the folder of the API keys, the legacy key file, and
    the user's permission rules, trust record and settings."""
    from workbench.config import user_settings_path
    from workbench.harness.permissions import user_rules_path
    from workbench.keystore import key_folder, legacy_keys_file
    from workbench.trust import trust_file

    store = Path(store_path)
    return [
        Path(workspace) / ".workbench",
        store,
        *(store.with_name(store.name + suffix) for suffix in ("-wal", "-shm", "-journal")),
        key_folder(),
        legacy_keys_file(),
        # The files that decide what the agent may do and where the key goes: else one approved
        # write_file could give the agent an allow rule (P3), trust a workspace (W1) or set api_base (W2).
        user_rules_path(),
        trust_file(),
        user_settings_path(),
    ]


def build_backend(config: WorkbenchConfig, workspace: Path, store_path: Path) -> CompositeBackend:
    """The composite backend with every configured mount (F1); every host mount hides the
    protected paths (F4), even when it is one of their parent folders."""
    from workbench.harness.files import FilesMiddleware

    protected = protected_paths(workspace, store_path)
    mounts: dict[str, FileBackend] = {}
    for point, mount in config.mounts.items():
        backend: FileBackend
        if mount.kind == "host":
            root = mount.resolve_host(workspace)
            backend = HostBackend(root, readonly=mount.readonly, protected=protected)
        elif mount.kind == "store":
            backend = StoreBackend(store_path, namespace=point)
        else:
            # One state mount is the norm (/scratch); its files are keyed by their path inside it.
            backend = FilesMiddleware.state_backend()
        mounts[point] = ReadOnlyBackend(backend) if mount.readonly else backend
    return CompositeBackend(mounts)


def build_middleware(config: WorkbenchConfig, workspace: Path, backend: FileBackend, *,
                     depth: int = 1) -> list[AgentMiddleware]:
    """The standard stack, outermost first (see the module docstring for why this order). ``depth``: 1
    for the person's agent, 2 for its sub-agents, … (delegation only while ``depth <= max_depth``, D9)."""
    from workbench.harness.artifacts import ArtifactsMiddleware
    from workbench.harness.budget import BudgetLimit, BudgetMiddleware, check_outermost
    from workbench.harness.files import FilesMiddleware
    from workbench.harness.instructions import InstructionsMiddleware
    from workbench.harness.permissions import PermissionsMiddleware, user_rules_path
    from workbench.harness.skills import SkillsMiddleware
    from workbench.harness.todos import TodosMiddleware

    stack: list[AgentMiddleware] = []
    # B5: the person's runs also hold at the step limit (200 unless the workspace sets its own `steps`);
    # a sub-agent's run keeps its envelope and the engine's step limit (it cannot ask mid-task).
    budgets = config.effective_budget if depth == 1 else config.budget
    if budgets:
        stack.append(
            BudgetMiddleware([BudgetLimit(b.scope, dict(b.limit), b.interrupt) for b in budgets])
        )
    from workbench.harness.compression import CompressionMiddleware

    # C5: right inside the budget, outside every other model wrapper: they see the compressed view
    # (delegation places its task notices in it by stored position).
    stack.append(CompressionMiddleware(config.compression))
    permissions = PermissionsMiddleware(
        config.permissions.rules,
        config.permissions.default,
        project_config=workspace / "workbench.yaml",
        user_config=user_rules_path(),  # the person's own rules, in every workspace (P3)
    )
    stack.append(permissions)
    stack.append(FilesMiddleware(backend, readable=permissions.readable))
    from workbench.harness.execute import ExecuteMiddleware

    # E1–E5: the shell tool; the sandbox empties what no tool may open (F4), the store's folder included.
    stack.append(ExecuteMiddleware.from_config(
        config, workspace, hidden=protected_paths(workspace, workspace / ".workbench" / "threads.sqlite3")))
    stack.append(TodosMiddleware(max_todos=config.todos.max_todos, max_todo_chars=config.todos.max_todo_chars))
    s = config.skills
    stack.append(
        SkillsMiddleware(
            s.sources,
            max_skills=s.max_skills,
            max_description_chars=s.max_description_chars,
            max_section_tokens=s.max_section_tokens,
            max_scanned=s.max_scanned,
            read_guard=permissions.document_guard,
        )
    )
    stack.append(ArtifactsMiddleware(readonly=config.artifacts.readonly))
    if config.subagents.agents and depth <= config.subagents.max_depth:
        from workbench.harness.delegation import DelegationMiddleware

        delegation = DelegationMiddleware(config, workspace, depth=depth)
        delegation.permissions = permissions  # its sub-agents' follow this stack's, live (D, P1, Q3)
        stack.append(delegation)
    from workbench.harness.mcp import build_mcp

    mcp = build_mcp(config.mcp_servers, workspace)  # X1-X3: one set of servers for the agent and its sub-agents
    if mcp is not None:
        stack.append(mcp)
    m = config.memory
    stack.append(
        InstructionsMiddleware(
            m.paths,
            max_file_tokens=m.max_file_tokens,
            max_total_tokens=m.max_total_tokens,
            max_cached_runs=m.max_cached_runs,
            # Only the default AGENTS.md files may be read under an `ask`: the workspace chooses
            # memory.paths, and naming a file the person's rules ask about must not read it unasked.
            read_guard=lambda paths: permissions.document_guard([p for p in paths if p in MemoryConfig().paths]),
        )
    )
    check_outermost(stack)  # B2: no model wrapper may sit outside the budget and hide a call
    return stack


DEFAULT_SUBAGENT_INSTRUCTIONS = ("You are {name}, a sub-agent: {description} Do the task you are given "
                                 "completely, then answer with the result (what you found or did).")


def build_child_engine(config: WorkbenchConfig, workspace: Path, store: Store, agent: SubagentConfig, *,
                       depth: int, envelope: Mapping[str, float], model: Any,
                       model_factory: Callable[[str | None], Any],
                       parent_permissions: PermissionsMiddleware | None = None) -> Engine:
    """A sub-agent's engine (D5, D8): the same workbench.yaml's stack — its permissions, files, skills,
    memory — with the agent's instructions, its budget envelope as its only budget (run scope; at the
    limit the task stops ``aborted``), and delegation only while ``depth < max_depth``.

    Permissions (D, P1, Q3): the sub-agent's calls are judged by exactly the rules its parent's are
    judged by at that moment — the parent's configured rules (with any saved to workbench.yaml or the
    user's permissions.yaml since the session opened), its rules "for this session" and its default —
    read live from ``parent_permissions``' own lists (``PermissionsMiddleware.follow``), never a copy
    taken here. Without a parent's (a caller outside a stack) it gets the file's rules and the
    workspace's session rules."""
    from workbench.config import BudgetConfig
    from workbench.engine.agent import Agent, Engine
    from workbench.harness.delegation import DelegationMiddleware
    from workbench.harness.permissions import PermissionsMiddleware
    from workbench.harness.rule_proposal import apply_session_rules

    budgets = (BudgetConfig(scope="run", limit=dict(envelope), interrupt=False),) if envelope else ()
    child_cfg = replace(config, budget=budgets,
                        instructions=agent.instructions or DEFAULT_SUBAGENT_INSTRUCTIONS.format(
                            name=agent.name, description=agent.description))
    backend = build_backend(child_cfg, workspace, store.path)
    stack = build_middleware(child_cfg, workspace, backend, depth=depth + 1)
    for mw in stack:
        if isinstance(mw, PermissionsMiddleware):
            if parent_permissions is not None:
                mw.follow(parent_permissions)
            else:
                apply_session_rules([mw], workspace)
    engine = Engine(Agent(model, instructions=child_cfg.instructions, middleware=stack, backend=backend,
                          max_prompt_section_tokens=child_cfg.max_prompt_section_tokens), store)
    from workbench.harness.compression import bind_compression

    for mw in stack:
        if isinstance(mw, DelegationMiddleware):
            mw.bind(engine, model_factory)
    bind_compression(stack, store, lambda name: model_factory(name) if name else model, getattr(model, "name", ""),
                     engine.prompt_log)
    return engine
