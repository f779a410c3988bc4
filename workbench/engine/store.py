"""The durable thread store: SQLite in ``<workspace>/.workbench/`` (R1, R3, R5, M8).

WAL mode, one transaction per checkpoint: a crash loses at most the step in flight. Durable events
are appended as they happen so late subscribers can replay them.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.engine.events import Event
from workbench.engine.usage import Usage
from workbench.errors import StoreError

MESSAGES_KEY = "messages"
COUNT_KEY = "__message_count"

SCHEMA = """
CREATE TABLE IF NOT EXISTS threads (
    id TEXT PRIMARY KEY, title TEXT NOT NULL DEFAULT '', created REAL NOT NULL, updated REAL NOT NULL,
    status TEXT NOT NULL DEFAULT 'new', usage TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE IF NOT EXISTS checkpoints (
    thread_id TEXT NOT NULL, seq INTEGER NOT NULL, run_id TEXT NOT NULL, step INTEGER NOT NULL,
    status TEXT NOT NULL, state TEXT NOT NULL, pending TEXT NOT NULL DEFAULT '{}', created REAL NOT NULL,
    PRIMARY KEY (thread_id, seq)
);
CREATE TABLE IF NOT EXISTS messages (
    thread_id TEXT NOT NULL, idx INTEGER NOT NULL, message TEXT NOT NULL, PRIMARY KEY (thread_id, idx)
);
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY, thread_id TEXT NOT NULL, status TEXT NOT NULL, input TEXT NOT NULL,
    answer TEXT NOT NULL DEFAULT '', error TEXT, usage TEXT NOT NULL DEFAULT '{}',
    started REAL NOT NULL, finished REAL
);
CREATE TABLE IF NOT EXISTS events (
    thread_id TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL, run_id TEXT NOT NULL,
    step INTEGER NOT NULL, time REAL NOT NULL, data TEXT NOT NULL, PRIMARY KEY (thread_id, seq)
);
CREATE TABLE IF NOT EXISTS usage (
    thread_id TEXT NOT NULL, run_id TEXT NOT NULL, step INTEGER NOT NULL, model TEXT NOT NULL,
    usage TEXT NOT NULL, time REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS usage_thread ON usage(thread_id, run_id);
"""


@dataclass(frozen=True)
class ThreadInfo:
    id: str
    title: str
    created: float
    updated: float
    status: str
    usage: Usage = field(default_factory=Usage)


@dataclass(frozen=True)
class Checkpoint:
    thread_id: str
    seq: int
    run_id: str
    step: int
    status: str  # running | done | failed | aborted | interrupted
    state: dict[str, Any]
    pending: dict[str, Any]  # {"phase": "model"|"tools", "questions": [...], "completed": {...}} or {}
    created: float


@dataclass(frozen=True)
class RunRecord:
    id: str
    thread_id: str
    status: str
    input: str
    answer: str
    error: str | None
    usage: Usage
    started: float
    finished: float | None


class Store:
    """One SQLite file per workspace. Safe to use from several threads (one connection, one lock)."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(SCHEMA)
        except sqlite3.DatabaseError as e:
            raise StoreError(f"cannot open the thread store {self.path}: {e}") from None
        self._lock = threading.RLock()
        # Threads with a run in flight through any Engine on this store object (this process).
        self.active_threads: set[str] = set()

    @classmethod
    def for_workspace(cls, workspace: Path | str) -> Store:
        return cls(Path(workspace) / ".workbench" / "threads.sqlite3")

    def close(self) -> None:
        with self._lock:
            self._db.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            else:
                self._db.execute("COMMIT")

    # -- threads ---------------------------------------------------------------------------------
    def create_thread(self, title: str = "", thread_id: str | None = None) -> str:
        tid = thread_id or uuid.uuid4().hex[:12]
        now = time.time()
        with self.transaction() as db:
            db.execute(
                "INSERT OR IGNORE INTO threads(id, title, created, updated) VALUES (?,?,?,?)", (tid, title, now, now)
            )
        return tid

    def thread(self, thread_id: str) -> ThreadInfo | None:
        with self._lock:
            row = self._db.execute(
                "SELECT id, title, created, updated, status, usage FROM threads WHERE id=?", (thread_id,)
            ).fetchone()
        return _thread(row) if row else None

    def threads(self) -> list[ThreadInfo]:
        with self._lock:
            rows = self._db.execute(
                "SELECT id, title, created, updated, status, usage FROM threads ORDER BY updated DESC, rowid DESC"
            ).fetchall()
        return [_thread(r) for r in rows]

    def rename_thread(self, thread_id: str, title: str) -> None:
        with self.transaction() as db:
            db.execute("UPDATE threads SET title=? WHERE id=?", (title, thread_id))

    def delete_thread(self, thread_id: str) -> None:
        with self.transaction() as db:
            for table in ("checkpoints", "messages", "runs", "events", "usage"):
                db.execute(f"DELETE FROM {table} WHERE thread_id=?", (thread_id,))
            db.execute("DELETE FROM threads WHERE id=?", (thread_id,))

    # -- checkpoints (R1) ----------------------------------------------------------------------------
    def save_checkpoint(
        self,
        thread_id: str,
        run_id: str,
        step: int,
        status: str,
        state: dict[str, Any],
        pending: dict[str, Any],
        *,
        calls: Sequence[tuple[str, Usage]] = (),
        run: RunRecord | None = None,
        thread_status: str | None = None,
        events: Sequence[Event] = (),
    ) -> int:
        """Write state, pending questions, this step's usage rows, events and the run record in ONE transaction.

        Messages are append-only, so only those past the previous checkpoint's count are written: the
        cost of a checkpoint does not grow with the history.
        """
        now = time.time()
        messages = state.get(MESSAGES_KEY, [])
        rest = {k: v for k, v in state.items() if k != MESSAGES_KEY}
        rest[COUNT_KEY] = len(messages)
        state_json = json.dumps(rest, ensure_ascii=False)
        with self.transaction() as db:
            row = db.execute(
                "SELECT seq, state FROM checkpoints WHERE thread_id=? ORDER BY seq DESC LIMIT 1", (thread_id,)
            ).fetchone()
            seq = int(row[0]) + 1 if row else 1
            known = _stored_count(row[1]) if row else 0
            db.executemany(
                "INSERT OR REPLACE INTO messages(thread_id, idx, message) VALUES (?,?,?)",
                [(thread_id, i, json.dumps(messages[i], ensure_ascii=False)) for i in range(min(known, len(messages)), len(messages))],
            )
            self._insert_events(db, events)
            db.execute(
                "INSERT INTO checkpoints(thread_id, seq, run_id, step, status, state, pending, created)"
                " VALUES (?,?,?,?,?,?,?,?)",
                (thread_id, seq, run_id, step, status, state_json, json.dumps(pending), now),
            )
            added = Usage()
            for model, u in calls:
                added = added + u
                db.execute(
                    "INSERT INTO usage(thread_id, run_id, step, model, usage, time) VALUES (?,?,?,?,?,?)",
                    (thread_id, run_id, step, model, json.dumps(u.to_dict()), now),
                )
            cur = db.execute("SELECT usage FROM threads WHERE id=?", (thread_id,)).fetchone()
            total = Usage.from_dict(json.loads(cur[0])) + added if cur else added
            db.execute(
                "UPDATE threads SET updated=?, status=COALESCE(?, status), usage=? WHERE id=?",
                (now, thread_status, json.dumps(total.to_dict()), thread_id),
            )
            if run is not None:
                db.execute(
                    "INSERT OR REPLACE INTO runs(id, thread_id, status, input, answer, error, usage, started, finished)"
                    " VALUES (?,?,?,?,?,?,?,?,?)",
                    (run.id, run.thread_id, run.status, run.input, run.answer, run.error,
                     json.dumps(run.usage.to_dict()), run.started, run.finished),
                )
            # Keep the store small: only the newest checkpoints are needed to recover or resume.
            db.execute("DELETE FROM checkpoints WHERE thread_id=? AND seq <= ?", (thread_id, seq - 20))
        return seq

    def latest_checkpoint(self, thread_id: str, *, messages: bool = True) -> Checkpoint | None:
        """The thread's newest checkpoint; ``messages=False`` skips loading the history (panels that
        read todos, artifacts or rules need none of it)."""
        with self._lock:
            row = self._db.execute(
                "SELECT thread_id, seq, run_id, step, status, state, pending, created FROM checkpoints"
                " WHERE thread_id=? ORDER BY seq DESC LIMIT 1",
                (thread_id,),
            ).fetchone()
            if not row:
                return None
            try:
                state, pending = json.loads(row[5]), json.loads(row[6])
                count = int(state.pop(COUNT_KEY, 0))
                if not messages:
                    return Checkpoint(row[0], row[1], row[2], row[3], row[4], state, pending, row[7])
                rows = self._db.execute(
                    "SELECT message FROM messages WHERE thread_id=? AND idx<? ORDER BY idx", (thread_id, count)
                ).fetchall()
                state[MESSAGES_KEY] = [json.loads(r[0]) for r in rows]
            except (json.JSONDecodeError, ValueError) as e:
                raise StoreError(f"checkpoint {row[1]} of thread {thread_id} in {self.path} is corrupt: {e}") from None
        if len(state[MESSAGES_KEY]) != count:
            raise StoreError(f"checkpoint {row[1]} of thread {thread_id} in {self.path} is missing messages")
        return Checkpoint(row[0], row[1], row[2], row[3], row[4], state, pending, row[7])

    # -- runs --------------------------------------------------------------------------------------
    def run(self, run_id: str) -> RunRecord | None:
        with self._lock:
            row = self._db.execute(
                "SELECT id, thread_id, status, input, answer, error, usage, started, finished FROM runs WHERE id=?",
                (run_id,),
            ).fetchone()
        return _run(row) if row else None

    def runs(self, thread_id: str) -> list[RunRecord]:
        with self._lock:
            rows = self._db.execute(
                "SELECT id, thread_id, status, input, answer, error, usage, started, finished FROM runs"
                " WHERE thread_id=? ORDER BY started",
                (thread_id,),
            ).fetchall()
        return [_run(r) for r in rows]

    def save_run(self, run: RunRecord) -> None:
        with self.transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO runs(id, thread_id, status, input, answer, error, usage, started, finished)"
                " VALUES (?,?,?,?,?,?,?,?,?)",
                (run.id, run.thread_id, run.status, run.input, run.answer, run.error,
                 json.dumps(run.usage.to_dict()), run.started, run.finished),
            )
            db.execute("UPDATE threads SET status=?, updated=? WHERE id=?", (run.status, time.time(), run.thread_id))

    # -- usage (R5) ----------------------------------------------------------------------------------
    def usage_calls(self, thread_id: str, run_id: str | None = None) -> list[tuple[str, Usage]]:
        sql = "SELECT model, usage FROM usage WHERE thread_id=?"
        args: tuple[Any, ...] = (thread_id,)
        if run_id is not None:
            sql += " AND run_id=?"
            args += (run_id,)
        with self._lock:
            rows = self._db.execute(sql + " ORDER BY rowid", args).fetchall()
        return [(m, Usage.from_dict(json.loads(u))) for m, u in rows]

    def thread_usage(self, thread_id: str) -> Usage:
        info = self.thread(thread_id)
        return info.usage if info else Usage()

    # -- events (M8) ---------------------------------------------------------------------------------
    def next_event_seq(self, thread_id: str) -> int:
        """The sequence number the thread's next durable event gets."""
        with self._lock:
            row = self._db.execute("SELECT COALESCE(MAX(seq), 0) FROM events WHERE thread_id=?", (thread_id,)).fetchone()
        return int(row[0]) + 1

    def append_event(self, event: Event) -> Event:
        """Store one event now, numbering it after the thread's last (outside a run's checkpoints)."""
        with self.transaction() as db:
            row = db.execute("SELECT COALESCE(MAX(seq), 0) FROM events WHERE thread_id=?", (event.thread_id,)).fetchone()
            numbered = Event(event.type, event.thread_id, event.run_id, event.step, event.data, event.time,
                             int(row[0]) + 1)
            self._insert_events(db, [numbered])
        return numbered

    def append_events(self, events: Sequence[Event]) -> None:
        """Store events already numbered by the engine (those emitted after a run's last checkpoint)."""
        if events:
            with self.transaction() as db:
                self._insert_events(db, events)

    @staticmethod
    def _insert_events(db: sqlite3.Connection, events: Sequence[Event]) -> None:
        db.executemany(
            "INSERT OR REPLACE INTO events(thread_id, seq, type, run_id, step, time, data) VALUES (?,?,?,?,?,?,?)",
            [(e.thread_id, e.seq, e.type, e.run_id, e.step, e.time, json.dumps(e.data)) for e in events],
        )

    def events(self, thread_id: str, after_seq: int = 0, types: set[str] | None = None) -> list[Event]:
        with self._lock:
            rows = self._db.execute(
                "SELECT type, thread_id, run_id, step, data, time, seq FROM events WHERE thread_id=? AND seq>?"
                " ORDER BY seq",
                (thread_id, after_seq),
            ).fetchall()
        out = [Event.from_row(r[0], r[1], r[2], r[3], json.loads(r[4]), r[5], r[6]) for r in rows]
        return [e for e in out if types is None or e.type in types]


def _stored_count(state_json: str) -> int:
    """How many messages a stored checkpoint holds (they live in the messages table)."""
    try:
        return int(json.loads(state_json).get(COUNT_KEY, 0))
    except (json.JSONDecodeError, ValueError, AttributeError):
        return 0


def _thread(row: Any) -> ThreadInfo:
    return ThreadInfo(row[0], row[1], row[2], row[3], row[4], Usage.from_dict(json.loads(row[5] or "{}")))


def _run(row: Any) -> RunRecord:
    return RunRecord(row[0], row[1], row[2], row[3], row[4], row[5], Usage.from_dict(json.loads(row[6])), row[7], row[8])
