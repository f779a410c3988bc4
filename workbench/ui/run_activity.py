"""What shows that a run is working before and between its answers (G1, issue 10 item 11).

- ``ThinkingRow``: the transcript's last row while the model is asked and has not answered yet
  ("Thinking… 4 s"); it disappears at the first streamed token, tool call, question or end of the run.
  The engine emits no event when the model layer retries (``LiteLLMModel`` retries 429/5xx/timeouts
  silently, before the first token), so a retry shows as a longer "Thinking…"; ``set_retry`` is there
  for when such an event is bridged. While the run waits for background tasks before its model call (a
  hard budget they could carry past its limit, B2), it says so instead (``set_waiting``).
- ``RunTicker``: a status-bar label that ticks during a run: elapsed time, the run's tokens (those
  counted by finished calls plus an estimate of what the current call has streamed) and cost so far.
  It is fed by the bridge's signals only (``sig_run_started``, ``sig_step_started``,
  ``sig_text_streamed``, ``sig_usage_updated``, ``sig_run_finished``, ``sig_interrupt_raised``).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QTimer, Slot
from PySide6.QtWidgets import QFrame, QHBoxLayout, QStatusBar, QWidget

from workbench.ui.plain_text import plain_label
from workbench.ui.steady_label import SteadyLabel

if TYPE_CHECKING:
    from workbench.ui.bridge import Bridge

#: Characters per token for the live estimate of streamed text (tiktoken is not run per batch on the
#: GUI thread; the exact count arrives with the call's usage).
CHARS_PER_TOKEN = 4


def _elapsed(seconds: float) -> str:
    s = int(seconds)
    return f"{s} s" if s < 60 else f"{s // 60}:{s % 60:02d}"


class ThinkingRow(QFrame):
    """"Thinking… N s" (or "Retrying in N s…"): the model was asked and has not answered yet."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("thinking_row")
        lay = QHBoxLayout(self)
        lay.setContentsMargins(10, 2, 10, 2)
        # A glyph as well as the words: the state is never told by colour or motion alone (G14).
        self.label = plain_label(self)
        self.label.setObjectName("thinking_text")
        lay.addWidget(self.label, 1)  # the whole row: a long "Waiting for …" wraps across it, not in a column
        self.setAccessibleName("Model status")
        self._started = 0.0
        self._retry_until = 0.0
        self._waiting = ""  # why the run waits before asking the model (B2), "" when it does not
        self._timer = QTimer(self)
        # A quarter second, not one: a coarse 1 s timer may fire up to 5% early, at 0.95 s, and the
        # next tick would then come at 1.9 s, so a wait of 1.5 s never showed "1 s" (the label only
        # changes when its text does, so the faster tick costs nothing visible).
        self._timer.setInterval(250)
        self._timer.timeout.connect(self._tick)
        self.hide()

    @property
    def text(self) -> str:
        return self.label.text()

    @property
    def active(self) -> bool:
        return not self.isHidden()

    def start(self) -> None:
        """The model is being asked (a step began)."""
        self._started = time.monotonic()
        self._retry_until = 0.0
        self._waiting = ""
        self._tick()
        self.show()
        self._timer.start()

    def set_waiting(self, reason: str | None) -> None:
        """B2, D8: before this step's model call the run waits for background tasks (``reason``, in words,
        from the engine's ``budget_updated`` event); None or "": the wait is over and the call goes ahead."""
        if reason and not self.active:
            self.start()
        self._waiting = reason or ""
        self.label.setWordWrap(bool(self._waiting))
        self._tick()

    def set_retry(self, seconds: float) -> None:
        """The model layer retries after ``seconds`` (shown counting down)."""
        if not self.active:
            self.start()
        self._retry_until = time.monotonic() + max(0.0, seconds)
        self._tick()

    def stop(self) -> None:
        """The first token (or a tool call, a question, the end of the run) arrived."""
        self._timer.stop()
        self._waiting = ""
        self.label.setWordWrap(False)
        self.hide()

    @Slot()
    def _tick(self) -> None:
        now = time.monotonic()
        if self._waiting:
            waited = now - self._started
            text = f"⋯ {self._waiting[:1].upper()}{self._waiting[1:]}" + (f" ({_elapsed(waited)})" if waited >= 1 else "")
        elif self._retry_until > now:
            text = f"⋯ Retrying in {int(self._retry_until - now + 0.999)} s…"
        else:
            waited = now - self._started
            text = "⋯ Thinking…" + (f" {_elapsed(waited)}" if waited >= 1 else "")
        if text != self.label.text():
            self.label.setText(text)
            self.setAccessibleDescription(text)


