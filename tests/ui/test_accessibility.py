"""G14: the window is usable with a screen reader.

Every visible interactive widget of the real window (on the demo workspace, with every dock panel
brought to the front in turn) and of each dialog (approval, budget hold, settings, trust, rename) has an
accessible name — the one AT-SPI reads, ``QAccessible.queryAccessibleInterface(w).text(Name)``, so Qt's
own derived names count (a button's text, a field's buddy label). Tab moves through a dialog in the
order of its layout. Statuses are never told by colour alone.

The walk takes whatever widgets exist, so a panel or dialog added later is checked too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QAccessible
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractItemView,
    QAbstractSlider,
    QAbstractSpinBox,
    QApplication,
    QComboBox,
    QDockWidget,
    QHeaderView,
    QLineEdit,
    QPlainTextEdit,
    QScrollBar,
    QTabBar,
    QTabWidget,
    QTextEdit,
    QWidget,
)

from tests.ui.helpers import button, click, find_dialog, visible_dialog, wait_for

INTERACTIVE = (QAbstractButton, QLineEdit, QPlainTextEdit, QTextEdit, QComboBox, QAbstractSpinBox,
               QAbstractItemView, QTabBar, QAbstractSlider)


def accessible_name(widget: QWidget) -> str:
    """What a screen reader announces as the widget's name."""
    iface = QAccessible.queryAccessibleInterface(widget)
    return (iface.text(QAccessible.Text.Name) if iface is not None else "") or ""


def _part_of_another_control(widget: QWidget) -> bool:
    """Pieces Qt builds inside a control, read through that control: a combo box's or spin box's line
    edit, a combo's popup list, scroll bars, a tab bar's scroll arrows, a line edit's clear button."""
    if isinstance(widget, QScrollBar):
        return True
    if isinstance(widget, QHeaderView) and isinstance(widget.parentWidget(), QAbstractItemView):
        return True  # read as the table's column and row headers
    parent = widget.parentWidget()
    while parent is not None:
        if isinstance(parent, (QComboBox, QAbstractSpinBox, QTabBar, QLineEdit)):
            return True
        if parent.objectName() == "qt_scrollarea_hcontainer" or parent.objectName() == "qt_scrollarea_vcontainer":
            return True
        parent = parent.parentWidget()
    return False


def _tabs_named(bar: QTabBar) -> bool:
    """A tab bar is read through its tabs: each needs a name (its text, or an accessible tab name)."""
    iface = QAccessible.queryAccessibleInterface(bar)
    if iface is None:
        return False
    names = [iface.child(i).text(QAccessible.Text.Name) for i in range(iface.childCount()) if iface.child(i)]
    return bool(names) and all(n.strip() for n in names[: bar.count()])


def describe(widget: QWidget) -> str:
    path = []
    w: QWidget | None = widget
    while w is not None and len(path) < 4:
        path.append(w.objectName() or type(w).__name__)
        w = w.parentWidget()
    text = getattr(widget, "text", None)
    shown = text() if callable(text) else ""
    return f"{type(widget).__name__} {'/'.join(reversed(path))}" + (f" ({shown[:30]!r})" if shown else "")


def unnamed(roots: Iterable[QWidget]) -> list[str]:
    """The visible interactive widgets under ``roots`` a screen reader would announce without a name."""
    out: list[str] = []
    seen: set[int] = set()
    for root in roots:
        for w in [root, *root.findChildren(QWidget)]:
            if id(w) in seen or not isinstance(w, INTERACTIVE) or not w.isVisible():
                continue
            seen.add(id(w))
            if _part_of_another_control(w):
                continue
            if isinstance(w, QTabBar):
                if not accessible_name(w).strip() and not _tabs_named(w):
                    out.append(describe(w))
                continue
            if not accessible_name(w).strip():
                out.append(describe(w))
    return out


