"""G1 (issue 10 item 11): markdown tables and code blocks in the transcript render as a reader expects —
tables with borders, padding and a bold tinted header; fenced code in a padded tinted box, highlighted
in its language; inline code tinted. Checked on the document and on the pixels."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtGui import QColor, QTextFormat, QTextTable

ANSWER = """Here is a summary of the **files**:

| File | Lines | Purpose |
|------|------:|---------|
| `README.md` | 12 | what the project is |
| `src/app.py` | 340 | the entry point |

```python
def hello(name: str) -> str:
    return f"Hello {name}"  # greet
```

Inline `code` here.
"""


def _block(qtbot: Any, text: str = ANSWER) -> Any:
    from workbench.ui.transcript_blocks import MessageBlock

    block = MessageBlock("assistant", text)
    qtbot.addWidget(block)
    block.resize(700, 400)
    block.show()
    return block


def test_g1_table_has_borders_padding_and_a_bold_header(qtbot: Any) -> None:
    from workbench.ui.markdown_render import code_boxes

    block = _block(qtbot)
    doc = block.body.document()
    tables = [f for f in doc.rootFrame().childFrames() if isinstance(f, QTextTable) and f not in code_boxes(doc)]
    assert len(tables) == 1
    fmt = tables[0].format()
    assert fmt.border() >= 1 and fmt.cellPadding() >= 4 and fmt.borderCollapse()
    header = tables[0].cellAt(0, 0)
    assert header.format().background().style() != 0, "the header row is tinted"
    assert header.firstCursorPosition().charFormat().fontWeight() >= 600 or \
        tables[0].cellAt(0, 0).firstCursorPosition().block().charFormat().fontWeight() >= 600


def test_g1_code_block_is_a_tinted_padded_box_with_syntax_colours(qtbot: Any) -> None:
    from workbench.ui.markdown_render import code_boxes

    block = _block(qtbot)
    doc = block.body.document()
    boxes = code_boxes(doc)
    assert len(boxes) == 1
    box = boxes[0]
    assert box.format().cellPadding() >= 4 and box.format().background().style() != 0
    cell = box.cellAt(0, 0)
    first = cell.firstCursorPosition().block()
    assert first.text() == "def hello(name: str) -> str:"
    assert first.next().text().strip().startswith("return f\"Hello")
    assert first.blockFormat().property(QTextFormat.Property.BlockCodeLanguage) == "python"
    qtbot.waitUntil(lambda: bool(first.layout().formats()), timeout=2000)
    keyword = [r for r in first.layout().formats() if r.start == 0 and r.length == 3]
    assert keyword, "'def' is highlighted as a keyword"
    assert block.text == ANSWER  # the message's text is untouched


def test_g1_inline_code_is_tinted(qtbot: Any) -> None:
    block = _block(qtbot)
    doc = block.body.document()
    found = doc.find("code")
    assert found.charFormat().fontFixedPitch()
    assert found.charFormat().background().color() != QColor(0, 0, 0, 255)
    assert found.charFormat().background().style() != 0


def test_g1_markdown_renders_to_png(qtbot: Any, tmp_path: Path) -> None:
    """Look at it: in the real transcript, the code box's tint and the table's header tint are painted."""
    from workbench.engine.messages import Message
    from workbench.ui.bridge import Bridge
    from workbench.ui.markdown_render import colors
    from workbench.ui.style import is_dark
    from workbench.ui.transcript import TranscriptView

    view = TranscriptView(Bridge())
    qtbot.addWidget(view)
    view.resize(760, 560)
    view.show()
    view.render_messages([Message.user("Summarise the files"), Message.assistant(ANSWER)])
    body = view.messages()[-1].body
    qtbot.waitUntil(lambda: body.height() > 150, timeout=2000)
    image = view.grab().toImage()
    image.save(str(tmp_path / "markdown.png"))
    c = colors(is_dark())
    pixels = {image.pixel(x, y) for y in range(0, image.height(), 2) for x in range(0, image.width(), 3)}
    assert QColor(c["code_bg"]).rgb() in pixels, "the code box is tinted"
    assert QColor(c["header"]).rgb() in pixels, "the table's header row is tinted"
