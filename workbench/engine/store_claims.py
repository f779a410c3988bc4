"""Claims: one writer per thread, across processes (R7). A run claims its thread in the store (a
conditional update inside an immediate transaction); a claim whose process is gone (its pid on this
host, or another host's heartbeat) is taken over. ``Claim`` and the ``Store`` mixin that keeps the
``claims`` table; the heartbeat that keeps a claim fresh is in claims.py.
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

#: R7: a live run refreshes its claim this often (seconds); another host's claim not refreshed for
#: STALE_AFTER is taken to be a dead process's. On this host the pid decides (Claim.alive).
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

    @property
    def alive(self) -> bool:
        """False when the holder is gone. On this host the pid decides: a stopped (Ctrl-Z), sleeping or
        GIL-frozen run stops refreshing its heartbeat but is alive; a dead pid, or one reused by a process
        started after the claim, is gone at once. Only another host's claim goes by its heartbeat."""
        if self.host == socket.gethostname():
            return _pid_alive(self.pid) and not _started_after(self.pid, self.since)
        return time.time() - self.heartbeat <= STALE_AFTER

    def describe(self) -> str:
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.since))
        return f"process {self.pid} on {self.host}, since {since}"


class ClaimRows:
    """The ``claims`` table: a mixin of ``Store`` (its connection, lock and transactions)."""

    if TYPE_CHECKING:
        _db: sqlite3.Connection
        _lock: threading.RLock
        _cache: dict[str, Any]

        def transaction(self) -> AbstractContextManager[sqlite3.Connection]: ...

    # -- claims: one writer per thread, across processes (R7) ------------------------------------------
    def claim(self, thread_id: str) -> Claim:
        """Claim a thread for a run, or raise ``ThreadBusyError`` naming the live holder.

        A conditional update inside an immediate transaction: the row is taken only when free or when
        its holder is gone (a dead pid on this host, or another host's claim with no heartbeat for
        ``STALE_AFTER`` seconds).
        """
        now = time.time()
        mine = Claim(thread_id, uuid.uuid4().hex, os.getpid(), socket.gethostname(), now, now)
        with self.transaction() as db:
            row = db.execute("SELECT thread_id, token, pid, host, since, heartbeat FROM claims WHERE thread_id=?",
                             (thread_id,)).fetchone()
            if row is not None:
                held = Claim(*row)
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
            last = db.execute("SELECT COALESCE(MAX(seq), 0) FROM events WHERE thread_id=?", (thread_id,)).fetchone()
        return Claim(thread_id, mine.token, mine.pid, mine.host, now, now, int(last[0]) + 1)

    def release(self, claim: Claim) -> None:
        self._cache.pop(claim.thread_id, None)
        with self.transaction() as db:
            db.execute("DELETE FROM claims WHERE thread_id=? AND token=?", (claim.thread_id, claim.token))

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
        sql = "SELECT thread_id, token, pid, host, since, heartbeat FROM claims"
        rows = self._db.execute(sql + (" WHERE thread_id=?" if thread_ids else ""), tuple(thread_ids or ())).fetchall()
        return {c.thread_id: c for c in (Claim(*r) for r in rows) if c.alive}

    def _check_claim(self, db: sqlite3.Connection, thread_id: str, token: str | None) -> None:
        if token is None:
            return
        row = db.execute("SELECT token, pid, host, since, heartbeat FROM claims WHERE thread_id=?", (thread_id,)).fetchone()
        if row is None or row[0] != token:
            who = f" by {Claim(thread_id, *row).describe()}" if row else ""
            raise ThreadBusyError(f"thread {thread_id} was taken over{who}: this run no longer writes it")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True  # it exists (another user's) or we cannot tell: assume alive
    return True


#: R7: how much later than its claim a process may seem to have started and still be the holder: the
#: start time read from /proc is whole-second coarse and moves with wall-clock steps.
PID_REUSE_SLACK = 10.0


def _started_after(pid: int, when: float) -> bool:
    """True when the process now holding ``pid`` is a zombie or started after ``when`` (so the pid was
    reused: it cannot be the process that claimed at ``when``). Linux only (/proc); False elsewhere or
    when unreadable (the pid alone then decides)."""
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
