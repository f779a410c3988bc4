"""The budget hold dialog (G3, B3): a run reached an interrupting budget and waits for the user.

It shows which limit was reached, spent against limit per field, and the held tool calls (tool and
arguments) of every ``budget_hold`` question of the step. The holds of one step share one decision
(``harness/budget.py``), so one dialog answers them all:

- **Allow N more** → ``{"decision": "approve", "allow_more": {field: amount}}`` (G11): the run may
  spend that amount more of each field at its limit — "allow 300 more tokens", "allow $0.01 more". The
  amount starts at the configured limit (B3: the full limit again) and can be changed; the line under
  it says the total the run may reach, which is exactly where the engine holds it again (the other
  fields of a held budget get their full limit again);
- **Compact and continue** (when the dialog is given ``compact``, the thread's ``Session.compact``; C7):
  the thread's history is compressed first — the run is suspended, so it happens at once — then the
  hold is answered as **Allow N more** with the same amounts; the next model calls send less. If the
  compaction fails or finds nothing to make smaller, the dialog stays open and says so;
- **Stop** (with an optional reason) → ``{"decision": "reject", "reason": …, "message": …}``: the held
  calls are not run and the run ends ``aborted``, keeping its partial answer.

Closing the dialog without choosing fails closed: it stops the run, saying so in the reason.

``ask_budget_hold(question, parent)`` / ``ask_budget_holds(questions, parent)`` ``open()`` the dialog and
await its ``finished`` signal as a Future: never ``exec()``, so the asyncio loop keeps running.
Cancelling the awaiting task closes the dialog.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QDoubleSpinBox,
    QFormLayout,
    QGridLayout,
    QGroupBox,
    QHeaderView,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from workbench.budget_words import hold_fields, more_words, until_words
from workbench.errors import WorkbenchError
from workbench.ui import qt_async
from workbench.ui.budget_panel import LEVEL_COLORS, field_label, format_amount, level_for
from workbench.ui.decision_settle import DecisionSettle
from workbench.ui.plain_text import escape as _html, plain_label, plain_tooltip, rich_label

log = logging.getLogger(__name__)

Compact = Callable[[], Awaitable[Any]]
"""``Session.compact`` of the held run's thread: the record of the compression, or None (nothing to do)."""

__all__ = ["BudgetHoldDialog", "ask_budget_hold", "ask_budget_holds", "CLOSED_REASON"]

CLOSED_REASON = "the budget hold dialog was closed without a decision"
_MAX_ARGS_CHARS = 1500


def _question_parts(q: Any) -> tuple[str, dict[str, Any]]:
    """``(id, payload)`` of a ``Question``, its ``to_dict()``, or a bare payload dict."""
    if isinstance(q, Mapping):
        payload = q.get("payload")
        return str(q.get("id", "")), dict(payload if isinstance(payload, Mapping) else q)
    return str(getattr(q, "id", "")), dict(getattr(q, "payload", {}) or {})


