"""Where the workbench keeps API keys the user types in Settings (G4). No Qt.

The OS keyring (through ``keyring``) where a real backend exists; headless machines have none (the
``fail`` or ``null`` backend, or a chainer with nothing in it), so there the key goes to a per-user
JSON file, ``user_data_dir()/keys/keys.json``, readable by its owner only (file 0600, folder 0700). That
file is plain text and the Settings dialog says so. It lies under no folder any mount covers (F4); a
file left by older versions in ``user_config_dir()`` (the ``/user`` mount) is moved there on first use. Keys never go to the workspace, the thread store, the user
settings JSON or a log: nothing here logs a key value.

The environment comes first for lookups; ``workbench.secrets.lookup_api_key`` handles that and calls
``load_key`` only when the provider's variable is unset.
"""

from __future__ import annotations

import json
import logging
import os
import stat
from pathlib import Path
from typing import Any, Literal

from workbench.config import user_config_dir, user_data_dir
from workbench.errors import WorkbenchError

log = logging.getLogger(__name__)

SERVICE = "workbench"
KEYS_FILENAME = "keys.json"
KEYS_FOLDER = "keys"
FILE_MODE = 0o600
FOLDER_MODE = 0o700

Storage = Literal["keyring", "file"]


class KeystoreError(WorkbenchError):
    """A key could not be stored or removed (the keyring refused it, or the keys file is unwritable)."""


# --------------------------------------------------------------------------------------------------
# The keyring


def _keyring_backend() -> Any | None:
    """The configured keyring backend if it is a real one, else None.

    Not real: ``fail.Keyring`` (nothing found), ``null.Keyring`` (turned off), and a
    ``ChainerBackend`` with no backends behind it.
    """
    try:
        import keyring
        from keyring.backends import chainer, fail
    except Exception:  # noqa: BLE001 - keyring missing or broken: the file it is
        return None
    try:
        backend = keyring.get_keyring()
    except Exception as exc:  # noqa: BLE001 - a broken keyring config must not stop the app
        log.warning("the OS keyring is unavailable: %s", type(exc).__name__)
        return None
    if isinstance(backend, fail.Keyring):
        return None
    try:
        from keyring.backends import null

        if isinstance(backend, null.Keyring):
            return None
    except ImportError:  # pragma: no cover - older keyring without the null backend
        pass
    if isinstance(backend, chainer.ChainerBackend):
        try:
            if not list(backend.backends):
                return None
        except Exception:  # noqa: BLE001
            return None
    return backend


def key_storage() -> Storage:
    """Where ``save_key`` puts a key now: ``"keyring"`` if a real OS keyring exists, else ``"file"``."""
    return "keyring" if _keyring_backend() is not None else "file"


def keys_file() -> Path:
    """The fallback file (plain text, mode 0600), in ``key_folder()``."""
    return key_folder() / KEYS_FILENAME


def key_folder() -> Path:
    """The folder that holds the keys file (mode 0700): invisible to every tool and mount (F4).

    It is ``user_data_dir()/keys``, not the config folder: the default ``/user`` mount is
    ``~/.config/workbench`` with reads allowed, so a key file there was one ``read_file`` away.
    """
    return user_data_dir() / KEYS_FOLDER


def legacy_keys_file() -> Path:
    """Where older versions kept the file (under the ``/user`` mount); moved on first use (F4)."""
    return user_config_dir() / KEYS_FILENAME


def _prepare_folder() -> None:
    """Make the key folder (0700, tightened if loosened) and move a legacy key file into it (F4)."""
    folder = key_folder()
    folder.mkdir(parents=True, exist_ok=True, mode=FOLDER_MODE)
    if os.name == "posix" and stat.S_IMODE(folder.stat().st_mode) != FOLDER_MODE:
        os.chmod(folder, FOLDER_MODE)
    legacy = legacy_keys_file()
    if not legacy.is_file() or legacy.is_symlink():
        return
    target = folder / KEYS_FILENAME
    if os.name == "posix":
        os.chmod(legacy, FILE_MODE)
    if not target.exists():
        try:
            os.replace(legacy, target)  # a move: the key never exists in two places
            log.warning("moved the API key file from %s to %s (F4)", legacy, target)
            return
        except OSError:  # another file system: merge below, then remove the old file
            pass
    newer = _read_keys(target)
    older = _read_keys(legacy)
    merged = {**older, **newer}
    if merged != newer:
        _write_keys(target, merged)
    legacy.unlink()
    log.warning("moved the API keys in %s to %s (F4)", legacy, target)


# --------------------------------------------------------------------------------------------------
# The file


def _read_file() -> dict[str, str]:
    try:
        _prepare_folder()
    except OSError as exc:
        log.warning("cannot prepare the key folder %s: %s", key_folder(), exc.strerror or exc)
    return _read_keys(keys_file())


