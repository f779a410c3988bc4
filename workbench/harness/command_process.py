"""One shell command in flight (E1, E4, E6): its process group, the thread pumping its output into the
head-and-tail capture and the live batches, and the kill sequence — the process side of the ``execute``
tool (``execute.py``: its arguments, environment, judging and result). No Qt.

- E1 stdout and stderr come through one pipe into ``_HeadTail``: at most ``max_output_chars`` is kept,
  the head and the tail, so 10 MB of output never sits in memory.
- E4 The shell leads its own process group; a kill is SIGTERM, then SIGKILL after ``KILL_GRACE``. The
  command ends when its shell exits, not when its output closes; what it left in the group goes with it,
  and what left the group but kept the environment is found by ``MARKER_ENV`` in ``/proc``
  (``kill_marked``). On Linux the shell gets SIGKILL when the workbench dies (a parent-death signal);
  commands still running when the interpreter exits are killed (``atexit``).
- E6 Live output is handed on in batches of at most ``LIVE_BATCH_CHARS``, the newest kept.
"""

from __future__ import annotations

import atexit
import codecs
import collections
import ctypes
import hashlib
import logging
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "DRAIN_SECONDS",
    "KILL_GRACE",
    "LIVE_BATCH_CHARS",
    "MARKER_ENV",
    "call_marker",
    "kill_marked",
]

log = logging.getLogger(__name__)

#: At most this much live output per batch (~270 KB/s, far more than anyone reads); the newest is kept
#: (``skipped`` counts the rest). A text view takes ~5 ms to append 16 KB, and 64 KB batches stalled the
#: window 20-50 ms (benchmarks/execute.py).
LIVE_BATCH_CHARS = 8 * 1024
#: Between SIGTERM and SIGKILL.
KILL_GRACE = 0.5
#: After the shell exits, how long what it left behind may keep the pipe open before it is given up.
DRAIN_SECONDS = 1.0
WAIT_FIRST = 0.001  # after the output closed, the first look at whether the shell exited (seconds)
#: Reserved out of ``max_output_chars`` for the cut note and the exit line, so a result never exceeds it.
_NOTE_RESERVE = 300
#: Set in every command's environment: finds processes that left the command's process group (E4).
MARKER_ENV = "WORKBENCH_COMMAND"


# ------------------------------------------------------------------------------------------- output


class _HeadTail:
    """The output kept for the result: the first half and the last half of ``cap`` characters, and how
    many came in all. Memory stays near ``cap`` however much a command prints."""

    def __init__(self, cap: int) -> None:
        room = max(200, cap - _NOTE_RESERVE)
        self.cap = cap
        self.head_cap = room // 2
        self.tail_cap = room - self.head_cap
        self.head: list[str] = []
        self.head_len = 0
        self.tail: collections.deque[str] = collections.deque()
        self.tail_len = 0
        self.total = 0

    def add(self, text: str) -> None:
        if not text:
            return
        self.total += len(text)
        if self.head_len < self.head_cap:
            take = text[: self.head_cap - self.head_len]
            self.head.append(take)
            self.head_len += len(take)
            text = text[len(take):]
            if not text:
                return
        self.tail.append(text)
        self.tail_len += len(text)
        while len(self.tail) > 1 and self.tail_len - len(self.tail[0]) >= self.tail_cap:
            self.tail_len -= len(self.tail.popleft())

    def text(self) -> str:
        head = "".join(self.head)
        tail = "".join(self.tail)
        if self.total <= len(head) + len(tail) and len(head) + len(tail) <= self.cap:
            return head + tail
        tail = tail[-self.tail_cap:]
        cut = self.total - len(head) - len(tail)
        return (f"{head}\n[… {cut:,} characters cut here: the output was {self.total:,} characters; the first "
                f"{len(head):,} and the last {len(tail):,} are kept …]\n{tail}")


# ------------------------------------------------------------------------------------------ processes


def call_marker(thread_id: str, run_id: str, call_id: str) -> str:
    """The ``WORKBENCH_COMMAND`` marker of one ``execute`` call: derived from the call, not drawn at random,
    so a recovery in a later process finds what a cut-off call left running (E4, R9)."""
    return hashlib.sha256(f"{thread_id}\0{run_id}\0{call_id}".encode()).hexdigest()[:32]


