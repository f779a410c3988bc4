"""G1 with F4/P5: a model's answer is untrusted text, shown as markdown in the transcript.

- A click on a link in an answer never navigates the message view and never reads the target: a local
  file named by the link (absolute, ``file:``, relative), ``qrc:``, ``data:``, ``javascript:`` — nothing is
  opened and the answer stays as it was; an ``http``/``https`` link goes to the system's browser
  (``QDesktopServices``), and only such a link.
- Images (``![alt](/abs/path.png)``, ``<img src=…>``) are never loaded, local or remote: an image shows as
  its alt text.
- Raw HTML in an answer (a ``<div>`` line, an ``<img>`` line, an unclosed tag, a comment, inline styles)
  is shown as the literal text the model wrote; every word of the answer stays visible and markdown still
  renders.

Blocks are built as ``TranscriptView.build_row`` builds them (a live answer streamed then finished, or a
stored one given whole), and one test goes through the whole window with a scripted model.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PySide6.QtCore import QObject, QPoint, Qt, QUrl, Slot
from PySide6.QtGui import QColor, QDesktopServices, QFont, QImage, QTextCursor, QTextDocument
from PySide6.QtWidgets import QApplication

SECRET = "PRIVATE NOTES: db password hunter2-7f3a9c"

CALL_REF = {"run": "r-untrusted", "step": 1}


def _block(qtbot: Any, text: str, how: str = "streamed") -> Any:
    """An assistant message as the transcript builds it: streamed then finished (live), or whole (stored)."""
    from workbench.ui.transcript_blocks import MessageBlock

    if how == "streamed":
        block = MessageBlock("assistant", "", markdown=True, call_ref=dict(CALL_REF))
        block.append_stream(text)
        block.finish()
    else:
        block = MessageBlock("assistant", text, markdown=True, call_ref=dict(CALL_REF))
    qtbot.addWidget(block)
    block.resize(700, 300)
    block.show()
    QApplication.processEvents()
    return block


def _link_pos(body: Any, label: str) -> QPoint:
    """Where a person clicks the link whose text is ``label`` (inside its first characters)."""
    doc = body.document()
    found = doc.find(label)
    assert not found.isNull(), f"{label!r} not shown in {doc.toPlainText()!r}"
    cursor = QTextCursor(doc)
    cursor.setPosition(found.selectionStart() + 2)
    pos = body.cursorRect(cursor).center()
    assert body.anchorAt(pos), f"no link under the mouse at {pos} for {label!r}"
    return pos


class _UrlRecorder(QObject):
    """Stands in for the system's browser / file opener: ``QDesktopServices.setUrlHandler``."""

    def __init__(self) -> None:
        super().__init__()
        self.opened: list[str] = []

    @Slot(QUrl)
    def open(self, url: QUrl) -> None:
        self.opened.append(url.toString())


@pytest.fixture
def desktop() -> Any:
    """Every scheme a click could hand to the desktop, recorded instead of opened."""
    recorder = _UrlRecorder()
    schemes = ["http", "https", "file", "qrc", "data", "javascript", "mailto"]
    for scheme in schemes:
        QDesktopServices.setUrlHandler(scheme, recorder, "open")
    yield recorder
    for scheme in schemes:
        QDesktopServices.unsetUrlHandler(scheme)


@pytest.fixture
def secret_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A local file with a unique secret; the working folder is its folder, so a relative link names it."""
    path = tmp_path / "secret_notes.txt"
    path.write_text(SECRET + "\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return path


def _targets(secret: Path) -> list[str]:
    return [
        str(secret),  # an absolute path
        secret.as_uri(),  # file:///…
        "secret_notes.txt",  # relative: resolved against the working folder by Qt
        "./secret_notes.txt",
        "qrc:/qt-project.org/styles/commonstyle/images/standardbutton-open-16.png",
        "data:text/plain;base64,UFJJVkFURQ==",
        "javascript:alert(1)",
    ]


@pytest.mark.parametrize("how", ["streamed", "stored"])
def test_g1_f4_p5_click_on_a_local_link_never_opens_it(qtbot: Any, secret_file: Path, desktop: Any,
                                                        how: str) -> None:
    """G1, F4/P5: clicking a link to a local file (or any non-web scheme) in an answer leaves the answer as
    it was: the file's contents never appear, the view never navigates, nothing goes to the desktop."""
    for target in _targets(secret_file):
        answer = f"Details are in [the report]({target}).\n\nAll **three** steps are needed.\n"
        block = _block(qtbot, answer, how)
        body = block.body
        before = body.toPlainText()
        assert before == "Details are in the report.\nAll three steps are needed."
        qtbot.mouseClick(body.viewport(), Qt.MouseButton.LeftButton, pos=_link_pos(body, "the report"))
        QApplication.processEvents()
        after = body.toPlainText()
        assert SECRET not in after and "hunter2" not in after, f"{target!r}: the file was read into the view"
        assert after == before, f"{target!r}: the message changed on a click: {after!r}"
        assert body.source().isEmpty(), f"{target!r}: the view navigated to {body.source().toString()!r}"
        assert desktop.opened == [], f"{target!r}: handed to the desktop: {desktop.opened}"
        block.close()


