"""Per-user settings (model, API base, window layout, recent workspaces) and the per-user folders.

``UserSettings`` live as JSON in the platform's config folder. They never hold an API key: keys come
from the environment, the OS keyring or the key file (see ``workbench.keystore``).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.atomic import write_text_atomic
from workbench.config.schema import EFFECTS

log = logging.getLogger("workbench.config")

MAX_RECENT_WORKSPACES = 10
SETTINGS_FILENAME = "settings.json"
THEMES = ("system", "light", "dark")
"""The window's theme choices (``UserSettings.theme``)."""


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


PRIVATE_DIR_MODE = 0o700


def private_dir(path: Path) -> Path:
    """Make ``path`` (and its parents) if missing, mode 0700; an existing one that other users can write
    to is set to 0700 with a warning — anyone who can write there could plant settings or a trust record.
    Raises ``PermissionError`` (an OSError, saying what to do) when it cannot be fixed, e.g. another user
    owns it."""
    path.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR_MODE)
    if os.name != "posix":
        return path
    st = path.stat()
    if stat.S_IMODE(st.st_mode) & 0o022:
        log.warning("%s was writable by others (mode %o); setting it to 0700", path, stat.S_IMODE(st.st_mode))
        try:
            os.chmod(path, PRIVATE_DIR_MODE)
        except OSError as e:
            raise PermissionError(f"{path} is writable by other users and its mode cannot be changed "
                                  f"({e.strerror or e}); run `chmod 700 {path}` or set WORKBENCH_CONFIG_DIR "
                                  f"to a private folder") from None
    return path


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
    theme: str = "system"  # View → Theme: one of THEMES ("system" follows the desktop's colour scheme)

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
            theme=data["theme"] if data.get("theme") in THEMES else "system",
        )


def load_user_settings() -> UserSettings:
    """Read the settings file; missing → defaults; corrupt → defaults, the file kept as settings.json.bad."""
    path = user_settings_path()
    if path.parent.is_dir():
        try:
            private_dir(path.parent)
        except OSError as e:  # others could have written the file: don't use it
            log.warning("%s; using default settings", e)
            return UserSettings()
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
    private_dir(path.parent)
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
