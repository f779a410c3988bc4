"""Sub-agent tasks in the thread store (D5, D7, D11): one row per task, beside the threads.

A task is a sub-agent's run on its own *child thread* of the same store, launched by a tool call of a
*parent thread*. The row holds what the engine knows of it — agent, status, usage, the outcome text once
settled, whether the parent was told — so a restarted app can pick results up by id (D5), and status
never comes from model text (D7). Everything that reads or writes tasks goes through ``TaskStore``: a
runner on another engine with a shared store implements the same few methods (D11).

Statuses: ``queued`` (behind ``max_concurrent``), ``pending`` (running), ``awaiting_decision`` (its run
waits for the person), and the settled ones ``completed``, ``failed``, ``aborted``, ``expired``.
``unknown`` is what a lookup of an id that is not there reports.

A settled row keeps its ending (D7): ``update_unsettled`` changes a row only while it has not settled, so
a late result (a driver that did not see an abort, a cut run unwinding) never turns ``aborted`` into
``completed``. A stop asked from a process that does not drive the task is recorded on its row
(``request_stop``, the ``stop_requested`` time); the process that drives it reads ``stop_requests``
while it runs and stops the run (D10, see harness/task_runner.py). ``settle_cut_off`` ends the
foreground tasks whose parent's delegation call was cut off by its process's end (D5, R9).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from workbench.engine.store import Store
from workbench.engine.usage import Usage

SETTLED = frozenset({"completed", "failed", "aborted", "expired"})
ACTIVE = frozenset({"queued", "pending", "awaiting_decision"})

SCHEMA = """
CREATE TABLE IF NOT EXISTS tasks (
    id TEXT PRIMARY KEY, parent_thread TEXT NOT NULL, parent_run TEXT NOT NULL, call_id TEXT NOT NULL,
    agent TEXT NOT NULL, child_thread TEXT NOT NULL, description TEXT NOT NULL, background INTEGER NOT NULL,
    status TEXT NOT NULL, created REAL NOT NULL, started REAL, settled REAL, usage TEXT NOT NULL DEFAULT '{}',
    outcome TEXT NOT NULL DEFAULT '', error TEXT, notified INTEGER NOT NULL DEFAULT 0,
    envelope TEXT NOT NULL DEFAULT '{}', last_tool TEXT NOT NULL DEFAULT '', depth INTEGER NOT NULL DEFAULT 1,
    prompt TEXT NOT NULL DEFAULT '', owner TEXT NOT NULL DEFAULT '', stop_requested REAL, parent_step INTEGER
);
CREATE INDEX IF NOT EXISTS tasks_parent ON tasks(parent_thread);
CREATE INDEX IF NOT EXISTS tasks_child ON tasks(child_thread);
"""

_COLUMNS = ("id, parent_thread, parent_run, call_id, agent, child_thread, description, background, status, "
            "created, started, settled, usage, outcome, error, notified, envelope, last_tool, depth, prompt, owner, "
            "stop_requested, parent_step")
_UNSETTLED = "status NOT IN ('completed', 'failed', 'aborted', 'expired')"  # not SETTLED, in SQL


@dataclass(frozen=True)
class TaskRecord:
    """One sub-agent task as the store has it (no content but its outcome text)."""

    id: str  # "<agent>:<8 hex>"
    parent_thread: str
    parent_run: str
    call_id: str  # the delegation call that launched it (ids are the provider's: not unique, see parent_step)
    agent: str
    child_thread: str
    description: str  # the first line of the task, shortened (the board's "short description")
    background: bool
    status: str
    created: float
    started: float | None = None
    settled: float | None = None
    usage: Usage = field(default_factory=Usage)
    outcome: str = ""  # the sub-agent's answer once settled (or what stopped it)
    error: str | None = None
    notified: bool = False  # the parent's model has been told of its settling (D7: once)
    envelope: dict[str, Any] = field(default_factory=dict)  # the budget limits it runs under (D8)
    last_tool: str = ""
    depth: int = 1
    prompt: str = ""  # what the sub-agent was asked (so a task queued at a crash can start after it)
    owner: str = ""  # the process driving it: "host pid since" (a live owner's tasks are never recovered)
    stop_requested: float | None = None  # when a stop was asked from a process that does not drive it (D10)
    #: The parent run's step whose call launched it: with ``parent_run`` and ``call_id`` what identifies
    #: that call (R10: providers reuse ids such as ``call_0`` in every message). None: a row made before.
    parent_step: int | None = None

    @property
    def settled_status(self) -> bool:
        return self.status in SETTLED

    def elapsed(self, now: float | None = None) -> float:
        start = self.started or self.created
        end = self.settled if self.settled is not None else (now or time.time())
        return max(0.0, end - start)

    def to_dict(self) -> dict[str, Any]:
        """The task as the model and ``--json`` see it (no outcome text: that goes in results)."""
        return {"task_id": self.id, "agent": self.agent, "status": self.status, "description": self.description,
                "elapsed_seconds": round(self.elapsed(), 1), "usage": self.usage.to_dict(),
                "thread": self.child_thread}


class TaskStore(Protocol):
    """What a task runner needs of a store (D11): a shared store (Postgres) implements these."""

    #: The thread store the child threads live in (their runs, checkpoints, usage and claims, R7).
    store: Store

    def create_task(self, *, parent_thread: str, parent_run: str, call_id: str, agent: str, child_thread: str,
                    description: str, background: bool, status: str, envelope: dict[str, Any],
                    depth: int, prompt: str, parent_step: int | None = None) -> TaskRecord: ...

    def task(self, task_id: str) -> TaskRecord | None: ...

    def task_for_call(self, parent_thread: str, call_id: str, *, run_id: str | None = None,
                      step: int | None = None) -> TaskRecord | None:
        """The task this very call launched: same id, and (given) same run and step (R10, see the class)."""

    def tasks(self, parent_thread: str | None = None) -> list[TaskRecord]: ...

    def update_task(self, task_id: str, **changes: Any) -> TaskRecord | None: ...

    def update_unsettled(self, task_id: str, **changes: Any) -> bool:
        """Change the task only while it has not settled (one conditional write); True when it did."""

    def take_task(self, task_id: str, owner: str, *, expected: str) -> bool:
        """Make ``owner`` the unsettled task's owner only while its owner is still ``expected`` (one
        compare-and-set): of two processes recovering one task, one drives it (R7, D5). True when it did."""

    def request_stop(self, task_id: str) -> TaskRecord | None:
        """Record that the task should stop (asked where it is not driven); its driver honours it."""

    def stop_requests(self, task_ids: Sequence[str]) -> set[str]:
        """Those of these unsettled tasks whose stop was requested."""

    def child_threads(self) -> set[str]: ...

    def task_of_thread(self, child_thread: str) -> TaskRecord | None: ...

    def delete_for_thread(self, thread_id: str) -> list[str]: ...


class SqliteTaskStore:
    """``TaskStore`` over the workspace's SQLite thread store (its own table, the store's lock)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        with store._lock:  # executescript commits; run it outside an explicit transaction
            store._db.executescript(SCHEMA)
            columns = {r[1] for r in store._db.execute("PRAGMA table_info(tasks)")}
            if "owner" not in columns:  # a store made before tasks had owners
                store._db.execute("ALTER TABLE tasks ADD COLUMN owner TEXT NOT NULL DEFAULT ''")
            if "stop_requested" not in columns:  # a store made before stops could be asked across processes
                store._db.execute("ALTER TABLE tasks ADD COLUMN stop_requested REAL")
            if "parent_step" not in columns:  # a store made before calls were told apart by their step
                store._db.execute("ALTER TABLE tasks ADD COLUMN parent_step INTEGER")

    def create_task(self, *, parent_thread: str, parent_run: str, call_id: str, agent: str, child_thread: str,
                    description: str, background: bool, status: str, envelope: dict[str, Any],
                    depth: int, prompt: str, parent_step: int | None = None) -> TaskRecord:
        task_id = f"{agent}:{uuid.uuid4().hex[:8]}"
        now = time.time()
        with self.store.transaction() as db:
            db.execute(
                f"INSERT INTO tasks({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (task_id, parent_thread, parent_run, call_id, agent, child_thread, description, int(background),
                 status, now, now if status == "pending" else None, None, "{}", "", None, 0,
                 json.dumps(envelope), "", depth, prompt, "", None, parent_step),
            )
        record = self.task(task_id)
        assert record is not None
        return record

    def task(self, task_id: str) -> TaskRecord | None:
        with self.store._lock:
            row = self.store._db.execute(f"SELECT {_COLUMNS} FROM tasks WHERE id=?", (task_id,)).fetchone()
        return _record(row) if row else None

    def task_for_call(self, parent_thread: str, call_id: str, *, run_id: str | None = None,
                      step: int | None = None) -> TaskRecord | None:
        """The task the delegation call ``call_id`` launched, if it did (D5, R9: a resumed or recovered
        step's call finds its task and never launches a second one). Providers reuse call ids (R10: ``call_0``
        in every message), so with ``run_id`` and ``step`` a row matches only when it was launched by the
        same run's same step — a later call that reuses the id is a new call. A row from before steps were
        recorded (``parent_step`` NULL) matches on its run alone."""
        where, params = "parent_thread=? AND call_id=?", [parent_thread, call_id]
        if run_id is not None:
            where += " AND parent_run=?"
            params.append(run_id)
            if step is not None:
                where += " AND (parent_step=? OR parent_step IS NULL)"
                params.append(step)
        with self.store._lock:
            row = self.store._db.execute(
                f"SELECT {_COLUMNS} FROM tasks WHERE {where} ORDER BY created DESC LIMIT 1", params).fetchone()
        return _record(row) if row else None

    def tasks(self, parent_thread: str | None = None) -> list[TaskRecord]:
        with self.store._lock:
            if parent_thread is None:
                rows = self.store._db.execute(f"SELECT {_COLUMNS} FROM tasks ORDER BY created").fetchall()
            else:
                rows = self.store._db.execute(f"SELECT {_COLUMNS} FROM tasks WHERE parent_thread=? ORDER BY created",
                                              (parent_thread,)).fetchall()
        return [_record(r) for r in rows]

    def task_of_thread(self, child_thread: str) -> TaskRecord | None:
        """The task whose sub-agent runs on ``child_thread`` (None for a thread of the person's)."""
        with self.store._lock:
            row = self.store._db.execute(f"SELECT {_COLUMNS} FROM tasks WHERE child_thread=? ORDER BY created DESC "
                                         "LIMIT 1", (child_thread,)).fetchone()
        return _record(row) if row else None

    def update_task(self, task_id: str, **changes: Any) -> TaskRecord | None:
        if changes:
            sets, values = _sets(changes)
            with self.store.transaction() as db:
                db.execute(f"UPDATE tasks SET {sets} WHERE id=?", (*values, task_id))
        return self.task(task_id)

    def update_unsettled(self, task_id: str, **changes: Any) -> bool:
        """D7: change the task only while it has not settled — a settled row keeps its ending (an abort is
        never turned into ``completed`` by a result that comes after it). True when the row changed."""
        sets, values = _sets(changes)
        with self.store.transaction() as db:
            return bool(db.execute(f"UPDATE tasks SET {sets} WHERE id=? AND {_UNSETTLED}",
                                   (*values, task_id)).rowcount == 1)

    def take_task(self, task_id: str, owner: str, *, expected: str) -> bool:
        """R7, D5: become the task's owner only if no one took it since its row was read (``expected``, the
        owner read then) and it has not settled. Two processes recovering the same task both read the
        dead owner; the first write wins, the second changes nothing and leaves the task to the first."""
        with self.store.transaction() as db:
            return db.execute(f"UPDATE tasks SET owner=? WHERE id=? AND owner IS ? AND {_UNSETTLED}",
                              (owner, task_id, expected)).rowcount == 1

    def request_stop(self, task_id: str) -> TaskRecord | None:
        """D10: ask the process that drives the task to stop it (kept on the row: the first ask's time)."""
        with self.store.transaction() as db:
            db.execute(f"UPDATE tasks SET stop_requested=COALESCE(stop_requested, ?) WHERE id=? AND {_UNSETTLED}",
                       (time.time(), task_id))
        return self.task(task_id)

    def stop_requests(self, task_ids: Sequence[str]) -> set[str]:
        """Those of these unsettled tasks whose stop was requested (one read for all of a runner's tasks)."""
        ids = list(dict.fromkeys(task_ids))
        if not ids:
            return set()
        with self.store._lock:
            rows = self.store._db.execute(
                f"SELECT id FROM tasks WHERE stop_requested IS NOT NULL AND {_UNSETTLED} "
                f"AND id IN ({','.join('?' * len(ids))})", ids).fetchall()
        return {r[0] for r in rows}

    def child_threads(self) -> set[str]:
        with self.store._lock:
            rows = self.store._db.execute("SELECT child_thread FROM tasks").fetchall()
        return {r[0] for r in rows}

    def delete_for_thread(self, thread_id: str) -> list[str]:
        """Forget the tasks a deleted thread launched; returns their child threads (to delete too)."""
        children = [t.child_thread for t in self.tasks(thread_id)]
        with self.store.transaction() as db:
            db.execute("DELETE FROM tasks WHERE parent_thread=? OR child_thread=?", (thread_id, thread_id))
        return children


