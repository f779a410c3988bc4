"""The style sheet: a light and a dark variant from ``resources/style/``, following the system.

``apply_style(app)`` picks the variant from the system colour scheme (``QStyleHints.colorScheme()``,
else the palette's lightness) and re-applies it when the scheme changes; ``apply_theme_choice`` applies
the person's choice from View → Theme (system, light or dark; ``UserSettings.theme``). The sheets are loaded with
``importlib.resources`` from the ``workbench.resources`` package, never relative to the current folder.

Widgets opt into styling through dynamic properties the sheets select on:

- ``status`` = ``ok | error | denied | running | aborted | waiting`` colours the text
  (``set_status_property`` normalises engine words such as ``done`` or ``failed`` and repolishes);
- ``role`` = ``code`` for a monospace text area, ``muted`` for secondary text.

Widgets that paint themselves use ``status_color(status, dark)``; the colours are those in the sheets.
"""

from __future__ import annotations

import logging
from importlib import resources
from pathlib import Path
from typing import Literal

from PySide6.QtCore import QDir, Qt
from PySide6.QtGui import QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication, QWidget

log = logging.getLogger(__name__)

Theme = Literal["light", "dark"]

#: The status colours of each theme; the same values are written in ``light.qss`` / ``dark.qss``.
STATUS_COLORS: dict[str, dict[str, str]] = {
    "light": {
        "ok": "#1a7f37",
        "error": "#cf222e",
        "denied": "#9a6700",
        "running": "#0969da",
        "aborted": "#6e7781",
        "waiting": "#8250df",
    },
    "dark": {
        "ok": "#57ab5a",
        "error": "#e5534b",
        "denied": "#c69026",
        "running": "#539bf5",
        "aborted": "#768390",
        "waiting": "#b083f0",
    },
}

#: Engine and tool words -> the status class the sheets colour.
_ALIASES: dict[str, str] = {
    "ok": "ok",
    "done": "ok",
    "success": "ok",
    "connected": "ok",
    "error": "error",
    "failed": "error",
    "fatal": "error",
    "denied": "denied",
    "rejected": "denied",
    "refused": "denied",
    "running": "running",
    "started": "running",
    "streaming": "running",
    "aborted": "aborted",
    "stopped": "aborted",
    "cancelled": "aborted",
    "waiting": "waiting",
    "held": "waiting",
    "interrupted": "waiting",
    "pending": "waiting",
    "asking": "waiting",
}

_PROPERTY_APPLIED = "_workbench_theme"
_PROPERTY_FOLLOWING = "_workbench_follows_system"


def status_class(status: str | None) -> str:
    """The style class (``ok``, ``error`` …) for an engine status word; ``""`` for unknown / idle ones."""
    return _ALIASES.get((status or "").strip().lower(), "")


def status_color(status: str | None, dark: bool) -> str:
    """The ``#rrggbb`` colour for ``status`` in the dark or light theme (the muted grey when unknown)."""
    colors = STATUS_COLORS["dark" if dark else "light"]
    return colors.get(status_class(status), colors["aborted"])


def set_status_property(widget: QWidget, status: str | None) -> None:
    """Set ``widget``'s ``status`` property (normalised) and re-polish so the sheet's colour shows."""
    cls = status_class(status)
    if widget.property("status") == cls:
        return
    widget.setProperty("status", cls)
    style = widget.style()
    style.unpolish(widget)
    style.polish(widget)
    widget.update()


def load_style_sheet(theme: Theme) -> str:
    """The text of ``resources/style/<theme>.qss``."""
    if theme not in STATUS_COLORS:
        raise ValueError(f"unknown theme {theme!r}: expected 'light' or 'dark'")
    return resources.files("workbench.resources").joinpath("style", f"{theme}.qss").read_text(encoding="utf-8")


