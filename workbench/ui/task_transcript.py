"""A sub-agent task's conversation, read-only, in the window's centre (D10 "open its transcript").

``TaskTranscript`` is a bar — "Sub-agent task writer:ab12cd34 — writer (read-only)", the task's status,
and **Back to the thread** — over a ``TranscriptView`` of its own, fed by a bridge that follows no
session: it shows only the messages it is given (``Session.task_messages``), so nothing of the
thread's live run reaches it and nothing in it can run or resume anything.

``TaskTranscriptMode`` puts it in the window: the centre's transcript and the task's share a stack;
while a task is shown the prompt box and Send are disabled (nothing is ever sent to a task's thread:
"Continue…" on the Tasks board gives a task further instructions), and the view follows the task's
``task_progress`` events (its committed messages are read again). Opening another thread, a new one or
another workspace goes back to the thread.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QEvent, QObject, Qt, QTimer, Signal, Slot
from PySide6.QtWidgets import QFrame, QHBoxLayout, QPushButton, QStackedWidget, QVBoxLayout, QWidget

from workbench.ui.bridge import Bridge
from workbench.ui.plain_text import plain_label, plain_tooltip
from workbench.ui.tasks_panel import STATUS_HELP, status_text
from workbench.ui.transcript import TranscriptView
from workbench.ui.transcript_style import palette

if TYPE_CHECKING:
    from workbench.session import Message, Question, TaskRecord

log = logging.getLogger(__name__)

RELOAD_MS = 250
"""A shown task's messages are read again this long after its last progress event."""

READ_ONLY_PLACEHOLDER = "Viewing a sub-agent task's transcript (read-only): “Back to the thread” to write again."