def kill_marked(marker: str) -> int:
    """SIGKILL every process (but this one) whose environment carries ``marker`` (E4); how many were found.
    A process read as its parent forks is caught by the next pass: passes go on until one finds none."""
    if not os.path.isdir("/proc"):
        return 0
    needle = f"{MARKER_ENV}={marker}".encode()
    me = os.getpid()
    killed = 0
    for _ in range(10):
        found = 0
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) == me:
                continue
            try:
                with open(f"/proc/{name}/environ", "rb") as f:
                    env = f.read()
            except OSError:
                continue
            if needle + b"\0" in env or env.endswith(needle):  # a zombie's environ reads empty
                try:
                    os.kill(int(name), signal.SIGKILL)
                    found += 1
                except (ProcessLookupError, PermissionError):
                    pass
        killed += found
        if not found:
            break
    return killed


#: ``prctl`` option: the signal the calling process gets when its parent thread ends (linux/prctl.h).
_PR_SET_PDEATHSIG = 1
_prctl: Any = None


def _dies_with_the_workbench() -> Callable[[], None] | None:
    """A ``preexec_fn`` giving the command's shell SIGKILL when the workbench ends, even by ``kill -9`` or a
    closed terminal (E4) — Linux only, None elsewhere or without libc's ``prctl``. It kills the shell;
    what the shell started is found by its marker when the cut-off call is recovered (``on_calls_cut_off``).
    The signal follows the thread that started the command; commands start on the engine's loop thread,
    which lives as long as the runs on it. Everything is looked up here, so the child runs no imports
    and takes no lock between fork and exec: a few system calls."""
    global _prctl
    if not sys.platform.startswith("linux"):
        return None
    if _prctl is None:
        try:
            prctl = ctypes.CDLL(None, use_errno=True).prctl
        except (OSError, AttributeError):
            _prctl = False
            return None
        prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
        prctl.restype = ctypes.c_int
        _prctl = prctl
    if _prctl is False:
        return None
    prctl, parent, getpid, getppid, kill = _prctl, os.getpid(), os.getpid, os.getppid, os.kill
    sigkill = int(signal.SIGKILL)

    def in_the_child() -> None:
        prctl(_PR_SET_PDEATHSIG, sigkill, 0, 0, 0)
        if getppid() != parent:  # the workbench died before the signal was set: nobody to report to
            kill(getpid(), sigkill)

    return in_the_child


_RUNNING: dict[int, _Command] = {}  # id -> command in flight, for the run's end and the interpreter's
_RUNNING_LOCK = threading.Lock()


@atexit.register
def _kill_all() -> None:
    """Nothing outlives the workbench (E4): commands still running at exit are killed."""
    with _RUNNING_LOCK:
        running = list(_RUNNING.values())
    for cmd in running:
        cmd.kill(hard=True)


