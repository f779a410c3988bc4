"""What the Context dock shows, in words and table models (C6, C9, V2): the meter's level and text, the
model's window, each strategy's figures, each lost operation, a compression's headline, a call's usage,
and the models of the "what was lost" list and the model calls table. Pure text helpers, no session.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, Qt

from workbench.ui.plain_text import plain_tooltip
from workbench.ui.table_model import RowsTableModel

Index = QModelIndex | QPersistentModelIndex

#: Meter colours: well under the trigger, nearing it (from 75 %), at or over it.
LEVEL_COLORS = {"ok": "#2da44e", "near": "#d4a72c", "over": "#cf222e"}
NEAR_SHARE = 0.75

SOURCES = (("system_prompt", "System prompt"), ("messages", "Messages"), ("tool_results", "Tool results"),
           ("tool_schemas", "Tool schemas"))

STRATEGY_WORDS = {
    "dedupe": ("Dedupe", "older duplicate tool result{s} replaced by a note"),
    "truncate": ("Truncate", "older tool result{s} shortened"),
    "summarize": ("Summarize", "older message{s} replaced by a summary"),
    "drop": ("Drop", "older message{s} dropped with a notice"),
}


# -- words (pure) -------------------------------------------------------------------------------------------
def level_for(tokens: int, trigger: int | None) -> str:
    """``ok`` under 75 % of the trigger, ``near`` under 100 %, ``over`` at or over it."""
    if not trigger:
        return "ok"
    share = tokens / trigger
    return "over" if share >= 1 else "near" if share >= NEAR_SHARE else "ok"


def meter_text(tokens: int, trigger: int | None) -> str:
    """``12,345 of 85,000 tokens (15%) — nearing the trigger``: the meter's words (G14: not colour alone)."""
    if not trigger:
        return f"{tokens:,} tokens"
    level = level_for(tokens, trigger)
    words = {"near": " — nearing the trigger", "over": " — over the trigger: compacts before the next call"}
    return f"{tokens:,} of {trigger:,} tokens ({100 * tokens / trigger:.0f}%){words.get(level, '')}"


def window_text(tokens: int, window: int | None, trigger: int | None) -> str:
    """The model's window and the trigger in one line (where the trigger comes from: the tooltip)."""
    if window:
        return f"Model window: {window:,} tokens ({100 * tokens / window:.0f}% used) · compaction at {trigger or 0:,}"
    return f"Model window: not known for this model · compaction at {trigger or 0:,} tokens"


TRIGGER_HELP = ("Compaction starts at compression.max_input_tokens (workbench.yaml); without it at 85% of the "
                "model's window when litellm knows it, else at 100,000 tokens.")


def strategy_lines(strategies: Mapping[str, Any]) -> list[str]:
    """What each strategy of a compression did, in words."""
    out = []
    for key in ("dedupe", "truncate", "summarize", "drop"):
        fig = strategies.get(key)
        if not isinstance(fig, Mapping):
            continue
        name, what = STRATEGY_WORDS[key]
        n = int(fig.get("messages") or 0)
        out.append(f"{name}: {n:,} {what.format(s='' if n == 1 else 's')}, "
                   f"≈{int(fig.get('tokens_saved') or 0):,} tokens saved")
    return out


def lost_line(op: Mapping[str, Any]) -> str:
    """One operation of a compression's ``lost`` list: which stored message(s), what happened, the size."""
    kind = op.get("op")
    chars = int(op.get("chars") or 0)
    if kind in ("dedupe", "truncate"):
        where = f"Tool result #{op.get('index')}"
        if kind == "dedupe":
            return f"{where}: replaced by a note — an older duplicate of a later call ({chars:,} characters)"
        return f"{where}: cut to {int(op.get('max') or 0):,} of its {chars:,} characters"
    start, end = int(op.get("start") or 0), int(op.get("end") or 0)
    where = f"Messages #{start}–#{end - 1}" if end - start > 1 else f"Message #{start}"
    if kind == "summarize":
        return f"{where}: replaced by a summary ({chars:,} characters)"
    if kind == "drop":
        return f"{where}: dropped with a notice ({chars:,} characters)"
    return f"{where}: {kind} ({chars:,} characters)"


