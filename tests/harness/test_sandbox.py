"""The sandbox commands run in (E5, harness/sandbox.py): bubblewrap for real where it works here — no
write outside the workspace, a private /tmp, no network unless ``execute.network``, the thread store
emptied, no way back to a writable root — and, where it does not, a reason in words (not installed,
user namespaces refused, switched off) with commands still running, unsandboxed, and saying so."""

from __future__ import annotations

import os
import socket
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from workbench.engine.models.scripted import ScriptedModel, reply, tool_reply
from workbench.harness import sandbox as sandbox_mod
from workbench.harness.sandbox import Sandbox, SandboxStatus, detect
from workbench.session import Session

STATUS = detect()
needs_bwrap = pytest.mark.skipif(
    not STATUS.active, reason=f"bubblewrap cannot sandbox commands on this machine, so this is not tested here: "
                              f"{STATUS.reason}")


@pytest.fixture(autouse=True)
def _fresh_detection() -> Iterator[None]:
    """Tests that fake bubblewrap must not leave their answer cached for the others."""
    yield
    sandbox_mod._cache.clear()


async def run_commands(ws: Path, *commands: str) -> list[str]:
    model = ScriptedModel([tool_reply(*[("execute", {"command": c}, f"c{i}") for i, c in enumerate(commands)]),
                           reply("ok")])
    session = await Session.open(ws, model=model)
    try:
        result = await session.run("go")
        while result.status == "interrupted":  # redirections outside the mounts ask: the person approves here
            result = await session.resume({q.id: {"decision": "approve"} for q in result.pending})
        assert result.status == "done", result
        return [m.content for m in session.messages if m.role == "tool"]
    finally:
        await session.close()


def make_ws(tmp_path: Path, extra: str = "") -> Path:
    ws = tmp_path / "ws"
    ws.mkdir(parents=True)
    (ws / "workbench.yaml").write_text("permissions: {default: allow}\n" + extra, encoding="utf-8")
    return ws


