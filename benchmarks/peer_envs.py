"""What ``benchmarks/peers.py`` and ``benchmarks/first_request.py`` share: the peers' throw-away venvs,
the stub server process, the workspace, the children's environment, running one side.

The peers are never project dependencies: each lives in its own venv under the temp folder,
``$TMPDIR/workbench-peers-<hash>/<peer>/`` (the hash covers the requirements and the Python version),
built on first use and reused after; ``--fresh`` rebuilds them. A peer whose venv cannot be built or
whose packages do not import is reported as SKIPPED with the reason, never left out silently.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SIDES_SCRIPT = Path(__file__).resolve().parent / "peer_sides.py"

#: The versions measured for issue 9 (November 2026); ``--latest`` installs the newest instead.
PEERS: dict[str, dict[str, Any]] = {
    "deepagents": {"pinned": ["deepagents==0.7.32", "langchain-openai==1.7.4", "openai==3.57.0"],
                   "latest": ["deepagents", "langchain-openai", "openai"],
                   "imports": ["deepagents", "langchain_openai", "langgraph.checkpoint.memory"]},
    "pydantic-ai": {"pinned": ["pydantic-ai==2.62.0", "openai==3.57.0"],
                    "latest": ["pydantic-ai", "openai"],
                    "imports": ["pydantic_ai", "pydantic_ai.models.openai"]},
    "openai-agents": {"pinned": ["openai-agents==0.24.0", "openai==3.57.0"],
                      "latest": ["openai-agents", "openai"],
                      "imports": ["agents", "openai"]},
}
#: Reference rows, run on the project's own venv (its openai SDK is litellm's dependency).
REFERENCES = ["openai-sdk", "http.client"]

WORKBENCH_YAML = """\
model: openai/test-model
permissions:
  default: ask
  rules:
    - {allow: read, path: "/**"}
    - {allow: invoke, tool: ls}