def compression_headline(record: Mapping[str, Any]) -> str:
    """``Compression #2 (manual, 14:03): 12,345 → 4,567 tokens (−7,778, 63% smaller)``."""
    before, after = int(record.get("tokens_before") or 0), int(record.get("tokens_after") or 0)
    when = record.get("time")
    stamp = time.strftime(", %H:%M", time.localtime(float(when))) if isinstance(when, (int, float)) else ""
    smaller = f", {100 * (before - after) / before:.0f}% smaller" if before else ""
    ident = record.get("id", record.get("compression", ""))
    return (f"Compression #{ident} ({record.get('trigger', 'auto')}{stamp}): {before:,} → {after:,} tokens "
            f"(−{before - after:,}{smaller})")


def usage_words(usage: Mapping[str, Any] | None) -> str:
    u = usage or {}
    text = f"{int(u.get('input_tokens') or 0):,} in · {int(u.get('output_tokens') or 0) + int(u.get('thoughts_tokens') or 0):,} out"
    return text


# -- models ---------------------------------------------------------------------------------------------------
class CallsModel(RowsTableModel):
    """The thread's model calls (``Session.prompt_calls``), newest first."""

    COLUMNS = ("Call", "When", "Tokens")

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self._rows: list[dict[str, Any]] = []

    def set_rows(self, calls: Sequence[Mapping[str, Any]]) -> None:
        self.beginResetModel()
        self._rows = [dict(c) for c in reversed(list(calls))]
        self.endResetModel()

    @property
    def rows(self) -> list[dict[str, Any]]:
        return list(self._rows)

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        row = self.row_at(index)
        if row is None:
            return None
        col = index.column()
        if role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.AccessibleTextRole):
            if col == 0:
                if row.get("kind") == "summary":  # V1: a compression's summary is a model call too
                    failed = " (failed)" if row.get("status") == "failed" else ""
                    return f"#{row.get('seq')} · summary{failed}"
                cut = " (cut)" if row.get("status") == "cut" else ""
                return f"#{row.get('seq')} · step {row.get('step')}{cut}"
            if col == 1:
                t = row.get("time")
                return time.strftime("%H:%M:%S", time.localtime(float(t))) if isinstance(t, (int, float)) else ""
            if col == 2:
                return usage_words(row.get("usage"))
        if role == Qt.ItemDataRole.ToolTipRole:
            if row.get("kind") == "summary":
                return plain_tooltip(
                    f"Model call #{row.get('seq')} of this thread: {row.get('model')} summarising older messages "
                    f"for a compression{' (it failed)' if row.get('status') == 'failed' else ''}. "
                    "Enter opens its prompt.")
            cut = "; cut part-way (stopped, or the connection dropped)" if row.get("status") == "cut" else ""
            return plain_tooltip(f"Model call #{row.get('seq')} of this thread: {row.get('model')}, run "
                                 f"{row.get('run')} step {row.get('step')}, {row.get('messages')} messages sent{cut}. "
                                 "Enter opens its prompt.")
        if role == Qt.ItemDataRole.UserRole:
            return row.get("seq")
        if role == Qt.ItemDataRole.TextAlignmentRole and col == 2:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None


class LostModel(RowsTableModel):
    """What the newest compression cut or replaced (its record's ``lost`` list), one line each."""

    COLUMNS = ("What was lost",)

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self._rows: list[str] = []

    def set_rows(self, lost: Sequence[Mapping[str, Any]]) -> None:
        self.beginResetModel()
        self._rows = [lost_line(op) for op in lost]
        self.endResetModel()

    @property
    def rows(self) -> list[str]:
        return list(self._rows)

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        row = self.row_at(index)
        if row is None:
            return None
        if role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.AccessibleTextRole):
            return row
        if role == Qt.ItemDataRole.ToolTipRole:
            if "summary" in row:
                return plain_tooltip(row + ". The summary carries their file paths, commands, URLs and numbers "
                                     "verbatim.")
            return plain_tooltip(row)
        return None


# -- the panel ------------------------------------------------------------------------------------------------


def section_name(label: str) -> str:
    """``section skills (SkillsMiddleware)`` → ``Section skills (SkillsMiddleware)``; ``instructions`` →
    ``Agent instructions``."""
    if label == "instructions":
        return "Agent instructions"
    return label[:1].upper() + label[1:]


__all__ = ["LEVEL_COLORS", "NEAR_SHARE", "SOURCES", "STRATEGY_WORDS", "TRIGGER_HELP", "CallsModel", "LostModel",
           "compression_headline", "level_for", "lost_line", "meter_text", "section_name", "strategy_lines",
           "usage_words", "window_text"]
