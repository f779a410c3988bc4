"""The main window's menus and keyboard (G7): the File and View menus, the shortcuts as menu actions
(so they are discoverable), and where the focus goes.

``install_menus`` makes File (Open workspace…, Open recent, Settings… when the Settings dialog imports,
Quit) and an empty View menu, where ``add_dock`` lists each dock; ``install_keyboard`` then adds:

- File: New thread (Ctrl+N), Rename thread… (F2), Settings… (Ctrl+, and the platform's Preferences key).
- Run: Send (Ctrl+Enter), Stop (Esc; enabled while the Stop button is, so Esc is free otherwise).
- View: Theme (System / Light / Dark), applied at once and remembered (``UserSettings.theme``).
- The prompt box has the focus when the window opens and when a run ends (unless the person is typing
  in another text field then); Tab leaves it (``PromptEdit``).

Kept out of ``main_window`` so that module holds the window's behaviour only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QEvent, QObject
from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import QApplication, QLineEdit, QMenu, QPlainTextEdit, QTextEdit

from workbench.ui import qt_async
from workbench.ui.focus_order import keep_window_focus_ordered
from workbench.ui.plain_text import literal_ampersands

if TYPE_CHECKING:
    from workbench.ui.main_window import MainWindow


def _sequences(*keys: Any) -> list[QKeySequence]:
    """Key sequences (strings or standard keys) without empties or repeats, in order."""
    out: list[QKeySequence] = []
    for key in keys:
        seqs = QKeySequence.keyBindings(key) if isinstance(key, QKeySequence.StandardKey) else [QKeySequence(key)]
        for s in seqs:
            if not s.isEmpty() and s not in out:
                out.append(s)
    return out


class _EnabledMirror(QObject):
    """Keeps an action enabled exactly when a widget is (Esc stops only while Stop can)."""

    def __init__(self, widget: Any, action: QAction) -> None:
        super().__init__(widget)
        self._action = action
        action.setEnabled(widget.isEnabled())
        widget.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt override
        if event.type() == QEvent.Type.EnabledChange:
            self._action.setEnabled(watched.isEnabled())  # type: ignore[attr-defined]
        return False


def install_menus(window: MainWindow) -> None:
    """The File menu (Open workspace…, Open recent, Settings…, Quit) and the View menu, before any dock."""
    window.file_menu = window.menuBar().addMenu("&File")
    window.open_action = QAction("&Open workspace…", window)
    window.open_action.setShortcut(QKeySequence.StandardKey.Open)
    window.open_action.triggered.connect(lambda: qt_async.start(window.choose_workspace(), name="open-workspace"))
    window.file_menu.addAction(window.open_action)
    window.recent_menu = QMenu("Open &recent", window)
    window.recent_menu.setObjectName("recent_menu")
    window.recent_menu.aboutToShow.connect(lambda: fill_recent_menu(window))
    window.file_menu.addMenu(window.recent_menu)
    window.file_menu.addSeparator()
    window.settings_action = None
    if _settings_dialog_available():
        window.settings_action = QAction("&Settings…", window)
        window.settings_action.setShortcut(QKeySequence.StandardKey.Preferences)
        window.settings_action.triggered.connect(lambda: qt_async.start(window.open_settings(), name="settings"))
        window.file_menu.addAction(window.settings_action)
        window.file_menu.addSeparator()
    window.quit_action = QAction("&Quit", window)
    window.quit_action.setShortcut(QKeySequence.StandardKey.Quit)
    window.quit_action.triggered.connect(window.close)
    window.file_menu.addAction(window.quit_action)
    window.view_menu = window.menuBar().addMenu("&View")
    fill_recent_menu(window)


def fill_recent_menu(window: MainWindow) -> None:
    """File → Open recent: the workspaces opened last (filled again each time the menu opens)."""
    window.recent_menu.clear()
    for p in window.settings.recent_workspaces:
        action = window.recent_menu.addAction(literal_ampersands(p))  # a folder named R&D keeps its &
        action.triggered.connect(lambda _=False, p=p: qt_async.start(window.try_open_workspace(p), name="open-recent"))
    window.recent_menu.setEnabled(bool(window.settings.recent_workspaces))


def _settings_dialog_available() -> bool:
    try:
        from workbench.ui import settings_dialog  # noqa: F401
    except Exception:  # noqa: BLE001 - not written yet, or broken: no Settings entry
        return False
    return True


def install_keyboard(window: MainWindow) -> None:
    """Add the G7 shortcuts to the window's menus and give the prompt box the focus."""
    file_menu = window.file_menu
    before = window.settings_action or window.quit_action
    window.new_thread_action = QAction("&New thread", window)
    window.new_thread_action.setShortcuts(_sequences(QKeySequence.StandardKey.New, "Ctrl+N"))
    window.new_thread_action.triggered.connect(window.on_new_thread)
    window.rename_thread_action = QAction("&Rename thread…", window)
    window.rename_thread_action.setShortcut(QKeySequence("F2"))
    window.rename_thread_action.triggered.connect(lambda: rename_current_thread(window))
    file_menu.insertAction(before, window.new_thread_action)
    file_menu.insertAction(before, window.rename_thread_action)
    file_menu.insertSeparator(before)
    if window.settings_action is not None:
        # Preferences is empty on most Linux desktops: Ctrl+, everywhere, plus the platform's key.
        window.settings_action.setShortcuts(_sequences("Ctrl+,", QKeySequence.StandardKey.Preferences))

    window.run_menu = window.menuBar().addMenu("&Run")
    window.send_action = QAction("&Send", window)
    window.send_action.setShortcuts(_sequences("Ctrl+Return", "Ctrl+Enter"))
    window.send_action.triggered.connect(window.on_send)
    window.stop_action = QAction("S&top", window)
    window.stop_action.setShortcut(QKeySequence("Esc"))
    window.stop_action.setToolTip("Stop the run in flight (Esc)")
    window.stop_action.triggered.connect(window.on_stop)
    _EnabledMirror(window.stop_button, window.stop_action)
    window.run_menu.addAction(window.send_action)
    window.run_menu.addAction(window.stop_action)
    window.stop_button.setToolTip(window.stop_button.toolTip() + " (Esc)")

    window.sig_run_settled.connect(lambda _status: focus_prompt(window, unless_typing=True))
    window.input.setFocus()  # recorded while hidden: the window opens with the prompt focused
    install_theme_menu(window)
    keep_window_focus_ordered(window)  # G14: Tab goes left docks, centre, right docks


