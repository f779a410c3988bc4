"""Markdown syntax highlighting for the AGENTS.md editor and the SKILL.md viewer.

``MarkdownHighlighter`` colours headings, emphasis (``*x*``, ``_x_``, ``**x**``, ``__x__``), inline
code and fenced code blocks, list markers, links, block quotes, horizontal rules and a leading YAML
frontmatter block (SKILL.md). It is line-based with two carried states (inside a fence, inside the
frontmatter), which is what a QSyntaxHighlighter can do cheaply on every keystroke.

``DiffHighlighter`` colours a unified diff (``+``, ``-``, ``@@`` and file header lines).
Colours follow the applied light or dark theme (``workbench.ui.style.is_dark``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from PySide6.QtGui import QColor, QFont, QSyntaxHighlighter, QTextCharFormat, QTextDocument

from workbench.ui.style import is_dark

__all__ = ["DiffHighlighter", "MarkdownHighlighter", "Palette", "palette"]

# Block states
_NORMAL, _FENCE, _FRONTMATTER = -1, 1, 2

_HEADING = re.compile(r"^(#{1,6})(\s+.*|\s*)$")
_SETEXT = re.compile(r"^(=+|-+)\s*$")
_FENCE_RE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
_RULE = re.compile(r"^\s{0,3}([-*_])(\s*\1){2,}\s*$")
_QUOTE = re.compile(r"^\s{0,3}>.*$")
_LIST = re.compile(r"^\s*([-*+]|\d{1,9}[.)])(\s+\[[ xX]\])?(?=\s)")
_CODE = re.compile(r"(`+)(.+?)\1")
_STRONG = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1")
_EMPH = re.compile(r"(?<![*\w])([*_])(?=[^\s*_])(.+?)(?<=[^\s*_])\1(?![*\w])")
_LINK = re.compile(r"!?\[([^\]\n]+)\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_AUTOLINK = re.compile(r"<(https?://[^>\s]+)>|(?<![(\w])(https?://[^\s)>\]]+)")
_YAML_KEY = re.compile(r"^(\s*-?\s*)([\w-]+)(:)(?=\s|$)")


@dataclass(frozen=True)
class Palette:
    heading: str
    emphasis: str
    code: str
    code_background: str
    marker: str
    link: str
    url: str
    quote: str
    frontmatter: str
    added: str
    added_background: str
    removed: str
    removed_background: str
    hunk: str


_LIGHT = Palette(
    heading="#0550ae", emphasis="#1f2328", code="#953800", code_background="#eff1f3", marker="#8250df",
    link="#0969da", url="#6e7781", quote="#59636e", frontmatter="#6e7781",
    added="#1a7f37", added_background="#dafbe1", removed="#cf222e", removed_background="#ffebe9", hunk="#8250df",
)
_DARK = Palette(
    heading="#6cb6ff", emphasis="#adbac7", code="#f69d50", code_background="#2d333b", marker="#b083f0",
    link="#539bf5", url="#768390", quote="#909dab", frontmatter="#768390",
    added="#57ab5a", added_background="#1b4721", removed="#e5534b", removed_background="#5d1f1f", hunk="#b083f0",
)


def palette(dark: bool | None = None) -> Palette:
    """The highlighting colours of the dark or light theme (the applied one when ``dark`` is None)."""
    return _DARK if (is_dark() if dark is None else dark) else _LIGHT


def _fmt(color: str | None = None, *, bold: bool = False, italic: bool = False, underline: bool = False,
         background: str | None = None, fixed: bool = False) -> QTextCharFormat:
    f = QTextCharFormat()
    if color:
        f.setForeground(QColor(color))
    if background:
        f.setBackground(QColor(background))
    if bold:
        f.setFontWeight(QFont.Weight.Bold)
    if italic:
        f.setFontItalic(True)
    if underline:
        f.setFontUnderline(True)
    if fixed:
        f.setFontFixedPitch(True)
    return f


class MarkdownHighlighter(QSyntaxHighlighter):
    """Highlights markdown in a QTextDocument (a QPlainTextEdit's ``document()``)."""

    def __init__(self, document: QTextDocument, *, dark: bool | None = None) -> None:
        super().__init__(document)
        self.set_theme(dark)

    def set_theme(self, dark: bool | None = None) -> None:
        """Re-colour for the dark or light theme (None: the applied one) and re-highlight."""
        p = palette(dark)
        self.palette = p
        self.f_heading = _fmt(p.heading, bold=True)
        self.f_heading_marker = _fmt(p.marker, bold=True)
        self.f_strong = _fmt(None, bold=True)
        self.f_emphasis = _fmt(None, italic=True)
        self.f_code = _fmt(p.code, background=p.code_background, fixed=True)
        self.f_fence = _fmt(p.code, fixed=True)
        self.f_fence_marker = _fmt(p.marker, fixed=True)
        self.f_marker = _fmt(p.marker, bold=True)
        self.f_link = _fmt(p.link, underline=True)
        self.f_url = _fmt(p.url)
        self.f_quote = _fmt(p.quote, italic=True)
        self.f_rule = _fmt(p.marker)
        self.f_frontmatter = _fmt(p.frontmatter)
        self.f_yaml_key = _fmt(p.heading)
        self.rehighlight()

    # -- QSyntaxHighlighter ----------------------------------------------------------------------------
    def highlightBlock(self, text: str) -> None:  # noqa: N802 - Qt's name
        previous = self.previousBlockState()
        block_number = self.currentBlock().blockNumber()

        # YAML frontmatter: a first line '---' up to the next '---' / '...' line.
        if (block_number == 0 and text.rstrip() == "---") or previous == _FRONTMATTER:
            if block_number == 0:
                self.setFormat(0, len(text), self.f_rule)
                self.setCurrentBlockState(_FRONTMATTER)
                return
            if text.rstrip() in ("---", "..."):
                self.setFormat(0, len(text), self.f_rule)
                self.setCurrentBlockState(_NORMAL)
                return
            self.setFormat(0, len(text), self.f_frontmatter)
            m = _YAML_KEY.match(text)
            if m:
                self.setFormat(m.start(2), len(m.group(2)), self.f_yaml_key)
            self.setCurrentBlockState(_FRONTMATTER)
            return

        # Fenced code blocks.
        fence = _FENCE_RE.match(text)
        if previous == _FENCE:
            self.setFormat(0, len(text), self.f_fence)
            if fence:
                self.setFormat(0, len(text), self.f_fence_marker)
                self.setCurrentBlockState(_NORMAL)
            else:
                self.setCurrentBlockState(_FENCE)
            return
        if fence:
            self.setFormat(0, len(text), self.f_fence_marker)
            self.setCurrentBlockState(_FENCE)
            return
        self.setCurrentBlockState(_NORMAL)

        if _RULE.match(text):
            self.setFormat(0, len(text), self.f_rule)
            return
        heading = _HEADING.match(text)
        if heading:
            self.setFormat(0, len(text), self.f_heading)
            self.setFormat(0, len(heading.group(1)), self.f_heading_marker)
            self._inline(text, base=self.f_heading)
            return
        if _SETEXT.match(text) and block_number > 0:
            self.setFormat(0, len(text), self.f_heading_marker)
            return
        if _QUOTE.match(text):
            self.setFormat(0, len(text), self.f_quote)
        lst = _LIST.match(text)
        if lst:
            self.setFormat(lst.start(1), lst.end() - lst.start(1), self.f_marker)
        self._inline(text)

    def _inline(self, text: str, base: QTextCharFormat | None = None) -> None:
        """Emphasis, strong, links and inline code (code last: it wins inside backticks)."""
        for m in _STRONG.finditer(text):
            f = QTextCharFormat(base) if base is not None else QTextCharFormat()
            f.merge(self.f_strong)
            self.setFormat(m.start(), m.end() - m.start(), f)
        for m in _EMPH.finditer(text):
            f = QTextCharFormat(self.format(m.start()))
            f.merge(self.f_emphasis)
            self.setFormat(m.start(), m.end() - m.start(), f)
        for m in _LINK.finditer(text):
            self.setFormat(m.start(), m.end() - m.start(), self.f_url)
            self.setFormat(m.start(1), len(m.group(1)), self.f_link)
        for m in _AUTOLINK.finditer(text):
            self.setFormat(m.start(), m.end() - m.start(), self.f_link)
        for m in _CODE.finditer(text):
            self.setFormat(m.start(), m.end() - m.start(), self.f_code)


class DiffHighlighter(QSyntaxHighlighter):
    """Highlights a unified diff: added and removed lines, hunk headers, file headers."""

    def __init__(self, document: QTextDocument, *, dark: bool | None = None) -> None:
        super().__init__(document)
        self.set_theme(dark)

    def set_theme(self, dark: bool | None = None) -> None:
        p = palette(dark)
        self.f_added = _fmt(p.added, background=p.added_background)
        self.f_removed = _fmt(p.removed, background=p.removed_background)
        self.f_hunk = _fmt(p.hunk)
        self.f_header = _fmt(None, bold=True)
        self.rehighlight()

    def highlightBlock(self, text: str) -> None:  # noqa: N802 - Qt's name
        if text.startswith(("+++", "---")):
            self.setFormat(0, len(text), self.f_header)
        elif text.startswith("+"):
            self.setFormat(0, len(text), self.f_added)
        elif text.startswith("-"):
            self.setFormat(0, len(text), self.f_removed)
        elif text.startswith("@@"):
            self.setFormat(0, len(text), self.f_hunk)
