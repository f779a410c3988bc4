"""Issue 9 (the CLI's first request): ``workbench run`` commands share one model host that keeps litellm
imported between them (engine/models/shared_host.py). Real commands, real host processes, the stub.

What must hold: a second command reuses the host the first one started; the host never holds a key
the command did not send (its environment has none), lives in a folder only its user can enter, and
ends after its idle time with its socket; a command killed mid-answer has its call cancelled at once;
without a private folder, without a key, or with ``WORKBENCH_MODEL_DAEMON=0`` the calls stay in-process.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.stub_server import StubReply, StubServer
from workbench.engine.models import shared_host

ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-shared-host-test-4b1d"


@pytest.fixture
def runtime(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private runtime folder of our own (short: a socket's path has at most 107 bytes); every host
    started under it is ended afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="wbrt-"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(folder))
    monkeypatch.setenv("WORKBENCH_MODEL_DAEMON", "1")
    monkeypatch.setenv("WORKBENCH_MODEL_DAEMON_IDLE", "60")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    try:
        yield folder
    finally:
        for pid in hosts(folder):
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(folder, ignore_errors=True)


def hosts(folder: Path) -> list[int]:
    """The pids of the shared hosts serving sockets under ``folder``."""
    out = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                args = (proc / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"--serve" in args and any(str(folder).encode() in a for a in args):
                out.append(int(proc.name))
    return out


def sockets(folder: Path) -> list[Path]:
    return sorted((folder / "workbench").glob("model-host-*.sock")) if (folder / "workbench").is_dir() else []


def peer_pid(path: Path) -> int:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(str(path))
        return shared_host.peer(sock)[0]


def run(workspace: Path, stub: StubServer, prompt: str = "hi", **popen: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "workbench", "run", "--workspace", str(workspace), "--model",
                           "openai/test-model", "--api-base", stub.url, "--approve", "all", prompt],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, **popen)  # type: ignore[call-overload]


def test_a_second_command_reuses_the_host_which_holds_no_key_and_ends_when_idle(
        runtime: Path, tmp_path: Path, stub_server: StubServer, monkeypatch: pytest.MonkeyPatch) -> None:
    stub_server.script(StubReply(text="first answer"), StubReply(text="second answer"))
    ws = tmp_path / "ws"
    ws.mkdir()
    first = run(ws, stub_server)
    assert first.returncode == 0 and "first answer" in first.stdout, first.stderr[-2000:]
    [path] = sockets(runtime)
    assert oct(path.stat().st_mode & 0o777) == "0o600" and oct((runtime / "workbench").stat().st_mode & 0o777) == "0o700"
    host = peer_pid(path)
    second = run(ws, stub_server)
    assert second.returncode == 0 and "second answer" in second.stdout, second.stderr[-2000:]
    assert peer_pid(path) == host and hosts(runtime) == [host]  # the same host served both
    assert stub_server.auth == [f"Bearer {KEY}"] * 2  # the commands' key, sent with each call...
    environ = Path(f"/proc/{host}/environ").read_bytes()
    assert KEY.encode() not in environ and b"OPENAI_API_KEY" not in environ  # ...never the host's own
    # another environment (here: a proxy setting) gets another host, never this one
    monkeypatch.setenv("NO_PROXY", "example.invalid")
    stub_server.script(StubReply(text="third answer"))
    assert run(ws, stub_server).returncode == 0
    assert len(sockets(runtime)) == 2 and host in hosts(runtime) and len(hosts(runtime)) == 2
    # idle: each host ends after its idle time without a client, taking its socket with it
    for pid in hosts(runtime):
        os.kill(pid, signal.SIGKILL)
    for stale in sockets(runtime):
        stale.unlink()
    monkeypatch.setenv("WORKBENCH_MODEL_DAEMON_IDLE", "2")
    stub_server.script(StubReply(text="fourth answer"))
    assert run(ws, stub_server).returncode == 0
    [short] = hosts(runtime)
    deadline = time.monotonic() + 15
    while short in hosts(runtime) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert short not in hosts(runtime) and sockets(runtime) == []


def test_a_command_killed_mid_answer_has_its_call_cancelled(runtime: Path, tmp_path: Path,
                                                            stub_server: StubServer) -> None:
    stub_server.script(StubReply(text="warm"), StubReply(text="word " * 400, chunks=400, chunk_delay=0.05))
    ws = tmp_path / "ws"
    ws.mkdir()
    assert run(ws, stub_server).returncode == 0  # the host is up and warm
    command = subprocess.Popen([sys.executable, "-m", "workbench", "run", "--workspace", str(ws), "--model",
                                "openai/test-model", "--api-base", stub_server.url, "--approve", "all", "talk"],
                               cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while len(stub_server.requests) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(stub_server.requests) == 2, "the second command's call never reached the stub"
        time.sleep(0.5)  # streaming now
        command.send_signal(signal.SIGKILL)
        command.wait(10)
        deadline = time.monotonic() + 10
        while stub_server.abandoned == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert stub_server.abandoned == 1, "the host went on streaming for a command that is gone"
        assert len(hosts(runtime)) == 1  # and it goes on serving others
    finally:
        if command.poll() is None:
            command.kill()


def test_without_a_private_folder_or_a_key_or_when_switched_off_calls_stay_in_process(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from workbench.config import WorkbenchConfig
    from workbench.engine.models.litellm_model import LiteLLMModel
    from workbench.engine.models.process_model import ProcessModel
    from workbench.session import make_model

    cfg = WorkbenchConfig(model="openai/test-model", api_base="http://127.0.0.1:9")
    open_folder = tmp_path / "open"
    (open_folder / "workbench").mkdir(parents=True)
    os.chmod(open_folder / "workbench", 0o777)  # others may enter: never a socket there
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(open_folder))
    monkeypatch.setenv("WORKBENCH_MODEL_DAEMON", "1")
    assert shared_host.socket_path() is None
    assert shared_host.connect() is None
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(private))
    assert shared_host.socket_path() is None  # pytest's folder is too deep for a socket's name: in-process
    private = Path(tempfile.mkdtemp(prefix="wbp-"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(private))
    assert shared_host.socket_path() is not None and shared_host.socket_path().parent == private / "workbench"
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert isinstance(make_model(cfg, shared=True), LiteLLMModel)  # no key to send: never the shared host
    monkeypatch.setenv("WORKBENCH_MODEL_DAEMON", "0")
    assert isinstance(make_model(cfg, api_key="k", shared=True), LiteLLMModel)
    monkeypatch.setenv("WORKBENCH_MODEL_DAEMON", "1")
    monkeypatch.setattr(ProcessModel, "warm_up_in_background", lambda self: None)  # start no host here
    assert isinstance(make_model(cfg, api_key="k", shared=True), ProcessModel)
    # the host's environment: nothing secret-looking, whatever its name
    env = shared_host.host_environment({"PATH": "/bin", "MY_SERVICE_TOKEN": "t", "AWS_SECRET_ACCESS_KEY": "s",
                                        "AZURE_API_KEY": "a", "HTTPS_PROXY": "http://proxy:3128"})
    assert env == {"PATH": "/bin", "HTTPS_PROXY": "http://proxy:3128"}
    shutil.rmtree(private, ignore_errors=True)


def test_a_sub_agent_of_a_command_calls_through_the_shared_host_too(runtime: Path, tmp_path: Path,
                                                                    stub_server: StubServer) -> None:
    """D5 in the CLI: a foreground sub-agent on its own model (same provider, the command's key) makes its
    call through the shared host; the parent gets its answer as the tool result."""
    stub_server.script_for("parent", StubReply(tool_calls=[("delegate_to_helper", {"task": "Say hi"})]),
                           StubReply(text="The helper said hi."))
    stub_server.script_for("helper", StubReply(text="hi from the helper"))
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "workbench.yaml").write_text(
        f"model: openai/parent\napi_base: {stub_server.url}\npermissions: {{default: allow}}\n"
        "subagents:\n  agents:\n    - {name: helper, description: Says hi., model: openai/helper}\n", encoding="utf-8")
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "workbench", "run", "--workspace", str(ws),
                           "--approve", "all", "--json", "Ask the helper"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert "workbench.session" in imported and "litellm" not in imported  # no call ran in the command itself
    finished = [e for e in map(json.loads, done.stdout.splitlines()) if e.get("type") == "tool_call_finished"]
    assert [(e["name"], e["status"]) for e in finished] == [("delegate_to_helper", "ok")]
    assert "The helper said hi." in done.stdout
    assert [b["model"] for b in stub_server.requests] == ["parent", "helper", "parent"]
    assert stub_server.auth == [f"Bearer {KEY}"] * 3 and len(hosts(runtime)) == 1


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def test_a_host_imports_litellm_as_it_starts_before_any_command_asks(runtime: Path) -> None:
    # Issue 9: the first command's request waits for the host's litellm import (seconds); the host starts
    # it at once rather than when the command's warm-up or call arrives. Seen from outside: with no
    # client at all, its memory grows by litellm's ~150 MB (a host that waits stays near 25 MB).
    from workbench.engine.models.process_model import host_command, with_package_path

    folder = runtime / "workbench"
    folder.mkdir(mode=0o700)
    host = subprocess.Popen([*host_command(), "--serve", str(folder / "h.sock"), "--idle", "120"],
                            env=with_package_path(shared_host.host_environment()), cwd="/",
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while host.poll() is None and rss_kib(host.pid) < 120_000 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert host.poll() is None, host.stderr.read().decode() if host.stderr else ""
        assert rss_kib(host.pid) >= 120_000, f"{rss_kib(host.pid)} KiB after 60 s: litellm was not imported"
        assert (folder / "h.sock").exists()  # and it listens meanwhile
    finally:
        host.kill()
        host.wait()


def _serve(folder: Path, name: str, idle: int) -> subprocess.Popen[bytes]:
    from workbench.engine.models.process_model import host_command, with_package_path

    return subprocess.Popen([*host_command(), "--serve", str(folder / name), "--idle", str(idle)],
                            env=with_package_path(shared_host.host_environment()), cwd="/",
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _connect(path: Path) -> socket.socket:
    deadline = time.monotonic() + 30
    while True:  # the socket file exists from bind(); connections are taken from listen() on
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(str(path))
            return sock
        except OSError:
            sock.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def test_a_host_no_command_used_ends_after_a_tenth_of_its_idle_time(runtime: Path) -> None:
    # A command connects at once and may then fail its config or trust check: the host it started must
    # not sit on litellm's ~200 MB for the whole idle time. One that served a command keeps it.
    from workbench.engine.models.model_host import encode_frame

    folder = runtime / "workbench"
    folder.mkdir(mode=0o700)
    unused, used = _serve(folder, "unused.sock", 30), _serve(folder, "used.sock", 30)
    try:
        _connect(folder / "unused.sock").close()  # connected, then gone without a word
        sock = _connect(folder / "used.sock")
        sock.sendall(encode_frame(("warm", 1, "")))
        sock.settimeout(60)
        assert sock.recv(1)  # its answer to the warm-up: it served a command
        sock.close()
        started = time.monotonic()
        while unused.poll() is None and time.monotonic() - started < 20:
            time.sleep(0.2)
        assert unused.poll() is not None and time.monotonic() - started < 10  # ~3 s (30 / 10), not 30
        time.sleep(max(0.0, started + 6 - time.monotonic()))  # past the unused idle time and a check
        assert used.poll() is None  # still there for the next command
    finally:
        for host in (unused, used):
            host.kill()
            host.wait()


def test_a_host_that_answers_nothing_is_passed_by_and_the_command_calls_for_itself(
        runtime: Path, tmp_path: Path, stub_server: StubServer) -> None:
    """R6: a shared host that accepts connections but answers nothing (stopped, wedged) hung every later
    `workbench run` for ever (a review found it). A new connection pings it first: no answer within
    PING_SECONDS and the command calls the model in its own process."""
    stub_server.script(StubReply(text="first answer"), StubReply(text="second answer"))
    ws = tmp_path / "ws"
    ws.mkdir()
    assert run(ws, stub_server).returncode == 0
    [host] = hosts(runtime)
    os.kill(host, signal.SIGSTOP)
    try:
        started = time.monotonic()
        second = run(ws, stub_server)
        assert second.returncode == 0 and "second answer" in second.stdout, second.stderr[-2000:]
        assert time.monotonic() - started < 60
        assert len(stub_server.requests) == 2
    finally:
        os.kill(host, signal.SIGCONT)
