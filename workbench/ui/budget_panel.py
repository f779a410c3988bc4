"""The Budget dock (G2, B1–B4): a meter per capped field of each budget, run and session side by side,
and the cost in USD with a per-model breakdown.

Fed by the window through two calls, never by polling:

- ``set_session(session)`` rebuilds everything when a thread opens: the budgets from
  ``session.config.effective_budget`` (the workspace's and, unless it limits ``steps`` itself, the
  default step hold: a steps meter for every run, B5), their committed figures from
  ``session.budget_figures()``, thread usage from ``session.usage``, the last run's usage and the
  per-model breakdown from ``session.usage_by_model`` (summed by the store: G13).
- ``handle_event(event)`` takes every engine event: ``budget_updated`` (after each model call and each
  approval), ``budget_hold`` and ``budget_exceeded`` carry the budget middleware's own spent/limit per
  field and are shown as they are; ``usage_updated`` moves the usage summaries and the per-model
  breakdown; ``run_finished`` re-reads the committed figures.

G11: the panel never computes a budget itself. Its meters show the engine's figures — absolute: what
the scope spent (the status bar's number) against the amount it may reach (the configured cap, or
after an approved hold what was spent then plus what was allowed more) — the same figures the status
bar and the hold dialog show.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QProgressBar,
    QSizePolicy,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from workbench.budget_words import format_amount
from workbench.session import Usage

if TYPE_CHECKING:
    from workbench.session import Event
    from workbench.session import Session

from workbench.ui.plain_text import plain_label, plain_tooltip, rich_label
from workbench.ui.table_model import RowsTableModel

log = logging.getLogger(__name__)

__all__ = [
    "BudgetPanel",
    "FieldMeter",
    "LEVEL_COLORS",
    "ModelUsageModel",
    "field_label",
    "format_amount",
    "is_news",
    "last_seq",
    "level_for",
    "usage_summary",
]

Index = QModelIndex | QPersistentModelIndex

FIELD_LABELS = {
    "input_tokens": "Input tokens",
    "output_tokens": "Output tokens",
    "thoughts_tokens": "Reasoning tokens",
    "total_tokens": "Total tokens",
    "cost_usd": "Cost (USD)",
    "steps": "Steps",
}

#: Meter colours: under 75 % green, under 100 % amber, at or over the limit red.
LEVEL_COLORS = {"ok": "#2da44e", "warn": "#d4a72c", "over": "#cf222e"}

BUDGET_HINT = (
    "No budget is set for this workspace: usage is shown, and only the step limit holds a run (at 200 "
    "steps it asks you to go on). To add one, put this in workbench.yaml:"
    "<pre>budget:\n"
    "  - scope: run\n"
    "    limit: {total_tokens: 200000, cost_usd: 1.00}\n"
    "    interrupt: true      # ask before going over\n"
    "  - {scope: session, limit: {cost_usd: 5.00}}</pre>"
)

#: Events whose ``budgets`` carry the budget middleware's figures (G11: the one source of truth).
FIGURE_EVENTS = frozenset({"budget_updated", "budget_hold", "budget_exceeded"})


def level_for(spent: float, limit: float) -> str:
    """``ok`` under 75 % of the limit, ``warn`` under 100 %, ``over`` at or over it (as the budget counts)."""
    if limit <= 0 or spent >= limit:
        return "over"
    return "ok" if spent / limit < 0.75 else "warn"


def field_label(field: str) -> str:
    return FIELD_LABELS.get(field, f"{field} (counter)")


def _cost_text(usage: Usage) -> str:
    if usage.cost_usd is None:
        return "n/a" if usage.calls else format_amount("cost_usd", 0.0)
    text = format_amount("cost_usd", usage.cost_usd)
    if usage.unpriced_calls:
        text += f" (+{usage.unpriced_calls} unpriced)"
    return text


def usage_summary(usage: Usage) -> str:
    """``1,234 in · 567 out · 3 calls · $0.0123`` (out includes reasoning tokens)."""
    out = usage.output_tokens + usage.thoughts_tokens
    cost = _cost_text(usage)
    if usage.cost_usd is None and usage.calls:
        cost = "cost n/a (tokens only)"
    return f"{usage.input_tokens:,} in · {out:,} out · {usage.calls} call{'s' if usage.calls != 1 else ''} · {cost}"


# ----------------------------------------------------------------------------------------------------
# One meter


class FieldMeter(QWidget):
    """One capped field: its name, a bar coloured by how near the limit it is, and ``spent / limit (n %)``."""

    def __init__(self, field: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.field = field
        self.spent = 0.0
        self.limit = 0.0
        self.level = "ok"
        self.name_label = plain_label(field_label(field), self)
        self.name_label.setWordWrap(True)
        self.bar = QProgressBar(self)
        self.bar.setRange(0, 1000)
        self.bar.setTextVisible(True)
        self.bar.setMinimumWidth(60)
        self.bar.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 2, 0, 2)
        layout.setSpacing(1)
        layout.addWidget(self.name_label)
        layout.addWidget(self.bar)
        self.set_value(0.0, 0.0)

    @property
    def percent(self) -> float:
        if self.limit <= 0:
            return 100.0 if self.spent >= self.limit else 0.0
        return 100.0 * self.spent / self.limit

    @property
    def text(self) -> str:
        return self.bar.text()

    def set_value(self, spent: float, limit: float, note: str = "") -> None:
        """Show ``spent`` against ``limit``; ``note`` (e.g. "raised") goes into the tooltip."""
        self.spent, self.limit = float(spent), float(limit)
        self.level = level_for(self.spent, self.limit)
        pct = self.percent
        self.bar.setValue(int(min(max(pct, 0.0), 100.0) * 10))
        words = {"warn": " — near the limit", "over": " — over the limit"}.get(self.level, "")  # G14: not colour alone
        self.bar.setFormat(
            f"{format_amount(self.field, self.spent)} / {format_amount(self.field, self.limit)} ({pct:.0f}%){words}"
        )
        self.bar.setAccessibleName(f"{field_label(self.field)}: {self.bar.format()}")
        color = LEVEL_COLORS[self.level]
        self.bar.setStyleSheet(
            "QProgressBar { border: 1px solid palette(mid); border-radius: 3px; text-align: center;"
            " min-height: 16px; max-height: 18px; }"
            f" QProgressBar::chunk {{ background-color: {color}; border-radius: 2px; }}"
        )
        self.bar.setProperty("level", self.level)
        tip = f"{field_label(self.field)}: {self.bar.format()}"
        if note:
            tip += f"\n{note}"
        self.setToolTip(plain_tooltip(tip))


# ----------------------------------------------------------------------------------------------------
# The per-model breakdown


class ModelUsageModel(RowsTableModel):
    """A thin adapter over ``[(model, Usage)]``: model, calls, tokens in/out, cost ("n/a" unpriced)."""

    COLUMNS = ("Model", "Calls", "Tokens in", "Tokens out", "Cost")
    MODEL, CALLS, TOKENS_IN, TOKENS_OUT, COST = range(5)

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self._rows: list[tuple[str, Usage]] = []

    def set_rows(self, rows: Mapping[str, Usage]) -> None:
        self.beginResetModel()
        self._rows = list(rows.items())
        self.endResetModel()

    def rows(self) -> list[tuple[str, Usage]]:
        return list(self._rows)

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or not (0 <= index.row() < len(self._rows)):
            return None
        model, u = self._rows[index.row()]
        col = index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            if col == self.MODEL:
                return model
            if col == self.CALLS:
                return f"{u.calls:,}"
            if col == self.TOKENS_IN:
                return f"{u.input_tokens:,}"
            if col == self.TOKENS_OUT:
                return f"{u.output_tokens + u.thoughts_tokens:,}"
            if col == self.COST:
                return _cost_text(u)
        elif role == Qt.ItemDataRole.ToolTipRole:
            if col == self.COST and u.cost_usd is None:
                return plain_tooltip(f"tokens only — {model} has no price in litellm")
            if col == self.TOKENS_OUT and u.thoughts_tokens:
                return plain_tooltip(f"{u.output_tokens:,} output + {u.thoughts_tokens:,} reasoning")
            if col == self.TOKENS_IN and u.cached_tokens:
                return plain_tooltip(f"{u.cached_tokens:,} of them cached")
        elif role == Qt.ItemDataRole.TextAlignmentRole and col != self.MODEL:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None


# ----------------------------------------------------------------------------------------------------
# The panel


class _ScopeBox(QGroupBox):
    """One scope's column: a meter per capped field of each budget of that scope, then its usage."""

    def __init__(self, title: str, parent: QWidget | None = None) -> None:
        super().__init__(title, parent)
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(6, 6, 6, 6)
        self._layout.setSpacing(4)
        self.meters: dict[tuple[int, str], FieldMeter] = {}
        self._extra: list[QWidget] = []
        self.empty_label = plain_label(self)
        self.empty_label.setProperty("role", "muted")
        self.empty_label.setWordWrap(True)
        self.usage_label = plain_label(self)
        self.usage_label.setWordWrap(True)
        self.usage_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self._layout.addWidget(self.empty_label)
        self._layout.addStretch(1)
        self._layout.addWidget(self.usage_label)

    def build(self, budgets: Sequence[tuple[int, Any]], empty_text: str) -> None:
        for w in [*self.meters.values(), *self._extra]:
            self._layout.removeWidget(w)
            w.deleteLater()
        self.meters.clear()
        self._extra.clear()
        self.empty_label.setText(empty_text)
        self.empty_label.setVisible(not budgets)
        pos = 1
        for index, budget in budgets:
            if len(budgets) > 1 or budget.interrupt:
                how = "asks before going on" if budget.interrupt else "stops the run"
                what = "Step limit" if set(budget.limit) == {"steps"} else f"Budget {index + 1}"  # B5
                head = plain_label(f"{what} · {how}", self)
                head.setProperty("role", "muted")
                head.setWordWrap(True)
                self._layout.insertWidget(pos, head)
                self._extra.append(head)
                pos += 1
            for field in budget.limit:
                meter = FieldMeter(field, self)
                meter.set_value(0.0, float(budget.limit[field]))
                self._layout.insertWidget(pos, meter)
                self.meters[(index, field)] = meter
                pos += 1


