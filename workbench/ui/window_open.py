"""How the window opens a workspace and what it does when that fails (G9).

``MainWindow.open_workspace`` opens the new Session first and closes the current one only once the
new one is open: a bad ``workbench.yaml`` (or any other failure to open) leaves the current workspace
open and usable. The failure is shown in the window's error bar — the ConfigError's own message, which
names the file, line and key — with "Edit workbench.yaml" (the file opens in the system's editor) and
"Try again"; with no workspace open yet (start-up) also "Open workspace…" and "Open the demo".

A changed ``workbench.yaml`` is read again before the next run starts (``Session.config_changed``): the
workspace is reopened on the same thread, through the same trust check (W1) as any open. If the new file
is bad, the run does not start and the error says why; the old config is never used silently.

Unsaved AGENTS.md edits (the Instructions dock's editor, G2) are never dropped without a word: a reopen of
the same workspace keeps them (the editor keeps its buffer, ``InstructionsEditor.set_session``); opening
another workspace, or closing the window, asks first — Save / Discard / Cancel, Cancel the default and the
Escape button, so Enter or Escape never discards (``settle_unsaved_edits``).

Before any open, ``trust_decision`` asks (W1) when the workspace's ``workbench.yaml`` asks for settings
not trusted yet (``trust_dialog.ask_trust``); the shipped demo is trusted while it asks for what it shipped with.
"""

from __future__ import annotations

import asyncio
import logging
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QUrl
from PySide6.QtGui import QDesktopServices

from workbench.errors import ConfigError, WorkbenchError
from workbench.ui import qt_async
from workbench.ui.safe_choice import ROLE, safe_choice_box

if TYPE_CHECKING:
    from workbench.session import Session
    from workbench.ui.main_window import MainWindow

log = logging.getLogger(__name__)

OPEN_ERROR_TAG = "open"
"""The error bar's tag while it shows a failure to open (a successful open clears only that)."""

OPEN_FAILURES = (WorkbenchError, OSError)
"""What a failure to open a workspace is expected to raise. Anything else is shown the same way and
logged with its traceback (a bug, but the window stays usable)."""



class OpenCancelled(WorkbenchError):
    """The person chose Cancel to keep unsaved edits (or Save failed): the workspace was not opened."""


_FILE_AT_LINE = re.compile(r"^(?P<file>.+?\.ya?ml)(?::\d+)?:\s")


def file_to_edit(workspace: Path, error: BaseException) -> Path:
    """The file the error is about: the YAML file its message starts with (a user permissions file, say),
    else the workspace's ``workbench.yaml``."""
    from workbench.config import config_path

    m = _FILE_AT_LINE.match(str(error))
    if m:
        named = Path(m.group("file")).expanduser()
        if named.is_absolute() and named.is_file():
            return named
    return config_path(workspace)


async def trust_decision(window: MainWindow, ws: Path) -> str | bool | None:
    """W1: ask before the session opens when the workspace asks for settings not trusted yet.

    Trust: the hash of the settings the dialog showed (remembered; ``Session.open`` uses them only
    while the file still asks for exactly those). False: open without them; None: nothing to ask.
    A file changed while the dialog was open is shown again, never trusted unseen. The demo is
    trusted while it asks for what the shipped demo asks for (the agent can edit its workbench.yaml).
    """
    from workbench.app import is_demo_workspace
    from workbench.session import Session
    from workbench.trust import SettingsChanged, settings_hash
    from workbench.ui.trust_dialog import ask_trust

    while True:
        requests = Session.trust_requests(ws)
        if not requests:
            return None
        asked = settings_hash(requests)
        if is_demo_workspace(ws) and asked == _shipped_demo_hash(ws):
            return asked
        if window._trust_declined.get(str(ws)) == asked:
            return False  # declined in this window already (e.g. reopened after Settings): don't nag
        if not await ask_trust(ws, requests, window):
            window._trust_declined[str(ws)] = asked
            return False
        window._trust_declined.pop(str(ws), None)
        try:
            Session.trust_workspace(ws, asked)
        except SettingsChanged as e:
            log.info("%s", e)
            window.status.showMessage(f"{ws / 'workbench.yaml'} changed while you were deciding: "
                                      f"look at its settings again.", 8000)
            continue  # show what the file asks for now
        except OSError as e:
            log.warning("could not remember the trust for %s: %s", ws, e)
        return asked


