"""G4 Settings: values saved, the key only in the keystore (never the workspace, the store, the
settings JSON or a log), where the key comes from in words, and Test connection against the stub."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import stat
import sys
from pathlib import Path

import keyring
import pytest
from keyring.backend import KeyringBackend
from keyring.backends import fail
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QDialogButtonBox, QFileDialog

from tests.fakes import MemoryKeyring, SlowKeyring, ticks_during, until
from tests.stub_server import StubReply
from workbench import keystore
from workbench.config import UserSettings, load_user_settings, user_config_dir, user_data_dir, user_settings_path
from workbench.secrets import lookup_api_key
from workbench.session import Session
from workbench.ui.settings_dialog import COMMON_MODELS, SettingsDialog, SettingsValues

SECRET = "sk-test-SETTINGS-SECRET-93b1c77e"
LEFT = Qt.MouseButton.LeftButton


@pytest.fixture(autouse=True)
def _qt_app(qapp):
    qapp.setQuitOnLastWindowClosed(False)
    return qapp


@pytest.fixture
def keyring_backend():
    """Set a keyring backend for one test and restore the previous one after."""
    previous = keyring.get_keyring()

    def install(backend: KeyringBackend) -> KeyringBackend:
        keyring.set_keyring(backend)
        return backend

    install(fail.Keyring())  # default: a headless machine, no real keyring
    yield install
    keyring.set_keyring(previous)


@pytest.fixture
def workspace(tmp_path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "README.md").write_text("# A project\n")
    return ws


def make_dialog(qtbot, workspace: Path, settings: UserSettings | None = None, **kw) -> SettingsDialog:
    dialog = SettingsDialog(settings or UserSettings(), workspace, **kw)
    qtbot.addWidget(dialog)
    return dialog


def files_holding(folder: Path, needle: bytes) -> list[Path]:
    """Every file under ``folder`` whose bytes contain ``needle``."""
    if not folder.exists():
        return []
    return [p for p in folder.rglob("*") if p.is_file() and needle in p.read_bytes()]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- values and apply ---------------------------------------------------------------------------------------


def test_dialog_shows_the_current_settings_and_common_models(qtbot, workspace, keyring_backend):
    settings = UserSettings(model="anthropic/claude-sonnet-4-5", api_base="http://127.0.0.1:9/v1",
                            default_permission="deny")
    dialog = make_dialog(qtbot, workspace, settings)
    items = [dialog.model_combo.itemText(i) for i in range(dialog.model_combo.count())]
    assert items == list(COMMON_MODELS) and "demo" in items and "ollama/llama3.1" in items
    assert dialog.model_combo.isEditable()
    v = dialog.values()
    assert v == SettingsValues("anthropic/claude-sonnet-4-5", "http://127.0.0.1:9/v1", workspace, "deny", None)
    assert dialog.key_edit.echoMode() == dialog.key_edit.EchoMode.Password


def test_apply_saves_settings_and_the_key_goes_nowhere_but_the_keystore(
    qtbot, workspace, keyring_backend, stub_server, caplog, capfd
):
    caplog.set_level(logging.DEBUG)
    settings = UserSettings()
    dialog = make_dialog(qtbot, workspace, settings)
    dialog.model_combo.setCurrentText("openai/test-model")
    dialog.api_base_edit.setText(stub_server.url)
    dialog.key_edit.setText(SECRET)
    dialog.permission_combo.setCurrentIndex(dialog.permission_combo.findData("allow"))
    applied = []
    dialog.sig_settings_applied.connect(applied.append)

    values = dialog.apply()

    assert SECRET not in repr(values) and applied == [values]
    saved = load_user_settings()
    assert saved.model == "openai/test-model" and saved.api_base == stub_server.url
    assert saved.default_permission == "allow"
    assert saved.last_workspace == str(workspace.resolve()) and saved.recent_workspaces[0] == str(workspace.resolve())
    assert dialog.key_edit.text() == ""  # not kept in the widget after saving
    # Stored in the keystore: here the 0600 file, labelled unencrypted.
    assert keystore.load_key("openai") == SECRET and lookup_api_key("openai/test-model") == SECRET
    if sys.platform != "win32":
        assert stat.S_IMODE(os.stat(keystore.keys_file()).st_mode) == 0o600
    assert dialog.key_source_label.text() == f"Key in use: file (unencrypted) at {keystore.keys_file()}"

    # A session in that workspace uses the key for a real (stubbed) call, so the store gets written.
    stub_server.script(StubReply(text="Hello.", usage=(10, 2)))

    async def one_run() -> None:
        session = await Session.open(workspace, model="openai/test-model", api_base=stub_server.url)
        result = await session.run("Say hello")
        assert result.status == "done", result.error
        await session.close()

    asyncio.run(one_run())
    assert list((workspace / ".workbench").glob("*.sqlite3")), "the store was created"

    needle = SECRET.encode()
    assert files_holding(workspace, needle) == []  # the workspace and its .workbench/ store
    assert SECRET not in user_settings_path().read_text()
    assert files_holding(user_config_dir(), needle) == []  # the /user mount: never the key (F4)
    assert files_holding(user_data_dir(), needle) == [keystore.keys_file()]
    out, err = capfd.readouterr()
    assert SECRET not in caplog.text and SECRET not in out and SECRET not in err


def test_with_a_real_keyring_the_key_goes_there_and_no_file_holds_it(qtbot, workspace, keyring_backend):
    ring = keyring_backend(MemoryKeyring())
    dialog = make_dialog(qtbot, workspace)
    dialog.model_combo.setCurrentText("openai/gpt-4.1-mini")
    assert "saved in the OS keyring" in dialog.key_source_label.text()
    dialog.key_edit.setText(SECRET)
    dialog.apply()
    assert ring.passwords == {(keystore.SERVICE, "openai"): SECRET}
    assert not keystore.keys_file().exists()
    assert files_holding(user_config_dir(), SECRET.encode()) == []
    assert files_holding(workspace, SECRET.encode()) == []
    assert dialog.key_source_label.text() == "Key in use: OS keyring"
    assert dialog.forget_button.isEnabled()
    qtbot.mouseClick(dialog.forget_button, LEFT)
    assert ring.passwords == {} and not dialog.forget_button.isEnabled()


def test_key_source_names_the_environment_variable(qtbot, workspace, keyring_backend, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    dialog = make_dialog(qtbot, workspace, UserSettings(model="openai/gpt-4.1"))
    assert dialog.key_source_label.text().startswith("Key in use: from $OPENAI_API_KEY")
    dialog.model_combo.setCurrentText("anthropic/claude-sonnet-4-5")
    assert "No key yet for anthropic" in dialog.key_source_label.text()
    assert "file (unencrypted)" in dialog.key_source_label.text()
    dialog.model_combo.setCurrentText("demo")
    assert not dialog.key_edit.isEnabled() and "needs no key" in dialog.key_source_label.text()


def test_a_key_typed_for_demo_is_not_saved(qtbot, workspace, keyring_backend):
    dialog = make_dialog(qtbot, workspace)
    dialog.model_combo.setCurrentText("demo")
    dialog.key_edit.setText(SECRET)  # the field is disabled for demo; even so nothing is stored
    values = dialog.apply()
    assert not keystore.keys_file().exists()
    # G8: demo was already the model in use: nothing changed, so nothing is written.
    assert values.changed == () and not user_settings_path().exists()


def test_save_button_applies_and_closes_bad_values_keep_it_open(qtbot, workspace, keyring_backend):
    dialog = make_dialog(qtbot, workspace)
    dialog.open()
    assert dialog.isVisible()
    save = dialog.buttons.button(QDialogButtonBox.StandardButton.Save)
    dialog.workspace_edit.setText(str(workspace / "missing"))
    qtbot.mouseClick(save, LEFT)
    assert dialog.isVisible() and dialog.error_label.isVisibleTo(dialog)
    assert "is not a folder" in dialog.error_label.text()
    assert not user_settings_path().exists()
    dialog.workspace_edit.setText(str(workspace))
    dialog.api_base_edit.setText("localhost:8000")
    qtbot.mouseClick(save, LEFT)
    assert dialog.isVisible() and "API base" in dialog.error_label.text()
    dialog.api_base_edit.setText("")
    dialog.permission_combo.setCurrentIndex(dialog.permission_combo.findData("deny"))
    with qtbot.waitSignal(dialog.finished, timeout=2000):
        qtbot.mouseClick(save, LEFT)
    assert not dialog.isVisible() and load_user_settings().default_permission == "deny"


def test_browse_opens_a_folder_chooser_without_blocking(qtbot, workspace, tmp_path, keyring_backend):
    other = tmp_path / "other"
    other.mkdir()
    dialog = make_dialog(qtbot, workspace)
    dialog.open()
    qtbot.mouseClick(dialog.browse_button, LEFT)  # returns at once: open(), not exec()
    chooser = dialog._folder_dialog
    assert isinstance(chooser, QFileDialog) and chooser.isVisible()
    chooser.fileSelected.emit(str(other))
    chooser.reject()
    assert dialog.values().workspace == other


# --- Test connection ----------------------------------------------------------------------------------------


def test_test_connection_against_the_stub_reports_success_in_words(qtbot, workspace, keyring_backend, stub_server):
    stub_server.script(StubReply(text="O", usage=(9, 1)))
    dialog = make_dialog(qtbot, workspace)
    dialog.model_combo.setCurrentText("openai/test-model")
    dialog.api_base_edit.setText(stub_server.url)
    dialog.key_edit.setText(SECRET)
    results = []
    dialog.sig_connection_tested.connect(lambda ok, msg: results.append((ok, msg)))

    assert asyncio.run(dialog.test_connection()) is True

    text = dialog.test_label.text()
    assert text.startswith("Connected: openai/test-model answered in ") and text.endswith(" s")
    assert dialog.test_label.property("status") == "ok"
    assert results == [(True, text)] and dialog.test_button.isEnabled()
    (body,) = stub_server.requests
    assert body["max_tokens"] == 1 and body["model"] == "test-model"
    assert not keystore.keys_file().exists()  # testing saves nothing


def test_test_connection_to_a_closed_port_reports_the_error_in_words(qtbot, workspace, keyring_backend):
    port = free_port()
    dialog = make_dialog(qtbot, workspace)
    dialog.model_combo.setCurrentText("openai/test-model")
    dialog.api_base_edit.setText(f"http://127.0.0.1:{port}/v1")
    dialog.key_edit.setText("sk-test")

    assert asyncio.run(dialog.test_connection()) is False

    text = dialog.test_label.text()
    assert f"127.0.0.1:{port}" in text and ("connection refused" in text or "connect" in text), text
    assert "Traceback" not in text and "\n" not in text
    assert dialog.test_label.property("status") == "error"


def test_test_connection_reports_a_refused_key(qtbot, workspace, keyring_backend, stub_server):
    stub_server.script(StubReply(status=401))
    dialog = make_dialog(qtbot, workspace)
    dialog.model_combo.setCurrentText("openai/test-model")
    dialog.api_base_edit.setText(stub_server.url)
    dialog.key_edit.setText("sk-wrong")
    assert asyncio.run(dialog.test_connection()) is False
    assert "API key for openai/test-model was refused" in dialog.test_label.text()


def test_the_button_starts_the_coroutine_through_the_injected_starter(qtbot, workspace, keyring_backend):
    started = []
    dialog = make_dialog(qtbot, workspace, start=started.append)
    dialog.model_combo.setCurrentText("demo")
    qtbot.mouseClick(dialog.test_button, LEFT)
    assert len(started) == 1 and asyncio.iscoroutine(started[0])
    assert asyncio.run(started[0]) is True
    assert "offline" in dialog.test_label.text()


def test_closing_the_dialog_cancels_a_running_test(qtbot, workspace, keyring_backend, stub_server):
    stub_server.script(StubReply(text="O", delay=5.0))
    outcome = {}

    async def main() -> None:
        dialog = make_dialog(qtbot, workspace)  # default starter: asyncio.ensure_future on this loop
        dialog.model_combo.setCurrentText("openai/test-model")
        dialog.api_base_edit.setText(stub_server.url)
        dialog.key_edit.setText("sk-test")
        dialog.open()
        dialog.test_button.click()
        task = dialog._test_task
        assert isinstance(task, asyncio.Task)
        await until(lambda: "Testing" in dialog.test_label.text() and len(stub_server.requests) == 1,
                    what="the key test to reach the server")
        dialog.reject()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 5)
        outcome["label"] = dialog.test_label.text()
        outcome["enabled"] = dialog.test_button.isEnabled()

    asyncio.run(main())
    assert outcome == {"label": "Test cancelled.", "enabled": True}
    assert QApplication.instance() is not None


def test_test_connection_without_a_key_says_so_without_calling(qtbot, workspace, keyring_backend, stub_server):
    dialog = make_dialog(qtbot, workspace)
    dialog.model_combo.setCurrentText("openai/test-model")
    dialog.api_base_edit.setText(stub_server.url)
    assert asyncio.run(dialog.test_connection()) is False
    assert dialog.test_label.text().startswith("No API key for openai: paste one in API key or set $OPENAI_API_KEY")
    assert stub_server.requests == []


def test_test_connection_looks_the_key_up_off_the_gui_loop_and_a_second_click_waits(
        qtbot, workspace, keyring_backend, stub_server):
    """A slow keyring (D-Bus, a prompt to unlock it) does not freeze the window during Test connection,
    and clicking Test again meanwhile starts no second test."""
    stub_server.script(StubReply(text="O"))
    ring = keyring_backend(SlowKeyring(delay=0.5))
    ring.passwords[(keystore.SERVICE, "openai")] = "sk-test"
    seen: dict[str, object] = {}

    async def main() -> None:
        dialog = make_dialog(qtbot, workspace)  # default starter: asyncio.ensure_future on this loop
        dialog.model_combo.setCurrentText("openai/test-model")
        dialog.api_base_edit.setText(stub_server.url)
        ring.reads.clear()  # the key's source shown under the field (once a provider) is not the test
        dialog.show()
        qtbot.mouseClick(dialog.test_button, LEFT)
        first = dialog._test_task
        qtbot.mouseClick(dialog.test_button, LEFT)  # while the key is looked up
        assert dialog._test_task is first
        assert isinstance(first, asyncio.Task)
        seen["ok"], seen["ticks"] = await ticks_during(first)
        seen["label"] = dialog.test_label.text()
        seen["enabled"] = dialog.test_button.isEnabled()

    asyncio.run(main())
    assert seen["ok"] is True and seen["enabled"] is True, seen["label"]
    assert len(stub_server.requests) == 1
    assert len(ring.reads) == 1, ring.reads  # Test's own look-up, once for the two clicks
    start, end, on_main = ring.reads[0]
    assert not on_main
    assert sum(start <= t <= end for t in seen["ticks"]) >= 10, "the GUI loop stood still while the keyring answered"
