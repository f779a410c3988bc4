"""The sandbox commands run in (E5): bubblewrap where it is installed and allowed. No Qt.

On Linux with ``bwrap`` (Debian's ``bubblewrap``) a command sees the whole file system read-only, the
workspace read-write, a private ``/tmp``, a fresh ``/dev`` and ``/proc``, its own process, IPC and host
names, no capabilities (``--cap-drop ALL``: as root, ``mount -o remount,rw /`` otherwise undoes the
read-only root), and no network unless ``execute.network: true``. The folders the workbench keeps out
of every tool (F4: the thread store, the key folder, the person's rules and trust record) are covered by
empty read-only folders (and where they lie inside the workspace, the folder that leads to them is
read-only too, so a command can neither create one nor rename its way around one), and the per-user
runtime folder (``/run/user/UID``: the D-Bus socket the
keyring answers on) by an empty one. The command's processes live in their own PID namespace: when
bubblewrap goes (killed, or its parent gone: ``--die-with-parent``) the kernel ends every one of them.

Where there is no sandbox the reason is said in words — not Linux, ``bwrap`` not installed, the system
refusing the user namespaces bubblewrap needs (a container, ``kernel.unprivileged_userns_clone=0``,
AppArmor's ``restrict_unprivileged_userns``), or the person switching it off with
``WORKBENCH_SANDBOX=off`` — and commands run with the person's own rights. ``detect`` finds out once
per process by running bubblewrap with the flags commands use (about 20 ms), not by guessing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["SANDBOX_ENV", "Sandbox", "SandboxStatus", "detect"]

#: The person's switch: ``WORKBENCH_SANDBOX=off`` runs commands without bubblewrap (a workspace
#: cannot set it: it is read from the workbench's own environment).
SANDBOX_ENV = "WORKBENCH_SANDBOX"
_PROBE_TIMEOUT = 10.0


@dataclass(frozen=True)
class SandboxStatus:
    """Whether commands can be sandboxed here: ``active`` with the ``bwrap`` path, else ``reason``
    says why not, in words."""

    active: bool
    bwrap: str | None = None
    reason: str = ""


_cache: dict[str | None, SandboxStatus] = {}
_lock = threading.Lock()


def detect(bwrap: str | None = None, *, fresh: bool = False) -> SandboxStatus:
    """Whether bubblewrap can sandbox commands on this machine (``bwrap``: the program to try, else the
    one on PATH). The answer is kept for the process (``fresh`` asks again)."""
    switch = os.environ.get(SANDBOX_ENV, "").strip().lower()
    if switch in ("0", "off", "no", "false"):
        return SandboxStatus(False, None, f"switched off ({SANDBOX_ENV}={os.environ[SANDBOX_ENV]})")
    if not sys.platform.startswith("linux"):
        return SandboxStatus(False, None, "bubblewrap sandboxes only on Linux")
    with _lock:
        if not fresh and bwrap in _cache:
            return _cache[bwrap]
        status = _probe(bwrap)
        _cache[bwrap] = status
        return status


def _probe(bwrap: str | None) -> SandboxStatus:
    program = bwrap or shutil.which("bwrap")
    if not program:
        return SandboxStatus(False, None, "bubblewrap (bwrap) is not installed (on Debian or Ubuntu: "
                                          "sudo apt install bubblewrap)")
    argv = [program, *_namespace_flags(network=False), "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
            "--tmpfs", "/tmp", "--", "true"]
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=_PROBE_TIMEOUT,
                              env={"PATH": os.environ.get("PATH") or os.defpath})
    except (OSError, subprocess.SubprocessError) as e:
        return SandboxStatus(False, None, f"bubblewrap ({program}) could not be started: {e}")
    if done.returncode == 0:
        return SandboxStatus(True, program, "")
    said = " ".join(done.stderr.decode("utf-8", "replace").split())[:300] or f"exit code {done.returncode}"
    lowered = said.lower()
    if any(w in lowered for w in ("namespace", "uid map", "permission denied", "operation not permitted")):
        why = ("bubblewrap is installed but this system refuses the user namespaces it needs (in a container, "
               "or with kernel.unprivileged_userns_clone=0 or AppArmor's restrict_unprivileged_userns)")
    else:
        why = "bubblewrap is installed but could not start a sandbox"
    return SandboxStatus(False, None, f"{why}; bwrap said: {said}")


def _namespace_flags(*, network: bool) -> list[str]:
    flags = ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
             "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    if not network:
        flags.append("--unshare-net")
    return flags


class Sandbox:
    """How one session's commands are run: ``argv`` wraps a command for bubblewrap when ``status`` is
    active (else returns it unchanged); ``describe`` says what the sandbox allows, or why there is none."""

    def __init__(self, status: SandboxStatus, workspace: Path | str, *, hidden: Iterable[Path | str] = (),
                 network: bool = False) -> None:
        self.status = status
        self.workspace = Path(os.path.realpath(os.fspath(workspace)))
        self.hidden = [Path(os.path.realpath(os.fspath(p))) for p in hidden]
        self.network = network

    @property
    def active(self) -> bool:
        return self.status.active

    def describe(self) -> str:
        """One line for the status bar, the approval dialog, ``workbench run`` and the tool's description."""
        if not self.active:
            return f"none — {self.status.reason}; commands run with your own rights"
        net = "network allowed (execute.network)" if self.network else "no network"
        return (f"bubblewrap — {self.workspace} writable, the rest of the file system read-only, "
                f"/tmp private, {net}")

    def argv(self, command: Sequence[str], cwd: Path | str) -> list[str]:
        """``command`` as run in folder ``cwd``: inside bubblewrap when the sandbox is active."""
        if not self.active:
            return list(command)
        assert self.status.bwrap is not None
        args = [self.status.bwrap, *_namespace_flags(network=self.network),
                "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
                # after /tmp: a workspace under /tmp is bound over the private /tmp, not hidden by it
                "--bind", str(self.workspace), str(self.workspace)]
        args += self._guard_folders()
        runtime = Path(os.environ.get("XDG_RUNTIME_DIR") or f"/run/user/{os.getuid()}")
        covered: list[Path] = []
        for path in sorted({*self.hidden, runtime}, key=lambda p: len(p.parts)):
            if any(_is_under(path, c) for c in covered):
                continue  # inside a folder emptied already
            if _is_under(path, Path("/tmp")) and not _is_under(path, self.workspace):
                continue  # the private /tmp has none of it
            flags = _cover(path)
            if flags:
                args += flags
                covered.append(path)
        args += ["--chdir", os.fspath(cwd), "--", *command]
        return args


    def _guard_folders(self) -> list[str]:
        """Read-only binds over the top folder, inside the workspace, of each protected path in it.

        A workspace can hold the workbench's own folders (one opened at the home folder holds
        ``~/.config/workbench`` with the person's rules and trust record). Covering the protected files
        alone is not enough there: a command could create one that does not exist yet (a
        ``permissions.yaml`` allowing every command) or rename the folder around a covered file and
        write a new one. So the top folder below the workspace that leads to one (``~/.config``) is
        read-only inside the sandbox, and it is a mount point there, so it cannot be renamed either;
        it is made first if missing. The workspace's own ``.workbench`` is emptied instead (below).
        Found by a review (F4, E5).
        """
        tops: set[Path] = set()
        for path in self.hidden:
            if path == self.workspace or not _is_under(path, self.workspace):
                continue
            top = self.workspace / path.relative_to(self.workspace).parts[0]
            if top.name == ".workbench" or top == path:
                continue  # emptied by its own cover (a mount point already); a file right in the workspace too
            tops.add(top)
        flags: list[str] = []
        for top in sorted(tops):
            try:
                top.mkdir(mode=0o700, exist_ok=True)
            except OSError:
                pass  # e.g. a file of that name: bound as it is
            if top.exists():
                flags += ["--ro-bind", str(top), str(top)]
        return flags


def _cover(path: Path) -> list[str]:
    """Flags that leave ``path`` empty inside the sandbox (nothing when it does not exist)."""
    try:
        if path.is_dir():
            return ["--tmpfs", str(path), "--remount-ro", str(path)]
        if path.exists():
            return ["--ro-bind", "/dev/null", str(path)]
    except OSError:
        pass
    return []


def _is_under(path: Path, root: Path) -> bool:
    return path == root or root in path.parents
