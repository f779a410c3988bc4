"""The durable thread store: SQLite in ``<workspace>/.workbench/`` (R1, R3, R5, R7–R9, M8, F3).

WAL mode, one transaction per checkpoint: a crash loses at most the step in flight. A run claims its
thread (R7: one writer per thread, across processes); every write of a claimed run checks the claim
inside its transaction. A tool call's result is journaled the moment it finishes (R9). Events and
messages are append-only: a conflicting write fails loudly. State values are stored once per change
(F3): checkpoints reference them by content hash.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import threading
import time
import uuid
import zlib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.engine.events import Event
from workbench.engine.frozen import FrozenDict, FrozenList
from workbench.engine.store_claims import (  # noqa: F401 - Claim and the limits are this module's names too
    HEARTBEAT_EVERY,
    PID_REUSE_SLACK,
    STALE_AFTER,
    Claim,
    ClaimRows,
    _pid_alive,
    _started_after,
)
from workbench.engine.store_integrity import FileGuard, connect
from workbench.engine.store_pages import PagedReads, _role, _stored_count, _unpack
from workbench.engine.usage import Usage
from workbench.engine.wal_checkpointer import CHECKPOINTER
from workbench.engine.wal_checkpointer import EVERY_COMMITS as WAL_EVERY_COMMITS
from workbench.errors import StoreError

log = logging.getLogger(__name__)

MESSAGES_KEY = "messages"
COUNT_KEY = "__message_count"
REFS_KEY = "__refs"  # a checkpoint's non-message state: {key: content hash} into state_values (F3)


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
CREATE TABLE IF NOT EXISTS claims (
    thread_id TEXT PRIMARY KEY, token TEXT NOT NULL, pid INTEGER NOT NULL, host TEXT NOT NULL,
    since REAL NOT NULL, heartbeat REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS journal (
    thread_id TEXT NOT NULL, run_id TEXT NOT NULL, step INTEGER NOT NULL, call_id TEXT NOT NULL,
    status TEXT NOT NULL, content TEXT NOT NULL DEFAULT '', state TEXT NOT NULL DEFAULT '{}',
    time REAL NOT NULL, PRIMARY KEY (thread_id, run_id, step, call_id)
);
CREATE TABLE IF NOT EXISTS state_values (
    thread_id TEXT NOT NULL, hash TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (thread_id, hash)
);
CREATE INDEX IF NOT EXISTS events_type ON events(thread_id, type, seq);
CREATE TABLE IF NOT EXISTS command_line_models (
    thread_id TEXT PRIMARY KEY, model TEXT, api_base TEXT, since REAL NOT NULL, seal TEXT NOT NULL
);
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


@dataclass
class _Written:
    """What a claimed run's store wrote last for its thread (valid only under that claim)."""

    token: str
    seq: int
    count: int
    hashes: dict[str, str]
    last_event: int | None
    journal: bool = False


@dataclass(frozen=True)
class JournalEntry:
    """R9: one tool call of a step in flight: ``started`` (never finished) or its outcome."""

    call_id: str
    status: str
    content: str
    state: dict[str, Any]  # the non-message state when it finished (what its writes made it)


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


