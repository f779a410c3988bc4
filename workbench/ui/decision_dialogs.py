"""Asking the person a suspended run's pending questions through dialogs, as awaitable calls.

Every dialog is ``open()``ed and awaited as a future (``qt_async.ask_dialog``): the loop, the
streaming and the rest of the window keep working while it is up. ``ask_decisions`` answers every
pending question of a suspended run (tool approvals in the approval dialog, then budget holds in
``budget_dialog``, then any other kind) and returns them in the ``Session.resume`` format::

    {question_id: {"decision": "approve" | "edit" | "reject" | "respond",
                   "arguments": {...}, "message": "...", "always": "session" | "project" | "user"}}

or None when the user closed a dialog without deciding (the run then stays suspended, and its
questions come back when the thread is opened again), or ``STOP_RUN`` when the person chose "Stop this
run" (the caller abandons the run: ``Session.abandon``).

When ``workbench.ui.budget_dialog`` cannot be loaded, budget holds are asked in the simple
Continue/Stop dialog (``budget_hold_fallback``), which names why; that dialog also shows a question of
a kind this window does not know.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from PySide6.QtWidgets import QDialog, QWidget

from workbench.ui.approval_call_view import ReadFile
from workbench.ui.approval_dialog import STOP_CODE, STOP_RUN, ApprovalDialog
from workbench.ui.budget_hold_fallback import BudgetHoldDialog
from workbench.ui.dialog_placement import place_beside_transcript
from workbench.ui.qt_async import ask_dialog, release_dialog, start

if TYPE_CHECKING:
    from workbench.session import Question

log = logging.getLogger(__name__)

OnDecided = Callable[[str, dict[str, Any]], None]
Compact = Callable[[], Awaitable[Any]]


async def _await_dialog(dialog: QDialog, *, modal: bool = True) -> int:
    try:
        return await ask_dialog(dialog, modal=modal)
    finally:
        release_dialog(dialog)


async def ask_approvals(parent: QWidget | None, questions: Sequence[Question],
                        read: ReadFile | None = None, *, decided: dict[str, dict[str, Any]] | None = None,
                        on_decided: OnDecided | None = None) -> dict[str, dict[str, Any]] | str | None:
    """Open the (modeless, G12) approval dialog for these tool calls, starting at the first one not in
    ``decided`` (Q2); ``on_decided(id, decision)`` hears each decision as it is made. Their decisions,
    None if it was closed part-way, or ``STOP_RUN``."""
    dialog = ApprovalDialog(questions, parent, decided=decided)
    if on_decided is not None:
        dialog.sig_call_decided.connect(lambda qid, d: _tell(on_decided, qid, d))
    place_beside_transcript(dialog, parent)
    loader = start(dialog.load_files(read), name="approval-diffs") if read is not None else None
    try:
        code = await _await_dialog(dialog, modal=False)
    finally:
        if loader is not None and not loader.done():
            loader.cancel()
    if code == STOP_CODE:
        return STOP_RUN
    if code != QDialog.DialogCode.Accepted:
        return None
    return dict(dialog.decisions)


def _tell(on_decided: OnDecided, qid: str, decision: dict[str, Any]) -> None:
    try:
        on_decided(qid, dict(decision))
    except Exception as e:  # noqa: BLE001 - the dialog's own record still decides; say why it was not kept
        log.warning("the decision for %s was not recorded: %s", qid, e)


_budget_error: str | None = None
"""Why ``workbench.ui.budget_dialog`` did not load (shown in the simple dialog), else None."""


def _budget_module() -> Any:
    """``workbench.ui.budget_dialog`` (the full budget-hold dialog), else None — never silently: a module
    that fails to import is logged with its traceback and named in the simple dialog that stands in."""
    global _budget_error
    try:
        from workbench.ui import budget_dialog
    except Exception as error:  # noqa: BLE001 - shown and logged, the simple dialog still decides
        _budget_error = f"{type(error).__name__}: {error}"
        log.error("The budget dialog (workbench.ui.budget_dialog) could not be loaded: %s; using the simple "
                  "Continue/Stop dialog instead", _budget_error, exc_info=True)
        return None
    if not hasattr(budget_dialog, "ask_budget_holds"):
        _budget_error = "it has no ask_budget_holds()"
        log.error("The budget dialog (workbench.ui.budget_dialog) could not be used: %s", _budget_error)
        return None
    _budget_error = None
    return budget_dialog


async def ask_budget_holds(parent: QWidget | None, questions: Sequence[Question], *,
                           compact: Compact | None = None) -> dict[str, dict[str, Any]] | None:
    """One step's budget holds: ``workbench.ui.budget_dialog`` decides them when that module exists
    (one dialog; closing it stops the run; ``compact``, the held thread's ``Session.compact``, adds
    "Compact and continue"), else the simple Continue/Stop dialog (``budget_hold_fallback``), one each."""
    if not questions:
        return {}
    module = _budget_module()
    if module is not None:
        if compact is not None:
            return dict(await module.ask_budget_holds(list(questions), parent, compact=compact))
        return dict(await module.ask_budget_holds(list(questions), parent))
    decisions: dict[str, dict[str, Any]] = {}
    for q in questions:
        d = await ask_budget_hold(parent, q)
        if d is None:
            return None
        decisions[q.id] = d
    return decisions


async def ask_budget_hold(parent: QWidget | None, question: Question) -> dict[str, Any] | None:
    """The simple budget-hold dialog: Continue → approve, Stop → reject with the reason; None if closed."""
    dialog = BudgetHoldDialog(question, parent, load_error=_budget_error)
    code = await _await_dialog(dialog)
    return dialog.decision if code == QDialog.DialogCode.Accepted else None


async def ask_decisions(parent: QWidget | None, questions: Sequence[Question],
                        read: ReadFile | None = None, *, decided: dict[str, dict[str, Any]] | None = None,
                        on_decided: OnDecided | None = None,
                        compact: Compact | None = None) -> dict[str, dict[str, Any]] | str | None:
    """Every pending question's decision (tool approvals first, in order, then budget holds, then any
    other kind), None when the user closed a dialog without deciding, or ``STOP_RUN``. ``decided``:
    decisions made before (kept; only the others are asked, Q2); ``on_decided`` hears each new one;
    ``compact`` (the thread's ``Session.compact``) offers "Compact and continue" at a budget hold."""
    decisions: dict[str, dict[str, Any]] = dict(decided or {})
    approvals = [q for q in questions if q.kind == "tool_approval"]
    if approvals and any(q.id not in decisions for q in approvals):
        got = await ask_approvals(parent, approvals, read, decided=decisions, on_decided=on_decided)
        if got is None or isinstance(got, str):
            return got
        decisions.update(got)
    holds = await ask_budget_holds(parent, [q for q in questions if q.kind == "budget_hold" and q.id not in decisions],
                                   compact=compact)
    if holds is None:
        return None
    for qid, d in holds.items():
        if on_decided is not None:
            _tell(on_decided, qid, d)
    decisions.update(holds)
    for q in questions:
        if q.kind in ("tool_approval", "budget_hold") or q.id in decisions:
            continue
        d = await _ask_generic(parent, q)
        if d is None:
            return None
        decisions[q.id] = d
        if on_decided is not None:
            _tell(on_decided, q.id, d)
    return decisions


async def _ask_generic(parent: QWidget | None, question: Question) -> dict[str, Any] | None:
    """A question of a kind this window does not know: show the payload, approve or reject."""
    dialog = BudgetHoldDialog(question, parent)
    dialog.setWindowTitle(f"Question: {question.kind}")
    dialog.continue_button.setText("Approve")
    dialog.stop_button.setText("Reject")
    code = await _await_dialog(dialog)
    return dialog.decision if code == QDialog.DialogCode.Accepted else None


__all__ = [
    "STOP_RUN",
    "ask_approvals",
    "ask_budget_hold",
    "ask_budget_holds",
    "ask_decisions",
]
