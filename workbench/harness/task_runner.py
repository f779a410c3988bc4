"""Where sub-agent tasks run (D5, D7, D9, D11): the runner interface and its local asyncio runner.

The delegation middleware starts, watches, answers and aborts tasks only through ``TaskRunner``, and
the runner reaches the store only through ``TaskStore`` (engine/task_store.py). ``LocalTaskRunner``
runs each task as a real run of a child ``Engine`` (one per sub-agent, sharing the workspace's store)
on the task's own thread, as an asyncio task in this process — on the caller's loop, or, given a
``TaskLoop`` (the window does: its loop is the GUI's), on that private loop in its own OS thread:

- at most ``max_concurrent`` background tasks run at once; the others wait ``queued`` (D7);
- each has a wall-clock limit (``timeout_seconds``): then its run is stopped and the task is
  ``expired`` (D7);
- a run that suspends for the person leaves the task ``awaiting_decision`` (its questions wait on
  the child thread, where the decision inbox finds them, D9); ``resume`` continues it;
- one task failing, expiring or being aborted never touches another (D9): each is its own asyncio
  task, and every outcome is caught and stored;
- progress (last tool, tokens, elapsed) goes out as live ``task_progress`` events; the settled status
  and usage as durable ``task_settled`` on the parent thread (through ``publish``).

Aborting a task another process drives (D7, D10): the person's stop means what it says, whichever
process it is asked from. A runner that does not drive the task (a window open on a thread a
``workbench run`` drives, or the other way round) records the stop on the task's row
(``TaskStore.request_stop``) and waits for it to settle; the runner that drives the task reads the
stop requests of the tasks it runs or queues every ``STOP_POLL_SECONDS`` (``_watch_stops``, one read
for all of them) and stops the run as its own abort does — a model call in flight is cut, no further
one is made — or drops a queued task before it starts; the run ends ``aborted`` and that runner settles
the row. The row never says ``aborted`` while the task runs. When the driving process dies before it
honours the stop, the asking runner settles the task itself (no one drives it); when the driver lives
but has not stopped it within ``stop_wait_seconds`` (its loop hung), the abort returns the task still
unsettled, the stop stays recorded (that process stops it at its next look, a ``recover`` elsewhere
settles it instead of running it) and ``Session.abort_task`` says which process drives it. Every
settling is conditional on the row not having settled (``TaskStore.update_unsettled``): a settled row
never flips to another ending, and a row deleted with its thread is not written again.

Recovery — the tasks a killed or closed process left, taken with a compare-and-set on their owner so two
processes never both drive one — and who drives a task are in task_recovery.py (a mixin of the runner).
A run of a task whose thread another process holds (R7: it drives the task) leaves the row to that
process: it is not settled here.

A runner on a distributed engine would implement the same methods: ``start`` hands the task to a
worker that builds the same child agent from the workspace's config and runs it on a shared store;
``status``/``result`` read the shared task table; ``abort`` and ``resume`` send a message to the
worker that holds the child thread's claim (R7) — here, the stop request on the shared row.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

from workbench.engine.agent import Engine
from workbench.engine.events import Event
from workbench.engine.middleware import RunResult
from workbench.engine.task_store import SETTLED, TaskRecord, TaskStore, task_spend
from workbench.engine.tool_calls import QuestionChanged
from workbench.engine.usage import Usage
from workbench.errors import ThreadBusyError
from workbench.harness.task_loop import TaskLoop
from workbench.harness.task_recovery import _DRIVEN, TaskRecovery, describe_owner, owner_alive, process_owner

log = logging.getLogger(__name__)

#: How often a runner reads the stop requests of the tasks it drives (another process's aborts, D10).
STOP_POLL_SECONDS = 0.5


#: The error the engine gives a run whose asyncio task was cancelled (the app closing under it).
CANCELLED = "the run was cancelled"
RESUME_AFTER_CLOSE = ("The app was closed while you worked on this task. Continue it from where you were and "
                      "answer with the result.")

#: publish(task, event type, data): an event about ``task`` on its parent thread.
Publish = Callable[[TaskRecord, str, dict[str, Any]], None]


class TaskRunner(Protocol):
    """Start, watch, answer and abort sub-agent tasks by id (D11)."""

    tasks: TaskStore

    def start(self, task: TaskRecord) -> None:
        """Run a background task (queued while ``max_concurrent`` others run); returns at once."""

    async def run_foreground(self, task: TaskRecord, decisions: Mapping[str, Any] | None = None) -> RunResult:
        """Run (or, with ``decisions``, resume) a foreground task to its end or its next question."""

    def status(self, task_id: str) -> str:
        """The task's status (``unknown`` for an id that is not there)."""

    def result(self, task_id: str) -> TaskRecord | None:
        """The task as stored (outcome, usage, status)."""

    async def abort(self, task_id: str) -> TaskRecord | None:
        """Stop a task that has not settled; it ends ``aborted``. A task another process drives is asked
        to stop there (returned unsettled when that process has not stopped it in time)."""

    def resume(self, task_id: str, decisions: Mapping[str, Any]) -> None:
        """Answer a background task's pending questions; it goes on in the background."""

    def continue_task(self, task_id: str, instructions: str) -> None:
        """A further turn for a settled task's sub-agent, in the background."""

    async def wait(self, task_ids: Sequence[str], timeout: float) -> bool:
        """Wait until these tasks settle or wait for a decision; False when the timeout (or a cut) came first."""

    def cut_waits(self) -> None:
        """End every ``wait`` in progress now (the person cut it short, D7)."""

    async def close(self) -> None:
        """Stop driving tasks in this process (they stay ``pending`` in the store: ``recover`` picks them up)."""


