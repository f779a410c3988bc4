"""Figures that change every step never lay the main window out again (issue 9: UI latency).

A status-bar label whose text changes asks the status bar, and through it the main window, to lay
out again: the whole window's layout (docks, splitters, the central area), several ms on the GUI
thread once a step. ``SteadyLabel`` keeps a fixed size that grows to fit its text; the tests count
the main window's layout requests while the figures change, and check that no text is ever clipped.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QEvent, QObject
from PySide6.QtWidgets import QLabel, QMainWindow, QTextEdit

from workbench.ui.steady_label import STEP, SteadyLabel
from workbench.ui.status_bar import RunStatusBar


class _LayoutRequests(QObject):
    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt's name
        if event.type() == QEvent.Type.LayoutRequest:
            self.count += 1
        return False


def _window(qtbot: Any) -> tuple[QMainWindow, RunStatusBar, _LayoutRequests]:
    window = QMainWindow()
    window.setCentralWidget(QTextEdit())
    status = RunStatusBar(window)
    window.setStatusBar(status)
    qtbot.addWidget(window)
    window.resize(1000, 600)
    window.show()
    qtbot.waitExposed(window)
    counter = _LayoutRequests()
    window.installEventFilter(counter)
    qtbot.wait(50)
    counter.count = 0
    return window, status, counter


def _usage(step: int) -> dict[str, Any]:
    return {"calls": step, "input_tokens": 1000 + 613 * step, "output_tokens": 40 * step, "cost": 0.0013 * step}


def test_usage_figures_changing_every_step_never_lay_the_window_out_again(qtbot: Any) -> None:
    window, status, counter = _window(qtbot)
    status.set_usage(_usage(1), _usage(1))
    qtbot.wait(20)
    counter.count = 0
    for step in range(2, 40):
        status.set_usage(_usage(step), _usage(step + 100))
        qtbot.wait(5)  # the posted layout requests are delivered
        label = status.usage_label
        assert label.width() >= label.fontMetrics().horizontalAdvance(label.text()), "text clipped"
    # The label grows by whole steps: a few relayouts at most over 38 changes (one a step before).
    assert counter.count <= 3, counter.count


def test_a_plain_label_in_its_place_would_lay_the_window_out_every_step(qtbot: Any) -> None:
    """The measure above can see the difference: the same changes through a QLabel relayout each time."""
    window, status, counter = _window(qtbot)
    plain = QLabel(status)
    status.addPermanentWidget(plain)
    qtbot.wait(20)
    counter.count = 0
    for step in range(2, 40):
        plain.setText(f"Run {step} calls · {1000 + 613 * step:,} in · ${0.0013 * step:.4f}")
        qtbot.wait(5)
    assert counter.count >= 19, counter.count


def test_a_steady_label_grows_to_fit_and_shrinks_only_by_whole_steps(qtbot: Any) -> None:
    label = SteadyLabel()
    qtbot.addWidget(label)
    label.setText("short")
    narrow = label.width()
    assert narrow >= label.fontMetrics().horizontalAdvance("short") and narrow % STEP == 0
    label.setText("a much longer text than before, to be sure it grows")
    wide = label.width()
    assert wide > narrow and wide >= label.fontMetrics().horizontalAdvance(label.text())
    label.setText("a much longer text than before, to be sure it grow")  # one character less: kept
    assert label.width() == wide
    label.setText("short")
    assert label.width() == narrow  # far narrower: given back
