"""The prompt inspector (V2): one model call exactly as it was sent, block by block. Read-only.

``Session.inspect_call(seq)`` rebuilds the call from the prompt log (V1). The dialog lists its blocks —
the agent's instructions, each middleware's section, each message of the compressed view (or the
compression summary in its place), the tool schemas — with their role and token count; the selected
block's whole text is shown beside the list. A row "cacheable prefix ends here" marks where the part a
provider can cache ends (instructions and cacheable sections, before anything that changes per step).
Blocks added or changed since the call before are marked in words ("added", "changed") and tinted; those
removed since are listed under the table. The call's model, status, usage and cost are on top.
**◀ Previous call** / **Next call ▶** walk the thread's calls; Esc or **Close** closes. Nothing here
changes anything, and Enter presses no button.

Opened from the Context panel's list of calls (``open_inspector``) and from a model call in the
transcript (``inspect_message``: the transcript names a message by its stored index, or a live one by
its run and step, and ``call_for`` finds the call that made it).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, Qt
from PySide6.QtGui import QColor, QFont
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QHBoxLayout,
    QHeaderView,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from workbench.errors import WorkbenchError
from workbench.ui.buttons import quiet_button
from workbench.ui import qt_async
from workbench.ui.plain_text import escape as _html, plain_label, plain_tooltip, rich_label
from workbench.ui.style import safe_is_dark
from workbench.ui.table_model import RowsTableModel

if TYPE_CHECKING:
    from workbench.session import Session

log = logging.getLogger(__name__)

Index = QModelIndex | QPersistentModelIndex

MARKER = "── cacheable prefix ends here ──"
"""The row between the cacheable prefix and the rest."""

CHANGE_TINTS = {"light": {"added": "#dafbe1", "changed": "#fff8c5"},
                "dark": {"added": "#1b4721", "changed": "#4b3d0b"}}


def call_for(calls: Sequence[Mapping[str, Any]], ref: Mapping[str, Any]) -> int | None:
    """The ``seq`` of the model call that made a transcript message: ``{"message": i}`` (stored message
    #i is the answer of the call made with ``stored == i`` messages) or ``{"run": id, "step": n}`` (a
    live one). The newest such call that finished, else the newest at all (a cut one); None if none."""
    calls = [c for c in calls if c.get("kind", "step") == "step"]  # a compression's summary made no message
    if "message" in ref:
        found = [c for c in calls if c.get("stored") == ref["message"]]
    elif "run" in ref:
        found = [c for c in calls if c.get("run") == ref["run"] and c.get("step") == ref.get("step")]
    else:
        found = []
    ok = [c for c in found if c.get("status") == "ok"]
    pick = (ok or found)[-1] if (ok or found) else None
    return int(pick["seq"]) if pick is not None else None


def cost_words(usage: Any) -> str:
    """``2,100 in (1,000 cached) · 4 out · $0.0012`` (``not priced`` when litellm has no price)."""
    cached = f" ({usage.cached_tokens:,} cached)" if usage.cached_tokens else ""
    out = usage.output_tokens + usage.thoughts_tokens
    reasoning = f" (of which {usage.thoughts_tokens:,} reasoning)" if usage.thoughts_tokens else ""
    if usage.cost_usd is None:
        cost = "cost not priced (litellm has no price for this model: tokens only)"
    else:
        cost = f"cost ${usage.cost_usd:,.4f}"
    return f"{usage.input_tokens:,} tokens in{cached} · {out:,} out{reasoning} · {cost}"


class BlocksModel(RowsTableModel):
    """A call's blocks, with the marker row where the cacheable prefix ends."""

    COLUMNS = ("#", "Source", "Role", "Tokens", "Change")
    NUM, SOURCE, ROLE, TOKENS, CHANGE = range(5)

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self._rows: list[tuple[int, Any]] = []  # (block index, Block), or (-1, None): the marker
        self.changes: dict[str, str] = {}
        self.prefix_end = 0

    def set_call(self, blocks: Sequence[Any], prefix_end: int, changes: Mapping[str, str]) -> None:
        self.beginResetModel()
        rows: list[tuple[int, Any]] = []
        for i, b in enumerate(blocks):
            if i == prefix_end and prefix_end > 0:
                rows.append((-1, None))
            rows.append((i, b))
        if prefix_end >= len(blocks) and prefix_end > 0:
            rows.append((-1, None))
        self._rows = rows
        self.changes = dict(changes)
        self.prefix_end = prefix_end
        self.endResetModel()

    @property
    def rows(self) -> list[tuple[int, Any]]:
        return list(self._rows)

    def marker_row(self) -> int:
        return next((r for r, (i, _) in enumerate(self._rows) if i < 0), -1)

    def row_of_block(self, index: int) -> int:
        return next((r for r, (i, _) in enumerate(self._rows) if i == index), -1)

    def block_at(self, row: int) -> tuple[int, Any] | None:
        if 0 <= row < len(self._rows) and self._rows[row][0] >= 0:
            return self._rows[row]
        return None

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        row = self.row_at(index)
        if row is None:
            return None
        i, block = row
        col = index.column()
        if block is None:  # the marker
            if role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.AccessibleTextRole) and col == 0:
                return MARKER
            if role == Qt.ItemDataRole.ToolTipRole:
                return ("The blocks above are the cacheable prefix: the agent's instructions and the sections "
                        "that rarely change. A provider that caches prompts can reuse them from the call before.")
            if role == Qt.ItemDataRole.FontRole:
                font = QFont()
                font.setItalic(True)
                return font
            return None
        change = self.changes.get(block.label, "")
        if role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.AccessibleTextRole):
            if col == self.NUM:
                return str(i + 1)
            if col == self.SOURCE:  # the marker row shows the prefix; a screen reader hears it per block
                prefix = i < self.prefix_end and role == Qt.ItemDataRole.AccessibleTextRole
                return block.label + (", in the cacheable prefix" if prefix else "")
            if col == self.ROLE:
                return block.role
            if col == self.TOKENS:
                return f"{block.tokens:,}"
            if col == self.CHANGE:
                return change
        if role == Qt.ItemDataRole.ToolTipRole:
            where = "in the cacheable prefix" if i < self.prefix_end else "after the cacheable prefix"
            what = {"added": "; new since the previous call", "changed": "; its text changed since the previous call"}
            return plain_tooltip(f"{block.label}: {block.role}, {block.tokens:,} tokens, {where}{what.get(change, '')}")
        if role == Qt.ItemDataRole.BackgroundRole and change:
            return QColor(CHANGE_TINTS["dark" if safe_is_dark() else "light"][change])
        if role == Qt.ItemDataRole.TextAlignmentRole and col in (self.NUM, self.TOKENS):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.FontRole and change and col == self.CHANGE:
            font = QFont()
            font.setBold(True)
            return font
        return None

    def flags(self, index: Index) -> Qt.ItemFlag:
        row = self.row_at(index)
        if row is None:
            return Qt.ItemFlag.NoItemFlags
        if row[1] is None:
            return Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemNeverHasChildren  # the marker: not selectable
        return Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable | Qt.ItemFlag.ItemNeverHasChildren