def test_g1_keyboard_activation_of_a_local_link_never_opens_it(qtbot: Any, secret_file: Path,
                                                               desktop: Any) -> None:
    """G1, G14, F4/P5: a link reached with Tab and activated with Enter is treated as a click: not opened."""
    block = _block(qtbot, f"See [the report]({secret_file}) now.\n")
    body = block.body
    body.setFocus()
    assert body.focusNextPrevChild(True)  # QTextBrowser: Tab moves to its next link and selects it
    assert body.textCursor().selectedText() == "the report"
    qtbot.keyClick(body, Qt.Key.Key_Return)
    QApplication.processEvents()
    assert SECRET not in body.toPlainText()
    assert body.toPlainText() == "See the report now."
    assert desktop.opened == []


def test_g1_web_link_opens_in_the_system_browser_only(qtbot: Any, desktop: Any) -> None:
    """G1: an https/http link in an answer opens in the system's browser (QDesktopServices); the message
    view stays on the answer."""
    answer = "Read [the docs](https://example.org/guide#setup) and [the old page](http://example.org/old).\n"
    block = _block(qtbot, answer)
    body = block.body
    before = body.toPlainText()
    qtbot.mouseClick(body.viewport(), Qt.MouseButton.LeftButton, pos=_link_pos(body, "the docs"))
    qtbot.mouseClick(body.viewport(), Qt.MouseButton.LeftButton, pos=_link_pos(body, "the old page"))
    QApplication.processEvents()
    assert desktop.opened == ["https://example.org/guide#setup", "http://example.org/old"]
    assert body.toPlainText() == before
    assert body.source().isEmpty()


def test_g1_link_policy_schemes() -> None:
    """G1, F4/P5: only absolute http(s) URLs with a host count as web links."""
    from workbench.ui.answer_links import is_web_link

    assert is_web_link(QUrl("https://example.org/x"))
    assert is_web_link(QUrl("HTTP://example.org"))
    for target in ["file:///etc/passwd", "/etc/passwd", "notes.txt", "qrc:/x.png", "data:text/plain,hi",
                   "javascript:alert(1)", "https:relative", "mailto:a@example.org", "ftp://example.org/x"]:
        assert not is_web_link(QUrl(target)), target


def _red_png(path: Path) -> Path:
    image = QImage(120, 90, QImage.Format.Format_RGB32)
    image.fill(QColor(255, 0, 0))
    assert image.save(str(path))
    return path


def _image_fragments(doc: QTextDocument) -> list[str]:
    names: list[str] = []
    block = doc.begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            frag = it.fragment()
            if frag.isValid() and frag.charFormat().isImageFormat():
                names.append(frag.charFormat().toImageFormat().name())
            it += 1
        block = block.next()
    return names


def _red_pixels(image: QImage) -> int:
    count = 0
    for y in range(0, image.height(), 2):
        for x in range(0, image.width(), 2):
            c = image.pixelColor(x, y)
            if c.red() > 200 and c.green() < 60 and c.blue() < 60:
                count += 1
    return count