def _shipped_demo_hash(ws: Path) -> str:
    """The trust hash of what the shipped demo's workbench.yaml asks for in ``ws`` (W1): the demo copy
    is trusted only while it asks for exactly that, never for what an edit added."""
    from workbench.app import demo_source
    from workbench.config import CONFIG_FILENAME, parse_config
    from workbench.trust import requests, settings_hash

    text = (demo_source() / CONFIG_FILENAME).read_text(encoding="utf-8")
    return settings_hash(requests(parse_config(text), ws))


def show_open_error(window: MainWindow, workspace: Path, error: BaseException, open_args: dict[str, Any]) -> None:
    """The failure in the error bar with what to do: edit the file, try again; with nothing open, also
    open another workspace or the demo. The current workspace (if any) stays as it was."""
    window.status.clearMessage()  # not "Opening …" for ever
    target = file_to_edit(workspace, error)
    detail = str(error) if isinstance(error, WorkbenchError) else f"{type(error).__name__}: {error}"
    if not detail.startswith(str(workspace)):
        detail = f"{workspace}: {detail}"  # the message names the file, line and key; else say where
    current = window.session
    if current is None:
        stays = ""
    elif current.workspace == workspace and current.config_changed():
        stays = " No run starts until the file is fixed: its old settings are not used."
    else:
        stays = f" The workspace {current.workspace.name} stays open."
    text = f"Could not open the workspace {workspace.name} — {detail.rstrip('.')}.{stays}"
    actions: list[tuple[str, str, Any]] = []
    if isinstance(error, ConfigError):  # a file to fix (not, say, a damaged thread store)
        actions.append(("edit_config", f"Edit {target.name}", lambda: edit_file(window, target)))
    actions.append(("retry_open", "Try again",
                    lambda: qt_async.start(window.try_open_workspace(workspace, **open_args), name="open-again")))
    if window.session is None:
        actions.append(("open_other_workspace", "Open workspace…",
                        lambda: qt_async.start(window.choose_workspace(), name="open-workspace")))
        actions.append(("open_demo", "Open the demo",
                        lambda: qt_async.start(open_demo(window), name="open-demo")))
    window.error_bar.show_message(text, actions=actions, tag=OPEN_ERROR_TAG)


def clear_open_error(window: MainWindow) -> None:
    """A workspace opened: the failure shown before is over (other messages stay)."""
    if window.error_bar.tag == OPEN_ERROR_TAG:
        window.error_bar.clear()


def edit_file(window: MainWindow, path: Path) -> None:
    """Open ``path`` in the system's editor for its type (QDesktopServices); if none is set up, say where
    the file is so the person can open it themselves."""
    if QDesktopServices.openUrl(QUrl.fromLocalFile(str(path.resolve()))):
        window.status.showMessage(f"Opened {path} in your editor: save it, then press Try again.", 8000)
        return
    log.warning("no application opened %s", path)
    window.status.showMessage(f"No application is set up to open {path.name} files: open {path} in "
                              f"your editor, then press Try again.", 15000)


async def open_demo(window: MainWindow) -> Session | None:
    """The demo workspace (copied to the user data folder on first use), on the demo model."""
    from workbench.app import ensure_demo_workspace

    try:
        demo = ensure_demo_workspace()
    except OSError as e:
        window.error_bar.show_message(f"Could not copy the demo workspace: {e}")
        return None
    return await window.try_open_workspace(demo, model="demo")


