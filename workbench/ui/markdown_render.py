"""Markdown in the transcript that reads well (issue 10 item 11): tables with borders, padding and a
header row; fenced code as a padded, tinted box with syntax colours; inline code tinted.

Qt's markdown reader (``QTextDocument.setMarkdown``) builds tables with no borders or padding and code
blocks as bare monospace lines flush with the text. ``render_markdown`` sets the markdown, then polishes
the document in place: a table's format and its header cells; each run of code lines moved into a
one-cell frame (a ``QTextTable``: the only block container with padding and a background); inline code
given a background. Fenced code is highlighted by ``code_highlighter.FencedCodeHighlighter``.

The answer is untrusted (G1, F4/P5): it is read as GitHub markdown *without* raw HTML (a tag shows as the
text the model wrote; nothing of the answer is hidden), and each image becomes its alt text, never
loaded (``set_answer_markdown``).
"""

from __future__ import annotations

from PySide6.QtGui import (
    QBrush,
    QColor,
    QTextBlock,
    QTextBlockFormat,
    QTextCharFormat,
    QTextCursor,
    QTextDocument,
    QTextFormat,
    QTextFrameFormat,
    QTextLength,
    QTextTable,
    QTextTableFormat,
)
from PySide6.QtWidgets import QTextEdit

from workbench.ui.code_highlighter import FencedCodeHighlighter

_CODE_LANGUAGE = QTextFormat.Property.BlockCodeLanguage
_HIGHLIGHTER = "_workbench_code_highlighter"


def colors(dark: bool) -> dict[str, str]:
    """The colours of tables and code in the light or dark theme."""
    if dark:
        return {"border": "#444c56", "header": "#2d333b", "code_bg": "#2d333b", "code_border": "#444c56",
                "inline_bg": "#373e47"}
    return {"border": "#d0d7de", "header": "#eef1f4", "code_bg": "#f3f5f8", "code_border": "#d8dee4",
            "inline_bg": "#eff1f3"}


def _is_code(block: QTextBlock) -> bool:
    return block.blockFormat().hasProperty(_CODE_LANGUAGE)


def _in_table(doc: QTextDocument, block: QTextBlock) -> bool:
    return isinstance(QTextCursor(block).currentTable(), QTextTable)


def _tables(doc: QTextDocument) -> list[QTextTable]:
    out: list[QTextTable] = []
    stack = [doc.rootFrame()]
    while stack:
        frame = stack.pop()
        for child in frame.childFrames():
            if isinstance(child, QTextTable):
                out.append(child)
            stack.append(child)
    return out


def _polish_tables(tables: list[QTextTable], c: dict[str, str]) -> None:
    for table in tables:
        fmt = table.format()
        fmt.setBorder(1)
        fmt.setBorderStyle(QTextFrameFormat.BorderStyle.BorderStyle_Solid)
        fmt.setBorderBrush(QBrush(QColor(c["border"])))
        fmt.setBorderCollapse(True)
        fmt.setCellPadding(5)
        fmt.setCellSpacing(0)
        fmt.setTopMargin(4)
        fmt.setBottomMargin(8)
        fmt.setHeaderRowCount(1)
        table.setFormat(fmt)
        for col in range(table.columns()):
            cell = table.cellAt(0, col)
            cell_fmt = cell.format().toTableCellFormat()
            cell_fmt.setBackground(QBrush(QColor(c["header"])))
            cell.setFormat(cell_fmt)
            # Header cells in bold, as in every markdown viewer.
            cursor = cell.firstCursorPosition()
            cursor.setPosition(cell.lastCursorPosition().position(), QTextCursor.MoveMode.KeepAnchor)
            bold = QTextCharFormat()
            bold.setFontWeight(600)
            cursor.mergeCharFormat(bold)


def _code_runs(doc: QTextDocument) -> list[tuple[int, int]]:
    """(first position, last position) of each run of consecutive code lines outside tables."""
    runs: list[tuple[int, int]] = []
    block = doc.begin()
    while block.isValid():
        if _is_code(block) and not _in_table(doc, block):
            first = block
            lang = block.blockFormat().property(_CODE_LANGUAGE)
            while (block.next().isValid() and _is_code(block.next())
                   and block.next().blockFormat().property(_CODE_LANGUAGE) == lang):
                block = block.next()
            runs.append((first.position(), block.position() + block.length() - 1))
        block = block.next()
    return runs