@pytest.fixture
def listener() -> Iterator[int]:
    """A TCP server on the host's loopback: reaching it means the command has the host's network."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
                conn.close()
            except OSError:
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        thread.join(2)
        server.close()


def connect(port: int) -> str:
    return (f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 3); print('CONNECTED')\""
            f" 2>&1 | tail -1")


# -- bubblewrap for real --------------------------------------------------------------------------------------


@needs_bwrap
async def test_E5_a_sandboxed_command_writes_only_in_the_workspace_and_has_a_private_tmp(tmp_path):
    ws = make_ws(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    token = uuid.uuid4().hex
    [out] = await run_commands(ws, f"touch inside.txt; touch {outside}/out.txt; echo x > /tmp/{token}; "
                                   f"cat /tmp/{token}; touch $HOME/wb-{token} 2>&1 | tail -1")
    assert (ws / "inside.txt").exists()
    assert not (outside / "out.txt").exists() and "Read-only file system" in out
    assert "x\n" in out and not Path(f"/tmp/{token}").exists()  # its /tmp is its own
    assert not (Path.home() / f"wb-{token}").exists()


@needs_bwrap
async def test_E5_no_network_unless_execute_network_and_without_a_sandbox_it_connects(tmp_path, listener, monkeypatch):
    [boxed] = await run_commands(make_ws(tmp_path / "a"), connect(listener))
    assert "CONNECTED" not in boxed and ("unreachable" in boxed or "refused" in boxed), boxed
    [allowed] = await run_commands(make_ws(tmp_path / "b", "execute: {network: true}\n"), connect(listener))
    assert "CONNECTED" in allowed
    monkeypatch.setenv("WORKBENCH_SANDBOX", "off")
    [bare] = await run_commands(make_ws(tmp_path / "c"), connect(listener))
    assert "CONNECTED" in bare  # the same command reaches the server: the sandbox is what stopped it


@needs_bwrap
async def test_E5_the_thread_store_is_empty_inside_the_sandbox_and_root_cannot_remount(tmp_path):
    ws = make_ws(tmp_path)
    token = uuid.uuid4().hex[:12]
    outs = await run_commands(ws, "ls -A .workbench | wc -l; touch .workbench/x 2>&1 | tail -1",
                              f"mount -o remount,rw / 2>&1 | tail -1; touch /etc/wb-{token} 2>&1 | tail -1")
    store, remount = outs
    assert store.startswith("0\n") and "Read-only file system" in store
    assert any(f.name.endswith(".sqlite3") for f in (ws / ".workbench").iterdir())  # it is there, outside
    assert not Path(f"/etc/wb-{token}").exists() and "Read-only file system" in remount


# -- where there is no sandbox --------------------------------------------------------------------------------


def fake_bwrap(tmp_path: Path, said: str) -> Path:
    program = tmp_path / "bwrap"
    program.write_text(f"#!/bin/sh\necho '{said}' >&2\nexit 1\n", encoding="utf-8")
    program.chmod(0o755)
    return program


async def test_E5_user_namespaces_refused_is_said_in_words_and_commands_still_run_unsandboxed(tmp_path, monkeypatch):
    program = fake_bwrap(tmp_path, "bwrap: No permissions to creating new namespace, likely because the kernel "
                                   "does not allow non-privileged user namespaces.")
    monkeypatch.setenv("PATH", f"{program.parent}{os.pathsep}{os.environ['PATH']}")
    status = detect(fresh=True)
    assert not status.active
    assert "refuses the user namespaces it needs" in status.reason and "No permissions to creating new namespace" \
        in status.reason
    ws = make_ws(tmp_path)
    model = ScriptedModel([tool_reply(("execute", {"command": "echo ran > ran.txt; echo done"}, "c1")), reply("ok")])
    session = await Session.open(ws, model=model)
    try:
        result = await session.run("go")
        assert result.status == "done"
        [out] = [m.content for m in session.messages if m.role == "tool"]
        assert out.startswith("done\n") and (ws / "ran.txt").exists()
        from workbench.harness.execute import ExecuteMiddleware

        line = session.middleware(ExecuteMiddleware).sandbox_line()
        assert line.startswith("sandbox for commands (execute): none — bubblewrap is installed but this system "
                               "refuses the user namespaces")
        assert line.endswith("commands run with your own rights")
    finally:
        await session.close()


def test_E5_not_installed_and_switched_off_are_said_in_words(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap anywhere
    status = detect(fresh=True)
    assert not status.active and "bubblewrap (bwrap) is not installed" in status.reason
    assert "apt install bubblewrap" in status.reason
    monkeypatch.setenv("WORKBENCH_SANDBOX", "off")
    assert detect(fresh=True).reason == "switched off (WORKBENCH_SANDBOX=off)"
    box = Sandbox(detect(), tmp_path)
    assert box.describe() == "none — switched off (WORKBENCH_SANDBOX=off); commands run with your own rights"
    assert box.argv(["bash", "-c", "true"], tmp_path) == ["bash", "-c", "true"]


async def test_E5_the_approval_says_when_no_sandbox_holds_the_command(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_SANDBOX", "off")
    ws = tmp_path / "ws"
    ws.mkdir()
    model = ScriptedModel([tool_reply(("execute", {"command": "echo hi"}, "c1")), reply("ok")])
    session = await Session.open(ws, model=model)
    try:
        result = await session.run("go")
        [q] = result.pending
        assert q.payload["sandboxed"] is False and q.payload["sandbox"].startswith("none — switched off")
    finally:
        await session.close()


# -- the command line bubblewrap gets -------------------------------------------------------------------------


def test_E5_bubblewrap_flags_bind_the_workspace_over_the_private_tmp_and_empty_the_hidden_folders(tmp_path):
    ws = tmp_path / "ws"
    (ws / ".workbench").mkdir(parents=True)
    (ws / ".workbench" / "threads.sqlite3").write_text("", encoding="utf-8")
    keys = Path("/proc/self")  # outside /tmp and present: stands in for a key folder under $HOME
    status = SandboxStatus(True, "/usr/bin/bwrap")
    argv = Sandbox(status, ws, hidden=[ws / ".workbench", ws / ".workbench" / "threads.sqlite3", keys]).argv(
        ["bash", "-c", "true"], ws)
    joined = " ".join(argv)
    assert argv[0] == "/usr/bin/bwrap" and argv[-3:] == ["bash", "-c", "true"]
    for flag in ("--unshare-net", "--unshare-pid", "--die-with-parent", "--new-session", "--cap-drop ALL",
                 "--ro-bind / /", f"--chdir {ws}"):
        assert flag in joined, flag
    assert joined.index("--tmpfs /tmp") < joined.index(f"--bind {ws} {ws}")  # the workspace stays visible
    assert f"--tmpfs {ws}/.workbench --remount-ro {ws}/.workbench" in joined
    assert "threads.sqlite3" not in joined  # inside a folder emptied already
    assert f"--tmpfs {keys.resolve()}" in joined
    open_net = Sandbox(status, ws, network=True).argv(["true"], ws)
    assert "--unshare-net" not in open_net


def test_F4_a_protected_folder_inside_the_workspace_has_its_top_folder_bound_read_only(tmp_path):
    """A workspace opened at the home folder holds ~/.config/workbench: ``.config`` is bound read-only
    (made if missing), the workspace's own ``.workbench`` keeps its cover, nothing else is touched."""
    home = tmp_path / "home"
    (home / ".workbench").mkdir(parents=True)
    rules = home / ".config" / "workbench" / "permissions.yaml"  # not there yet, nor its folders
    keys = home / ".local" / "share" / "workbench" / "keys"
    status = SandboxStatus(True, "/usr/bin/bwrap")
    argv = Sandbox(status, home, hidden=[home / ".workbench", rules, keys, tmp_path / "elsewhere"]).argv(["true"], home)
    joined = " ".join(argv)
    assert f"--ro-bind {home}/.config {home}/.config" in joined
    assert f"--ro-bind {home}/.local {home}/.local" in joined
    assert joined.index(f"--bind {home} {home}") < joined.index(f"--ro-bind {home}/.config")
    assert (home / ".config").is_dir() and not (home / ".config" / "workbench").exists()
    assert f"--ro-bind {home}/.workbench" not in joined and f"--tmpfs {home}/.workbench" in joined