class Store(PagedReads, FileGuard, ClaimRows):
    """One SQLite file per workspace. Safe to use from several threads (one connection, one lock).

    R1: a commit is refused when the file at the path is no longer the one opened (``rm -rf .workbench``
    mid-run): the database is saved, put back at the path when nothing took its place (store_integrity)."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = connect(self.path)
            self._remember_file()
            self._db.executescript(SCHEMA)
            self._add_role_column()
        except sqlite3.DatabaseError as e:
            raise StoreError(f"cannot open the thread store {self.path}: {e}") from None
        self._lock = threading.RLock()
        # Threads with a run in flight through any Engine on this store object (this process).
        self.active_threads: set[str] = set()
        self._cache: dict[str, _Written] = {}  # per claimed thread: what this store wrote last
        self._values_memo: dict[str, tuple[Any, tuple[str, str]]] = {}  # see _state_values
        self._register_wal()
        self._commits = 0

    @classmethod
    def for_workspace(cls, workspace: Path | str) -> Store:
        return cls(Path(workspace) / ".workbench" / "threads.sqlite3")

    def close(self) -> None:
        self._wal_release.detach()
        CHECKPOINTER.release(self._wal)
        with self._lock:
            self._db.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            if self._lost is not None:  # R1: its file went and was not put back: nothing more is written
                raise self._lost.again()
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException as e:
                if isinstance(e, sqlite3.DatabaseError):  # a damaged page, a full disk: name the file
                    e.add_note(f"the thread store {self.path}")
                try:
                    self._db.execute("ROLLBACK")
                except sqlite3.DatabaseError:
                    pass  # a failed write (disk full) may have ended the transaction itself
                raise
            else:
                if self._file_moved():  # R1: never commit into a file no one can open again
                    self._db.execute("ROLLBACK")
                    raise self._rescue()
                self._db.execute("COMMIT")
                self._commits += 1
                if self._commits % WAL_EVERY_COMMITS == 0:
                    CHECKPOINTER.request(self._wal)

    def _check_claim(self, db: sqlite3.Connection, thread_id: str, token: str | None, *,
                     failing: bool = False) -> None:
        self._refuse_lost(token, failing)  # R1: a run in flight when the file went ends failed
        super()._check_claim(db, thread_id, token)

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
        """The thread; its status is ``running`` only while a live process holds it (R9)."""
        with self._lock:
            row = self._db.execute(
                "SELECT id, title, created, updated, status, usage FROM threads WHERE id=?", (thread_id,)
            ).fetchone()
            claims = self._claims((thread_id,)) if row else {}
        return _thread(row, claims) if row else None

    def threads(self) -> list[ThreadInfo]:
        with self._lock:
            rows = self._db.execute(
                "SELECT id, title, created, updated, status, usage FROM threads ORDER BY updated DESC, rowid DESC"
            ).fetchall()
            claims = self._claims(None)
        return [_thread(r, claims) for r in rows]

    def rename_thread(self, thread_id: str, title: str) -> None:
        with self.transaction() as db:
            db.execute("UPDATE threads SET title=? WHERE id=?", (title, thread_id))

    def delete_thread(self, thread_id: str) -> None:
        with self.transaction() as db:
            for table in ("checkpoints", "messages", "runs", "events", "usage", "claims", "journal", "state_values",
                          "command_line_models"):
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
        claim: str | None = None,
    ) -> int:
        """Write state, pending questions, this step's usage rows, events and the run record in ONE transaction (R1, R8).

        Messages are append-only, so only those past the previous checkpoint's count are written: the
        cost of a checkpoint does not grow with the history. Each state key's JSON is stored once per
        distinct value (F3). With ``claim`` (a run's claim token) the write is refused unless the run
        still holds the thread (R7). The step's tool journal is cleared: its results are in the messages.
        """
        now = time.time()
        messages = state.get(MESSAGES_KEY, [])
        values = _state_values(state, self._values_memo)
        refs = {k: h for k, (h, _) in values.items()}
        state_json = json.dumps({REFS_KEY: refs, COUNT_KEY: len(messages)}, ensure_ascii=False)
        # While a run holds the claim it is the thread's only writer, so what this store wrote last is
        # what is stored: the cache spares the reads (a checkpoint per model call and per step, R9).
        cache = self._cache.get(thread_id) if claim is not None else None
        if cache is not None and cache.token != claim:
            cache = None
        self._cache.pop(thread_id, None)  # re-set only once this transaction committed
        with self.transaction() as db:
            self._check_claim(db, thread_id, claim, failing=run is not None and run.status == "failed")
            if cache is not None:
                seq, known = cache.seq + 1, cache.count
            else:
                row = db.execute(
                    "SELECT seq, state FROM checkpoints WHERE thread_id=? ORDER BY seq DESC LIMIT 1", (thread_id,)
                ).fetchone()
                seq = int(row[0]) + 1 if row else 1
                known = _stored_count(row[1]) if row else 0
            if len(messages) < known:
                raise StoreError(f"thread {thread_id} in {self.path}: a checkpoint would drop committed messages "
                                 f"({len(messages)} < {known}); messages are append-only")
            self._insert(db, "messages", thread_id,
                         [(thread_id, i, _pack(json.dumps(messages[i], ensure_ascii=False)), _role(messages[i]))
                          for i in range(known, len(messages))])
            self._insert_values(db, thread_id, {k: v for k, v in values.items()
                                                if cache is None or cache.hashes.get(k) != v[0]})
            self._insert_events(db, events, check=True, last=cache.last_event if cache is not None else None)
            if cache is None or cache.journal:
                db.execute("DELETE FROM journal WHERE thread_id=?", (thread_id,))
            db.execute(
                "INSERT INTO checkpoints(thread_id, seq, run_id, step, status, state, pending, created)"
                " VALUES (?,?,?,?,?,?,?,?)",
                (thread_id, seq, run_id, step, status, state_json, json.dumps(pending) if pending else "{}", now),
            )
            if calls:
                total = self._add_usage_rows(db, thread_id, run_id, step, calls, now)
                db.execute(
                    "UPDATE threads SET updated=?, status=COALESCE(?, status), usage=? WHERE id=?",
                    (now, thread_status, json.dumps(total.to_dict()), thread_id),
                )
            else:
                db.execute("UPDATE threads SET updated=?, status=COALESCE(?, status) WHERE id=?",
                           (now, thread_status, thread_id))
            if run is not None:
                db.execute(
                    "INSERT OR REPLACE INTO runs(id, thread_id, status, input, answer, error, usage, started, finished)"
                    " VALUES (?,?,?,?,?,?,?,?,?)",
                    (run.id, run.thread_id, run.status, run.input, run.answer, run.error,
                     json.dumps(run.usage.to_dict()), run.started, run.finished),
                )
            # Keep the store small: only the newest checkpoints are needed to recover or resume.
            if seq % 10 == 0:
                db.execute("DELETE FROM checkpoints WHERE thread_id=? AND seq <= ?", (thread_id, seq - 20))
                self._collect_values(db, thread_id)
        if claim is not None:
            self._cache[thread_id] = _Written(claim, seq, len(messages), refs,
                                              events[-1].seq if events else (cache.last_event if cache else None))
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
                if REFS_KEY in state:
                    state = self._load_values(thread_id, state[REFS_KEY], f"checkpoint {row[1]}")
                if not messages:
                    return Checkpoint(row[0], row[1], row[2], row[3], row[4], state, pending, row[7])
                rows = self._db.execute(
                    "SELECT message FROM messages WHERE thread_id=? AND idx<? ORDER BY idx", (thread_id, count)
                ).fetchall()
                state[MESSAGES_KEY] = [json.loads(_unpack(r[0])) for r in rows]
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

    def runs(self, thread_id: str, *, status: str | None = None) -> list[RunRecord]:
        """The thread's runs, oldest first; with ``status`` only those (chosen in SQL: the start of every
        turn asks for the ``running`` ones of a thread that may hold thousands)."""
        sql = "SELECT id, thread_id, status, input, answer, error, usage, started, finished FROM runs WHERE thread_id=?"
        args: tuple[Any, ...] = (thread_id,)
        if status is not None:
            sql += " AND status=?"
            args += (status,)
        with self._lock:
            rows = self._db.execute(sql + " ORDER BY started", args).fetchall()
        return [_run(r) for r in rows]

    # -- the model a command line chose (R2) ------------------------------------------------------------
    # A table of its own, not columns of ``runs``: it needs no migration (made where missing by SCHEMA)
    # and the engine's ``INSERT OR REPLACE`` of a run row cannot blank it. The engine never reads it.
    def save_command_line_model(self, thread_id: str, model: str | None, api_base: str | None, since: float,
                                seal: str) -> None:
        """R2: the model and API base ``workbench run`` was given (flags) for the thread's run started after
        ``since`` — none given: forgotten — so ``workbench resume`` continues the run with them. ``seal``
        is the caller's mark that the choice was made on this account (seal.py): the store can come with
        the folder."""
        with self.transaction() as db:
            if model is None and api_base is None:
                db.execute("DELETE FROM command_line_models WHERE thread_id=?", (thread_id,))
            else:
                db.execute("INSERT OR REPLACE INTO command_line_models(thread_id, model, api_base, since, seal) "
                           "VALUES (?, ?, ?, ?, ?)", (thread_id, model, api_base, since, seal))

    def command_line_model(self, thread_id: str) -> tuple[str | None, str | None, float, str] | None:
        """What ``save_command_line_model`` kept for the thread: (model, api_base, since, seal), or None."""
        with self._lock:
            row = self._db.execute("SELECT model, api_base, since, seal FROM command_line_models WHERE thread_id=?",
                                   (thread_id,)).fetchone()
        return (row[0], row[1], float(row[2]), str(row[3])) if row else None

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
    def add_usage(self, thread_id: str, model: str, usage: Usage) -> Usage:
        """A model call made for a thread outside any run ("Compact now"'s summary): its usage row and
        the thread's total, in one transaction. Returns the thread's new total."""
        with self.transaction() as db:
            if db.execute("SELECT 1 FROM threads WHERE id=?", (thread_id,)).fetchone() is None:
                raise StoreError(f"no thread {thread_id} in {self.path}")
            total = self._add_usage_rows(db, thread_id, "", 0, [(model, usage)], time.time())
            db.execute("UPDATE threads SET usage=? WHERE id=?", (json.dumps(total.to_dict()), thread_id))
        return total

    @staticmethod
    def _add_usage_rows(db: sqlite3.Connection, thread_id: str, run_id: str, step: int,
                        calls: Sequence[tuple[str, Usage]], now: float) -> Usage:
        """Insert the calls' usage rows (R5); the thread's total with them added, for its row."""
        db.executemany("INSERT INTO usage(thread_id, run_id, step, model, usage, time) VALUES (?,?,?,?,?,?)",
                       [(thread_id, run_id, step, model, json.dumps(u.to_dict()), now) for model, u in calls])
        added = Usage.total(u for _, u in calls)
        cur = db.execute("SELECT usage FROM threads WHERE id=?", (thread_id,)).fetchone()
        return Usage.from_dict(json.loads(cur[0])) + added if cur else added

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

    def append_events(self, events: Sequence[Event], *, claim: str | None = None) -> None:
        """Store events already numbered by the engine (those emitted after a run's last checkpoint)."""
        if events:
            with self.transaction() as db:
                self._check_claim(db, events[0].thread_id, claim)
                self._insert_events(db, events)

    def _insert_events(self, db: sqlite3.Connection, events: Sequence[Event], *, check: bool = False,
                       last: int | None = None) -> None:
        """Append events; a number already taken fails loudly (R7). ``check``: the run's numbers must
        continue the thread's stored sequence, verified inside the transaction (R8); ``last``: that
        sequence's end as this store wrote it (while it holds the claim, no one else writes)."""
        if not events:
            return
        if check and last is not None and len({e.thread_id for e in events}) == 1:
            if events[0].seq <= last:
                raise StoreError(f"event {events[0].seq} of thread {events[0].thread_id} in {self.path} is already "
                                 f"stored (the thread's last is {last}): another writer added events to this thread")
        elif check:
            by_thread: dict[str, int] = {}
            for e in events:
                by_thread.setdefault(e.thread_id, e.seq)
            for tid, first in by_thread.items():
                last = int(db.execute("SELECT COALESCE(MAX(seq), 0) FROM events WHERE thread_id=?", (tid,)).fetchone()[0])
                if first <= last:
                    raise StoreError(f"event {first} of thread {tid} in {self.path} is already stored (the thread's "
                                     f"last is {last}): another writer added events to this thread")
        self._insert(db, "events", events[0].thread_id,
                     [(e.thread_id, e.seq, e.type, e.run_id, e.step, e.time, json.dumps(e.data)) for e in events])

    def _insert(self, db: sqlite3.Connection, table: str, thread_id: str, rows: list[tuple[Any, ...]]) -> None:
        """Append rows to an append-only table (events, messages): never overwrite one (R7)."""
        if not rows:
            return
        marks = ",".join("?" * len(rows[0]))
        columns = {"events": "thread_id, seq, type, run_id, step, time, data",
                   "messages": "thread_id, idx, message, role"}
        try:
            db.executemany(f"INSERT INTO {table}({columns[table]}) VALUES ({marks})", rows)
        except sqlite3.IntegrityError as e:
            raise StoreError(f"{table} of thread {thread_id} in {self.path}: a row with the same number is already "
                             f"stored ({e}); another process wrote this thread — nothing was overwritten") from None

    # -- state values, once per change (F3) ----------------------------------------------------------
    @staticmethod
    def _insert_values(db: sqlite3.Connection, thread_id: str, values: Mapping[str, tuple[str, str]]) -> None:
        if not values:  # the usual step: no state key changed
            return
        db.executemany(
            "INSERT OR IGNORE INTO state_values(thread_id, hash, value) VALUES (?,?,?)",
            [(thread_id, h, _pack(text)) for h, text in values.values()],
        )

    def _load_values(self, thread_id: str, refs: Mapping[str, str], what: str) -> dict[str, Any]:
        if not refs:
            return {}
        wanted = sorted(set(refs.values()))
        found: dict[str, str] = {}
        for i in range(0, len(wanted), 500):
            chunk = wanted[i:i + 500]
            found.update(self._db.execute(
                f"SELECT hash, value FROM state_values WHERE thread_id=? AND hash IN ({','.join('?' * len(chunk))})",
                (thread_id, *chunk),
            ).fetchall())
        missing = [k for k, h in refs.items() if h not in found]
        if missing:
            raise StoreError(f"{what} of thread {thread_id} in {self.path} is missing state values: {', '.join(missing)}")
        return {k: json.loads(_unpack(found[h])) for k, h in refs.items()}

    @staticmethod
    def _collect_values(db: sqlite3.Connection, thread_id: str) -> None:
        """Drop the state values no kept checkpoint nor journal entry references."""
        used: set[str] = set()
        for (text,) in db.execute("SELECT state FROM checkpoints WHERE thread_id=?", (thread_id,)):
            used.update((json.loads(text).get(REFS_KEY) or {}).values())
        for (text,) in db.execute("SELECT state FROM journal WHERE thread_id=?", (thread_id,)):
            used.update(json.loads(text).values())
        stale = [(thread_id, h) for (h,) in db.execute("SELECT hash FROM state_values WHERE thread_id=?", (thread_id,))
                 if h not in used]
        db.executemany("DELETE FROM state_values WHERE thread_id=? AND hash=?", stale)

    # -- the tool journal (R9) ------------------------------------------------------------------------
    def journal_start(self, thread_id: str, run_id: str, step: int, call_id: str, *, claim: str | None = None) -> None:
        """Mark a call that changes things outside as started: if the process dies before it finishes,
        recovery does not run it again (its effect is unknown)."""
        cache = self._cache.get(thread_id)
        if cache is not None:
            cache.journal = True
        with self.transaction() as db:
            self._check_claim(db, thread_id, claim)
            db.execute("INSERT OR IGNORE INTO journal(thread_id, run_id, step, call_id, status, time) VALUES (?,?,?,?,?,?)",
                       (thread_id, run_id, step, call_id, "started", time.time()))

    def journal_finish(self, thread_id: str, run_id: str, step: int, call_id: str, status: str, content: str,
                       state: Mapping[str, Any], *, events: Sequence[Event] = (), claim: str | None = None) -> None:
        """Journal a finished call with the state its writes left and the events so far, in one transaction."""
        values = _state_values(state, self._values_memo)
        refs = json.dumps({k: h for k, (h, _) in values.items()})
        cache = self._cache.get(thread_id) if claim is not None else None
        if cache is not None and cache.token != claim:
            cache = None
        with self.transaction() as db:
            self._check_claim(db, thread_id, claim)
            self._insert_values(db, thread_id, {k: v for k, v in values.items()
                                                if cache is None or cache.hashes.get(k) != v[0]})
            self._insert_events(db, events, check=True, last=cache.last_event if cache is not None else None)
            db.execute(
                "INSERT INTO journal(thread_id, run_id, step, call_id, status, content, state, time) VALUES (?,?,?,?,?,?,?,?)"
                " ON CONFLICT(thread_id, run_id, step, call_id) DO UPDATE SET status=excluded.status,"
                " content=excluded.content, state=excluded.state, time=excluded.time",
                (thread_id, run_id, step, call_id, status, content, refs, time.time()),
            )
        if cache is not None:
            cache.journal = True
            cache.hashes.update({k: h for k, (h, _) in values.items()})
            if events:
                cache.last_event = events[-1].seq

    def journal(self, thread_id: str, run_id: str, step: int) -> list[JournalEntry]:
        """The calls of a step in flight, in the order they were journaled."""
        with self._lock:
            rows = self._db.execute(
                "SELECT call_id, status, content, state FROM journal WHERE thread_id=? AND run_id=? AND step=? ORDER BY rowid",
                (thread_id, run_id, step),
            ).fetchall()
            return [JournalEntry(cid, status, content,
                                 self._load_values(thread_id, json.loads(refs), f"the journal of call {cid}"))
                    for cid, status, content, refs in rows]

    def events(self, thread_id: str, after_seq: int = 0, types: Collection[str] | None = None) -> list[Event]:
        """The thread's durable events after ``after_seq``, of ``types`` only when given (chosen in SQL, on
        an index: the panels that want one type of a long thread's log parse none of the rest)."""
        sql = "SELECT type, thread_id, run_id, step, data, time, seq FROM events WHERE thread_id=? AND seq>?"
        args: tuple[Any, ...] = (thread_id, after_seq)
        if types is not None:
            wanted = sorted(set(types))
            if not wanted:
                return []
            sql += f" AND type IN ({','.join('?' * len(wanted))})"
            args += tuple(wanted)
        with self._lock:
            rows = self._db.execute(sql + " ORDER BY seq", args).fetchall()
        return [Event.from_row(r[0], r[1], r[2], r[3], json.loads(r[4]), r[5], r[6]) for r in rows]


PACK_OVER = 32 * 1024
"""Message and state-value JSON longer than this is stored zlib-compressed (a BLOB): a big file read or
written by a tool stays a fraction of its size in the store, and small rows (nearly all) stay text."""


def _pack(text: str) -> str | bytes:
    if len(text) <= PACK_OVER:
        return text
    return zlib.compress(text.encode("utf-8", "surrogatepass"), 1)  # level 1: ~100+ MB/s, most of the gain


def _state_values(state: Mapping[str, Any], memo: dict[str, tuple[Any, tuple[str, str]]]) -> dict[str, tuple[str, str]]:
    """Each non-message state key's (content hash, JSON): a value is stored once however often a
    checkpoint references it (F3).

    A step checkpoints twice and journals every tool call, mostly with the same values: ``memo`` keeps
    each key's last frozen value with its JSON and hash, so an unchanged value is not serialised and
    hashed again (a 2 MB /scratch file cost ~9 ms each time). Only frozen values are remembered: they
    never change in place (M3), so the same object means the same JSON.
    """
    out: dict[str, tuple[str, str]] = {}
    kept: dict[str, tuple[Any, tuple[str, str]]] = {}
    for key, value in state.items():
        if key == MESSAGES_KEY:
            continue
        hit = memo.get(key)
        if hit is not None and hit[0] is value:
            out[key] = hit[1]
            kept[key] = hit
            continue
        text = json.dumps(value, ensure_ascii=False)
        out[key] = (hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest(), text)
        if type(value) is FrozenDict or type(value) is FrozenList:
            kept[key] = (value, out[key])
    memo.clear()  # only the current values: the memo never outgrows one state
    memo.update(kept)
    return out


def _thread(row: Any, claims: Mapping[str, Claim]) -> ThreadInfo:
    """R9: ``running`` only while a live process holds the thread; a run whose process died reads ``failed``."""
    status = row[4]
    if row[0] in claims:
        status = "running"
    elif status == "running":
        status = "failed"
    return ThreadInfo(row[0], row[1], row[2], row[3], status, Usage.from_dict(json.loads(row[5] or "{}")))


def _run(row: Any) -> RunRecord:
    return RunRecord(row[0], row[1], row[2], row[3], row[4], row[5], Usage.from_dict(json.loads(row[6])), row[7], row[8])