def _box_code(doc: QTextDocument, start: int, end: int, c: dict[str, str]) -> None:
    """Move the code lines between ``start`` and ``end`` into a padded, tinted one-cell table."""
    cursor = QTextCursor(doc)
    cursor.setPosition(start)
    block_fmt = QTextBlockFormat(cursor.blockFormat())
    block_fmt.setTopMargin(0)
    block_fmt.setBottomMargin(0)
    block_fmt.setNonBreakableLines(False)  # a long line wraps in the box rather than run out of sight
    char_fmt = QTextCharFormat(cursor.block().charFormat())
    probe = QTextCursor(doc)
    probe.setPosition(min(start + 1, end))
    char_fmt = QTextCharFormat(probe.charFormat()) if end > start else char_fmt
    cursor.setPosition(end, QTextCursor.MoveMode.KeepAnchor)
    lines = cursor.selectedText().split("\u2029")  # Qt's paragraph separator
    cursor.removeSelectedText()
    table_fmt = QTextTableFormat()
    table_fmt.setBorder(1)
    table_fmt.setBorderStyle(QTextFrameFormat.BorderStyle.BorderStyle_Solid)
    table_fmt.setBorderBrush(QBrush(QColor(c["code_border"])))
    table_fmt.setBackground(QBrush(QColor(c["code_bg"])))
    table_fmt.setBorderCollapse(True)
    table_fmt.setCellPadding(6)
    table_fmt.setCellSpacing(0)
    table_fmt.setTopMargin(4)
    table_fmt.setBottomMargin(6)
    table_fmt.setWidth(QTextLength(QTextLength.Type.PercentageLength, 100))
    table_fmt.setProperty(QTextFormat.Property.UserProperty, "code_box")
    table = cursor.insertTable(1, 1, table_fmt)
    cursor.setBlockFormat(block_fmt)
    cursor.setBlockCharFormat(char_fmt)
    for i, line in enumerate(lines):
        if i:
            cursor.insertBlock(block_fmt, char_fmt)
        cursor.insertText(line, char_fmt)
    # After the text: a cell's format lives in its first block's char format, which the text set.
    cell = table.cellAt(0, 0)
    cell_fmt = cell.format().toTableCellFormat()
    cell_fmt.setBackground(QBrush(QColor(c["code_bg"])))
    cell.setFormat(cell_fmt)


def _tint_inline_code(doc: QTextDocument, c: dict[str, str]) -> None:
    """Inline code (monospace fragments outside code boxes) gets a tinted background."""
    spans: list[tuple[int, int]] = []
    block = doc.begin()
    while block.isValid():
        if not _is_code(block):
            it = block.begin()
            while not it.atEnd():
                frag = it.fragment()
                if frag.isValid() and frag.charFormat().fontFixedPitch():
                    spans.append((frag.position(), frag.position() + frag.length()))
                it += 1
        block = block.next()
    if not spans:
        return
    tint = QTextCharFormat()
    tint.setBackground(QBrush(QColor(c["inline_bg"])))
    cursor = QTextCursor(doc)
    for a, b in spans:
        cursor.setPosition(a)
        cursor.setPosition(b, QTextCursor.MoveMode.KeepAnchor)
        cursor.mergeCharFormat(tint)


def polish(doc: QTextDocument, dark: bool) -> None:
    """Restyle a document Qt built from markdown: tables, code boxes, inline code (see the module)."""
    c = colors(dark)
    cursor = QTextCursor(doc)
    cursor.beginEditBlock()
    try:
        _polish_tables(_tables(doc), c)
        for start, end in reversed(_code_runs(doc)):  # from the end: earlier positions stay valid
            _box_code(doc, start, end, c)
        _tint_inline_code(doc, c)
    finally:
        cursor.endEditBlock()


def code_boxes(doc: QTextDocument) -> list[QTextTable]:
    """The code boxes ``polish`` made (for tests)."""
    return [t for t in _tables(doc) if t.format().property(QTextFormat.Property.UserProperty) == "code_box"]


