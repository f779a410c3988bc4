"""R1: the store never writes into a database file no one can open again.

A command the agent runs (``rm -rf .workbench``: the shell tool is not held by F4's protected paths
the way the file tools are), or a person, may delete the workspace's ``.workbench/`` while the store has
its database open. SQLite keeps reading and writing the unlinked file: every later commit "succeeds"
into it, the run reports success, and the next open finds nothing. So before each COMMIT the store
compares the file at its path with the one it opened (device and inode: one ``os.stat``, about 1 µs,
against some 100 µs for a commit). When they differ, the transaction is rolled back, the write fails
with ``StoreLostError`` naming the path and where the data is, and the database — still whole and
readable through the open connection — is saved with SQLite's backup API:

- nothing at the path (deleted, or moved away): the copy is put back at the path (``.workbench/`` made
  again) and the store goes on with it; only the write that noticed, and the step in flight, are lost;
- another file at the path (replaced): that file is left alone, the copy is kept beside it as
  ``recovered-<time>.sqlite3`` and this store writes no more (each write fails, naming the copy);
- the file at the path is this store's own copy, put back by another connection to the same file (a
  sub-agent's store, the window's and a ``workbench run``'s): the store goes on with it too.

A run in flight through the store learns of it at its next write even when another write noticed (its
claim's heartbeat, the prompt log, whose errors do not fail a run): it ends failed, never done on a
step that was rolled back. Dropping a connection to the deleted file is safe: SQLite neither
checkpoints nor deletes the ``-wal``/``-shm`` names of a database file that has moved (tested).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sqlite3
import threading
import time
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.engine.wal_checkpointer import CHECKPOINTER
from workbench.errors import StoreLostError

log = logging.getLogger("workbench.engine.store")

Identity = tuple[int, int]  # (st_dev, st_ino) of a file

#: In a saved copy: the files (device, inode) it was saved from, so another connection that had the
#: same file open knows the file now at the path for its own data, put back.
RESTORED_TABLE = "store_restored"


def identity(path: Path) -> Identity | None:
    """The file at ``path`` (device, inode), None when there is none."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def connect(path: Path) -> sqlite3.Connection:
    """The store's connection: WAL, synced at checkpoints, never checkpointing inside a commit (which may
    run on the GUI thread: see wal_checkpointer)."""
    db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("PRAGMA wal_autocheckpoint=0")
    except BaseException:
        db.close()
        raise
    return db


class FileGuard:
    """The check at each commit and the rescue: a mixin of ``Store`` (its path, connection and lock)."""

    if TYPE_CHECKING:
        path: Path
        _db: sqlite3.Connection
        _lock: threading.RLock
        _cache: dict[str, Any]

    _ident: Identity | None = None  # the file the connection has open
    _opened = 0.0  # since when (a copy saved before cannot be of this file)
    _lost: StoreLostError | None = None  # set: this store writes no more
    _refused: dict[str, StoreLostError] | None = None  # runs in flight to tell, by claim token
    _wal: int
    _wal_release: weakref.finalize[Any, Any]

    def _register_wal(self) -> None:
        """Hand the file at the path to the WAL checkpointer (see wal_checkpointer)."""
        self._wal = CHECKPOINTER.register(self.path)
        # A store dropped without close() must not leave its checkpointer connection open for good.
        self._wal_release = weakref.finalize(self, CHECKPOINTER.release_later, self._wal)
        self._wal_release.atexit = False

    def _remember_file(self) -> None:
        """The file the connection has just opened is the one at the path."""
        self._ident, self._opened = identity(self.path), time.time()

    def _file_moved(self) -> bool:
        """Before each COMMIT: is the file at the path no longer the one this store writes?"""
        return self._ident is not None and identity(self.path) != self._ident

    def _refuse_lost(self, token: str | None, failing: bool) -> None:
        """Inside a claimed write's transaction: every write of a run in flight when the file went is
        refused with the error but the one that records the run ``failed`` (its ending). So the run
        fails even when the write that noticed was not its own or its error was made a tool's result."""
        if token is None or not self._refused or token not in self._refused:
            return
        if failing:
            del self._refused[token]
            return
        raise self._refused[token].again()

    def _rescue(self) -> StoreLostError:
        """The file went. Called under the lock, the transaction rolled back: saves what the open
        connection still holds and returns the error for the write that noticed."""
        path, origin = self.path, self._ident
        assert origin is not None
        there = identity(path)
        what = "replaced by another file" if there is not None else "deleted or moved"
        # Short enough for one line of the CLI (400 characters) with a long path: what, where, what next.
        head = f"the thread store {path} was {what} while in use; nothing was written into the file that went. "
        again = ("recover the thread to run the interrupted step again (`workbench resume --thread ID`, or "
                 "Retry in the window)")
        stopped = "this session writes no more to the store"
        fresh = _open_restored(path, origin, self._opened) if there is not None else None
        copy: Path | None = None
        message = ""
        if fresh is None:
            try:
                copy = save_copy(self._db, path, origin)
            except (OSError, sqlite3.Error) as e:
                message = f"{head}Its database could not be saved ({e}); {stopped}"
        if copy is not None and there is None:
            if put_back(copy, path):
                copy = path
                try:
                    fresh = connect(path)
                    message = f"{head}Its database, as of the last commit, was put back at that path: {again}"
                except sqlite3.Error as e:  # put back, but not usable from here
                    message = (f"{head}Its database, as of the last commit, was put back at that path but could "
                               f"not be opened again ({e}); {stopped}: reopen the workspace")
            elif (fresh := _open_restored(path, origin, self._opened)) is not None:  # another was quicker
                _remove(copy)
                copy = None
        if fresh is not None:
            self._switch(fresh)
            copy = path
            message = message or (f"{head}Another connection of the workbench put its database back at that "
                                  f"path: {again}")
        elif copy is not None and copy != path:
            message = (f"{head}The database this session had open, as of the last commit, was saved beside it as "
                       f"{copy.name}; the new file is left alone and {stopped}: to use the copy, close the workbench "
                       f"and rename it {path.name}" if copy.parent == path.parent else
                       f"{head}Its folder could not be made again; its database, as of the last commit, was saved as "
                       f"{copy}; {stopped}")
        going_on = fresh is not None
        lost = StoreLostError(message, path=str(path), saved=str(copy) if copy is not None else None,
                              restored=copy == path)
        if not going_on:
            self._lost = lost
        else:  # the runs of this process through this store: each ends failed (see _refuse_lost)
            self._refused = {**(self._refused or {}), **{token: lost for token in self._own_claims()}}
        log.info("%s", lost)  # the error itself reaches the person (a failed run, every refused write)
        return lost

    def _switch(self, db: sqlite3.Connection) -> None:
        """Go on with ``db``, a connection to the file now at the path. The deleted file's connection is
        dropped, not closed: a reader may still hold it; closing it later is harmless (see above)."""
        self._db = db
        self._remember_file()
        self._cache.clear()  # read again from the file (the same rows: nothing was written since)
        self._wal_release.detach()
        CHECKPOINTER.release(self._wal)
        self._register_wal()

    def _own_claims(self) -> list[str]:
        try:
            rows = self._db.execute("SELECT token FROM claims WHERE pid=? AND host=?",
                                    (os.getpid(), socket.gethostname())).fetchall()
        except sqlite3.Error:
            return []
        return [str(r[0]) for r in rows]