class _Command:
    """One command in flight: the process (its own session), a thread pumping its output into the head
    and tail buffer and the live batch, and the kill sequence."""

    def __init__(self, argv: Sequence[str], cwd: Path, env: Mapping[str, str], cap: int, *, marker: str,
                 sandboxed: bool, thread_id: str, on_done: Callable[[], None]) -> None:
        self.marker = marker
        self.sandboxed = sandboxed
        self.thread_id = thread_id
        self.capture = _HeadTail(cap)
        self._on_done = on_done
        self._live: collections.deque[str] = collections.deque()
        self._live_len = 0
        self._skipped = 0
        self._lock = threading.Lock()
        self._term_at: float | None = None
        self._hard = False
        self.started = time.monotonic()
        self.ended: float | None = None
        self.proc = subprocess.Popen(list(argv), cwd=os.fspath(cwd), env=dict(env), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                                     close_fds=True, preexec_fn=_dies_with_the_workbench())
        self.pgid = self.proc.pid  # start_new_session: the shell leads its own group
        with _RUNNING_LOCK:
            _RUNNING[id(self)] = self
        self._thread = threading.Thread(target=self._pump, name=f"execute-{self.proc.pid}", daemon=True)
        self._thread.start()

    # -- killing --------------------------------------------------------------------------------------
    def kill(self, *, hard: bool = False) -> None:
        """End the whole process group: SIGTERM now and SIGKILL after ``KILL_GRACE`` (``hard``: at once)."""
        if hard:
            self._hard = True
            self._signal(signal.SIGKILL)
            return
        if self._term_at is None:
            self._term_at = time.monotonic()
            self._signal(signal.SIGTERM)

    def _signal(self, sig: int) -> None:
        try:
            os.killpg(self.pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def _kill_escaped(self) -> None:
        """Processes that left the group (``setsid``, a daemon) but carry this command's marker (E4). In the
        sandbox too: bubblewrap killed while it sets up can leave its inner half running (seen here)."""
        kill_marked(self.marker)

    def _shell_exited(self) -> bool:
        """Whether the shell ended, without reaping it: its zombie keeps the group id from being reused
        while the group is killed."""
        try:
            info = os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return True
        except (AttributeError, OSError):  # no waitid (macOS): reaps, acceptable there
            return self.proc.poll() is not None
        return info is not None

    # -- output ---------------------------------------------------------------------------------------
    def _add(self, text: str) -> None:
        if not text:
            return
        self.capture.add(text)
        with self._lock:
            self._live.append(text)
            self._live_len += len(text)
            while self._live_len > LIVE_BATCH_CHARS and self._live:
                extra = self._live_len - LIVE_BATCH_CHARS
                first = self._live[0]
                if len(first) <= extra:
                    self._live.popleft()
                    self._live_len -= len(first)
                    self._skipped += len(first)
                else:
                    self._live[0] = first[extra:]
                    self._live_len -= extra
                    self._skipped += extra

    def take_live(self) -> tuple[str, int]:
        """The live output since the last call, and how many characters were left out before it."""
        with self._lock:
            text = "".join(self._live)
            skipped = self._skipped
            self._live.clear()
            self._live_len = 0
            self._skipped = 0
        return text, skipped

    def _pump(self) -> None:
        """Read the output until the shell exits (E1), then end what it left behind (E4). The end of the
        output is not the end of the command: a program closes its stdout before it exits (coreutils do,
        at exit) and a script may send its output elsewhere (``exec >log``) and go on — killing the group
        at EOF reported finished commands as killed and cut such scripts short. After EOF only the
        shell's exit, a kill (Stop, the timeout: ``kill``) or the run's end ends the wait."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        exited = False
        output_open = True
        drain_until: float | None = None
        wait = WAIT_FIRST
        try:
            while True:
                now = time.monotonic()
                if self._term_at is not None and not self._hard and now - self._term_at >= KILL_GRACE:
                    self._hard = True
                    self._signal(signal.SIGKILL)
                if not exited and self._shell_exited():
                    exited = True
                    self._signal(signal.SIGKILL)  # E4: what the shell left running goes with it
                    self._kill_escaped()
                    drain_until = now + DRAIN_SECONDS
                if exited and not output_open:
                    break
                if drain_until is not None and now > drain_until:
                    self._kill_escaped()
                    break  # something outside the group holds the pipe: stop reading
                if not output_open:
                    # The output is closed, the shell runs on: wait for its exit — mostly a moment (the
                    # shell closed it as it exited), so look again soon at first, then every 50 ms
                    time.sleep(wait)
                    wait = min(wait * 2, 0.05)
                    continue
                ready, _, _ = select.select([fd], [], [], 0.05)
                if ready:
                    data = os.read(fd, 65536)
                    if data:
                        self._add(decoder.decode(data))
                    else:
                        output_open = False
        except Exception:  # noqa: BLE001 - the command is still ended and reported below
            log.exception("reading the output of command %s failed", self.proc.pid)
        finally:
            self._add(decoder.decode(b"", final=True))
            self._signal(signal.SIGKILL)
            try:
                self.proc.stdout.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                log.warning("command %s did not end after SIGKILL", self.proc.pid)
            self._kill_escaped()
            self.ended = time.monotonic()
            with _RUNNING_LOCK:
                _RUNNING.pop(id(self), None)
            self._on_done()

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode
