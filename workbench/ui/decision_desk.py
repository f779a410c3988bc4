"""The window's side of deciding (Q1, Q2, G12): one place that knows what waits for the person.

``DecisionDesk`` belongs to the main window. It keeps the workspace's pending decisions
(``Session.pending_decisions``) fresh from the bridge's events, tells the status bar how many wait,
and is the one path for answering: the approval dialog and the Decisions panel both record a decision
with ``Session.record_decision`` and the run resumes (``Session.resume``) once its whole batch is
decided. A decision of another thread switches the window to that thread first (the run resumes
there, in sight). "Stop this run" ends a suspended run aborted (``Session.abandon``).

A background sub-agent task's decisions (D9: ``source == "task"``) are never answered by switching
the window to the task's thread: they are recorded on that thread (``record_decision(thread_id=…)``)
and the task resumes with ``Session.answer_task`` once its batch is decided — from the inbox or from
the approval dialog the Tasks board opens (``ask_task``). "Stop this run" on one aborts the task.

It also asks before quitting while a run is in flight or decisions wait (G12).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtWidgets import QMessageBox

from workbench.errors import WorkbenchError
from workbench.ui import qt_async
from workbench.ui.approval_dialog import STOP_RUN, ApprovalDialog
from workbench.ui.decision_dialogs import ask_decisions
from workbench.ui.safe_choice import ROLE, safe_choice_box

if TYPE_CHECKING:
    from workbench.session import PendingDecision, Question, Session

log = logging.getLogger(__name__)

REFRESH_EVERY_MS = 15_000
"""Re-read the inbox this often (another process may leave a thread waiting; the ages move on)."""

_REFRESH_ON = ("sig_thread_attached", "sig_run_started", "sig_run_finished", "sig_interrupt_raised",
               "sig_interrupt_answered")


class DecisionDesk(QObject):
    """Pending decisions of the window's workspace and the one way to answer them."""

    sig_changed = Signal(list)
    """The pending decisions changed: the new ``list[PendingDecision]``."""

    def __init__(self, window: Any) -> None:
        super().__init__(window)
        self.window = window
        self.items: list[PendingDecision] = []
        self.waiting = False  # the window's run loop waits on the approval or budget dialog
        self._stop_for: tuple[str, frozenset[str]] | None = None  # "Stop this run": the thread and its questions
        self.quit_box: QMessageBox | None = None
        self._soon = QTimer(self)
        self._soon.setSingleShot(True)
        self._soon.setInterval(0)
        self._soon.timeout.connect(self.refresh)
        self._tick = QTimer(self)
        self._tick.setInterval(REFRESH_EVERY_MS)
        self._tick.timeout.connect(self.refresh)
        self._tick.start()
        bridge = window.bridge
        for name in _REFRESH_ON:
            getattr(bridge, name).connect(lambda *_: self.refresh_soon())
        bridge.sig_thread_loaded.connect(lambda *_: self.refresh_soon())
        # D9: a background task of this thread starts or stops waiting for a decision
        self._task_status: dict[str, str] = {}
        bridge.sig_task_progressed.connect(self._on_task_progress)
        bridge.sig_task_settled.connect(lambda *_: self.refresh_soon())
        threads = getattr(window, "threads_panel", None)  # a deleted thread's decisions go with it
        if threads is not None and hasattr(threads, "sig_thread_deleted"):
            threads.sig_thread_deleted.connect(lambda *_: self.refresh_soon())

    # -- the list -------------------------------------------------------------------------------------
    @property
    def session(self) -> Session | None:
        return self.window.session

    @property
    def count(self) -> int:
        return len(self.items)

    def refresh_soon(self) -> None:
        """Refresh once the current burst of events is handled (events come in bursts)."""
        self._soon.start()

    def refresh(self) -> None:
        """Read the workspace's pending decisions again and tell the panel and the status bar."""
        session = self.session
        items: list[PendingDecision] = []
        if session is not None:
            try:
                items = session.pending_decisions()
            except WorkbenchError as e:  # e.g. a corrupt checkpoint: say so, keep the old list
                log.warning("could not read the pending decisions: %s", e)
                return
            except Exception as e:  # noqa: BLE001 - a closed store while the window switches workspaces
                log.debug("pending decisions not read: %s", e)
                items = []
        self.items = items
        set_count = getattr(self.window.status, "set_decisions", None)
        if callable(set_count):
            set_count(len(items))
        self.sig_changed.emit(list(items))

    def _on_task_progress(self, data: dict[str, Any]) -> None:
        task_id, status = str(data.get("task_id") or ""), str(data.get("status") or "")
        if self._task_status.get(task_id) != status:  # progress comes often: only a new status matters
            self._task_status[task_id] = status
            self.refresh_soon()

    # -- asking (the window's run loop) ---------------------------------------------------------------
    async def ask(self, session: Session, pending: list[Question]) -> dict[str, dict[str, Any]] | str | None:
        """The decisions to resume with: those made already (Q2) plus what the dialogs ask for the
        rest; None when the person left part-way (kept), ``STOP_RUN`` for "Stop this run"."""
        stop, self._stop_for = self._stop_for, None
        if stop is not None and stop == (session.thread_id, frozenset(q.id for q in pending)):
            return STOP_RUN  # only for the very questions the person stopped, never a later run's
        while True:
            # R3/Q: drafts are kept per question fingerprint (a draft made for an earlier question that
            # shared the id is gone), and every decision goes back bound to the question it was made
            # for: the resume is refused if the run waits on another one by then.
            drafts = session.decided()
            if all(q.id in drafts for q in pending):
                return bind(drafts, pending)
            self.waiting = True
            try:
                decisions = await ask_decisions(self.window, pending, session.backend.read, decided=drafts,
                                                on_decided=lambda qid, d, shown=tuple(pending): self._recorded(
                                                    qid, d, shown),
                                                compact=session.compact)
            finally:
                self.waiting = False
            if not isinstance(decisions, dict):
                return decisions
            now = session.pending
            if [question_fingerprint(q) for q in now] == [question_fingerprint(q) for q in pending]:
                return bind(decisions, pending)
            # Answered or asked again elsewhere while the dialog was up: what was decided answers
            # questions the run no longer asks. Say so and ask what it waits on now.
            changed = [q for q in now if question_fingerprint(q) not in {question_fingerprint(p) for p in pending}]
            self.window.status.showMessage(changed_message(changed) if changed else
                                           "The questions changed since they were shown; asking again.", 10000)
            if not now:
                return None
            pending = list(now)

    def _recorded(self, question_id: str, decision: dict[str, Any], shown: tuple[Question, ...] = ()) -> None:
        session = self.session
        if session is not None:
            session.record_decision(question_id, bind({question_id: decision}, shown)[question_id])
        self.refresh_soon()

    # -- answering (the inbox) ------------------------------------------------------------------------
    async def answer(self, item: PendingDecision, decision: dict[str, Any]) -> None:
        """Record one decision from the inbox; the run resumes once its batch is decided (Q1, Q2)."""
        session = self.session
        if session is not None and item.source == "task" and item.task_id:
            self._record_task_decision(session, item.task_id, item.thread_id, item.id,
                                       bind({item.id: decision}, [item.question])[item.id])
            return
        if session is None or not await self._bring(item):
            return
        try:  # R3/Q: bound to the question the row shows; refused if the run asks another one now
            session.record_decision(item.id, bind({item.id: decision}, [item.question])[item.id])
        except WorkbenchError:
            self.refresh()  # a stale row (answered elsewhere, or its run stopped): show what waits now
            raise  # the error bar says which question and what to do
        self.refresh()
        await self._sync(session)

    async def stop_run(self, item: PendingDecision) -> None:
        """"Stop this run" from the inbox: the item's suspended run ends aborted (a task's: the task is
        aborted, D10)."""
        session = self.session
        if session is not None and item.source == "task" and item.task_id:
            await session.abort_task(item.task_id)
            self.refresh()
            return
        if session is None or not await self._bring(item):
            return
        questions = session.pending
        if not questions:
            self.refresh()  # a stale row: that run no longer waits
            return
        self._stop_for = (session.thread_id, frozenset(q.id for q in questions))
        await self._restart()

    async def open_thread(self, item: PendingDecision) -> None:
        """Show the item's thread (its run asks again there); a task's: its transcript, read-only."""
        if item.source == "task" and item.task_id:
            show = getattr(self.window, "show_task_transcript", None)
            if callable(show):
                show(item.task_id)
            return
        await self._bring(item)

    # -- a background task's decisions (D9) -----------------------------------------------------------
    def _record_task_decision(self, session: Session, task_id: str, thread_id: str, question_id: str,
                              decision: dict[str, Any]) -> None:
        """Keep one decision of a task's batch; once the batch is decided the task resumes with them."""
        try:
            session.record_decision(question_id, decision, thread_id=thread_id)
        except WorkbenchError:
            self.refresh()  # a stale row (answered elsewhere, or the task aborted): show what waits now
            raise
        waiting = [i for i in session.pending_decisions() if i.thread_id == thread_id]
        batch = {i.id for i in waiting}
        decided = session.decided(thread_id)  # only drafts made for the questions waiting now
        dialog = self._open_dialog(batch)
        if batch and batch <= set(decided):
            task = session.task(task_id)
            if task is not None and task.status == "awaiting_decision":
                # R3/Q: each answer names its question, so the task refuses it if it asks another by then
                session.answer_task(task_id, bind(decided, [i.question for i in waiting]))
            if dialog is not None:
                dialog.sync(decided)  # a dialog the board opened for this task: it is done
        elif dialog is not None:
            dialog.sync(decided)
        self.refresh()

    async def ask_task(self, task_id: str) -> None:
        """"Answer decision…" on the Tasks board: the approval dialog (naming the sub-agent) for what
        the task waits on; the task resumes with ``Session.answer_task`` once its batch is decided. A
        foreground task's question is its parent run's: that run's dialog asks it."""
        session = self.session
        if session is None:
            return
        task = session.task(task_id)
        if task is None or task.status != "awaiting_decision":
            self.refresh()
            return
        if not task.background:  # the parent run waits on it, and its dialog names the sub-agent
            dialog = self._open_dialog({q.id for q in session.pending})
            if dialog is not None:
                dialog.raise_()
                dialog.activateWindow()
            else:
                self.window.on_review_pending()
            return
        items = [i for i in session.pending_decisions() if i.task_id == task_id]
        if not items:
            self.refresh()
            return
        ids = {i.id for i in items}
        open_already = self._open_dialog(ids)
        if open_already is not None:
            open_already.raise_()
            open_already.activateWindow()
            return
        from workbench.session import Question  # the facade's value type (a lazy import: startup stays light)

        named = {"agent": task.agent, "task_id": task.id, "background": True}  # the dialog names the sub-agent
        questions = [Question(i.question.id, i.question.kind, {**i.question.payload, **named}, i.question.call_id)
                     for i in items]
        thread = task.child_thread

        shown = [i.question for i in items]  # as stored: what the drafts are bound to (R3/Q)

        def recorded(question_id: str, decision: dict[str, Any]) -> None:
            session.record_decision(question_id, bind({question_id: decision}, shown)[question_id], thread_id=thread)
            self.refresh_soon()

        decisions = await ask_decisions(self.window, questions, session.backend.read,
                                        decided=session.decided(thread), on_decided=recorded)
        if decisions is None:
            return  # left part-way: what was decided is kept (Q2)
        task = session.task(task_id)
        if task is None or task.status != "awaiting_decision":
            self.refresh()  # answered from the inbox meanwhile, or aborted
            return
        if decisions == STOP_RUN:
            await session.abort_task(task_id)
        else:
            session.answer_task(task_id, bind(dict(decisions), shown))  # type: ignore[arg-type]
        self.refresh()

    async def _bring(self, item: PendingDecision) -> bool:
        """Make the item's thread the window's current one (switching is refused mid-run)."""
        session = self.session
        if session is None:
            return False
        if item.thread_id == session.thread_id:
            return True
        if session.running:
            self.window.status.showMessage(
                f"A run is in flight on this thread: stop it or wait before answering “{item.thread_title}”.", 8000)
            return False
        await self.window.switch_thread(item.thread_id)
        return session.thread_id == item.thread_id

    async def _sync(self, session: Session) -> None:
        """The run loop picks up what the inbox decided: the open approval dialog takes it; else the
        loop starts again (it resumes at once when everything is decided, or asks for the rest)."""
        drafts = session.decided()
        dialog = self._open_dialog({q.id for q in session.pending})
        if self.waiting and dialog is not None:
            undecided_elsewhere = [q for q in session.pending
                                   if q.id not in drafts and q.id not in {x.id for x in dialog.questions}]
            if not undecided_elsewhere:
                dialog.sync(drafts)
                return
        await self._restart()

    async def _restart(self) -> None:
        window = self.window
        if window.busy:
            if not self.waiting:
                return  # a run in flight: it is not waiting for these decisions
            await window._leave_decisions()
        window.on_review_pending()

    def _open_dialog(self, ids: set[str] | None = None) -> ApprovalDialog | None:
        """The visible approval dialog (asking any of the questions ``ids``, when given: the thread's run
        and a background task each have their own)."""
        for dialog in self.window.findChildren(ApprovalDialog):
            if dialog.isVisible() and (ids is None or ids & {q.id for q in dialog.questions}):
                return dialog
        return None

    # -- quitting (G12) -------------------------------------------------------------------------------
    def quit_question(self) -> str:
        """Why quitting needs a yes now ("" when it does not)."""
        window, session = self.window, self.session
        running = session is not None and (session.running or (window.busy and not self.waiting))
        if running:
            return "A run is in flight. Quitting stops it (it ends stopped, its partial answer kept)."
        if self.items or (session is not None and session.pending):
            n = max(len(self.items), 1)
            return (f"{n} decision{'s' if n != 1 else ''} waiting. The runs stay suspended and ask again "
                    "when you reopen the workspace.")
        return ""

    async def confirm_quit(self, why: str) -> bool:
        """Ask before quitting; the default button keeps the window open (Enter never quits)."""
        box, buttons = safe_choice_box(self.window, "quit_confirm", "Quit Agent Workbench?", why,
                                       [("quit_confirm_quit", "Quit", ROLE.DestructiveRole),
                                        ("quit_confirm_stay", "Keep working", ROLE.RejectRole)],
                                       safe="quit_confirm_stay")
        quit_button = buttons["quit_confirm_quit"]
        self.quit_box = box
        box.finished.connect(lambda *_: setattr(self, "quit_box", None))  # answered: a new close may ask again
        try:
            await qt_async.ask_dialog(box)
            return box.clickedButton() is quit_button
        except asyncio.CancelledError:
            return False
        finally:
            self.quit_box = None
            qt_async.release_dialog(box)

    def dismiss_quit_box(self) -> None:
        box = self.quit_box
        if box is not None:
            try:
                box.reject()
            except RuntimeError:
                pass


def bind(decisions: dict[str, Any], questions: Any) -> dict[str, Any]:
    """``workbench.decisions.bind`` (R3/Q: each decision names the question it answers), imported on use:
    the window's startup stays light."""
    from workbench.decisions import bind as bind_decisions

    return bind_decisions(decisions, questions)


def question_fingerprint(question: Question) -> str:
    from workbench.decisions import question_fingerprint as fingerprint

    return fingerprint(question)


def changed_message(changed: list[Question]) -> str:
    from workbench.decisions import changed_message as message

    return message(changed)


__all__ = ["DecisionDesk"]
