"""Claims: one writer per thread, across processes (R7). A run claims its thread in the store (a
conditional update inside an immediate transaction); a claim whose process is gone is taken over.
``Claim`` and the ``Store`` mixin that keeps the ``claims`` table; the heartbeat that keeps a claim fresh
is in claims.py.

Who holds a claim, and whether it still lives (``holder_alive``, the one test for a claim's holder and
for a sub-agent task's owner, harness/task_runner.py): a process is named by its pid, its host name (for
people) and its *identity* — the boot of the kernel it runs on (``/proc/sys/kernel/random/boot_id``), its
PID and time namespaces (their inodes) and its own start time in clock ticks after boot (field 22 of
``/proc/self/stat``). Where the reader shares the holder's host name, boot and namespaces, the pid
decides: the holder lives while that pid runs with that very start time (no wall clock is compared, so a
clock stepped forward — NTP, a VM resumed — never makes a live holder look like a reused pid). Anywhere
else (another machine, or a container with the same host name but its own PID namespace, where the same
pid is another process) only the heartbeat can tell: a claim not refreshed for ``STALE_AFTER`` is a dead
process's. A row written before identities were recorded (an older workbench) keeps the rule it was
written under: the host name, then the pid and its start time against the claim's wall-clock time.
"""

from __future__ import annotations

import logging
import os
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from workbench.errors import ThreadBusyError

log = logging.getLogger("workbench.engine.store")

#: R7: a live run refreshes its claim this often (seconds); a claim of a process this one cannot judge by
#: its pid (another host, another PID namespace) not refreshed for STALE_AFTER is taken to be a dead
#: process's. Where the pid can be judged, it decides (holder_alive).
HEARTBEAT_EVERY = 10.0
STALE_AFTER = 60.0


@dataclass(frozen=True)
class Claim:
    """R7: the process that holds a thread (one writer per thread, across processes)."""

    thread_id: str
    token: str
    pid: int
    host: str
    since: float
    heartbeat: float
    next_event_seq: int = 1  # read inside the claim's transaction: the run numbers its events from here
    #: The holder's identity (``process_identity``); None for a row an older workbench wrote.
    process: str | None = None

    @property
    def alive(self) -> bool:
        """False when the holder is gone. Where its pid can be judged (same boot, same namespaces) the pid
        decides: a stopped (Ctrl-Z), sleeping or GIL-frozen run stops refreshing its heartbeat but is
        alive; a dead pid, or one now running another process, is gone at once. Elsewhere the heartbeat
        decides (see the module)."""
        return holder_alive(self.pid, self.host, self.since, self.heartbeat, self.process)

    def describe(self) -> str:
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.since))
        return f"process {self.pid} on {self.host}, since {since}"


#: The holders' identities, a table beside ``claims`` (a store made before it gets it at its first claim;
#: the claims table keeps its columns, so an older workbench reads and writes it as before). A claim's
#: identity counts only with its very token: a row an older workbench wrote or took over (and left this
#: table as it was) has none, and keeps its old rule.
IDENTITIES = """
CREATE TABLE IF NOT EXISTS claim_processes (
    thread_id TEXT PRIMARY KEY, token TEXT NOT NULL, process TEXT NOT NULL
);
"""
_COLUMNS = "c.thread_id, c.token, c.pid, c.host, c.since, c.heartbeat"
_JOINED = ("claims c LEFT JOIN claim_processes p ON p.thread_id = c.thread_id AND p.token = c.token")


