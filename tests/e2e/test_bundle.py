"""K1, K2: packaging/build.sh builds the PyInstaller one-folder bundle from this checkout with only the
project's venv on PATH, and the bundle runs where no Python is set up: the demo headless, the window
offscreen, and a real model call through litellm (its data files and the tiktoken plugin collected).

Slow (the build takes about two minutes on two cores); CI runs it. The bundle is built once for the
module into a temporary folder (not the checkout's dist/) and removed afterwards.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.clean_machine import errors_in, keep_window_open, minimal_env, open_window, run_demo
from tests.stub_server import StubReply, StubServer

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    out = tmp_path_factory.mktemp("bundle")
    venv_bin = Path(sys.executable).parent  # the project's venv: the only Python on PATH
    env = {"PATH": f"{venv_bin}:/usr/bin:/bin", "HOME": os.environ.get("HOME", str(out)),
           "WORKBENCH_DIST": str(out / "dist"), "WORKBENCH_BUILD": str(out / "build")}
    done = subprocess.run(["bash", str(ROOT / "packaging" / "build.sh")], cwd=ROOT, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=1100)
    assert done.returncode == 0, f"build.sh exited {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    assert "size: " in done.stdout and "build time: " in done.stdout, done.stdout  # the script reports both
    try:
        yield out / "dist" / "workbench"
    finally:
        shutil.rmtree(out, ignore_errors=True)  # ~360 MB


def test_bundle_is_one_folder_standing_on_its_own_K1(bundle: Path) -> None:
    """One folder with the ``workbench`` executable; nothing in it points back into the venv or the
    checkout (a symlink out of the folder would break once the folder is copied to another machine)."""
    assert (bundle / "workbench").is_file() and os.access(bundle / "workbench", os.X_OK)
    inside = bundle.resolve()
    for path in bundle.rglob("*"):
        if path.is_symlink():
            assert path.resolve().is_relative_to(inside), f"{path} points outside the bundle: {path.resolve()}"
    resources = bundle / "_internal" / "workbench" / "resources"
    assert (resources / "demo" / "workbench.yaml").is_file()
    assert (resources / "style" / "light.qss").is_file()
    assert not list(resources.rglob("__pycache__")) and not list(resources.rglob(".workbench"))


def test_bundle_runs_the_demo_headless_in_a_minimal_environment_K2(bundle: Path, tmp_path: Path) -> None:
    """``dist/workbench/workbench run --model demo --approve all "hello"`` with PATH=/usr/bin:/bin, a fresh
    HOME and no venv: exit 0, the demo's answer, no error."""
    run_demo(bundle / "workbench", tmp_path / "ws", minimal_env(tmp_path / "home"))


def test_bundle_opens_its_window_offscreen_K2(bundle: Path, tmp_path: Path) -> None:
    """The bundled window opens offscreen on a first run: the demo workspace copied from the bundled
    resources, every dock panel loaded (they are imported by name), the app icon, the desktop file name;
    then it stays up a few seconds without an error."""
    env = minimal_env(tmp_path / "home")
    open_window(bundle / "workbench", env)
    keep_window_open(bundle / "workbench", env, seconds=4.0)


def test_bundle_calls_a_model_through_litellm_K1(bundle: Path, tmp_path: Path, stub_server: StubServer) -> None:
    """A run on an OpenAI model at the loopback stub: litellm imports and calls from the bundle, prices
    the call from its bundled price list, and token estimates use the o200k encoding (litellm's
    tokenizer files and tiktoken's plugin) — the fallback would warn "token estimates:" on stderr."""
    stub_server.script(StubReply(text="pong from the stub", usage=(12, 4)))
    ws = tmp_path / "ws"
    ws.mkdir()
    runtime = Path(tempfile.mkdtemp(prefix="wbrt-"))  # the call goes through the bundle's shared model host
    env = minimal_env(tmp_path / "home", OPENAI_API_KEY="sk-test", WORKBENCH_MODEL_DAEMON="1",
                      XDG_RUNTIME_DIR=str(runtime))
    try:
        done = subprocess.run([str(bundle / "workbench"), "run", "--model", "openai/gpt-4.1-mini", "--api-base",
                               stub_server.url, "--approve", "all", "--json", "ping"],
                              cwd=ws, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
        assert len(list((runtime / "workbench").glob("model-host-*.sock"))) == 1  # the bundle started it
    finally:
        from tests.e2e.test_shared_host import hosts

        for pid in hosts(runtime):
            os.kill(pid, 9)
        shutil.rmtree(runtime, ignore_errors=True)
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert not errors_in(done.stderr), done.stderr[-3000:]
    events = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    finished = events[-1]
    assert finished["type"] == "run_finished" and finished["status"] == "done", finished
    assert finished["answer"] == "pong from the stub"
    assert finished["usage"]["cost_usd"] > 0, "no price: litellm's price list is missing from the bundle"
    measured = [e for e in events if e["type"] == "context_measured"]
    assert measured and measured[0]["tokens"] > 0
    assert stub_server.remaining == 0


def test_the_bundles_model_host_streams_a_call_K1(bundle: Path, tmp_path: Path, stub_server: StubServer) -> None:
    """The window's model calls run in ``workbench __model-host`` (engine/models/process_model.py): the
    bundle's executable takes that role too, warms litellm (window and price from its bundled list), and
    streams a call to the stub; it exits when its stdin closes."""
    from workbench.engine.messages import Message, ModelRequest, ModelResponse
    from workbench.engine.models.model_host import read_frame, write_frame

    stub_server.script(StubReply(text="pong from the host", usage=(12, 4)))
    host = subprocess.Popen([str(bundle / "workbench"), "__model-host"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=minimal_env(tmp_path / "home"))
    try:
        assert host.stdin is not None and host.stdout is not None
        write_frame(host.stdin, ("warm", 1, "openai/gpt-4.1-mini"))
        kind, call_id, (seconds, window, prices) = read_frame(host.stdout)
        assert (kind, call_id) == ("warmed", 1) and window and prices and prices[0] > 0
        spec = {"model": "openai/gpt-4.1-mini", "api_base": stub_server.url, "api_key": "sk-test"}
        write_frame(host.stdin, ("stream", 2, spec, ModelRequest("", (Message.user("ping"),))))
        replies = []
        while not replies or replies[-1][0] == "item":
            replies.append(read_frame(host.stdout))
        assert replies[-1] == ("done", 2), replies[-1]
        final = replies[-2][2]
        assert isinstance(final, ModelResponse) and final.message.content == "pong from the host"
        assert final.usage.cost_usd and final.usage.cost_usd > 0
        host.stdin.close()
        assert host.wait(10) == 0
    finally:
        if host.poll() is None:
            host.kill()
    assert not errors_in(host.stderr.read().decode() if host.stderr else ""), "the host wrote errors"
