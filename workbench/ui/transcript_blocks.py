"""The blocks the transcript is made of: a message, a tool call, a notice.

- ``MessageBlock``: one user or assistant message; streamed text is appended as plain text and the
  finished message rendered once as markdown (in an ``AutoHeightBrowser``, as tall as its text);
- ``ToolCallRow``: one tool call, a header (name, what it is about, status) that expands to its
  arguments and result;
- ``NoticeBlock``: an error with what to do next, or a notice, with an optional button.

They hold no state of the run: ``TranscriptView`` (``transcript.py``) creates and updates them from the
bridge's signals. Their colours come from the transcript's one style sheet (``transcript_style``).
"""

from __future__ import annotations

import json
from typing import Any

from PySide6.QtCore import QPoint, QSize, Qt, QUrl, Signal, Slot
from PySide6.QtGui import QCursor, QFontDatabase, QTextCursor
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QMenu,
    QPlainTextEdit,
    QPushButton,
    QSizePolicy,
    QTextBrowser,
    QToolButton,
    QToolTip,
    QVBoxLayout,
    QWidget,
)

from workbench.ui.answer_links import no_resource, open_link, refusal_text
from workbench.ui.focus_order import chain
from workbench.ui.markdown_render import render_markdown
from workbench.ui.plain_text import literal_ampersands, plain_label, plain_tooltip
from workbench.ui.style import set_status_property

#: Tool-call statuses and how the row shows them.
STATUS_LABELS = {
    "running": "running…",
    "waiting": "waiting for approval",
    "held": "held by the budget",
    "ok": "ok",
    "error": "error",
    "denied": "denied",
    "rejected": "rejected",
    "stopped": "stopped",
}


def _pretty(arguments: Any) -> str:
    try:
        return json.dumps(arguments, indent=2, ensure_ascii=False, sort_keys=False)
    except (TypeError, ValueError):
        return str(arguments)


def _summary(name: str, arguments: Any) -> str:
    """A one-line hint of what a call is about (its path, name or first short string argument)."""
    if not isinstance(arguments, dict):
        return ""
    for key in ("path", "name", "pattern", "query", "task", "command"):
        v = arguments.get(key)
        if isinstance(v, str) and v:
            if key == "command":  # one line, however many the command has
                v = " ".join(v.split())
            return v if len(v) <= 80 else v[:77] + "…"
    if name == "write_todos" and isinstance(arguments.get("todos"), list):
        return f"{len(arguments['todos'])} items"
    return ""


class AutoHeightBrowser(QTextBrowser):
    """A text browser as tall as its document (no inner scroll bar): one message of the transcript.

    What it shows is untrusted (a model's answer; G1, F4/P5 — see ``answer_links``): it never reads a
    resource (``loadResource`` hands back a placeholder, never the file or URL named), and a click on a
    link never navigates it (``setOpenLinks(False)``): ``_link_clicked`` opens an http(s) link in the
    system's browser and only shows any other target as text."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setOpenLinks(False)  # a click never replaces the message with the link's target (F4/P5)
        self.setOpenExternalLinks(False)
        self.anchorClicked.connect(self._link_clicked)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.viewport().setAutoFillBackground(False)
        self.document().setDocumentMargin(2)
        self.document().documentLayout().documentSizeChanged.connect(self._fit)
        self.growing = False
        self._fit()

    @Slot()
    def _fit(self, *_: Any) -> None:
        """Be as tall as the text. While text streams in (``growing``), grow a few lines at a time:
        each change of height re-lays out and repaints the transcript around the message."""
        h = max(int(self.document().size().height()) + 6, 22)
        if self.growing:
            if h <= self.height():
                return
            step = 4 * self.fontMetrics().lineSpacing()
            h += step - h % step
        if h != self.height():
            self.setFixedHeight(h)

    def resizeEvent(self, event: Any) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        self._fit()

    def loadResource(self, kind: int, name: QUrl) -> Any:  # noqa: N802 - Qt override
        """Never the image, style sheet or page named by the answer (F4/P5): a placeholder."""
        return no_resource(kind)

    def doSetSource(self, name: QUrl, kind: Any = None) -> None:  # noqa: N802 - Qt override
        """The message is never replaced by a page (``setSource``, backward/forward): nothing happens."""

    @Slot(QUrl)
    def _link_clicked(self, url: QUrl) -> None:
        """A link of the message was clicked (or activated with the keyboard): an http(s) link opens in the
        system's browser; any other target is not opened, only shown as text in a tool tip."""
        if open_link(url):
            return
        QToolTip.showText(QCursor.pos(), plain_tooltip(refusal_text(url)), self)  # the target as written

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt override
        return QSize(super().sizeHint().width(), self.height())


