"""Scoped settings (G8): where each value the Settings dialog edits comes from, and saving it there. No Qt.

Three places can hold the model, the API base and the default permission:

- ``workspace``: the workspace's own ``workbench.yaml`` — it wins;
- ``user``: the user settings — the defaults for workspaces whose file does not set the value;
- ``override``: a value chosen for one session only (``workbench --model``, the first-run choice).

The API key is never in either file: it comes from the environment, the OS keyring or the key file
(``workbench.keystore``), and the dialog says which.

Model and API base go together: the user's default API base applies only while the model is the
user's default too (or when the user saved an API base with no default model: their endpoint for
every workspace). A workspace that names its own model never runs on the endpoint saved for other
workspaces, and one workspace's model or endpoint is never used for another (the user settings hold
only what the person saved there as a default).

Saving to a workspace edits only the keys that changed, in place (``set_yaml_scalar``): comments, key
order and every other key stay byte for byte. If the workspace was trusted (W1) before the edit — or
asked for nothing — the trust record is renewed for the new file, since the change is the person's
own; an untrusted workspace stays untrusted (reopening it asks, showing everything it asks for).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode

from workbench.atomic import write_text_atomic
from workbench.config import (
    CONFIG_FILENAME,
    EFFECTS,
    YAML_VALUE_ERRORS,
    UserSettings,
    WorkbenchConfig,
    config_path,
    loaded_mapping,
    parse_config,
    read_config_text,
)
from workbench.errors import ConfigError

log = logging.getLogger(__name__)

WORKSPACE, USER, OVERRIDE, BUILTIN, ENVIRONMENT = "workspace", "user", "override", "builtin", "environment"

#: How each place is named in the window (the Settings dialog's "from …" lines and its Save to choice).
PLACE_LABELS = {
    WORKSPACE: "this workspace (workbench.yaml)",
    USER: "default for new workspaces (user settings)",
    OVERRIDE: "this session only (workbench --model, or the first-run choice)",
    BUILTIN: "built-in default",
    ENVIRONMENT: "environment",
}

#: The values that have a place; the keys as written in workbench.yaml.
KEYS = ("model", "api_base", "permissions.default")

#: Environment variables litellm reads for an endpoint when none is set (shown, never set by us).
ENV_API_BASES = {"openai": ("OPENAI_BASE_URL", "OPENAI_API_BASE")}


@dataclass(frozen=True)
class Sourced:
    """One value in use and where it comes from (``place``: one of PLACE_LABELS' keys).

    ``ignored``: the workspace's own value, left out because the workspace is not trusted (W1).
    """

    value: str | None
    place: str
    ignored: str | None = None

    @property
    def label(self) -> str:
        return PLACE_LABELS.get(self.place, self.place)


# --------------------------------------------------------------------------------------------------
# Reading


def workspace_values(workspace: Path | str) -> dict[str, Any]:
    """The keys of ``KEYS`` the workspace's own workbench.yaml sets (as written); {} when it has none or
    cannot be read (the config reader reports a bad file where it is opened)."""
    ws = Path(workspace)
    try:
        text = read_config_text(ws, config_path(ws))
        data = yaml.safe_load(text or "") or {}
    except (ConfigError, yaml.YAMLError, RecursionError, OSError, *YAML_VALUE_ERRORS):
        return {}
    if not isinstance(data, dict):
        return {}
    out: dict[str, Any] = {k: data[k] for k in ("model", "api_base") if k in data and data[k] is not None}
    perms = data.get("permissions")
    if isinstance(perms, dict) and perms.get("default") is not None:
        out["permissions.default"] = perms["default"]
    return out


def resolve(workspace: Path | str | None, user: UserSettings | None, *, override_model: str | None = None,
            override_api_base: str | None = None, ignored: set[str] | frozenset[str] = frozenset()) -> dict[str, Sourced]:
    """Where the model, API base and default permission of ``workspace`` come from (G8).

    ``ignored``: keys left out because the workspace is not trusted (``Session.ignored``' keys).
    """
    file = workspace_values(workspace) if workspace is not None else {}
    user = user or UserSettings()
    out: dict[str, Sourced] = {}

    def own(key: str) -> tuple[bool, str | None]:
        if key not in file:
            return False, None
        if key in ignored:
            return False, str(file[key])
        return True, None

    ws_model, model_ignored = own("model")
    if override_model:
        out["model"] = Sourced(override_model, OVERRIDE)
    elif ws_model:
        out["model"] = Sourced(str(file["model"]), WORKSPACE)
    elif user.model:
        out["model"] = Sourced(user.model, USER, model_ignored)
    else:
        out["model"] = Sourced(WorkbenchConfig.model, BUILTIN, model_ignored)

    ws_base, base_ignored = own("api_base")
    if override_api_base:
        out["api_base"] = Sourced(override_api_base, OVERRIDE)
    elif ws_base:
        out["api_base"] = Sourced(str(file["api_base"]), WORKSPACE)
    elif user.api_base and (out["model"].place == USER or not user.model):  # see apply_user_defaults
        out["api_base"] = Sourced(user.api_base, USER, base_ignored)
    else:
        out["api_base"] = _env_api_base(out["model"].value, base_ignored)

    ws_perm, perm_ignored = own("permissions.default")
    if ws_perm:
        out["permissions.default"] = Sourced(str(file["permissions.default"]), WORKSPACE)
    else:
        out["permissions.default"] = Sourced(user.default_permission or "ask", USER, perm_ignored)
    return out


def _env_api_base(model: str | None, ignored: str | None) -> Sourced:
    import os

    from workbench.secrets import provider_of

    provider = provider_of(model) if model and model != "demo" else ""
    for var in ENV_API_BASES.get(provider, ()):
        if os.environ.get(var):
            return Sourced(f"${var} ({os.environ[var]})", ENVIRONMENT, ignored)
    return Sourced(None, BUILTIN, ignored)


def apply_user_defaults(config: WorkbenchConfig, workspace: Path | str, *, model: str | None,
                        api_base: str | None, ignored: set[str] | frozenset[str] = frozenset()) -> WorkbenchConfig:
    """``config`` with the user's default model where the workspace's own file does not name a model (or
    its model was ignored as untrusted), and the user's API base where the file names no (trusted)
    API base — but only together with the user's model, or when the user set no default model (then
    it is their endpoint for every workspace): a workspace naming its own model never goes to the
    endpoint saved with another model."""
    import dataclasses

    file = workspace_values(workspace)
    ws_model = "model" in file and "model" not in ignored
    ws_base = "api_base" in file and "api_base" not in ignored
    changes: dict[str, Any] = {}
    if not ws_model and model:
        changes["model"] = model
    if not ws_base and api_base and ("model" in changes or not model):
        changes["api_base"] = api_base
    return config.with_overrides(**changes) if changes else config


# --------------------------------------------------------------------------------------------------
# Writing


def yaml_scalar(value: str) -> str:
    """``value`` as a YAML scalar that reads back as the same string: plain when that is safe, else a
    double-quoted string."""
    try:
        if value.strip() == value and value and yaml.safe_load(f"k: {value}") == {"k": value} and "#" not in value:
            return value
    except yaml.YAMLError:
        pass
    return _double_quoted(value)


def _double_quoted(value: str) -> str:
    """A YAML double-quoted scalar: printable characters as they are, the rest escaped (YAML refuses some
    raw characters even quoted, e.g. DEL, and reads a JSON surrogate pair as two characters)."""
    out = ['"']
    for ch in value:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch.isprintable():
            out.append(ch)
        else:
            code = ord(ch)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
    return "".join(out) + '"'


def _key_node(mapping: MappingNode, name: str) -> tuple[Node, Node] | None:
    return next(((k, v) for k, v in mapping.value if isinstance(k, ScalarNode) and k.value == name), None)


def _line_start(text: str, index: int) -> int:
    return text.rfind("\n", 0, index) + 1


def _line_end(text: str, index: int) -> int:
    end = text.find("\n", index)
    return len(text) if end < 0 else end + 1


def _remove_pair(text: str, key: Node, value: Node) -> str:
    """Delete the lines of a ``key: scalar`` pair (its own line(s) only)."""
    return text[:_line_start(text, key.start_mark.index)] + text[_line_end(text, max(value.end_mark.index - 1,
                                                                                     key.end_mark.index)):]


def set_yaml_scalar(text: str, key: str, value: str | None) -> str:
    """``text`` (a workbench.yaml) with ``key`` (``model``, ``api_base`` or ``permissions.default``) set to
    ``value`` — or removed when None — by editing that key's text only: every other byte (comments, key
    order, quoting, other keys) stays as it was. ConfigError when the file's shape does not allow a
    targeted edit (a flow-style top level or ``permissions``): say to edit it by hand."""
    parts = key.split(".")
    root = yaml.compose(text) if text.strip() else None
    if root is None or (isinstance(root, ScalarNode) and root.value in ("", "~", "null")):
        if value is None:
            return text
        head = text if not text or text.endswith("\n") else text + "\n"
        if len(parts) == 1:
            return head + f"{key}: {yaml_scalar(value)}\n"
        return head + f"{parts[0]}:\n  {parts[1]}: {yaml_scalar(value)}\n"
    if not isinstance(root, MappingNode) or root.flow_style:
        raise ConfigError(f"{CONFIG_FILENAME}: the top level is not a block mapping; set {key} by hand")
    mapping, indent = root, root.start_mark.column
    if len(parts) == 2:
        found = _key_node(root, parts[0])
        if found is None or (isinstance(found[1], ScalarNode) and found[1].value in ("", "~", "null")
                             and found[1].tag.endswith(":null")):
            if value is None:
                return text
            line = f"{parts[0]}:\n{' ' * (indent + 2)}{parts[1]}: {yaml_scalar(value)}\n"
            if found is not None:  # ``permissions:`` with nothing under it: replace that line
                start = _line_start(text, found[0].start_mark.index)
                return text[:start] + " " * indent + line + text[_line_end(text, found[0].end_mark.index):]
            head = text if text.endswith("\n") else text + "\n"
            return head + " " * indent + line
        if not isinstance(found[1], MappingNode) or found[1].flow_style:
            raise ConfigError(f"{CONFIG_FILENAME}: '{parts[0]}' is not a block mapping; set {key} by hand")
        mapping = found[1]
        indent = mapping.value[0][0].start_mark.column if mapping.value else indent + 2
    name = parts[-1]
    pair = _key_node(mapping, name)
    if pair is not None:
        k, v = pair
        if not isinstance(v, ScalarNode):
            raise ConfigError(f"{CONFIG_FILENAME}: '{key}' is not a single value; set it by hand")
        if value is None:
            return _remove_pair(text, k, v)
        if v.end_mark.index <= v.start_mark.index:  # ``key:`` with an empty value: write after the colon
            colon = text.index(":", k.end_mark.index)
            return text[:colon + 1] + f" {yaml_scalar(value)}" + text[colon + 1:]
        return text[:v.start_mark.index] + yaml_scalar(value) + text[v.end_mark.index:]
    if value is None:
        return text
    new_line = " " * indent + f"{name}: {yaml_scalar(value)}\n"
    if mapping is root:
        partner = _key_node(root, {"api_base": "model", "model": "api_base"}.get(name, ""))
        if partner is not None and isinstance(partner[1], ScalarNode):  # model and api_base side by side
            if name == "api_base":
                at = _line_end(text, max(partner[1].end_mark.index - 1, partner[0].end_mark.index))
            else:
                at = _line_start(text, partner[0].start_mark.index)
            if at == len(text) and not text.endswith("\n"):
                return text + "\n" + new_line
            return text[:at] + new_line + text[at:]
        head = text if text.endswith("\n") else text + "\n"
        return head + new_line
    first = mapping.value[0][0]  # a nested key goes first under its section: no trailing block to skip
    start = _line_start(text, first.start_mark.index)
    return text[:start] + new_line + text[start:]


@dataclass(frozen=True)
class SavedWorkspace:
    """What ``save_workspace_values`` did: the file, the keys written, and whether the workspace is
    trusted for its new settings (False: reopening it asks)."""

    path: Path
    keys: tuple[str, ...]
    trusted: bool


def save_workspace_values(workspace: Path | str, changes: Mapping[str, str | None]) -> SavedWorkspace:
    """Write ``changes`` (keys of ``KEYS``; None removes the key) into the workspace's workbench.yaml,
    one targeted edit per key. The new file must load (ConfigError otherwise; nothing is written). The
    trust record is renewed when the workspace was trusted (or asked for nothing) before: the change is
    the person's own (W1)."""
    from workbench import trust

    ws = Path(workspace).expanduser().resolve()
    for key in changes:
        if key not in KEYS:
            raise ConfigError(f"{CONFIG_FILENAME}: {key} is not a setting the Settings dialog writes")
    perm = changes.get("permissions.default")
    if perm is not None and perm not in EFFECTS:
        raise ConfigError(f"permissions.default: expected one of {', '.join(EFFECTS)}, got {perm!r}")
    path = config_path(ws)
    text = read_config_text(ws, path) or ""
    before = parse_config(text, source=str(path)) if text.strip() else WorkbenchConfig()
    was_trusted = trust.is_trusted(ws, before)
    updated = text
    for key, value in changes.items():
        updated = set_yaml_scalar(updated, key, value)
    after = parse_config(updated, source=str(path)) if updated.strip() else WorkbenchConfig()
    _check_only_keys_changed(text, updated, changes, str(path))
    if updated == text:
        return SavedWorkspace(path, (), trust.is_trusted(ws, after))
    write_text_atomic(path, updated)
    trusted = trust.is_trusted(ws, after)
    if was_trusted and not trusted:
        try:
            trust.trust(ws, after)  # the person's own change in Settings: the rest was trusted already
            trusted = True
        except OSError as e:
            log.warning("could not renew the trust for %s: %s", ws, e)
    return SavedWorkspace(path, tuple(changes), trusted)


