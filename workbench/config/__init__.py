"""workbench.yaml (the workspace's configuration) and the per-user settings file (DESIGN §6).

The package is split along its seams: ``schema`` (the frozen dataclasses and their defaults),
``reader`` (YAML text -> typed config with file:line:key errors) and ``user`` (per-user settings and
folders). Every name other modules import from ``workbench.config`` is re-exported here.
"""

from __future__ import annotations

from workbench.config.reader import (
    MAX_CONFIG_BYTES,
    YAML_VALUE_ERRORS,
    _Reader,
    _valid_mount_point,
    config_path,
    load_config,
    loaded_mapping,
    parse_config,
    read_config_text,
)
from workbench.config.schema import (
    ACTIONS,
    ARTIFACT_STRATEGIES,
    BUDGET_FIELDS,
    BUDGET_SCOPES,
    CONFIG_FILENAME,
    DEDUPE_MATCH_BY,
    DEFAULT_STEP_LIMIT,
    EFFECTS,
    MOUNT_KINDS,
    Action,
    ArtifactsConfig,
    ArtifactStrategy,
    BudgetConfig,
    BudgetScope,
    CompressionConfig,
    DedupeConfig,
    DropConfig,
    Effect,
    ExecuteConfig,
    McpServerConfig,
    MemoryConfig,
    MountConfig,
    MountKind,
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
    default_permission_rules,
    with_step_budget,
)
from workbench.config.user import (
    MAX_RECENT_WORKSPACES,
    SETTINGS_FILENAME,
    UserSettings,
    add_recent_workspace,
    load_user_settings,
    private_dir,
    save_user_settings,
    user_config_dir,
    user_data_dir,
    user_settings_path,
)

__all__ = [
    "ACTIONS", "ARTIFACT_STRATEGIES", "BUDGET_FIELDS", "BUDGET_SCOPES", "CONFIG_FILENAME", "DEDUPE_MATCH_BY",
    "DEFAULT_STEP_LIMIT", "EFFECTS", "MAX_CONFIG_BYTES", "MAX_RECENT_WORKSPACES", "MOUNT_KINDS", "SETTINGS_FILENAME",
    "YAML_VALUE_ERRORS", "Action",
    "ArtifactStrategy", "ArtifactsConfig", "BudgetConfig", "BudgetScope", "CompressionConfig", "DedupeConfig", "DropConfig",
    "Effect", "ExecuteConfig", "McpServerConfig", "MemoryConfig", "MountConfig", "MountKind", "PermissionRule", "PermissionsConfig", "SkillsConfig",
    "SubagentConfig", "SubagentsConfig", "SummarizeConfig", "TodosConfig", "TruncateConfig", "UserSettings",
    "WorkbenchConfig", "_Reader", "_valid_mount_point", "add_recent_workspace", "config_path", "default_mounts",
    "default_permission_rules", "load_config", "load_user_settings", "loaded_mapping", "parse_config", "private_dir",
    "read_config_text", "save_user_settings", "user_config_dir", "user_data_dir", "user_settings_path",
    "with_step_budget",
]