"""


class PeerUnavailable(Exception):
    """A peer that cannot be installed or imported: the message is the reason shown as SKIPPED."""


def project_python() -> Path:
    """The project's venv interpreter (the benchmark's 'this project' side), else the running one."""
    venv = ROOT / ".venv" / "bin" / "python"
    return venv if venv.exists() else Path(sys.executable)


def base_python() -> str:
    """A plain interpreter to make venvs from (a venv's own python would nest its site-packages)."""
    return getattr(sys, "_base_executable", None) or sys.executable


def envs_root(latest: bool) -> Path:
    key = json.dumps({name: spec["latest" if latest else "pinned"] for name, spec in PEERS.items()}, sort_keys=True)
    key += sys.version
    digest = hashlib.sha256(key.encode()).hexdigest()[:10]
    return Path(tempfile.gettempdir()) / f"workbench-peers-{digest}"


def _tail(text: str, lines: int = 8) -> str:
    return " | ".join(ln.strip() for ln in (text or "").strip().splitlines()[-lines:]) or "(no output)"


def ensure_venv(name: str, *, latest: bool = False, fresh: bool = False, timeout: float = 1800.0,
                log: Any = None) -> Path:
    """The python of ``name``'s venv, built (or rebuilt with ``fresh``) as needed; PeerUnavailable if not."""
    spec = PEERS[name]
    reqs = spec["latest" if latest else "pinned"]
    folder = envs_root(latest) / name
    marker = folder / "installed.json"
    python = folder / "bin" / "python"
    if fresh and folder.exists():
        shutil.rmtree(folder)
    if marker.exists() and python.exists():
        try:
            if json.loads(marker.read_text(encoding="utf-8")).get("requirements") == reqs:
                return python
        except (OSError, ValueError):
            pass
    if folder.exists():
        shutil.rmtree(folder)
    say = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    say(f"building the {name} venv in {folder}: pip install {' '.join(reqs)} (once; reused by later runs)")
    steps = [
        ([base_python(), "-m", "venv", str(folder)], "python -m venv"),
        ([str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q", *reqs], "pip install"),
        ([str(python), "-c", "; ".join(f"import {m}" for m in spec["imports"])], "importing"),
    ]
    for cmd, what in steps:
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise PeerUnavailable(f"{what} {' '.join(reqs)} took over {timeout:g} s") from None
        except OSError as exc:
            raise PeerUnavailable(f"{what}: {exc}") from None
        if done.returncode != 0:
            raise PeerUnavailable(f"{what} {' '.join(reqs)} failed (exit {done.returncode}): "
                                  f"{_tail(done.stderr or done.stdout)}")
    marker.write_text(json.dumps({"requirements": reqs}), encoding="utf-8")
    return python


def prepare(names: list[str], *, latest: bool, fresh: bool) -> tuple[dict[str, Path], dict[str, str]]:
    """(python per peer that is ready, reason per peer that is SKIPPED)."""
    ready: dict[str, Path] = {}
    skipped: dict[str, str] = {}
    for name in names:
        try:
            ready[name] = ensure_venv(name, latest=latest, fresh=fresh)
        except PeerUnavailable as exc:
            skipped[name] = str(exc)
    return ready, skipped


def make_workspace(folder: Path) -> Path:
    """A small workspace; every side's ``ls`` lists its root (README, AGENTS, workbench.yaml, src/)."""
    (folder / "src").mkdir(parents=True)
    (folder / "workbench.yaml").write_text(WORKBENCH_YAML, encoding="utf-8")
    (folder / "README.md").write_text("# Bench\n\nA small workspace.\n", encoding="utf-8")
    (folder / "AGENTS.md").write_text("# Agents\n\nBe brief.\n", encoding="utf-8")
    for i in range(8):
        (folder / "src" / f"mod{i}.py").write_text(f"x = {i}\n" * 20, encoding="utf-8")
    return folder


def child_env(base: Path, **extra: str) -> dict[str, str]:
    """No provider keys or base URLs from the caller; user folders in ``base``; telemetry off."""
    # PYTHONDONTWRITEBYTECODE is dropped too: with it, an editable install (this project's venv) compiles
    # its changed modules from source at every start (~0.25 s), which no installed package does.
    env = {k: v for k, v in os.environ.items()
           if not k.endswith("_API_KEY")
           and k not in ("OPENAI_BASE_URL", "OPENAI_API_BASE", "PYTHONPATH", "PYTHONDONTWRITEBYTECODE")}
    env.update(
        HOME=str(base / "home"),
        WORKBENCH_CONFIG_DIR=str(base / "config"),
        WORKBENCH_DATA_DIR=str(base / "data"),
        LANGSMITH_TRACING="false",
        LANGCHAIN_TRACING_V2="false",
        OPENAI_AGENTS_DISABLE_TRACING="1",
        DO_NOT_TRACK="1",
        PYTHONUNBUFFERED="1",
    )
    (base / "home").mkdir(parents=True, exist_ok=True)
    env.update(extra)
    return env


@dataclass
class Stub:
    """The stub server in its own process (``--auto-ls``); ``arrivals`` gets each request's time."""

    proc: subprocess.Popen[str]
    url: str
    arrivals: queue.Queue[float] = field(default_factory=queue.Queue)

    @classmethod
    def start(cls, *, log_arrivals: bool = False) -> Stub:
        cmd = [str(project_python()), "-m", "tests.stub_server", "--port", "0", "--auto-ls"]
        if log_arrivals:
            cmd.append("--log-arrivals")
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        if not url.startswith("http"):
            proc.kill()
            raise RuntimeError(f"the stub server did not start: {_tail(proc.stderr.read() if proc.stderr else '')}")
        stub = cls(proc, url)
        threading.Thread(target=stub._read, daemon=True).start()
        return stub

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("REQUEST "):
                self.arrivals.put(float(line.split()[1]))

    def drain(self) -> None:
        while True:
            try:
                self.arrivals.get_nowait()
            except queue.Empty:
                return

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def run_side(cmd: list[str], env: dict[str, str], timeout: float) -> dict[str, Any]:
    """Run one side's process; its ``RESULT {json}`` line, or RuntimeError with the reason."""
    try:
        done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"no result within {timeout:g} s") from None
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise RuntimeError(f"exit {done.returncode}, no RESULT line: {_tail(done.stderr or done.stdout)}")
