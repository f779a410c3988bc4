"""The Instructions dock's editor (G2, I2–I4): one AGENTS.md open for editing in place.

The editor (monospace, markdown highlighting) edits one file in place:

- Save goes through ``Session.write_document``: the agent's backend and permission rules, so a denied
  path or a read-only mount cannot be saved. The editor asks ``Session.write_verdict`` when a file
  opens and disables Save with the reason; a refused save says why and writes nothing.
- Revert reads the file again and drops the edits.
- A live token count (``estimate_tokens``, debounced) warns past ``max_file_tokens``.
- A change on disk is noticed by reading the file again (async, through the backend) every
  ``DISK_CHECK_MS`` and when the window regains focus: an unedited editor reloads silently, an edited
  one shows a bar "AGENTS.md changed on disk — Reload / Keep mine". Save reads the file first: a change
  on disk since the editor's last look shows the same bar and writes nothing.
- The file is edited in place (I5): the editor shows it as Qt does (no leading BOM, every line break a
  new line, a no-break space as a space), ``dirty`` compares that view with the view of the disk text,
  and Save maps the edited view back onto the file (``text_to_save``): its BOM, each unchanged line's
  bytes and line break, the characters of an edited line Qt showed differently, and its dominant line
  ending for new lines.
- The same workspace opened again (``workbench.yaml`` reloaded, Settings applied) keeps the open file,
  its edits and its baseline, and checks the disk again; the window asks before another workspace or
  closing drops unsaved edits (``window_open.settle_unsaved_edits``).

The panel (``instructions_panel.py``) owns the file list and hands the editor its session and the
files to open; it shares its ``PanelTasks`` so one ``wait_idle`` covers the editor's reads and saves.
The editor says what it read or wrote (``sig_file_read``) so the list's tokens on disk and the texts the
panel diffs the agent's changes against stay current, and the panel passes on what the editor cannot see
itself: the window regaining focus (``schedule_disk_check``), the end of a run (``refresh_verdict``) and
the agent's change to the open file (``follow_disk``).
"""

from __future__ import annotations

import difflib
import re
import time
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Qt, QTimer, Signal, Slot
from PySide6.QtGui import QFontDatabase, QGuiApplication, QKeySequence, QShortcut, QTextDocument
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QPlainTextEdit,
    QPushButton,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from workbench.engine.tokens import estimate_tokens
from workbench.errors import AccessDenied, BackendIOError, BackendRefusal, FileNotFound, WorkbenchError
from workbench.ui.markdown_highlighter import MarkdownHighlighter
from workbench.ui.panel_tasks import PanelTasks
from workbench.ui.plain_text import plain_label, plain_tooltip
from workbench.ui.style import set_status_property

if TYPE_CHECKING:
    from workbench.session import Session

__all__ = ["DISK_CHECK_MS", "EDITOR_MAX_BYTES", "InstructionsEditor", "read_instruction_file", "shown_text",
           "text_to_save"]

#: How often the open file is compared with the disk (ms).
DISK_CHECK_MS = 2000
#: The token count waits this long after the last keystroke (ms).
TOKEN_DEBOUNCE_MS = 300
#: The most of an AGENTS.md the panel reads (F3); a larger file is not opened for editing.
EDITOR_MAX_BYTES = 1024 * 1024


async def read_instruction_file(session: Session | None, path: str) -> tuple[str | None, str, str]:
    """(text or None, state, reason): state is present, missing, refused or error."""
    if session is None:
        return None, "error", "no session"
    try:
        text, cut = await session.read_document_head(path, EDITOR_MAX_BYTES)
    except FileNotFound:
        return None, "missing", ""
    except BackendRefusal as e:
        return None, "refused", e.reason or str(e)
    except AccessDenied as e:  # the OS refuses it (mode 000, another user's): the file's condition (I5)
        return None, "refused", e.detail or str(e)
    except BackendIOError as e:
        return None, "error", str(e)
    if cut:  # never a cut copy in the editor: saving it would destroy the rest of the file
        return None, "error", (f"too large to edit here (over {EDITOR_MAX_BYTES // 1024 // 1024} MB; runs "
                               "show it cut to max_file_tokens): edit it in a text editor")
    return text, "present", ""


