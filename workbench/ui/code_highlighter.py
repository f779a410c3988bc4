"""A small ``QSyntaxHighlighter`` for code artifacts: keywords, strings, comments and numbers.

Three flavours cover what agents usually write: Python (``#`` comments, triple-quoted strings),
JavaScript/TypeScript (``//`` and ``/* */`` comments, template strings) and JSON (keys, literals).
``language_for(name, mime)`` picks one from the artifact's extension or mime type (None: not code).
Not a parser: good enough to make a snippet readable, never slow on a large file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath

from PySide6.QtCore import QRegularExpression
from PySide6.QtGui import QColor, QFont, QSyntaxHighlighter, QTextCharFormat, QTextDocument, QTextFormat

__all__ = ["CodeHighlighter", "FencedCodeHighlighter", "LANGUAGES", "fence_language", "language_for"]

_EXTENSIONS = {
    ".py": "python", ".pyi": "python", ".pyw": "python",
    ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript", ".jsx": "javascript",
    ".ts": "javascript", ".tsx": "javascript",
    ".json": "json", ".jsonl": "json", ".geojson": "json",
}
_MIMES = {
    "text/x-python": "python", "text/x-script.python": "python", "application/x-python": "python",
    "text/javascript": "javascript", "application/javascript": "javascript",
    "application/x-javascript": "javascript", "text/typescript": "javascript",
    "application/typescript": "javascript", "application/json": "json", "text/json": "json",
}


def language_for(name: str, mime: str | None = None) -> str | None:
    """``python``, ``javascript`` or ``json`` by extension first, then mime; None when not code."""
    ext = PurePosixPath(name).suffix.lower()
    if ext in _EXTENSIONS:
        return _EXTENSIONS[ext]
    m = (mime or "").split(";", 1)[0].strip().lower()
    if m in _MIMES:
        return _MIMES[m]
    if m.endswith("+json"):
        return "json"
    return None


@dataclass(frozen=True)
class _Language:
    keywords: tuple[str, ...]
    line_comment: str | None  # the marker that starts a comment to the end of the line
    block_comment: tuple[str, str] | None  # start, end (literal)
    triple_strings: bool = False


LANGUAGES: dict[str, _Language] = {
    "python": _Language(
        keywords=("False", "None", "True", "and", "as", "assert", "async", "await", "break", "class",
                  "continue", "def", "del", "elif", "else", "except", "finally", "for", "from", "global",
                  "if", "import", "in", "is", "lambda", "match", "case", "nonlocal", "not", "or", "pass",
                  "raise", "return", "try", "while", "with", "yield", "self"),
        line_comment="#",
        block_comment=None,
        triple_strings=True,
    ),
    "javascript": _Language(
        keywords=("async", "await", "break", "case", "catch", "class", "const", "continue", "default",
                  "delete", "do", "else", "export", "extends", "false", "finally", "for", "from",
                  "function", "if", "import", "in", "instanceof", "interface", "let", "new", "null",
                  "of", "return", "static", "super", "switch", "this", "throw", "true", "try", "type",
                  "typeof", "undefined", "var", "void", "while", "yield"),
        line_comment="//",
        block_comment=("/*", "*/"),
    ),
    "json": _Language(keywords=("true", "false", "null"), line_comment=None, block_comment=None),
}

# Block states: -1/0 normal; 1 inside a ''' string; 2 inside a """ string; 3 inside a /* comment.
_IN_TRIPLE_SINGLE, _IN_TRIPLE_DOUBLE, _IN_BLOCK_COMMENT = 1, 2, 3


def _fmt(color: str, *, bold: bool = False, italic: bool = False) -> QTextCharFormat:
    f = QTextCharFormat()
    f.setForeground(QColor(color))
    if bold:
        f.setFontWeight(QFont.Weight.Bold)
    if italic:
        f.setFontItalic(True)
    return f


class CodeHighlighter(QSyntaxHighlighter):
    """Highlights ``language`` (a key of ``LANGUAGES``) in ``document``; ``set_language`` switches it."""

    def __init__(
        self, document: QTextDocument | None = None, language: str | None = None, *, dark: bool = False
    ) -> None:
        super().__init__(document)
        self.language: str | None = None
        self._rules: list[tuple[QRegularExpression, QTextCharFormat]] = []
        self._dark = dark
        self._formats()
        self.set_language(language)

    def _formats(self) -> None:
        d = self._dark
        self.f_keyword = _fmt("#f47067" if d else "#cf222e", bold=True)
        self.f_string = _fmt("#96d0ff" if d else "#0a3069")
        self.f_comment = _fmt("#768390" if d else "#6e7781", italic=True)
        self.f_number = _fmt("#6cb6ff" if d else "#0550ae")
        self.f_key = _fmt("#dcbdfb" if d else "#8250df")

    def set_dark(self, dark: bool) -> None:
        """Switch to the dark (or light) theme's colours."""
        if dark != self._dark:
            self._dark = dark
            self._formats()
            self.set_language(self.language)

    def set_language(self, language: str | None) -> None:
        """Highlight as ``language`` (None or unknown: plain text) and re-highlight the document."""
        self._use_language(language)
        self.rehighlight()

    def _use_language(self, language: str | None) -> None:
        """Build the rules of ``language`` (no re-highlight: ``highlightBlock`` may switch per block)."""
        self.language = language if language in LANGUAGES else None
        self._rules = []
        if self.language is not None:
            lang = LANGUAGES[self.language]
            words = "|".join(re.escape(k) for k in lang.keywords)
            self._rules.append((QRegularExpression(rf"\b(?:{words})\b"), self.f_keyword))
            self._rules.append((QRegularExpression(r"\b(?:0[xX][0-9a-fA-F_]+|\d[\d_]*(?:\.\d+)?(?:[eE][+-]?\d+)?)\b"),
                                self.f_number))
            strings = r'"(?:[^"\\\n]|\\.)*"' + ("" if self.language == "json" else r"|'(?:[^'\\\n]|\\.)*'")
            if self.language == "javascript":
                strings += r"|`(?:[^`\\]|\\.)*`"
            self._rules.append((QRegularExpression(strings), self.f_string))
            if self.language == "json":  # keys: a string followed by a colon
                self._rules.append((QRegularExpression(r'"(?:[^"\\\n]|\\.)*"(?=\s*:)'), self.f_key))

    def highlightBlock(self, text: str) -> None:  # noqa: N802 - Qt override
        self.setCurrentBlockState(0)
        if self.language is None:
            return
        lang = LANGUAGES[self.language]
        for rx, fmt in self._rules:
            it = rx.globalMatch(text)
            while it.hasNext():
                m = it.next()
                self.setFormat(m.capturedStart(), m.capturedLength(), fmt)
        if lang.line_comment:
            self._line_comment(text, lang.line_comment)
        if lang.triple_strings:
            self._multiline(text, {'"""': _IN_TRIPLE_DOUBLE, "'''": _IN_TRIPLE_SINGLE}, self.f_string)
        if lang.block_comment:
            start, end = lang.block_comment
            self._multiline(text, {start: _IN_BLOCK_COMMENT}, self.f_comment, end=end)

    def _line_comment(self, text: str, marker: str) -> None:
        """The first marker outside a string starts a comment to the end of the line ("a # b" is a string)."""
        pos = text.find(marker)
        while pos >= 0:
            if self.format(pos) != self.f_string:
                self.setFormat(pos, len(text) - pos, self.f_comment)
                return
            pos = text.find(marker, pos + len(marker))

    def _multiline(self, text: str, openers: dict[str, int], fmt: QTextCharFormat, end: str | None = None) -> None:
        """Spans that cross lines (triple-quoted strings, block comments), carried in the block state."""
        pos = 0
        state = self.previousBlockState()
        closers = {v: (end or k) for k, v in openers.items()}
        if state in closers:  # continue a span from the line before
            close = closers[state]
            idx = text.find(close)
            if idx < 0:
                self.setFormat(0, len(text), fmt)
                self.setCurrentBlockState(state)
                return
            self.setFormat(0, idx + len(close), fmt)
            pos = idx + len(close)
        while pos < len(text):
            found = [(text.find(o, pos), o) for o in openers]
            found = [(i, o) for i, o in found if i >= 0]
            if not found:
                return
            idx, opener = min(found)
            close = end or opener
            stop = text.find(close, idx + len(opener))
            if stop < 0:
                self.setFormat(idx, len(text) - idx, fmt)
                self.setCurrentBlockState(openers[opener])
                return
            self.setFormat(idx, stop + len(close) - idx, fmt)
            pos = stop + len(close)


#: How fenced code blocks name their language (```py) -> a key of ``LANGUAGES``.
_FENCE_NAMES = {
    "python": "python", "py": "python", "python3": "python", "py3": "python", "pycon": "python",
    "javascript": "javascript", "js": "javascript", "jsx": "javascript", "mjs": "javascript",
    "typescript": "javascript", "ts": "javascript", "tsx": "javascript",
    "json": "json", "jsonc": "json", "json5": "json", "jsonl": "json",
}


def fence_language(name: str | None) -> str | None:
    """The ``LANGUAGES`` key for a fence's info string (```py, ```TypeScript); None when not known."""
    word = (name or "").strip().split(None, 1)[0].lower() if (name or "").strip() else ""
    return _FENCE_NAMES.get(word)


class FencedCodeHighlighter(CodeHighlighter):
    """Highlights the fenced code blocks of a document rendered from markdown, each in the language its
    fence names (Qt's markdown reader keeps it in the block format's ``BlockCodeLanguage``); other
    blocks are left alone. Used by the transcript's messages."""

    def __init__(self, document: QTextDocument | None = None, *, dark: bool = False) -> None:
        super().__init__(document, None, dark=dark)

    def highlightBlock(self, text: str) -> None:  # noqa: N802 - Qt override
        fmt = self.currentBlock().blockFormat()
        if not fmt.hasProperty(QTextFormat.Property.BlockCodeLanguage):
            self.setCurrentBlockState(0)
            return
        language = fence_language(str(fmt.property(QTextFormat.Property.BlockCodeLanguage) or ""))
        if language != self.language:
            self._use_language(language)
        super().highlightBlock(text)
