"""Start-up (issue 3 item 1, G5, G6): the window before litellm, the demo on first run, the xcb hint."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.app import XCB_PACKAGES, ensure_demo_workspace, is_xcb_failure, start_workspace
from workbench.config import UserSettings, save_user_settings, user_data_dir


def _run_app(args: list[str], env_extra: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(QT_QPA_PLATFORM="offscreen", **env_extra)
    code = "import sys; from workbench.app import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env,
                          timeout=timeout, cwd=Path(__file__).resolve().parents[2])


def test_first_run_opens_the_demo_before_litellm(tmp_path: Path) -> None:
    env = {"WORKBENCH_CONFIG_DIR": str(tmp_path / "config"), "WORKBENCH_DATA_DIR": str(tmp_path / "data")}
    proc = _run_app(["--exit-after-start"], env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    assert info["litellm_imported_at_show"] is False
    assert info["model"] == "demo"
    demo = tmp_path / "data" / "demo-workspace"
    assert info["workspace"] == str(demo.resolve())
    assert (demo / "workbench.yaml").read_text().count("model: demo") == 1
    assert (demo / "skills" / "summarize" / "SKILL.md").is_file()
    settings = json.loads((tmp_path / "config" / "settings.json").read_text())
    assert settings["last_workspace"] == str(demo.resolve())
    assert settings["window"]["geometry"]  # the layout is kept for the next start


def test_later_runs_open_the_last_workspace(tmp_path: Path) -> None:
    ws = tmp_path / "mine"
    ws.mkdir()
    (ws / "workbench.yaml").write_text("model: demo\n")
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "settings.json").write_text(json.dumps({"last_workspace": str(ws)}))
    env = {"WORKBENCH_CONFIG_DIR": str(tmp_path / "config"), "WORKBENCH_DATA_DIR": str(tmp_path / "data")}
    proc = _run_app(["--exit-after-start"], env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1])["workspace"] == str(ws.resolve())
    assert not (tmp_path / "data" / "demo-workspace").exists()


def test_start_workspace_choices(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    demo = user_data_dir() / "demo-workspace"
    assert start_workspace(UserSettings()) == (demo, "demo")
    # a model chosen in Settings but no key for it: still the demo model
    assert start_workspace(UserSettings(model="openai/gpt-4.1-mini")) == (demo, "demo")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert start_workspace(UserSettings(model="openai/gpt-4.1-mini")) == (demo, "openai/gpt-4.1-mini")
    ws = tmp_path / "ws"
    ws.mkdir()
    assert start_workspace(UserSettings(last_workspace=str(ws))) == (ws, None)
    # copying is done once: the user's edits to the demo survive
    (demo / "README.md").write_text("mine")
    assert ensure_demo_workspace() == demo and (demo / "README.md").read_text() == "mine"
    # a last workspace that is gone: the demo again
    save_user_settings(UserSettings(last_workspace=str(tmp_path / "gone")))
    from workbench.config import load_user_settings

    assert start_workspace(load_user_settings())[0] == demo


def test_xcb_failure_prints_the_hint(tmp_path: Path) -> None:
    env = {"QT_QPA_PLATFORM": "xcb", "WORKBENCH_CONFIG_DIR": str(tmp_path / "c"),
           "WORKBENCH_DATA_DIR": str(tmp_path / "d")}
    full = {k: v for k, v in os.environ.items() if k != "DISPLAY" and not k.endswith("_API_KEY")}
    full.update(env)
    code = "import sys; from workbench.app import main; sys.exit(main([]))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full, timeout=60)
    assert proc.returncode == 1, (proc.returncode, proc.stderr[-2000:])
    for package in XCB_PACKAGES:
        assert package in proc.stderr
    assert "Could not load the Qt platform plugin" in proc.stderr or "xcb" in proc.stderr


def test_G6_readme_names_the_xcb_packages() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    assert set(XCB_PACKAGES) == {"libxcb-cursor0", "libxcb-icccm4", "libxcb-keysyms1"}
    for package in XCB_PACKAGES:
        assert package in readme, package


def test_xcb_messages_are_recognised() -> None:
    assert is_xcb_failure('Could not load the Qt platform plugin "xcb" in "" even though it was found.')
    assert is_xcb_failure("From 6.5.0, xcb-cursor0 or libxcb-cursor0 is needed to load the Qt xcb platform plugin.")
    assert not is_xcb_failure("QFont::setPointSize: Point size <= 0")


def test_G8_first_run_on_the_users_model_uses_the_users_endpoint(tmp_path: Path) -> None:
    """First run with a key for the user's default model: the demo workspace runs that model, and on the
    endpoint saved with it (Settings), not the provider's public one."""
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "settings.json").write_text(
        json.dumps({"model": "openai/test-model", "api_base": "http://127.0.0.1:9/v1"}))
    env = {"WORKBENCH_CONFIG_DIR": str(tmp_path / "config"), "WORKBENCH_DATA_DIR": str(tmp_path / "data"),
           "OPENAI_API_KEY": "sk-test"}
    proc = _run_app(["--exit-after-start"], env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    assert info["workspace"] == str((tmp_path / "data" / "demo-workspace").resolve())
    assert (info["model"], info["api_base"]) == ("openai/test-model", "http://127.0.0.1:9/v1")


def test_a_real_model_shows_the_window_first_then_warms_litellm(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "workbench.yaml").write_text("model: openai/test-model\napi_base: http://127.0.0.1:9/v1\n")
    env = {"WORKBENCH_CONFIG_DIR": str(tmp_path / "config"), "WORKBENCH_DATA_DIR": str(tmp_path / "data"),
           "OPENAI_API_KEY": "sk-test"}
    proc = _run_app(["--workspace", str(ws), "--exit-after-start"], env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    assert info["model"] == "openai/test-model"
    assert info["litellm_imported_at_show"] is False