def _reading_order(root: QWidget) -> list[QWidget]:
    """The focusable visible widgets of ``root`` in the order its layouts place them."""
    order: list[QWidget] = []

    def visit_layout(layout: Any) -> None:
        for i in range(layout.count()):
            item = layout.itemAt(i)
            if item.widget() is not None:
                visit_widget(item.widget())
            elif item.layout() is not None:
                visit_layout(item.layout())

    def visit_widget(w: QWidget) -> None:
        if not w.isVisible():
            return
        if w.focusPolicy() & Qt.FocusPolicy.TabFocus and w.isEnabled() and not _part_of_another_control(w):
            order.append(w)
        if w.layout() is not None:
            visit_layout(w.layout())

    if root.layout() is not None:
        visit_layout(root.layout())
    return order


def _tab_chain(root: QWidget, start: QWidget, limit: int = 200) -> list[QWidget]:
    """The widgets Tab visits inside ``root`` from ``start``, as ``focusNextPrevChild`` walks them."""
    chain: list[QWidget] = []
    w = start
    for _ in range(limit):
        if (w.isVisible() and w.isEnabled() and w.focusPolicy() & Qt.FocusPolicy.TabFocus
                and root.isAncestorOf(w) and w.focusProxy() is None):
            if w in chain:
                break
            chain.append(w)
        w = w.nextInFocusChain()
        if w is start:
            break
    return chain


def focus_out_of_order(root: QWidget) -> list[str]:
    """Where Tab's order in ``root`` departs from its layout's reading order."""
    reading = [w for w in _reading_order(root) if w.focusProxy() is None]
    if len(reading) < 2:
        return []
    chain = [w for w in _tab_chain(root, reading[0]) if w in reading]
    if chain == reading:
        return []
    return [f"layout: {[describe(w) for w in reading]}", f"tab:    {[describe(w) for w in chain]}"]


def _dock_roots(window: Any) -> list[QWidget]:
    return [d for d in window.findChildren(QDockWidget)]


async def _each_dock_in_front(window: Any) -> list[str]:
    """Bring each dock to the front of its tab group in turn; the unnamed widgets seen on the way."""
    missing: list[str] = []
    for dock in window.findChildren(QDockWidget):
        if dock.isHidden():
            dock.show()
        dock.raise_()
        await asyncio.sleep(0.02)
        missing += unnamed([dock])
    return missing


# -- the window -----------------------------------------------------------------------------------------
async def _demo_session(windows: Any, demo_workspace: Path, qtbot: Any) -> tuple[Any, list[str]]:
    """The real window with every dock panel, after the demo session (tool rows, answers); the unnamed
    controls of the approval dialogs seen on the way."""
    from workbench.app import plug_panels

    window = await windows()
    plug_panels(window)  # every dock panel, as the app has them
    await window.open_workspace(demo_workspace)
    window.input.setPlainText("Show me around")
    click(qtbot, window.send_button)
    missing: list[str] = []
    for _ in range(2):
        dialog = await find_dialog("approval_dialog", 30)
        missing += unnamed_on_every_tab(dialog)
        click(qtbot, button(dialog, "approve_once"))
    await asyncio.wait_for(window.wait_settled(), 30)
    return window, missing


def unnamed_on_every_tab(dialog: QWidget) -> list[str]:
    """``unnamed`` with each page of the dialog's tab widgets in front in turn."""
    missing = unnamed([dialog])
    for tabs in dialog.findChildren(QTabWidget):
        current = tabs.currentIndex()
        for i in range(tabs.count()):
            tabs.setCurrentIndex(i)
            missing += [m for m in unnamed([dialog]) if m not in missing]
        tabs.setCurrentIndex(current)
    return missing


def _area(window: Any, w: QWidget) -> int:
    """0 left docks, 1 top, 2 centre, 3 right, 4 bottom (a dock tab bar: the docks under it)."""
    areas = {Qt.DockWidgetArea.LeftDockWidgetArea: 0, Qt.DockWidgetArea.TopDockWidgetArea: 1,
             Qt.DockWidgetArea.RightDockWidgetArea: 3, Qt.DockWidgetArea.BottomDockWidgetArea: 4}
    p: QWidget | None = w
    while p is not None:
        if isinstance(p, QDockWidget):
            return areas.get(window.dockWidgetArea(p), 4)
        if p is window.centralWidget():
            return 2
        if isinstance(p, QTabBar) and p.parentWidget() is window:
            return 3 if p.geometry().center().x() > window.width() // 2 else 0
        p = p.parentWidget()
    return -1


async def test_g14_tab_in_the_window_follows_the_layout(windows: Any, demo_workspace: Path, qtbot: Any) -> None:
    """Left docks, then the transcript, the prompt, Send (and Stop), then the right docks (it went from
    Send to the threads list, and reached the transcript's answers after every dock)."""
    window, _ = await _demo_session(windows, demo_workspace, qtbot)
    await asyncio.sleep(0.05)
    start = window.threads_panel.new_button
    chain, w = [], start
    for _ in range(2000):
        if w.isVisible() and w.isEnabled() and w.focusPolicy() & Qt.FocusPolicy.TabFocus and window.isAncestorOf(w):
            chain.append(w)
        w = w.nextInFocusChain()
        if w is start:
            break
    areas = [_area(window, w) for w in chain]
    assert areas == sorted(areas), f"Tab jumps back and forth between areas: {areas}"
    centre = [w for w in chain if _area(window, w) == 2]
    answers = [i for i, w in enumerate(centre) if window.transcript.isAncestorOf(w)]
    assert answers and max(answers) < centre.index(window.input) < centre.index(window.send_button)
    # the real keys: Tab from the prompt goes to Send, then on to the right-hand docks
    window.activateWindow()
    window.input.setFocus()
    await wait_for(lambda: window.input.hasFocus(), 5, "the prompt focused")
    qtbot.keyClick(window.input, Qt.Key.Key_Tab)
    assert QApplication.focusWidget() is window.send_button
    qtbot.keyClick(window.send_button, Qt.Key.Key_Tab)
    assert _area(window, QApplication.focusWidget()) == 3
    window.input.setFocus()
    await wait_for(lambda: window.input.hasFocus(), 5, "the prompt focused")
    qtbot.keyClick(window.input, Qt.Key.Key_Backtab, Qt.KeyboardModifier.ShiftModifier)
    assert window.transcript.isAncestorOf(QApplication.focusWidget()), "Shift+Tab from the prompt: the transcript"


async def test_g14_every_control_of_the_window_and_its_docks_has_a_name(windows: Any, demo_workspace: Path,
                                                                        qtbot: Any) -> None:
    window, missing = await _demo_session(windows, demo_workspace, qtbot)
    for row in window.transcript.tool_rows()[:2]:
        row.set_expanded(True)  # the arguments and result views
    await asyncio.sleep(0.05)
    missing += unnamed([window])
    missing += await _each_dock_in_front(window)
    assert not sorted(set(missing)), "no accessible name:\n" + "\n".join(sorted(set(missing)))


async def test_g14_transcript_statuses_carry_text_not_colour_alone(windows: Any, demo_workspace: Path,
                                                                    qtbot: Any) -> None:
    from workbench.ui.transcript_blocks import NoticeBlock, ToolCallRow

    window = await windows(demo_workspace)
    row = ToolCallRow("c1", "write_file", {"path": "/project/x"}, status="error")
    assert row.status_label.text().strip(), "a tool call's status is a word, not a colour"
    error = window.transcript.add_error("model 'x' failed: connection refused")
    assert isinstance(error, NoticeBlock) and error.label.text().startswith("The run failed")
    assert "failed" in accessible_name(error.button).lower() or "retry" in accessible_name(error.button).lower()
    assert window.status.status_label.text()  # the run status in words
    row.deleteLater()