class BudgetPanel(QWidget):
    """Meters per capped field (run and session side by side), cost and the per-model breakdown."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("budgetPanel")
        self._session: Session | None = None
        self._budgets: list[Any] = []  # BudgetConfig, in the middleware's order (index = budget number)
        self._run_id: str = ""
        self._run_usage: dict[str, Any] = {}
        self._thread_usage: dict[str, Any] = {}
        self._run_models: dict[str, Usage] = {}
        self._thread_models: dict[str, Usage] = {}
        self._own_budget = False  # the workspace sets a budget of its own (not only the step hold)
        self._figures: dict[int, dict[str, dict[str, float]]] = {}  # G11: the engine's, per budget index
        self._seen_seq = 0  # durable events up to this one are already in what set_session read

        self.hint_label = rich_label(BUDGET_HINT, self)  # static text of ours (a <pre> example)
        self.hint_label.setObjectName("budgetHint")
        self.hint_label.setWordWrap(True)
        self.hint_label.setProperty("role", "muted")
        self.hint_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

        self.run_box = _ScopeBox("This run", self)
        self.session_box = _ScopeBox("This session (thread)", self)
        scopes = QHBoxLayout()
        scopes.setSpacing(6)
        scopes.addWidget(self.run_box, 1)
        scopes.addWidget(self.session_box, 1)

        self.status_label = plain_label(self)
        self.status_label.setObjectName("budgetStatus")
        self.status_label.setWordWrap(True)
        self.status_label.hide()

        self.breakdown_scope = QComboBox(self)
        self.breakdown_scope.addItem("This session", "thread")
        self.breakdown_scope.addItem("This run", "run")
        self.breakdown_scope.currentIndexChanged.connect(self._show_breakdown)
        self.cost_label = plain_label(self)
        self.cost_label.setObjectName("budgetCost")
        self.cost_label.setWordWrap(True)
        head = QHBoxLayout()
        head.addWidget(plain_label("Cost by model:", self))
        head.addWidget(self.breakdown_scope)
        head.addStretch(1)

        self.models = ModelUsageModel(self)
        self.table = QTableView(self)
        self.table.setAccessibleName("Cost by model")
        self.table.setModel(self.models)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().hide()
        self.table.setAlternatingRowColors(True)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(ModelUsageModel.MODEL, QHeaderView.ResizeMode.Stretch)
        self.table.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        self.table.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)

        self.unpriced_label = plain_label(self)
        self.unpriced_label.setObjectName("budgetUnpriced")
        self.unpriced_label.setWordWrap(True)
        self.unpriced_label.setProperty("role", "muted")
        self.unpriced_label.hide()

        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.addWidget(self.hint_label)
        layout.addLayout(scopes)
        layout.addWidget(self.status_label)
        layout.addLayout(head)
        layout.addWidget(self.table)
        layout.addWidget(self.cost_label)
        layout.addWidget(self.unpriced_label)
        layout.addStretch(1)
        self._build_meters()
        self._refresh()

    # -- the contract -------------------------------------------------------------------------------------
    def set_session(self, session: Session | None) -> None:
        """Rebuild from the session's config, committed state and stored usage (a thread was opened)."""
        self._session = session
        config = getattr(session, "config", None) if session is not None else None
        self._budgets = list(getattr(config, "effective_budget", ()) or ())  # B5: with the step hold
        self._own_budget = bool(getattr(config, "budget", ()))
        self._figures = {}
        self._run_id = ""
        self._run_usage, self._thread_usage = {}, {}
        self._run_models, self._thread_models = {}, {}
        self._seen_seq = 0
        self._set_status("")
        if session is not None:
            try:
                self._seen_seq = last_seq(session)
                self._thread_usage = session.usage.to_dict()
                self._thread_models = session.usage_by_model()
                runs = session.store.runs(session.thread_id)
                if runs:
                    self._load_run(runs[-1].id)
                self._load_figures()
                pending = [q for q in session.pending if q.kind == "budget_hold"]
                if pending:
                    self._apply_report(pending[0].payload)
                    self._set_status(_hold_text(pending[0].payload), "warn")
            except Exception:  # noqa: BLE001 - a damaged store must not take the window down
                log.exception("budget panel: could not read the thread's usage")
        self._build_meters()
        self._refresh()

    def handle_event(self, event: Event) -> None:
        """Update from one engine event (durable or live); unrelated events are ignored."""
        if not is_news(event, self._session, self._seen_seq):
            return
        t = event.type
        data = event.data or {}
        run_id = getattr(event, "run_id", "") or ""
        if run_id and run_id != self._run_id and t in FIGURE_EVENTS | {"run_started", "usage_updated", "run_finished"}:
            if t == "run_started":
                self._run_id, self._run_usage, self._run_models = run_id, {}, {}
                for i, b in enumerate(self._budgets):  # a new run: its run budgets start from nothing
                    if b.scope == "run":
                        self._figures[i] = {f: {"spent": 0.0, "limit": float(c)} for f, c in b.limit.items()}
            else:  # a resumed run: it counts what it spent before its interrupt
                self._load_run(run_id)
        if t == "usage_updated":
            self._run_usage = dict(data.get("run_usage") or {})
            self._thread_usage = dict(data.get("thread_usage") or {})
            model = str(data.get("model") or "unknown")
            call = Usage.from_dict(data.get("call"))
            for rows in (self._run_models, self._thread_models):
                rows[model] = rows.get(model, Usage()) + call
            self._refresh()
        elif t in FIGURE_EVENTS:
            self._apply_report(data)
            if t == "budget_hold":
                self._set_status(_hold_text(data), "warn")
            elif t == "budget_exceeded":
                self._set_status(_exceeded_text(data), "over")
            self._refresh()
        elif t in ("run_started", "interrupt_answered", "run_finished"):
            if t != "run_finished":
                self._set_status("")
            if t == "run_finished":
                if isinstance(data.get("usage"), dict) and self._run_id == run_id:
                    self._run_usage = dict(data["usage"])
                self._load_figures()  # committed: the same figures the last budget_updated carried
            self._refresh()

    # -- reading committed state -------------------------------------------------------------------------
    def _load_run(self, run_id: str) -> None:
        self._run_id = run_id
        s = self._session
        if s is None:
            self._run_usage, self._run_models = {}, {}
            return
        self._run_models = s.usage_by_model(run_id)
        self._run_usage = Usage.total(self._run_models.values()).to_dict()

    def _load_figures(self) -> None:
        """The committed figures (``Session.budget_figures``): a reopened thread, a finished run."""
        s = self._session
        if s is None or not self._budgets:
            return
        try:
            self._apply_report({"budgets": s.budget_figures()})
        except Exception:  # noqa: BLE001 - the store is gone (window closing): keep the last figures
            log.debug("budget panel: no committed figures", exc_info=True)

    def _apply_report(self, data: Mapping[str, Any]) -> None:
        """The middleware's own figures: ``budgets`` (each ``{"budget", "fields"}``) or one budget's."""
        reports = data.get("budgets") or [data]
        for r in reports:
            index, fields = r.get("budget"), r.get("fields")
            if isinstance(index, int) and isinstance(fields, Mapping):
                merged = dict(self._figures.get(index) or {})
                merged.update({str(k): dict(v) for k, v in fields.items() if isinstance(v, Mapping)})
                self._figures[index] = merged

    # -- what each budget has spent --------------------------------------------------------------------
    def measure(self, index: int) -> dict[str, dict[str, float]]:
        """Budget ``index``'s ``{field: {"spent", "limit"}}`` as the engine last reported it (G11)."""
        budget = self._budgets[index]
        known = self._figures.get(index) or {}
        out: dict[str, dict[str, float]] = {}
        for field, cap in budget.limit.items():
            v = known.get(field) or {}
            out[field] = {"spent": float(v.get("spent") or 0), "limit": float(v.get("limit", cap) or 0)}
        return out

    def figures(self) -> list[dict[str, Any]]:
        """Every budget's figures as shown (``[{"budget", "scope", "fields"}]``), for the status bar and tests."""
        return [{"budget": i, "scope": b.scope, "fields": self.measure(i)} for i, b in enumerate(self._budgets)]

    # -- rendering -----------------------------------------------------------------------------------------
    def _build_meters(self) -> None:
        run = [(i, b) for i, b in enumerate(self._budgets) if b.scope == "run"]
        session = [(i, b) for i, b in enumerate(self._budgets) if b.scope != "run"]
        self.run_box.build(run, "No run budget.")
        self.session_box.build(session, "No session budget.")
        self.hint_label.setVisible(not self._own_budget)

    def _refresh(self) -> None:
        for i, budget in enumerate(self._budgets):
            box = self.run_box if budget.scope == "run" else self.session_box
            for field, v in self.measure(i).items():
                meter = box.meters.get((i, field))
                if meter is None:
                    continue
                notes = []
                if budget.scope == "run" and v["limit"] != float(budget.limit[field]):
                    notes.append(f"more allowed at a budget hold in this run (configured: "
                                 f"{format_amount(field, budget.limit[field])})")
                if field == "cost_usd" and self._unpriced(budget.scope):
                    notes.append("a model in this scope has no price: its calls count tokens only")
                meter.set_value(v["spent"], v["limit"], "; ".join(notes))
        run_u, thread_u = Usage.from_dict(self._run_usage), Usage.from_dict(self._thread_usage)
        self.run_box.usage_label.setText(usage_summary(run_u))
        self.session_box.usage_label.setText(usage_summary(thread_u))
        self._show_breakdown()

    def _unpriced(self, scope: str) -> bool:
        u = Usage.from_dict(self._run_usage if scope == "run" else self._thread_usage)
        return bool(u.unpriced_calls) or (u.calls > 0 and u.cost_usd is None)

    def _show_breakdown(self, *_: Any) -> None:
        scope = self.breakdown_scope.currentData() or "thread"
        rows = self._run_models if scope == "run" else self._thread_models
        self.models.set_rows(rows)
        self._fit_table()
        total = Usage.total(rows.values())
        self.cost_label.setText(f"Total: {_cost_text(total)}")
        unpriced = [m for m, u in rows.items() if u.unpriced_calls or (u.calls and u.cost_usd is None)]
        self.unpriced_label.setText("\n".join(f"tokens only — {m} has no price in litellm" for m in unpriced))
        self.unpriced_label.setVisible(bool(unpriced))

    def _fit_table(self) -> None:
        """As tall as its rows (two to eight), so the dock does not show an empty grid."""
        self.table.resizeRowsToContents()
        n = self.models.rowCount()
        row_h = self.table.verticalHeader().defaultSectionSize()
        rows_h = sum(self.table.rowHeight(r) for r in range(min(n, 8))) + max(0, 2 - n) * row_h
        bar = self.table.horizontalScrollBar().sizeHint().height()
        self.table.setFixedHeight(self.table.horizontalHeader().sizeHint().height() + rows_h
                                  + 2 * self.table.frameWidth() + bar)

    def _set_status(self, text: str, level: str = "") -> None:
        self.status_label.setText(text)
        self.status_label.setVisible(bool(text))
        color = LEVEL_COLORS.get(level)
        self.status_label.setStyleSheet(f"color: {color}; font-weight: bold;" if color else "")

    # -- for tests and the window ----------------------------------------------------------------------
    def meter(self, scope: str, field: str, budget: int | None = None) -> FieldMeter | None:
        """The meter of ``field`` in the first (or the given) budget of ``scope`` (``run`` / ``session``)."""
        box = self.run_box if scope == "run" else self.session_box
        for (index, name), m in box.meters.items():
            if name == field and (budget is None or budget == index):
                return m
        return None

    @property
    def run_usage(self) -> Usage:
        return Usage.from_dict(self._run_usage)

    @property
    def thread_usage(self) -> Usage:
        return Usage.from_dict(self._thread_usage)


