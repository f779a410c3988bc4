"""The thread store's reads of a long history (G13): a page of messages by key, where turns begin, the
events a late subscriber of a long thread needs, usage summed per model — each at the cost of what it
returns, however long the thread.

A mixin of ``workbench.engine.store.Store`` (one store; split along its seams to keep files short). It
also owns the ``messages.role`` column those reads use: added to stores made before it (their rows are
labelled on first need), written with every new message by ``Store.save_checkpoint``.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import zlib
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.engine.events import Event
from workbench.engine.usage import Usage
from workbench.errors import StoreError

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

#: G13: the ``messages.role`` column (added to stores made before it) and the indexes that find a long
#: thread's turns without reading its messages: where each user message is, and rows still unlabelled
#: (written by an older version: labelled on first need, ``_label_roles``).
ROLE_SCHEMA = """
CREATE INDEX IF NOT EXISTS messages_user ON messages(thread_id, idx) WHERE role = 'user';
CREATE INDEX IF NOT EXISTS messages_unlabelled ON messages(thread_id, idx) WHERE role IS NULL;
"""


class PagedReads:
    """Indexed reads of a thread's history (see the module)."""

    if TYPE_CHECKING:
        path: Path
        _db: sqlite3.Connection
        _lock: threading.RLock

        def transaction(self) -> AbstractContextManager[sqlite3.Connection]: ...

        def usage_calls(self, thread_id: str, run_id: str | None = None) -> list[tuple[str, Usage]]: ...

    def _add_role_column(self) -> None:
        """G13: stores made before ``messages.role`` get the column (NULL in their rows, labelled when a
        thread's turns are first asked for). Two processes opening one old store race to add it: the
        check runs inside an immediate transaction, so the second finds it there."""
        def has_role() -> bool:
            return any(r[1] == "role" for r in self._db.execute("PRAGMA table_info(messages)"))

        if not has_role():
            self._db.execute("BEGIN IMMEDIATE")
            try:
                if not has_role():
                    self._db.execute("ALTER TABLE messages ADD COLUMN role TEXT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
        self._db.executescript(ROLE_SCHEMA)

    def message_count(self, thread_id: str) -> int:
        """How many messages the thread has committed (its newest checkpoint's count; none read)."""
        with self._lock:
            row = self._db.execute(
                "SELECT state FROM checkpoints WHERE thread_id=? ORDER BY seq DESC LIMIT 1", (thread_id,)
            ).fetchone()
        return _stored_count(row[0]) if row else 0

    def messages(self, thread_id: str, start: int, end: int | None = None) -> list[dict[str, Any]]:
        """Committed messages ``start`` to ``end`` (exclusive; None: the last), read by their key: the
        cost is the page's, however long the thread."""
        with self._lock:
            count = self.message_count(thread_id)
            end = count if end is None else min(end, count)
            start = max(0, start)
            if start >= end:
                return []
            rows = self._db.execute(
                "SELECT message FROM messages WHERE thread_id=? AND idx>=? AND idx<? ORDER BY idx",
                (thread_id, start, end),
            ).fetchall()
        if len(rows) != end - start:
            raise StoreError(f"thread {thread_id} in {self.path} is missing messages {start}–{end - 1}")
        try:
            return [json.loads(_unpack(r[0])) for r in rows]
        except (json.JSONDecodeError, ValueError) as e:
            raise StoreError(f"a message of thread {thread_id} in {self.path} is corrupt: {e}") from None

    def turn_starts(self, thread_id: str, before: int, count: int) -> list[int]:
        """Where the thread's last ``count`` turns before message ``before`` begin (the indices of their
        user messages, oldest first), from the index on user messages."""
        with self._lock:
            self._label_roles(thread_id)
            rows = self._db.execute(
                "SELECT idx FROM messages WHERE thread_id=? AND role='user' AND idx<? ORDER BY idx DESC LIMIT ?",
                (thread_id, before, max(0, count)),
            ).fetchall()
        return sorted(r[0] for r in rows)

    def _label_roles(self, thread_id: str) -> None:
        """Fill ``role`` in the thread's rows an older version wrote without it (once: the partial index
        finds none afterwards)."""
        rows = self._db.execute(
            "SELECT idx, message FROM messages WHERE thread_id=? AND role IS NULL", (thread_id,)
        ).fetchall()
        if not rows:
            return
        labels = []
        for idx, text in rows:
            try:
                labels.append((_role(json.loads(_unpack(text))) or "", thread_id, idx))
            except (json.JSONDecodeError, ValueError, zlib.error):
                labels.append(("", thread_id, idx))  # unreadable here: reading it says so
        with self.transaction() as db:
            db.executemany("UPDATE messages SET role=? WHERE thread_id=? AND idx=? AND role IS NULL", labels)

    def recent_events(self, thread_id: str, recent: int, bulk: Collection[str]) -> list[Event]:
        """The thread's durable events for a late subscriber of a long thread: its last ``recent`` in full
        and, before them, all but the ``bulk`` types (one per model or tool call) — a thread of 10,000
        messages has ~10,000 of those, and nothing shown from its earlier runs needs them."""
        with self._lock:
            last = int(self._db.execute("SELECT COALESCE(MAX(seq), 0) FROM events WHERE thread_id=?",
                                        (thread_id,)).fetchone()[0])
            marks = ",".join("?" * len(bulk)) or "''"
            rows = self._db.execute(
                "SELECT type, thread_id, run_id, step, data, time, seq FROM events WHERE thread_id=? AND"
                f" (seq>? OR type NOT IN ({marks})) ORDER BY seq",
                (thread_id, last - max(0, recent), *bulk),
            ).fetchall()
        return [Event.from_row(r[0], r[1], r[2], r[3], json.loads(r[4]), r[5], r[6]) for r in rows]

    def usage_by_model(self, thread_id: str, run_id: str | None = None) -> dict[str, Usage]:
        """The thread's (or one run's) usage summed per model, in the order the models were first used —
        added up in SQL: a long thread has a row per model call (G13)."""
        fields = ("input_tokens", "output_tokens", "thoughts_tokens", "cached_tokens", "calls", "unpriced_calls")
        sums = ", ".join(f"SUM(COALESCE(json_extract(usage, '$.{f}'), 0))" for f in fields)
        sql = f"SELECT model, {sums}, SUM(json_extract(usage, '$.cost_usd')) FROM usage WHERE thread_id=?"
        args: tuple[Any, ...] = (thread_id,)
        if run_id is not None:
            sql += " AND run_id=?"
            args += (run_id,)
        try:
            with self._lock:
                rows = self._db.execute(sql + " GROUP BY model ORDER BY MIN(rowid)", args).fetchall()
        except sqlite3.OperationalError:  # an SQLite without JSON functions: add them up here
            out: dict[str, Usage] = {}
            for model, u in self.usage_calls(thread_id, run_id):
                out[model] = out.get(model, Usage()) + u
            return out
        return {r[0]: Usage(*(int(v or 0) for v in r[1:5]), cost_usd=r[7], calls=int(r[5] or 0),
                            unpriced_calls=int(r[6] or 0)) for r in rows}


def _role(message: Any) -> str | None:
    """A message's role for the ``role`` column (what finds turns, G13)."""
    role = message.get("role") if isinstance(message, Mapping) else None
    return role if isinstance(role, str) else None


def _stored_count(state_json: str) -> int:
    """How many messages a stored checkpoint holds (they live in the messages table)."""
    try:
        return int(json.loads(state_json).get("__message_count", 0))
    except (json.JSONDecodeError, ValueError, AttributeError):
        return 0


def _unpack(value: str | bytes) -> str:
    """A stored message or state value (``store._pack`` compresses the long ones)."""
    return zlib.decompress(value).decode("utf-8", "surrogatepass") if isinstance(value, bytes) else value


__all__ = ["ROLE_SCHEMA", "PagedReads"]
