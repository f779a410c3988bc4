"""The Decisions dock (Q1): every decision waiting in the workspace, answered in place.

Lists the tool approvals and budget holds that suspended runs wait on, in this thread, in the
workspace's other threads and in background sub-agent tasks (``source == "task"``, D9: "writer · task
writer:ab12cd34"), each with its source (thread, agent, task), its place in its batch, and its age. The selected one shows its
reason and arguments with the dialog's actions: Approve / Edit arguments (a live JSON check) / Reject
with a message for a tool call, Continue / Stop for a budget hold, and "Stop this run". Enter in the
message rejects; Enter never approves (G7).

Answering goes through the window's ``DecisionDesk`` (the same ``Session`` calls as the approval
dialog). A decision of another thread opens that thread first: its run resumes there, in sight. A
task's decision is answered where it is (the task resumes in the background once its batch is
decided); its "Open thread" shows the task's transcript read-only and "Stop this run" aborts the task.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Qt, QTimer, Slot
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from workbench.budget_words import hold_fields, more_words, until_words
from workbench.decisions import format_age
from workbench.ui.buttons import quiet_button
from workbench.ui.decision_settle import DecisionSettle
from workbench.ui import qt_async
from workbench.ui.plain_text import plain_label, plain_tooltip, visible_json, visible_line

if TYPE_CHECKING:
    from workbench.decisions import PendingDecision

_KEY_ROLE = Qt.ItemDataRole.UserRole
_DRAFT_WORDS = {"approve": "approved", "edit": "edited", "reject": "rejected", "respond": "answered"}


class DecisionsPanel(QWidget):
    """The inbox: pending decisions across the workspace, with the dialog's actions (Q1)."""

    def __init__(self, parent: QWidget | None = None, *, desk: Any = None) -> None:
        super().__init__(parent)
        self.setObjectName("decisionsPanel")
        self.setFocusPolicy(Qt.FocusPolicy.ClickFocus)  # it holds the focus after a decision (``_focus_off``)
        self.desk = desk if desk is not None else getattr(parent, "desk", None)
        self.items: list[PendingDecision] = []
        self._editing = False

        lay = QVBoxLayout(self)
        lay.setContentsMargins(6, 6, 6, 6)
        self.summary = plain_label(self)
        self.summary.setObjectName("decisionsSummary")
        self.summary.setWordWrap(True)
        lay.addWidget(self.summary)

        split = QSplitter(Qt.Orientation.Vertical, self)
        split.setChildrenCollapsible(False)
        lay.addWidget(split, 1)
        self.tree = QTreeWidget(self)
        self.tree.setObjectName("decisionsList")
        self.tree.setAccessibleName("Pending decisions")
        self.tree.setColumnCount(3)
        self.tree.setHeaderLabels(["Decision", "Source", "Age"])
        self.tree.setRootIsDecorated(False)
        self.tree.setUniformRowHeights(True)
        self.tree.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        header = self.tree.header()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Interactive)
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.ResizeToContents)
        self.tree.setColumnWidth(1, 150)
        self.tree.currentItemChanged.connect(lambda *_: self._chosen())
        split.addWidget(self.tree)

        detail = QWidget(self)
        dl = QVBoxLayout(detail)
        dl.setContentsMargins(0, 0, 0, 0)
        self.title = plain_label(detail)
        self.title.setObjectName("decisionTitle")
        self.title.setWordWrap(True)
        self.title.setStyleSheet("font-weight: 600;")
        self.title.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        dl.addWidget(self.title)
        self.reason = plain_label(detail)
        self.reason.setObjectName("decisionReason")
        self.reason.setWordWrap(True)
        self.reason.setProperty("role", "muted")
        self.reason.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        dl.addWidget(self.reason)
        self.args = QPlainTextEdit(detail)
        self.args.setObjectName("decisionArguments")
        self.args.setAccessibleName("Arguments of the call")
        self.args.setReadOnly(True)
        self.args.setMinimumHeight(60)
        self.args.textChanged.connect(self._validate)
        dl.addWidget(self.args, 1)
        self.edit_error = plain_label(detail)
        self.edit_error.setObjectName("decisionEditError")
        self.edit_error.setProperty("status", "error")
        self.edit_error.hide()
        dl.addWidget(self.edit_error)
        self.message = QLineEdit(detail)
        self.message.setObjectName("decisionMessage")
        self.message.setAccessibleName("Message if you reject or stop")
        self.message.setPlaceholderText("Message if you reject or stop (Enter rejects)")
        self.message.returnPressed.connect(self._enter_in_message)  # G7: Enter rejects, never approves
        dl.addWidget(self.message)

        row = QHBoxLayout()
        self.approve_button = self._button("Approve", "decisionApprove", self._approve, detail)
        self.edit_button = self._button("Edit arguments", "decisionEdit", self._toggle_edit, detail)
        self.continue_button = self._button("Continue", "decisionContinue", self._continue, detail)
        self.continue_button.setToolTip("Let the run go on: it may spend its configured limit again (the "
                                        "budget dialog can allow another amount)")
        row.addWidget(self.approve_button)
        row.addWidget(self.continue_button)
        row.addWidget(self.edit_button)
        row.addStretch(1)
        self.reject_button = self._button("Reject", "decisionReject", self._reject, detail)
        self.stop_hold_button = self._button("Stop", "decisionStop", self._reject, detail)
        self.stop_hold_button.setToolTip("Stop at the budget (the message is the reason)")
        row.addWidget(self.reject_button)
        row.addWidget(self.stop_hold_button)
        dl.addLayout(row)
        row2 = QHBoxLayout()
        self.open_button = self._button("Open thread", "decisionOpenThread", self._open_thread, detail)
        self.open_button.setToolTip("Show this decision's thread (its run asks there)")
        self.stop_run_button = self._button("Stop this run", "decisionStopRun", self._stop_run, detail)
        self.stop_run_button.setToolTip("Abandon the run: no call of it runs, it ends stopped (aborted)")
        row2.addWidget(self.open_button)
        row2.addStretch(1)
        row2.addWidget(self.stop_run_button)
        dl.addLayout(row2)
        split.addWidget(detail)
        split.setStretchFactor(0, 1)
        split.setStretchFactor(1, 1)
        split.setSizes([260, 320])
        self.detail = detail
        # G7, Q2: a decision's gesture (a double click, a key pressed twice) never decides the row that
        # takes its place; the message's Enter rejects on purpose (decision_settle.py)
        self.settle = DecisionSettle(self, (self.approve_button, self.continue_button, self.reject_button,
                                            self.stop_hold_button, self.stop_run_button, self.message),
                                     exempt=self.message, focus_off=self._focus_off)
        self._shown: str | None = None  # the key of the question whose details are on screen (what a press answers)
        self._left = False  # the selected question left the list: nothing is selected until the person picks

        self._ages = QTimer(self)  # the ages move on while the panel is in sight
        self._ages.setInterval(10_000)
        self._ages.timeout.connect(self._update_ages)
        self._ages.start()
        if self.desk is not None:
            self.desk.sig_changed.connect(self.show_decisions)
            self.show_decisions(list(self.desk.items))
        else:
            self.show_decisions([])

    @staticmethod
    def _button(text: str, name: str, slot: Any, parent: QWidget) -> QPushButton:
        return quiet_button(parent, text, name, slot)  # G7: no button here is pressed by Enter

    # -- the panel contract ---------------------------------------------------------------------------
    def set_session(self, session: Any) -> None:
        if self.desk is not None:
            self.desk.refresh_soon()

    def handle_event(self, event: Any) -> None:
        """The desk follows the bridge itself; nothing to do per event."""

    # -- the list -------------------------------------------------------------------------------------
    @Slot(list)
    def show_decisions(self, items: list[PendingDecision]) -> None:
        """Rebuild the list, keeping the selected question. One that left the list (answered, here or
        elsewhere) is followed by no selection, never by the next row: a second click meant for it
        would answer a call the person never looked at. The details of a question still selected are
        left as they are — an argument edit or a half-typed message survive a refresh."""
        selected = self.selected()
        keep = selected.key if selected is not None else None
        self.items = list(items)
        self.tree.blockSignals(True)
        try:
            self.tree.clear()
            rows = []
            for item in self.items:
                # one line each, nothing hidden (plain_text.visible_line): the model's and the thread's text
                row = QTreeWidgetItem([visible_line(self._what(item)), visible_line(self._source(item)),
                                       format_age(item.age())])
                row.setData(0, _KEY_ROLE, item.key)  # not the id: two threads' calls may share one
                row.setToolTip(0, plain_tooltip(visible_line(item.summary())))  # Q1: the model's command
                if item.source == "task":
                    row.setToolTip(1, plain_tooltip(f"Background task {item.task_id} of the sub-agent {item.agent} "
                                                    f"(its thread {item.thread_id})"))
                else:
                    now = " — the thread open now" if item.current else ""
                    row.setToolTip(1, plain_tooltip(f"Thread “{item.thread_title}” ({item.thread_id}), agent "
                                                    f"{item.agent}{now}"))
                rows.append(row)
            self.tree.addTopLevelItems(rows)
            index = next((i for i, it in enumerate(self.items) if it.key == keep), -1)
            self._left = self._left or (keep is not None and index < 0)
            if index < 0 and keep is None and self.items and not self._left:
                index = 0  # the first question, until one has been answered or left
            if index >= 0:
                self.tree.setCurrentItem(self.tree.topLevelItem(index))
        finally:
            self.tree.blockSignals(False)
        n = len(self.items)
        threads = len({i.thread_id for i in self.items})
        if n:
            self.summary.setText(f"{n} decision{'s' if n != 1 else ''} waiting in {threads} "
                                 f"thread{'s' if threads != 1 else ''}.")
        else:
            self.summary.setText("Nothing waits for you: runs that need a decision show up here.")
        now, before = self.selected(), self._shown
        self._show_selected(keep_input=now is not None and now.key == before)
        if now is not None and before is not None and now.key != before:  # another question, under the hand
            self.settle.moved_on(("any", None, None), move_focus=self.settle.has_focus())

    @staticmethod
    def _what(item: PendingDecision) -> str:
        """Short enough for a narrow dock: the tool and the path's last two parts (the full path is in
        the tooltip and the details)."""
        text = item.summary()
        path = item.arguments.get("path")
        if item.kind == "tool_approval" and isinstance(path, str) and path.count("/") > 2:
            text = f"{item.tool} …/{'/'.join(path.rstrip('/').split('/')[-2:])}"
        if item.draft:
            text += f" — {_DRAFT_WORDS.get(str(item.draft.get('decision')), 'decided')}, waiting for the rest"
        return text

    @staticmethod
    def _source(item: PendingDecision) -> str:
        if item.source == "task" and item.task_id:  # D9: the sub-agent and its task
            where = f"task {item.task_id}"  # "task writer:ab12cd34": the id starts with the agent's name
            return f"{item.index + 1}/{item.count} · {where}" if item.count > 1 else where
        where = "This thread" if item.current else f"“{item.thread_title}”"
        if item.count > 1:  # Q2: its place in its batch
            where = f"{item.index + 1}/{item.count} · {where}"
        if item.source != "thread":
            where = f"{item.source}: {where}"
        return where if item.agent == "main" else f"{where} · {item.agent}"

    def _update_ages(self) -> None:
        if not self.isVisible():
            return
        for i, item in enumerate(self.items):
            row = self.tree.topLevelItem(i)
            if row is not None:
                row.setText(2, format_age(item.age()))

    def selected(self) -> PendingDecision | None:
        row = self.tree.currentItem()
        if row is None:
            return None
        key = row.data(0, _KEY_ROLE)
        return next((i for i in self.items if i.key == key), None)

    def select(self, question_id: str) -> None:
        for i, item in enumerate(self.items):
            if item.id == question_id:
                self.tree.setCurrentItem(self.tree.topLevelItem(i))
                return

    def _focus_off(self) -> None:
        """After a decision the focus goes to the panel itself, where Space and Enter decide nothing — not
        to the list: a list that gains the focus with no current row makes its first row current, which
        would choose the next question for the person."""
        self.setFocus(Qt.FocusReason.OtherFocusReason)

    def _chosen(self) -> None:
        """The person selected a row (the rebuild blocks the list's signals)."""
        self._left = False
        self._show_selected()

    def _show_selected(self, *, keep_input: bool = False) -> None:
        """The selected question's details. ``keep_input``: the same question again (a refresh) — an
        argument edit under way and a typed message stay."""
        item = self.selected()
        self._shown = item.key if item is not None else None
        if not keep_input:
            self._editing = False
            self.args.setReadOnly(True)
            self.edit_button.setText("Edit arguments")
            self.approve_button.setText("Approve")
            self.message.clear()
        self.detail.setEnabled(item is not None)
        if item is None:
            self.title.setText("")
            self.reason.setText("")
            self.args.setPlainText("")
            for b in (self.approve_button, self.edit_button, self.reject_button, self.continue_button,
                      self.stop_hold_button, self.open_button):
                b.setVisible(False)
            self._validate()
            return
        tool = item.kind == "tool_approval"
        hold = item.kind == "budget_hold"
        self._show_title(item)
        payload = item.question.payload
        if tool:
            reason = str(payload.get("reason") or "your permission rules ask before this call")
            rule = payload.get("rule")
            self.reason.setText(f"Why it asks: {visible_line(reason)}" + (f"\nRule: {visible_line(rule)}" if rule else ""))
            if not self._editing:
                self.args.setPlainText(visible_json(item.arguments))
        else:
            shown = {k: v for k, v in payload.items() if k not in ("arguments",)}
            why = str(payload.get("reason") or "")
            fields = hold_fields(payload) if hold else []
            amounts = {f: cap for f, _spent, _limit, cap in fields}  # B3: Continue allows the limit again
            allow = ", ".join(more_words(f, v) for f, v in amounts.items())
            self.continue_button.setText(f"Allow {allow}" if allow else "Continue")
            until = until_words({f: spent for f, spent, _l, _c in fields}, amounts) if amounts else ""
            self.reason.setText((f"{why}. " if why else "The run reached its budget. ")
                                + (f"Allow {allow}: the run may go on until {until}; or stop." if allow
                                   else "Continue (it may spend its configured limit again), or stop.") if hold
                                else f"A question of kind {item.kind}.")
            self.args.setPlainText(visible_json(shown))
        self.approve_button.setVisible(not hold)
        self.edit_button.setVisible(tool)
        self.reject_button.setVisible(not hold)
        self.continue_button.setVisible(hold)
        self.stop_hold_button.setVisible(hold)
        task = item.source == "task" and bool(item.task_id)
        self.open_button.setVisible(not item.current)
        self.open_button.setText("Open transcript" if task else "Open thread")
        self.open_button.setToolTip("Show the task's conversation, read-only" if task else
                                    "Show this decision's thread (its run asks there)")
        self.stop_run_button.setText("Abort task" if task else "Stop this run")
        self.stop_run_button.setToolTip("Abort the background task: no call of it runs, it ends aborted" if task
                                        else "Abandon the run: no call of it runs, it ends stopped (aborted)")
        self._validate()

    def _show_title(self, item: PendingDecision) -> None:
        where = "this thread" if item.current else f"thread “{visible_line(item.thread_title)}”"
        if item.source == "task" and item.task_id:
            where = f"the sub-agent {item.agent}'s background task {item.task_id}"
        age = format_age(item.age())
        self.title.setText(f"{visible_line(item.summary())} — asked {age if age == 'just now' else age + ' ago'} in {where}"
                           + (f" (call {item.index + 1} of {item.count})" if item.count > 1 else ""))

    # -- actions --------------------------------------------------------------------------------------
    def _edited(self) -> tuple[dict[str, Any] | None, str]:
        try:
            value = json.loads(self.args.toPlainText())
        except json.JSONDecodeError as e:
            return None, f"Not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})"
        if not isinstance(value, dict):
            return None, "The arguments must be a JSON object ({ … })"
        return value, ""

    @Slot()
    def _validate(self) -> None:
        error = self._edited()[1] if self._editing else ""
        self.edit_error.setText(error)
        self.edit_error.setVisible(bool(error))
        self.approve_button.setEnabled(not error)

    def _toggle_edit(self) -> None:
        item = self.selected()
        if item is None or item.kind != "tool_approval":
            return
        self._editing = not self._editing
        self.args.setReadOnly(not self._editing)
        self.edit_button.setText("Cancel edit" if self._editing else "Edit arguments")
        self.approve_button.setText("Run edited" if self._editing else "Approve")
        if not self._editing:
            self.args.setPlainText(visible_json(item.arguments))
        else:
            self.args.setFocus()
        self._validate()

    def _answer(self, decision: dict[str, Any]) -> None:
        item = self.selected()
        if item is None or self.desk is None or item.key != self._shown:
            return  # only the question whose details are on screen is answered
        source = self.settle.decided()
        qt_async.start(self.desk.answer(item, decision), name="inbox-answer")
        self.settle.moved_on(source)

    def _approve(self) -> None:
        item = self.selected()
        if item is None:
            return
        decision: dict[str, Any] = {"decision": "approve"}
        if self._editing:
            args, error = self._edited()
            if args is None:
                self._validate()
                return
            if args != item.arguments:
                decision = {"decision": "edit", "arguments": args}
        self._answer(decision)

    def _reject(self) -> None:
        item = self.selected()
        if item is None:
            return
        text = self.message.text().strip()
        default = "Stopped at the budget limit." if item.kind == "budget_hold" else "The user rejected this call."
        self._answer({"decision": "reject", "message": text or default})

    def _enter_in_message(self) -> None:
        self._reject()  # G7: Enter in the message rejects (or stops a budget hold), with the message

    def _continue(self) -> None:
        self._answer({"decision": "approve"})

    def _open_thread(self) -> None:
        item = self.selected()
        if item is not None and self.desk is not None:
            qt_async.start(self.desk.open_thread(item), name="inbox-open-thread")

    def _stop_run(self) -> None:
        item = self.selected()
        if item is not None and self.desk is not None and item.key == self._shown:
            source = self.settle.decided()
            qt_async.start(self.desk.stop_run(item), name="inbox-stop-run")
            self.settle.moved_on(source)


__all__ = ["DecisionsPanel"]
