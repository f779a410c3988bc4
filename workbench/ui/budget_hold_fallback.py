"""The simple Continue/Stop dialog that stands in for the full budget-hold dialog (G3, B3).

``budget_dialog.BudgetHoldDialog`` is the real one; this one is used when that module fails to load
(the reason is shown in it, and logged) and, with its buttons renamed Approve/Reject, for a question
of a kind the window does not know (``decision_dialogs``). It shows the question's payload and returns
``{"decision": "approve"}`` or ``{"decision": "reject", "message": reason}`` in ``decision``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Qt, Slot
from PySide6.QtWidgets import QDialog, QHBoxLayout, QLineEdit, QPushButton, QVBoxLayout, QWidget

from workbench.ui.plain_text import plain_label

if TYPE_CHECKING:
    from workbench.session import Question


class BudgetHoldDialog(QDialog):
    """A budget hold (B3): spent vs limit, Continue or Stop with a reason."""

    def __init__(self, question: Question, parent: QWidget | None = None, load_error: str | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("budget_hold_dialog")
        self.setWindowTitle("Budget reached")
        self.setModal(True)
        self.question = question
        self.decision: dict[str, Any] | None = None
        lay = QVBoxLayout(self)
        title = plain_label("The run reached its budget. Continue with the full limit again, or stop?")
        title.setWordWrap(True)
        title.setStyleSheet("font-weight: 600;")
        lay.addWidget(title)
        if load_error:
            note = plain_label(f"The full budget dialog (workbench.ui.budget_dialog) could not be loaded: {load_error}. "
                               "This simple dialog decides instead; see the log for the traceback.", self)
            note.setObjectName("budget_dialog_error")
            note.setWordWrap(True)
            note.setStyleSheet("color: #c0392b;")
            lay.addWidget(note)
        details = plain_label(self._describe(question.payload))
        details.setObjectName("budget_details")
        details.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addWidget(details)
        row = QHBoxLayout()
        row.addWidget(plain_label("Reason if you stop:"))
        self.reason = QLineEdit(self)
        self.reason.setObjectName("budget_reason")
        row.addWidget(self.reason, 1)
        lay.addLayout(row)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        self.continue_button = QPushButton("Continue", self)
        self.continue_button.setObjectName("budget_continue")
        self.continue_button.clicked.connect(self._continue)
        self.stop_button = QPushButton("Stop", self)
        self.stop_button.setObjectName("budget_stop")
        self.stop_button.clicked.connect(self._stop)
        buttons.addWidget(self.continue_button)
        buttons.addWidget(self.stop_button)
        lay.addLayout(buttons)
        for b in (self.continue_button, self.stop_button):
            b.setAutoDefault(False)  # G7: Enter never continues (nor approves an unknown question)
            b.setDefault(False)
        self.reason.returnPressed.connect(self._stop)  # G7: Enter in the reason stops, with the reason

    @staticmethod
    def _describe(payload: dict[str, Any]) -> str:
        lines = []
        fields = payload.get("fields") or payload.get("limits") or payload.get("exceeded")
        if isinstance(fields, list):
            for f in fields:
                if isinstance(f, dict):
                    lines.append(f"{f.get('field', '?')}: {f.get('spent', '?')} of {f.get('limit', '?')}")
        spent, limit = payload.get("spent"), payload.get("limit")
        if isinstance(spent, dict) and isinstance(limit, dict):
            for k, v in limit.items():
                lines.append(f"{k}: {spent.get(k, '?')} of {v}")
        elif "field" in payload:
            lines.append(f"{payload.get('field')}: {spent} of {limit}")
        if not lines:
            lines = [f"{k}: {v}" for k, v in payload.items()]
        return "\n".join(lines) or "(no details)"

    @Slot()
    def _continue(self) -> None:
        self.decision = {"decision": "approve"}
        self.accept()

    @Slot()
    def _stop(self) -> None:
        reason = self.reason.text().strip()
        self.decision = {"decision": "reject", "message": reason or "Stopped at the budget limit."}
        self.accept()


__all__ = ["BudgetHoldDialog"]
