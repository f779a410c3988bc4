"""The shared model host: one model host per user and environment that ``workbench run`` commands reuse.

Why (issue 9, the CLI's first request): ``import litellm`` takes ~3 s, nearly all of a ``workbench run``
before its first request. The first command starts the host as a background process; it imports litellm
once and serves every later command over a Unix socket, so their first request leaves within the
command's own start-up (~0.4 s). It exits after ``WORKBENCH_MODEL_DAEMON_IDLE`` seconds (600) without a
client; ``WORKBENCH_MODEL_DAEMON=0`` keeps every call in the command's own process.

What it may hold and who may talk to it:
- its socket lives in a folder only this user can enter (``$XDG_RUNTIME_DIR/workbench``, else
  ``/tmp/workbench-UID``, mode 0700, checked before use) — a sandboxed command sees neither — and it
  serves only peers of its own user (``SO_PEERCRED``);
- it starts with an environment stripped of every variable that looks like a secret (``*KEY*``,
  ``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``, ``*CREDENTIAL*``, ``*AUTH*``) and is used only for calls
  whose key the command passes explicitly: a client can never make it use a key it did not send;
- a different environment (proxies, CA bundles, provider settings), interpreter, workbench or litellm
  gets a different host (the socket's name is a hash of them), so a call behaves as it would in-process;
- a client that goes away (Ctrl+C, ``kill -9``) has its calls cancelled at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import importlib.metadata
import os
import pickle
import re
import socket
import stat
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from workbench.engine.models.model_host import FRAME_HEADER, Connection, encode_frame, switched_on

#: Variables never given to the shared host: they may carry credentials a client did not send.
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.IGNORECASE)
#: Variables that differ between two shells of one user without changing what a call does.
VOLATILE = {"PWD", "OLDPWD", "SHLVL", "_", "COLUMNS", "LINES", "TERM", "TERM_SESSION_ID", "WINDOWID",
            "SSH_CLIENT", "SSH_CONNECTION", "SSH_TTY", "TMUX_PANE", "WORKBENCH_MODEL_DAEMON",
            "WORKBENCH_MODEL_DAEMON_IDLE", "WORKBENCH_TRUST", "WORKBENCH_SANDBOX"}
DEFAULT_IDLE = 600.0
MAX_SOCKET_PATH = 104  # sun_path is 108 bytes on Linux, with its terminating NUL


def enabled() -> bool:
    """Whether ``workbench run`` uses the shared host (``WORKBENCH_MODEL_DAEMON``, default on; Linux)."""
    return sys.platform.startswith("linux") and switched_on("WORKBENCH_MODEL_DAEMON")


def idle_seconds() -> float:
    try:
        return max(1.0, float(os.environ.get("WORKBENCH_MODEL_DAEMON_IDLE", DEFAULT_IDLE)))
    except ValueError:
        return DEFAULT_IDLE


def host_environment(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The environment the shared host starts with: this one without anything secret-looking."""
    env = dict(os.environ if environ is None else environ)
    return {k: v for k, v in env.items() if not SECRET_NAME.search(k) and k not in VOLATILE}


def _identity() -> str:
    """What must match for two commands to share a host: interpreter, code, litellm, environment."""
    parts = [sys.executable, str(os.getuid())]
    for dist in ("workbench", "litellm"):
        try:
            parts.append(importlib.metadata.version(dist))
        except importlib.metadata.PackageNotFoundError:
            parts.append("-")
    here = Path(__file__).resolve().parent
    for name in ("model_host.py", "shared_host.py", "litellm_model.py", "../llm_setup.py"):
        with contextlib.suppress(OSError):
            parts.append(f"{name}:{(here / name).stat().st_mtime_ns}")
    parts.extend(f"{k}={v}" for k, v in sorted(host_environment().items()))
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:20]


def _private_folder() -> Path | None:
    """A folder only this user can enter, for the socket (created 0700); None when there is none."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    base = Path(runtime) / "workbench" if runtime and Path(runtime).is_dir() else Path(f"/tmp/workbench-{os.getuid()}")
    try:
        base.mkdir(mode=0o700, parents=False, exist_ok=True)
        info = base.lstat()
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        return None  # someone else's, a symlink, or open to others: never put the socket there
    return base


def socket_path() -> Path | None:
    """Where this environment's shared host listens (None: no private folder for it)."""
    folder = _private_folder()
    if folder is None:
        return None
    path = folder / f"model-host-{_identity()}.sock"
    return path if len(os.fsencode(path)) < MAX_SOCKET_PATH else None  # the kernel's limit for a socket name


