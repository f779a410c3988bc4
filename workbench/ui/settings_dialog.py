"""The Settings dialog (G4): model, API base, API key, workspace folder, default permission.

The API key field is masked and says where the key in use comes from: the provider's environment
variable, the OS keyring, or the plain-text per-user file (``workbench.keystore``). A typed key is saved
only through the keystore — never into the workspace, the thread store, the user settings JSON or a log.

"Test connection" makes one tiny call (``max_tokens=1``) through the facade's ``check_connection``
(the model host, or a worker thread's loop: litellm's import and the request never run on the GUI
thread, and the window never stalls); the result is reported in words. The coroutine (``test_connection``) needs no Qt loop:
any asyncio loop on the GUI thread will do, and the dialog starts it through the ``start`` callable
given to ``__init__`` (the app passes its qasync task starter, which keeps the task and reports
failures). Open the dialog with ``open()``, never ``exec()``.

G8 — scoped settings: the fields show the values in use (``settings_scope.resolve``, or the session's
``setting_sources``), each with where it comes from — this workspace (workbench.yaml), the default for new
workspaces (user settings), the environment, or this session only. "Save to" chooses where the values
changed are written: the workspace's workbench.yaml (a targeted edit of each changed key; comments and
other keys kept; trust renewed for the person's own change) or the user settings. It starts on the place
the values come from. Only what changed is written: Save with no change writes nothing and reopens
nothing. A model saved to the workspace takes the API base shown with it, so the endpoint in use does
not change behind the person's back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from workbench import keystore
from workbench.config import EFFECTS, UserSettings, add_recent_workspace, save_user_settings
from workbench.errors import WorkbenchError
from workbench.secrets import env_var_for, provider_of
from workbench.settings_scope import BUILTIN, ENVIRONMENT, KEYS, OVERRIDE, PLACE_LABELS, USER, WORKSPACE, resolve
from workbench.ui.dialog_fit import grow_with_contents
from workbench.ui.plain_text import plain_label
from workbench.ui.style import set_status_property

log = logging.getLogger(__name__)

#: Offered in the model chooser; any litellm model string may be typed instead.
COMMON_MODELS: tuple[str, ...] = (
    "demo",
    "openai/gpt-4.1-mini",
    "openai/gpt-4.1",
    "openai/gpt-4o-mini",
    "anthropic/claude-sonnet-4-5",
    "anthropic/claude-haiku-4-5",
    "gemini/gemini-2.5-flash",
    "gemini/gemini-2.5-pro",
    "openrouter/openai/gpt-4.1-mini",
    "ollama/llama3.1",
)

#: Providers that usually run locally and need no key.
LOCAL_PROVIDERS = frozenset({"ollama", "ollama_chat", "lm_studio", "llamafile", "hosted_vllm"})

PERMISSION_LABELS = {
    "ask": "Ask me (recommended)",
    "allow": "Allow without asking",
    "deny": "Deny",
}

Starter = Callable[[Coroutine[Any, Any, Any]], Any]


@dataclass(frozen=True)
class SettingsValues:
    """What the dialog holds. ``api_key`` is the newly typed key (None: keep the stored one); never printed."""

    model: str
    api_base: str | None
    workspace: Path
    default_permission: str
    api_key: str | None = field(default=None, repr=False)
    #: G8: what ``apply`` wrote (``model``, ``api_base``, ``permissions.default``, ``workspace``, ``api_key``)
    changed: tuple[str, ...] = ()
    #: G8: where the changed values went: ``workspace`` (workbench.yaml) or ``user`` (user settings)
    save_to: str = USER


_UNKNOWN = object()


def describe_key_source(model: str, stored: Any = _UNKNOWN) -> tuple[str, str]:
    """Where the key for ``model`` comes from now, in words, and its kind.

    Kinds: ``none-needed`` (demo, local servers), ``env``, ``keyring``, ``file``, ``missing``.
    ``stored`` is ``keystore.key_location(provider)`` if the caller already knows it.
    """
    if model == "demo":
        return "the offline demo model needs no key", "none-needed"
    provider = provider_of(model)
    env = env_var_for(model)
    if os.environ.get(env):
        return f"from ${env} (the environment wins over a saved key)", "env"
    where = keystore.key_location(provider) if stored is _UNKNOWN else stored
    if where == "keyring":
        return "OS keyring", "keyring"
    if where == "file":
        return f"file (unencrypted) at {keystore.keys_file()}", "file"
    if provider in LOCAL_PROVIDERS:
        return "none needed for a local server", "none-needed"
    if keystore.key_storage() == "keyring":
        target = "the OS keyring"
    else:
        target = f"a file (unencrypted) at {keystore.keys_file()}"
    return f"No key yet for {provider} — one typed here is saved in {target}, or set ${env}", "missing"


def _default_start(coro: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.ensure_future(coro)


class SettingsDialog(QDialog):
    """Edit user settings; ``apply()`` saves them (and a typed key through the keystore)."""

    sig_settings_applied = Signal(object)
    """Settings were saved (the ``SettingsValues``; its key, if any, is already in the keystore)."""

    sig_connection_tested = Signal(bool, str)
    """A connection test finished: whether it worked, and the message shown."""

    test_timeout = 20.0

    def __init__(
        self,
        settings: UserSettings,
        workspace: Path,
        parent: QWidget | None = None,
        *,
        start: Starter | None = None,
        sources: Any = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("settingsDialog")
        self.setWindowTitle("Settings")
        self.settings = settings
        self.workspace = Path(workspace)
        has_ws = self.workspace.is_dir() and self.workspace != Path.home()
        # G8: the values in use and where each comes from (the session's own view when there is one).
        self.sources = dict(sources) if sources else resolve(self.workspace if has_ws else None, settings)
        self.saved_workspace: Any = None  # settings_scope.SavedWorkspace after a save to workbench.yaml
        self._start = start or _default_start
        self._test_task: Any = None
        self._testing = False
        self._stored: dict[str, Any] = {}  # provider -> keystore.key_location(), asked once per provider

        # -- model --
        self.model_combo = QComboBox(self)
        self.model_combo.setObjectName("settingsModel")
        self.model_combo.setEditable(True)
        self.model_combo.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        self.model_combo.addItems(list(COMMON_MODELS))
        self.model_combo.setCurrentText(self.sources["model"].value or "demo")
        self.model_combo.setToolTip('Any litellm model string, e.g. "openai/gpt-4.1-mini"; "demo" runs offline')

        base = self.sources["api_base"]
        self.api_base_edit = QLineEdit(base.value if base.place in (WORKSPACE, USER, OVERRIDE) and base.value else "",
                                       self)
        self.api_base_edit.setObjectName("settingsApiBase")
        self.api_base_edit.setPlaceholderText(
            f"not set: {base.value}" if base.place == ENVIRONMENT else
            "the provider's default — or e.g. http://127.0.0.1:8000/v1")

        # -- key --
        self.key_edit = QLineEdit(self)
        self.key_edit.setObjectName("settingsApiKey")
        self.key_edit.setEchoMode(QLineEdit.EchoMode.Password)
        self.key_edit.setContextMenuPolicy(Qt.ContextMenuPolicy.NoContextMenu)
        self.key_edit.setAttribute(Qt.WidgetAttribute.WA_InputMethodEnabled, False)
        self.forget_button = QPushButton("Forget saved key", self)
        self.forget_button.setObjectName("settingsForgetKey")
        self.forget_button.setAutoDefault(False)
        self.key_source_label = plain_label(self)
        self.key_source_label.setObjectName("settingsKeySource")
        self.key_source_label.setProperty("role", "muted")
        self.key_source_label.setWordWrap(True)
        self.key_source_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

        # -- workspace --
        self.workspace_edit = QLineEdit(str(workspace), self)
        self.workspace_edit.setObjectName("settingsWorkspace")
        self.browse_button = QPushButton("Browse…", self)
        self.browse_button.setAutoDefault(False)
        self._folder_dialog: QFileDialog | None = None

        # -- permission --
        self.permission_combo = QComboBox(self)
        self.permission_combo.setObjectName("settingsPermission")
        for effect in EFFECTS:
            self.permission_combo.addItem(PERMISSION_LABELS.get(effect, effect), effect)
        index = self.permission_combo.findData(self.sources["permissions.default"].value)
        self.permission_combo.setCurrentIndex(index if index >= 0 else self.permission_combo.findData("ask"))
        self.permission_combo.setToolTip(
            "What happens to writes and tool calls that no rule in workbench.yaml covers"
        )

        # -- test --
        self.test_button = QPushButton("Test connection", self)
        self.test_button.setObjectName("settingsTestConnection")
        self.test_button.setAutoDefault(False)
        self.test_label = plain_label(self)
        self.test_label.setObjectName("settingsTestResult")
        self.test_label.setWordWrap(True)
        self.test_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

        self.error_label = plain_label(self)
        self.error_label.setObjectName("settingsError")
        self.error_label.setWordWrap(True)
        self.error_label.setVisible(False)
        set_status_property(self.error_label, "error")

        # -- G8: where values come from, and where Save writes --
        self.save_to = QComboBox(self)
        self.save_to.setObjectName("settingsSaveTo")
        self.save_to.addItem(PLACE_LABELS[WORKSPACE], WORKSPACE)
        self.save_to.addItem(PLACE_LABELS[USER], USER)
        self.save_to.setAccessibleName("Save changes to")
        self.save_to.setToolTip("Where Save writes the values you change: this workspace's workbench.yaml "
                                "(it wins here) or your defaults for workspaces that don't set them")
        if not has_ws:
            self.save_to.model().item(0).setEnabled(False)  # type: ignore[attr-defined]
        from_ws = any(src.place == WORKSPACE for src in self.sources.values())
        self.save_to.setCurrentIndex(0 if has_ws and from_ws else 1)
        self.source_labels: dict[str, QLabel] = {}
        for key in KEYS:
            label = plain_label(self)
            label.setObjectName(f"settingsSource_{key.replace('.', '_')}")
            label.setProperty("role", "muted")
            label.setWordWrap(True)
            label.setText(self._source_text(key))
            self.source_labels[key] = label
        self.scope_note = plain_label(self)
        self.scope_note.setObjectName("settingsScopeNote")
        self.scope_note.setWordWrap(True)
        self.scope_note.setVisible(False)

        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel, self
        )

        # -- layout --
        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        form.addRow(self._label("Save &to:", self.save_to), self.save_to)
        form.addRow("", self.scope_note)
        form.addRow(self._label("&Model:", self.model_combo), self.model_combo)
        form.addRow("", self.source_labels["model"])
        form.addRow(self._label("API &base:", self.api_base_edit), self.api_base_edit)
        form.addRow("", self.source_labels["api_base"])
        key_row = QHBoxLayout()
        key_row.addWidget(self.key_edit, 1)
        key_row.addWidget(self.forget_button)
        form.addRow(self._label("API &key:", self.key_edit), key_row)
        form.addRow("", self.key_source_label)
        ws_row = QHBoxLayout()
        ws_row.addWidget(self.workspace_edit, 1)
        ws_row.addWidget(self.browse_button)
        form.addRow(self._label("&Workspace:", self.workspace_edit), ws_row)
        form.addRow(self._label("&Default permission:", self.permission_combo), self.permission_combo)
        form.addRow("", self.source_labels["permissions.default"])
        test_row = QHBoxLayout()
        test_row.addWidget(self.test_button)
        test_row.addWidget(self.test_label, 1)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addLayout(test_row)
        layout.addWidget(self.error_label)
        layout.addStretch(1)
        layout.addWidget(self.buttons)
        self.setMinimumWidth(600)
        self.key_source_label.setMinimumWidth(400)
        self.key_source_label.setContentsMargins(0, 0, 0, 6)  # room under the wrapped text
        self.test_label.setMinimumWidth(360)

        # -- wiring --
        self.model_combo.currentTextChanged.connect(self._on_model_changed)
        self.forget_button.clicked.connect(self._on_forget)
        self.browse_button.clicked.connect(self._on_browse)
        self.test_button.clicked.connect(self._on_test_clicked)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        self.finished.connect(self._on_finished)
        self._refresh_key_source()
        self._initial = self._field_values()
        self._initial_workspace = self.workspace_edit.text().strip()
        order = [self.save_to, self.model_combo, self.api_base_edit, self.key_edit, self.forget_button,
                 self.workspace_edit, self.browse_button, self.permission_combo, self.test_button,
                 *self.buttons.buttons()]
        for first, second in zip(order, order[1:]):  # G14: Tab follows the layout (Save to was made last)
            QWidget.setTabOrder(first, second)
        for signal in (self.model_combo.currentTextChanged, self.api_base_edit.textChanged,
                       self.permission_combo.currentIndexChanged, self.save_to.currentIndexChanged):
            signal.connect(self._update_scope_note)
        grow_with_contents(self)  # a longer message or key source makes it taller, never clipped

    def _label(self, text: str, buddy: QWidget) -> QLabel:
        label = plain_label(text, self)
        label.setBuddy(buddy)
        return label

    # -- values --------------------------------------------------------------------------------------------
    def model_name(self) -> str:
        return self.model_combo.currentText().strip()

    def values(self) -> SettingsValues:
        """The settings as chosen in the dialog (not yet saved)."""
        typed = self.key_edit.text().strip()
        return SettingsValues(
            model=self.model_name() or "demo",
            api_base=self.api_base_edit.text().strip() or None,
            workspace=Path(self.workspace_edit.text().strip() or ".").expanduser(),
            default_permission=self.permission_combo.currentData() or "ask",
            api_key=typed or None,
            save_to=self.save_to.currentData() or USER,
        )

    # -- G8: scopes ----------------------------------------------------------------------------------------
    def _field_values(self) -> dict[str, str | None]:
        return {"model": self.model_name() or None, "api_base": self.api_base_edit.text().strip() or None,
                "permissions.default": self.permission_combo.currentData() or "ask"}

    def changes(self) -> dict[str, str | None]:
        """The values changed in the dialog, by key (``model``, ``api_base``, ``permissions.default``)."""
        now = self._field_values()
        changes = {k: now[k] for k in KEYS if now[k] != self._initial[k]}
        if (self.save_to.currentData() == WORKSPACE and "model" in changes and "api_base" not in changes
                and now["api_base"] and self.sources["api_base"].place != WORKSPACE):
            changes["api_base"] = now["api_base"]  # the endpoint shown goes with the model it serves
        return changes

    def _source_text(self, key: str) -> str:
        src = self.sources[key]
        if src.place == BUILTIN:
            text = "Not set: the provider's default endpoint" if key == "api_base" else "From: the built-in default"
        elif src.place == ENVIRONMENT:
            text = f"From: the environment, {src.value}"
        else:
            text = f"From: {src.label}"
        if src.ignored:
            text += f" — this workspace's {key}: {src.ignored} is ignored: the workspace is not trusted"
        return text

    @Slot()
    def _update_scope_note(self, *_: Any) -> None:
        """Say when a change saved to the defaults will not apply here, or goes with the model."""
        changes = self.changes()
        notes = []
        if self.save_to.currentData() == USER:
            overridden = [k for k in changes if self.sources[k].place == WORKSPACE]
            if overridden:
                notes.append(f"This workspace's workbench.yaml sets {', '.join(overridden)}, which wins here: "
                             "the new default applies to workspaces that don't set it.")
        elif "api_base" in changes and self._field_values()["api_base"] == self._initial["api_base"]:
            notes.append("The API base shown is saved with the model, so this workspace keeps its endpoint.")
        self.scope_note.setText(" ".join(notes))
        self.scope_note.setVisible(bool(notes))

    def validate(self) -> SettingsValues:
        """The values, or ``WorkbenchError`` naming the field and what to do."""
        v = self.values()
        if not self.model_name():
            raise WorkbenchError("Model: enter a model name (e.g. openai/gpt-4.1-mini) or choose demo")
        if v.api_base and not v.api_base.startswith(("http://", "https://")):
            raise WorkbenchError(f"API base: {v.api_base!r} is not a URL — it should start with http:// or https://")
        if not v.workspace.is_dir():
            raise WorkbenchError(f"Workspace: {v.workspace} is not a folder — choose one with Browse…")
        if v.default_permission not in EFFECTS:
            raise WorkbenchError(f"Default permission: expected one of {', '.join(EFFECTS)}")
        return v

    def apply(self) -> SettingsValues:
        """Save what changed (G8) where "Save to" says — the workspace's workbench.yaml or the user
        settings — and a typed key (keystore only). Nothing changed: nothing is written and
        ``sig_settings_applied`` is not emitted.

        Raises ``WorkbenchError`` (bad value, a workbench.yaml that would not load, keyring refused) or
        ``OSError`` (a folder unwritable).
        """
        from dataclasses import replace

        v = self.validate()
        s = self.settings
        target = self.save_to.currentData() or USER
        changes = self.changes()
        changed: list[str] = list(changes)
        if changes and target == WORKSPACE:
            from workbench.session import Session

            self.saved_workspace = Session.save_workspace_settings(self.workspace, changes)
        elif changes:
            from workbench.settings_scope import save_user_values

            save_user_values(s, changes)
        if self.workspace_edit.text().strip() != self._initial_workspace:
            changed.append("workspace")
        if v.api_key and v.model != "demo":
            where = keystore.save_key(provider_of(v.model), v.api_key)
            log.info("settings: API key for %s saved (%s)", provider_of(v.model), where)
            self.key_edit.clear()
            changed.append("api_key")
        if changed:
            add_recent_workspace(s, v.workspace)
            save_user_settings(s)
            self._initial = self._field_values()
            self._initial_workspace = self.workspace_edit.text().strip()
        self._refresh_key_source(reload=True)
        v = replace(v, changed=tuple(changed), save_to=target)
        if changed:
            self.sig_settings_applied.emit(v)
        return v

    # -- dialog --------------------------------------------------------------------------------------------
    def accept(self) -> None:
        try:
            self.apply()
        except (WorkbenchError, OSError) as exc:
            self._show_error(str(exc) if isinstance(exc, WorkbenchError) else f"Cannot save settings: {exc}")
            return
        self._show_error("")
        super().accept()

    def _show_error(self, text: str) -> None:
        self.error_label.setText(text)
        self.error_label.setVisible(bool(text))

    @Slot(int)
    def _on_finished(self, _result: int) -> None:
        task = self._test_task
        if task is not None and hasattr(task, "done") and not task.done():
            task.cancel()

    # -- key source ----------------------------------------------------------------------------------------
    @Slot(str)
    def _on_model_changed(self, _text: str) -> None:
        self._refresh_key_source()

    def _stored_location(self, provider: str) -> Any:
        if provider not in self._stored:  # a keyring lookup can be slow: not on every keystroke
            self._stored[provider] = keystore.key_location(provider)
        return self._stored[provider]

    def _refresh_key_source(self, *, reload: bool = False) -> None:
        if reload:
            self._stored.clear()
        model = self.model_name() or "demo"
        stored = None if model == "demo" else self._stored_location(provider_of(model))
        text, kind = describe_key_source(model, stored)
        self.key_source_label.setText(f"Key in use: {text}" if kind in ("env", "keyring", "file") else text)
        demo = model == "demo"
        self.key_edit.setEnabled(not demo)
        if demo:
            self.key_edit.setPlaceholderText("not needed")
        elif kind in ("keyring", "file"):
            self.key_edit.setPlaceholderText("saved — type a new key to replace it")
        elif kind == "env":
            self.key_edit.setPlaceholderText(f"set by ${env_var_for(model)}")
        else:
            self.key_edit.setPlaceholderText(f"paste your {provider_of(model)} API key")
        self.forget_button.setEnabled(not demo and stored is not None)

    @Slot()
    def _on_forget(self) -> None:
        model = self.model_name()
        if not model or model == "demo":
            return
        try:
            keystore.delete_key(provider_of(model))
        except WorkbenchError as exc:
            self._show_error(str(exc))
        self._refresh_key_source(reload=True)

    # -- workspace -----------------------------------------------------------------------------------------
    @Slot()
    def _on_browse(self) -> None:
        dialog = QFileDialog(self, "Choose the workspace folder", self.workspace_edit.text())
        dialog.setFileMode(QFileDialog.FileMode.Directory)
        dialog.setOption(QFileDialog.Option.ShowDirsOnly, True)
        dialog.fileSelected.connect(self.workspace_edit.setText)
        dialog.finished.connect(dialog.deleteLater)
        self._folder_dialog = dialog
        dialog.open()

    # -- connection test -------------------------------------------------------------------------------------
    @Slot()
    def _on_test_clicked(self) -> None:
        if self._testing:
            return
        self._begin_test()  # now, not when the task first runs: a second click before then is ignored too
        self._test_task = self._start(self.test_connection())

    def _begin_test(self) -> None:
        self._testing = True
        self.test_button.setEnabled(False)

    def _end_test(self) -> None:
        self._testing = False
        try:
            self.test_button.setEnabled(True)
        except RuntimeError:  # the dialog was deleted meanwhile
            pass

    def _show_result(self, text: str, status: str) -> None:
        self.test_label.setText(text)
        set_status_property(self.test_label, status)

    async def test_connection(self) -> bool:
        """Make one tiny call with the dialog's model, API base and key; report the outcome in words. The
        Test button is off until it ends."""
        self._begin_test()
        try:
            return await self._test_connection()
        finally:
            self._end_test()

    async def _test_connection(self) -> bool:
        model = self.model_name()
        if not model:
            self._show_result("Enter a model name first.", "error")
            return False
        if model == "demo":
            self._show_result("demo is the offline model: there is nothing to connect to.", "ok")
            self.sig_connection_tested.emit(True, self.test_label.text())
            return True
        api_base = self.api_base_edit.text().strip() or None
        key = self.key_edit.text().strip() or None
        self._show_result(f"Testing {model}…", "running")
        if key is None:
            from workbench.secrets import lookup_api_key

            try:  # off the GUI thread: the OS keyring may take a while (D-Bus, or a prompt to unlock it)
                key = await asyncio.to_thread(lookup_api_key, model)
            except asyncio.CancelledError:
                with contextlib.suppress(RuntimeError):  # the dialog was deleted meanwhile
                    self._show_result("Test cancelled.", "aborted")
                raise
            except Exception as exc:  # noqa: BLE001 - said in the dialog, not raised into the loop
                message = f"The API key could not be looked up: {type(exc).__name__}: {exc}"
                self._show_result(message, "error")
                self.sig_connection_tested.emit(False, message)
                return False
        provider = provider_of(model)
        if key is None and provider not in LOCAL_PROVIDERS:
            # litellm would fail with a misleading "server error (500): Missing credentials".
            hint = " (a local OpenAI-compatible server accepts any text, e.g. none)" if api_base else ""
            message = f"No API key for {provider}: paste one in API key or set ${env_var_for(model)}{hint}."
            self._show_result(message, "error")
            self.sig_connection_tested.emit(False, message)
            return False
        from workbench.session import check_connection  # the facade (a lazy import: the dialog opens fast)

        ok, message = False, ""
        try:
            ok, message = await check_connection(model, api_base, key, timeout=self.test_timeout)
        except asyncio.CancelledError:
            message = "Test cancelled."
            raise
        finally:
            try:
                self._show_result(message, "ok" if ok else ("aborted" if message == "Test cancelled." else "error"))
            except RuntimeError:  # the dialog was deleted meanwhile
                pass
        self.sig_connection_tested.emit(ok, message)
        return ok
