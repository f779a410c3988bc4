"""Who drives a sub-agent task, and picking up the tasks a gone process left (D5, D10, R7): a mixin of
``LocalTaskRunner`` (harness/task_runner.py), split along its seam.

A task's row names its owner — the process driving it — as ``process_owner`` writes it; whether that
process still runs is R7's test for a claim's holder (``holder_alive``, engine/store_claims.py: by pid
and start time where this process can judge its pid, else it counts as alive, a task keeping no
heartbeat). ``recover`` takes a task only with a compare-and-set on that owner
(``TaskStore.take_task``): of two processes opening the workspace at once, one drives each task and the
other leaves it alone.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from workbench.engine.middleware import RunResult
from workbench.engine.store_claims import holder_alive, process_identity
from workbench.engine.task_store import TaskRecord, TaskStore

if TYPE_CHECKING:
    from workbench.engine.agent import Engine

#: Task ids some runner of this process drives now (queued, running or answering): never recovered here.
_DRIVEN: set[str] = set()
_STARTED = time.time()


def process_owner() -> str:
    """This process as a task's owner: ``host pid since``, where host is the host name and, where /proc
    tells it, ``|`` and the process's identity (engine/store_claims.py). An older workbench reads such a
    host as another machine's: it leaves the task alone rather than take it from a live process."""
    identity = process_identity()
    host = socket.gethostname() + (f"|{identity}" if identity else "")
    return f"{host} {os.getpid()} {_STARTED:.3f}"


def _owner_parts(owner: str) -> tuple[str, int, float, str | None]:
    host, pid, since = owner.split(" ")
    name, _, identity = host.partition("|")
    return name, int(pid), float(since), identity or None


def owner_alive(owner: str) -> bool:
    """Whether the process that owns a task still runs (R7's test for a claim's holder): a task whose
    owner lives is that process's to drive, so another process opening the workspace leaves it alone.
    An owner this process cannot judge by its pid (another host or PID namespace) counts as alive."""
    try:
        host, pid, since, identity = _owner_parts(owner)
    except ValueError:
        return False
    return holder_alive(pid, host, since, None, identity)


def describe_owner(owner: str) -> str:
    """A task's owner in words, as a claim's holder is named (R7): "process 123 on host, since …"."""
    try:
        host, pid, since, _ = _owner_parts(owner)
        return f"process {pid} on {host}, since {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(since))}"
    except ValueError:
        return owner or "another process"


class TaskRecovery:
    """``LocalTaskRunner``'s recovery and its view of who drives a task (see the module)."""

    if TYPE_CHECKING:
        tasks: TaskStore
        _drivers: dict[str, asyncio.Task[Any]]
        _queue: list[str]
        _live: dict[str, int]
        _recovering: dict[str, Callable[[], Awaitable[RunResult]]]

        def tasks_store_threads(self) -> Any: ...
        def _settle(self, record: TaskRecord, status: str, *, outcome: str = "",
                    error: str | None = None) -> TaskRecord: ...
        def _start_for(self, record: TaskRecord, engine: Engine) -> Callable[[], Awaitable[RunResult]] | RunResult: ...
        def _engine(self, record: TaskRecord) -> Engine: ...
        def _pump(self) -> None: ...

    def driver_elsewhere(self, record: TaskRecord) -> str | None:
        """Who drives this task, when not this runner: a live claim on its thread (R7), another runner of
        this process, or its live owner process (queued there, or between its run's steps). None when
        no one does (its process ended or closed)."""
        if record.id in self._live or record.id in self._drivers or record.id in self._queue:
            return None
        holder = self.tasks_store_threads().holder(record.child_thread)
        if holder is not None:
            return holder.describe()
        if record.id in _DRIVEN:
            return f"another session of this process ({os.getpid()})"
        if record.status in ("queued", "pending") and record.owner and record.owner != process_owner() \
                and owner_alive(record.owner):
            return describe_owner(record.owner)
        return None

    # -- recovery (D5: a restarted app picks tasks up) -------------------------------------------------------
    def recover(self, parent_threads: Sequence[str] | None = None) -> list[str]:
        """Drive again the background tasks of these parent threads (all when None) that a previous
        process left ``queued`` or ``pending`` and that no live process runs now. Returns their ids.

        R7: a task is taken only if its owner is still the one read here (``TaskStore.take_task``); one
        another process took meanwhile (it recovers the same thread) is that process's to drive."""
        store = self.tasks_store_threads()
        picked = []
        for record in self.tasks.tasks(None):
            if parent_threads is not None and record.parent_thread not in parent_threads:
                continue
            if not record.background or record.status not in ("queued", "pending"):
                continue
            if record.id in self._drivers or record.id in self._queue or record.id in _DRIVEN:
                continue
            if store.holder(record.child_thread) is not None:  # alive in another process (R7)
                continue
            if record.owner and owner_alive(record.owner) and record.owner != process_owner():
                continue  # its process lives (it may be queued there): that process drives it
            if record.stop_requested is not None:  # aborted while its process was gone: it ends, unrun
                self._settle(record, "aborted", error="aborted")
                continue
            if not self._take(record):
                continue  # another process took it since it was read: that process drives it
            picked.append(record.id)
            start = self._start_for(record, self._engine(record))
            if isinstance(start, RunResult):
                continue
            self._recovering[record.id] = start
            self._queue.append(record.id)
        self._pump()
        return picked

    def _take(self, record: TaskRecord) -> bool:
        """Own a task found ownerless or with a gone owner, unless someone took it since (R7)."""
        if not self.tasks.take_task(record.id, process_owner(), expected=record.owner):
            return False
        _DRIVEN.add(record.id)
        return True

    def _disown(self, task_id: str) -> None:
        """This process does not drive the task after all (its thread is held elsewhere, R7): its row
        stops naming this process, unless another took it meanwhile."""
        _DRIVEN.discard(task_id)
        self.tasks.take_task(task_id, "", expected=process_owner())
