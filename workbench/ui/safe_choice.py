"""A question whose keys take the safe answer (G7): Enter and Esc pick the choice that changes nothing
(keep the edits, keep working, keep the task running); the risky one needs a click or its own key."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtWidgets import QAbstractButton, QMessageBox, QWidget

from workbench.ui.plain_text import plain_message_box

ROLE = QMessageBox.ButtonRole


def safe_choice_box(parent: QWidget | None, name: str, title: str, text: str,
                    choices: Sequence[tuple[str, str, QMessageBox.ButtonRole]], safe: str
                    ) -> tuple[QMessageBox, dict[str, QAbstractButton]]:
    """A warning box named ``name`` with a button per ``(button name, label, role)``, the button named
    ``safe`` its default and Escape button and no other a default. The box and its buttons by name."""
    box = QMessageBox(QMessageBox.Icon.Warning, title, text, QMessageBox.StandardButton.NoButton, parent)
    plain_message_box(box)  # the text (and an informative text set later) names paths, agents: shown as written
    box.setObjectName(name)
    buttons: dict[str, QAbstractButton] = {}
    for button_name, label, role in choices:
        button = box.addButton(label, role)
        button.setObjectName(button_name)
        button.setAutoDefault(False)
        buttons[button_name] = button
    box.setDefaultButton(buttons[safe])  # type: ignore[arg-type]
    box.setEscapeButton(buttons[safe])
    return box, buttons
