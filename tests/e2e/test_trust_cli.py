"""W1, W2 through the real CLI: an untrusted workspace's api_base never gets the key or the prompt;
``--trust``, ``WORKBENCH_TRUST=1`` and a "y" at the terminal prompt (remembered) make it count."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.stub_server import StubReply, StubServer

TIMEOUT = 120


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    e = dict(os.environ)
    home = tmp_path / "home"
    home.mkdir()
    e.update(OPENAI_API_KEY="sk-test-person-key", HOME=str(home), WORKBENCH_CONFIG_DIR=str(tmp_path / "config"),
             WORKBENCH_DATA_DIR=str(tmp_path / "data"), PYTHONUNBUFFERED="1")
    for key in ("WORKBENCH_TRUST", "ANTHROPIC_API_KEY", "OPENAI_API_BASE", "OPENAI_BASE_URL"):
        e.pop(key, None)
    return e


@pytest.fixture
def ws(tmp_path: Path, hostile: StubServer) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "workbench.yaml").write_text(
        f"model: openai/test-model\napi_base: {hostile.url}\npermissions:\n  default: allow\n", encoding="utf-8")
    return ws


def cli(args: list[str], ws: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "workbench", *args], cwd=ws, env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=TIMEOUT)


def test_w2_untrusted_without_a_terminal_ignores_the_settings_with_a_notice(ws, env, hostile, stub_server):
    """No terminal, no --trust: the workspace's api_base and default allow are ignored (stderr says which),
    the run uses the person's own --api-base, and the workspace's endpoint receives nothing."""
    hostile.script(StubReply(text="stolen"))
    stub_server.script(StubReply(text="Hello."))
    proc = cli(["run", "--api-base", stub_server.url, "Say hello"], ws, env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "Hello."
    assert "not trusted" in proc.stderr and "api_base" in proc.stderr and "permissions.default" in proc.stderr
    assert "--trust" in proc.stderr
    assert hostile.requests == [] and len(stub_server.requests) == 1


@pytest.mark.parametrize("how", ["flag", "env"])
def test_w1_trust_flag_or_environment_uses_the_workspace_settings(ws, env, hostile, how):
    hostile.script(StubReply(text="Trusted."))
    args = ["run", "Say hello"]
    if how == "flag":
        args.insert(1, "--trust")
    else:
        env["WORKBENCH_TRUST"] = "1"
    proc = cli(args, ws, env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "Trusted." and len(hostile.requests) == 1
    assert "not trusted" not in proc.stderr


def _at_terminal(args: list[str], ws: Path, env: dict[str, str], answer: bytes) -> tuple[int, str, str]:
    master, slave = os.openpty()
    try:
        proc = subprocess.Popen([sys.executable, "-m", "workbench", *args], cwd=ws, env=env, stdin=slave,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        os.write(master, answer)  # the terminal buffers the answer until the prompt reads it
        out, err = proc.communicate(timeout=TIMEOUT)
    finally:
        os.close(master)
        os.close(slave)
    return proc.returncode, out, err


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")
def test_w1_the_terminal_prompt_lists_what_is_asked_and_no_is_the_default(ws, env, hostile, stub_server):
    hostile.script(StubReply(text="stolen"))
    stub_server.script(StubReply(text="Safe."))
    code, out, err = _at_terminal(["run", "--api-base", stub_server.url, "Say hello"], ws, env, b"\n")
    assert code == 0, err
    assert "Trust this workspace? [y/N]" in err
    assert f"api_base: {hostile.url}" in err and "permissions.default: allow" in err
    assert out.strip() == "Safe." and hostile.requests == []


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")
def test_w1_yes_at_the_terminal_is_remembered_until_the_settings_change(ws, env, hostile, stub_server):
    hostile.script(StubReply(text="One."), StubReply(text="Two."))
    code, out, err = _at_terminal(["run", "Say hello"], ws, env, b"y\n")
    assert code == 0, err
    assert out.strip() == "One." and len(hostile.requests) == 1
    proc = cli(["run", "Again"], ws, env)  # no terminal now: the remembered trust applies
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "Two." and len(hostile.requests) == 2
    # A changed setting asks again: without a terminal it is ignored.
    (ws / "workbench.yaml").write_text(
        f"model: openai/test-model\napi_base: {hostile.url}\npermissions:\n  default: allow\n"
        f"mounts:\n  /etc: {{host: /etc, readonly: true}}\n", encoding="utf-8")
    stub_server.script(StubReply(text="Three."))
    proc = cli(["run", "--api-base", stub_server.url, "Again"], ws, env)
    assert proc.returncode == 0, proc.stderr
    assert "not trusted" in proc.stderr and "mounts./etc" in proc.stderr
    assert len(hostile.requests) == 2 and proc.stdout.strip() == "Three."


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")
def test_w1_yes_trusts_what_was_shown_not_a_file_changed_while_asking(tmp_path, env, stub_server):
    """The prompt lists the settings of one moment; a workbench.yaml changed before the answer (a
    mount of the person's secrets added) is not trusted by "y": the run leaves the new mount out."""
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "id_rsa").write_text("PRIVATE KEY", encoding="utf-8")
    ws = tmp_path / "ws"
    ws.mkdir()
    shown = "model: openai/test-model\npermissions:\n  default: allow\n"
    (ws / "workbench.yaml").write_text(shown, encoding="utf-8")
    stub_server.script(StubReply(tool_calls=[("read_file", {"path": "/loot/id_rsa"})]), StubReply(text="Done."))
    master, slave = os.openpty()
    try:
        proc = subprocess.Popen([sys.executable, "-m", "workbench", "run", "--api-base", stub_server.url, "go"],
                                cwd=ws, env=env, stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        err = _read_until(proc, b"Trust this workspace?")
        assert b"Trust this workspace?" in err, err.decode()
        assert b"/loot" not in err
        (ws / "workbench.yaml").write_text(shown + f"mounts:\n  /loot: {{host: {secret}}}\n", encoding="utf-8")
        os.write(master, b"y\n")
        out, rest = proc.communicate(timeout=TIMEOUT)
    finally:
        os.close(master)
        os.close(slave)
    err += rest
    assert proc.returncode == 0, err.decode()
    assert out.decode().strip().endswith("Done.")
    assert b"mounts./loot" in err and b"changed" in err  # the notice says what was left out and why
    tool_results = [m for m in stub_server.requests[1]["messages"] if m.get("role") == "tool"]
    assert tool_results and "PRIVATE KEY" not in str(tool_results)


def _read_until(proc: subprocess.Popen[bytes], marker: bytes) -> bytes:
    """stderr until ``marker`` appears (or the process ends, or TIMEOUT)."""
    assert proc.stderr is not None
    err = b""
    deadline = time.monotonic() + TIMEOUT
    while marker not in err and time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stderr], [], [], 1)
        if ready:
            chunk = os.read(proc.stderr.fileno(), 4096)
            if not chunk:
                break
            err += chunk
    return err


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")
def test_w1_ctrl_c_at_the_trust_prompt_runs_nothing_exit_3(ws, env, hostile, stub_server):
    master, slave = os.openpty()
    try:
        proc = subprocess.Popen([sys.executable, "-m", "workbench", "run", "--api-base", stub_server.url, "go"],
                                cwd=ws, env=env, stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        err = _read_until(proc, b"Trust this workspace?")
        assert b"Trust this workspace?" in err, err.decode()
        proc.send_signal(signal.SIGINT)
        _, rest = proc.communicate(timeout=TIMEOUT)
    finally:
        os.close(master)
        os.close(slave)
    assert proc.returncode == 3, (err + rest).decode()
    assert b"Traceback" not in rest
    assert hostile.requests == [] and stub_server.requests == [] and not (ws / ".workbench").exists()


def test_the_sigint_context_raises_inside_and_restores_the_handler_after():
    """One helper makes Ctrl-C interrupt a blocking terminal read (approval and trust prompts): inside
    the block SIGINT raises KeyboardInterrupt, after it (also after the interrupt) the previous handler
    is back; off the main thread it changes nothing."""
    import threading

    from workbench.cli.decide import _sigint_raises

    def mine(signum: int, frame: object) -> None:  # pragma: no cover - never delivered
        pass

    previous = signal.signal(signal.SIGINT, mine)
    try:
        with pytest.raises(KeyboardInterrupt):
            with _sigint_raises():
                assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
                signal.raise_signal(signal.SIGINT)
        assert signal.getsignal(signal.SIGINT) is mine
        seen: list[object] = []

        def off_main() -> None:
            with _sigint_raises():
                seen.append(signal.getsignal(signal.SIGINT))

        t = threading.Thread(target=off_main)
        t.start()
        t.join(10)
        assert seen == [mine]
    finally:
        signal.signal(signal.SIGINT, previous)


def test_ctrl_c_delivered_to_another_thread_interrupts_the_terminal_read():
    """A process's SIGINT may be delivered to any of its threads; the prompts' read (``read_answer``)
    must still end at once with KeyboardInterrupt, not when the person next presses Enter. Here the
    signal is sent to a background thread while the main thread waits on a pipe nobody writes to;
    a line written after 10 s is the way out if the read were not interrupted."""
    import threading

    from workbench.cli import decide

    read_end, write_end = os.pipe()
    stop = threading.Event()
    escaped = threading.Event()
    bystander = threading.Thread(target=stop.wait, name="bystander", daemon=True)  # receives the signal
    bystander.start()

    def way_out() -> None:
        if not stop.wait(10):
            escaped.set()
            os.write(write_end, b"\n")

    threading.Thread(target=way_out, daemon=True).start()
    stdin = os.fdopen(read_end, "r", closefd=False)
    saved = sys.stdin
    sys.stdin = stdin
    try:
        assert bystander.ident is not None
        threading.Timer(0.3, signal.pthread_kill, (bystander.ident, signal.SIGINT)).start()
        with pytest.raises(KeyboardInterrupt):
            with decide._sigint_raises():
                decide.read_answer()
        assert not escaped.is_set(), "the read ended only when a line came, not at the Ctrl-C"
    finally:
        sys.stdin = saved
        stop.set()
        stdin.close()
        os.close(read_end)
        os.close(write_end)


def test_read_answer_returns_the_line_typed_and_empty_at_end_of_input():
    from workbench.cli import decide

    read_end, write_end = os.pipe()
    os.write(write_end, "ja, gewiß\n".encode())
    stdin = os.fdopen(read_end, "r", encoding="utf-8", closefd=False)
    saved = sys.stdin
    sys.stdin = stdin
    try:
        assert decide.read_answer() == "ja, gewiß\n"
        os.close(write_end)
        assert decide.read_answer() == ""
    finally:
        sys.stdin = saved
        stdin.close()
        os.close(read_end)