@needs_bwrap
async def test_F4_a_command_in_a_home_workspace_can_neither_create_nor_replace_the_persons_rules(tmp_path, monkeypatch):
    """Found by a review: with the workspace at the home folder, an approved command created
    ~/.config/workbench/permissions.yaml ('allow execute *', then honoured in every workspace), or renamed
    the folder around the covered file and wrote a new one."""
    home = tmp_path / "home"
    config = home / ".config" / "workbench"
    monkeypatch.setenv("WORKBENCH_CONFIG_DIR", str(config))
    home.mkdir()
    (home / "workbench.yaml").write_text("permissions: {default: allow}\n", encoding="utf-8")
    rules = 'permissions:\\n  rules:\\n    - {allow: execute, command: \\"*\\"}\\n'
    first = await run_commands(home, f'mkdir -p .config/workbench; printf "{rules}" > .config/workbench/permissions.yaml')
    assert not (config / "permissions.yaml").exists(), first
    config.mkdir(parents=True, exist_ok=True)
    (config / "permissions.yaml").write_text("permissions:\n  rules: []\n", encoding="utf-8")
    second = await run_commands(home, "mv .config/workbench .config/old; mv .config .config-old; "
                                      f'mkdir -p .config/workbench; printf "{rules}" > .config/workbench/permissions.yaml')
    assert (config / "permissions.yaml").read_text(encoding="utf-8") == "permissions:\n  rules: []\n", second
    assert not (home / ".config" / "old").exists() and not (home / ".config-old").exists()
    [elsewhere] = await run_commands(home, "touch made-here.txt")  # the rest of the workspace stays writable
    assert (home / "made-here.txt").exists(), elsewhere
