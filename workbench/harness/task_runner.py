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

A runner on a distributed engine would implement the same methods: ``start`` hands the task to a
worker that builds the same child agent from the workspace's config and runs it on a shared store;
``status``/``result`` read the shared task table; ``abort`` and ``resume`` send a message to the
worker that holds the child thread's claim (R7).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

from workbench.engine.agent import Engine
from workbench.engine.events import Event
from workbench.engine.middleware import RunResult
from workbench.engine.task_store import SETTLED, TaskRecord, TaskStore
from workbench.engine.usage import Usage
from workbench.harness.task_loop import TaskLoop

log = logging.getLogger(__name__)

#: Task ids some runner of this process drives now (queued, running or answering): never recovered here.
_DRIVEN: set[str] = set()
_STARTED = time.time()


def process_owner() -> str:
    """This process as a task's owner: host, pid and when it started."""
    return f"{socket.gethostname()} {os.getpid()} {_STARTED:.3f}"


def owner_alive(owner: str) -> bool:
    """Whether the process that owns a task still runs (R7's test for a claim's holder): a task whose
    owner lives is that process's to drive, so another process opening the workspace leaves it alone."""
    from workbench.engine.store import Claim

    try:
        host, pid, since = owner.split(" ")
        claim = Claim("", "", int(pid), host, float(since), time.time())
    except ValueError:
        return False
    return claim.alive


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
        """Stop a task that has not settled; it ends ``aborted``."""

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


class LocalTaskRunner:
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

    def resume(self, task_id: str, decisions: Mapping[str, Any]) -> None:
        record = self.tasks.task(task_id)
        if record is None or record.status != "awaiting_decision":
            raise ValueError(f"task {task_id} is not waiting for a decision")
        engine = self._engine(record)
        self.tasks.update_task(task_id, status="pending")  # now, so a wait started next sees it running
        self._spawn(record.id, lambda: engine.resume(record.child_thread, decisions))

    def continue_task(self, task_id: str, instructions: str) -> None:
        record = self.tasks.task(task_id)
        if record is None or record.status not in SETTLED:
            raise ValueError(f"task {task_id} has not settled")
        engine = self._engine(record)
        self._own(task_id)
        record = self.tasks.update_task(task_id, status="queued", settled=None, outcome="", error=None,
                                        started=None) or record
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
        for task_id in [*self._queue, *self._drivers]:
            _DRIVEN.discard(task_id)
        self._queue.clear()
        drivers = [d for d in self._drivers.values() if not d.done()]
        for d in drivers:
            d.cancel()
        for d in drivers:
            with contextlib.suppress(BaseException):
                await d
        if self._task_loop is not None:  # the cut runs unwind there (each stores how it was cut)
            await self._task_loop.aclose()

    # -- recovery (D5: a restarted app picks tasks up) -------------------------------------------------------
    def recover(self, parent_threads: Sequence[str] | None = None) -> list[str]:
        """Drive again the background tasks of these parent threads (all when None) that a previous
        process left ``queued`` or ``pending`` and that no live process runs now. Returns their ids."""
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
            picked.append(record.id)
            self._own(record.id)
            start = self._start_for(record, self._engine(record))
            if isinstance(start, RunResult):
                continue
            self._recovering[record.id] = start
            self._queue.append(record.id)
        self._pump()
        return picked

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
        record = self.tasks.update_task(task_id, status="pending", started=record.started or now) or record
        self._records[task_id] = record
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
        except Exception as e:  # a task's failure is its own (D9): stored, siblings go on
            result = RunResult("failed", "", Usage(), error=f"{type(e).__name__}: {e}", thread_id=record.child_thread)
        self._record_result(self.tasks.task(task_id) or record, result, expired=expired)
        return result

    def _record_result(self, record: TaskRecord, result: RunResult, *, expired: bool = False) -> TaskRecord:
        _DRIVEN.discard(record.id)  # settled or waiting for a decision: nobody drives it now
        if result.status == "interrupted":
            record = self.tasks.update_task(record.id, status="awaiting_decision", usage=self._usage(record),
                                            last_tool=self._last_tool(record)) or record
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
        _DRIVEN.discard(record.id)
        usage = self._usage(record)
        record = self.tasks.update_task(record.id, status=status, settled=time.time(), outcome=outcome,
                                        error=error, usage=usage, last_tool=self._last_tool(record)) or record
        self._records[record.id] = record
        self._publish(record, "task_settled", {"task_id": record.id, "agent": record.agent, "status": status,
                                               "usage": usage.to_dict()})
        self._publish(record, "task_progress", self._progress_data(record))
        self._notify()
        return record

    def _last_tool(self, record: TaskRecord) -> str:
        return str((self._progress.get(record.id) or {}).get("last_tool") or record.last_tool)

    def _usage(self, record: TaskRecord) -> Usage:
        return self.tasks_store_threads().thread_usage(record.child_thread)

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


__all__ = ["LocalTaskRunner", "Publish", "TaskRunner"]
