"""The transcript's colours: one palette per theme and the one style sheet built from it.

The sheet is set once on the transcript's container (``TranscriptView``) and re-built when the
light/dark theme changes; every block (``transcript_blocks``) is coloured by its object name.
"""

from __future__ import annotations

from typing import Any

from workbench.ui.style import safe_is_dark


def palette() -> dict[str, str]:
    """Colours of the transcript's blocks for the applied (light or dark) theme."""
    if safe_is_dark():
        return {"user_bg": "#1c2b3f", "assistant_bg": "#22272e", "border": "#444c56", "title": "#adbac7",
                "muted": "#768390", "tag": "#c69026", "tool_bg": "#2d333b", "tool_border": "#444c56",
                "error": ("#3d1f1f", "#6e3030", "#f4a9a3"), "pending": ("#1f2a3d", "#34507a", "#a5c4f5"),
                "info": ("#2d333b", "#444c56", "#adbac7")}
    return {"user_bg": "#eef4ff", "assistant_bg": "#ffffff", "border": "#d6dbe3", "title": "#3a4a66",
            "muted": "#5b6473", "tag": "#a15c00", "tool_bg": "#f6f7f9", "tool_border": "#dde1e7",
            "error": ("#fdecea", "#e8b4ae", "#8c1d18"), "pending": ("#e8f0fe", "#b3c7ef", "#1b3d7a"),
            "info": ("#f3f4f6", "#d6d9de", "#3d4450")}


def transcript_style_sheet(c: dict[str, Any]) -> str:
    """One style sheet for every block of the transcript (set once on its container: a sheet per
    widget costs a parse and a polish for each of the hundreds of rows of a long session)."""
    err, pend, info = c["error"], c["pending"], c["info"]
    return f"""
    QFrame#message_user {{ background: {c['user_bg']}; border: 1px solid {c['border']}; border-radius: 6px; }}
    QFrame#message_assistant {{ background: {c['assistant_bg']}; border: 1px solid {c['border']};
        border-radius: 6px; }}
    QLabel#message_title {{ font-weight: 600; color: {c['title']}; }}
    QLabel#message_tag {{ color: {c['tag']}; font-style: italic; }}
    QTextBrowser#message_body {{ background: transparent; border: none; padding: 0; }}
    QFrame#tool_call {{ background: {c['tool_bg']}; border: 1px solid {c['tool_border']}; border-radius: 4px; }}
    QToolButton#tool_toggle {{ border: none; background: transparent; font-weight: 600; padding: 2px 4px;
        color: {c['title']}; }}
    QToolButton#tool_toggle:hover {{ background: {c['border']}; border-radius: 3px; }}
    QLabel#tool_summary {{ color: {c['muted']}; }}
    QToolButton#inspect_prompt {{ border: none; background: transparent; color: {c['muted']}; padding: 0 4px; }}
    QToolButton#inspect_prompt:hover, QToolButton#inspect_prompt:focus {{ color: {c['title']};
        text-decoration: underline; }}
    QLabel#transcript_empty {{ color: {c['muted']}; padding: 24px 12px; }}
    QLabel#transcript_history_hint {{ color: {c['muted']}; font-style: italic; padding: 4px; }}
    QLabel#tool_status {{ font-weight: 600; }}
    QFrame#notice_error {{ background: {err[0]}; border: 1px solid {err[1]}; border-radius: 6px; }}
    QFrame#notice_error QLabel {{ color: {err[2]}; }}
    QFrame#notice_pending {{ background: {pend[0]}; border: 1px solid {pend[1]}; border-radius: 6px; }}
    QFrame#notice_pending QLabel {{ color: {pend[2]}; }}
    QFrame#notice_info {{ background: {info[0]}; border: 1px solid {info[1]}; border-radius: 6px; }}
    QFrame#notice_info QLabel {{ color: {info[2]}; }}
    QLabel#notice_text {{ font-weight: 600; }}
    QLabel#thinking_text {{ color: {c['muted']}; font-style: italic; }}
    """


__all__ = ["palette", "transcript_style_sheet"]