THEME_LABELS = {"system": "&System", "light": "&Light", "dark": "&Dark"}


def install_theme_menu(window: MainWindow) -> None:
    """View → Theme: System / Light / Dark, applied at once and kept in ``UserSettings.theme``; the
    saved choice is applied now (``system`` leaves the sheet the application started with)."""
    from workbench.ui.style import apply_theme_choice

    menu = QMenu("&Theme", window)
    menu.setObjectName("theme_menu")
    group = QActionGroup(menu)
    group.setExclusive(True)
    window.theme_actions = {}
    chosen = getattr(window.settings, "theme", "system")
    for key, label in THEME_LABELS.items():
        action = QAction(label, menu)
        action.setCheckable(True)
        action.setChecked(key == chosen)
        action.setData(key)
        action.triggered.connect(lambda _checked=False, key=key: set_theme(window, key))
        group.addAction(action)
        menu.addAction(action)
        window.theme_actions[key] = action
    first = window.view_menu.actions()[0] if window.view_menu.actions() else None
    window.view_menu.insertMenu(first, menu)
    window.view_menu.insertSeparator(first)
    window.theme_menu = menu
    app = QApplication.instance()
    if chosen != "system" and isinstance(app, QApplication):
        apply_theme_choice(app, chosen)


def set_theme(window: MainWindow, choice: str) -> None:
    """Apply a theme choice to the application now and remember it in the user settings."""
    from workbench.ui.style import apply_theme_choice

    app = QApplication.instance()
    if isinstance(app, QApplication):
        apply_theme_choice(app, choice)
    window.theme_actions[choice].setChecked(True)
    window.settings.theme = choice
    window._save_settings()


def _typing_elsewhere(window: MainWindow) -> bool:
    """Whether the focus is in an editable text field other than the prompt box (don't take it away)."""
    w = QApplication.focusWidget()
    if w is None or w is window.input:
        return False
    if isinstance(w, QLineEdit):
        return not w.isReadOnly()
    if isinstance(w, (QPlainTextEdit, QTextEdit)):
        return not w.isReadOnly()
    return False


def focus_prompt(window: MainWindow, *, unless_typing: bool = False) -> None:
    """Give the prompt box the focus (when a run ends: unless the person is typing in another field)."""
    if unless_typing and _typing_elsewhere(window):
        return
    window.input.setFocus()


def rename_current_thread(window: MainWindow) -> None:
    """F2: rename the thread that is open (selected first, so the panel's rename names it)."""
    session = window.session
    if session is None or not session.thread_id:
        return
    panel = window.threads_panel
    if panel.selected_id() != session.thread_id:
        panel.select(session.thread_id)
    qt_async.start(panel.rename_selected(), name="rename-thread")


__all__ = ["fill_recent_menu", "focus_prompt", "install_keyboard", "install_menus", "install_theme_menu",
           "rename_current_thread", "set_theme"]
