"""The Context dock (C6, C7, C9, V2): how big the next request is, what compression did, and Compact now.

From top to bottom:

- the **first-time warning** (``context_warning``, once per thread before its first automatic
  compaction): a framed notice with **Compact now** and **Dismiss**, shown until dismissed (kept per
  thread while the window is open); when it arrives the panel asks to be brought to the front
  (``sig_attention_requested``);
- **Next request**: a meter of the request's size against the compaction trigger, in words as well as
  colour ("12,345 of 85,000 tokens (15%) — nearing the trigger", G14), the model's context window, and
  the size by source: the system prompt (the agent's instructions and each middleware's section, as the
  newest call sent them), messages, tool results, tool schemas. Live from ``context_measured`` after
  each model call; between runs (a thread opened, a compaction) from ``Session.context_figures``;
- **Last compression**: tokens before → after, what each strategy did, any note (a failed summary),
  and **what was lost** — each operation on stored messages: which tool result was cut to how many
  characters or replaced as an older duplicate, which range of messages was summarised or dropped,
  with its original size;
- **Compact now** (``Session.compact``, started as a task: the window never waits on it; during a run
  it applies at the next model step);
- **Model calls**, newest first; **Inspect prompt…** (or Enter / double-click on a row) opens the prompt
  inspector (``prompt_inspector``) on the call.

It follows the bridge's ``sig_context_measured`` / ``sig_context_warned`` / ``sig_compression_applied``
and ``sig_run_finished`` signals and reads the session when a thread is attached; it never polls.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, Qt, QTimer, Signal, Slot
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFrame,
    QGridLayout,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QListView,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QSplitter,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from workbench.errors import WorkbenchError
from workbench.ui.buttons import quiet_button
from workbench.ui import qt_async
from workbench.ui.panel_tasks import PanelTasks
from workbench.ui.context_figures import (
    LEVEL_COLORS,
    SOURCES,
    TRIGGER_HELP,
    CallsModel,
    LostModel,
    compression_headline,
    level_for,
    meter_text,
    section_name,
    strategy_lines,
    window_text,
)
from workbench.ui.plain_text import plain_label

if TYPE_CHECKING:
    from workbench.session import Session

log = logging.getLogger(__name__)

Index = QModelIndex | QPersistentModelIndex

class ContextPanel(QWidget):
    """The Context dock (see the module)."""

    sig_attention_requested = Signal()
    """The first-time warning arrived: bring the panel to the front."""

    def __init__(self, parent: QWidget | None = None, *, bridge: Any = None,
                 start: Callable[..., Any] = qt_async.start,
                 open_inspector: Callable[..., Any] | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("contextPanel")
        self._session: Session | None = None
        self.tasks = PanelTasks(start, self._show_failure)
        self._open_inspector = open_inspector
        self._figures: dict[str, Any] = {}
        self._measured = False
        self._sections: list[dict[str, Any]] = []
        self._last: dict[str, Any] | None = None
        self._warnings: dict[str, dict[str, Any]] = {}  # thread -> its first-time warning (until dismissed)
        self._dismissed: set[str] = set()
        self.compacting = False
        self._soon = QTimer(self)  # reads a newly attached thread once the window has shown it
        self._soon.setSingleShot(True)
        self._soon.setInterval(0)
        self._soon.timeout.connect(self.reload)
        self._reads = 0  # bumped by each reload: only the newest read's figures are applied
        self._reading = False

        outer = QVBoxLayout(self)
        outer.setContentsMargins(6, 6, 6, 6)
        outer.setSpacing(6)

        # the first-time warning, prominent until dismissed
        self.warning_box = QFrame(self)
        self.warning_box.setObjectName("contextWarning")
        self.warning_box.setFrameShape(QFrame.Shape.StyledPanel)
        self.warning_box.setStyleSheet(
            "QFrame#contextWarning { background: #fff8c5; border: 2px solid #d4a72c; border-radius: 6px; }"
            " QFrame#contextWarning QLabel { color: #3b2e00; }")
        wl = QVBoxLayout(self.warning_box)
        wl.setContentsMargins(8, 6, 8, 6)
        self.warning_title = plain_label("⚠ Warning: this thread's context is nearly full", self.warning_box)
        self.warning_title.setObjectName("contextWarningTitle")
        self.warning_title.setStyleSheet("font-weight: 700;")
        self.warning_title.setWordWrap(True)
        self.warning_text = plain_label(self.warning_box)
        self.warning_text.setObjectName("contextWarningText")
        self.warning_text.setWordWrap(True)
        self.warning_text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        wl.addWidget(self.warning_title)
        wl.addWidget(self.warning_text)
        wrow = QHBoxLayout()
        self.warning_compact = self._button("Compact now", "contextWarningCompact", self._compact_from_warning,
                                            "Compress this thread's history now (nothing is deleted from the thread)")
        self.warning_dismiss = self._button("Dismiss", "contextWarningDismiss", self.dismiss_warning,
                                            "Hide this warning; compaction still happens at the trigger")
        wrow.addWidget(self.warning_compact)
        wrow.addStretch(1)
        wrow.addWidget(self.warning_dismiss)
        wl.addLayout(wrow)
        self.warning_box.hide()
        outer.addWidget(self.warning_box)

        split = QSplitter(Qt.Orientation.Vertical, self)
        split.setChildrenCollapsible(False)
        outer.addWidget(split, 1)

        # figures and the last compression, scrollable
        scroll = QScrollArea(split)
        scroll.setObjectName("contextScroll")
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        body = QWidget(scroll)
        body.setObjectName("contextBody")
        lay = QVBoxLayout(body)
        lay.setContentsMargins(0, 0, 4, 0)
        lay.setSpacing(4)

        head = plain_label("Next request", body)
        head.setStyleSheet("font-weight: 600;")
        lay.addWidget(head)
        self.meter = QProgressBar(body)
        self.meter.setObjectName("contextMeter")
        self.meter.setRange(0, 1000)
        self.meter.setTextVisible(True)
        self.meter.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        lay.addWidget(self.meter)
        self.window_label = plain_label(body)
        self.window_label.setObjectName("contextWindow")
        self.window_label.setWordWrap(True)
        self.window_label.setToolTip(TRIGGER_HELP)
        lay.addWidget(self.window_label)
        self.basis_label = plain_label(body)
        self.basis_label.setObjectName("contextBasis")
        self.basis_label.setWordWrap(True)
        self.basis_label.setProperty("role", "muted")
        lay.addWidget(self.basis_label)
        row = QHBoxLayout()
        self.compact_button = self._button("Compact now", "contextCompact", self.compact_now,
                                           "Compress this thread's history now: older tool results shortened, older "
                                           "messages summarised. Nothing is deleted from the thread.")
        row.addWidget(self.compact_button)
        self.compact_status = plain_label(body)
        self.compact_status.setObjectName("contextCompactStatus")
        self.compact_status.setWordWrap(True)
        row.addWidget(self.compact_status, 1)
        lay.addLayout(row)

        self.sources_box = QGroupBox("By source (estimates)", body)
        self.sources_grid = QGridLayout(self.sources_box)
        self.sources_grid.setContentsMargins(6, 4, 6, 4)
        self.sources_grid.setHorizontalSpacing(10)
        self.sources_grid.setVerticalSpacing(1)
        self.sources_grid.setColumnStretch(0, 1)
        self._source_labels: list[QLabel] = []
        self._source_shape: list[bool] = []
        self.source_rows: list[tuple[str, str]] = []
        """What "By source" shows: (source, tokens) rows, sections indented under the system prompt."""
        lay.addWidget(self.sources_box)

        self.compression_box = QGroupBox("Last compression", body)
        cl = QVBoxLayout(self.compression_box)
        cl.setContentsMargins(6, 4, 6, 4)
        self.compression_label = plain_label(self.compression_box)
        self.compression_label.setObjectName("contextLastCompression")
        self.compression_label.setWordWrap(True)
        self.compression_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        cl.addWidget(self.compression_label)
        self.strategies_label = plain_label(self.compression_box)
        self.strategies_label.setObjectName("contextStrategies")
        self.strategies_label.setWordWrap(True)
        self.strategies_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        cl.addWidget(self.strategies_label)
        self.lost_title = plain_label("What was lost (the model no longer sees these in full):", self.compression_box)
        self.lost_title.setWordWrap(True)
        cl.addWidget(self.lost_title)
        self.lost = LostModel(self)
        self.lost_view = QListView(self.compression_box)
        self.lost_view.setObjectName("contextLost")
        self.lost_view.setAccessibleName("What the last compression cut or replaced")
        self.lost_view.setModel(self.lost)
        self.lost_view.setWordWrap(True)
        self.lost_view.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.lost_view.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.lost_view.setAlternatingRowColors(True)
        self.lost_view.setResizeMode(QListView.ResizeMode.Adjust)
        cl.addWidget(self.lost_view)
        self.kept_note = plain_label("The thread keeps every message: only what the model is sent is smaller.",
                                     self.compression_box)
        self.kept_note.setWordWrap(True)
        self.kept_note.setProperty("role", "muted")
        cl.addWidget(self.kept_note)
        lay.addWidget(self.compression_box)

        lay.addStretch(1)
        scroll.setWidget(body)
        split.addWidget(scroll)

        # the thread's model calls, newest first
        calls = QWidget(split)
        ml = QVBoxLayout(calls)
        ml.setContentsMargins(0, 0, 0, 0)
        ml.setSpacing(2)
        ml.addWidget(plain_label("Model calls of this thread (newest first):", calls))
        self.calls = CallsModel(self)
        self.calls_view = QTableView(calls)
        self.calls_view.setObjectName("contextCalls")
        self.calls_view.setAccessibleName("Model calls of this thread")
        self.calls_view.setAccessibleDescription("Newest first; Enter opens the prompt inspector on the call")
        self.calls_view.setModel(self.calls)
        self.calls_view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.calls_view.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.calls_view.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.calls_view.setAlternatingRowColors(True)
        self.calls_view.verticalHeader().hide()
        header = self.calls_view.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        self.calls_view.activated.connect(lambda *_: self.inspect_selected())
        self.calls_view.selectionModel().currentRowChanged.connect(lambda *_: self._update_buttons())
        ml.addWidget(self.calls_view, 1)
        crow = QHBoxLayout()
        crow.addStretch(1)
        self.inspect_button = self._button("Inspect prompt…", "contextInspect", self.inspect_selected,
                                           "Open the selected call's prompt: its blocks, the cacheable prefix, what "
                                           "changed since the call before, its usage and cost")
        crow.addWidget(self.inspect_button)
        ml.addLayout(crow)
        split.addWidget(calls)
        split.setStretchFactor(0, 4)
        split.setStretchFactor(1, 1)
        split.setSizes([480, 150])

        if bridge is not None:
            bridge.sig_context_measured.connect(self.on_context_measured)
            bridge.sig_context_warned.connect(self.on_context_warned)
            bridge.sig_compression_applied.connect(self.on_compression_applied)
            bridge.sig_run_finished.connect(self.on_run_finished)
        self._render()

    def _button(self, text: str, name: str, slot: Callable[[], Any], tip: str) -> QPushButton:
        return quiet_button(self, text, name, slot, tip)  # G7: Enter presses nothing here

    # -- the panel contract -----------------------------------------------------------------------------------
    def set_session(self, session: Session | None) -> None:
        """A thread was attached (opened, switched, reloaded): the old thread's figures go now; the new
        one's are read on the next turn of the loop (``reload``), after the transcript has shown it — a
        long thread's view is estimated from all its messages (G13: the thread opens first)."""
        self._session = session
        self._figures, self._measured, self._sections, self._last = {}, False, [], None
        self.compact_status.setText("")
        self.calls.set_rows([])
        self._render()
        if session is not None:
            self._soon.start()

    def reload(self) -> None:
        """Read the attached thread's figures, compressions and calls from the session — on a worker
        thread: sizing a 10,000-message history takes most of a second, and the window must answer
        meanwhile (G13). The figures are applied here when they arrive, if the thread is still attached."""
        self._soon.stop()
        session = self._session
        if session is None:
            return
        self._reads += 1
        self._reading = True
        self.tasks.run(self._read(session, self._reads))

    async def _read(self, session: Session, ticket: int) -> None:
        def read() -> tuple[dict[str, Any], Any, Any]:
            return dict(session.context_figures()), session.prompt_sections(), session.prompt_calls()

        try:
            try:
                figures, sections, calls = await asyncio.to_thread(read)
            except Exception as e:  # noqa: BLE001 - a store closing under a workspace switch
                log.debug("context panel: thread not read: %s", e)
                return
            if session is not self._session or ticket != self._reads:
                return  # another thread was attached (or read again) meanwhile: that read wins
            if not self._measured:  # a model call measured since: its figures are newer
                self._figures = figures
            self._last = figures.get("last")
            self._sections = sections
            self.calls.set_rows(calls)
            self._render()
        finally:
            if ticket == self._reads:
                self._reading = False

    @property
    def loading(self) -> bool:
        """The attached thread is still to be read (``reload`` is due or its read is in flight)."""
        return self._soon.isActive() or self._reading

    def handle_event(self, event: Any) -> None:
        """Context events come through the bridge's signals (``sig_context_*``); nothing per event here."""

    @property
    def thread_id(self) -> str | None:
        try:
            return self._session.thread_id if self._session is not None else None
        except Exception:  # noqa: BLE001 - a closed session
            return None

    # -- live ---------------------------------------------------------------------------------------------------
    @Slot(dict)
    def on_context_measured(self, data: dict[str, Any]) -> None:
        """After each model call: the request it sent, by source, against the trigger and the window."""
        self._figures = dict(data)  # the request as sent (the stored count is read between runs only)
        self._measured = True
        self._render_figures()

    @Slot(dict)
    def on_context_warned(self, data: dict[str, Any]) -> None:
        """The first-time warning: shown until dismissed, and the panel asks to be in front."""
        tid = self.thread_id
        if tid is None:
            return
        self._warnings[tid] = dict(data)
        self._dismissed.discard(tid)
        self._render_warning()
        self.sig_attention_requested.emit()

    @Slot(dict)
    def on_compression_applied(self, data: dict[str, Any]) -> None:
        """A compression was stored: its stats and losses; between runs, the smaller figures now — read
        on a worker thread like ``reload`` (sizing a 10,000-message thread takes most of a second)."""
        session = self._session
        if session is None:
            self._last = dict(data)
            self._render()
            return
        self.tasks.run(self._read_compression(session, dict(data)))

    async def _read_compression(self, session: Session, data: dict[str, Any]) -> None:
        running = session.running

        def read() -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
            figures = None if running else dict(session.context_figures())
            return list(session.compression_records()), figures

        try:
            records, figures = await asyncio.to_thread(read)
        except Exception as e:  # noqa: BLE001 - the store is gone (window closing)
            log.debug("context panel: compression not read: %s", e)
            records, figures = [], None
        if session is not self._session:
            return  # another thread was attached meanwhile
        record = records[-1] if records else data
        if figures is not None:
            self._figures, self._measured = figures, False
        self._last = record
        if record.get("trigger") == "manual":  # what Compact now did (an automatic one: the headline says)
            before, after = int(record.get("tokens_before") or 0), int(record.get("tokens_after") or 0)
            self.compact_status.setText(f"Compacted: {before:,} → {after:,} tokens.")
        self._render()

    @Slot(dict)
    def on_run_finished(self, data: dict[str, Any]) -> None:
        """A run ended (or waits): its calls are in the prompt log now."""
        session = self._session
        if session is None:
            return
        try:
            keep = self.selected_call()
            self.calls.set_rows(session.prompt_calls())
            self._sections = session.prompt_sections()
            if keep is not None:
                self.select_call(keep)
        except Exception as e:  # noqa: BLE001 - the store is gone (window closing)
            log.debug("context panel: calls not read: %s", e)
        self._render_figures()
        self._update_buttons()

    # -- actions ------------------------------------------------------------------------------------------------
    def _compact_from_warning(self) -> Any:
        return self.compact_now(dismiss=True)

    def compact_now(self, *, dismiss: bool = False) -> Any:
        """Compact now (C7): started as a task; the result and the event update the panel. ``dismiss``:
        the warning's own button — once compacted, the warning has been acted on and goes."""
        session = self._session
        if session is None or self.compacting:
            return None
        self.compacting = True  # one at a time: the buttons are off until it ends
        running = session.running
        self.compact_status.setText("Compaction asked for: it happens before the next model call…" if running
                                    else "Compacting… (summarising older messages may take a moment)")
        self._update_buttons()
        task = self.tasks.run(self._compact(session, running, dismiss))
        if task is None:
            self.compacting = False
            self._update_buttons()
        return task

    async def _compact(self, session: Session, running: bool, dismiss: bool) -> None:
        thread = session.thread_id
        try:
            record = await session.compact()
        except WorkbenchError as e:
            self.compact_status.setText(f"Could not compact: {e}")
            return
        finally:
            self.compacting = False
            self._update_buttons()
        if session is not self._session or self.thread_id != thread:
            return  # another thread is shown now: it reads its own figures
        if running:
            return  # the compression_applied event says when it happened
        if record is None:
            self.compact_status.setText("Nothing to compact: the history is already as small as it can be "
                                        "(the newest messages are always kept whole).")
        else:
            if self._last is None or self._last.get("id") != record.get("id"):
                self.on_compression_applied(record)
            if dismiss:
                self.dismiss_warning()

    def dismiss_warning(self) -> None:
        tid = self.thread_id
        if tid is not None and tid in self._warnings:
            self._dismissed.add(tid)
        self._render_warning()

    def selected_call(self) -> int | None:
        index = self.calls_view.currentIndex()
        row = self.calls.row_at(index) if index.isValid() else None
        return int(row["seq"]) if row is not None else None

    def select_call(self, seq: int) -> None:
        for i, row in enumerate(self.calls.rows):
            if row.get("seq") == seq:
                self.calls_view.setCurrentIndex(self.calls.index(i, 0))
                self.calls_view.selectRow(i)
                return

    def inspect_selected(self) -> Any:
        """Open the prompt inspector on the selected call (the newest when none is selected)."""
        session = self._session
        seq = self.selected_call()
        if seq is None and self.calls.rows:
            seq = int(self.calls.rows[0]["seq"])
        if session is None or seq is None:
            return None
        opener = self._open_inspector
        if opener is None:
            from workbench.ui.prompt_inspector import open_inspector as opener
        return opener(self.window(), session, seq)

    def _show_failure(self, exc: BaseException) -> None:
        self.compact_status.setText(f"Compaction failed: {type(exc).__name__}: {exc}")
        qt_async.report_error(exc, "Compact now failed")

    # -- rendering ------------------------------------------------------------------------------------------------
    def _render(self) -> None:
        self._render_warning()
        self._render_figures()
        self._render_compression()
        self._update_buttons()

    def _render_warning(self) -> None:
        tid = self.thread_id
        data = self._warnings.get(tid or "")
        shown = data is not None and tid not in self._dismissed
        if shown and data is not None:
            self.warning_text.setText(str(data.get("text") or ""))
            self.warning_box.setAccessibleName(f"{self.warning_title.text()}. {self.warning_text.text()}")
        self.warning_box.setVisible(shown)

    def _render_figures(self) -> None:
        f = self._figures
        if self._session is None or not f:
            self.meter.setValue(0)
            self.meter.setFormat("No thread open")
            self.meter.setAccessibleName("Next request: no thread open")
            self.window_label.setText("")
            self.basis_label.setText("")
            self._set_sources([])
            return
        trigger = int(f.get("trigger") or 0) or None
        parts = f.get("parts") if isinstance(f.get("parts"), Mapping) else {}
        tokens = int(f.get("tokens") or 0)
        if not self._measured and parts:
            tokens = sum(int(v or 0) for v in parts.values())  # between runs: the view plus the fixed parts
        level = level_for(tokens, trigger)
        share = tokens / trigger if trigger else 0.0
        self.meter.setValue(int(min(max(share, 0.0), 1.0) * 1000))
        self.meter.setFormat(meter_text(tokens, trigger))
        self.meter.setAccessibleName(f"Next request: {self.meter.format()}")
        self.meter.setProperty("level", level)
        self.meter.setStyleSheet(
            "QProgressBar { border: 1px solid palette(mid); border-radius: 3px; text-align: center;"
            " min-height: 18px; }"
            f" QProgressBar::chunk {{ background-color: {LEVEL_COLORS[level]}; border-radius: 2px; }}")
        self.window_label.setText(window_text(tokens, f.get("window"), trigger))
        n, stored = f.get("messages"), f.get("stored_messages")
        count = f"{n:,} messages in the model's view" if isinstance(n, int) else ""
        if isinstance(n, int) and isinstance(stored, int) and stored != n:
            count += f" of {stored:,} stored"
        basis = "Measured at the last model call" if self._measured else "Estimated from the stored thread"
        self.basis_label.setText(f"{basis} · {count}" if count else basis)
        self.basis_label.setToolTip(
            "The provider's count of the last request's input, plus an estimate of what was added since"
            if self._measured else "No model call since the thread was opened or compacted: an estimate of "
            "the messages the model would be sent, plus the system prompt and tool schemas of the last call")
        rows: list[tuple[str, int, bool]] = []
        for key, name in SOURCES:
            value = int(parts.get(key) or 0) if parts else 0
            rows.append((name, value, False))
            if key == "system_prompt":
                for s in self._sections:
                    rows.append((section_name(str(s.get("label", ""))), int(s.get("tokens") or 0), True))
        self._set_sources(rows if parts else [])

    def _set_sources(self, rows: list[tuple[str, int, bool]]) -> None:
        if not rows:
            rows_shown: list[tuple[str, str, bool]] = [("Nothing measured yet: send a message.", "", False)]
        else:
            total = sum(v for _, v, sub in rows if not sub) or 1
            rows_shown = [(name, f"≈{v:,}" if sub else f"≈{v:,} ({100 * v / total:.0f}%)", sub)
                          for name, v, sub in rows]
        self.source_rows = [(name, value) for name, value, _ in rows_shown]
        shape = [sub for _, _, sub in rows_shown]
        if shape != self._source_shape:  # rebuilt only when the rows change (a step only changes numbers)
            for w in self._source_labels:
                self.sources_grid.removeWidget(w)
                w.deleteLater()
            self._source_labels = []
            for r, sub in enumerate(shape):
                left, right = plain_label(self.sources_box), plain_label(self.sources_box)
                left.setWordWrap(True)
                right.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                if sub:
                    left.setIndent(14)  # under the system prompt, also when the name wraps
                    left.setProperty("role", "muted")
                    right.setProperty("role", "muted")
                self.sources_grid.addWidget(left, r, 0)
                self.sources_grid.addWidget(right, r, 1)
                self._source_labels += [left, right]
            self._source_shape = shape
        for r, (name, value, _) in enumerate(rows_shown):
            self._source_labels[2 * r].setText(name)
            self._source_labels[2 * r + 1].setText(value)

    def _render_compression(self) -> None:
        rec = self._last
        if not rec:
            self.compression_label.setText("No compression in this thread yet. At the trigger, older tool results "
                                           "are shortened and older messages summarised; Compact now does it at "
                                           "once.")
            self.strategies_label.setText("")
            self.strategies_label.hide()
            self.lost.set_rows([])
            for w in (self.lost_title, self.lost_view, self.kept_note):
                w.hide()
            return
        self.compression_label.setText(compression_headline(rec))
        lines = strategy_lines(rec.get("strategies") or {})
        note = str(rec.get("reason") or rec.get("note") or "")
        if note:
            lines.append(f"Note: {note}")
        self.strategies_label.setText("\n".join(lines))
        self.strategies_label.setVisible(bool(lines))
        lost = [op for op in rec.get("lost") or () if isinstance(op, Mapping)]
        self.lost.set_rows(lost)
        for w in (self.lost_title, self.lost_view, self.kept_note):
            w.setVisible(bool(lost))
        rows = min(max(len(lost), 1), 5)  # two lines each (they wrap in the narrow dock); it scrolls beyond
        self.lost_view.setFixedHeight(rows * (2 * self.fontMetrics().lineSpacing() + 6) + 6)

    def _update_buttons(self) -> None:
        has = self._session is not None
        for b in (self.compact_button, self.warning_compact):
            b.setEnabled(has and not self.compacting)
        self.inspect_button.setEnabled(has and bool(self.calls.rows))


__all__ = ["ContextPanel"]
