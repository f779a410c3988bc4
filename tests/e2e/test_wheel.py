"""K3: the wheel ``python -m build`` makes carries resources/ and, installed into a fresh venv, runs the demo
and opens the window; ``pipx install .`` and ``uv tool install .`` install a working ``workbench`` too.

Slow (each install resolves the dependencies from the package index); CI runs it. Everything works on a
copy of the checkout, so no build/ or egg-info folder is left in the working tree, and the installed
commands run in the same minimal environment as the bundle's (tests/e2e/clean_machine.py).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.clean_machine import minimal_env, open_window, run_demo
from workbench.app import APP_ID

ROOT = Path(__file__).resolve().parents[2]
BASE_PYTHON = getattr(sys, "_base_executable", sys.executable)  # the interpreter under the project's venv
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

_NOT_SOURCE = {".venv", ".git", "build", "dist", "__pycache__", ".workbench", ".hypothesis", ".pytest_cache",
               ".mypy_cache", ".ruff_cache"}


def _ignore(_folder: str, names: list[str]) -> set[str]:
    return {n for n in names if n in _NOT_SOURCE or n.endswith((".egg-info", ".pyc"))}


def _run(cmd: list[str], timeout: float = 600, **kwargs: object) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(c) for c in cmd], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=timeout, **kwargs)  # type: ignore[call-overload]
    assert done.returncode == 0, f"{cmd} exited {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    return done


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The checkout as a clean clone would have it (no venv, no build output, no caches)."""
    dest = tmp_path_factory.mktemp("checkout") / "workbench"
    shutil.copytree(ROOT, dest, ignore=_ignore, symlinks=True)
    return dest


@pytest.fixture(scope="module")
def wheel(checkout: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``python -m build``: the sdist, then the wheel built from the unpacked sdist."""
    out = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "build", "--outdir", out, checkout])
    wheels = list(out.glob("workbench-*.whl"))
    assert len(wheels) == 1 and list(out.glob("workbench-*.tar.gz")), sorted(p.name for p in out.iterdir())
    return wheels[0]


@pytest.fixture(scope="module")
def tools(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A throw-away venv holding pipx and uv (neither is assumed on the machine)."""
    venv = tmp_path_factory.mktemp("tools") / "venv"
    _run([BASE_PYTHON, "-m", "venv", venv])
    _run([venv / "bin" / "python", "-m", "pip", "install", "--quiet", "pipx", "uv"])
    yield venv / "bin"
    shutil.rmtree(venv, ignore_errors=True)


@pytest.fixture(autouse=True)
def _drop_installs(tmp_path: Path) -> Iterator[None]:
    """Each test installs the app (~500 MB with PySide6 and litellm): removed once it has run."""
    yield
    shutil.rmtree(tmp_path, ignore_errors=True)


def test_wheel_carries_the_resources_K3(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in ("workbench/resources/__init__.py", f"workbench/resources/icons/{APP_ID}.svg",
                 "workbench/resources/style/light.qss", "workbench/resources/style/dark.qss",
                 "workbench/resources/demo/workbench.yaml", "workbench/resources/demo/AGENTS.md",
                 "workbench/resources/demo/skills/summarize/SKILL.md", "workbench/ui/panels.py"):
        assert name in names, f"{name} is missing from {wheel.name}"
    assert not [n for n in names if n.startswith(("tests/", "packaging/", "benchmarks/")) or "__pycache__" in n]
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "workbench = workbench.cli:main" in text and "workbench-gui = workbench.app:main" in text


def test_wheel_in_a_fresh_venv_runs_the_demo_and_opens_the_window_K3(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    _run([BASE_PYTHON, "-m", "venv", venv])
    _run([venv / "bin" / "python", "-m", "pip", "install", "--quiet", wheel])
    workbench = venv / "bin" / "workbench"
    # The installed package, not the checkout: resources come from site-packages.
    where = _run([venv / "bin" / "python", "-c", "import workbench.resources as r; print(r.__file__)"],
                 cwd=tmp_path, env=minimal_env(tmp_path / "probe")).stdout.strip()
    assert Path(where).is_relative_to(venv), where
    run_demo(workbench, tmp_path / "ws", minimal_env(tmp_path / "home"))
    open_window(workbench, minimal_env(tmp_path / "home2"))


def _installer_env(home: Path, tools: Path, **extra: str) -> dict[str, str]:
    """The machine's environment for the installers (its package index, proxy and certificate settings),
    with the tools first on PATH, a throw-away HOME and no venv active."""
    home.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    env.update(PATH=f"{tools}:/usr/bin:/bin", HOME=str(home), **extra)
    return env


def test_pipx_install_from_the_checkout_runs_the_demo_K3(checkout: Path, tools: Path, tmp_path: Path) -> None:
    pipx = tmp_path / "pipx"
    _run([tools / "pipx", "install", "--python", BASE_PYTHON, checkout],
         env=_installer_env(tmp_path / "installer", tools, PIPX_HOME=str(pipx / "home"),
                            PIPX_BIN_DIR=str(pipx / "bin"), PIPX_MAN_DIR=str(pipx / "man")))
    run_demo(pipx / "bin" / "workbench", tmp_path / "ws", minimal_env(tmp_path / "home"))


def test_uv_tool_install_from_the_checkout_runs_the_demo_K3(checkout: Path, tools: Path, tmp_path: Path) -> None:
    uv = tmp_path / "uv"
    _run([tools / "uv", "tool", "install", "--python", BASE_PYTHON, checkout],
         env=_installer_env(tmp_path / "installer", tools, UV_TOOL_DIR=str(uv / "tools"),
                            UV_TOOL_BIN_DIR=str(uv / "bin"), UV_CACHE_DIR=str(uv / "cache"),
                            UV_PYTHON_DOWNLOADS="never"))
    run_demo(uv / "bin" / "workbench", tmp_path / "ws", minimal_env(tmp_path / "home"))
