"""What "runs on a clean machine" means for the bundle and the wheel tests (K2, K3): one set of checks.

A minimal environment — ``PATH=/usr/bin:/bin``, a fresh HOME, no venv, no PYTHONPATH, no provider key
unless a test gives one — and an installed ``workbench`` executable (the bundle's, or a fresh venv's,
pipx's or uv's). ``run_demo`` runs the offline demo headless; ``open_window`` opens the window
offscreen through the first-run path (the demo workspace copied out of the packaged resources, the
style sheet, the app icon) and ``keep_window_open`` leaves it up a few seconds; each fails with the
process's output.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any

from workbench.app import APP_ID

TIMEOUT = 120
# Lines a healthy start never prints. Qt's warnings (the offscreen plugin's, the C locale's) are not errors.
_ERROR = re.compile(r"^(ERROR|CRITICAL)\b|Traceback \(most recent call last\)|ModuleNotFoundError|ImportError"
                    r"|token estimates:", re.MULTILINE)


def minimal_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment of a fresh account: system PATH only, a new HOME (so new config and data folders).
    No shared model host (it would outlive the test, shared_host.py) unless ``extra`` asks for one."""
    home.mkdir(parents=True, exist_ok=True)
    return {"PATH": "/usr/bin:/bin", "HOME": str(home), "WORKBENCH_MODEL_DAEMON": "0", **extra}


def errors_in(text: str) -> list[str]:
    """The lines of a process's stderr that say something failed (a panel that did not load, a module
    missing from a bundle, the token estimate's fallback warning)."""
    return [m.group(0) for m in _ERROR.finditer(text)]


def run_demo(workbench: Path, workspace: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``workbench run --model demo --approve all "hello"`` in ``workspace``; asserts it finished (exit 0)."""
    workspace.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([str(workbench), "run", "--model", "demo", "--approve", "all", "hello"],
                          cwd=workspace, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=TIMEOUT)
    assert done.returncode == 0, f"exit {done.returncode}\nstdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-3000:]}"
    assert "offline *demo* model" in done.stdout, done.stdout[-3000:]
    assert not errors_in(done.stderr), done.stderr[-3000:]
    assert (workspace / ".workbench").is_dir()  # the thread store was written where the run was
    return done


def open_window(workbench: Path, env: dict[str, str]) -> dict[str, Any]:
    """Start the window offscreen on a first run and let it open the demo workspace; returns what the
    app reports (``--exit-after-start``) after checking it."""
    home = Path(env["HOME"])
    done = subprocess.run([str(workbench), "--exit-after-start"], cwd=home,
                          env={**env, "QT_QPA_PLATFORM": "offscreen"}, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, f"exit {done.returncode}\nstdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-3000:]}"
    assert not errors_in(done.stderr), done.stderr[-3000:]
    info: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    assert info["model"] == "demo"
    demo = Path(info["workspace"])
    assert demo.is_relative_to(home), info  # the user data folder of the fresh HOME
    assert (demo / "workbench.yaml").is_file() and (demo / "skills").is_dir()  # copied from the resources
    assert info["icon"] is True, "the window has no icon: resources/icons missing, or Qt's SVG icon engine"
    assert info["desktop_file"] == APP_ID
    return info


def keep_window_open(workbench: Path, env: dict[str, str], seconds: float = 4.0) -> str:
    """Start the window offscreen, leave it up ``seconds``, then end it; asserts it was still running and
    printed no error. Returns its stderr."""
    proc = subprocess.Popen([str(workbench)], cwd=env["HOME"], env={**env, "QT_QPA_PLATFORM": "offscreen"},
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(seconds)
        alive = proc.poll() is None
    finally:
        proc.terminate()
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
    assert alive, f"the window exited within {seconds:g} s (exit {proc.returncode})\n{out[-2000:]}\n{err[-3000:]}"
    assert not errors_in(err), err[-3000:]
    return err