@pytest.mark.parametrize("how", ["streamed", "stored"])
def test_g1_f4_p5_images_in_an_answer_never_load(qtbot: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 how: str) -> None:
    """G1, F4/P5: ``![alt](/abs/path.png)``, a ``file:`` or relative image and ``<img src=…>`` never load: the
    image shows as its alt text, the document holds no image, and no pixel of the (red) file is drawn."""
    png = _red_png(tmp_path / "local_private.png")
    monkeypatch.chdir(tmp_path)
    answer = (f"Done. See the chart:\n\n![the chart]({png})\n\n"
              f"Inline ![tiny]({png.as_uri()}) and ![rel](local_private.png) too.\n\n"
              f"<img src=\"{png}\" width=300>\n\nThe end.\n")
    block = _block(qtbot, answer, how)
    body = block.body
    doc = body.document()
    shot = block.grab().toImage()
    plain = body.toPlainText()
    assert "[image: the chart]" in plain and "[image: tiny]" in plain and "[image: rel]" in plain
    assert f'<img src="{png}" width=300>' in plain  # the tag as the model wrote it
    assert "The end." in plain
    assert _image_fragments(doc) == []
    assert _red_pixels(shot) == 0, "the local image was drawn"
    # Even asked for directly, the view hands back no file: a 1×1 placeholder.
    for url in (QUrl.fromLocalFile(str(png)), QUrl(str(png)), QUrl("local_private.png")):
        got = doc.resource(QTextDocument.ResourceType.ImageResource, url)
        assert not (isinstance(got, QImage) and got.size().width() == 120), f"{url.toString()} loaded"
        got = body.loadResource(QTextDocument.ResourceType.ImageResource.value, url)
        assert not (isinstance(got, QImage) and got.width() == 120), f"{url.toString()} loaded"


HTML_ANSWER = ("Wrap the form in a container:\n\n<div class=\"box\">\n\n"
               "Then **run the tests** before you commit: `pytest -q`.\n\nAll 3 steps are needed.\n")


@pytest.mark.parametrize("answer, literal, words", [
    (HTML_ANSWER, '<div class="box">', ["Wrap", "container", "Then", "run", "tests", "pytest", "steps", "needed"]),
    ("A\n\n<img src=\"/tmp/x.png\">\n\nB after\n", '<img src="/tmp/x.png">', ["A", "after"]),
    ("A\n\n<div>\n\nB after\n\nC end\n", "<div>", ["after", "end"]),
    ("A\n\n<!-- hidden -->\n\nB after\n", "<!-- hidden -->", ["hidden", "after"]),
    ("A <b>bold</b> and <span style='font-size:1px'>tiny</span> B after\n",
     "<span style='font-size:1px'>tiny</span>", ["bold", "tiny", "after"]),
    ("<script>alert(1)</script>\n\n<style>p {display:none}</style>\n\nStill here\n",
     "<style>p {display:none}</style>", ["alert", "Still", "here"]),
])
def test_g1_raw_html_shows_as_text_and_hides_nothing(qtbot: Any, answer: str, literal: str,
                                                     words: list[str]) -> None:
    """G1: raw HTML in an answer is shown as the literal text the model wrote; every word after it stays
    visible (the view is as tall as the whole answer) and inline styles do not apply."""
    block = _block(qtbot, answer)
    body = block.body
    plain = body.toPlainText()
    assert literal in plain
    for word in words:
        assert word in plain, f"{word!r} hidden: {plain!r}"
    assert body.height() >= body.document().size().height()
    # No character is shrunk by an inline style (the answer's span asked for 1px).
    sizes = set()
    block_ = body.document().begin()
    while block_.isValid():
        it = block_.begin()
        while not it.atEnd():
            frag = it.fragment()
            size = frag.charFormat().font().pointSizeF()
            if size > 0:
                sizes.add(size)
            it += 1
        block_ = block_.next()
    assert not sizes or min(sizes) >= body.font().pointSizeF() - 0.01, sizes


def test_g1_markdown_still_renders_without_html(qtbot: Any) -> None:
    """G1: with raw HTML off, markdown still renders: heading, list, bold, inline code, fenced code, a
    link (as link text), a table."""
    from workbench.ui.markdown_render import code_boxes

    answer = ("# Plan\n\n- first **bold** item\n- second `code` item\n\n"
              "```python\nprint('hi')\n```\n\nSee [the docs](https://example.org).\n\n"
              "| a | b |\n|---|---|\n| 1 | 2 |\n")
    block = _block(qtbot, answer)
    doc = block.body.document()
    plain = doc.toPlainText()
    assert "Plan" in plain and "#" not in plain
    assert "**" not in plain and "`" not in plain and "[the docs]" not in plain
    heading = doc.findBlock(doc.find("Plan").selectionStart())
    assert heading.blockFormat().headingLevel() == 1
    assert doc.find("first").block().textList() is not None
    bold = QTextCursor(doc)
    bold.setPosition(doc.find("bold").selectionStart() + 1)
    assert bold.charFormat().fontWeight() >= QFont.Weight.DemiBold
    link = QTextCursor(doc)
    link.setPosition(doc.find("the docs").selectionStart() + 1)
    assert link.charFormat().anchorHref() == "https://example.org"
    assert len(code_boxes(doc)) == 1