def test_g14_budget_meter_level_is_told_in_words(qtbot: Any) -> None:
    from workbench.ui.budget_panel import FieldMeter

    meter = FieldMeter("total_tokens")
    qtbot.addWidget(meter)
    meter.set_value(90, 100)
    assert meter.level == "warn" and "near" in meter.text.lower()
    meter.set_value(120, 100)
    assert meter.level == "over" and "over" in meter.text.lower()
    meter.set_value(10, 100)
    assert "near" not in meter.text.lower() and "over" not in meter.text.lower()
    assert accessible_name(meter.bar).strip()


# -- the dialogs ------------------------------------------------------------------------------------------
async def test_g14_settings_dialog(windows: Any, demo_workspace: Path, qtbot: Any) -> None:
    window = await windows(demo_workspace)
    window.settings_action.trigger()
    dialog = await find_dialog("settingsDialog", 10)
    await asyncio.sleep(0.05)
    missing = unnamed([dialog])
    order = focus_out_of_order(dialog)
    dialog.reject()
    await wait_for(lambda: visible_dialog("settingsDialog") is None, 5, "Settings to close")
    assert not missing, "no accessible name:\n" + "\n".join(missing)
    assert not order, "Tab does not follow the layout:\n" + "\n".join(order)


async def test_g14_rename_dialog(windows: Any, demo_workspace: Path, qtbot: Any) -> None:
    window = await windows(demo_workspace)
    click(qtbot, window.threads_panel.rename_button)
    dialog = await find_dialog("rename_thread_dialog", 5)
    await asyncio.sleep(0.05)
    missing = unnamed([dialog])
    dialog.reject()
    await wait_for(lambda: visible_dialog("rename_thread_dialog") is None, 5, "the rename dialog to close")
    assert not missing, "no accessible name:\n" + "\n".join(missing)


async def test_g14_trust_dialog(tmp_path: Path, qtbot: Any) -> None:
    from workbench import trust
    from workbench.config import load_config
    from workbench.ui.trust_dialog import ask_trust

    ws = tmp_path / "cloned"
    ws.mkdir()
    (ws / "workbench.yaml").write_text("model: openai/test-model\napi_base: http://203.0.113.9/v1\n"
                                       "permissions:\n  default: allow\n", encoding="utf-8")
    task = asyncio.ensure_future(ask_trust(ws, trust.requests(load_config(ws), ws)))
    dialog = await find_dialog("trustDialog", 10)
    await asyncio.sleep(0.05)
    missing = unnamed([dialog])
    order = focus_out_of_order(dialog)
    dialog.reject()
    assert await asyncio.wait_for(task, 10) is False
    assert not missing, "no accessible name:\n" + "\n".join(missing)
    assert not order, "Tab does not follow the layout:\n" + "\n".join(order)


def _hold() -> Any:
    from workbench.engine.middleware import Question

    fields = {"total_tokens": {"spent": 150.0, "limit": 100.0}, "cost_usd": {"spent": 0.01, "limit": 1.0}}
    data = {"budget": 0, "scope": "run", "field": "total_tokens", "spent": 150.0, "limit": 100.0,
            "priced": False, "fields": fields}
    return Question("budget-r1-c1", "budget_hold",
                    {**data, "budgets": [data], "tool": "read_file", "arguments": {"path": "/project/README.md"},
                     "reason": "run budget reached: total_tokens 150 of 100"}, call_id="c1")


async def test_g14_budget_hold_dialog(qtbot: Any) -> None:
    from workbench.ui.budget_dialog import BudgetHoldDialog

    dialog = BudgetHoldDialog([_hold()])
    qtbot.addWidget(dialog)
    dialog.show()
    await asyncio.sleep(0.05)
    missing = unnamed([dialog])
    order = focus_out_of_order(dialog)
    dialog.close()
    assert not missing, "no accessible name:\n" + "\n".join(missing)
    assert not order, "Tab does not follow the layout:\n" + "\n".join(order)


