"""The status bar (G1): model, run status, tokens in/out and cost.

Fed by the bridge: ``set_model`` when a session opens, ``set_status`` from ``run_started`` /
``run_finished``, ``set_usage`` from ``usage_updated`` data (``{"run_usage": Usage.to_dict(), "thread_usage": …,
"model": …}``). ``handle_event`` does all three from an engine event, for callers that just forward.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import QLabel, QStatusBar, QWidget

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


class RunStatusBar(QStatusBar):
    """Model, run status and usage as permanent labels (transient messages still show on the left)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("runStatusBar")
        self.model_label = QLabel(self)
        self.model_label.setObjectName("statusModel")
        self.status_label = QLabel(self)
        self.status_label.setObjectName("statusRun")
        self.usage_label = QLabel(self)
        self.usage_label.setObjectName("statusUsage")
        for label in (self.model_label, self.status_label, self.usage_label):
            self.addPermanentWidget(label)
        self.set_model(None)
        self.set_status("new")
        self.set_usage({}, {})

    def set_model(self, name: str | None) -> None:
        """Show the model; ``demo`` reads "demo (offline)"."""
        self.model_label.setText(model_label(name))
        self.model_label.setToolTip(
            "The offline demo model: scripted, no key, no cost" if name == "demo" else f"Model: {name or 'none'}"
        )

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
        self.usage_label.setToolTip(_details("This run", run) + "\n" + _details("This thread", thread))

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