_UPDATABLE = frozenset({"status", "started", "settled", "usage", "outcome", "error", "notified", "envelope",
                        "last_tool", "parent_run", "owner", "stop_requested"})

#: Why a foreground task ends when the process that drove it (its parent's run) died mid-call.
CUT_OFF_TASK = ("the process running it ended before it finished (its parent's delegation call was cut off: "
                "a kill, crash or power loss)")


def _sets(changes: dict[str, Any]) -> tuple[str, list[Any]]:
    if not changes:
        raise ValueError("no task field to change")
    sets, values = [], []
    for key, value in changes.items():
        if key not in _UPDATABLE:
            raise ValueError(f"task field {key!r} cannot be changed")
        if key == "usage":
            value = json.dumps(value.to_dict() if isinstance(value, Usage) else dict(value))
        elif key == "envelope":
            value = json.dumps(value)
        elif key == "notified":
            value = int(bool(value))
        sets.append(f"{key}=?")
        values.append(value)
    return ", ".join(sets), values


def task_spend(tasks: TaskStore, task: TaskRecord) -> Usage:
    """B4, D8: everything a task has spent: its sub-agent's thread's usage and, through the task table, that
    of every task that sub-agent launched in turn (``max_depth`` > 1), however deep. Each model call is in
    exactly one thread's usage, so each counts once — what a sub-agent recorded of its own sub-agents for
    its own budgets (``budget_extra_usage``) is those same calls and is not added again."""
    total, seen, todo = Usage(), set(), [task.child_thread]
    while todo:
        thread = todo.pop()
        if thread in seen:
            continue
        seen.add(thread)
        total = total + tasks.store.thread_usage(thread)
        todo += [t.child_thread for t in tasks.tasks(thread)]
    return total