class MessageBlock(QFrame):
    """One user or assistant message. An assistant message made by a model call of the thread
    (``inspectable``) has **Inspect prompt** in its header and its body's context menu (V2):
    ``sig_inspect_requested(call_ref)`` names its call — ``{"message": i}`` (stored message #i) or
    ``{"run": id, "step": n}`` (a live one)."""

    sig_inspect_requested = Signal(dict)
    """Inspect the prompt of the model call that made this message (``call_ref``)."""

    def __init__(self, role: str, text: str = "", *, markdown: bool = True, parent: QWidget | None = None,
                 call_ref: dict[str, Any] | None = None) -> None:
        super().__init__(parent)
        self.role = role
        self.call_ref = call_ref
        self.setObjectName(f"message_{role}")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(10, 6, 10, 6)
        lay.setSpacing(2)
        self._head = QHBoxLayout()
        self.title = plain_label("You" if role == "user" else "Assistant", self)
        self.title.setObjectName("message_title")
        self._head.addWidget(self.title)
        self._head.addStretch(1)
        self._tag: QLabel | None = None
        self.inspect_button: QToolButton | None = None
        if call_ref is not None:
            self.inspect_button = QToolButton(self)
            self.inspect_button.setObjectName("inspect_prompt")
            self.inspect_button.setText("Inspect prompt")
            self.inspect_button.setAutoRaise(True)
            self.inspect_button.setToolTip("The prompt this answer was made from: every block sent, what changed "
                                           "since the call before, the cacheable prefix, usage and cost")
            self.inspect_button.setAccessibleName("Inspect the prompt of this model call")
            self.inspect_button.clicked.connect(self.request_inspect)
            self._head.addWidget(self.inspect_button)
        lay.addLayout(self._head)
        self.body = AutoHeightBrowser(self)
        self.body.setObjectName("message_body")
        self.body.setAccessibleName("Your message" if role == "user" else "Assistant's answer")  # G14
        if call_ref is not None:
            self.body.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
            self.body.customContextMenuRequested.connect(self._context_menu)
        lay.addWidget(self.body)
        self._text = ""
        self.streaming = False
        if text:
            self.set_text(text, markdown=markdown)

    @property
    def text(self) -> str:
        return self._text

    def reuse(self, text: str, *, markdown: bool = True, call_ref: dict[str, Any] | None = None,
              tag: str = "") -> None:
        """Show another message of the same role (G13: a long transcript reuses the blocks scrolled out of
        sight). The block must have been made with a ``call_ref`` exactly when this one has one."""
        self.call_ref = call_ref
        self.streaming = False
        self.body.growing = False
        self.set_text(text, markdown=markdown)
        self.mark(tag)

    @Slot()
    def request_inspect(self) -> None:
        if self.call_ref is not None:
            self.sig_inspect_requested.emit(dict(self.call_ref))

    @Slot(QPoint)
    def _context_menu(self, pos: QPoint) -> None:
        """The body's usual menu (copy, select all) with "Inspect prompt…" added."""
        menu = self.body.createStandardContextMenu(pos)
        menu.setObjectName("message_menu")
        menu.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        menu.addSeparator()
        menu.addAction("Inspect prompt…", self.request_inspect)
        menu.popup(self.body.viewport().mapToGlobal(pos))  # never exec(): no nested loop under qasync

    @property
    def tag_text(self) -> str:
        """The mark on the message ("stopped"), or ""."""
        return self._tag.text() if self._tag is not None else ""

    def set_text(self, text: str, *, markdown: bool = True) -> None:
        self._text = text
        if markdown and self.role != "user":
            render_markdown(self.body, text)  # tables and code blocks polished (markdown_render)
        else:
            self.body.setPlainText(text)

    def append_stream(self, text: str) -> None:
        """Append a batch of streamed text as plain text (cheap: no re-layout of what is there)."""
        self.streaming = True
        self.body.growing = True
        self._text += text
        cursor = QTextCursor(self.body.document())
        cursor.movePosition(QTextCursor.MoveOperation.End)
        cursor.insertText(text)

    def finish(self, *, stopped: bool = False) -> None:
        """The message is complete: render it as markdown once (and mark it stopped)."""
        if self.streaming:
            self.streaming = False
            self.body.growing = False
            render_markdown(self.body, self._text)
        if stopped:
            self.mark("stopped")

    def mark(self, tag: str) -> None:
        if self._tag is None:
            if not tag:
                return
            self._tag = plain_label(self)
            self._tag.setObjectName("message_tag")
            self._head.addWidget(self._tag)
        self._tag.setText(tag)
        self._tag.setVisible(bool(tag))