class ClaimRows:
    """The ``claims`` table: a mixin of ``Store`` (its connection, lock and transactions)."""

    if TYPE_CHECKING:
        _db: sqlite3.Connection
        _lock: threading.RLock
        _cache: dict[str, Any]
        _claim_identities: bool

        def transaction(self) -> AbstractContextManager[sqlite3.Connection]: ...

    # -- claims: one writer per thread, across processes (R7) ------------------------------------------
    def claim(self, thread_id: str) -> Claim:
        """Claim a thread for a run, or raise ``ThreadBusyError`` naming the live holder.

        A conditional update inside an immediate transaction: the row is taken only when free or when
        its holder is gone (see ``holder_alive``).
        """
        self._claims_with_identities()
        now = time.time()
        mine = Claim(thread_id, uuid.uuid4().hex, os.getpid(), socket.gethostname(), now, now,
                     process=process_identity())
        with self.transaction() as db:
            row = db.execute(f"SELECT {_COLUMNS}, p.process FROM {_JOINED} WHERE c.thread_id=?",
                             (thread_id,)).fetchone()
            if row is not None:
                held = _claim(row)
                if held.alive:
                    same = held.pid == mine.pid and held.host == mine.host
                    where = f"in {'this' if same else 'another'} process ({held.describe()})"
                    raise ThreadBusyError(
                        f"thread {thread_id} already has a run in flight {where}: wait for it to end or stop it "
                        f"there; `workbench show {thread_id}` reads it meanwhile")
                log.warning("taking over thread %s from a dead run (%s)", thread_id, held.describe())
            changed = db.execute(
                "UPDATE claims SET token=?, pid=?, host=?, since=?, heartbeat=? WHERE thread_id=? AND token=?",
                (mine.token, mine.pid, mine.host, now, now, thread_id, row[1]),
            ).rowcount if row is not None else 0
            if not changed:
                db.execute("INSERT INTO claims(thread_id, token, pid, host, since, heartbeat) VALUES (?,?,?,?,?,?)",
                           (thread_id, mine.token, mine.pid, mine.host, now, now))
            if mine.process:
                db.execute("INSERT OR REPLACE INTO claim_processes(thread_id, token, process) VALUES (?,?,?)",
                           (thread_id, mine.token, mine.process))
            else:  # no identity here (not Linux): the claim goes by host name and wall clock
                db.execute("DELETE FROM claim_processes WHERE thread_id=?", (thread_id,))
            last = db.execute("SELECT COALESCE(MAX(seq), 0) FROM events WHERE thread_id=?", (thread_id,)).fetchone()
        return Claim(thread_id, mine.token, mine.pid, mine.host, now, now, int(last[0]) + 1, process=mine.process)

    def release(self, claim: Claim) -> None:
        self._cache.pop(claim.thread_id, None)
        with self.transaction() as db:
            db.execute("DELETE FROM claims WHERE thread_id=? AND token=?", (claim.thread_id, claim.token))
            if self._has_identities():
                db.execute("DELETE FROM claim_processes WHERE thread_id=? AND token=?",
                           (claim.thread_id, claim.token))

    def heartbeat(self, claim: Claim) -> bool:
        """Refresh a live claim; False when it was taken over (the run must not write any more)."""
        with self.transaction() as db:
            return db.execute("UPDATE claims SET heartbeat=? WHERE thread_id=? AND token=?",
                              (time.time(), claim.thread_id, claim.token)).rowcount == 1

    def holder(self, thread_id: str) -> Claim | None:
        """The live claim on a thread (a run in flight somewhere), or None."""
        with self._lock:
            return self._claims((thread_id,)).get(thread_id)

    def _claims(self, thread_ids: Sequence[str] | None) -> dict[str, Claim]:
        if self._has_identities():
            sql = f"SELECT {_COLUMNS}, p.process FROM {_JOINED}"
        else:  # a store no claim was taken in since identities were recorded
            sql = f"SELECT {_COLUMNS}, NULL FROM claims c"
        rows = self._db.execute(sql + (" WHERE c.thread_id=?" if thread_ids else ""), tuple(thread_ids or ())).fetchall()
        return {c.thread_id: c for c in (_claim(r) for r in rows) if c.alive}

    def _check_claim(self, db: sqlite3.Connection, thread_id: str, token: str | None) -> None:
        if token is None:
            return
        row = db.execute("SELECT token, pid, host, since, heartbeat FROM claims WHERE thread_id=?", (thread_id,)).fetchone()
        if row is None or row[0] != token:
            who = f" by {Claim(thread_id, *row).describe()}" if row else ""
            raise ThreadBusyError(f"thread {thread_id} was taken over{who}: this run no longer writes it")

    # -- the identities table (a store made before it: made at its first claim) ---------------------------
    def _has_identities(self) -> bool:
        """Whether the store has the identities table (remembered once seen: never dropped)."""
        if getattr(self, "_claim_identities", False):
            return True
        with self._lock:
            found = self._db.execute(
                "SELECT 1 FROM sqlite_master WHERE type='table' AND name='claim_processes'").fetchone() is not None
        if found:
            self._claim_identities = True
        return found

    def _claims_with_identities(self) -> None:
        """Make the identities table in a store made before it, at the first claim (a write: a store only
        read is not changed; its claims, all taken before, have no identity to read)."""
        if self._has_identities():
            return
        with self.transaction() as db:
            db.execute(IDENTITIES.strip())
        self._claim_identities = True


def _claim(row: Sequence[Any]) -> Claim:
    """A claim from a row: ``_COLUMNS``, then its identity (NULL when none was stored with its token)."""
    thread_id, token, pid, host, since, heartbeat, process = row
    return Claim(thread_id, token, pid, host, since, heartbeat, process=process if isinstance(process, str) else None)


