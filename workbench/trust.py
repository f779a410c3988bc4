"""Workspace trust (W1, W2). No Qt.

A workspace's ``workbench.yaml`` can widen what the agent may do or where data (and the person's API
key) goes. Those settings count only once the person trusts the workspace:

- ``requests(config, workspace)`` lists what a workspace asks for, each with a plain description;
- ``safe_config(config, workspace)`` is the config with those settings removed (the safe defaults);
- ``is_trusted`` / ``trust`` / ``forget`` read and write the per-user record: the workspace's path and
  a hash of exactly those settings, so a change to any of them asks again.

The record lives in ``user_config_dir()/trusted_workspaces.json`` (atomic write, mode 0600). What is
compared against is always the defaults: a default mount or rule is not a request.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import re
import shlex
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.config import (
    CONFIG_FILENAME,
    PermissionRule,
    SummarizeConfig,
    WorkbenchConfig,
    default_mounts,
    default_permission_rules,
    private_dir,
    user_config_dir,
)
from workbench.errors import ConfigError

log = logging.getLogger(__name__)

TRUST_FILENAME = "trusted_workspaces.json"
TRUST_ENV = "WORKBENCH_TRUST"
FILE_MODE = 0o600


class SettingsChanged(ConfigError):
    """workbench.yaml asks for other settings than the ones the person was shown (W1): their answer
    does not cover them, so nothing is trusted and they have to be asked again."""


@dataclass(frozen=True)
class TrustRequest:
    """One setting that widens what the agent may do: ``key`` as in workbench.yaml, ``value`` as written,
    ``description`` in plain words."""

    key: str
    value: str
    description: str

    def shown(self) -> tuple[str, str, str]:
        """``key``, ``value`` and ``description`` as a person must see them: every character that could
        break a line, hide text or reorder it made visible (``visible``)."""
        return visible(self.key), visible(self.value), visible(self.description)


# Line breaks, other control characters, zero-width and bidirectional-override characters: in a value a
# workspace wrote they could start a fake second line ("runs nothing on this computer") and push the real
# command out of sight, or show it in another order (found by a review of the trust dialog).
_HIDING = re.compile("[\x00-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e"
                     "\u2060-\u206f\ufeff\ufff9-\ufffb]")
_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def visible(text: str) -> str:
    """``text`` on one line with nothing hidden: a line break or tab as ``\\n``/``\\r``/``\\t``, any
    other control, zero-width or bidirectional character as ``\\uXXXX``."""
    return _HIDING.sub(lambda m: _ESCAPES.get(m.group(), f"\\u{ord(m.group()):04x}"), text)

    def __str__(self) -> str:
        return f"{self.key}: {self.description}"


# --------------------------------------------------------------------------------------------------
# What a workspace asks for


def _inside(path: Path, root: Path) -> bool:
    return path == root or path.is_relative_to(root)


def _widening_rule(rule: PermissionRule, config: WorkbenchConfig) -> bool:
    """An allow rule on anything but reading (write, invoke, execute …) that is not a default rule.

    Writing only inside a thread-state mount (``allow write /scratch/**``) reaches nothing outside the
    thread, so it is not a request: asking for it would teach people to click Trust without reading.
    """
    if rule.effect != "allow" or rule.action == "read" or _plain(rule) in _DEFAULT_RULES:
        return False
    if rule.action == "write":
        for point, mount in config.mounts.items():
            if mount.kind == "state" and point != "/" and rule.pattern.startswith(point + "/") \
                    and ".." not in rule.pattern and not _mounts_below(config, point):
                return False
    return True


def _mounts_below(config: WorkbenchConfig, point: str) -> list[str]:
    """Mount points strictly inside ``point``: a rule on ``point/**`` reaches them too (a host folder
    mounted at ``/scratch/ws`` is no thread state, whatever ``/scratch`` is)."""
    return [p for p in config.mounts if p != point and p.startswith(point.rstrip("/") + "/")]


def _plain(rule: PermissionRule) -> tuple[str, str, str]:
    return (rule.effect, rule.action, rule.pattern)


_DEFAULT_RULES = {_plain(r) for r in default_permission_rules()}


def _host_mounts(config: WorkbenchConfig, workspace: Path) -> dict[str, tuple[Any, bool]]:
    """Host mounts that are not the default mount for their point: ``{point: (mount, inside)}``.

    Outside the workspace, the agent reaches a folder it could not otherwise. Inside it, a mount is a
    second name for the workspace's files: rules written for ``/project/…`` (the person's own, the rule
    builder's) do not cover ``/src/…``, and a rule on a state mount's folder would reach a host mount
    placed under it. Either way the person decides (found by a review: both let an untrusted
    workspace write or read past a rule).
    """
    ws = Path(workspace).expanduser().resolve()
    defaults = default_mounts()
    out: dict[str, tuple[Any, bool]] = {}
    for point, mount in config.mounts.items():
        if mount.kind != "host" or defaults.get(point) == mount:
            continue
        try:
            root = mount.resolve_host(ws)
        except (OSError, RuntimeError, ValueError):
            out[point] = (mount, False)
            continue
        out[point] = (mount, _inside(root, ws))
    return out


def _mcp_commands(config: WorkbenchConfig) -> dict[str, Any]:
    """MCP servers that start a command on this machine, or send the agent's tool calls (and the
    headers' secrets) to a URL (``mcp_servers``, X1): every configured server."""
    servers = getattr(config, "mcp_servers", None) or {}
    items = servers.items() if isinstance(servers, dict) else ()
    out: dict[str, Any] = {}
    for name, server in items:
        command = server.get("command") if isinstance(server, dict) else getattr(server, "command", None)
        url = server.get("url") if isinstance(server, dict) else getattr(server, "url", None)
        if command or url:
            out[str(name)] = server
    return out


def _mcp_request(name: str, server: Any) -> TrustRequest:
    """What trusting an MCP server allows, in words; the value (hashed) holds everything that decides
    what runs or where data goes — the command line, its folder and environment, or the URL and the
    headers' names — as written (``${VAR}`` unresolved: no secret is shown or stored)."""
    get = server.get if isinstance(server, dict) else (lambda k, d=None: getattr(server, k, d))
    url = get("url")
    if url:
        headers = sorted(dict(get("headers") or {}))
        extra = f" (headers {', '.join(headers)})" if headers else ""
        return TrustRequest(f"mcp_servers.{name}", f"{url}{extra}",
                            f"send the agent's calls to the MCP server's tools{extra} to {url}")
    words = [str(get("command")), *(str(a) for a in (get("args") or ()))]
    line = " ".join(words)
    env = dict(get("env") or {})
    value = line + "".join(f" [{k}={v}]" for k, v in sorted(env.items()))
    if get("cwd"):
        value += f" [in {get('cwd')}]"
    # In words, each argument quoted as a shell would need it: an argument holding spaces or `;` reads
    # as one argument, not as more of the command line.
    return TrustRequest(f"mcp_servers.{name}", value, f"run the command `{shlex.join(words)}` on this computer")


#: One ``/``-separated part of a model string that is a host and port (``10.0.0.7:11434``,
#: ``localhost:8000``, ``llm.example.com:8443``, ``[::1]:8000``). A dotted name must end in a letter
#: label, so a model tag such as ``llama3.1:70b`` or ``phi3:3.8b`` is not taken for a host.
_HOST_PORT = re.compile(
    r"(?:\[[0-9A-Fa-f:.]+\]|localhost|\d{1,3}(?:\.\d{1,3}){3}|(?:[A-Za-z0-9-]+\.)+[A-Za-z][A-Za-z0-9-]*)"
    r":\d{1,5}", re.IGNORECASE)
#: A URL (``http://h``, ``HTTPS://h``) or a scheme-less ``//h`` anywhere in a model string.
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S*|//\S*")


def model_endpoint(model: str | None) -> str | None:
    """The endpoint a model string names itself, or None for a plain provider model (W2).

    litellm posts to a URL written in the model for some providers (``oobabooga/http://HOST``,
    ``huggingface/https://…``), so such a model is an ``api_base`` in disguise. Any ``://`` or ``//``,
    or a part that is a host:port, counts — whatever the provider, so a new provider is covered too.
    """
    if not model:
        return None
    text = model.strip()
    url = _URL.search(text)
    if url:
        return url.group(0)
    for part in text.split("/"):
        if _HOST_PORT.fullmatch(part):
            return part
    return None


def _model_request(key: str, model: str | None, whose: str) -> TrustRequest | None:
    """A request for a model string that names its own endpoint (``whose``: "your", "the sub-agent X's")."""
    where = model_endpoint(model)
    if where is None or model is None:
        return None
    return TrustRequest(key, model, f"send {whose} prompts (and your API key for its provider) to {where}")


def requests(config: WorkbenchConfig, workspace: Path | str) -> list[TrustRequest]:
    """Every setting in ``config`` that needs the person's trust (W1), in file order of sections."""
    ws = Path(workspace).expanduser().resolve()
    out: list[TrustRequest] = []
    top = _model_request("model", config.model, "your")
    if top:
        out.append(top)
    if config.api_base:
        out.append(TrustRequest("api_base", config.api_base,
                                f"send your prompts and your API key to {config.api_base}"))
    if config.permissions.default == "allow":
        out.append(TrustRequest("permissions.default", "allow",
                                "let the agent do anything no rule covers (write, run tools) without asking"))
    for i, rule in enumerate(config.permissions.rules):
        if _widening_rule(rule, config):
            target = {"invoke": "tool", "execute": "command"}.get(rule.action, "path")  # E2: `allow execute`
            out.append(TrustRequest(f"permissions.rules[{i}]", str(rule),
                                    f"let the agent {rule.action} {target} {rule.pattern} without asking"))
    for point, (mount, inside) in _host_mounts(config, ws).items():
        try:
            where = str(mount.resolve_host(ws))
        except (OSError, RuntimeError, ValueError):
            where = str(mount.host)
        access = "read" if mount.readonly else "read and write"
        # The value (shown, and hashed) names the folder the mount leads to now, not only its spelling:
        # re-pointing a symlink (or HOME) to another folder changes the hash and asks again.
        shown = str(mount.host) if where == str(mount.host) else f"{mount.host} -> {where}"
        whose = ("a second name for files of the workspace, which rules written for /project/… do not cover"
                 if inside else "outside the workspace")
        out.append(TrustRequest(f"mounts.{point}", f"{shown}{' (readonly)' if mount.readonly else ''}",
                                f"let the agent {access} {where} ({whose}) as {point}"))
    for name, server in _mcp_commands(config).items():
        out.append(_mcp_request(name, server))
    for i, agent in enumerate(config.subagents.agents):
        if agent.model:
            key = f"subagents.agents[{i}].model"
            out.append(_model_request(key, agent.model, f"the sub-agent {agent.name}'s") or TrustRequest(
                key, agent.model, f"let the sub-agent {agent.name} use the model {agent.model} "
                                  f"(with your key for its provider)"))
    summarize = _model_request("compression.summarize.model", config.compression.summarize.model,
                               "the summaries' (your conversation's)")
    if summarize:
        out.append(summarize)
    out += _execute_requests(config)
    return out


def _execute_requests(config: WorkbenchConfig) -> list[TrustRequest]:
    """E3, E5: variables of the person's environment handed to commands (they may hold secrets), and
    the network for sandboxed commands."""
    ex = getattr(config, "execute", None)
    out: list[TrustRequest] = []
    if ex is not None and ex.env_allow:
        names = ", ".join(ex.env_allow)
        out.append(TrustRequest("execute.env_allow", names,
                                f"pass your environment variables {names} (they may hold keys) to the agent's commands"))
    if ex is not None and ex.network:
        out.append(TrustRequest("execute.network", "true", "let the agent's commands reach the network"))
    return out


def settings_hash(reqs: list[TrustRequest]) -> str:
    """A hash of what is asked for (keys and values, in a stable order): changes when any of them does."""
    data = json.dumps(sorted((r.key.split("[")[0], r.value) for r in reqs), ensure_ascii=False)
    return hashlib.sha256(data.encode("utf-8")).hexdigest()


def safe_config(config: WorkbenchConfig, workspace: Path | str) -> WorkbenchConfig:
    """``config`` with every setting ``requests`` lists removed: the safe defaults an untrusted
    workspace runs with (W1)."""
    ws = Path(workspace).expanduser().resolve()
    changes: dict[str, Any] = {}
    if model_endpoint(config.model):
        changes["model"] = WorkbenchConfig.model  # the default model (the person's --model / Settings win)
    if model_endpoint(config.compression.summarize.model):
        summarize = dataclasses.replace(config.compression.summarize, model=SummarizeConfig.model)
        changes["compression"] = dataclasses.replace(config.compression, summarize=summarize)
    if config.api_base:
        changes["api_base"] = None
    perms = config.permissions
    default = "ask" if perms.default == "allow" else perms.default
    rules = tuple(r for r in perms.rules if not _widening_rule(r, config))
    if default != perms.default or rules != perms.rules:
        changes["permissions"] = dataclasses.replace(perms, default=default, rules=rules)
    asking = _host_mounts(config, ws)
    if asking:
        defaults = default_mounts()
        mounts = {}
        for point, mount in config.mounts.items():
            if point not in asking:
                mounts[point] = mount
            elif point in defaults:
                mounts[point] = defaults[point]  # e.g. /project re-pointed elsewhere: back to the workspace
        changes["mounts"] = mounts
    mcp = _mcp_commands(config)
    if mcp:
        servers = getattr(config, "mcp_servers")
        changes["mcp_servers"] = type(servers)((k, v) for k, v in servers.items() if str(k) not in mcp)
    if any(a.model for a in config.subagents.agents):
        agents = tuple(dataclasses.replace(a, model=None) for a in config.subagents.agents)
        changes["subagents"] = dataclasses.replace(config.subagents, agents=agents)
    ex = getattr(config, "execute", None)
    if ex is not None and (ex.env_allow or ex.network):
        changes["execute"] = dataclasses.replace(ex, env_allow=(), network=False)
    return dataclasses.replace(config, **changes) if changes else config


def describe(reqs: list[TrustRequest]) -> str:
    """One line per request, for the CLI prompt and notices."""
    return "\n".join("  - {}: {} — {}".format(*r.shown()) for r in reqs)


def ignored_notice(workspace: Path | str, reqs: list[TrustRequest], *, changed: bool = False) -> str:
    """The notice an untrusted workspace's session carries: names each ignored setting. ``changed``:
    the person trusted what they were shown, but workbench.yaml asked for something else by the time
    the session opened."""
    names = ", ".join(f"{visible(r.key)} ({visible(r.value)})" for r in reqs)
    why = "is not trusted"
    if changed:
        why += f" (its {CONFIG_FILENAME} changed after you were asked to trust it)"
    return (f"The workspace {workspace} {why}: ignored {names}; running with the safe defaults. "
            f"Trust it to use them (window: reopen it and choose Trust; CLI: --trust or {TRUST_ENV}=1).")


def env_trusted() -> bool:
    """``WORKBENCH_TRUST=1`` (for CI and scripts): trust whatever the workspace asks for."""
    return os.environ.get(TRUST_ENV, "").strip().lower() in ("1", "true", "yes")


# --------------------------------------------------------------------------------------------------
# The per-user record


def trust_file() -> Path:
    """Where trusted workspaces are remembered (per user, never in a workspace)."""
    return user_config_dir() / TRUST_FILENAME


def _key(workspace: Path | str) -> str:
    return str(Path(workspace).expanduser().resolve())


def _load() -> dict[str, dict[str, Any]]:
    """The record; empty (nothing trusted) when it is missing, unreadable, or others could have written
    it — a planted record must not trust a workspace."""
    path = trust_file()
    try:
        if path.parent.is_dir():
            private_dir(path.parent)
        st = path.stat()
        if os.name == "posix" and (stat.S_IMODE(st.st_mode) & 0o022 or st.st_uid != os.getuid()):
            log.warning("%s is writable by others or not yours (mode %o); ignoring it: no workspace is "
                        "trusted until it is removed", path, stat.S_IMODE(st.st_mode))
            return {}
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        log.warning("cannot read %s (%s); no workspace is trusted until it is fixed or removed",
                    path, type(exc).__name__)
        return {}
    entries = data.get("workspaces") if isinstance(data, dict) else None
    if not isinstance(entries, dict):
        return {}
    return {k: v for k, v in entries.items() if isinstance(k, str) and isinstance(v, dict)}


def _save(entries: dict[str, dict[str, Any]]) -> Path:
    """Replace the record atomically; the file is created 0600 and never exists with looser bits."""
    path = trust_file()
    private_dir(path.parent)
    tmp = path.parent / f".trust-{os.getpid()}-{os.urandom(6).hex()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), FILE_MODE)
    try:
        if hasattr(os, "fchmod"):
            os.fchmod(fd, FILE_MODE)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            fd = -1
            json.dump({"workspaces": dict(sorted(entries.items()))}, f, indent=2, ensure_ascii=False)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    if os.name == "posix" and stat.S_IMODE(path.stat().st_mode) != FILE_MODE:
        os.chmod(path, FILE_MODE)
    return path


def is_trusted(workspace: Path | str, config: WorkbenchConfig) -> bool:
    """True when the workspace asks for nothing, or the person trusted exactly what it asks for now."""
    reqs = requests(config, workspace)
    if not reqs:
        return True
    entry = _load().get(_key(workspace))
    return bool(entry) and entry.get("hash") == settings_hash(reqs)


def trust(workspace: Path | str, config: WorkbenchConfig, *, expected: str | None = None) -> Path:
    """Remember that the person trusts what the workspace asks for in ``config``; returns the record's
    path. ``expected``: the ``settings_hash`` of the requests the person was shown — when ``config``
    asks for anything else, nothing is recorded and ``SettingsChanged`` is raised (ask again)."""
    now = settings_hash(requests(config, workspace))
    if expected is not None and expected != now:
        raise SettingsChanged(
            f"{Path(workspace) / CONFIG_FILENAME} changed after you were asked to trust it: it asks for other "
            f"settings now, so nothing was trusted; look at them again before trusting the workspace")
    entries = _load()
    entries[_key(workspace)] = {"hash": now, "trusted_at": time.time()}
    return _save(entries)


def forget(workspace: Path | str) -> None:
    """Stop trusting a workspace (absent is fine)."""
    entries = _load()
    if entries.pop(_key(workspace), None) is not None:
        _save(entries)
