"""G8: settings are scoped. The workspace's workbench.yaml wins over the user's defaults; Settings shows
where each value comes from and saves to the place the person chooses; Save with no change changes
nothing; one workspace's model or endpoint is never used for another.

The issue's defects: Settings showed "demo" while the workspace ran ``openai/…``; Save with no change
switched the workspace to demo; once set, the demo workspace ran on another workspace's model and
endpoint (one project's data sent to another's endpoint). Requests go to loopback stubs: ``stub_server``
and ``hostile`` — a request arriving at the wrong one fails the test.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from tests.stub_server import StubReply, StubServer
from tests.ui.helpers import find_dialog, visible_dialog, wait_for
from workbench import trust
from workbench.config import UserSettings, load_config, parse_config, save_user_settings, user_settings_path
from workbench.settings_scope import resolve, save_workspace_values, set_yaml_scalar

CTRL = Qt.KeyboardModifier.ControlModifier

COMMENTED = """# Team project — keep these comments
model: {model}   # the model the team pays for
instructions: Be brief.   # house style
budget:
  - {{scope: run, limit: {{total_tokens: 100000}}}}   # a cap
"""


def make_ws(tmp_path: Path, name: str, yaml: str) -> Path:
    ws = tmp_path / name
    ws.mkdir()
    (ws / "README.md").write_text(f"# {name}\n", encoding="utf-8")
    (ws / "workbench.yaml").write_text(yaml, encoding="utf-8")
    return ws


def models_asked(server: StubServer) -> list[str]:
    return [str(r.get("model")) for r in server.requests]


async def open_settings(window: Any, qtbot: Any) -> Any:
    window.activateWindow()
    await wait_for(lambda: QApplication.activeWindow() is window, 5, "the window to be active")
    qtbot.keyClick(QApplication.focusWidget() or window, Qt.Key.Key_Comma, CTRL)  # Ctrl+, as a person does
    return await find_dialog("settingsDialog", 10)


async def closed(window: Any) -> None:
    await wait_for(lambda: visible_dialog("settingsDialog") is None, 10, "Settings to close")
    await asyncio.wait_for(window.wait_settled(), 20) if hasattr(window, "wait_settled") else None


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")


# -- the window: which model and endpoint each workspace runs on --------------------------------------------
async def test_G8_workspace_model_wins_and_B_never_runs_on_A_endpoint(
    windows: Any, tmp_path: Path, stub_server: StubServer, hostile: StubServer, key: None
) -> None:
    # The user's default (for workspaces that name no model) is served by stub_server; workspace A
    # names its own model and endpoint (hostile, trusted here by WORKBENCH_TRUST=1).
    save_user_settings(UserSettings(model="openai/default-model", api_base=stub_server.url))
    a = make_ws(tmp_path, "a", f"model: openai/a-model\napi_base: {hostile.url}\n")
    b = make_ws(tmp_path, "b", "instructions: Workspace B.\n")
    c = make_ws(tmp_path, "c", f"model: openai/c-model\napi_base: {stub_server.url}\n")

    window = await windows(a)
    assert window.session.model_name == "openai/a-model"  # the workspace's yaml wins over the user default
    hostile.script(StubReply(text="A here."))
    assert await asyncio.wait_for(window.send("hello A"), 20) == "done"
    assert models_asked(hostile) == ["a-model"] and stub_server.requests == []

    await window.open_workspace(b)  # no model key: the user's default model on the user's endpoint
    assert window.session.model_name == "openai/default-model"
    assert window.session.config.api_base == stub_server.url
    stub_server.script(StubReply(text="B here."))
    assert await asyncio.wait_for(window.send("hello B"), 20) == "done"
    assert models_asked(stub_server) == ["default-model"] and len(hostile.requests) == 1  # nothing of B at A's

    await window.open_workspace(c)  # its own model and endpoint
    stub_server.script(StubReply(text="C here."))
    assert await asyncio.wait_for(window.send("hello C"), 20) == "done"
    assert models_asked(stub_server) == ["default-model", "c-model"] and len(hostile.requests) == 1


async def test_G8_a_workspace_model_never_takes_the_user_endpoint(
    windows: Any, tmp_path: Path, stub_server: StubServer, hostile: StubServer, key: None
) -> None:
    """The user's API base goes with the user's model only: a workspace naming ``openai/x`` without an
    api_base does not send it to the endpoint saved for other workspaces."""
    save_user_settings(UserSettings(model="openai/default-model", api_base=hostile.url))
    ws = make_ws(tmp_path, "own", "model: openai/own-model\n")
    window = await windows(ws)
    assert window.session.model_name == "openai/own-model" and window.session.config.api_base is None


async def test_G8_the_demo_workspace_never_runs_on_the_user_model_or_endpoint(
    windows: Any, demo_workspace: Path, hostile: StubServer, key: None
) -> None:
    """The issue's case: once Settings held another project's model and endpoint, the demo ran on them."""
    save_user_settings(UserSettings(model="openai/other-project", api_base=hostile.url))
    window = await windows(demo_workspace)
    assert window.session.model_name == "demo" and window.session.config.api_base is None
    assert window.session.setting_sources(window.settings)["model"].place == "workspace"
    assert hostile.requests == []


# -- the dialog: where each value comes from; Save with no change -------------------------------------------
async def test_G8_settings_shows_the_workspace_values_and_saving_unchanged_changes_nothing(
    windows: Any, tmp_path: Path, stub_server: StubServer, key: None, qtbot: Any
) -> None:
    save_user_settings(UserSettings(model="demo"))
    ws = make_ws(tmp_path, "team", COMMENTED.format(model="openai/team-model").replace(
        "instructions:", f"api_base: {stub_server.url}\ninstructions:"))
    window = await windows(ws)
    session = window.session
    assert session.model_name == "openai/team-model"
    yaml_before = (ws / "workbench.yaml").read_bytes()
    settings_before = user_settings_path().read_bytes()

    dialog = await open_settings(window, qtbot)
    # It shows what runs (not "demo"), and where it comes from.
    assert dialog.model_combo.currentText() == "openai/team-model"
    assert dialog.api_base_edit.text() == stub_server.url
    assert "this workspace (workbench.yaml)" in dialog.source_labels["model"].text()
    assert "this workspace (workbench.yaml)" in dialog.source_labels["api_base"].text()
    assert "default for new workspaces (user settings)" in dialog.source_labels["permissions.default"].text()
    assert dialog.save_to.currentData() == "workspace"
    dialog.grab().save(str(tmp_path / "settings.png"))

    qtbot.keyClick(dialog.model_combo.lineEdit(), Qt.Key.Key_Return)  # Enter = Save, with nothing changed
    await closed(window)
    assert (ws / "workbench.yaml").read_bytes() == yaml_before
    assert user_settings_path().read_bytes() == settings_before
    assert window.session is session and window.session.model_name == "openai/team-model"  # not reopened


async def test_G8_save_to_this_workspace_edits_one_key_keeps_comments_and_stays_trusted(
    windows: Any, tmp_path: Path, stub_server: StubServer, hostile: StubServer, key: None, qtbot: Any,
    monkeypatch: pytest.MonkeyPatch
) -> None:
    """The person sets this workspace's API base in Settings: only that key is written (comments and
    other keys kept), and the workspace stays trusted for its own person's change (W1): no trust dialog,
    nothing ignored, the next request goes to the new endpoint."""
    monkeypatch.delenv("WORKBENCH_TRUST", raising=False)
    save_user_settings(UserSettings(model="openai/default-model", api_base=hostile.url))
    ws = make_ws(tmp_path, "team", COMMENTED.format(model="openai/team-model"))
    before = (ws / "workbench.yaml").read_text()
    window = await windows(ws)
    assert window.session.config.api_base is None and window.session.ignored == ()

    dialog = await open_settings(window, qtbot)
    assert dialog.save_to.currentData() == "workspace"
    dialog.api_base_edit.setFocus()
    qtbot.keyClicks(dialog.api_base_edit, stub_server.url)
    qtbot.keyClick(dialog.api_base_edit, Qt.Key.Key_Return)
    await closed(window)
    await wait_for(lambda: window.session is not None and window.session.config.api_base == stub_server.url, 20,
                   "the workspace reopened with its new API base")
    assert visible_dialog("trustDialog") is None and window.session.ignored == ()
    after = (ws / "workbench.yaml").read_text()
    assert after == before.replace("# the model the team pays for\n",
                                   f"# the model the team pays for\napi_base: {stub_server.url}\n")
    assert trust.is_trusted(ws, load_config(ws))
    stub_server.script(StubReply(text="ok"))
    assert await asyncio.wait_for(window.send("hi"), 20) == "done"
    assert models_asked(stub_server) == ["team-model"] and hostile.requests == []


async def test_G8_save_to_defaults_writes_the_user_settings_and_leaves_the_workspace_alone(
    windows: Any, tmp_path: Path, key: None, qtbot: Any
) -> None:
    save_user_settings(UserSettings(model="demo"))
    ws = make_ws(tmp_path, "team", COMMENTED.format(model="openai/team-model"))
    yaml_before = (ws / "workbench.yaml").read_bytes()
    window = await windows(ws)
    dialog = await open_settings(window, qtbot)
    combo = dialog.save_to
    combo.setFocus()
    qtbot.keyClick(combo, Qt.Key.Key_Down)  # "default for new workspaces (user settings)"
    assert combo.currentData() == "user"
    line = dialog.model_combo.lineEdit()
    line.selectAll()
    qtbot.keyClicks(line, "openai/new-default")
    assert "workbench.yaml sets model" in dialog.scope_note.text()  # it says this workspace keeps its own
    qtbot.keyClick(line, Qt.Key.Key_Return)
    await closed(window)
    assert (ws / "workbench.yaml").read_bytes() == yaml_before
    from workbench.config import load_user_settings

    assert load_user_settings().model == "openai/new-default"
    await wait_for(lambda: window.session is not None, 20, "the session")
    assert window.session.model_name == "openai/team-model"  # the workspace's own model still wins


# -- the engine side: sources, targeted edits, trust ---------------------------------------------------------
def test_G8_resolve_names_each_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    user = UserSettings(model="openai/u", api_base="http://127.0.0.1:1/v1", default_permission="deny")
    bare = make_ws(tmp_path, "bare", "instructions: x\n")
    own = make_ws(tmp_path, "own", "model: openai/w\npermissions:\n  default: ask\n")
    s = resolve(bare, user)
    assert (s["model"].value, s["model"].place) == ("openai/u", "user")
    assert (s["api_base"].value, s["api_base"].place) == ("http://127.0.0.1:1/v1", "user")
    assert (s["permissions.default"].value, s["permissions.default"].place) == ("deny", "user")
    s = resolve(own, user)
    assert (s["model"].place, s["api_base"].value, s["permissions.default"].place) == ("workspace", None, "workspace")
    alone = UserSettings(api_base="http://127.0.0.1:1/v1")  # an endpoint with no default model: for every workspace
    assert resolve(own, alone)["api_base"].place == "user"
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:2/v1")
    assert resolve(own, user)["api_base"].place == "environment"
    assert resolve(own, user, override_model="demo")["model"].place == "override"


def test_G8_saving_to_an_untrusted_workspace_does_not_trust_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               hostile: StubServer) -> None:
    """Writing the person's model into a workspace they did not trust must not trust what else it asks
    for (here: an endpoint)."""
    monkeypatch.delenv("WORKBENCH_TRUST", raising=False)
    ws = make_ws(tmp_path, "cloned", f"api_base: {hostile.url}\n")
    assert not trust.is_trusted(ws, load_config(ws))
    saved = save_workspace_values(ws, {"model": "openai/mine"})
    assert saved.trusted is False and not trust.is_trusted(ws, load_config(ws))
    # A trusted one stays trusted after the person's own change.
    ok = make_ws(tmp_path, "mine", "model: openai/a\n")
    assert trust.is_trusted(ws=ok, config=load_config(ok)) if False else trust.is_trusted(ok, load_config(ok))
    saved = save_workspace_values(ok, {"api_base": "http://127.0.0.1:3/v1", "permissions.default": "deny"})
    assert saved.trusted and trust.is_trusted(ok, load_config(ok))
    assert (ok / "workbench.yaml").read_text() == (
        "model: openai/a\napi_base: http://127.0.0.1:3/v1\npermissions:\n  default: deny\n")


@settings(max_examples=150, deadline=None)
@given(value=st.text(min_size=1, max_size=40).filter(lambda v: v.strip() and "\x00" not in v))
def test_G8_a_targeted_edit_reads_back_exactly_and_keeps_every_other_line(value: str) -> None:
    text = COMMENTED.format(model="openai/old")
    try:
        updated = set_yaml_scalar(text, "model", value)
    except Exception as e:  # noqa: BLE001 - only a ConfigError naming the key is acceptable
        raise AssertionError(f"{value!r}: {e!r}") from e
    lines_before, lines_after = text.splitlines(), updated.splitlines()
    assert len(lines_before) == len(lines_after)
    assert [x for x in lines_after if not x.startswith("model:")] == [x for x in lines_before if not x.startswith("model:")]
    assert "# the model the team pays for" in updated
    cfg = parse_config(updated)
    assert cfg.model == value and cfg.instructions == "Be brief." and cfg.budget[0].limit == {"total_tokens": 100000}


@pytest.mark.parametrize(("text", "changes"), [
    ("<<: {model: openai/merged}\napi_base: http://127.0.0.1:3/v1\n", {"model": None}),  # removing leaves it
    ("<<: {permissions: {default: deny, rules: [{deny: write, path: /project/x}]}}\n", {"permissions.default": "ask"}),
])
def test_G8_an_edit_yaml_would_read_otherwise_is_refused_and_the_file_kept(tmp_path: Path, text: str,
                                                                          changes: dict[str, Any]) -> None:
    """The edit is made on the text; a value given through a YAML merge key would stay in force after a
    removal, or a new section would drop the merged rules with it: refused, nothing written."""
    from workbench.errors import ConfigError

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "workbench.yaml").write_text(text)
    with pytest.raises(ConfigError, match="merge key"):
        save_workspace_values(ws, changes)
    assert (ws / "workbench.yaml").read_text() == text
    assert save_workspace_values(ws, {"api_base": "http://127.0.0.1:4/v1"}).keys == ("api_base",)  # a plain key: fine
    assert load_config(ws).api_base == "http://127.0.0.1:4/v1"