# -- who holds a claim, and whether it lives ----------------------------------------------------------------
def holder_alive(pid: int, host: str, since: float, heartbeat: float | None, process: str | None = None) -> bool:
    """R7: whether the process that claimed a thread (or owns a task) still runs — ``pid``, ``host`` (its
    host name), ``since`` (when it claimed, its clock), ``heartbeat`` (its last refresh; None: it keeps
    none, so where its pid cannot be judged it counts as alive) and ``process`` (its identity, None for
    a row an older workbench wrote). See the module."""
    here = host == socket.gethostname()
    parsed = _parse_identity(process)
    if parsed is not None:
        scope, ticks = parsed
        if here and scope == _judging_scope():
            return _runs_with_start(pid, ticks)
    elif here:  # an older workbench's row: its rule, by host name and wall clock
        return _pid_alive(pid) and not _started_after(pid, since)
    return heartbeat is None or time.time() - heartbeat <= STALE_AFTER


_IDENTITIES: dict[int, str | None] = {}  # by pid: a forked child is another process
_SCOPES: dict[int, str | None] = {}


def process_identity() -> str | None:
    """This process as no other on any host, ever: ``<boot id>/<PID namespace inode>/<time namespace
    inode>/<start ticks>`` (one word); None where /proc cannot tell (not Linux): its claims then go by
    host name and wall clock, as an older workbench's."""
    pid = os.getpid()
    if pid not in _IDENTITIES:
        scope = _scope()
        started = _stat(pid="self")
        _IDENTITIES[pid] = f"{scope}/{started[1]}" if scope is not None and started is not None else None
    return _IDENTITIES[pid]


def _scope() -> str | None:
    """Where a pid names one process and its start ticks read the same: this boot of the kernel, this PID
    namespace, this time namespace (which shifts the start times /proc shows)."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            boot = f.read().strip()
        pid_ns = os.stat("/proc/self/ns/pid").st_ino
    except (OSError, ValueError):
        return None
    try:
        time_ns = os.stat("/proc/self/ns/time").st_ino
    except OSError:
        time_ns = 0  # a kernel without time namespaces: every process shares the one clock
    if not boot or any(c in boot for c in " /|"):
        return None
    return f"{boot}/{pid_ns}/{time_ns}"


def _judging_scope() -> str | None:
    """This process's scope, when it can judge pids through /proc: a /proc mounted for another PID
    namespace (``unshare -p`` without ``--mount-proc``) shows other processes under these numbers."""
    pid = os.getpid()
    if pid not in _SCOPES:
        try:
            mine = os.readlink("/proc/self") == str(pid)
        except OSError:
            mine = False
        _SCOPES[pid] = _scope() if mine else None
    return _SCOPES[pid]


def _parse_identity(process: str | None) -> tuple[str, int] | None:
    if not process:
        return None
    scope, _, ticks = process.rpartition("/")
    if scope.count("/") != 2 or not ticks.isdigit():
        return None
    return scope, int(ticks)


def _stat(pid: int | str) -> tuple[bytes, int] | None:
    """A process's state letter and start time (clock ticks after boot, field 22) from /proc."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        fields = stat[stat.rindex(b")") + 2:].split()  # after "pid (comm) ": field 3 (state) onwards
        return fields[0], int(fields[19])
    except (OSError, ValueError, IndexError):
        return None


def _runs_with_start(pid: int, ticks: int) -> bool:
    """Whether ``pid`` is the process that started at ``ticks`` and has not exited (a zombie has). Where
    /proc does not show it (``hidepid``: another user's process) the pid alone decides."""
    found = _stat(pid)
    if found is None:
        return _pid_alive(pid)
    state, started = found
    return state != b"Z" and started == ticks


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True  # it exists (another user's) or we cannot tell: assume alive
    return True


#: R7, rows an older workbench wrote (no identity): how much later than its claim a process may seem
#: to have started and still be the holder: the start time read from /proc is whole-second coarse and
#: moves with wall-clock steps.
PID_REUSE_SLACK = 10.0


def _started_after(pid: int, when: float) -> bool:
    """True when the process now holding ``pid`` is a zombie or started after ``when`` (so the pid was
    reused: it cannot be the process that claimed at ``when``). Linux only (/proc); False elsewhere or
    when unreadable (the pid alone then decides). Only for rows without an identity (see the module)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        with open("/proc/stat", "rb") as f:
            btime = next(int(line.split()[1]) for line in f if line.startswith(b"btime "))
        fields = stat[stat.rindex(b")") + 2:].split()  # after "pid (comm) ": field 3 (state) onwards
        if fields[0] == b"Z":
            return True  # exited, not reaped yet: not running any more
        started = btime + int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22: start time, in ticks after boot
    except (OSError, ValueError, IndexError, StopIteration):
        return False
    return started > when + PID_REUSE_SLACK
