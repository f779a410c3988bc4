"""Copies a store's write-ahead log back into its database file on a background thread.

SQLite in WAL mode appends each commit to the ``-wal`` file and, by default, the connection that
commits past 1,000 logged pages copies them back into the database (a checkpoint) inside that
commit, syncing both files to disk (``synchronous=NORMAL`` syncs only at checkpoints). In the
window the engine commits on the GUI thread, so one step in about fifty paid two ``fsync`` calls
there: 2–6 ms on this machine's disk, far more on a slow or busy one (issue 9: the step's checkpoint
time and the window's worst frame).

The store's own connection therefore never checkpoints (``wal_autocheckpoint=0``); every
``EVERY_COMMITS`` commits it asks this module's one daemon thread, which runs a PASSIVE checkpoint
on a connection of its own. A PASSIVE checkpoint takes no lock a writer needs: commits go on while
it copies, and what it cannot copy yet (pages a reader still uses) waits for the next one. Nothing
about durability changes: a commit is in the log, synced or not, exactly as before; the log is
only copied back elsewhere. Another process on the same file keeps SQLite's default.
"""

from __future__ import annotations

import logging
import queue
import sqlite3
import threading
from pathlib import Path

log = logging.getLogger(__name__)

# ~10 pages a step's checkpoint: the log stays near 300 pages (about 1 MB) between checkpoints.
EVERY_COMMITS = 32


class WalCheckpointer:
    """One daemon thread for all stores of the process; each store is a ``token`` it registered."""

    def __init__(self) -> None:
        self._requests: queue.SimpleQueue[int] = queue.SimpleQueue()
        # Two locks, so that asking (on the committing thread) never waits for a checkpoint running.
        self._lock = threading.Lock()  # the tables below; held only for a look-up
        self._busy = threading.Lock()  # held while a checkpoint runs and while a connection closes
        self._paths: dict[int, Path] = {}  # live stores
        self._connections: dict[int, sqlite3.Connection] = {}  # used under _busy only
        self._queued: set[int] = set()  # asked and not yet served: asking again adds nothing
        self._next = 0
        self._thread: threading.Thread | None = None
        self.runs = 0  # checkpoints made (for tests and diagnostics)

    def register(self, path: Path) -> int:
        with self._lock:
            self._next += 1
            self._paths[self._next] = path
            return self._next

    def request(self, token: int) -> None:
        """Ask for a checkpoint of the store ``token``; returns at once."""
        with self._lock:
            if token in self._queued or token not in self._paths:
                return
            self._queued.add(token)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._serve, name="workbench-wal-checkpoint", daemon=True)
                self._thread.start()
        self._requests.put(token)

    def release(self, token: int) -> None:
        """Forget the store ``token`` and close its connection: waits for a checkpoint in flight.

        The store closes its own connection after this, so SQLite, seeing the last connection go,
        copies what is left and removes the log file as it always did."""
        with self._lock:
            self._paths.pop(token, None)
            self._queued.discard(token)
        with self._busy:
            conn = self._connections.pop(token, None)
            if conn is not None:
                conn.close()

    def release_later(self, token: int) -> None:
        """``release`` on the checkpointer's thread: for a store collected without ``close()``.

        Called from a finalizer, which may run on any thread, inside any lock: it only queues the
        token (``SimpleQueue.put`` is safe there)."""
        self._requests.put(-token)

    def checkpoint(self, token: int) -> None:
        """Run one PASSIVE checkpoint of the store ``token`` on the calling thread."""
        with self._lock:
            self._queued.discard(token)
        with self._busy:
            with self._lock:
                path = self._paths.get(token)
            if path is None:  # released meanwhile
                return
            try:
                conn = self._connections.get(token)
                if conn is None:
                    conn = sqlite3.connect(path, timeout=1.0, isolation_level=None, check_same_thread=False)
                    self._connections[token] = conn
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                self.runs += 1
            except sqlite3.Error as e:  # busy, or the file went away: the next request tries again
                log.debug("WAL checkpoint of %s skipped: %s", path, e)

    def _serve(self) -> None:
        while True:
            token = self._requests.get()
            if token < 0:
                self.release(-token)
            else:
                self.checkpoint(token)


CHECKPOINTER = WalCheckpointer()
