"""``workbench`` with no arguments: the window (DESIGN §1, §5; issue 3 item 1).

QApplication on a qasync loop (``asyncio.Runner(loop_factory=...)``, Python 3.11). The window is shown
before anything imports litellm; the model's worker thread imports and warms litellm afterwards
(not for the offline demo model). First run: the demo workspace shipped in ``workbench.resources``
is copied to the user data folder and opened on the demo model when no API key is found; later runs
open the last workspace. If Qt cannot load its ``xcb`` plugin, the G6 hint names the packages.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import shutil
import sys
import time
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

log = logging.getLogger("workbench.app")

_STARTED = time.perf_counter()

XCB_PACKAGES = ("libxcb-cursor0", "libxcb-icccm4", "libxcb-keysyms1")
XCB_HINT = (
    "workbench: Qt could not load its 'xcb' platform plugin, so the window cannot open.\n"
    "On Debian or Ubuntu install the libraries it needs:\n"
    f"    sudo apt install {' '.join(XCB_PACKAGES)}\n"
    "Also check that $DISPLAY points at a running X server. The headless commands (`workbench run …`)\n"
    "need none of this."
)
DEMO_FOLDER = "demo-workspace"
# The reverse-DNS id (K1): the .desktop file, the AppStream metainfo, the icon and the Flatpak app id in
# packaging/ are all named with it. Wayland shows a window's icon by matching this against the .desktop file.
APP_ID = "io.github.agentworkbench.Workbench"


# ------------------------------------------------------------------------------------------------
# The G6 hint


def is_xcb_failure(message: str) -> bool:
    """True for Qt's messages about the xcb platform plugin failing to load."""
    m = message.lower()
    return "xcb" in m and ("platform plugin" in m or "libxcb" in m or "could not connect to display" in m)


def install_qt_message_handler() -> None:
    """Route Qt's messages to logging; on a fatal xcb plugin failure print the G6 hint and exit 1
    (instead of Qt's abort message alone)."""
    from PySide6.QtCore import QtMsgType, qInstallMessageHandler

    seen_xcb: list[str] = []

    def handler(mode: Any, _context: Any, message: str) -> None:
        if is_xcb_failure(message):
            seen_xcb.append(message)
        if mode == QtMsgType.QtFatalMsg:
            sys.stderr.write(message.rstrip() + "\n")
            if seen_xcb or is_xcb_failure(message) or "no qt platform plugin" in message.lower():
                sys.stderr.write("\n" + XCB_HINT + "\n")
            sys.stderr.flush()
            os._exit(1)  # Qt aborts right after a fatal message; exit cleanly with the hint instead
        level = {QtMsgType.QtDebugMsg: logging.DEBUG, QtMsgType.QtInfoMsg: logging.INFO,
                 QtMsgType.QtWarningMsg: logging.WARNING, QtMsgType.QtCriticalMsg: logging.ERROR}.get(mode, logging.INFO)
        logging.getLogger("qt").log(level, "%s", message)

    qInstallMessageHandler(handler)


# ------------------------------------------------------------------------------------------------
# Before Qt


def import_pydantic_before_qt() -> None:
    """Import pydantic's validators before PySide6 loads (~50 ms; litellm needs pydantic anyway).

    Once PySide6 is imported, shiboken's import hook inspects each newly imported module, and that
    inspection reads ``__wrapped__`` through pydantic's module ``__getattr__``, which imports
    ``pydantic._internal._validators``; when that module is itself mid-import, litellm's import fails
    ("cannot import name 'import_string' from partially initialized module"). Seen in about one run in
    two in the PyInstaller bundle (K2); imported first, it never is.
    """
    try:
        import pydantic._internal._validators  # noqa: F401
    except ImportError:  # another pydantic layout, or none: nothing to protect
        pass


# ------------------------------------------------------------------------------------------------
# The app icon


def app_icon() -> Any:
    """The app's icon (K1): the SVG shipped in ``workbench.resources/icons``, the one the .desktop entry
    names. A null icon (the file missing, or Qt's SVG icon engine absent) is logged, not fatal."""
    from PySide6.QtGui import QIcon

    path = resources.files("workbench.resources") / "icons" / f"{APP_ID}.svg"
    icon = QIcon(str(path))  # the package's files are on disk (wheel, bundle): the engine reads it lazily
    if icon.isNull():
        log.warning("the app icon %s could not be loaded; windows show the platform's default icon", path)
    return icon


# ------------------------------------------------------------------------------------------------
# Which workspace to open


def demo_source() -> Any:
    """The demo workspace shipped in the package (a Traversable)."""
    return resources.files("workbench.resources") / "demo"


def ensure_demo_workspace(target: Path | None = None) -> Path:
    """Copy the shipped demo workspace to the user data folder once; returns its path."""
    from workbench.config import user_data_dir

    dest = target or user_data_dir() / DEMO_FOLDER
    if (dest / "workbench.yaml").is_file():
        return dest
    dest.mkdir(parents=True, exist_ok=True)
    with resources.as_file(demo_source()) as src:
        shutil.copytree(src, dest, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".gitkeep", ".workbench"))
    return dest


def is_demo_workspace(path: Path | str) -> bool:
    """Whether ``path`` is the demo workspace this app copied to the user data folder (the window trusts
    it while it asks for what the shipped demo asks for, W1)."""
    from workbench.config import user_data_dir

    try:
        return Path(path).expanduser().resolve() == (user_data_dir() / DEMO_FOLDER).resolve()
    except (OSError, RuntimeError):
        return False