async def test_g14_budget_hold_dialog_with_compact_and_continue(qtbot: Any) -> None:
    from workbench.ui.budget_dialog import BudgetHoldDialog

    async def compact() -> None:
        return None

    dialog = BudgetHoldDialog([_hold()], compact=compact)
    qtbot.addWidget(dialog)
    dialog.show()
    await asyncio.sleep(0.05)
    assert dialog.compact_button is not None and dialog.compact_button.isVisible()
    missing = unnamed([dialog])
    order = focus_out_of_order(dialog)
    dialog.close()
    assert not missing, "no accessible name:\n" + "\n".join(missing)
    assert not order, "Tab does not follow the layout:\n" + "\n".join(order)


async def test_g14_prompt_inspector(windows: Any, demo_workspace: Path, qtbot: Any) -> None:
    """V2: the inspector opened from the Context panel after the demo session."""
    window, _ = await _demo_session(windows, demo_workspace, qtbot)
    dialog = window.panels["Context"].inspect_selected()
    assert dialog is not None and await find_dialog("promptInspector", 10) is dialog
    await asyncio.sleep(0.05)
    missing = unnamed([dialog])
    order = focus_out_of_order(dialog)
    dialog.close()
    await wait_for(lambda: visible_dialog("promptInspector") is None, 5, "the inspector to close")
    await window._settle_panels()
    assert not missing, "no accessible name:\n" + "\n".join(missing)
    assert not order, "Tab does not follow the layout:\n" + "\n".join(order)


async def test_g14_approval_dialog_names_and_tab_order(windows: Any, demo_workspace: Path, qtbot: Any) -> None:
    window = await windows(demo_workspace)
    window.input.setPlainText("Show me around")
    click(qtbot, window.send_button)
    dialog = await find_dialog("approval_dialog", 30)
    await asyncio.sleep(0.05)
    missing = unnamed_on_every_tab(dialog)
    order = focus_out_of_order(dialog)
    await window.stop()
    if visible_dialog("approval_dialog") is not None:
        dialog.close()
    await asyncio.wait_for(window.wait_settled(), 30)
    assert not missing, "no accessible name:\n" + "\n".join(missing)
    assert not order, "Tab does not follow the layout:\n" + "\n".join(order)


async def test_g14_rule_builder_names_and_tab_order(windows: Any, demo_workspace: Path, qtbot: Any) -> None:
    window = await windows(demo_workspace)
    window.input.setPlainText("Show me around")
    click(qtbot, window.send_button)
    approval = await find_dialog("approval_dialog", 30)
    click(qtbot, button(approval, "make_rule"))
    dialog = await find_dialog("rule_builder", 10)
    await asyncio.sleep(0.05)
    missing = unnamed_on_every_tab(dialog)
    order = focus_out_of_order(dialog)
    dialog.reject()
    await wait_for(lambda: visible_dialog("rule_builder") is None, 5, "the rule builder to close")
    await window.stop()
    if visible_dialog("approval_dialog") is not None:
        approval.close()
    await asyncio.wait_for(window.wait_settled(), 30)
    assert not missing, "no accessible name:\n" + "\n".join(missing)
    assert not order, "Tab does not follow the layout:\n" + "\n".join(order)


def test_g14_the_walk_catches_an_unnamed_control(qtbot: Any) -> None:
    """The check itself: an icon-only button is caught, a named or texted one is not."""
    from PySide6.QtWidgets import QHBoxLayout, QPushButton, QToolButton

    host = QWidget()
    qtbot.addWidget(host)
    lay = QHBoxLayout(host)
    icon_only = QToolButton(host)
    texted = QPushButton("Save", host)
    named = QToolButton(host)
    named.setAccessibleName("Close")
    for w in (icon_only, texted, named):
        lay.addWidget(w)
    host.show()
    assert len(unnamed([host])) == 1 and "QToolButton" in unnamed([host])[0]
    assert QApplication.instance() is not None
