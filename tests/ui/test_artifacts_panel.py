"""The Artifacts dock (G2, issue 5 item 5): names, sizes and source live from ``artifact_written``, a
viewer for markdown, code, text and images, and Save as… to disk (the path chooser injected)."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QBuffer, QByteArray, QIODevice, Qt, QUrl
from PySide6.QtGui import QColor, QImage

from tests.stub_server import StubReply, StubServer
from tests.ui.helpers import click, wait_for
from workbench.engine.events import Event
from workbench.engine.models.scripted import ScriptedModel, reply, tool_reply
from workbench.session import Session
from workbench.ui.artifacts_panel import ArtifactsModel, ArtifactsPanel, artifact_bytes, format_size, view_kind
from workbench.ui.code_highlighter import CodeHighlighter, language_for

REPORT = "# Findings\n\nThe build is **green**.\n\n- one\n- two\n"
CODE = 'def greet(name):\n    """Say hi."""\n    return f"hi {name}"  # a comment\n\nprint(greet(42))\n'


def workspace(tmp_path: Path, yaml: str = "") -> Path:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    (ws / "workbench.yaml").write_text(yaml, encoding="utf-8")
    return ws


def png_base64(w: int = 24, h: int = 16) -> str:
    image = QImage(w, h, QImage.Format.Format_RGB32)
    image.fill(QColor("#2da44e"))
    data = QByteArray()
    buf = QBuffer(data)
    buf.open(QIODevice.OpenModeFlag.WriteOnly)
    assert image.save(buf, "PNG")
    buf.close()
    return base64.b64encode(bytes(data.data())).decode("ascii")


def write(name: str, content: str, mime: str | None = None) -> tuple[str, dict[str, Any]]:
    args = {"name": name, "content": content}
    if mime:
        args["mime"] = mime
    return ("write_artifact", args)


async def open_with_panel(ws: Path, model: Any, qtbot: Any, **kw: Any) -> tuple[Session, ArtifactsPanel, Any]:
    session = await Session.open(ws, model=model, **{k: v for k, v in kw.items() if k != "choose_path"})
    panel = ArtifactsPanel(choose_path=kw.get("choose_path"))
    qtbot.addWidget(panel)
    panel.resize(520, 560)
    panel.show()
    panel.set_session(session)
    unsubscribe = session.subscribe(panel.handle_event, replay=False)
    return session, panel, unsubscribe


def cells(panel: ArtifactsPanel) -> list[list[str]]:
    m = panel.proxy
    return [[m.index(r, c).data() for c in range(m.columnCount())] for r in range(m.rowCount())]


def test_artifacts_model_passes_qtmodeltester(qtmodeltester: Any) -> None:
    model = ArtifactsModel()
    model.set_items({"b.md": {"size": 10, "mime": "text/markdown", "source": "agent", "updated": 2.0},
                     "a.png": {"size": 2048, "mime": "image/png", "source": "researcher_1", "updated": 1.0}})
    model.upsert("c.py", {"size": 5, "mime": "text/x-python", "source": "agent"})
    model.upsert("b.md", {"size": 12, "mime": "text/markdown", "source": "agent"})
    qtmodeltester.check(model)
    assert model.names() == ["a.png", "b.md", "c.py"]
    assert model.index(0, ArtifactsModel.SIZE).data() == "2.0 KB"
    assert model.index(0, ArtifactsModel.SOURCE).data() == "researcher_1 (sub-agent)"
    assert model.index(1, ArtifactsModel.SIZE).data() == "12 B"


def test_kinds_sizes_and_bytes() -> None:
    assert view_kind("r.md", "text/markdown") == "markdown" and view_kind("x", "text/markdown") == "markdown"
    assert view_kind("a.png", "image/png") == "image"
    assert view_kind("s.py", "text/plain") == "code" and view_kind("x", "application/json") == "code"
    assert view_kind("n.txt", "text/plain") == "text" and view_kind("b.bin", "application/octet-stream") == "binary"
    assert language_for("app.ts") == "javascript" and language_for("x", "text/x-python") == "python"
    assert format_size(999) == "999 B" and format_size(1536) == "1.5 KB" and format_size(3 * 1024 * 1024) == "3.0 MB"
    assert artifact_bytes({"content": "héllo", "mime": "text/plain"}) == "héllo".encode()
    assert artifact_bytes({"content": base64.b64encode(b"\x00\x01").decode(), "mime": "image/png"}) == b"\x00\x01"


async def test_written_artifacts_appear_live_and_open_in_the_viewer(tmp_path: Path, qtbot: Any) -> None:
    ws = workspace(tmp_path)
    model = ScriptedModel([
        tool_reply(write("report.md", REPORT)),
        tool_reply(write("greet.py", CODE), write("chart.png", png_base64(), "image/png")),
        reply("Wrote three artifacts."),
    ])
    session, panel, unsubscribe = await open_with_panel(ws, model, qtbot)
    assert panel.model.rowCount() == 0 and not panel.empty_label.isHidden()
    rows_when_step_2_started: list[list[str]] = []
    session.subscribe(lambda e: e.type == "step_started" and e.step == 2 and rows_when_step_2_started.extend(
        [r[0]] for r in cells(panel)), replay=False)

    result = await session.run("write the report")
    assert result.status == "done"
    assert rows_when_step_2_started == [["report.md"]]  # live: listed while the run went on
    assert cells(panel) == [
        ["report.md", format_size(len(REPORT.encode())), "text/markdown", "agent"],
        ["greet.py", format_size(len(CODE.encode())), "text/x-python", "agent"],
        ["chart.png", format_size(len(png_base64())), "image/png", "agent"],
    ]
    assert panel.empty_label.isHidden()

    # The first artifact opened itself; markdown is rendered, not shown as source.
    assert panel.current_name == "report.md" and panel.current_kind == "markdown"
    assert panel.stack.currentWidget() is panel.markdown_view
    doc = panel.markdown_view.document()
    assert doc.firstBlock().text() == "Findings" and doc.firstBlock().blockFormat().headingLevel() == 1
    assert "**" not in doc.toPlainText() and "green" in doc.toPlainText()
    assert panel.save_button.isEnabled()

    # Code: highlighted by its extension.
    assert panel.select("greet.py")
    assert panel.current_kind == "code" and panel.stack.currentWidget() is panel.text_view
    assert panel.text_view.toPlainText() == CODE
    assert panel.highlighter.language == "python"
    first = panel.text_view.document().firstBlock()
    assert any(r.format.fontWeight() > 400 for r in first.layout().formats())  # "def" in bold

    # An image by its mime type: a pixmap.
    assert panel.select("chart.png")
    assert panel.current_kind == "image" and panel.stack.currentWidget() is panel.image_scroll
    pixmap = panel.image_label.pixmap()
    assert not pixmap.isNull() and (pixmap.width(), pixmap.height()) == (24, 16)

    # A click in the list opens a row too.
    index = panel.proxy.index(0, 0)
    qtbot.mouseClick(panel.table.viewport(), Qt.MouseButton.LeftButton, pos=panel.table.visualRect(index).center())
    assert panel.current_name == "report.md"

    # Reopening the thread rebuilds the list from the store.
    fresh = ArtifactsPanel()
    qtbot.addWidget(fresh)
    fresh.set_session(session)
    assert [r[0] for r in cells(fresh)] == ["report.md", "greet.py", "chart.png"]
    unsubscribe()
    await session.close()


async def test_rewriting_the_shown_artifact_refreshes_the_viewer(tmp_path: Path, qtbot: Any) -> None:
    ws = workspace(tmp_path)
    model = ScriptedModel([
        tool_reply(write("notes.txt", "first")),
        tool_reply(write("notes.txt", "second, longer")),
        reply("ok"),
    ])
    session, panel, unsubscribe = await open_with_panel(ws, model, qtbot)
    await session.run("go")
    assert panel.model.names() == ["notes.txt"]
    assert panel.current_kind == "text" and panel.text_view.toPlainText() == "second, longer"
    assert panel.note_label.isHidden()
    unsubscribe()
    await session.close()


async def test_save_as_writes_text_and_decoded_images(tmp_path: Path, qtbot: Any) -> None:
    ws = workspace(tmp_path)
    png = png_base64()
    asked: list[tuple[str, str]] = []
    targets = iter([tmp_path / "out" / "saved.md", tmp_path / "out" / "saved.png"])

    async def choose(suggested: str, mime: str) -> str:
        asked.append((suggested, mime))
        return str(next(targets))

    (tmp_path / "out").mkdir()
    model = ScriptedModel([tool_reply(write("report.md", REPORT), write("chart.png", png, "image/png")), reply("ok")])
    session, panel, unsubscribe = await open_with_panel(ws, model, qtbot, choose_path=choose)
    await session.run("go")

    panel.select("report.md")
    click(qtbot, panel.save_button)
    await wait_for(lambda: (tmp_path / "out" / "saved.md").exists(), what="saved.md")
    await panel.tasks.wait_idle()
    assert (tmp_path / "out" / "saved.md").read_text(encoding="utf-8") == REPORT
    assert asked[0] == (str(ws.resolve() / "report.md"), "text/markdown")
    assert "Saved report.md" in panel.note_label.text()

    panel.select("chart.png")
    click(qtbot, panel.save_button)
    await wait_for(lambda: (tmp_path / "out" / "saved.png").exists(), what="saved.png")
    await panel.tasks.wait_idle()
    assert (tmp_path / "out" / "saved.png").read_bytes() == base64.b64decode(png)
    unsubscribe()
    await session.close()


async def test_save_as_cancel_and_failure(tmp_path: Path, qtbot: Any) -> None:
    ws = workspace(tmp_path)
    choices: list[Any] = [None, str(tmp_path / "missing-folder" / "x.md")]
    session, panel, unsubscribe = await open_with_panel(
        ws, ScriptedModel([tool_reply(write("report.md", REPORT)), reply("ok")]), qtbot,
        choose_path=lambda suggested, mime: choices.pop(0),
    )
    await session.run("go")
    assert await panel.save_as("report.md") is None  # the user cancelled
    assert await panel.save_as("report.md") is None
    assert "Could not save report.md" in panel.note_label.text() and not panel.note_label.isHidden()
    unsubscribe()
    await session.close()


async def test_sub_agent_source_and_an_artifact_not_yet_committed(tmp_path: Path, qtbot: Any) -> None:
    ws = workspace(tmp_path)
    session, panel, unsubscribe = await open_with_panel(ws, ScriptedModel([]), qtbot)
    tid = session.thread_id
    panel.handle_event(Event("artifact_written", tid, "r1", 1,
                             {"name": "researcher_1/summary.md", "size": 120, "mime": "text/markdown",
                              "source": "researcher_1"}))
    assert cells(panel) == [["researcher_1/summary.md", "120 B", "text/markdown", "researcher_1 (sub-agent)"]]
    # The event carries no content and the step is not committed: the viewer says so, Save as waits.
    assert panel.current_name == "researcher_1/summary.md" and panel.current_kind == ""
    assert "once the step is saved" in panel.placeholder.text()
    assert not panel.save_button.isEnabled()
    unsubscribe()
    await session.close()


async def test_an_artifact_through_the_stub_server(
    tmp_path: Path, qtbot: Any, stub_server: StubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    ws = workspace(tmp_path, f"model: openai/test-model\napi_base: {stub_server.url}\n")
    stub_server.script(
        StubReply(tool_calls=[("write_artifact", {"name": "plan.md", "content": "## Plan\n\n1. Test\n"})],
                  usage=(50, 20)),
        StubReply(text="Plan written.", usage=(60, 5)),
    )
    session, panel, unsubscribe = await open_with_panel(ws, None, qtbot, threaded_model=False)
    result = await session.run("plan")
    assert result.status == "done", result.error
    assert panel.model.names() == ["plan.md"] and panel.current_kind == "markdown"
    block = panel.markdown_view.document().firstBlock()
    assert block.text() == "Plan" and block.blockFormat().headingLevel() == 2
    unsubscribe()
    await session.close()


def test_code_highlighter_flavours(qtbot: Any) -> None:
    from PySide6.QtWidgets import QPlainTextEdit

    edit = QPlainTextEdit()
    qtbot.addWidget(edit)
    doc = edit.document()
    h = CodeHighlighter(doc, "json")
    edit.setPlainText('{"key": 12, "flag": true}\n')
    assert len(doc.firstBlock().layout().formats()) >= 3  # key, number, literal

    h.set_language("javascript")
    edit.setPlainText("/* a\nlong comment */ const x = `t`;\n")
    first, second = doc.firstBlock(), doc.firstBlock().next()
    assert first.userState() == 3 and second.userState() == 0  # the block comment spans the two lines
    assert second.layout().formats()[0].start == 0 and second.layout().formats()[0].length == len("long comment */")

    h.set_language("python")
    edit.setPlainText('y = "a # b"  # real\n')
    spans = sorted((r.start, r.length) for r in doc.firstBlock().layout().formats())
    assert (4, 7) in spans and (13, 6) in spans  # the string keeps its "#"; the comment starts after it

    h.set_language(None)
    assert doc.firstBlock().layout().formats() == []


async def test_g1_a_markdown_artifact_loads_no_local_file_and_hides_no_word(tmp_path: Path, qtbot: Any) -> None:
    """G1, F4: an artifact is the agent's text. A local image it names is never loaded (its alt text is
    shown), raw HTML is shown as written (it used to swallow the rest of the document), and a click on a
    local link never replaces the artifact with the file (a review found both in the transcript)."""
    secret = tmp_path / "secret_notes.txt"
    secret.write_text("PRIVATE hunter2\n", encoding="utf-8")
    picture = tmp_path / "private.png"
    picture.write_bytes(base64.b64decode(png_base64()))
    text = (f"# Notes\n\n<div class=\"box\">\n\nStill **visible** after the tag.\n\n![the chart]({picture})\n\n"
            f"See [the notes]({secret}).\n\nLast line.\n")
    ws = workspace(tmp_path)
    model = ScriptedModel([tool_reply(write("notes.md", text)), reply("done")])
    session, panel, unsubscribe = await open_with_panel(ws, model, qtbot)
    assert (await session.run("write")).status == "done"
    assert panel.select("notes.md") and panel.current_kind == "markdown"
    view = panel.markdown_view
    plain = view.document().toPlainText()
    for words in ('<div class="box">', "Still visible after the tag.", "[image: the chart]", "the notes", "Last line."):
        assert words in plain, (words, plain)
    resource = view.document().resource(2, QUrl.fromLocalFile(str(picture)))  # ImageResource
    assert not isinstance(resource, QImage) or resource.size().width() <= 1
    view.setSource(QUrl.fromLocalFile(str(secret)))  # what a followed link does
    assert "hunter2" not in view.document().toPlainText()
    unsubscribe()
    await session.close()