def any_api_key(model: str | None) -> bool:
    """Whether a key is found for ``model`` (or, with no model chosen, for any known provider)."""
    from workbench.secrets import ENV_VARS, lookup_api_key

    if model and model != "demo":
        return bool(lookup_api_key(model))
    return any(os.environ.get(var) for var in ENV_VARS.values())


def start_workspace(settings: Any, requested: str | None = None) -> tuple[Path, str | None]:
    """The workspace to open and a model override: the one asked for, else the last one, else (first
    run) the demo workspace — on the demo model unless a key for the user's model is found."""
    if requested:
        return Path(requested).expanduser().resolve(), None
    last = settings.last_workspace
    if last and Path(last).is_dir():
        return Path(last), None
    demo = ensure_demo_workspace()
    if settings.model and settings.model != "demo" and any_api_key(settings.model):
        return demo, settings.model
    return demo, "demo"


# ------------------------------------------------------------------------------------------------
# Panels other modules provide


def plug_panels(window: Any) -> None:
    """Add the dock panels (G2) through ``workbench.ui.panels``: the Events dock, then the others.

    Nothing fails silently: a panel whose module does not load gets a dock showing the error
    (``panels.load_panel``); if ``workbench.ui.panels`` itself does not load, one "Panels" dock says so.
    Both are logged with the traceback.
    """
    try:
        from workbench.ui import panels
    except Exception as error:  # noqa: BLE001 - shown in the window, not dropped
        from PySide6.QtWidgets import QLabel

        log.error("The dock panels could not be loaded (workbench.ui.panels): %s: %s", type(error).__name__, error,
                  exc_info=True)
        message = (f"The dock panels could not be loaded: importing workbench.ui.panels failed with "
                   f"{type(error).__name__}: {error}. See the log for the traceback.")
        label = QLabel(message)
        label.setObjectName("panelLoadErrorText")
        label.setWordWrap(True)
        window.panel_errors = {"Panels": message}
        window.add_dock("Panels", label)
        return
    panels.install_events_panel(window)
    panels.install_panels(window)
    # The saved layout again, now that every dock exists: which docks are shown (Events) and which tab
    # of a group is in front (issue 10); restoreDockWidget when each was added only placed it.
    window.restore_layout()


# ------------------------------------------------------------------------------------------------
# main


def window_parser() -> argparse.ArgumentParser:
    """``workbench`` with no command (docs/cli.md is generated from it too)."""
    p = argparse.ArgumentParser(prog="workbench", description="Open the Agent Workbench window.")
    p.add_argument("--workspace", metavar="DIR",
                   help="open this workspace folder (default: the last one, or the demo)")
    p.add_argument("--model", metavar="M", help="use this model instead of the workspace's")
    p.add_argument("--exit-after-start", action="store_true", help=argparse.SUPPRESS)
    return p


def _parse(argv: Sequence[str]) -> argparse.Namespace:
    return window_parser().parse_args(list(argv))


def main(argv: Sequence[str] | None = None) -> int:
    """Open the window; returns the exit code when it is closed."""
    args = _parse(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    os.environ.setdefault("QT_API", "pyside6")
    import_pydantic_before_qt()
    install_qt_message_handler()
    from workbench.ui import qt_async

    app = qt_async.application([sys.argv[0] if sys.argv else "workbench"])
    app.setApplicationName("Agent Workbench")
    app.setOrganizationName("workbench")
    app.setDesktopFileName(APP_ID)
    app.setWindowIcon(app_icon())
    app.setQuitOnLastWindowClosed(False)  # the loop ends when the window's session is closed
    from workbench.ui.style import apply_app_style

    apply_app_style(app)
    return qt_async.run(_amain(app, args))


async def _amain(app: Any, args: argparse.Namespace) -> int:
    from workbench.config import load_user_settings
    from workbench.errors import WorkbenchError
    from workbench.ui.main_window import MainWindow

    settings = load_user_settings()
    window = MainWindow(settings)
    plug_panels(window)
    window.show()
    await asyncio.sleep(0)  # let the window paint before anything else
    if os.environ.get("WORKBENCH_EXIT_AFTER_SHOWN") == "1":  # benchmarks/startup.py: spawn to shown
        print(f"WINDOW_SHOWN {time.time()}", flush=True)
        window.close()
        await window.wait_closed()
        return 0
    shown = time.perf_counter() - _STARTED
    litellm_at_show = "litellm" in sys.modules
    closed = asyncio.Event()
    window.destroyed.connect(lambda *_: closed.set())
    app.lastWindowClosed.connect(closed.set)

    try:
        workspace, model = start_workspace(settings, args.workspace)
    except (WorkbenchError, OSError) as e:
        window.error_bar.show_message(f"Could not open the workspace: {e}. Use File → Open workspace….")
    else:  # G9: a failure is shown with Edit workbench.yaml / Try again / Open workspace… / Open the demo
        # G8: the first run's override is the user's own model, so it goes with the user's own endpoint.
        api_base = settings.api_base if (not args.model and model and model == settings.model) else None
        await window.try_open_workspace(workspace, model=args.model or model, api_base=api_base or None)
    if args.exit_after_start:
        print(json.dumps({"shown_s": round(shown, 3), "litellm_imported_at_show": litellm_at_show,
                          "icon": not window.windowIcon().isNull(), "desktop_file": app.desktopFileName(),
                          "model": window.session.model_name if window.session else None,
                          "api_base": window.session.config.api_base if window.session else None,
                          "workspace": str(window.session.workspace) if window.session else None}), flush=True)
        window.close()
    await closed.wait()
    await window.wait_closed()
    from workbench.ui.warm_up import wait_warm_up

    wait_warm_up(5.0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