def _read_keys(path: Path) -> dict[str, str]:
    try:
        st = path.stat()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        log.warning("cannot read %s: %s", path, exc.strerror or exc)
        return {}
    if os.name == "posix" and stat.S_IMODE(st.st_mode) & 0o077:
        # Someone loosened it: tighten it again before trusting it any further.
        log.warning("%s was readable by others (mode %o); setting it to 0600", path, stat.S_IMODE(st.st_mode))
        try:
            os.chmod(path, FILE_MODE)
        except OSError as exc:
            log.warning("cannot fix the permissions of %s: %s", path, exc.strerror or exc)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        # The message names the file and the problem only; json errors quote no document text.
        log.warning("cannot read %s (%s); ignoring it", path, type(exc).__name__)
        return {}
    keys = data.get("keys") if isinstance(data, dict) else None
    if not isinstance(keys, dict):
        return {}
    found = {k: v for k, v in keys.items() if isinstance(k, str) and isinstance(v, str) and v}
    from workbench.redact import remember

    for value in found.values():  # every key of the file: an unsandboxed command could print any of them
        remember(value)
    return found


def _write_file(keys: dict[str, str]) -> Path:
    """Replace the keys file atomically; the new file is created 0600 and never exists with looser bits."""
    try:
        _prepare_folder()
    except OSError as exc:
        raise KeystoreError(f"cannot prepare {key_folder()}: {exc.strerror or exc} — check the folder's "
                            f"permissions") from None
    return _write_keys(keys_file(), keys)


def _write_keys(path: Path, keys: dict[str, str]) -> Path:
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=FOLDER_MODE)
        if not keys:
            path.unlink(missing_ok=True)
            return path
        tmp = str(path.parent / f".keys-{os.getpid()}-{os.urandom(6).hex()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), FILE_MODE)
    except OSError as exc:
        raise KeystoreError(f"cannot write {path}: {exc.strerror or exc} — check the folder's permissions") from None
    try:
        if hasattr(os, "fchmod"):
            os.fchmod(fd, FILE_MODE)  # whatever the umask did
        payload = {
            "_comment": "API keys saved by Agent Workbench. Plain text: keep this file private (mode 0600).",
            "keys": dict(sorted(keys.items())),
        }
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            fd = -1
            json.dump(payload, f, indent=2)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        if os.name == "posix" and stat.S_IMODE(path.stat().st_mode) != FILE_MODE:
            os.chmod(path, FILE_MODE)
    except OSError as exc:
        if fd >= 0:
            os.close(fd)
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise KeystoreError(f"cannot write {path}: {exc.strerror or exc} — check the folder's permissions") from None
    return path


# --------------------------------------------------------------------------------------------------
# Public API


def _check_provider(provider: str) -> str:
    provider = (provider or "").strip()
    if not provider:
        raise KeystoreError("no provider given for the API key")
    return provider


def key_location(provider: str) -> Storage | None:
    """Where a stored key for ``provider`` is (``"keyring"`` / ``"file"``), or None. Ignores the environment."""
    backend = _keyring_backend()
    if backend is not None:
        try:
            if backend.get_password(SERVICE, provider):
                return "keyring"
        except Exception as exc:  # noqa: BLE001
            log.warning("the OS keyring could not be read for %s: %s", provider, type(exc).__name__)
    if provider in _read_file():
        return "file"
    return None


def load_key(provider: str) -> str | None:
    """The stored key for ``provider`` (keyring first, then the file), or None."""
    provider = (provider or "").strip()
    if not provider:
        return None
    backend = _keyring_backend()
    if backend is not None:
        try:
            value = backend.get_password(SERVICE, provider)
        except Exception as exc:  # noqa: BLE001 - a locked keyring: fall through to the file
            log.warning("the OS keyring could not be read for %s: %s", provider, type(exc).__name__)
            value = None
        if value:
            return value
    return _read_file().get(provider)


def save_key(provider: str, key: str) -> Storage:
    """Store ``key`` for ``provider``; returns where it went (``"keyring"`` or ``"file"``).

    With a real keyring the key goes there and any older copy in the file is removed. A keyring that
    refuses (locked, access denied) raises ``KeystoreError`` rather than quietly writing plain text.
    An empty key removes the stored one.
    """
    provider = _check_provider(provider)
    key = (key or "").strip()
    if not key:
        delete_key(provider)
        return key_storage()
    backend = _keyring_backend()
    if backend is not None:
        try:
            backend.set_password(SERVICE, provider, key)
        except Exception as exc:  # noqa: BLE001
            raise KeystoreError(
                f"the OS keyring refused the key for {provider} ({type(exc).__name__}) — unlock the keyring "
                f"and try again, or set the environment variable instead"
            ) from None
        keys = _read_file()
        if keys.pop(provider, None) is not None:
            _write_file(keys)
        log.info("API key for %s saved in the OS keyring", provider)
        return "keyring"
    keys = _read_file()
    keys[provider] = key
    path = _write_file(keys)
    log.info("API key for %s saved in %s", provider, path)
    return "file"


def delete_key(provider: str) -> None:
    """Remove the stored key for ``provider`` from the keyring and the file (absent is fine)."""
    provider = _check_provider(provider)
    backend = _keyring_backend()
    if backend is not None:
        try:
            if backend.get_password(SERVICE, provider) is not None:
                backend.delete_password(SERVICE, provider)
        except Exception as exc:  # noqa: BLE001 - PasswordDeleteError for a missing key, or a locked keyring
            log.warning("the OS keyring could not remove the key for %s: %s", provider, type(exc).__name__)
    keys = _read_file()
    if keys.pop(provider, None) is not None:
        _write_file(keys)


def warm_up() -> Storage:
    """Import ``keyring`` and find its backend now (0.1–0.3 s the first time), e.g. on a worker thread at
    start, so the first lookup on the GUI thread (Settings, the first run) doesn't stall it."""
    return key_storage()