def _image_runs(doc: QTextDocument) -> list[tuple[int, int, str]]:
    """(first position, end position, alt text) of each image in the document; an image whose alt text
    has several formats (``![a **b**](x)``) is several adjacent image characters of one name."""
    runs: list[tuple[int, int, str, str]] = []
    block = doc.begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            frag = it.fragment()
            if frag.isValid() and frag.charFormat().isImageFormat():
                fmt = frag.charFormat().toImageFormat()
                alt = str(fmt.property(QTextFormat.Property.ImageAltText) or "")
                start, end = frag.position(), frag.position() + frag.length()
                if runs and runs[-1][1] == start and runs[-1][3] == fmt.name():
                    runs[-1] = (runs[-1][0], end, runs[-1][2] + alt, fmt.name())
                else:
                    runs.append((start, end, alt, fmt.name()))
            it += 1
        block = block.next()
    return [(a, b, alt) for a, b, alt, _ in runs]


def _images_as_text(doc: QTextDocument) -> None:
    """Each image of the answer becomes its alt text, as "[image: alt]" in italics (G1, F4/P5): the image
    named is never loaded — not a local file, not a remote one — and nothing of the answer is hidden."""
    runs = _image_runs(doc)
    cursor = QTextCursor(doc)
    for start, end, alt in reversed(runs):  # from the end: earlier positions stay valid
        cursor.setPosition(start + 1)
        fmt = QTextCharFormat(cursor.charFormat())
        for prop in (QTextFormat.Property.ObjectType, QTextFormat.Property.ImageName,
                     QTextFormat.Property.ImageAltText, QTextFormat.Property.ImageTitle,
                     QTextFormat.Property.ImageWidth, QTextFormat.Property.ImageHeight,
                     QTextFormat.Property.ImageQuality):
            fmt.clearProperty(prop)
        fmt.setFontItalic(True)
        cursor.setPosition(start)
        cursor.setPosition(end, QTextCursor.MoveMode.KeepAnchor)
        alt = " ".join(alt.split())
        cursor.insertText(f"[image: {alt}]" if alt else "[image]", fmt)


#: How answers are read: GitHub's markdown without raw HTML (G1). A model's answer is untrusted text;
#: with HTML on, a ``<div>`` or ``<img>`` line or an unclosed tag hid the rest of the answer and inline
#: styles applied. Without it, a tag shows as the literal text the model wrote (as GitHub shows unknown
#: markup), and every word of the answer stays visible.
MARKDOWN_FEATURES = QTextDocument.MarkdownFeature(
    QTextDocument.MarkdownFeature.MarkdownDialectGitHub.value | QTextDocument.MarkdownFeature.MarkdownNoHTML.value)


def set_answer_markdown(doc: QTextDocument, text: str) -> None:
    """Read ``text`` into ``doc`` as markdown without raw HTML, its images turned into their alt text."""
    doc.setMarkdown(text, MARKDOWN_FEATURES)
    if "![" in text:  # an image needs "![": most answers have none
        _images_as_text(doc)


def render_markdown(view: QTextEdit, text: str, *, dark: bool | None = None) -> None:
    """Show ``text`` as markdown in ``view``, polished, with its fenced code highlighted. Raw HTML is shown
    as text and images as their alt text (``set_answer_markdown``; G1, F4/P5)."""
    if dark is None:
        from workbench.ui.style import is_dark

        dark = is_dark()
    doc = view.document()
    highlighter = getattr(view, _HIGHLIGHTER, None)
    if highlighter is not None:
        highlighter.setDocument(None)  # highlight once, after the polish (it re-lays the code out)
    # Not view.setMarkdown: it takes no features (Qt's default dialect reads raw HTML). As it does, no
    # undo history for the new content.
    undo = doc.isUndoRedoEnabled()
    doc.setUndoRedoEnabled(False)
    try:
        set_answer_markdown(doc, text)
    finally:
        doc.setUndoRedoEnabled(undo)
    view.moveCursor(QTextCursor.MoveOperation.Start)
    if "|" in text or "`" in text or "    " in text or "~~~" in text:  # nothing to polish otherwise (most answers)
        polish(doc, dark)
    if highlighter is None and ("```" in text or "~~~" in text):
        highlighter = FencedCodeHighlighter(None, dark=dark)  # only where there is fenced code
        setattr(view, _HIGHLIGHTER, highlighter)
    if highlighter is not None:
        highlighter.set_dark(dark)
        highlighter.setDocument(doc)


__all__ = ["MARKDOWN_FEATURES", "code_boxes", "colors", "polish", "render_markdown", "set_answer_markdown"]