class LocalTaskRunner(TaskRecovery):
    """``TaskRunner`` on this process's asyncio loop (see the module)."""

    def __init__(self, tasks: TaskStore, engine_for: Callable[[TaskRecord], Engine], *, max_concurrent: int = 4,
                 timeout_seconds: float = 600.0, publish: Publish | None = None,
                 task_loop: TaskLoop | None = None) -> None:
        self.tasks = tasks
        # Where child engines run (None: here). The runner's own bookkeeping — task records, progress,
        # notices — always stays on the loop that calls it.
        self._task_loop = task_loop
        self._engine_for = engine_for
        # A fresh background task's engine is built on the task loop (its realpath checks, config reads
        # and middleware set-up off the window's GUI thread: 8 launched at once took ~9 ms there, issue
        # 9); the other paths build on the caller's loop. The lock guards the tables below, which both
        # threads update (the engine source itself keeps one engine a task).
        self._engine_lock = threading.Lock()
        self._engines: dict[str, Engine] = {}  # the engine each task got, subscribed to (stop never builds one)
        self._home: asyncio.AbstractEventLoop | None = None  # the caller's loop: progress crosses back to it
        # A stop that found no run of the task's latest attempt (asked before its run took its first
        # step, on the engines' loop): that attempt ends ``aborted`` without running.
        self._attempts: dict[str, int] = {}
        self._stop_asked: set[tuple[str, int]] = set()
        self.max_concurrent = max(1, int(max_concurrent))
        self.timeout_seconds = float(timeout_seconds)
        self._publish = publish or (lambda task, type, data: None)
        self._drivers: dict[str, asyncio.Task[Any]] = {}
        self._running = 0
        self._queue: list[str] = []  # background task ids waiting for a slot, oldest first
        self._changed: asyncio.Event | None = None
        self._cut = 0  # bumped by cut_waits
        self._by_thread: dict[str, str] = {}  # child thread -> task id (progress events)
        self._progress: dict[str, dict[str, Any]] = {}
        self._records: dict[str, TaskRecord] = {}  # the newest stored state of each task this runner drove
        self._closed = False
        # How a queued task starts when it is not a fresh run: a further turn, or a recovered step.
        self._continue_with: dict[str, Callable[[], Awaitable[RunResult]]] = {}
        self._recovering: dict[str, Callable[[], Awaitable[RunResult]]] = {}
        # D10: the tasks whose run this runner drives now (background and foreground) -> their attempt,
        # the attempts already stopped for a stop request, and the task that reads those requests.
        self._live: dict[str, int] = {}
        self._honoured: set[tuple[str, int]] = set()
        self._watcher: asyncio.Task[None] | None = None
        #: How long ``abort`` waits for another process to stop a task it drives.
        self.stop_wait_seconds = 15.0

    # -- the interface ----------------------------------------------------------------------------------
    def start(self, task: TaskRecord) -> None:
        if task.id in self._drivers or task.id in self._queue:
            return
        self._own(task.id)
        self._queue.append(task.id)
        self._pump()

    def _own(self, task_id: str) -> None:
        _DRIVEN.add(task_id)
        self.tasks.update_task(task_id, owner=process_owner())

    async def run_foreground(self, task: TaskRecord, decisions: Mapping[str, Any] | None = None) -> RunResult:
        engine = self._engine(task)
        child = task.child_thread
        if decisions is not None:
            return await self._drive(task.id, lambda: engine.resume(child, decisions), self._next_attempt(task.id))
        start = self._start_for(self.tasks.task(task.id) or task, engine)
        if isinstance(start, RunResult):  # its run had ended before a crash: nothing runs again
            return start
        return await self._drive(task.id, start, self._next_attempt(task.id))

    def _start_for(self, record: TaskRecord, engine: Engine) -> Callable[[], Awaitable[RunResult]] | RunResult:
        """How a task's run starts: fresh; recovered, when a crash cut it (R2); or not at all, when its
        run had ended (its result is recorded from the store)."""
        runs = self.tasks_store_threads().runs(record.child_thread)
        last = runs[-1] if runs else None
        if last is None:
            return self._starter(engine, record)
        if last.status == "aborted" and last.error == CANCELLED and record.status in ("queued", "pending"):
            # Cut when the app closed (not stopped by anyone): a further turn picks the task up where
            # its thread stands.
            return lambda: engine.run(record.child_thread, RESUME_AFTER_CLOSE)
        if last.status in ("done", "failed", "aborted", "interrupted"):
            result = RunResult(last.status, last.answer, last.usage, error=last.error, thread_id=record.child_thread)
            self._record_result(record, result)
            return result
        return lambda: engine.recover(record.child_thread)

    def status(self, task_id: str) -> str:
        record = self.tasks.task(task_id)
        return record.status if record is not None else "unknown"

    def result(self, task_id: str) -> TaskRecord | None:
        return self.tasks.task(task_id)

    async def abort(self, task_id: str) -> TaskRecord | None:
        record = self.tasks.task(task_id)
        if record is None or record.status in SETTLED:
            return record
        if task_id in self._queue:
            self._queue.remove(task_id)
            return self._settle(record, "aborted", error="aborted before it started")
        driver = self._drivers.get(task_id)
        if driver is not None and not driver.done():
            self._stop(record)
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(driver), 30)
            record = self.tasks.task(task_id) or record
            if record.status not in SETTLED:
                record = self._settle(record, "aborted", error="aborted")
            return record
        if task_id in self._live:  # a foreground task this runner drives (its parent's run is here)
            self._stop(record)
            return await self._settled_by_driver(task_id, local=True)
        if record.status == "awaiting_decision":
            # Its run waits for answers that will not come: end it, so its questions leave the inbox.
            from workbench.decisions import abandon, thread_questions

            engine = self._engine(record)
            questions, _ = thread_questions(self.tasks_store_threads(), record.child_thread)
            with contextlib.suppress(Exception):
                await self._launch(lambda: abandon(engine, record.child_thread, questions,
                                                   lambda d: engine.resume(record.child_thread, d),
                                                   "The task was aborted."))
            return self._settle(self.tasks.task(task_id) or record, "aborted", error="aborted")
        if self.driver_elsewhere(record) is not None:
            # D10: another process (or another session of this one) runs it: ask it to stop there, and
            # wait for it to settle — the row says aborted only once the run has stopped.
            self.tasks.request_stop(task_id)
            return await self._settled_by_driver(task_id)
        # No one drives it (its process ended or closed): it ends here.
        return self._settle(record, "aborted", error="aborted")

    async def _settled_by_driver(self, task_id: str, *, local: bool = False) -> TaskRecord | None:
        """Wait until the runner that drives the task has stopped it and settled its row (a stop request
        or, ``local``, this runner's own stop). Settled here when its driver is gone without settling
        it; returned unsettled when ``stop_wait_seconds`` pass first (see the module)."""
        deadline = time.monotonic() + self.stop_wait_seconds
        while True:
            record = self.tasks.task(task_id)
            if record is None or record.status in SETTLED:
                return record
            if record.status == "awaiting_decision" and not (local and task_id in self._live):
                return await self.abort(task_id)  # it suspended meanwhile: its questions are abandoned
            driven = task_id in self._live if local else self.driver_elsewhere(record) is not None
            if not driven:  # its driver ended (or its process died) without settling it
                return self._settle(record, "aborted", error="aborted")
            if time.monotonic() >= deadline:
                return record
            changed = self._event()
            changed.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(changed.wait(), 0.1)

    def resume(self, task_id: str, decisions: Mapping[str, Any]) -> None:
        record = self.tasks.task(task_id)
        if record is None or record.status != "awaiting_decision":
            raise ValueError(f"task {task_id} is not waiting for a decision")
        engine = self._engine(record)
        if not self.tasks.update_unsettled(task_id, status="pending"):  # now: a wait started next sees it run
            raise ValueError(f"task {task_id} has settled")
        self._spawn(record.id, lambda: engine.resume(record.child_thread, decisions))

    def continue_task(self, task_id: str, instructions: str) -> None:
        record = self.tasks.task(task_id)
        if record is None or record.status not in SETTLED:
            raise ValueError(f"task {task_id} has not settled")
        engine = self._engine(record)
        self._own(task_id)
        record = self.tasks.update_task(task_id, status="queued", settled=None, outcome="", error=None,
                                        started=None, stop_requested=None) or record
        self._publish(record, "task_progress", self._progress_data(record))
        self._queue.append(task_id)
        self._continue_with[task_id] = lambda: engine.run(record.child_thread, instructions)
        self._pump()

    async def wait(self, task_ids: Sequence[str], timeout: float) -> bool:
        deadline = time.monotonic() + max(0.0, timeout)
        cut = self._cut
        while True:
            if all(self.status(t) in SETTLED or self.status(t) in ("awaiting_decision", "unknown") for t in task_ids):
                return True
            left = deadline - time.monotonic()
            if left <= 0 or self._cut != cut:
                return False
            changed = self._event()
            changed.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(changed.wait(), min(left, 1.0))

    def cut_waits(self) -> None:
        self._cut += 1
        self._notify()

    async def close(self) -> None:
        self._closed = True  # before cancelling: _drive leaves the tasks to be recovered
        left = [*self._queue, *self._drivers]
        for task_id in left:
            _DRIVEN.discard(task_id)
        self._queue.clear()
        if self._watcher is not None:
            self._watcher.cancel()
        drivers = [d for d in self._drivers.values() if not d.done()]
        for d in drivers:
            d.cancel()
        for d in drivers:
            with contextlib.suppress(BaseException):
                await d
        if self._task_loop is not None:  # the cut runs unwind there (each stores how it was cut)
            await self._task_loop.aclose()
        # Nobody here drives them now: their rows stop naming this process, so another one can recover or
        # abort them while it lives on (a window that closed this workspace, D5, D10).
        mine = process_owner()
        for task_id in left:
            with contextlib.suppress(Exception):
                record = self.tasks.task(task_id)
                if record is not None and record.owner == mine and task_id not in _DRIVEN:
                    self.tasks.update_unsettled(task_id, owner="")

    # -- driving ------------------------------------------------------------------------------------------
    def tasks_store_threads(self) -> Any:
        """The thread store under the task store (runs, checkpoints, claims of the child threads)."""
        return self.tasks.store

    def _pump(self) -> None:
        """Start queued background tasks while slots are free."""
        while self._queue and self._running < self.max_concurrent and not self._closed:
            task_id = self._queue.pop(0)
            record = self.tasks.task(task_id)
            if record is None or record.status in SETTLED:
                continue
            start = (self._continue_with.pop(task_id, None) or self._recovering.pop(task_id, None)
                     or self._fresh_start(record))
            self._spawn(task_id, start, slot=True)
        if self._queue:
            self._watch()

    def _spawn(self, task_id: str, start: Callable[[], Awaitable[RunResult]], *, slot: bool = False) -> None:
        if slot:
            self._running += 1
        attempt = self._next_attempt(task_id)  # now: a stop asked from here on is this attempt's

        async def drive() -> None:
            try:
                await self._drive(task_id, start, attempt)
            except asyncio.CancelledError:
                pass  # closing: the task stays as stored (recovered by the next process)
            except Exception:  # never lost silently: _drive stores every outcome it can
                log.exception("background task %s failed", task_id)
            finally:
                if slot:
                    self._running -= 1
                self._drivers.pop(task_id, None)
                self._pump()

        self._drivers[task_id] = asyncio.ensure_future(drive())

    def _next_attempt(self, task_id: str) -> int:
        self._attempts[task_id] = self._attempts.get(task_id, 0) + 1
        return self._attempts[task_id]

    def _starter(self, engine: Engine, record: TaskRecord) -> Callable[[], Awaitable[RunResult]]:
        return lambda: engine.run(record.child_thread, record.prompt or record.description)

    def _fresh_start(self, record: TaskRecord) -> Callable[[], Awaitable[RunResult]]:
        """A new task's run; its engine is built where the run starts (``_launch``: on the task loop, when
        there is one), not on the caller's loop."""
        self._remember_home()
        return lambda: self._engine(record).run(record.child_thread, record.prompt or record.description)

    async def _drive(self, task_id: str, start: Callable[[], Awaitable[RunResult]], attempt: int) -> RunResult:
        record = self.tasks.task(task_id)
        assert record is not None, task_id
        if task_id not in _DRIVEN:
            self._own(task_id)
        self._by_thread[record.child_thread] = task_id
        now = time.time()
        if not self.tasks.update_unsettled(task_id, status="pending", started=record.started or now):
            # Settled before its run began (aborted from elsewhere, D7): it does not run.
            _DRIVEN.discard(task_id)
            found = self.tasks.task(task_id) or record
            self._notify()
            return RunResult({"completed": "done", "failed": "failed"}.get(found.status, "aborted"), found.outcome,
                             found.usage, error=found.error, thread_id=found.child_thread)
        record = self.tasks.task(task_id) or record
        self._records[task_id] = record
        self._live[task_id] = attempt
        try:
            return await self._drive_run(task_id, record, start, attempt, now)
        finally:
            if self._live.get(task_id) == attempt:
                del self._live[task_id]
            self._honoured.discard((task_id, attempt))

    async def _drive_run(self, task_id: str, record: TaskRecord, start: Callable[[], Awaitable[RunResult]],
                         attempt: int, now: float) -> RunResult:
        self._watch()
        self._publish(record, "task_progress", self._progress_data(record))
        self._notify()
        limit = self.timeout_seconds - (now - (record.started or now))
        run = self._launch(lambda: self._unless_stopped(record, attempt, start))
        expired = False
        try:
            done, _ = await asyncio.wait({run}, timeout=max(0.0, limit))
            if not done:  # D7: the wall-clock limit
                expired = True
                self._stop(record)
            result = await run
        except asyncio.CancelledError:
            if self._closed:
                # The app closes: the run is cut where it is, as a crash would cut it; the task stays
                # as stored and the next process recovers its step (D5).
                run.cancel()
                with contextlib.suppress(BaseException):
                    await run
                raise
            # The parent was stopped (a foreground task is one of its tool calls): stop the sub-agent
            # too, and store how it ended.
            if not run.done():
                self._stop(record)
                with contextlib.suppress(BaseException):
                    await asyncio.wait_for(asyncio.shield(run), 10)
            if run.done() and not run.cancelled() and run.exception() is None:
                self._record_result(self.tasks.task(task_id) or record, run.result())
            raise
        except QuestionChanged as e:
            # R3/Q: the answer was given for a question the task no longer asks (another process
            # answered it and the sub-agent asked again, maybe under the same id). Nothing ran: the
            # task waits on its current questions, to be answered again; it has not failed.
            log.warning("task %s: %s", task_id, e)
            result = RunResult("interrupted", "", Usage(), error=str(e), thread_id=record.child_thread)
        except ThreadBusyError as e:
            # R7: another process holds the task's thread (it recovered the task first, or took the
            # thread over): it drives the task and settles its row; nothing is written here.
            log.info("task %s is driven elsewhere: %s", task_id, e)
            self._disown(task_id)
            self._notify()
            return RunResult("failed", "", Usage(), error=str(e), thread_id=record.child_thread)
        except Exception as e:  # a task's failure is its own (D9): stored, siblings go on
            result = RunResult("failed", "", Usage(), error=f"{type(e).__name__}: {e}", thread_id=record.child_thread)
        self._record_result(self.tasks.task(task_id) or record, result, expired=expired)
        return result

    def _record_result(self, record: TaskRecord, result: RunResult, *, expired: bool = False) -> TaskRecord:
        _DRIVEN.discard(record.id)  # settled or waiting for a decision: nobody drives it now
        if result.status == "interrupted":
            if self.tasks.update_unsettled(record.id, status="awaiting_decision", usage=self._usage(record),
                                           last_tool=self._last_tool(record)):
                record = self.tasks.task(record.id) or record
            self._records[record.id] = record
            self._publish(record, "task_progress", self._progress_data(record))
            self._notify()
            return record
        status = {"done": "completed", "failed": "failed"}.get(result.status, "aborted")
        if expired:
            status = "expired"
        error = result.error
        if expired:
            error = f"expired after {self.timeout_seconds:g} s (subagents.timeout_seconds)"
        return self._settle(record, status, outcome=result.answer or "", error=error)

    def _settle(self, record: TaskRecord, status: str, *, outcome: str = "", error: str | None = None) -> TaskRecord:
        """End the task ``status`` — only if its row has not settled (D7: a settled task keeps its ending,
        whoever settled it first; a row deleted with its thread is not written again)."""
        _DRIVEN.discard(record.id)
        usage = self._usage(record)
        if not self.tasks.update_unsettled(record.id, status=status, settled=time.time(), outcome=outcome,
                                           error=error, usage=usage, last_tool=self._last_tool(record)):
            stored = self.tasks.task(record.id)
            if stored is not None:
                self._records[record.id] = stored
                self._publish(stored, "task_progress", self._progress_data(stored))
            self._notify()
            return stored or record
        record = self.tasks.task(record.id) or record
        self._records[record.id] = record
        self._publish(record, "task_settled", {"task_id": record.id, "agent": record.agent, "status": status,
                                               "usage": usage.to_dict()})
        self._publish(record, "task_progress", self._progress_data(record))
        self._notify()
        return record

    def _last_tool(self, record: TaskRecord) -> str:
        return str((self._progress.get(record.id) or {}).get("last_tool") or record.last_tool)

    def _usage(self, record: TaskRecord) -> Usage:
        """What the task spent, its own sub-agents' included (B4: what counts toward its parent)."""
        return task_spend(self.tasks, record)

    def _launch(self, start: Callable[[], Awaitable[Any]]) -> asyncio.Future[Any]:
        """Start a child engine's coroutine where child engines run; awaitable here."""
        if self._task_loop is None:
            async def call() -> Any:  # as TaskLoop.submit: what start() raises is the run's outcome
                return await start()
            return asyncio.ensure_future(call())
        return self._task_loop.submit(start)

    def _stop(self, record: TaskRecord) -> None:
        """Stop the task's latest attempt, on the loop the engine's runs live on (its run state is that
        loop's). A stop that comes before the run took its first step — even before its engine was built —
        finds no run: it is kept, and that attempt ends ``aborted`` without running (``_unless_stopped``)."""
        attempt = self._attempts.get(record.id, 0)

        def stop() -> None:
            engine = self._engines.get(record.id)
            if engine is None or not engine.stop(record.child_thread):
                self._stop_asked.add((record.id, attempt))

        if self._task_loop is None:
            stop()
        else:
            self._task_loop.call(stop)

    async def _unless_stopped(self, record: TaskRecord, attempt: int,
                              start: Callable[[], Awaitable[RunResult]]) -> RunResult:
        """The attempt's run, unless a stop for it came first (on the engines' loop, like ``_stop``'s)."""
        if (record.id, attempt) in self._stop_asked:
            self._stop_asked.discard((record.id, attempt))
            return RunResult("aborted", "", Usage(), error="stopped before it started", thread_id=record.child_thread)
        return await start()

    # -- stop requests from other processes (D10) -----------------------------------------------------
    def _watch(self) -> None:
        """Read stop requests while this runner drives or queues tasks (started on the caller's loop)."""
        if self._closed or (self._watcher is not None and not self._watcher.done()):
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._watcher = loop.create_task(self._watch_stops())

    async def _watch_stops(self) -> None:
        while not self._closed and (self._live or self._queue):
            await asyncio.sleep(STOP_POLL_SECONDS)
            ids = [*self._live, *self._queue]
            if not ids:
                break
            try:
                asked = self.tasks.stop_requests(ids)
            except Exception:  # a busy or closed store: look again at the next turn
                log.debug("could not read the stop requests", exc_info=True)
                continue
            for task_id in asked:
                self._honour_stop(task_id)

    def _honour_stop(self, task_id: str) -> None:
        """Another process asked this task to stop: a queued one ends unrun, a running one is stopped as
        ``abort`` stops it (its run ends ``aborted``, and ``_drive`` settles the row)."""
        if task_id in self._queue:
            self._queue.remove(task_id)
            self._continue_with.pop(task_id, None)
            self._recovering.pop(task_id, None)
            record = self.tasks.task(task_id)
            if record is not None:
                self._settle(record, "aborted", error="aborted before it started")
            return
        attempt = self._live.get(task_id)
        if attempt is None or (task_id, attempt) in self._honoured:
            return
        self._honoured.add((task_id, attempt))
        record = self.tasks.task(task_id)
        if record is not None:
            log.info("task %s: stopped, as asked from another process", task_id)
            self._stop(record)

    # -- progress ----------------------------------------------------------------------------------------
    def _remember_home(self) -> None:
        """Note the caller's loop (where progress is handled) while running on it."""
        if self._home is None:
            self._home = asyncio.get_running_loop()

    def _engine(self, record: TaskRecord) -> Engine:
        """The task's engine, built at the first call — on the caller's loop or on the task loop."""
        on_task_loop = self._task_loop is not None and threading.get_ident() == self._task_loop.thread.ident
        if not on_task_loop:
            self._remember_home()
        # Built outside the lock (the engine source keeps one engine a task): the caller's loop never
        # waits here for another task's engine being built on the task loop.
        engine = self._engine_for(record)
        with self._engine_lock:
            known = self._engines.get(record.id)
            self._engines[record.id] = engine
            self._by_thread[record.child_thread] = record.id
            if known is not engine:
                if self._task_loop is None:
                    engine.subscribe(self._on_child_event)
                else:
                    home = self._home if on_task_loop else asyncio.get_running_loop()
                    assert home is not None, "a task's engine is first built on the runner's loop or for _launch"
                    engine.subscribe(self._forward(home))
        return engine

    def _forward(self, home: asyncio.AbstractEventLoop) -> Callable[[Event], None]:
        """A child engine's listener on the task loop: only the events progress is made of cross back
        (not every streamed delta), as one callback each on the runner's loop."""

        def forward(event: Event) -> None:
            if event.type in ("tool_call_started", "model_call_finished") and not home.is_closed():
                with contextlib.suppress(RuntimeError):
                    home.call_soon_threadsafe(self._on_child_event, event)

        return forward

    def _on_child_event(self, event: Event) -> None:
        task_id = self._by_thread.get(event.thread_id)
        if task_id is None:
            return
        progress = self._progress.setdefault(task_id, {"last_tool": "", "usage": Usage()})
        if event.type == "tool_call_started":
            progress["last_tool"] = str(event.data.get("name", ""))
        elif event.type == "model_call_finished":
            progress["usage"] = progress["usage"] + Usage.from_dict(event.data.get("usage"))
        else:
            return
        # From memory: a progress event is one per tool call and model call of every task, and in the
        # window it runs on the GUI loop — no store read or write here (the last tool is stored with the
        # status changes and at the end, _record_result / _settle).
        record = self._records.get(task_id) or self.tasks.task(task_id)
        if record is not None:
            self._records[task_id] = record
            self._publish(record, "task_progress", self._progress_data(record))

    def _progress_data(self, record: TaskRecord) -> dict[str, Any]:
        live = self._progress.get(record.id) or {}
        usage = record.usage if record.status in SETTLED else (live.get("usage") or record.usage)
        return {"task_id": record.id, "agent": record.agent, "status": record.status,
                "description": record.description, "last_tool": live.get("last_tool") or record.last_tool,
                "tokens": usage.total_tokens, "cost_usd": usage.cost_usd,
                "elapsed": round(record.elapsed(), 1), "child_thread": record.child_thread}

    def _event(self) -> asyncio.Event:
        if self._changed is None:
            self._changed = asyncio.Event()
        return self._changed

    def _notify(self) -> None:
        self._event().set()


__all__ = ["STOP_POLL_SECONDS", "LocalTaskRunner", "Publish", "TaskRunner", "describe_owner", "owner_alive",
           "process_owner"]
