"""G4 key storage: the OS keyring where a real backend exists, else a 0600 per-user file; env first."""

from __future__ import annotations

import json
import logging
import os
import stat
import sys

import keyring
import pytest
from keyring.backend import KeyringBackend
from keyring.backends import chainer, fail, null
from keyring.errors import KeyringLocked

from tests.fakes import MemoryKeyring
from workbench import keystore
from workbench.config import default_mounts, user_config_dir, user_data_dir
from workbench.keystore import (
    KeystoreError,
    delete_key,
    key_folder,
    key_location,
    key_storage,
    keys_file,
    load_key,
    save_key,
)
from workbench.secrets import lookup_api_key

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="POSIX file modes")

SECRET = "sk-test-DO-NOT-LEAK-4f9c2e7a1b"


class LockedKeyring(MemoryKeyring):
    def set_password(self, service: str, username: str, password: str) -> None:
        raise KeyringLocked("the collection is locked")


class EmptyChainer(chainer.ChainerBackend):
    backends: list = []  # type: ignore[assignment]


@pytest.fixture
def use_keyring():
    """Install a keyring backend for one test, restoring the previous one after."""
    previous = keyring.get_keyring()

    def install(backend: KeyringBackend) -> KeyringBackend:
        keyring.set_keyring(backend)
        return backend

    yield install
    keyring.set_keyring(previous)


@pytest.fixture
def memory_keyring(use_keyring) -> MemoryKeyring:
    return use_keyring(MemoryKeyring())


@pytest.fixture
def no_keyring(use_keyring) -> None:
    use_keyring(fail.Keyring())


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


# --- the file (no real keyring) ---------------------------------------------------------------------------


@posix_only
def test_without_a_keyring_the_key_goes_to_a_0600_file(no_keyring):
    assert key_storage() == "file"
    assert save_key("openai", SECRET) == "file"
    path = keys_file()
    assert path == user_data_dir() / "keys" / "keys.json"
    assert _mode(path) == 0o600
    assert json.loads(path.read_text())["keys"] == {"openai": SECRET}
    assert load_key("openai") == SECRET and key_location("openai") == "file"
    assert load_key("anthropic") is None and key_location("anthropic") is None
    # No temp file left behind.
    assert [p.name for p in path.parent.iterdir() if p.name.startswith(".keys-")] == []


@posix_only
def test_the_file_is_0600_whatever_the_umask(no_keyring):
    old = os.umask(0)
    try:
        save_key("openai", SECRET)
    finally:
        os.umask(old)
    assert _mode(keys_file()) == 0o600


@posix_only
def test_loosened_permissions_are_fixed_on_save_and_on_load(no_keyring):
    save_key("openai", SECRET)
    os.chmod(keys_file(), 0o644)
    save_key("anthropic", "sk-ant-other")
    assert _mode(keys_file()) == 0o600
    os.chmod(keys_file(), 0o640)
    assert load_key("openai") == SECRET
    assert _mode(keys_file()) == 0o600


def test_several_providers_and_delete(no_keyring):
    save_key("openai", SECRET)
    save_key("anthropic", "sk-ant-other")
    assert load_key("anthropic") == "sk-ant-other"
    delete_key("openai")
    assert load_key("openai") is None and load_key("anthropic") == "sk-ant-other"
    delete_key("anthropic")
    assert not keys_file().exists()  # nothing left to keep
    delete_key("anthropic")  # absent is fine


def test_an_empty_key_removes_the_stored_one(no_keyring):
    save_key("openai", SECRET)
    save_key("openai", "   ")
    assert load_key("openai") is None


def test_a_corrupt_file_is_ignored_not_fatal(no_keyring, caplog):
    keys_file().parent.mkdir(parents=True, exist_ok=True)
    keys_file().write_text('{"keys": {"openai": "sk-half')
    assert load_key("openai") is None
    assert "keys.json" in caplog.text and "sk-half" not in caplog.text


def test_no_provider_is_an_error():
    with pytest.raises(KeystoreError):
        save_key("", SECRET)


# --- the keyring ------------------------------------------------------------------------------------------


def test_a_real_keyring_is_used_and_no_file_is_written(memory_keyring):
    assert key_storage() == "keyring"
    assert save_key("openai", SECRET) == "keyring"
    assert memory_keyring.passwords == {(keystore.SERVICE, "openai"): SECRET}
    assert not keys_file().exists()
    assert load_key("openai") == SECRET and key_location("openai") == "keyring"
    delete_key("openai")
    assert memory_keyring.passwords == {} and load_key("openai") is None