class PromptInspector(QDialog):
    """One model call's prompt (see the module). ``load(seq)`` is ``Session.inspect_call`` for the
    thread; ``seqs`` the thread's calls, oldest first (for Previous / Next)."""

    def __init__(self, call: Mapping[str, Any], load: Callable[[int], Mapping[str, Any]],
                 seqs: Sequence[int] = (), calls: Sequence[Mapping[str, Any]] = (),
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("promptInspector")
        self._load = load
        self.seqs = list(seqs)
        self._calls = {int(c["seq"]): dict(c) for c in calls if "seq" in c}
        self.call: dict[str, Any] = {}

        self.header = rich_label(self)  # our bold; the model, step and status escaped
        self.header.setObjectName("promptHeader")
        self.header.setWordWrap(True)
        self.header.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.usage_label = plain_label(self)
        self.usage_label.setObjectName("promptUsage")
        self.usage_label.setWordWrap(True)
        self.usage_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.diff_label = plain_label(self)
        self.diff_label.setObjectName("promptDiff")
        self.diff_label.setWordWrap(True)
        self.diff_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

        split = QSplitter(Qt.Orientation.Horizontal, self)
        split.setChildrenCollapsible(False)
        self.blocks = BlocksModel(self)
        self.table = QTableView(split)
        self.table.setObjectName("promptBlocks")
        self.table.setAccessibleName("Blocks of the prompt")
        self.table.setAccessibleDescription("Each block with its source, role, tokens and its change since the "
                                            "previous call; a row marks where the cacheable prefix ends")
        self.table.setModel(self.blocks)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setWordWrap(False)
        self.table.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        self.table.verticalHeader().hide()
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(BlocksModel.SOURCE, QHeaderView.ResizeMode.Stretch)
        self.table.selectionModel().currentRowChanged.connect(lambda *_: self._show_selected())
        split.addWidget(self.table)

        side = QWidget(split)
        sl = QVBoxLayout(side)
        sl.setContentsMargins(0, 0, 0, 0)
        self.block_title = plain_label(side)
        self.block_title.setObjectName("promptBlockTitle")
        self.block_title.setWordWrap(True)
        self.block_title.setStyleSheet("font-weight: 600;")
        self.block_title.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        sl.addWidget(self.block_title)
        self.text = QPlainTextEdit(side)
        self.text.setObjectName("promptBlockText")
        self.text.setAccessibleName("Text of the selected block, as sent")
        self.text.setReadOnly(True)
        self.text.setProperty("role", "code")
        self.text.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        sl.addWidget(self.text, 1)
        split.addWidget(side)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        split.setSizes([600, 360])

        buttons = QHBoxLayout()
        self.previous_button = self._button("◀ Previous call", "promptPrevious", lambda: self._step(-1),
                                            "The call before this one in the thread")
        self.next_button = self._button("Next call ▶", "promptNext", lambda: self._step(1),
                                        "The call after this one in the thread")
        self.close_button = self._button("Close", "promptClose", self.reject, "Close the inspector (Esc)")
        buttons.addWidget(self.previous_button)
        buttons.addWidget(self.next_button)
        buttons.addStretch(1)
        buttons.addWidget(self.close_button)

        lay = QVBoxLayout(self)
        lay.addWidget(self.header)
        lay.addWidget(self.usage_label)
        lay.addWidget(self.diff_label)
        lay.addWidget(split, 1)
        lay.addLayout(buttons)
        for a, b in zip([self.table, self.text, self.previous_button, self.next_button],
                        [self.text, self.previous_button, self.next_button, self.close_button]):
            QWidget.setTabOrder(a, b)  # G14: Tab follows the layout
        self.resize(980, 620)
        self.show_call(call)

    def _button(self, text: str, name: str, slot: Callable[[], Any], tip: str) -> QPushButton:
        return quiet_button(self, text, name, slot, tip)  # read-only: Enter presses nothing

    # -- content ----------------------------------------------------------------------------------------------
    def show_call(self, call: Mapping[str, Any]) -> None:
        """Show one ``inspect_call`` result."""
        self.call = dict(call)
        seq = int(call["seq"])
        blocks = list(call.get("blocks") or ())
        diff = call.get("diff") or {}
        previous = call.get("previous")
        changes = {label: "added" for label in diff.get("added") or ()} if previous is not None else {}
        changes.update({label: "changed" for label in diff.get("changed") or ()})
        self.blocks.set_call(blocks, int(call.get("cache_prefix_end") or 0), changes)
        meta = self._calls.get(seq, {})
        when = meta.get("time")
        stamp = time.strftime(" at %H:%M:%S", time.localtime(float(when))) if isinstance(when, (int, float)) else ""
        step = f", step {meta['step']} of run {meta['run']}" if meta.get("step") is not None else ""
        status = "" if call.get("status") == "ok" else " — cut part-way (stopped, or the connection dropped)"
        total = sum(b.tokens for b in blocks)
        self.setWindowTitle(f"Prompt of model call #{seq}")
        self.header.setText(f"<b>Model call #{seq}</b> · {_html(str(call.get('model') or ''))}{_html(step)}{stamp}"
                            f"{_html(status)} — {len(blocks)} blocks, ≈{total:,} tokens as counted here")
        usage = call.get("usage")
        self.usage_label.setText("Usage: " + cost_words(usage) if usage is not None else "Usage: not recorded")
        if previous is None:
            self.diff_label.setText("The thread's first call: nothing to compare with.")
        else:
            added, removed, changed = (list(diff.get(k) or ()) for k in ("added", "removed", "changed"))
            parts = [f"{len(added)} added", f"{len(changed)} changed", f"{len(removed)} removed"]
            text = f"Since call #{previous}: " + ", ".join(parts) + " (marked in the table)."
            if removed:
                text += " Removed: " + "; ".join(removed[:12]) + (" …" if len(removed) > 12 else "") + "."
            self.diff_label.setText(text)
        self.table.resizeColumnsToContents()
        self.table.horizontalHeader().setSectionResizeMode(BlocksModel.SOURCE, QHeaderView.ResizeMode.Stretch)
        marker = self.blocks.marker_row()
        if marker >= 0:
            self.table.setSpan(marker, 0, 1, len(BlocksModel.COLUMNS))
        first = next((r for r in range(self.blocks.rowCount()) if self.blocks.block_at(r) is not None), -1)
        if first >= 0:
            self.table.setCurrentIndex(self.blocks.index(first, BlocksModel.SOURCE))
            self.table.selectRow(first)
        self._show_selected()
        position = self.seqs.index(seq) if seq in self.seqs else -1
        self.previous_button.setEnabled(position > 0)
        self.next_button.setEnabled(0 <= position < len(self.seqs) - 1)

    def select_block(self, index: int) -> None:
        row = self.blocks.row_of_block(index)
        if row >= 0:
            self.table.setCurrentIndex(self.blocks.index(row, BlocksModel.SOURCE))
            self.table.selectRow(row)

    def selected_block(self) -> tuple[int, Any] | None:
        index = self.table.currentIndex()
        return self.blocks.block_at(index.row()) if index.isValid() else None

    def _show_selected(self) -> None:
        picked = self.selected_block()
        if picked is None:
            self.block_title.setText("")
            self.text.setPlainText("")
            return
        i, b = picked
        change = self.blocks.changes.get(b.label, "")
        where = "cacheable prefix" if i < self.blocks.prefix_end else "after the cacheable prefix"
        extra = f" · {change} since call #{self.call.get('previous')}" if change else ""
        self.block_title.setText(f"{i + 1}. {b.label} · {b.role} · {b.tokens:,} tokens · {where}{extra}")
        self.text.setPlainText(b.text)

    def _step(self, delta: int) -> None:
        seq = int(self.call.get("seq") or 0)
        if seq not in self.seqs:
            return
        position = self.seqs.index(seq) + delta
        if 0 <= position < len(self.seqs):
            try:
                self.show_call(self._load(self.seqs[position]))
            except WorkbenchError as e:
                self.diff_label.setText(f"Could not read call #{self.seqs[position]}: {e}")


# -- opening it ------------------------------------------------------------------------------------------------
def open_inspector(parent: QWidget | None, session: Session, seq: int,
                   thread_id: str | None = None) -> PromptInspector | None:
    """Open the inspector (modeless: the window stays usable) on call ``seq`` of the session's thread;
    the dialog, or None when the call cannot be read (said in the window's error bar)."""
    try:
        calls = session.prompt_calls(thread_id)
        call = session.inspect_call(seq, thread_id)
    except WorkbenchError as e:
        qt_async.report_error(e, "the prompt inspector")
        return None
    dialog = PromptInspector(call, lambda s: session.inspect_call(s, thread_id), [int(c["seq"]) for c in calls],
                             calls, parent)
    qt_async.start(_show(dialog), name="prompt-inspector")
    return dialog


async def _show(dialog: QDialog) -> None:
    try:
        await qt_async.ask_dialog(dialog, modal=False)
    finally:
        qt_async.release_dialog(dialog)


def inspect_message(window: Any, ref: Mapping[str, Any]) -> PromptInspector | None:
    """"Inspect prompt" on a transcript message: the call that made it (``call_for``), else say why not."""
    session = getattr(window, "session", None)
    if session is None:
        return None
    calls = session.prompt_calls()
    seq = call_for(calls, ref)
    if seq is None:
        status = getattr(window, "status", None)
        if status is not None:
            status.showMessage("No stored prompt for this message (it came before prompts were recorded, or its "
                               "call was not made by this thread's agent).", 8000)
        return None
    return open_inspector(window, session, seq)


__all__ = ["BlocksModel", "MARKER", "PromptInspector", "call_for", "cost_words", "inspect_message",
           "open_inspector"]
