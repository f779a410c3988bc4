"""The status bar (G1): model, run status, tokens in/out and cost.

Fed by the bridge: ``set_model`` when a session opens, ``set_status`` from ``run_started`` /
``run_finished``, ``set_usage`` from ``usage_updated`` data (``{"run_usage": Usage.to_dict(), "thread_usage": …,
"model": …}``). ``handle_event`` does all three from an engine event, for callers that just forward.

G11: the budget label shows the budget figures the engine publishes (``budget_updated``, ``budget_hold``,
``budget_exceeded``: ``follow_budgets(event)``) and, when a thread opens, ``Session.budget_figures()``
(``set_budgets``) — the same spent and limit the Budget panel and the hold dialog show, never its own sum.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QSizePolicy, QStatusBar, QToolButton, QWidget

from workbench.ui.budget_panel import FIGURE_EVENTS, field_label, format_amount, level_for
from workbench.ui.plain_text import plain_label, plain_tooltip
from workbench.ui.steady_label import SteadyLabel
from workbench.ui.style import set_status_property

_STATUS_WORDS = {
    "new": "Ready",
    "idle": "Ready",
    "": "Ready",
    "running": "Running…",
    "done": "Done",
    "failed": "Failed",
    "aborted": "Stopped",
    "interrupted": "Waiting for your decision",
}


def model_label(name: str | None) -> str:
    """How the bar names a model: ``demo`` is marked offline, nothing set says so."""
    if not name:
        return "no model"
    if name == "demo":
        return "demo (offline)"
    return name


def format_cost(usage: dict[str, Any] | None) -> str:
    """``$0.0123`` (``$1.23`` from a dollar up), or ``cost: n/a (unpriced)`` when nothing was priced."""
    usage = usage or {}
    cost = usage.get("cost_usd")
    if cost is None:
        if not usage.get("calls"):
            return "$0.0000"
        return "cost: n/a (unpriced)"
    try:
        value = float(cost)
    except (TypeError, ValueError):
        return "cost: n/a (unpriced)"
    text = f"${value:,.2f}" if value >= 1 else f"${value:.4f}"
    unpriced = int(usage.get("unpriced_calls") or 0)
    if unpriced:
        text += f" (+{unpriced} unpriced call{'s' if unpriced != 1 else ''})"
    return text


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def format_usage(usage: dict[str, Any] | None) -> str:
    """``1,234 in / 567 out · $0.0123`` (out counts reasoning tokens too)."""
    usage = usage or {}
    tokens_in = _int(usage.get("input_tokens"))
    tokens_out = _int(usage.get("output_tokens")) + _int(usage.get("thoughts_tokens"))
    return f"{tokens_in:,} in / {tokens_out:,} out · {format_cost(usage)}"


def _details(title: str, usage: dict[str, Any]) -> str:
    return (
        f"{title}: {_int(usage.get('calls'))} model call(s); input {_int(usage.get('input_tokens')):,} tokens "
        f"({_int(usage.get('cached_tokens')):,} cached), output {_int(usage.get('output_tokens')):,}, "
        f"reasoning {_int(usage.get('thoughts_tokens')):,}; {format_cost(usage)}"
    )


def tasks_text(running: int, waiting: int) -> str:
    """``2 tasks running``, ``1 task waits for you``, ``2 tasks running · 1 waits for you``; "" at none."""
    parts = []
    if running:
        parts.append(f"{running} task{'s' if running != 1 else ''} running")
    if waiting:
        verb = "waits" if waiting == 1 else "wait"
        parts.append(f"{waiting} {verb} for you" if running else
                     f"{waiting} task{'s' if waiting != 1 else ''} {verb} for you")
    return " · ".join(parts)


class RunStatusBar(QStatusBar):
    """Model, run status and usage as permanent labels (transient messages still show on the left)."""

    sig_decisions_clicked = Signal()
    """The person clicked "N decisions waiting" (Q1): open the Decisions panel."""

    sig_tasks_clicked = Signal()
    """The person clicked "N tasks running" / "1 task waits for you" (D10): open the Tasks board."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("runStatusBar")
        self.model_label = plain_label(self)
        self.model_label.setObjectName("statusModel")
        self.status_label = plain_label(self)
        self.status_label.setObjectName("statusRun")
        # The two that change every step are steady: their changes never lay the main window out again.
        self.usage_label = SteadyLabel(self)
        self.usage_label.setObjectName("statusUsage")
        self.budget_label = SteadyLabel(self)  # G11: the engine's budget figures
        self.budget_label.setObjectName("statusBudget")
        self.budget_label.setAccessibleName("Budget")
        self.sandbox_label = plain_label(self)  # E5: whether the agent's commands run in a sandbox
        self.sandbox_label.setObjectName("statusSandbox")
        # It gives way in a narrow window (clipped, never wider than the window's minimum): the run's state
        # and figures beside it matter more, and its whole text is in the tooltip.
        self.sandbox_label.setSizePolicy(QSizePolicy.Policy.Maximum, QSizePolicy.Policy.Preferred)
        self.sandbox_label.setMinimumWidth(1)  # (0 would mean "the text's width")
        self.sandbox_label.hide()
        self.budgets: dict[int, dict[str, Any]] = {}  # index -> {"scope", "fields": {field: {spent, limit}}}
        for label in (self.model_label, self.sandbox_label, self.status_label, self.usage_label, self.budget_label):
            self.addPermanentWidget(label)
        # Q1: "N decisions waiting", shown while any decision waits in the workspace; opens the inbox.
        self.decisions_button = QToolButton(self)
        self.decisions_button.setObjectName("statusDecisions")
        self.decisions_button.setAutoRaise(True)
        self.decisions_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.decisions_button.setToolTip("Open the Decisions panel: every decision waiting in this workspace")
        self.decisions_button.clicked.connect(lambda _=False: self.sig_decisions_clicked.emit())
        self.decisions_button.hide()
        self.insertPermanentWidget(0, self.decisions_button)
        self.decisions = 0
        # D10: the current thread's sub-agent tasks still going ("2 tasks running · 1 waits for you").
        self.tasks_button = QToolButton(self)
        self.tasks_button.setObjectName("statusTasks")
        self.tasks_button.setAutoRaise(True)
        self.tasks_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.tasks_button.setToolTip("Open the Tasks board: this thread's sub-agent tasks")
        self.tasks_button.clicked.connect(lambda _=False: self.sig_tasks_clicked.emit())
        self.tasks_button.hide()
        self.insertPermanentWidget(0, self.tasks_button)
        self.tasks_running = 0
        self.tasks_waiting = 0
        self.set_model(None)
        self.set_status("new")
        self.set_usage({}, {})
        self.set_budgets([])

    def set_decisions(self, count: int) -> None:
        """Q1: "N decisions waiting" (hidden at none); the words carry it, not a colour alone (G14)."""
        self.decisions = max(0, int(count))
        text = f"{self.decisions} decision{'s' if self.decisions != 1 else ''} waiting"
        self.decisions_button.setText(text)
        self.decisions_button.setAccessibleName(text)
        self.decisions_button.setVisible(self.decisions > 0)
        set_status_property(self.decisions_button, "interrupted" if self.decisions else "")

    def set_tasks(self, running: int, waiting: int = 0) -> None:
        """D10: "N tasks running" (queued or running) and "1 task waits for you" (a decision), hidden at
        none; in words, not a colour alone (G14)."""
        self.tasks_running, self.tasks_waiting = max(0, int(running)), max(0, int(waiting))
        text = tasks_text(self.tasks_running, self.tasks_waiting)
        self.tasks_button.setText(text)
        self.tasks_button.setAccessibleName(text or "Tasks")
        self.tasks_button.setVisible(bool(text))
        set_status_property(self.tasks_button, "interrupted" if self.tasks_waiting else
                            "running" if self.tasks_running else "")

    def set_sandbox(self, info: dict[str, Any] | None) -> None:
        """E5: "sandboxed" or "no sandbox" in words (G14), the full line as the tooltip; hidden when the
        session has no shell tool (``Session.sandbox`` is empty)."""
        info = info or {}
        if not info:
            self.sandbox_label.hide()
            return
        active = bool(info.get("active"))
        text = "commands: sandboxed" if active else "commands: no sandbox"
        self.sandbox_label.setText(text)
        self.sandbox_label.setToolTip(plain_tooltip(f"Sandbox for the agent's commands: {info.get('text', '')}"))
        self.sandbox_label.setAccessibleName(f"{text}. {info.get('text', '')}")
        set_status_property(self.sandbox_label, "" if active else "interrupted")
        self.sandbox_label.show()

    def set_model(self, name: str | None) -> None:
        """Show the model; ``demo`` reads "demo (offline)"."""
        self.model_label.setText(model_label(name))
        self.model_label.setToolTip(plain_tooltip(
            "The offline demo model: scripted, no key, no cost" if name == "demo" else f"Model: {name or 'none'}"
        ))

    def set_status(self, status: str | None) -> None:
        """Show the run status in words, coloured by the style sheet's ``[status=…]`` rules."""
        key = (status or "").strip().lower()
        self.status_label.setText(_STATUS_WORDS.get(key, key.capitalize() or "Ready"))
        set_status_property(self.status_label, key)

    def set_usage(self, run: dict[str, Any] | None, thread: dict[str, Any] | None) -> None:
        """Show the run's and the thread's tokens and cost (dicts as from ``Usage.to_dict()``)."""
        run, thread = run or {}, thread or {}
        if _int(run.get("calls")) or run.get("input_tokens"):
            text = f"Run {format_usage(run)}  |  Thread {format_usage(thread)}"
        else:
            text = f"Thread {format_usage(thread)}"
        self.usage_label.setText(text)
        self.usage_label.setToolTip(plain_tooltip(_details("This run", run) + "\n" + _details("This thread", thread)))

    def set_budgets(self, figures: list[dict[str, Any]] | None) -> None:
        """Show the engine's budget figures (``Session.budget_figures()``); replaces what was shown."""
        self.budgets = {}
        self._merge_budgets(figures or [])

    def follow_budgets(self, event: Any) -> None:
        """Take the figures a ``budget_updated`` / ``budget_hold`` / ``budget_exceeded`` event carries."""
        if getattr(event, "type", None) not in FIGURE_EVENTS:
            return
        data = getattr(event, "data", {}) or {}
        self._merge_budgets(data.get("budgets") or [data])

    def _merge_budgets(self, figures: list[Any]) -> None:
        for f in figures:
            if isinstance(f, dict) and isinstance(f.get("budget"), int) and isinstance(f.get("fields"), dict):
                entry = self.budgets.setdefault(f["budget"], {"scope": f.get("scope", "run"), "fields": {}})
                entry["fields"].update({str(k): dict(v) for k, v in f["fields"].items() if isinstance(v, dict)})
        self._show_budgets()

    def _show_budgets(self) -> None:
        """The field nearest its limit, in words ("reached" in words, not colour alone: G14)."""
        rows = []
        for index, b in sorted(self.budgets.items()):
            for field, v in b["fields"].items():
                spent, limit = float(v.get("spent") or 0), float(v.get("limit") or 0)
                ratio = spent / limit if limit > 0 else float("inf")
                rows.append((ratio, index, b["scope"], field, spent, limit))
        if not rows:
            self.budget_label.setText("")
            self.budget_label.setToolTip("")
            self.budget_label.hide()
            return
        _ratio, _i, scope, field, spent, limit = max(rows, key=lambda r: r[0])
        reached = " — reached" if spent >= limit else ""
        self.budget_label.setText(f"Budget ({scope}): {field_label(field).lower()} "
                                  f"{format_amount(field, spent)} / {format_amount(field, limit)}{reached}")
        set_status_property(self.budget_label, {"ok": "", "warn": "interrupted", "over": "failed"}[level_for(spent, limit)])
        self.budget_label.setToolTip(plain_tooltip("\n".join(
            f"{sc} budget {i + 1}: {field_label(f).lower()} {format_amount(f, s)} of {format_amount(f, lim)}"
            for _r, i, sc, f, s, lim in rows)))
        self.budget_label.show()

    def handle_event(self, event: Any) -> None:
        """Update from an engine ``Event`` (``usage_updated``, ``run_started``, ``run_finished``)."""
        data = getattr(event, "data", {}) or {}
        if event.type == "usage_updated":
            # data["model"] is what the provider answered with (often a dated id): the bar keeps the
            # name the user chose, set by set_model.
            self.set_usage(data.get("run_usage"), data.get("thread_usage"))
        elif event.type == "run_started":
            self.set_status("running")
        elif event.type == "run_finished":
            self.set_status(str(data.get("status", "")))
        self.follow_budgets(event)