# -- the file's own conventions (I5: edited in place) ---------------------------------------------------------
BOM = "\ufeff"
#: What Qt's plain-text document takes as a line break (each becomes a new line of its view).
_LINE_BREAK = re.compile("\r\n|\r|\n|\u2028|\u2029")


def shown_text(raw: str | None) -> str:
    """``raw`` as the editor shows it (``QPlainTextEdit.toPlainText`` after ``setPlainText``): no leading
    BOM, ``\\n`` for every line break (CRLF, a lone CR, U+2028, U+2029), a space for a no-break space."""
    if not raw:
        return ""
    doc = QTextDocument()
    doc.setPlainText(raw)
    return doc.toPlainText()


def _split_lines(body: str) -> tuple[list[str], list[str]]:
    """The lines of ``body`` and the break after each ("" after the last)."""
    lines: list[str] = []
    breaks: list[str] = []
    pos = 0
    for m in _LINE_BREAK.finditer(body):
        lines.append(body[pos:m.start()])
        breaks.append(m.group())
        pos = m.end()
    lines.append(body[pos:])
    breaks.append("")
    return lines, breaks


def _newline_of(breaks: list[str]) -> str:
    """The file's line ending for new lines: its most common of CRLF, LF and CR (LF in a file with none)."""
    counts = {nl: breaks.count(nl) for nl in ("\n", "\r\n", "\r")}
    best = max(counts, key=lambda nl: counts[nl])
    return best if counts[best] else "\n"


def _merge_line(raw: str, old: str, new: str) -> str:
    """An edited line: the characters the person left alone as the file had them (a no-break space Qt
    showed as a space stays one), the rest as typed. Only when ``raw`` maps onto ``old`` one for one."""
    if len(raw) != len(old):
        return new
    parts: list[str] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        parts.append(raw[i1:i2] if tag == "equal" else new[j1:j2])
    return "".join(parts)


def text_to_save(raw: str | None, shown: str, edited: str) -> str:
    """The file text to write for the editor's ``edited`` view of a file whose disk text ``raw`` it showed
    as ``shown`` (I5, edited in place): the BOM stays, unchanged lines keep their bytes and their line
    break, edited lines keep the characters left alone, new lines take the file's dominant line ending.
    ``raw`` None (a new file): the text as typed."""
    if raw is None:
        return edited
    if edited == shown:
        return raw
    bom = BOM if raw.startswith(BOM) else ""
    lines, breaks = _split_lines(raw[len(bom):])
    newline = _newline_of(breaks)
    old = shown.split("\n")
    new = edited.split("\n")
    if len(lines) != len(old):  # the view does not line up with the file (not expected): keep BOM and endings
        return bom + newline.join(new)
    out: list[tuple[str, str]] = []  # (line, the file's break after it or "")
    # Unchanged lines at both ends first: a typical edit leaves the matcher a few lines to compare.
    head = 0
    while head < len(old) and head < len(new) and old[head] == new[head]:
        head += 1
    tail = 0
    while tail < len(old) - head and tail < len(new) - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    out.extend(zip(lines[:head], breaks[:head]))
    o_mid, n_mid = old[head:len(old) - tail], new[head:len(new) - tail]
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, o_mid, n_mid, autojunk=False).get_opcodes():
        if tag == "equal" or (tag == "replace" and i2 - i1 == j2 - j1):
            for k in range(i2 - i1):
                i = head + i1 + k
                line = lines[i] if tag == "equal" else _merge_line(lines[i], old[i], n_mid[j1 + k])
                out.append((line, breaks[i]))
        else:  # lines added, removed or reshaped: the new ones as typed
            out.extend((line, "") for line in n_mid[j1:j2])
    out.extend(zip(lines[len(lines) - tail:], breaks[len(breaks) - tail:]))
    parts: list[str] = []
    for n, (line, brk) in enumerate(out):
        parts.append(line)
        if n < len(out) - 1:
            parts.append(brk or newline)
    return bom + "".join(parts)