class ToolCallRow(QFrame):
    """One tool call: a header (name, what it's about, status) that expands to arguments and result.
    The expanded part is built on first use: a long history has many rows nobody opens."""

    sig_inspect_requested = Signal(dict)
    """Inspect the prompt of the model call that asked for this tool call (``call_ref``, as
    ``MessageBlock``'s; from the row's context menu)."""

    def __init__(self, call_id: str, name: str, arguments: Any, status: str = "running",
                 parent: QWidget | None = None, call_ref: dict[str, Any] | None = None) -> None:
        super().__init__(parent)
        self.call_ref = call_ref
        self.call_id = call_id
        self.name = name
        self.arguments = arguments
        self.edited = False  # P6: the person edited the arguments before the call ran
        self.status = ""
        self.result = ""
        self.setObjectName("tool_call")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self._lay = QVBoxLayout(self)
        self._lay.setContentsMargins(6, 2, 6, 2)
        self._lay.setSpacing(2)
        head = QHBoxLayout()
        head.setSpacing(6)
        self.toggle = QToolButton(self)
        self.toggle.setObjectName("tool_toggle")
        self.toggle.setCheckable(True)
        self.toggle.setArrowType(Qt.ArrowType.RightArrow)
        self.toggle.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.toggle.setAutoRaise(True)
        self.toggle.toggled.connect(self.set_expanded)
        head.addWidget(self.toggle)
        self.summary = plain_label(self)
        self.summary.setObjectName("tool_summary")
        head.addWidget(self.summary, 1)
        self.ending_label = plain_label(self)  # E6: a command's exit code and duration once it ends
        self.ending_label.setObjectName("tool_ending")
        self.ending_label.hide()
        head.addWidget(self.ending_label)
        self.status_label = plain_label(self)
        self.status_label.setObjectName("tool_status")
        head.addWidget(self.status_label)
        self._lay.addLayout(head)
        self.output_view: QPlainTextEdit | None = None  # E1: a command's output, live (built on the first)
        self.details: QWidget | None = None
        self.args_view: QPlainTextEdit | None = None
        self.result_view: QPlainTextEdit | None = None
        self.set_arguments(arguments)
        self.set_status(status)

    def _build_details(self) -> QWidget:
        details = QWidget(self)
        dl = QVBoxLayout(details)
        dl.setContentsMargins(22, 0, 0, 4)
        dl.setSpacing(2)
        dl.addWidget(plain_label("Arguments", details))
        self.args_view = QPlainTextEdit(details)
        self.args_view.setReadOnly(True)
        self.args_view.setAccessibleName(f"Arguments of {self.name}")  # G14
        self.args_view.setObjectName("tool_arguments")
        self.args_view.setProperty("role", "code")
        dl.addWidget(self.args_view)
        dl.addWidget(plain_label("Result", details))
        self.result_view = QPlainTextEdit(details)
        self.result_view.setReadOnly(True)
        self.result_view.setAccessibleName(f"Result of {self.name}")
        self.result_view.setObjectName("tool_result")
        self.result_view.setProperty("role", "code")
        dl.addWidget(self.result_view)
        self._lay.addWidget(details)
        self.details = details
        chain([self.toggle, self.args_view, self.result_view])  # G14: Tab goes on into the details
        return details

    # -- a command's live output (E1, E6) -------------------------------------------------------------------
    #: Lines the live view keeps: the newest; the whole capped output is the result once the command ends.
    OUTPUT_LINES = 2000

    def _output(self) -> QPlainTextEdit:
        if self.output_view is None:
            view = QPlainTextEdit(self)
            view.setReadOnly(True)
            view.setObjectName("tool_output")
            view.setProperty("role", "code")
            view.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))  # a terminal's columns
            view.setAccessibleName(f"Output of {self.name}")  # G14
            view.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
            view.setMaximumBlockCount(self.OUTPUT_LINES)
            view.setFixedHeight(10 * view.fontMetrics().lineSpacing() + 12)
            self._lay.insertWidget(1, view)  # under the header, above the details
            self.output_view = view
        return self.output_view

    def set_output(self, text: str) -> None:
        """The output so far (a row built or reused after some arrived); nothing shown for none."""
        if not text:
            if self.output_view is not None:
                self.output_view.clear()
                self.output_view.hide()
            return
        view = self._output()
        view.setPlainText(text)
        view.show()
        self._to_bottom(view)

    def append_output(self, text: str) -> None:
        """More of the running command's output: appended, the view scrolled to its end."""
        view = self._output()
        view.show()
        cursor = view.textCursor()
        cursor.movePosition(QTextCursor.MoveOperation.End)
        cursor.insertText(text)
        self._to_bottom(view)

    @staticmethod
    def _to_bottom(view: QPlainTextEdit) -> None:
        bar = view.verticalScrollBar()
        bar.setValue(bar.maximum())

    def set_ending(self, text: str) -> None:
        """How the command ended ("exit 0 · 0.42 s"), beside the status; empty hides it."""
        self.ending_label.setText(text)
        self.ending_label.setVisible(bool(text))

    def reuse(self, call_id: str, name: str, arguments: Any, status: str, result: str, *, edited: bool = False,
              expanded: bool = False, call_ref: dict[str, Any] | None = None, output: str = "",
              ending: str = "") -> None:
        """Show another tool call (G13: a long transcript reuses the rows scrolled out of sight)."""
        self.set_output(output)  # another call's output never shows under this one
        self.set_ending(ending)
        if self.output_view is not None:
            self.output_view.setAccessibleName(f"Output of {name}")
        self.set_expanded(False)
        self.call_ref = call_ref
        self.call_id = call_id
        self.name = name
        self.edited = False
        self.setToolTip("")
        self.status = ""
        self.result = result
        if self.args_view is not None and self.result_view is not None:  # G14: its views name this call
            self.args_view.setAccessibleName(f"Arguments of {name}")
            self.result_view.setAccessibleName(f"Result of {name}")
        self.set_arguments(arguments)
        self.set_status(status)
        if edited:
            self.mark_edited()
        if expanded:
            self.set_expanded(True)

    def set_arguments(self, arguments: Any) -> None:
        self.arguments = arguments
        self.toggle.setText(literal_ampersands(self.name))
        summary = _summary(self.name, arguments)
        self.summary.setText(f"{summary} (edited by you)".lstrip() if self.edited else summary)
        if self.expanded and self.args_view is not None:
            self._fill(self.args_view, _pretty(arguments), 10)

    def mark_edited(self, arguments: Any = None) -> None:
        """P6: show the arguments the call ran with (when given) and that the person edited them."""
        self.edited = True
        self.setToolTip("You edited this call's arguments before it ran; these are the arguments that ran.")
        self.set_arguments(self.arguments if arguments is None else arguments)

    def set_status(self, status: str) -> None:
        if status == self.status:
            return
        self.status = status
        self.status_label.setText(STATUS_LABELS.get(status, status))
        set_status_property(self.status_label, status)
        # G14: a screen reader on the toggle hears the call's target and status, not just the tool
        self.toggle.setAccessibleDescription(
            f"Tool call {self.summary.text() or self.name}: {self.status_label.text()}. Press to show its details")

    def set_result(self, content: str, status: str | None = None) -> None:
        self.result = content
        if status:
            self.set_status(status)
        if self.expanded and self.result_view is not None:
            self._fill(self.result_view, content, 14)

    @staticmethod
    def _fill(view: QPlainTextEdit, text: str, max_lines: int) -> None:
        """Set the text and size the view to it (at most ``max_lines`` lines; it scrolls beyond)."""
        view.setPlainText(text)
        lines = min(max(text.count("\n") + 1, 1), max_lines)
        view.setFixedHeight(lines * view.fontMetrics().lineSpacing() + 26)

    @Slot(bool)
    def set_expanded(self, expanded: bool) -> None:
        if self.toggle.isChecked() != expanded:
            self.toggle.setChecked(expanded)
            return
        self.toggle.setArrowType(Qt.ArrowType.DownArrow if expanded else Qt.ArrowType.RightArrow)
        if expanded:
            details = self.details or self._build_details()
            assert self.args_view is not None and self.result_view is not None
            self._fill(self.args_view, _pretty(self.arguments), 10)
            self._fill(self.result_view, self.result, 14)
            details.show()
        elif self.details is not None:
            self.details.hide()

    @property
    def expanded(self) -> bool:
        return self.details is not None and not self.details.isHidden()

    def contextMenuEvent(self, event: Any) -> None:  # noqa: N802 - Qt override
        if self.call_ref is None:
            super().contextMenuEvent(event)
            return
        menu = QMenu(self)
        menu.setObjectName("tool_call_menu")
        menu.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        menu.addAction("Inspect the prompt of the model call that asked for this…",
                       lambda: self.sig_inspect_requested.emit(dict(self.call_ref or {})))
        menu.popup(event.globalPos())
        event.accept()


class NoticeBlock(QFrame):
    """An error (with what to do next) or a notice (with an optional button)."""

    def __init__(self, kind: str, text: str, advice: str = "", button: str = "",
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.kind = kind
        self.setObjectName(f"notice_{kind}")
        lay = QHBoxLayout(self)
        lay.setContentsMargins(10, 6, 10, 6)
        col = QVBoxLayout()
        self.label = plain_label(text, self)
        self.label.setObjectName("notice_text" if kind == "error" else "notice_label")
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        col.addWidget(self.label)
        self.advice = plain_label(advice, self)
        self.advice.setWordWrap(True)
        self.advice.setVisible(bool(advice))
        col.addWidget(self.advice)
        lay.addLayout(col, 1)
        self.button: QPushButton | None = None
        if button:
            self.button = QPushButton(button, self)
            lay.addWidget(self.button, 0, Qt.AlignmentFlag.AlignVCenter)


__all__ = ["STATUS_LABELS", "AutoHeightBrowser", "MessageBlock", "NoticeBlock", "ToolCallRow"]
