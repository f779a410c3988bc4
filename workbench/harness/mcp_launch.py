"""How an MCP server is launched (X1, X4): its command found on PATH — the user's login-shell PATH too —
its environment, its folder, and ``${VAR}`` in ``env`` / ``headers`` resolved from the environment or
the keyring. No Qt, no asyncio: these run on the MCP thread (``mcp_servers.py``) before a server starts.

Why the login shell: a desktop launch (a .desktop file, the dock) gives the app a minimal PATH
(``/usr/bin:/bin``), so ``npx``/``uvx`` installed under ``~/.nvm`` or ``~/.local/bin`` fail with
ENOENT although they work in a terminal. The command is looked up on the process's PATH first; when it
is not there, on the PATH the user's login shell sets up (``$SHELL -lic``, once per process, with a
time limit), which then also becomes the server's PATH (``npx`` needs ``node`` beside it). "Not found"
names the command and every folder searched.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from workbench.errors import WorkbenchError

__all__ = ["INHERITED_ENV", "LaunchError", "LaunchSpec", "launch_spec", "login_shell_path", "resolve_vars"]

#: What a server inherits of the workbench's environment: enough to find programs and a home, nothing
#: that holds a key (as the SDK's own stdio client). Anything else goes through ``env:`` explicitly.
INHERITED_ENV = ("HOME", "LOGNAME", "USER", "PATH", "SHELL", "TERM", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR",
                 "TZ", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_RUNTIME_DIR", "SYSTEMROOT")
LOGIN_SHELL_TIMEOUT = 5.0
"""Seconds a login shell may take to print its PATH (a slow rc file must not hang a start)."""

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_MARK = "__WORKBENCH_PATH__"


class LaunchError(WorkbenchError):
    """A server cannot be started as configured: the message names what (command, variable, folder) and
    where it looked."""


@dataclass(frozen=True)
class LaunchSpec:
    """A stdio server ready to spawn: the executable's absolute path, its arguments, environment and
    folder; ``secrets`` are the resolved ``${VAR}`` values (scrubbed from anything shown)."""

    executable: str
    args: tuple[str, ...]
    env: dict[str, str]
    cwd: str
    secrets: tuple[str, ...] = ()


_login_path: tuple[str | None] | None = None
_login_lock = threading.Lock()


def login_shell_path(timeout: float = LOGIN_SHELL_TIMEOUT) -> str | None:
    """The PATH the user's login shell sets up (``$SHELL -lic``), or None (no shell, a timeout, an error).
    Asked once per process: the answer is cached, the failures too."""
    global _login_path
    with _login_lock:
        if _login_path is None:
            _login_path = (_ask_login_shell(timeout),)
        return _login_path[0]


def _ask_login_shell(timeout: float) -> str | None:
    shell = os.environ.get("SHELL") or ("/bin/sh" if os.name == "posix" else "")
    if not shell or os.name != "posix":
        return None
    # Markers around the value: an interactive shell's rc files may print greetings before it.
    script = f"printf '{_MARK}%s{_MARK}' \"$PATH\""
    try:
        out = subprocess.run([shell, "-lic", script], capture_output=True, text=True, timeout=timeout,
                             stdin=subprocess.DEVNULL, start_new_session=True, errors="replace")
    except (OSError, subprocess.SubprocessError):
        return None
    parts = out.stdout.split(_MARK)
    return parts[1] if len(parts) >= 3 and parts[1].strip() else None


def _join(*paths: str | None) -> str:
    """PATH lists joined in order, each folder once."""
    seen: list[str] = []
    for p in paths:
        for d in (p or "").split(os.pathsep):
            if d and d not in seen:
                seen.append(d)
    return os.pathsep.join(seen)


def find_command(command: str, path: str, *, login: bool = True) -> tuple[str, str]:
    """``(absolute executable, PATH for the server)``. A name with a slash is taken as it is (relative
    to the server's folder by the caller); a bare name is looked up on ``path``, then on the login
    shell's PATH (X4). LaunchError names the command and the PATH searched."""
    if os.sep in command or (os.altsep and os.altsep in command):
        if os.path.isfile(command) and os.access(command, os.X_OK):
            return command, path
        what = "is not executable" if os.path.exists(command) else "does not exist"
        raise LaunchError(f"command {command!r} {what}")
    found = shutil.which(command, path=path)
    if found:
        return found, path
    shell_path = login_shell_path() if login else None
    if shell_path:
        joined = _join(path, shell_path)
        found = shutil.which(command, path=joined)
        if found:
            return found, joined
    searched = _join(path, shell_path)
    extra = "" if shell_path else " (your login shell's PATH could not be read)"
    raise LaunchError(f"command {command!r} not found on PATH {searched or '(empty)'}{extra}; install it, or "
                      "give its full path")


def resolve_vars(values: Mapping[str, str], where: str, environ: Mapping[str, str] | None = None
                 ) -> tuple[dict[str, str], list[str]]:
    """``values`` with every ``${VAR}`` replaced from the environment, else the keyring (``keyring set
    workbench VAR``, or the workbench's key file); the resolved values (to scrub) beside. A variable
    found nowhere is a LaunchError naming the key and the variable — never an empty string sent on."""
    env = os.environ if environ is None else environ
    out: dict[str, str] = {}
    secrets: list[str] = []
    for key, raw in values.items():
        def sub(match: re.Match[str], key: str = key) -> str:
            name = match.group(1)
            value = env.get(name) or _keyring(name)
            if not value:
                raise LaunchError(f"{where}.{key}: ${{{name}}} is not set in the environment or the keyring; set "
                                  f"the variable, or store it with `keyring set workbench {name}`")
            secrets.append(value)
            return value

        out[key] = _VAR.sub(sub, raw)
    return out, secrets


def _keyring(name: str) -> str | None:
    try:
        from workbench.keystore import load_key
    except ImportError:  # pragma: no cover - part of the package
        return None
    try:
        return load_key(name)
    except Exception:  # noqa: BLE001 - a locked or broken keyring reads as "not there"
        return None


def launch_spec(name: str, command: str, args: tuple[str, ...], env: Mapping[str, str], cwd: str | None,
                workspace: Path) -> LaunchSpec:
    """Everything needed to spawn the stdio server ``name`` (see the module); LaunchError otherwise."""
    where = f"mcp_servers.{name}"
    folder = Path(os.path.expanduser(cwd)) if cwd else Path(workspace)
    if not folder.is_absolute():
        folder = Path(workspace) / folder
    if not folder.is_dir():
        raise LaunchError(f"{where}.cwd: {folder} is not a folder")
    resolved, secrets = resolve_vars(env, f"{where}.env")
    base = {k: v for k in INHERITED_ENV if (v := os.environ.get(k)) is not None and not v.startswith("()")}
    path = resolved.get("PATH", base.get("PATH", os.defpath))
    if os.sep in command and not os.path.isabs(command):
        command = str(folder / command)
    try:
        executable, server_path = find_command(command, path)
    except LaunchError as e:
        raise LaunchError(f"{where}.command: {e}") from None
    return LaunchSpec(executable, tuple(args), {**base, **resolved, "PATH": server_path}, str(folder),
                      tuple(secrets))
