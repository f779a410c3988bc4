"""What a file tool call would change, shown as a coloured unified diff (the approval dialog's
"Changes" tab, G3).

``proposed_text`` works out a file's text after a ``write_file``/``edit_file`` call with the given
arguments, ``unified_diff`` compares it with the text now, and ``DiffHighlighter`` colours the result
for the light or dark theme. Pure text in, text out, except the highlighter.
"""

from __future__ import annotations

import difflib
from typing import Any

from PySide6.QtGui import QColor, QSyntaxHighlighter, QTextCharFormat

from workbench.ui.style import safe_is_dark

FILE_TOOLS = ("write_file", "edit_file")
"""The tools whose calls change a file the dialog can show a diff of (``proposed_text`` knows them)."""

#: Diff colours per theme: (foreground, background) of added, removed and hunk-header lines.
_DIFF_COLORS = {
    False: {"+": ("#14532d", "#e6ffec"), "-": ("#7f1d1d", "#ffebe9"), "@": ("#1e40af", "#eef2ff")},
    True: {"+": ("#8ddb8c", "#1b3a24"), "-": ("#f4a9a3", "#4a1f1f"), "@": ("#96c3ff", "#1f2a3d")},
}


class DiffHighlighter(QSyntaxHighlighter):
    """Colours a unified diff: additions green, removals red, hunk headers blue (light or dark theme)."""

    def __init__(self, document: Any, *, dark: bool | None = None) -> None:
        super().__init__(document)
        self._formats: dict[str, QTextCharFormat] = {}
        self.dark: bool | None = None
        self.set_dark(safe_is_dark() if dark is None else dark)

    def set_dark(self, dark: bool) -> None:
        if dark == self.dark:
            return
        self.dark = dark
        self._formats = {}
        for key, (fg, bg) in _DIFF_COLORS[dark].items():
            f = QTextCharFormat()
            f.setForeground(QColor(fg))
            f.setBackground(QColor(bg))
            self._formats[key] = f
        self.rehighlight()

    def highlightBlock(self, text: str) -> None:  # noqa: N802 - Qt override
        if text.startswith(("+++", "---")):
            return
        fmt = self._formats.get(text[:1])
        if fmt is not None:
            self.setFormat(0, len(text), fmt)


def unified_diff(path: str, old: str, new: str) -> str:
    """A unified diff of a file's text before and after (empty when they are equal)."""
    lines = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True),
        fromfile=f"{path} (now)" if old else "(new file)", tofile=f"{path} (after)", n=3,
    )
    out = []
    for line in lines:
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def proposed_text(tool: str, arguments: dict[str, Any], old: str) -> str | None:
    """The file's text after ``write_file``/``edit_file`` with these arguments (None: can't tell)."""
    if tool == "write_file":
        content = arguments.get("content")
        return content if isinstance(content, str) else None
    if tool == "edit_file":
        a, b = arguments.get("old_string"), arguments.get("new_string")
        if not isinstance(a, str) or not isinstance(b, str) or not a:
            return None
        if a not in old:
            return None
        return old.replace(a, b) if arguments.get("replace_all") else old.replace(a, b, 1)
    return None


__all__ = ["FILE_TOOLS", "DiffHighlighter", "proposed_text", "unified_diff"]