class InstructionsEditor(QWidget):
    """One instruction file edited in place: Save, Revert, why it cannot be saved, the conflict bar, tokens."""

    sig_file_saved = Signal(str)
    """The user saved an instruction file (its virtual path)."""

    sig_disk_changed = Signal(str)
    """The open file changed on disk: ``reloaded`` (silently) or ``conflict`` (the bar shows)."""

    sig_file_read = Signal(str, object, str, str)
    """The editor read or wrote a file: its path, its text (None: missing or unreadable), state, reason."""

    sig_file_opened = Signal(str)
    """A file was opened in the editor (its virtual path)."""

    def __init__(self, tasks: PanelTasks, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.tasks = tasks
        self._session: Session | None = None
        self._generation = 0
        self.max_file_tokens = 4000
        self.max_total_tokens = 8000
        self.open_path: str | None = None
        self._baseline: str | None = None
        """The disk text the editor is based on (None: the file did not exist)."""
        self._baseline_view = ""
        """``_baseline`` as the editor shows it (``shown_text``): what ``dirty`` compares the editor with."""
        self._conflict_text: str | None = None
        self._conflict = False
        self._can_save = False
        self._why_not = ""
        self._checking = False
        self._saving = False
        self._loading = False

        self.path_label = plain_label("No file open", self)
        self.path_label.setObjectName("instructionsPath")
        font = self.path_label.font()
        font.setBold(True)
        self.path_label.setFont(font)
        self.save_button = QPushButton("Save", self)
        self.save_button.setObjectName("instructionsSave")
        self.save_button.setEnabled(False)
        self.save_button.clicked.connect(lambda: self.tasks.run(self.save()))
        self.revert_button = QPushButton("Revert", self)
        self.revert_button.setObjectName("instructionsRevert")
        self.revert_button.setToolTip("Drop your edits and read the file again")
        self.revert_button.setEnabled(False)
        self.revert_button.clicked.connect(lambda: self.tasks.run(self.revert()))

        self.verdict_label = plain_label(self)
        self.verdict_label.setObjectName("instructionsVerdict")
        self.verdict_label.setWordWrap(True)
        self.verdict_label.setVisible(False)

        self.conflict_bar = QFrame(self)
        self.conflict_bar.setObjectName("instructionsConflictBar")
        self.conflict_bar.setFrameShape(QFrame.Shape.StyledPanel)
        self.conflict_label = plain_label(self.conflict_bar)
        self.conflict_label.setObjectName("instructionsConflictText")
        self.conflict_label.setWordWrap(True)
        set_status_property(self.conflict_label, "denied")
        self.conflict_reload = QPushButton("Reload", self.conflict_bar)
        self.conflict_reload.setObjectName("instructionsConflictReload")
        self.conflict_reload.setToolTip("Drop your edits and take the file as it is on disk")
        self.conflict_reload.clicked.connect(self.take_disk_version)
        self.conflict_keep = QPushButton("Keep mine", self.conflict_bar)
        self.conflict_keep.setObjectName("instructionsConflictKeep")
        self.conflict_keep.setToolTip("Keep your edits; saving replaces the file on disk")
        self.conflict_keep.clicked.connect(self.keep_mine)
        # The text over the whole width, the two choices under it: in a narrow dock the text stays readable.
        bar = QVBoxLayout(self.conflict_bar)
        bar.setContentsMargins(6, 3, 6, 3)
        bar.setSpacing(3)
        bar.addWidget(self.conflict_label)
        choices = QHBoxLayout()
        choices.setContentsMargins(0, 0, 0, 0)
        choices.addStretch(1)
        choices.addWidget(self.conflict_reload)
        choices.addWidget(self.conflict_keep)
        bar.addLayout(choices)
        self.conflict_bar.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
        self.conflict_bar.setVisible(False)

        self.text_edit = QPlainTextEdit(self)
        self.text_edit.setObjectName("instructionsEditor")
        self.text_edit.setAccessibleName("Instruction file editor")
        self.text_edit.setProperty("role", "code")
        self.text_edit.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.text_edit.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        self.text_edit.setTabChangesFocus(False)
        self.text_edit.setReadOnly(True)
        self.text_edit.setPlaceholderText("Select an instruction file above to edit it.")
        self.highlighter = MarkdownHighlighter(self.text_edit.document())
        self.text_edit.textChanged.connect(self._on_text_changed)

        self.token_label = plain_label(self)
        self.token_label.setObjectName("instructionsTokens")
        self.token_label.setWordWrap(True)
        self.message_label = plain_label(self)
        self.message_label.setObjectName("instructionsMessage")
        self.message_label.setWordWrap(True)
        self.message_label.setProperty("role", "muted")

        self._token_timer = QTimer(self)
        self._token_timer.setSingleShot(True)
        self._token_timer.setInterval(TOKEN_DEBOUNCE_MS)
        self._token_timer.timeout.connect(self.update_token_count)

        self.disk_timer = QTimer(self)
        self.disk_timer.setInterval(DISK_CHECK_MS)
        self.disk_timer.timeout.connect(self.schedule_disk_check)

        save_shortcut = QShortcut(QKeySequence.StandardKey.Save, self.text_edit)
        save_shortcut.setContext(Qt.ShortcutContext.WidgetShortcut)
        save_shortcut.activated.connect(self._save_if_enabled)

        head = QHBoxLayout()
        head.setContentsMargins(0, 0, 0, 0)
        head.addWidget(self.path_label, 1)
        head.addWidget(self.save_button)
        head.addWidget(self.revert_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(3)
        layout.addLayout(head)
        layout.addWidget(self.verdict_label)
        layout.addWidget(self.conflict_bar)
        layout.addWidget(self.text_edit, 1)
        foot = QHBoxLayout()
        foot.setContentsMargins(0, 0, 0, 0)
        foot.addWidget(self.token_label)
        foot.addStretch(1)
        layout.addLayout(foot)
        layout.addWidget(self.message_label)

        app = QGuiApplication.instance()
        if isinstance(app, QGuiApplication):
            app.applicationStateChanged.connect(self._on_application_state)
        self._refresh_buttons()

    # -- the contract -----------------------------------------------------------------------------------
    def set_session(self, session: Session | None) -> None:
        """Edit ``session``'s files: another workspace closes the open file; the same session keeps it and
        its edits, and so does a new session of the same workspace (G2, G9: ``workbench.yaml`` reloaded
        before a run, Settings applied) — the buffer, its edits and its baseline stay, the rules are asked
        again and the disk is checked against the baseline as the timer does."""
        if session is not None and session is self._session:
            return
        previous = self._session
        self._session = session
        self._generation += 1
        if session is not None:
            memory = session.config.memory
            self.max_file_tokens = memory.max_file_tokens
            self.max_total_tokens = memory.max_total_tokens
        if self.open_path is not None and _same_workspace(previous, session):
            assert session is not None
            self._apply_verdict(*session.write_verdict(self.open_path))
            self.update_token_count()
            self._refresh_buttons()
            self.disk_timer.start()
            self.schedule_disk_check()
            return
        self._close_file()

    @property
    def dirty(self) -> bool:
        """The editor holds text that differs from the file it is based on."""
        return self.open_path is not None and self.text_edit.toPlainText() != self._baseline_view

    @property
    def can_save(self) -> tuple[bool, str]:
        return self._can_save, self._why_not

    @property
    def conflict_visible(self) -> bool:
        return self._conflict

    @property
    def token_warning(self) -> bool:
        return self.token_label.property("status") == "denied"

    # -- public actions (async; slots start them through ``tasks``) ----------------------------------------
    async def open_file(self, path: str) -> bool:
        """Load ``path`` into the editor (a missing file opens empty, to be created by Save)."""
        s = self._session
        if s is None:
            return False
        generation = self._generation
        self._loading = True
        try:
            text, state, why = await read_instruction_file(s, path)
        finally:
            self._loading = False
        if generation != self._generation:
            return False
        self.sig_file_read.emit(path, text, state, why)
        if state == "refused" or state == "error":
            self._close_file()
            self.path_label.setText(path)
            self._show_verdict(f"Cannot open {path}: {why}")
            return False
        self.open_path = path
        self._hide_conflict()
        self._show_disk_text(text)
        self._apply_verdict(*s.write_verdict(path))
        self.path_label.setText(path + ("" if text is not None else "  (new file)"))
        self.show_message("")
        self.sig_file_opened.emit(path)
        self.update_token_count()
        self._refresh_buttons()
        self.disk_timer.start()
        return True

    async def save(self) -> bool:
        """Write the editor's text through the session (same backend and rules as the agent).

        The file is read first: if it changed on disk since the editor's last look (another program,
        ``git pull``), nothing is written and the conflict bar shows (Reload / Keep mine), as the disk
        check would. The text written keeps the file's conventions (``text_to_save``, I5)."""
        s, path = self._session, self.open_path
        if s is None or path is None:
            return False
        name = PurePosixPath(path).name or path
        if self._conflict:
            self.show_message(f"Not saved: {name} changed on disk — choose Reload or Keep mine first. "
                              "Nothing was written.", error=True)
            return False
        generation = self._generation
        self._saving = True
        self._refresh_buttons()
        written: str | None = None
        view = ""
        disk: str | None = None
        state = ""
        try:
            disk, state, why = await read_instruction_file(s, path)
            if generation != self._generation or path != self.open_path:
                return False
            if state in ("refused", "error"):
                self.show_message(f"Not saved: {path} could not be read to check it before writing ({why}). "
                                  "Nothing was written.", error=True)
                return False
            if disk == self._baseline and not self._conflict:
                view = self.text_edit.toPlainText()
                written = text_to_save(self._baseline, self._baseline_view, view)
                await s.write_document(path, written)
        except BackendRefusal as e:
            if generation == self._generation:
                self.show_message(f"Not saved: {e.reason or e}. Nothing was written.", error=True)
            return False
        except (BackendIOError, WorkbenchError, OSError) as e:
            if generation == self._generation:
                self.show_message(f"Not saved: {e}. Nothing was written.", error=True)
            return False
        finally:
            self._saving = False
            if generation == self._generation:
                self._refresh_buttons()
        if written is None:  # changed on disk since the last look: ask, write nothing (Bug: Ctrl+S within 2 s)
            if generation != self._generation or path != self.open_path:
                return False
            if not self._conflict:
                self.sig_file_read.emit(path, disk, state, "")
                if self._disk_changed(path, disk) == "reloaded":
                    return False  # nothing was edited: the disk's text is shown now
            self.show_message(f"Not saved: {name} changed on disk since you opened it; nothing was written. "
                              "Choose Reload or Keep mine above.", error=True)
            return False
        if generation != self._generation or path != self.open_path:
            return True
        self._baseline = written
        self._baseline_view = view
        self._hide_conflict()
        self.sig_file_read.emit(path, written, "present", "")
        self.path_label.setText(path)
        self.show_message(f"Saved {path} at {time.strftime('%H:%M:%S')}. The agent sees it from the next run.")
        self._refresh_buttons()
        self.sig_file_saved.emit(path)
        return True

    async def revert(self) -> bool:
        """Drop the edits: read the file again into the editor."""
        path = self.open_path
        if path is None:
            return False
        opened = await self.open_file(path)
        if opened:
            self.show_message("Reverted to the file on disk.")
        return opened

    async def check_disk(self) -> str:
        """Compare the open file with the disk: ``unchanged``, ``reloaded``, ``conflict`` or ``skipped``."""
        s, path = self._session, self.open_path
        if s is None or path is None or self._checking or self._saving or self._loading:
            return "skipped"
        generation = self._generation
        self._checking = True
        try:
            text, state, _why = await read_instruction_file(s, path)
        finally:
            self._checking = False
        if generation != self._generation or path != self.open_path or self._saving or state in ("refused", "error"):
            return "skipped"
        compare_to = self._conflict_text if self._conflict else self._baseline
        if text == compare_to:
            return "unchanged"
        self.sig_file_read.emit(path, text, state, "")
        return self._disk_changed(path, text)

    def follow_disk(self, path: str, text: str | None) -> None:
        """``path`` was read again after the agent changed it: if it is the open file and differs, reload or ask."""
        if path != self.open_path:
            return
        compare_to = self._conflict_text if self._conflict else self._baseline
        if text != compare_to:
            self._disk_changed(path, text)

    def refresh_verdict(self) -> None:
        """Ask again whether the open file may be saved (a run may have changed the rules)."""
        s, path = self._session, self.open_path
        if s is None or path is None:
            return
        verdict = s.write_verdict(path)
        if verdict != (self._can_save, self._why_not):
            self._apply_verdict(*verdict)
            self._refresh_buttons()

    @Slot()
    def take_disk_version(self) -> None:
        """The conflict bar's Reload: replace the edits with the file on disk."""
        if self.open_path is None:
            return
        text = self._conflict_text if self._conflict else self._baseline
        self._show_disk_text(text)
        self._hide_conflict()
        self.show_message("Reloaded from disk; your edits were dropped.")
        self._refresh_buttons()

    @Slot()
    def keep_mine(self) -> None:
        """The conflict bar's Keep mine: keep the edits (saving will replace the file on disk)."""
        if not self._conflict:
            return
        self._baseline = self._conflict_text
        self._baseline_view = shown_text(self._conflict_text)
        self._hide_conflict()
        self.show_message("Kept your edits; Save replaces the file on disk.")
        self._refresh_buttons()

    @Slot()
    def update_token_count(self) -> int:
        """Count the editor's tokens now and warn past ``max_file_tokens``."""
        self._token_timer.stop()
        if self.open_path is None:
            self.token_label.setText("")
            set_status_property(self.token_label, None)
            return 0
        n = estimate_tokens(self.text_edit.toPlainText())
        limit = self.max_file_tokens
        if n > limit:
            self.token_label.setText(f"⚠ {n:,} tokens — over max_file_tokens ({limit:,}): the agent sees this file cut")
            set_status_property(self.token_label, "denied")
        else:
            self.token_label.setText(f"{n:,} / {limit:,} tokens")
            set_status_property(self.token_label, None)
        self.token_label.setToolTip(plain_tooltip(f"Estimated tokens of the editor's text; the whole instructions "
                                                  f"section is at most {self.max_total_tokens:,}."))
        return n

    @Slot()
    def schedule_disk_check(self) -> None:
        """Start a disk check unless one runs, a save runs, or the editor is not on screen (its dock closed)."""
        if (self.open_path is not None and not self._checking and not self._saving and self._session is not None
                and self.isVisible()):
            self.tasks.run(self.check_disk())

    def show_message(self, text: str, *, error: bool = False) -> None:
        self.message_label.setText(text)
        set_status_property(self.message_label, "error" if error else None)

    # -- internals --------------------------------------------------------------------------------------
    def _apply_verdict(self, allowed: bool, reason: str) -> None:
        """Whether the open file may be saved; if not, the editor is read-only and says why."""
        self._can_save, self._why_not = allowed, reason
        self.text_edit.setReadOnly(not allowed)
        if allowed:
            self._show_verdict("")
        else:
            self._show_verdict(f"You cannot save this file: {reason}. The agent's permission rules and read-only "
                               "mounts apply to you too (see workbench.yaml).")

    def _disk_changed(self, path: str, text: str | None) -> str:
        """The open file's disk text changed: reload silently, or show the bar if the editor is edited."""
        name = PurePosixPath(path).name or path
        if not self.dirty and not self._conflict:
            self._show_disk_text(text, keep_cursor=True)
            self.path_label.setText(path + ("" if text is not None else "  (deleted on disk)"))
            self.show_message(f"Reloaded {name}: it changed on disk ({time.strftime('%H:%M:%S')}).")
            self._refresh_buttons()
            self.sig_disk_changed.emit("reloaded")
            return "reloaded"
        self._conflict = True
        self._conflict_text = text
        what = "was deleted on disk" if text is None else "changed on disk"
        self.conflict_label.setText(f"{name} {what} — Reload to take that version, or Keep mine to keep your edits.")
        self.conflict_bar.setVisible(True)
        self._fit_conflict_bar()
        self.show_message("")
        self._refresh_buttons()
        self.sig_disk_changed.emit("conflict")
        return "conflict"

    def _fit_conflict_bar(self) -> None:
        """The bar as tall as its wrapped text needs at its width (a squeezed dock shrinks the editor, not it)."""
        layout = self.conflict_bar.layout()
        frame = 2 * self.conflict_bar.frameWidth()
        width = (self.conflict_bar.width() or self.width()) - frame
        if layout is not None and layout.hasHeightForWidth() and width > 0:
            self.conflict_bar.setFixedHeight(layout.totalHeightForWidth(width) + frame)

    def resizeEvent(self, event: Any) -> None:  # noqa: N802 - Qt's name
        super().resizeEvent(event)
        if self._conflict:
            self._fit_conflict_bar()

    def _hide_conflict(self) -> None:
        self._conflict = False
        self._conflict_text = None
        self.conflict_bar.setVisible(False)

    def _show_disk_text(self, raw: str | None, *, keep_cursor: bool = False) -> None:
        """Base the editor on the disk text ``raw`` (None: no file) and show it, unless it shows so already."""
        self._baseline = raw
        view = shown_text(raw)
        if self.text_edit.toPlainText() != view:
            position = self.text_edit.textCursor().position()
            scroll = self.text_edit.verticalScrollBar().value()
            self.text_edit.setPlainText(raw or "")
            view = self.text_edit.toPlainText()  # what dirty compares with: never marked edited on opening
            if keep_cursor:
                cursor = self.text_edit.textCursor()
                cursor.setPosition(min(position, len(view)))
                self.text_edit.setTextCursor(cursor)
                self.text_edit.verticalScrollBar().setValue(scroll)
        self._baseline_view = view

    def _close_file(self) -> None:
        self.disk_timer.stop()
        self._token_timer.stop()
        self.open_path = None
        self._baseline = None
        self._baseline_view = ""
        self._hide_conflict()
        self._can_save, self._why_not = False, ""
        self.text_edit.setReadOnly(True)
        self.text_edit.clear()
        self.path_label.setText("No file open")
        self._show_verdict("")
        self.show_message("")
        self.token_label.setText("")
        self._refresh_buttons()

    @Slot()
    def _on_text_changed(self) -> None:
        if self.open_path is None:
            return
        self._token_timer.start()
        self._refresh_buttons()

    @Slot(Qt.ApplicationState)
    def _on_application_state(self, state: Qt.ApplicationState) -> None:
        if state == Qt.ApplicationState.ApplicationActive:
            self.schedule_disk_check()

    @Slot()
    def _save_if_enabled(self) -> None:
        if self.save_button.isEnabled():
            self.tasks.run(self.save())

    def _refresh_buttons(self) -> None:
        is_open = self.open_path is not None
        dirty = self.dirty
        self.save_button.setEnabled(is_open and self._can_save and not self._saving and dirty)
        if is_open and not self._can_save and self._why_not:
            self.save_button.setToolTip(plain_tooltip(f"Cannot save: {self._why_not}"))
        else:
            self.save_button.setToolTip("Save the file (Ctrl+S); the agent sees it from the next run")
        self.revert_button.setEnabled(is_open and (dirty or self._conflict))
        if is_open:
            base = self.path_label.text().removesuffix(" •")
            self.path_label.setText(base + (" •" if dirty else ""))

    def _show_verdict(self, text: str) -> None:
        self.verdict_label.setText(text)
        set_status_property(self.verdict_label, "error" if text else None)
        self.verdict_label.setVisible(bool(text))


def _same_workspace(a: Session | None, b: Session | None) -> bool:
    """Two sessions over the same workspace folder (a reopen: ``workbench.yaml`` reloaded, Settings applied)."""
    if a is None or b is None:
        return False
    wa, wb = getattr(a, "workspace", None), getattr(b, "workspace", None)
    return wa is not None and wa == wb