class RunTicker(SteadyLabel):
    """Elapsed time, tokens and cost of the run in flight, ticking in the status bar; hidden otherwise."""

    def __init__(self, bridge: Bridge, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("statusTicker")
        self.setAccessibleName("Run progress")
        self.setToolTip("The run in flight: time, tokens (~ includes an estimate of what is streaming now)"
                        " and cost so far")
        self._started = 0.0
        self._run: dict[str, Any] = {}
        self._streamed_chars = 0
        self._timer = QTimer(self)
        self._timer.setInterval(500)
        self._timer.timeout.connect(self.refresh)
        bridge.sig_run_started.connect(self.on_run_started)
        bridge.sig_step_started.connect(self.on_step_started)
        bridge.sig_text_streamed.connect(self.on_text)
        bridge.sig_usage_updated.connect(self.on_usage)
        bridge.sig_run_finished.connect(self.on_run_ended)
        bridge.sig_interrupt_raised.connect(self.on_run_ended)
        bridge.sig_thread_attached.connect(self.on_run_ended)
        self.hide()

    @property
    def running(self) -> bool:
        return self._timer.isActive()

    @Slot()
    @Slot(str)
    def on_run_started(self, *_: Any) -> None:
        self._started = time.monotonic()
        self._run = {}
        self._streamed_chars = 0
        self._begin()

    @Slot(int)
    def on_step_started(self, *_: Any) -> None:
        self._streamed_chars = 0
        if not self.running:  # a resumed run (after a decision) sends no run_started
            self._started = time.monotonic()
            self._begin()

    def _begin(self) -> None:
        self._timer.start()
        self.refresh()
        self.show()

    @Slot(str)
    def on_text(self, text: str) -> None:
        # Counted only: the timer shows it (a label change per 30 ms batch re-lays out the status bar).
        self._streamed_chars += len(text)

    @Slot(dict)
    def on_usage(self, data: dict[str, Any]) -> None:
        self._run = dict(data.get("run_usage") or {})
        self._streamed_chars = 0  # now counted exactly in the run's usage
        if self.running:
            self.refresh()

    @Slot()
    @Slot(dict)
    @Slot(str)
    def on_run_ended(self, *_: Any) -> None:
        self._timer.stop()
        self.hide()

    @Slot()
    def refresh(self) -> None:
        from workbench.ui.status_bar import format_cost

        run = self._run
        out = int(run.get("output_tokens") or 0) + int(run.get("thoughts_tokens") or 0)
        estimate = (self._streamed_chars + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN
        tokens_in = int(run.get("input_tokens") or 0)
        approx = "~" if estimate else ""
        text = (f"This run {_elapsed(time.monotonic() - self._started)} · {tokens_in:,} in / "
                f"{approx}{out + estimate:,} out · {format_cost(run)}")
        if text != self.text():
            self.setText(text)
            self.setAccessibleDescription(text)


def install_run_ticker(status: QStatusBar, bridge: Bridge) -> RunTicker:
    """Put a ``RunTicker`` in the status bar (first of its permanent widgets' right-hand side)."""
    ticker = RunTicker(bridge, status)
    status.insertPermanentWidget(0, ticker)
    ticker.hide()
    return ticker


__all__ = ["CHARS_PER_TOKEN", "RunTicker", "ThinkingRow", "install_run_ticker"]