_WORD = st.from_regex(r"[a-z]{3,8}", fullmatch=True).map(lambda w: "w" + w)
_MARKUP = st.sampled_from([
    '<div class="box">', "<div>", "</div>", '<img src="/etc/hostname">', "<img src=x.png width=300>",
    "<span style='font-size:1px;color:white'>", "</span>", "<!--", "-->", "<br>", "<p>", "</p>",
    "<table><tr><td>", "<script>", "</script>", "<style>", "<pre>", "<details>", "<b>", "</b>",
    "<?php", "<![CDATA[", "<!DOCTYPE html>", "<a href='/etc/passwd'>",
    "**", "_", "`", "# ", "- ", "1. ", "> ", "\n```\n", "\n\n", "\n",
])
_SEP = st.sampled_from([" ", "\n", "\n\n"])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(st.tuples(st.one_of(_WORD, _MARKUP), _SEP), min_size=1, max_size=25))
def test_g1_every_word_of_an_answer_mixing_markdown_and_html_is_shown(qtbot: Any, parts: list[Any]) -> None:
    """G1 (property): whatever markdown and HTML tags an answer mixes, every plain word of it appears in
    the rendered message and the message is as tall as its whole text."""
    from workbench.ui.markdown_render import render_markdown
    from workbench.ui.transcript_blocks import AutoHeightBrowser

    answer = "".join(token + sep for token, sep in parts)
    words = [token for token, _ in parts if token.startswith("w") and token.isalpha()]
    body = AutoHeightBrowser()
    qtbot.addWidget(body)
    body.resize(600, 100)
    render_markdown(body, answer, dark=False)
    plain = body.toPlainText()
    for word in words:
        assert word in plain, f"{word!r} not shown for {answer!r}: {plain!r}"
    assert _image_fragments(body.document()) == []
    assert body.height() >= int(body.document().size().height())
    body.deleteLater()


def test_g1_answer_with_html_link_and_image_renders_readably(qtbot: Any, tmp_path: Path) -> None:
    """G1: an answer mixing markdown, raw HTML, a local image and a local link, drawn offscreen (a PNG in
    the test's folder): the tags as text, the image as its alt text, every line visible."""
    png = _red_png(tmp_path / "local_private.png")
    answer = ("## Fix\n\nWrap the form in a container:\n\n<div class=\"box\">\n\n"
              "Then **run the tests** before you commit: `pytest -q`.\n\n"
              f"![the chart]({png})\n\n<img src=\"{png}\" width=300>\n\n"
              "Full log: [open the report](/tmp/x/secret_notes.txt), docs at [Qt](https://doc.qt.io).\n\n"
              "All 3 steps are needed.\n")
    block = _block(qtbot, answer)
    block.resize(640, block.sizeHint().height())
    QApplication.processEvents()
    shot = block.grab()
    assert shot.save(str(tmp_path / "transcript.png"))
    plain = block.body.toPlainText()
    for text in ["Fix", '<div class="box">', "run the tests", "[image: the chart]", "open the report",
                 "All 3 steps are needed."]:
        assert text in plain
    assert _red_pixels(shot.toImage()) == 0


async def test_g1_window_answer_link_click_and_html_block(windows: Any, demo_workspace: Path, qtbot: Any,
                                                          secret_file: Path, desktop: Any) -> None:
    """G1, F4/P5 through the window: a scripted model's answer with a ``<div>`` line and a link to a local
    file; every word is shown, and clicking the link leaves the answer as it was."""
    from workbench.engine.models.scripted import ScriptedModel, reply

    answer = HTML_ANSWER + f"\nDetails in [the report]({secret_file}).\n"
    window = await windows(demo_workspace, model=ScriptedModel([reply(answer)]))
    window.input.setFocus()
    qtbot.keyClicks(window.input, "how do I fix the layout?")
    qtbot.keyClick(window.input, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    await asyncio.wait_for(window.wait_settled(), 30)
    await asyncio.sleep(0.2)
    body = window.transcript.messages()[-1].body
    before = body.toPlainText()
    assert "run the tests" in before and "All 3 steps are needed." in before and '<div class="box">' in before
    qtbot.mouseClick(body.viewport(), Qt.MouseButton.LeftButton, pos=_link_pos(body, "the report"))
    await asyncio.sleep(0.2)
    assert body.toPlainText() == before
    assert SECRET not in body.toPlainText()
    assert desktop.opened == []
