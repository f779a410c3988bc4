"""The budget hold dialog (G3, B3): a run reached an interrupting budget and waits for the user.

It shows which limit was reached, spent against limit per field, and the held tool calls (tool and
arguments) of every ``budget_hold`` question of the step. The holds of one step share one decision
(``harness/budget.py``), so one dialog answers them all:

- **Continue** → ``{"decision": "approve"}``: the budget counts again from what the run has spent
  (the full limit again);
- **Raise the limit to …** → ``{"decision": "approve", "raise_to": {field: value}}``: the same, with a
  new limit for the rest of this run (the value must be over what was spent);
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
from collections.abc import Iterable, Mapping, Sequence
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
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from workbench.ui.budget_panel import LEVEL_COLORS, field_label, format_amount, level_for

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


class BudgetHoldDialog(QDialog):
    """Decide one step's budget holds: Continue, Raise the limit for this run, or Stop with a reason."""

    def __init__(self, question: Any | Sequence[Any], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("budgetHoldDialog")
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

        self.headline = QLabel(self)
        self.headline.setObjectName("budgetHoldHeadline")
        self.headline.setWordWrap(True)
        self.headline.setText(f"<b>{_html(self._reason(first))}</b>")
        explain = QLabel(
            "The run is paused before going on. Continue with the full limit again, raise the limit for "
            "this run, or stop it (its answer so far is kept).",
            self,
        )
        explain.setWordWrap(True)
        explain.setProperty("role", "muted")

        self.table = self._fields_table()

        self.unpriced_label = QLabel(
            "A model in this run has no price in litellm: its calls count tokens only, not cost.", self
        )
        self.unpriced_label.setWordWrap(True)
        self.unpriced_label.setProperty("role", "muted")
        self.unpriced_label.setVisible(any(b.get("priced") is False for b in self.budgets))

        calls_title = QLabel(f"<b>{_html(self._calls_title())}</b>", self)
        self.calls_view = QPlainTextEdit(self)
        self.calls_view.setObjectName("budgetHoldCalls")
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

        self.continue_button = QPushButton("Continue", choices)
        self.continue_button.setObjectName("budgetContinue")
        self.continue_button.setToolTip("The budget counts again from what the run has spent: the full limit again.")
        self.continue_button.clicked.connect(self.choose_continue)
        grid.addWidget(self.continue_button, 0, 0)
        grid.addWidget(_muted("with the full limit again", choices), 0, 1, 1, 2)

        # Raise: one value per field that reached its limit (usually one).
        self.raise_spins: dict[str, QDoubleSpinBox] = {}
        self._spent: dict[str, float] = {}
        raise_fields = QWidget(choices)
        raise_form = QFormLayout(raise_fields)
        raise_form.setContentsMargins(0, 0, 0, 0)
        for field, spent, limit in self._reached_fields():
            spin = QDoubleSpinBox(raise_fields)
            spin.setObjectName(f"budgetRaise_{field}")
            if field == "cost_usd":
                spin.setDecimals(4)
                spin.setPrefix("$ ")
                spin.setSingleStep(0.5)
            else:
                spin.setDecimals(0 if float(limit).is_integer() else 2)
                spin.setSingleStep(max(1.0, round(limit / 10)) if limit else 1.0)
                spin.setGroupSeparatorShown(True)
            spin.setRange(0.0, 1e12)
            spin.setValue(max(limit * 2, spent + limit, spent + 1))
            spin.setToolTip(
                f"The new {field_label(field).lower()} limit for the rest of this run; it must be over "
                f"{format_amount(field, spent)} (what was spent). Like Continue, the budget then counts "
                "from what the run has spent so far."
            )
            spin.valueChanged.connect(self._validate_raise)
            self.raise_spins[field] = spin
            self._spent[field] = spent
            raise_form.addRow(f"{field_label(field)} to", spin)
        self.raise_button = QPushButton("Raise", choices)
        self.raise_button.setObjectName("budgetRaise")
        self.raise_button.setToolTip("Raise the limit for this run to the value typed, and continue.")
        self.raise_button.clicked.connect(self.choose_raise)
        self.raise_error = QLabel(choices)
        self.raise_error.setWordWrap(True)
        self.raise_error.setStyleSheet(f"color: {LEVEL_COLORS['over']};")
        self.raise_error.hide()
        if self.raise_spins:
            grid.addWidget(self.raise_button, 1, 0)
            grid.addWidget(raise_fields, 1, 1, 1, 2)
            grid.addWidget(self.raise_error, 2, 1, 1, 2)
        else:
            self.raise_button.hide()
            raise_fields.hide()

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

        for b in (self.continue_button, self.raise_button, self.stop_button):
            b.setAutoDefault(False)  # Enter while typing must never pick an answer by accident
            b.setDefault(False)

        layout = QVBoxLayout(self)
        layout.addWidget(self.headline)
        layout.addWidget(explain)
        layout.addWidget(self.table)
        layout.addWidget(self.unpriced_label)
        layout.addWidget(calls_title)
        layout.addWidget(self.calls_view)
        layout.addWidget(choices)
        self.setMinimumWidth(480)
        self._validate_raise()
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

    def _reached_fields(self) -> list[tuple[str, float, float]]:
        """``(field, spent, limit)`` of each field at its limit, the most spent per field."""
        out: dict[str, tuple[float, float]] = {}
        for b in self.budgets:
            fields = b.get("fields") if isinstance(b.get("fields"), Mapping) else {}
            for field, v in fields.items():
                if isinstance(v, Mapping) and float(v.get("spent") or 0) >= float(v.get("limit") or 0):
                    spent, limit = float(v.get("spent") or 0), float(v.get("limit") or 0)
                    old = out.get(field)
                    out[field] = (max(spent, old[0]), max(limit, old[1])) if old else (spent, limit)
            field = b.get("field")
            if field and field not in out and b.get("spent") is not None:
                out[str(field)] = (float(b.get("spent") or 0), float(b.get("limit") or 0))
        return [(f, s, lim) for f, (s, lim) in out.items()]

    # -- answers -----------------------------------------------------------------------------------------
    def _raise_problem(self) -> str:
        for field, spin in self.raise_spins.items():
            spent = self._spent[field]
            if spin.value() <= spent:
                return (f"{field_label(field)}: the new limit must be over {format_amount(field, spent)} "
                        "(what was spent).")
        return ""

    def _validate_raise(self, *_: Any) -> bool:
        problem = self._raise_problem()
        self.raise_error.setText(problem)
        self.raise_error.setVisible(bool(problem))
        self.raise_button.setEnabled(not problem and bool(self.raise_spins))
        return not problem

    def choose_continue(self) -> None:
        self._decision = {"decision": "approve"}
        self.accept()

    def choose_raise(self) -> None:
        if not self._validate_raise():
            return
        raise_to = {}
        for field, spin in self.raise_spins.items():
            value = spin.value()
            raise_to[field] = int(value) if field != "cost_usd" and float(value).is_integer() else float(value)
        self._decision = {"decision": "approve", "raise_to": raise_to}
        self.accept()

    def choose_stop(self) -> None:
        reason = self.reason_edit.text().strip() or "stopped by the user at the budget hold"
        self._decision = {"decision": "reject", "reason": reason, "message": reason}
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


def _muted(text: str, parent: QWidget) -> QLabel:
    label = QLabel(text, parent)
    label.setProperty("role", "muted")
    return label


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


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


async def ask_budget_holds(questions: Iterable[Any], parent: QWidget | None = None) -> dict[str, dict[str, Any]]:
    """Ask about one step's budget holds in one dialog; ``{question id: decision}`` (all the same)."""
    dialog = BudgetHoldDialog(list(questions), parent)
    try:
        await _await_dialog(dialog)
        return dialog.decisions()
    finally:
        dialog.deleteLater()


async def ask_budget_hold(question: Any, parent: QWidget | None = None) -> dict[str, Any]:
    """Ask about one ``budget_hold`` question; returns its resume decision dict."""
    dialog = BudgetHoldDialog(question, parent)
    try:
        await _await_dialog(dialog)
        return dialog.decision()
    finally:
        dialog.deleteLater()