def settle_cut_off(store: Store, parent_thread: str, call_ids: Sequence[str],
                   error: str = CUT_OFF_TASK) -> list[TaskRecord]:
    """D5, D7, R9: end the foreground tasks these calls of ``parent_thread`` drove, when the calls are
    settled as cut off (the parent's process died while they ran: ``recover``, or a new turn closing the
    cut-off run). A foreground task is driven by its parent's run, in that run's process, so nothing
    drives it any more: it ends ``failed`` saying so — unless it settled already, or a live process
    holds its thread (R7: that process's to settle). Returns the tasks settled here (their
    ``task_settled`` events are the caller's to emit).

    A store without a tasks table (no sub-agent ever ran there) has none: nothing is created for it."""
    ids = list(dict.fromkeys(call_ids))
    if not ids:
        return []
    with store._lock:
        if store._db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='tasks'").fetchone() is None:
            return []
    tasks = SqliteTaskStore(store)  # (its columns brought up to date)
    with store._lock:
        rows = store._db.execute(
            f"SELECT {_COLUMNS} FROM tasks WHERE parent_thread=? AND background=0 AND {_UNSETTLED} "
            f"AND call_id IN ({','.join('?' * len(ids))})", (parent_thread, *ids)).fetchall()
    settled = []
    for record in (_record(r) for r in rows):
        if store.holder(record.child_thread) is not None:
            continue
        usage = task_spend(tasks, record)
        if tasks.update_unsettled(record.id, status="failed", settled=time.time(), error=error, usage=usage):
            found = tasks.task(record.id)
            if found is not None:
                settled.append(found)
    return settled


def _record(row: Sequence[Any]) -> TaskRecord:
    return TaskRecord(
        id=row[0], parent_thread=row[1], parent_run=row[2], call_id=row[3], agent=row[4], child_thread=row[5],
        description=row[6], background=bool(row[7]), status=row[8], created=row[9], started=row[10],
        settled=row[11], usage=Usage.from_dict(json.loads(row[12] or "{}")), outcome=row[13] or "",
        error=row[14], notified=bool(row[15]), envelope=json.loads(row[16] or "{}"), last_tool=row[17] or "",
        depth=int(row[18] or 1), prompt=row[19] or "", owner=row[20] or "", stop_requested=row[21],
        parent_step=row[22],
    )


__all__ = ["ACTIVE", "CUT_OFF_TASK", "SETTLED", "SqliteTaskStore", "TaskRecord", "TaskStore", "settle_cut_off",
           "task_spend"]
