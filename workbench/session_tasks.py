"""The ``Session`` facade's calls on sub-agent tasks (D5–D10): list them, read one's conversation, abort,
continue, answer a background task's decisions, wait for a thread's tasks.

A mixin of ``workbench.session.Session`` (one facade; split along its seams to keep files short).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from workbench.engine.messages import Message
from workbench.engine.task_store import SETTLED, TaskRecord
from workbench.errors import RunError

if TYPE_CHECKING:
    from workbench.decisions import Drafts
    from workbench.engine.store import Store


class TaskCalls:
    """Sub-agent tasks of the session's workspace and thread (see the module)."""

    if TYPE_CHECKING:
        store: Store
        thread_id: str
        _drafts: Drafts

    _delegation: Any = None

    def _task_store(self) -> Any:
        d = self._delegation
        return getattr(d, "tasks", None) if d is not None else None

    def _runner(self) -> Any:
        d = self._delegation
        if d is None or d.runner is None:
            raise RunError("this workspace has no sub-agents (subagents.agents in workbench.yaml)")
        return d.runner

    def tasks(self, thread_id: str | None = None, *, all_threads: bool = False) -> list[TaskRecord]:
        """The sub-agent tasks this thread launched (every thread's with ``all_threads``), oldest first."""
        store = self._task_store()
        if store is None:
            from workbench.engine.task_store import SqliteTaskStore

            store = SqliteTaskStore(self.store)
        return store.tasks(None if all_threads else (thread_id or self.thread_id))

    def task(self, task_id: str) -> TaskRecord | None:
        store = self._task_store()
        return store.task(task_id) if store is not None else None

    def task_messages(self, task_id: str) -> list[Message]:
        """A task's sub-agent conversation (read-only: its thread belongs to the task)."""
        task = self.task(task_id)
        if task is None:
            raise RunError(f"no task {task_id!r} in this workspace")
        cp = self.store.latest_checkpoint(task.child_thread)
        return [Message.from_dict(m) for m in (cp.state.get("messages") or [])] if cp else []

    async def abort_task(self, task_id: str) -> TaskRecord | None:
        """Stop a task that has not settled (D10): it ends ``aborted``; its siblings go on.

        A task another process drives (a ``workbench run``, another window) is stopped there: the stop is
        recorded on its row and that process stops the run within a step (D7: the task never reads
        ``aborted`` while it runs). When that process has not stopped it in time, this raises
        ``RunError`` naming it; the stop stays asked."""
        runner = self._runner()
        record = await runner.abort(task_id)
        if record is not None and record.status not in SETTLED and record.status != "awaiting_decision":
            describe = getattr(runner, "driver_elsewhere", None)
            who = describe(record) if describe is not None else None
            raise RunError(f"task {task_id} is still running: it is driven by {who or 'another process'}, which "
                           f"has not stopped it yet. The stop stays asked: that process stops it at its next "
                           f"step (if it hangs, end it; the task is then settled aborted).")
        return record

    def continue_task(self, task_id: str, instructions: str) -> None:
        """A further turn for a settled task's sub-agent, in the background (D5, D10). A launch like the
        model's ``continue_task`` (D8, B1): a fresh envelope bounded by what is left of this thread's
        budgets; ``RunError`` naming the budget when nothing is left of it."""
        self._runner()  # no sub-agents: say so
        self._delegation.continue_for_person(task_id, instructions)

    def answer_task(self, task_id: str, decisions: Mapping[str, Any]) -> None:
        """Answer a background task's pending questions (D9: from the Tasks board or the inbox); the task
        goes on in the background."""
        task = self.task(task_id)
        if task is None:
            raise RunError(f"no task {task_id!r} in this workspace")
        self._runner().resume(task_id, decisions)
        self._drafts.clear(task.child_thread)

    def cut_task_waits(self) -> None:
        """End a ``wait_for_background_tasks`` in progress now (D7: the person cuts it short)."""
        if self._delegation is not None and self._delegation.runner is not None:
            self._delegation.runner.cut_waits()

    async def wait_for_tasks(self, timeout: float | None = None) -> bool:
        """Wait until every task of this thread has settled or waits for a decision (``workbench run``
        without ``--detach``). False when ``timeout`` came first."""
        if self._delegation is None or self._delegation.runner is None:
            return True
        ids = [t.id for t in self.tasks() if t.status not in SETTLED]
        return await self._delegation.runner.wait(ids, 10**9 if timeout is None else timeout) if ids else True