def test_moving_to_a_keyring_removes_the_plain_text_copy(use_keyring):
    use_keyring(fail.Keyring())
    save_key("openai", "sk-old-in-file")
    save_key("anthropic", "sk-ant-in-file")
    ring = use_keyring(MemoryKeyring())
    assert load_key("openai") == "sk-old-in-file"  # still found in the file until replaced
    assert save_key("openai", SECRET) == "keyring"
    text = keys_file().read_text()
    assert "sk-old-in-file" not in text and "sk-ant-in-file" in text
    assert ring.passwords[(keystore.SERVICE, "openai")] == SECRET


def test_a_keyring_that_refuses_raises_rather_than_writing_plain_text(use_keyring):
    use_keyring(LockedKeyring())
    with pytest.raises(KeystoreError, match="OS keyring refused the key for openai"):
        save_key("openai", SECRET)
    assert not keys_file().exists()


@pytest.mark.parametrize("backend", [fail.Keyring, null.Keyring, EmptyChainer], ids=["fail", "null", "empty-chainer"])
def test_backends_that_are_not_real_keyrings_mean_the_file(use_keyring, backend):
    use_keyring(backend())
    assert key_storage() == "file"
    assert save_key("openai", SECRET) == "file"
    assert keys_file().exists()


# --- lookups: environment first ---------------------------------------------------------------------------


def test_lookup_prefers_the_environment(memory_keyring, monkeypatch):
    save_key("openai", SECRET)
    assert lookup_api_key("openai/gpt-4.1-mini") == SECRET
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    assert lookup_api_key("openai/gpt-4.1-mini") == "sk-from-env"
    assert lookup_api_key("anthropic/claude-sonnet-4-5") is None


def test_key_values_are_never_logged(use_keyring, caplog, capfd):
    caplog.set_level(logging.DEBUG)
    use_keyring(fail.Keyring())
    save_key("openai", SECRET)
    load_key("openai")
    use_keyring(MemoryKeyring())
    save_key("openai", SECRET)
    load_key("openai")
    delete_key("openai")
    use_keyring(LockedKeyring())
    with pytest.raises(KeystoreError) as info:
        save_key("openai", SECRET)
    out, err = capfd.readouterr()
    assert caplog.records  # something was logged, just never the key
    for text in (caplog.text, out, err, str(info.value)):
        assert SECRET not in text


# --- F4: the key file lies under no folder a tool can reach ----------------------------------------------


@posix_only
def test_f4_the_key_file_is_under_no_default_mount(no_keyring, tmp_path):
    """F4: with no keyring the file was ~/.config/workbench/keys.json, mounted as /user (reads allowed)."""
    save_key("openai", SECRET)
    path = keys_file().resolve()
    for point, mount in default_mounts().items():
        if mount.kind == "host":
            root = mount.resolve_host(tmp_path)
            assert not path.is_relative_to(root), f"{path} lies under the default mount {point} ({root})"
    assert not path.is_relative_to(user_config_dir().resolve())
    assert key_folder() == path.parent
    assert _mode(path.parent) == 0o700 and _mode(path) == 0o600


@posix_only
def test_f4_a_legacy_key_file_is_moved_not_copied(no_keyring):
    """F4: an existing ~/.config/workbench/keys.json moves to the key folder (0600) and is gone from /user."""
    legacy = user_config_dir() / "keys.json"
    legacy.parent.mkdir(parents=True, exist_ok=True)
    legacy.write_text(json.dumps({"keys": {"openai": SECRET}}))
    os.chmod(legacy, 0o600)
    assert load_key("openai") == SECRET
    assert not legacy.exists()
    assert json.loads(keys_file().read_text())["keys"] == {"openai": SECRET}
    assert _mode(keys_file()) == 0o600 and _mode(key_folder()) == 0o700


@posix_only
def test_f4_a_legacy_file_merges_under_newer_keys(no_keyring):
    """F4: both files present: the newer file wins per provider, the legacy one's other keys are kept, and
    the legacy file is removed."""
    save_key("openai", SECRET)
    legacy = user_config_dir() / "keys.json"
    legacy.parent.mkdir(parents=True, exist_ok=True)
    legacy.write_text(json.dumps({"keys": {"openai": "sk-old-0000", "anthropic": "sk-ant-legacy"}}))
    os.chmod(legacy, 0o644)
    assert load_key("openai") == SECRET and load_key("anthropic") == "sk-ant-legacy"
    assert not legacy.exists() and _mode(keys_file()) == 0o600


@posix_only
def test_f4_a_loose_key_folder_is_tightened(no_keyring):
    save_key("openai", SECRET)
    os.chmod(key_folder(), 0o755)
    assert load_key("openai") == SECRET
    assert _mode(key_folder()) == 0o700
