"""The store's write-ahead log is copied back by a background thread, never inside a commit (R1; issue 9).

A commit that crossed SQLite's default threshold (1,000 logged pages) checkpointed inside itself and
synced both files; in the window that commit runs on the GUI thread. These tests pin that the store's
connection never checkpoints, that the checkpointer thread keeps the log bounded, and that closing
the store still leaves no log file behind.
"""

from __future__ import annotations

import threading
import time

from workbench.engine.store import Store
from workbench.engine.wal_checkpointer import CHECKPOINTER, EVERY_COMMITS


def _wait_for(predicate, timeout: float = 10.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


def test_R1_the_committing_connection_never_checkpoints(tmp_path):
    store = Store(tmp_path / "s.sqlite3")
    try:
        assert store._db.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
    finally:
        store.close()


def test_R1_a_background_thread_keeps_the_log_bounded(tmp_path, monkeypatch):
    threads: list[str] = []
    served = CHECKPOINTER.checkpoint

    def record(token: int) -> None:
        threads.append(threading.current_thread().name)
        served(token)

    monkeypatch.setattr(CHECKPOINTER, "checkpoint", record)
    store = Store(tmp_path / "s.sqlite3")
    wal = tmp_path / "s.sqlite3-wal"
    try:
        tid = store.create_thread("t")
        sizes = []
        for i in range(12 * EVERY_COMMITS):
            before = CHECKPOINTER.runs
            store.rename_thread(tid, f"{i} " + "x" * 6000)  # two overflow pages a commit
            if (i + 2) % EVERY_COMMITS == 0:  # this commit asked for a checkpoint: let it run
                assert _wait_for(lambda: CHECKPOINTER.runs > before), "no checkpoint ran"
                sizes.append(wal.stat().st_size)
        assert threads and set(threads) == {"workbench-wal-checkpoint"}
        # Without checkpoints the log would hold every commit: 12 x 32 commits of 3+ pages, > 4.5 MB.
        # Copied back every 32 commits, SQLite starts it over and the file stops growing.
        assert max(sizes) < 1_500_000, sizes
        assert sizes[-1] <= sizes[len(sizes) // 2], sizes
        assert store.thread(tid).title.startswith(f"{12 * EVERY_COMMITS - 1} ")
    finally:
        store.close()


def test_R1_closing_the_store_closes_the_checkpointer_connection_and_removes_the_log(tmp_path):
    path = tmp_path / "s.sqlite3"
    store = Store(path)
    tid = store.create_thread("t")
    for i in range(2 * EVERY_COMMITS):
        store.rename_thread(tid, str(i))
    assert _wait_for(lambda: not CHECKPOINTER._queued)
    assert (tmp_path / "s.sqlite3-wal").exists()
    store.close()
    # SQLite removes the log when the last connection to the file closes: the checkpointer's too.
    assert not (tmp_path / "s.sqlite3-wal").exists()
    reopened = Store(path)
    try:
        assert reopened.thread(tid).title == str(2 * EVERY_COMMITS - 1)
    finally:
        reopened.close()


def test_R1_a_store_dropped_without_close_gives_its_checkpointer_connection_back(tmp_path):
    import gc

    path = tmp_path / "s.sqlite3"
    store = Store(path)
    token = store._wal
    tid = store.create_thread("t")
    for i in range(2 * EVERY_COMMITS):
        store.rename_thread(tid, str(i))
    assert _wait_for(lambda: token in CHECKPOINTER._connections)
    del store
    gc.collect()
    # The finalizer queues the release; the checkpointer's thread closes its connection, and SQLite,
    # seeing the file's last connection go, copies the log back and removes it.
    assert _wait_for(lambda: token not in CHECKPOINTER._connections and token not in CHECKPOINTER._paths)
    assert _wait_for(lambda: not (tmp_path / "s.sqlite3-wal").exists())
    reopened = Store(path)
    try:
        assert reopened.thread(tid).title == str(2 * EVERY_COMMITS - 1)
    finally:
        reopened.close()
