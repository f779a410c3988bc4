"""Tab follows the layout (G14).

Qt's Tab order is the order widgets were created in. In the main window that put the threads list
(a dock made after the centre) between Send and the right-hand docks, and the transcript's blocks
(made as a run goes) after every dock. Here:

- ``order_window_focus(window)`` orders the window's focus chain by place: the left docks, the top
  docks, the centre (transcript, prompt, Send, Stop), the right docks, the bottom docks; docks in one
  area top to bottom. ``keep_window_focus_ordered(window)`` re-applies it when the window is shown and
  when a dock is added or moved.
- ``chain_after(anchor, widget)`` puts a new widget's focusable parts right after ``anchor`` (the
  transcript places each new block after the one before it).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from PySide6.QtCore import QEvent, QObject, Qt, QTimer, Slot
from PySide6.QtWidgets import QDockWidget, QMainWindow, QTabBar, QWidget

_AREA_ORDER = {
    Qt.DockWidgetArea.LeftDockWidgetArea: 0,
    Qt.DockWidgetArea.TopDockWidgetArea: 1,
    # the centre is 2
    Qt.DockWidgetArea.RightDockWidgetArea: 3,
    Qt.DockWidgetArea.BottomDockWidgetArea: 4,
}


def focusables(root: QWidget) -> list[QWidget]:
    """``root`` and its descendants that take the focus with Tab, in their current chain order."""
    out = _walk(root)
    _relink_wrappers(root)
    return out


def _walk(root: QWidget) -> list[QWidget]:
    out: list[QWidget] = []
    if _tabbable(root):
        out.append(root)
    w = root.nextInFocusChain()
    for _ in range(20000):  # the chain is a cycle; guard against a broken one
        if w is root or w is None:
            break
        if root.isAncestorOf(w) and _tabbable(w):
            out.append(w)
        w = w.nextInFocusChain()
    return out


def _relink_wrappers(root: QWidget) -> None:
    """Undo what walking the focus chain did to PySide's bookkeeping.

    PySide's return-value heuristic records the widget ``w.nextInFocusChain()`` returns as a child of
    ``w``. When ``w`` was later deleted (a transcript notice, a dialog), PySide invalidated every
    Qt-made widget it had recorded under ``w``, and theirs in turn: the walk passes the menu bar, so
    opening a thread that waits for a decision left ``window.view_menu`` and the other menus raising
    "Internal C++ object already deleted". ``findChildren`` records each widget it returns as a child
    of the widget asked, so asking the window (which outlives all of them) puts every widget the walk
    touched back under it.
    """
    top = root.window()
    top.findChildren(QWidget)


def _tabbable(w: QWidget) -> bool:
    return bool(w.focusPolicy() & Qt.FocusPolicy.TabFocus) and w.focusProxy() is None


def chain(widgets: Iterable[QWidget]) -> None:
    """Make Tab go through ``widgets`` in this order."""
    prev: QWidget | None = None
    for w in widgets:
        if prev is not None and w is not prev:
            QWidget.setTabOrder(prev, w)
        prev = w


def parts_of(widget: QWidget) -> list[QWidget]:
    """The tabbable parts of a small, newly built widget (creation order is its chain order): cheap,
    unlike walking the window's whole chain, for the transcript's thousands of blocks."""
    parts = [w for w in widget.findChildren(QWidget) if _tabbable(w)]
    return [widget, *parts] if _tabbable(widget) else parts


def chain_after(anchor: QWidget, widget: QWidget) -> QWidget:
    """Put ``widget``'s focusable parts right after ``anchor`` in the Tab order; returns the last one
    (or ``anchor`` when ``widget`` has none)."""
    parts = parts_of(widget)
    if parts:
        chain([anchor, *parts])
        return parts[-1]
    return anchor


def window_regions(window: QMainWindow) -> list[QWidget]:
    """The window's parts in reading order: docks (and the tab bars of tabbed docks) by area — left,
    top, centre, right, bottom — then top to bottom; tabbed docks in the order of their tabs."""
    docks = [d for d in window.findChildren(QDockWidget) if d.parentWidget() is window and not d.isFloating()]
    bars = [b for b in window.findChildren(QTabBar) if b.parentWidget() is window and b.isVisible()]
    area_rect = window.rect()

    def in_front(d: QDockWidget) -> bool:  # a dock behind another tab is kept "visible", off the window
        return not d.isHidden() and area_rect.intersects(d.geometry())

    def tab_index(d: QDockWidget) -> int:
        for bar in bars:
            titles = [bar.tabText(i).replace("&", "") for i in range(bar.count())]
            if d.windowTitle().replace("&", "") in titles:
                return titles.index(d.windowTitle().replace("&", ""))
        return 0

    def place(d: QDockWidget) -> tuple[int, int]:
        for other in [d, *window.tabifiedDockWidgets(d)]:
            if in_front(other):
                return other.geometry().y(), other.geometry().x()
        return d.geometry().y(), d.geometry().x()

    keyed: list[tuple[tuple[int, int, int, int], QWidget]] = []
    for d in docks:
        keyed.append(((_AREA_ORDER.get(window.dockWidgetArea(d), 4), *place(d), tab_index(d)), d))
    shown = [d for d in docks if in_front(d)]
    for bar in bars:
        cx = bar.geometry().center().x()
        under = [d for d in shown if d.geometry().left() <= cx <= d.geometry().right()]
        area = _AREA_ORDER.get(window.dockWidgetArea(under[0]), 3) if under else 3
        y, x = place(under[0]) if under else (bar.geometry().y(), bar.geometry().x())
        keyed.append(((area, y, x, -1), bar))  # its tabs come before the docks they switch
    keyed.sort(key=lambda item: item[0])
    centre = window.centralWidget()
    before = [w for k, w in keyed if k[0] < 2]
    after = [w for k, w in keyed if k[0] > 2]
    return [*before, *([centre] if centre is not None else []), *after]


def order_window_focus(window: QMainWindow) -> None:
    """Order the window's Tab chain by the place of its parts (see the module)."""
    widgets: list[QWidget] = []
    for region in window_regions(window):
        widgets.extend(_walk(region))
    _relink_wrappers(window)
    chain(widgets)


class _Keeper(QObject):
    def __init__(self, window: QMainWindow) -> None:
        super().__init__(window)
        self._window = window
        self._queued = False
        window.installEventFilter(self)
        for dock in window.findChildren(QDockWidget):
            self._watch(dock)

    def _watch(self, dock: QDockWidget) -> None:
        if not dock.property("_focus_watched"):
            dock.setProperty("_focus_watched", True)
            dock.dockLocationChanged.connect(self.schedule)
            dock.topLevelChanged.connect(self.schedule)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt override
        t = event.type()
        if t == QEvent.Type.ChildPolished:  # fully built (at ChildAdded it is not a QDockWidget yet)
            child: Any = event.child()  # type: ignore[attr-defined]
            if isinstance(child, QDockWidget):
                self._watch(child)
                self.schedule()
        elif t == QEvent.Type.Show:
            self.schedule()
        return False

    @Slot()
    def schedule(self, *_: Any) -> None:
        if not self._queued:
            self._queued = True
            QTimer.singleShot(0, self, self._apply)

    @Slot()
    def _apply(self) -> None:
        self._queued = False
        order_window_focus(self._window)


def keep_window_focus_ordered(window: QMainWindow) -> None:
    """Order the Tab chain by layout now, when the window is shown and whenever a dock is added or moved."""
    _Keeper(window)
    order_window_focus(window)


__all__ = ["chain", "chain_after", "focusables", "parts_of", "keep_window_focus_ordered", "order_window_focus", "window_regions"]