def unsaved_editor(window: MainWindow) -> Any | None:
    """The Instructions dock's editor when it holds unsaved edits (G2), else None."""
    panels = getattr(window, "panels", None)
    panel = panels.get("Instructions") if isinstance(panels, dict) else None
    editor = getattr(panel, "editor", None)
    return editor if editor is not None and getattr(editor, "dirty", False) else None


async def ask_unsaved_edits(window: MainWindow, path: str, doing: str) -> str:
    """Ask what becomes of unsaved edits to ``path`` before ``doing``: "save", "discard" or "cancel".

    G7/G12: Cancel (keep the edits and stay) is the default and the Escape button; Discard is never
    the default, so Enter or Escape never discards. ``window.unsaved_box`` is the box while it asks."""
    box, buttons = safe_choice_box(window, "unsaved_edits", "Unsaved instructions",
                                   f"{path} has edits that are not saved.",
                                   [("unsaved_edits_save", "Save", ROLE.AcceptRole),
                                    ("unsaved_edits_discard", "Discard", ROLE.DestructiveRole),
                                    ("unsaved_edits_cancel", "Cancel", ROLE.RejectRole)], safe="unsaved_edits_cancel")
    box.setInformativeText(f"Save them before {doing}? Discard drops them; Cancel keeps them and goes back "
                           "to the editor.")
    save, discard = buttons["unsaved_edits_save"], buttons["unsaved_edits_discard"]
    window.unsaved_box = box
    try:
        await qt_async.ask_dialog(box)
        clicked = box.clickedButton()
    except asyncio.CancelledError:
        return "cancel"
    finally:
        window.unsaved_box = None
        qt_async.release_dialog(box)
    if clicked is save:
        return "save"
    if clicked is discard:
        return "discard"
    return "cancel"


async def settle_unsaved_edits(window: MainWindow, doing: str) -> bool:
    """Before ``doing`` something that drops the editor's buffer (another workspace, closing): True to go
    on (nothing unsaved, saved, or discarded), False to stay (Cancel, or Save did not write: the editor
    says why, e.g. the file changed on disk and the conflict bar shows)."""
    editor = unsaved_editor(window)
    if editor is None:
        return True
    choice = await ask_unsaved_edits(window, editor.open_path or "AGENTS.md", doing)
    if choice == "discard":
        return True
    if choice == "save" and await editor.save():
        return True
    _show_instructions(window)  # back to the editor (and, after a failed Save, why it did not save)
    if choice == "save":
        window.status.showMessage(f"{editor.open_path} was not saved: see the Instructions panel.", 8000)
    return False


def _show_instructions(window: MainWindow) -> None:
    try:
        from workbench.ui.panels import show_dock

        show_dock(window, "Instructions")
    except Exception:  # noqa: BLE001 - only a convenience
        log.debug("could not show the Instructions dock", exc_info=True)


async def reload_then_send(window: MainWindow, text: str) -> str:
    """G9: the workspace's workbench.yaml changed since it was opened: open it again on the same thread
    (trust asked again if it now asks for more, W1), then send ``text``. A bad file: the run does not
    start, the error bar says why, and the prompt stays in the box."""
    session = window.session
    assert session is not None
    window.status.showMessage(f"{session.workspace.name}/workbench.yaml changed: reading it again …")
    try:
        await window.open_workspace(session.workspace, thread_id=session.thread_id, **window.opened_with)
    except OPEN_FAILURES:
        return ""  # shown with its actions by open_workspace
    window.input.clear()
    window.transcript.add_user_message(text)
    return await window._drive(text)


__all__ = ["OPEN_ERROR_TAG", "OPEN_FAILURES", "OpenCancelled", "ask_unsaved_edits", "clear_open_error", "edit_file",
           "file_to_edit", "open_demo", "reload_then_send", "settle_unsaved_edits", "show_open_error",
           "trust_decision", "unsaved_editor"]