def _args_text(arguments: Any) -> str:
    try:
        text = json.dumps(arguments, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = repr(arguments)
    return text if len(text) <= _MAX_ARGS_CHARS else text[: _MAX_ARGS_CHARS - 1] + "…"


def _caps_cost(budget: Mapping[str, Any]) -> bool:
    """Whether a held budget limits cost (its ``fields``, or the one ``field`` of an older payload)."""
    fields = budget.get("fields")
    return "cost_usd" in fields if isinstance(fields, Mapping) and fields else budget.get("field") == "cost_usd"


class BudgetHoldDialog(QDialog):
    """Decide one step's budget holds: allow more, compact and continue (given ``compact``), or stop with a
    reason."""

    def __init__(self, question: Any | Sequence[Any], parent: QWidget | None = None, *,
                 compact: Compact | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("budgetHoldDialog")
        self._compact = compact
        self._compacting: asyncio.Future[Any] | None = None
        self.compact_button: QPushButton | None = None
        self.compacted: dict[str, Any] | None = None
        """The compression "Compact and continue" made (its record), else None."""
        self.setWindowTitle("Budget reached — the run is on hold")
        items = list(question) if isinstance(question, (list, tuple)) else [question]
        if not items:
            raise ValueError("BudgetHoldDialog needs at least one budget_hold question")
        parts = [_question_parts(q) for q in items]
        self.question_ids = [qid for qid, _ in parts]
        self.payloads = [p for _, p in parts]
        first = self.payloads[0]
        self._decision: dict[str, Any] | None = None

        # Every budget at its limit (the payload's "budgets"), each with all its capped fields.
        self.budgets: list[dict[str, Any]] = [dict(b) for b in (first.get("budgets") or [first])
                                              if isinstance(b, Mapping)]

        self.headline = rich_label(self)  # our bold; the reason escaped
        self.headline.setObjectName("budgetHoldHeadline")
        self.headline.setWordWrap(True)
        self.headline.setText(f"<b>{_html(self._reason(first))}</b>")
        explain = plain_label(
            "The run is paused before going on. Allow it to spend more, or stop it (its answer so far is "
            "kept). Spent and limit are this run's totals, as in the Budget panel and the status bar.",
            self,
        )
        explain.setWordWrap(True)
        explain.setProperty("role", "muted")

        self.table = self._fields_table()

        self.unpriced_label = plain_label(
            "A model in this run has no price in litellm: its calls count tokens only, not cost.", self
        )
        self.unpriced_label.setWordWrap(True)
        self.unpriced_label.setProperty("role", "muted")
        # Only where cost is capped: an unpriced model says nothing about a step or token limit.
        self.unpriced_label.setVisible(any(b.get("priced") is False and _caps_cost(b) for b in self.budgets))

        calls_title = rich_label(f"<b>{_html(self._calls_title())}</b>", self)  # our bold; the words escaped
        self.calls_view = QPlainTextEdit(self)
        self.calls_view.setObjectName("budgetHoldCalls")
        self.calls_view.setAccessibleName("Held calls")
        self.calls_view.setReadOnly(True)
        self.calls_view.setProperty("role", "code")
        self.calls_view.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        self.calls_view.setPlainText(self._calls_text())
        lines = min(max(2 * self.calls_view.document().blockCount(), 3), 8)  # room for wrapped lines
        self.calls_view.setMinimumHeight(self.calls_view.fontMetrics().lineSpacing() * 3 + 14)
        self.calls_view.setMaximumHeight(self.calls_view.fontMetrics().lineSpacing() * lines + 14)

        # The three answers, one row each.
        choices = QGroupBox("Your decision", self)
        grid = QGridLayout(choices)
        grid.setColumnStretch(1, 1)

        # Allow more: one amount per field that reached its limit (usually one), the configured limit by default.
        self.allow_spins: dict[str, QDoubleSpinBox] = {}
        self._spent: dict[str, float] = {}
        allow_fields = QWidget(choices)
        allow_form = QFormLayout(allow_fields)
        allow_form.setContentsMargins(0, 0, 0, 0)
        for field, spent, limit, configured in self._reached_fields():
            spin = QDoubleSpinBox(allow_fields)
            spin.setObjectName(f"budgetAllow_{field}")
            spin.setRange(0.0, 1e12)
            if field == "cost_usd":
                spin.setDecimals(4)
                spin.setPrefix("$ ")
                spin.setSingleStep(max(0.0001, round(configured / 10, 4)) if configured else 0.01)
            else:
                spin.setDecimals(0 if float(configured).is_integer() else 2)
                spin.setSingleStep(max(1.0, round(configured / 10)) if configured else 1.0)
                spin.setGroupSeparatorShown(True)
            spin.setValue(configured if configured > 0 else max(limit, 1.0))
            spin.setAccessibleName(f"{field_label(field)}: amount to allow more")
            spin.setToolTip(plain_tooltip(f"How much more {field_label(field).lower()} this run may spend; it is "
                                          f"held again when it has spent {format_amount(field, spent)} plus this "
                                          "amount."))
            spin.valueChanged.connect(self._update_allow)
            self.allow_spins[field] = spin
            self._spent[field] = spent
            allow_form.addRow(f"{field_label(field)}:", spin)
        self.continue_button = QPushButton("Allow more", choices)
        self.continue_button.setObjectName("budgetContinue")
        self.continue_button.clicked.connect(self.choose_continue)
        self.allow_summary = plain_label(choices)
        self.allow_summary.setObjectName("budgetAllowSummary")
        self.allow_summary.setWordWrap(True)
        self.allow_summary.setProperty("role", "muted")
        grid.addWidget(self.continue_button, 0, 0)
        if self.allow_spins:
            grid.addWidget(allow_fields, 0, 1, 1, 2)
            grid.addWidget(self.allow_summary, 1, 1, 1, 2)
        else:
            allow_fields.hide()
            self.allow_summary.setText("with the full limit again")
            grid.addWidget(self.allow_summary, 0, 1, 1, 2)

        # Compact and continue (C7): only when the window can compact the held run's thread
        self.compact_label = plain_label(choices)
        self.compact_label.setObjectName("budgetCompactNote")
        self.compact_label.setWordWrap(True)
        self.compact_label.setProperty("role", "muted")
        if compact is not None:
            self.compact_button = QPushButton("Compact and continue", choices)
            self.compact_button.setObjectName("budgetCompactContinue")
            self.compact_button.setToolTip("Compress the thread's history first (older tool results shortened, older "
                                           "messages summarised; nothing is deleted from the thread), then allow "
                                           "the amount above: the next model calls send less.")
            self.compact_button.clicked.connect(self.choose_compact)
            self.compact_label.setText("Shrink what the next model calls send, then go on with the amount above.")
            grid.addWidget(self.compact_button, 2, 0)
            grid.addWidget(self.compact_label, 2, 1, 1, 2)
        else:
            self.compact_label.hide()

        self.stop_button = QPushButton("Stop", choices)
        self.stop_button.setObjectName("budgetStop")
        self.stop_button.setToolTip("Do not run the held calls; the run ends aborted and keeps its answer so far.")
        self.stop_button.clicked.connect(self.choose_stop)
        self.reason_edit = QLineEdit(choices)
        self.reason_edit.setObjectName("budgetStopReason")
        self.reason_edit.setPlaceholderText("Reason (optional), e.g. too expensive")
        self.reason_edit.returnPressed.connect(self.choose_stop)
        grid.addWidget(self.stop_button, 3, 0)
        grid.addWidget(self.reason_edit, 3, 1, 1, 2)

        order = [self.calls_view, self.continue_button, *self.allow_spins.values(),
                 *([self.compact_button] if self.compact_button is not None else []), self.stop_button,
                 self.reason_edit]
        for first, second in zip(order, order[1:]):  # G14: Tab follows the layout (the button is left of its amount)
            QWidget.setTabOrder(first, second)
        for b in (self.continue_button, self.stop_button, self.compact_button):
            if b is not None:
                b.setAutoDefault(False)  # Enter while typing must never pick an answer by accident
                b.setDefault(False)
        # G7: the gesture that decided the hold before this one (a double click on "Allow more", the next
        # hold opening under the pointer) never decides this one (decision_settle.py)
        self.settle = DecisionSettle(self, [b for b in (self.continue_button, self.compact_button, self.stop_button)
                                            if b is not None], focus_off=self.calls_view.setFocus)
        self.finished.connect(self._cancel_compaction)

        layout = QVBoxLayout(self)
        layout.addWidget(self.headline)
        layout.addWidget(explain)
        layout.addWidget(self.table)
        layout.addWidget(self.unpriced_label)
        layout.addWidget(calls_title)
        layout.addWidget(self.calls_view)
        layout.addWidget(choices)
        self.setMinimumWidth(480)
        self._update_allow()
        hint = self.sizeHint()
        self.resize(max(560, hint.width()), hint.height())

    # -- content -----------------------------------------------------------------------------------------
    @staticmethod
    def _reason(payload: Mapping[str, Any]) -> str:
        reason = str(payload.get("reason") or "")
        if reason:
            return reason[:1].upper() + reason[1:]
        field = payload.get("field")
        if field:
            return (f"The {payload.get('scope', 'run')} budget was reached: {field_label(str(field))} "
                    f"{format_amount(str(field), payload.get('spent'))} of "
                    f"{format_amount(str(field), payload.get('limit'))}")
        return "A budget was reached"

    def _rows(self) -> list[tuple[str, str, float, float]]:
        rows = []
        for b in self.budgets:
            name = f"{b.get('scope', 'run')} #{int(b['budget']) + 1}" if isinstance(b.get("budget"), int) else str(
                b.get("scope", "run"))
            fields = b.get("fields") if isinstance(b.get("fields"), Mapping) else {}
            if not fields and b.get("field"):
                fields = {b["field"]: {"spent": b.get("spent", 0), "limit": b.get("limit", 0)}}
            for field, v in fields.items():
                if isinstance(v, Mapping):
                    rows.append((name, str(field), float(v.get("spent") or 0), float(v.get("limit") or 0)))
        return rows

    def _fields_table(self) -> QTableWidget:
        rows = self._rows()
        table = QTableWidget(len(rows), 5, self)
        table.setObjectName("budgetHoldFields")
        table.setAccessibleName("Spent and limit per field")
        table.setHorizontalHeaderLabels(["Budget", "Field", "Spent", "Limit", "Used"])
        table.verticalHeader().hide()
        table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        table.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        table.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        for r, (budget, field, spent, limit) in enumerate(rows):
            pct = (100.0 * spent / limit) if limit > 0 else 100.0
            cells = [budget, field_label(field), format_amount(field, spent), format_amount(field, limit),
                     f"{pct:.0f}%"]
            level = level_for(spent, limit)
            for c, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if c >= 2:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                if level != "ok" and c == 4:
                    item.setForeground(QColor(LEVEL_COLORS[level]))
                table.setItem(r, c, item)
        header = table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        table.resizeRowsToContents()
        height = header.height() + sum(table.rowHeight(r) for r in range(len(rows))) + 2 * table.frameWidth() + 2
        table.setFixedHeight(min(max(height, 48), 220))
        return table

    def held_calls(self) -> list[tuple[str | None, dict[str, Any]]]:
        """``(tool, arguments)`` of each held call (tool None: the next model call is held)."""
        return [(p.get("tool"), dict(p.get("arguments") or {})) for p in self.payloads]

    def _calls_title(self) -> str:
        n = sum(1 for tool, _ in self.held_calls() if tool)
        return f"Held tool calls ({n})" if n else "Held: the next model call"

    def _calls_text(self) -> str:
        parts = []
        for tool, args in self.held_calls():
            if tool:
                parts.append(f"{tool} {_args_text(args)}")
            else:
                parts.append("The next model call (the run went over its limit while its tools ran, "
                             "e.g. in a sub-agent).")
        return "\n".join(parts)

    def _reached_fields(self) -> list[tuple[str, float, float, float]]:
        """``(field, spent, limit, configured limit)`` of each field at its limit (``budget_words.hold_fields``)."""
        return hold_fields({"budgets": self.budgets})

    # -- answers -----------------------------------------------------------------------------------------
    def allow_more(self) -> dict[str, float]:
        """``{field: amount}`` the person allows more (tokens as whole numbers)."""
        out: dict[str, float] = {}
        for field, spin in self.allow_spins.items():
            value = spin.value()
            out[field] = int(value) if field != "cost_usd" and float(value).is_integer() else float(value)
        return out

    def _update_allow(self, *_: Any) -> None:
        """The button and the line under it say the amounts and the totals the run may reach (G11)."""
        amounts = self.allow_more()
        if not amounts:
            self.continue_button.setText("Continue")
            return
        ok = all(v > 0 for v in amounts.values())
        words = [more_words(f, v) for f, v in amounts.items()]
        self.continue_button.setText("Allow " + " and ".join(words) if ok else "Allow more")
        self.continue_button.setEnabled(ok and self._compacting is None)
        if self.compact_button is not None:
            self.compact_button.setEnabled(ok and self._compacting is None)
        if not ok:
            self.allow_summary.setText("Enter an amount over 0 to allow more, or stop the run.")
            return
        others = []
        for b in self.budgets:  # the held budgets' other capped fields get their full limit again (B3)
            configured = b.get("configured") if isinstance(b.get("configured"), Mapping) else {}
            fields = b.get("fields") if isinstance(b.get("fields"), Mapping) else {}
            for f, v in fields.items():
                if f not in amounts and isinstance(v, Mapping) and f in configured:
                    others.append(more_words(str(f), float(configured[f])))
        tail = f" Its other limits start over too: {', '.join(others)}." if others else ""
        self.allow_summary.setText(f"The run may go on until {until_words(self._spent, amounts)}, then it is "
                                   f"held again.{tail}")
        self.continue_button.setToolTip(plain_tooltip(self.allow_summary.text()))

    def choose_continue(self) -> None:
        amounts = self.allow_more()
        if any(v <= 0 for v in amounts.values()):
            return
        self._decision = {"decision": "approve", "allow_more": amounts} if amounts else {"decision": "approve"}
        self.settle.decided()
        self.accept()

    def choose_compact(self) -> None:
        """Compact and continue: compress the thread now, then approve as "Allow N more" does."""
        amounts = self.allow_more()
        if self._compact is None or self._compacting is not None or any(v <= 0 for v in amounts.values()):
            return
        self.settle.decided()
        self._set_busy(True)
        self.compact_label.setText("Compacting the thread's history… (a summary may take a moment)")
        self._compacting = qt_async.start(self._compact_then_continue(amounts), name="budget-compact")

    async def _compact_then_continue(self, amounts: dict[str, float]) -> None:
        assert self._compact is not None
        try:
            record = await self._compact()
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - said in the dialog, which stays open to decide otherwise
            log.warning("Compact and continue: the compaction failed: %s", e, exc_info=not isinstance(e, WorkbenchError))
            self._compacting = None
            self._set_busy(False)
            self.compact_label.setText(f"Could not compact: {e}. Allow more or stop instead.")
            return
        self._compacting = None
        if record is None:
            self._set_busy(False)
            self.compact_label.setText("Nothing to compact: the history is already as small as it can be. "
                                       "Allow more or stop instead.")
            return
        self.compacted = dict(record)
        self._decision = {"decision": "approve", "allow_more": amounts} if amounts else {"decision": "approve"}
        self.accept()

    def _set_busy(self, busy: bool) -> None:
        for w in (self.continue_button, self.compact_button, *self.allow_spins.values()):
            if w is not None:
                w.setEnabled(not busy)
        if not busy:
            self._update_allow()

    def _cancel_compaction(self, *_: Any) -> None:
        task, self._compacting = self._compacting, None
        if task is not None and not task.done():
            task.cancel()  # closed mid-way: nothing is stored before the summary is made

    def choose_stop(self) -> None:
        reason = self.reason_edit.text().strip() or "stopped by the user at the budget hold"
        self._decision = {"decision": "reject", "reason": reason, "message": reason}
        self.settle.decided()
        self.reject()

    def decision(self) -> dict[str, Any]:
        """The resume decision; without a choice (closed, Esc) a refusal that says so (fail closed)."""
        if self._decision is None:
            return {"decision": "reject", "reason": CLOSED_REASON, "message": CLOSED_REASON}
        return dict(self._decision)

    def decisions(self) -> dict[str, dict[str, Any]]:
        """The same decision for every question the dialog was given (holds of one step share one)."""
        d = self.decision()
        return {qid: dict(d) for qid in self.question_ids}


async def _await_dialog(dialog: QDialog) -> None:
    """``open()`` the dialog and wait for ``finished`` as a Future; cancelling closes it."""
    fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    def finished(code: int) -> None:
        if not fut.done():
            fut.set_result(int(code))

    dialog.finished.connect(finished)
    dialog.open()
    try:
        await fut
    except asyncio.CancelledError:
        try:
            if dialog.isVisible():
                dialog.reject()
        except RuntimeError:  # the C++ dialog is already gone
            pass
        raise


async def ask_budget_holds(questions: Iterable[Any], parent: QWidget | None = None, *,
                           compact: Compact | None = None) -> dict[str, dict[str, Any]]:
    """Ask about one step's budget holds in one dialog; ``{question id: decision}`` (all the same).
    ``compact``: the held thread's ``Session.compact`` (offers "Compact and continue")."""
    dialog = BudgetHoldDialog(list(questions), parent, compact=compact)
    try:
        await _await_dialog(dialog)
        return dialog.decisions()
    finally:
        dialog.deleteLater()


async def ask_budget_hold(question: Any, parent: QWidget | None = None, *,
                          compact: Compact | None = None) -> dict[str, Any]:
    """Ask about one ``budget_hold`` question; returns its resume decision dict."""
    dialog = BudgetHoldDialog(question, parent, compact=compact)
    try:
        await _await_dialog(dialog)
        return dialog.decision()
    finally:
        dialog.deleteLater()