class TaskTranscript(QWidget):
    """The read-only transcript of one task, with the bar that says so and leads back."""

    sig_back_requested = Signal()
    """"Back to the thread" was clicked."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("task_transcript")
        self.task_id: str | None = None
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(4)
        self.bar = QFrame(self)
        self.bar.setObjectName("task_transcript_bar")
        self.bar.setFrameShape(QFrame.Shape.StyledPanel)
        bar = QHBoxLayout(self.bar)
        bar.setContentsMargins(8, 4, 8, 4)
        text = QVBoxLayout()
        text.setSpacing(0)
        self.title = plain_label(self.bar)
        self.title.setObjectName("task_transcript_title")
        self.title.setStyleSheet("font-weight: 600;")
        self.title.setWordWrap(True)
        self.title.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        text.addWidget(self.title)
        self.status = plain_label(self.bar)
        self.status.setObjectName("task_transcript_status")
        self.status.setProperty("role", "muted")
        self.status.setWordWrap(True)
        text.addWidget(self.status)
        bar.addLayout(text, 1)
        self.back_button = QPushButton("Back to the thread", self.bar)
        self.back_button.setObjectName("task_transcript_back")
        self.back_button.setToolTip("Show the thread's own transcript again")
        self.back_button.setAutoDefault(False)
        self.back_button.clicked.connect(lambda _=False: self.sig_back_requested.emit())
        bar.addWidget(self.back_button, 0, Qt.AlignmentFlag.AlignVCenter)
        lay.addWidget(self.bar)
        self._colors: tuple[str, ...] = ()
        self._apply_colors()
        # A bridge that follows no session: the view renders only what ``show_task`` gives it.
        self._quiet = Bridge(parent=self)
        self.view = TranscriptView(self._quiet, self, inspect_prompts=False)  # a task's calls: not the thread's
        self.view.setObjectName("task_transcript_view")
        self.view.setAccessibleName("Sub-agent task transcript (read-only)")
        lay.addWidget(self.view, 1)

    def _apply_colors(self) -> None:
        """The bar in the transcript's "pending" tint: plainly not the thread's own transcript."""
        colors = tuple(palette()["pending"])
        if colors == self._colors:
            return
        self._colors = colors
        bg, border, fg = colors
        self.bar.setStyleSheet(f"QFrame#task_transcript_bar {{ background: {bg}; border: 1px solid {border}; "
                               f"border-radius: 4px; }} QFrame#task_transcript_bar QLabel {{ color: {fg}; }}")

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 - Qt override
        """Follow a change of the light/dark theme."""
        super().changeEvent(event)
        if event.type() in (QEvent.Type.StyleChange, QEvent.Type.PaletteChange):
            self._apply_colors()

    def show_task(self, task: TaskRecord, messages: list[Message], pending: list[Question] | None = None) -> None:
        """Show ``task``'s conversation (its committed messages), the questions it waits on (their
        calls marked waiting, and "Review…", which asks them: ``sig_decisions_requested``) and its
        state in the bar."""
        same = task.id == self.task_id
        self.task_id = task.id
        kind = "background" if task.background else "foreground"
        self.title.setText(f"Sub-agent task {task.id} — {task.agent} (read-only)")
        ending = ""
        if task.status == "failed" and task.error:
            ending = f": {task.error}"
        elif task.status in ("aborted", "expired") and task.error:
            ending = f" ({task.error})"
        self.status.setText(f"{status_text(task.status)}{ending} · {kind} task of this thread · "
                            f"{task.usage.total_tokens:,} tokens")
        self.status.setToolTip(plain_tooltip(STATUS_HELP.get(task.status, task.status)))
        self.bar.setAccessibleName(self.title.text())
        bar = self.view.verticalScrollBar()
        at_end = bar.value() >= bar.maximum() - 8
        keep = bar.value()
        self.view.load_thread({"messages": messages, "pending": list(pending or []), "status": None, "model": None,
                               "error": None})
        if not messages:
            self.view.empty_hint.setText("<p><b>No messages in this task yet.</b></p>"
                                         "<p>It is queued or has just started.</p>")
        if same and not at_end:  # a refresh while the person reads further up: stay there
            QTimer.singleShot(0, self, lambda: bar.setValue(keep))


class TaskTranscriptMode(QObject):
    """The window's centre shows either the thread's transcript or a task's, read-only (see the module)."""

    sig_changed = Signal(str)
    """The centre now shows this task's transcript ("" : the thread's again)."""

    def __init__(self, window: Any) -> None:
        super().__init__(window)
        self.window = window
        self.view = TaskTranscript(window)
        self.stack = QStackedWidget(window)
        self.stack.setObjectName("centre_stack")
        index = window.splitter.indexOf(window.transcript)
        window.splitter.replaceWidget(index, self.stack)
        self.stack.addWidget(window.transcript)
        self.stack.addWidget(self.view)
        self.stack.setCurrentWidget(window.transcript)
        self._placeholder = window.input.placeholderText()
        self._reload = QTimer(self)
        self._reload.setSingleShot(True)
        self._reload.setInterval(RELOAD_MS)
        self._reload.timeout.connect(self.refresh)
        self._reads = 0  # bumped by each refresh: only the newest read is shown
        self.view.sig_back_requested.connect(self.back)
        self.view.view.sig_decisions_requested.connect(self._review)  # "Review…" on a waiting task
        bridge = window.bridge
        bridge.sig_thread_attached.connect(lambda _tid: self.back())
        bridge.sig_task_progressed.connect(self._on_progress)
        bridge.sig_task_settled.connect(self._on_progress)

    @property
    def task_id(self) -> str | None:
        """The task shown, None while the thread's transcript is."""
        return self.view.task_id if self.stack.currentWidget() is self.view else None

    @property
    def is_open(self) -> bool:
        return self.task_id is not None

    def open(self, task_id: str) -> bool:
        """Show the task's transcript read-only; False when the session has no such task."""
        session = self.window.session
        if session is None:
            return False
        task = session.task(task_id)
        if task is None:
            self.window.status.showMessage(f"No task {task_id} in this workspace.", 5000)
            return False
        self.view.task_id = None  # a new task: start at its end
        self.view.show_task(task, session.task_messages(task_id), self._pending(session, task))
        self.stack.setCurrentWidget(self.view)
        self._set_prompt(read_only=True)
        self.view.back_button.setFocus()
        self.sig_changed.emit(task_id)
        return True

    @Slot()
    def back(self) -> None:
        """The thread's transcript again; the prompt box writes to the thread."""
        self._reload.stop()
        if self.stack.currentWidget() is self.view:
            self.stack.setCurrentWidget(self.window.transcript)
            self._set_prompt(read_only=False)
            self.window.input.setFocus()
            self.sig_changed.emit("")
        self.view.task_id = None

    def refresh(self) -> None:
        """Read the shown task's messages again — on a worker thread: it runs while the task streams
        (every ``RELOAD_MS`` with progress), and a long task's conversation takes a while to read."""
        task_id = self.task_id
        session = self.window.session
        if task_id is None or session is None:
            return
        self._reads += 1
        from workbench.ui import qt_async

        qt_async.start(self._refresh(session, task_id, self._reads), name="task-transcript-refresh")

    async def _refresh(self, session: Any, task_id: str, ticket: int) -> None:
        def read() -> tuple[TaskRecord | None, list[Message], list[Question]]:
            task = session.task(task_id)
            if task is None:
                return None, [], []
            return task, session.task_messages(task_id), self._pending(session, task)

        try:
            task, messages, pending = await asyncio.to_thread(read)
        except Exception as e:  # noqa: BLE001 - a store closing under a workspace switch
            log.debug("task transcript not refreshed: %s", e)
            return
        if ticket != self._reads or self.task_id != task_id or session is not self.window.session:
            return  # read again since, or another task (or none) is shown now
        if task is None:
            self.back()
            return
        self.view.show_task(task, messages, pending)

    @staticmethod
    def _pending(session: Any, task: TaskRecord) -> list[Question]:
        """What the task waits on: a background task's questions (the inbox's), a foreground task's
        (its parent run's, naming the task)."""
        if task.status != "awaiting_decision":
            return []
        if task.background:
            return [i.question for i in session.pending_decisions() if i.task_id == task.id]
        return [q for q in session.pending if q.payload.get("task_id") == task.id]

    def _review(self) -> None:
        """"Review…" in a waiting task's transcript: its decisions, as Answer decision… asks them."""
        task_id, desk = self.task_id, getattr(self.window, "desk", None)
        if task_id is not None and desk is not None:
            from workbench.ui import qt_async

            qt_async.start(desk.ask_task(task_id), name="task-review")

    def _on_progress(self, data: dict[str, Any]) -> None:
        if self.task_id is not None and data.get("task_id") == self.task_id and not self._reload.isActive():
            self._reload.start()

    def _set_prompt(self, *, read_only: bool) -> None:
        w = self.window
        w.input.setEnabled(not read_only)
        w.input.setPlaceholderText(READ_ONLY_PLACEHOLDER if read_only else self._placeholder)
        if read_only:
            w.send_button.setEnabled(False)
        else:
            w.send_button.setEnabled(not w.busy)


__all__ = ["READ_ONLY_PLACEHOLDER", "TaskTranscript", "TaskTranscriptMode"]
