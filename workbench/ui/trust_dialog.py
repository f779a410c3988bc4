"""The workspace trust dialog (W1, G7): shown before a workspace opens when its ``workbench.yaml`` asks
for settings that widen what the agent may do or where the API key goes.

It lists exactly what the workspace asks for (each setting as written and in plain words) and offers
**Open without these** (the default button: Enter, Esc and closing the dialog all pick it) or
**Trust**, which has to be clicked or chosen with Space on purpose. ``ask_trust(workspace, requests,
parent)`` ``open()``s it and awaits the answer as a Future (never ``exec()``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QDialog,
    QHBoxLayout,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from workbench.ui.plain_text import escape as _html, plain_label, plain_tooltip, rich_label

__all__ = ["TRUST", "SAFE", "TrustDialog", "ask_trust"]

#: Result codes: the safe choice is QDialog.Rejected, so every way of dismissing the dialog picks it.
SAFE = int(QDialog.DialogCode.Rejected)
TRUST = int(QDialog.DialogCode.Accepted)


class TrustDialog(QDialog):
    """Trust a workspace's settings, or open it without them (the default)."""

    def __init__(self, workspace: Path | str, requests: Sequence[Any], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("trustDialog")
        self.setWindowTitle("Trust this workspace?")
        self.setAccessibleName("Trust this workspace?")
        self.requests = list(requests)
        lay = QVBoxLayout(self)
        intro = rich_label(  # our markup; the workspace's path escaped
            f"The workspace <b>{_html(str(workspace))}</b> asks for settings that widen what the agent may "
            f"do or where your prompts and API key go. Trust it only if you trust whoever wrote its "
            f"<code>workbench.yaml</code>.", self)
        intro.setWordWrap(True)
        lay.addWidget(intro)
        self.list = QListWidget(self)
        self.list.setObjectName("trustRequests")
        self.list.setAccessibleName("What the workspace asks for")
        self.list.setWordWrap(True)
        self.list.setSpacing(5)  # each request is two lines: keep them apart at a glance
        # Scrolled by pixel: one long request (a command line of thousands of characters) is read to its
        # end, not skipped as one item taller than the list.
        self.list.setVerticalScrollMode(QListWidget.ScrollMode.ScrollPerPixel)
        for r in self.requests:
            key, value, description = r.shown()  # W1: nothing a workspace wrote can fake a line or hide one
            item = QListWidgetItem(f"{key}: {value}\n    {description}")
            item.setToolTip(plain_tooltip(description))  # a tool tip guesses rich text: never here
            self.list.addItem(item)
        self.list.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        lay.addWidget(self.list, 1)
        note = plain_label("Without trust these settings are ignored and the workspace runs with the safe "
                           "defaults. You are asked again if they change.", self)
        note.setWordWrap(True)
        lay.addWidget(note)
        row = QHBoxLayout()
        row.addStretch(1)
        self.trust_button = QPushButton("Trust", self)
        self.trust_button.setObjectName("trustButton")
        self.trust_button.setAccessibleName("Trust the workspace and use these settings")
        # G7: Enter never picks the risky choice, even when this button has the focus.
        self.trust_button.setAutoDefault(False)
        self.trust_button.setDefault(False)
        self.safe_button = QPushButton("Open without these", self)
        self.safe_button.setObjectName("openWithoutButton")
        self.safe_button.setAccessibleName("Open the workspace without these settings")
        self.safe_button.setAutoDefault(True)
        self.safe_button.setDefault(True)
        row.addWidget(self.trust_button)
        row.addWidget(self.safe_button)
        lay.addLayout(row)
        self.trust_button.clicked.connect(lambda: self.done(TRUST))
        self.safe_button.clicked.connect(lambda: self.done(SAFE))
        self.safe_button.setFocus()
        self.resize(560, 360)

    def showEvent(self, event: Any) -> None:  # noqa: N802 - Qt override
        super().showEvent(event)
        self.safe_button.setFocus()


async def ask_trust(workspace: Path | str, requests: Sequence[Any], parent: QWidget | None = None) -> bool:
    """Show the dialog and return True only if the person chose Trust."""
    from workbench.ui.qt_async import ask_dialog, release_dialog

    dialog = TrustDialog(workspace, requests, parent)
    try:
        code = await ask_dialog(dialog)
    finally:
        release_dialog(dialog)
    return code == TRUST