def _check_only_keys_changed(text: str, updated: str, changes: Mapping[str, str | None], source: str) -> None:
    """ConfigError unless ``updated`` means ``text`` with ``changes`` made. The edit is made on the file's
    text, and YAML can give a key its value from elsewhere (a ``<<`` merge): a removed key would stay in
    force, or a new section would override more than the key."""
    before, after = loaded_mapping(text), loaded_mapping(updated)
    for key, value in changes.items():
        head, _, tail = key.partition(".")
        section = after.get(head) if tail else after
        if (section.get(tail or head) if isinstance(section, dict) else None) != value:
            raise ConfigError(f"{source}: {key} would not be {value!r} after the edit (the file gives it a "
                              "value from elsewhere, e.g. a YAML merge key '<<'); set it by hand")
        for data in (before, after):
            section = data.get(head) if tail else data
            if isinstance(section, dict):
                section.pop(tail or head, None)
    for data in (before, after):  # a section the edit left empty is no other change
        for head in [k for k, v in data.items() if v in ({}, None)]:
            del data[head]
    if before != after:
        raise ConfigError(f"{source}: the edit would change other settings (the file gives them values from "
                          "elsewhere, e.g. a YAML merge key '<<'); set them by hand")


def save_user_values(settings: UserSettings, changes: Mapping[str, str | None]) -> UserSettings:
    """Set ``changes`` (keys of ``KEYS``) on ``settings`` (the caller saves the file)."""
    for key, value in changes.items():
        if key == "model":
            settings.model = value or None
        elif key == "api_base":
            settings.api_base = value or None
        elif key == "permissions.default":
            settings.default_permission = value if value in EFFECTS else "ask"
        else:
            raise ConfigError(f"user settings: {key} is not a setting the Settings dialog writes")
    return settings