def system_theme(app: QGuiApplication) -> Theme:
    """``dark`` or ``light`` as the system prefers: the colour scheme hint, else the palette's lightness."""
    hints = app.styleHints()
    scheme_of = getattr(hints, "colorScheme", None)  # Qt 6.5+
    if scheme_of is not None:
        scheme = scheme_of()
        if scheme == Qt.ColorScheme.Dark:
            return "dark"
        if scheme == Qt.ColorScheme.Light:
            return "light"
    window = app.palette().color(QPalette.ColorRole.Window)
    text = app.palette().color(QPalette.ColorRole.WindowText)
    return "dark" if window.lightness() < text.lightness() else "light"


def current_theme(app: QGuiApplication) -> Theme | None:
    """The theme ``apply_style`` last applied to ``app`` (None before)."""
    value = app.property(_PROPERTY_APPLIED)
    return value if value in STATUS_COLORS else None


def is_dark(app: QGuiApplication | None = None) -> bool:
    """Whether the applied theme (else the system's) is dark; for widgets that paint with ``status_color``."""
    app = app or QGuiApplication.instance()  # type: ignore[assignment]
    if app is None:
        return False
    return (current_theme(app) or system_theme(app)) == "dark"


def safe_is_dark() -> bool:
    """``is_dark()`` that never raises (False then): for widgets that pick their own colours, where a
    styling problem must never break the widget itself (the transcript, a diff, an artifact)."""
    try:
        return bool(is_dark())
    except Exception:  # noqa: BLE001 - styling must never break the widget
        return False


IMAGE_PREFIX = "workbench-style"
"""The ``QDir`` search-path prefix the sheets name their images by (``url(workbench-style:arrow-down-light.svg)``)."""


def register_style_images() -> None:
    """Let the sheets find the images shipped beside them (the arrows of combo and spin boxes)."""
    try:
        folder = resources.files("workbench.resources").joinpath("style")
        path = Path(str(folder))
    except (OSError, ValueError, TypeError):
        return
    if path.is_dir() and str(path) not in QDir.searchPaths(IMAGE_PREFIX):
        QDir.addSearchPath(IMAGE_PREFIX, str(path))


def apply_style(app: QApplication, theme: Theme | None = None) -> Theme:
    """Apply the light or dark sheet to ``app``; returns the theme applied.

    With ``theme=None`` the system decides and the sheet follows later changes of its colour scheme;
    an explicit theme stays until ``apply_style`` is called again.
    """
    follow = theme is None
    chosen: Theme = theme if theme is not None else system_theme(app)
    try:
        sheet = load_style_sheet(chosen)
    except (OSError, ValueError) as exc:
        # A missing sheet leaves the platform look: worth a warning, never a crash at start-up.
        log.warning("style sheet %r could not be loaded: %s", chosen, exc)
        return chosen
    register_style_images()
    # The theme is recorded first: widgets that follow it (``is_dark()``) ask on the StyleChange
    # event that setStyleSheet sends.
    app.setProperty(_PROPERTY_APPLIED, chosen)
    app.setProperty(_PROPERTY_FOLLOWING, follow)
    app.setStyleSheet(sheet)
    hints = app.styleHints()
    if follow and hasattr(hints, "colorSchemeChanged") and not app.property("_workbench_style_connected"):
        hints.colorSchemeChanged.connect(lambda _scheme, a=app: _on_scheme_changed(a))
        app.setProperty("_workbench_style_connected", True)
    return chosen


def apply_theme_choice(app: QApplication, choice: str) -> Theme:
    """Apply a ``UserSettings.theme`` choice: ``system`` follows the desktop, ``light``/``dark`` stay."""
    if choice in STATUS_COLORS:
        return apply_style(app, choice)  # type: ignore[arg-type]
    return apply_style(app, None)


def apply_app_style(app: QApplication) -> None:
    """The style sheet at start-up (``apply_style``, following the system): a broken sheet is logged and
    the window opens in the platform look rather than not at all."""
    try:
        apply_style(app)
    except Exception:  # noqa: BLE001 - a broken sheet must not stop the window
        log.exception("applying the style sheet failed")


def _on_scheme_changed(app: QApplication) -> None:
    if app.property(_PROPERTY_FOLLOWING):
        apply_style(app)