def peer(sock: socket.socket) -> tuple[int, int]:
    """The pid and uid of the process at the other end of a Unix socket (``SO_PEERCRED``)."""
    pid, uid, _ = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    return pid, uid


# --- the client side ----------------------------------------------------------------------------------
def connect(timeout: float = 90.0) -> tuple[socket.socket, int] | None:
    """A connection to this environment's shared host, started now if none runs; with the host's pid.
    None when it cannot be had (no private folder, the host would not start): callers go in-process."""
    path = socket_path()
    if path is None:
        return None
    sock = _try_connect(path)
    if sock is None:
        import fcntl

        descriptor = os.open(path.with_suffix(".lock"), os.O_WRONLY | os.O_CREAT, 0o600)
        with os.fdopen(descriptor, "w") as lock:  # one starter at a time
            fcntl.flock(lock, fcntl.LOCK_EX)
            sock = _try_connect(path)
            if sock is None:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()  # a stale socket: its host is gone
                host = _start(path)
                deadline = time.monotonic() + timeout
                while sock is None and time.monotonic() < deadline and host.poll() is None:
                    time.sleep(0.02)
                    sock = _try_connect(path)
    if sock is None:
        return None
    pid, uid = peer(sock)
    if uid != os.getuid():
        sock.close()
        return None
    return sock, pid


def _try_connect(path: Path) -> socket.socket | None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(path))
    except OSError:
        sock.close()
        return None
    return sock


def _start(path: Path) -> subprocess.Popen[bytes]:
    """Start the host in its own session (it outlives this command), its output to nowhere."""
    from workbench.engine.models.process_model import host_command, with_package_path

    return subprocess.Popen([*host_command(), "--serve", str(path), "--idle", f"{idle_seconds():g}"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=with_package_path(host_environment()), cwd="/", start_new_session=True,
                            close_fds=True)


# --- the host side ------------------------------------------------------------------------------------
def unused_idle(idle: float) -> float:
    """How long a host no command has yet sent anything to waits without a client: a tenth of ``idle``.

    A command connects as soon as it starts (``cli/run.py``), before its config and trust are checked; one
    that then fails or is refused leaves a host that has imported litellm (~200 MB) for nothing."""
    return min(idle, max(1.0, idle / 10))


async def serve(path: Path, idle: float) -> None:
    """Serve this user's commands on ``path`` until ``idle`` seconds pass with no client (``unused_idle``
    while no command has sent it a call or a warm-up)."""
    clients = 0
    last = time.monotonic()
    used = False

    async def client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal clients, last, used
        sock = writer.get_extra_info("socket")
        if sock is None or peer(sock)[1] != os.getuid():  # another user's process: nothing for it
            writer.close()
            return

        def send(message: Any) -> None:
            if not writer.is_closing():
                writer.write(encode_frame(message))

        connection = Connection(send)
        clients += 1
        try:
            while True:
                (size,) = FRAME_HEADER.unpack(await reader.readexactly(FRAME_HEADER.size))
                message = pickle.loads(await reader.readexactly(size))  # noqa: S301 - our user's own
                connection.handle(message)
                used = used or message[0] != "ping"  # a ping (a command checking in) is no use of the host
        except (asyncio.IncompleteReadError, ConnectionError, struct.error, pickle.UnpicklingError):
            pass  # the command ended (or died): its calls end with it
        finally:
            connection.close()
            clients -= 1
            last = time.monotonic()
            writer.close()

    server = await asyncio.start_unix_server(client, path=str(path))
    os.chmod(path, 0o600)
    ours = path.stat().st_ino

    def let_go() -> None:
        with contextlib.suppress(OSError):
            if path.stat().st_ino == ours:  # never remove a newer host's socket
                path.unlink()

    try:
        while clients or time.monotonic() - last < (idle if used else unused_idle(idle)):
            await asyncio.sleep(min(1.0, idle / 4))
        # No command finds the socket from now on (the next one starts a new host); one that connected in
        # the last moment (accepted, or still in the listen queue) is served until it goes, not cut off.
        let_go()
        await asyncio.sleep(0.2)
        while clients:
            await asyncio.sleep(0.2)
    finally:
        server.close()
        let_go()


__all__ = ["connect", "enabled", "host_environment", "idle_seconds", "peer", "serve", "socket_path", "unused_idle"]