def last_seq(session: Session) -> int:
    """The newest durable event's number in the session's thread (0 when it has none)."""
    return session.last_event_seq()  # G13: a long thread's log is not read to learn its end


def is_news(event: Event, session: Session | None, seen_seq: int) -> bool:
    """Whether ``event`` is of the open thread and not a replay of what ``set_session`` already read."""
    if session is not None and getattr(event, "thread_id", session.thread_id) != session.thread_id:
        return False
    seq = int(getattr(event, "seq", 0) or 0)
    return not (0 < seq <= seen_seq)


def _by_model(calls: Sequence[tuple[str, Usage]]) -> dict[str, Usage]:
    out: dict[str, Usage] = {}
    for model, u in calls:
        out[model] = out.get(model, Usage()) + u
    return out


def _hold_text(data: Mapping[str, Any]) -> str:
    reason = str(data.get("reason") or "")
    if not reason and data.get("field"):
        reason = (f"{data.get('scope', 'run')} budget reached: {data['field']} "
                  f"{format_amount(str(data['field']), data.get('spent'))} of "
                  f"{format_amount(str(data['field']), data.get('limit'))}")
    return f"Held — {reason or 'a budget was reached'}. Allow more or stop in the dialog."


def _exceeded_text(data: Mapping[str, Any]) -> str:
    field = data.get("field")
    if field:
        text = (f"Stopped — {data.get('scope', 'run')} budget reached: {field} "
                f"{format_amount(str(field), data.get('spent'))} of {format_amount(str(field), data.get('limit'))}")
    else:
        text = "Stopped by a budget"
    if data.get("refused"):
        text += " (you chose to stop)"
    return text + "."