def _open_restored(path: Path, origin: Identity, since: float) -> sqlite3.Connection | None:
    """A connection to the file at ``path`` when it is a copy of the file ``origin`` put back (by another
    connection that had it open) after ``since``, else None. Looked at read-only as an immutable file
    first: a file that is not ours is never opened with the ``-wal``/``-shm`` beside it, which may be the
    deleted file's. (``since``: an inode number is reused once its file is gone for good.)"""
    try:
        probe = sqlite3.connect(Path(os.path.abspath(path)).as_uri() + "?immutable=1", uri=True)
    except (sqlite3.Error, ValueError):
        return None
    try:
        ours = probe.execute(f"SELECT 1 FROM {RESTORED_TABLE} WHERE dev=? AND ino=? AND time>=?",
                             (*origin, since)).fetchone() is not None
    except sqlite3.Error:
        ours = False
    finally:
        probe.close()
    if not ours:
        return None
    try:
        return connect(path)
    except sqlite3.Error:
        return None


def save_copy(db: sqlite3.Connection, path: Path, origin: Identity) -> Path:
    """Back the database ``db`` has open up into a new ``recovered-<time>.sqlite3``: beside ``path`` (its
    folder made again if it alone is gone, never the workspace above it), else in the per-user data
    folder. Raises the last error when neither can hold it."""
    last: Exception | None = None
    for folder in (path.parent, None):
        try:
            if folder is None:
                from workbench.config.user import private_dir, user_data_dir  # only on this rare path

                folder = private_dir(user_data_dir() / "recovered")  # 0700: threads may hold anything
            else:
                folder.mkdir(exist_ok=True)
            return _backup(db, folder, origin)
        except (OSError, sqlite3.Error) as e:
            log.warning("could not save the thread store %s into %s: %s", path, folder, e)
            last = e
    assert last is not None
    raise last


def _backup(db: sqlite3.Connection, folder: Path, origin: Identity) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for n in range(1, 1000):
        copy = folder / f"recovered-{stamp}{'' if n == 1 else f'-{n}'}.sqlite3"
        try:
            os.close(os.open(copy, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
            break
        except FileExistsError:
            continue
    else:
        raise FileExistsError(f"{folder}/recovered-{stamp}*.sqlite3")
    try:
        target = sqlite3.connect(copy)
        try:
            db.backup(target)
            target.execute(f"CREATE TABLE IF NOT EXISTS {RESTORED_TABLE} (dev INTEGER NOT NULL, ino INTEGER NOT NULL,"
                           " time REAL NOT NULL, PRIMARY KEY (dev, ino))")
            target.execute(f"INSERT OR REPLACE INTO {RESTORED_TABLE} VALUES (?,?,?)", (*origin, time.time()))
            target.commit()
        finally:
            target.close()  # its own log copied in and removed: one file
    except BaseException:
        _remove(copy)
        raise
    return copy


def _remove(copy: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(OSError):
            os.unlink(f"{copy}{suffix}")


def put_back(copy: Path, path: Path) -> bool:
    """Put the saved copy at ``path`` unless a file took its place meanwhile; True when it is there."""
    if copy.parent != path.parent or identity(path) is not None:
        return False
    for suffix in ("-wal", "-shm"):  # the deleted file's log and index (only it went): never read with the copy
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f"{path}{suffix}")
    try:
        os.link(copy, path)  # never over a file that appeared meanwhile
    except FileExistsError:
        return False
    except OSError:  # a file system without hard links
        if identity(path) is not None:
            return False
        os.replace(copy, path)
        return True
    os.unlink(copy)
    return True
