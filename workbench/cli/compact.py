"""``workbench compact``: compress a thread's history now (C7, "Compact now" at the command line), and the
words for a compression record that ``compact`` and ``show`` print.

Nothing is deleted from the stored thread: a compression is a record of what the model's *view* leaves
out (C5). Compacting summarises the older messages with ``compression.summarize.model`` (a model call),
after the cheap strategies; a thread whose run lives in another process is refused (exit 2, the holder
named), as a second ``run`` on it would be.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from workbench.cli.codes import EXIT_DONE, UsageError
from workbench.cli.decide import _trust_decision
from workbench.cli.output import _err, _fmt_time
from workbench.terminal_text import terminal_safe

#: What each strategy counts ("3 tool results", "24 messages").
_UNITS = {"dedupe": "tool result", "truncate": "tool result", "summarize": "message", "drop": "message"}


async def _compact(workspace: Path, args: argparse.Namespace) -> int:
    from workbench.cli.run import _open
    from workbench.errors import RunError

    interactive = bool(sys.stdin is not None and sys.stdin.isatty())
    trusted = _trust_decision(workspace, args, interactive=interactive)  # W1: the summariser's endpoint
    session = await _open(workspace, args.thread, trust=trusted, shared_model_host=True)
    for notice in session.notices:
        _err(f"workbench: {notice}")
    try:
        try:
            record = await session.compact()
        except RunError as e:  # R7: its run lives in another process (the holder is named)
            hint = "; compact it once that run has ended" if session.holder else ""
            raise UsageError(f"{e}{hint}") from None
        view = session.context_view()
        data = compact_summary(record, session.thread_id, stored=len(session.messages), view=len(view))
        if args.json:
            print(json.dumps(data, default=str), flush=True)
        elif record is None:
            _err(f"thread {session.thread_id}: nothing to compact (its history is too short for a summary and "
                 "no tool result can be made smaller)")
        else:
            # P3: a record's note can quote a provider's or a model's words
            print(terminal_safe("\n".join(record_lines(record, head=f"compacted thread {session.thread_id}")),
                                multiline=True), flush=True)
            print(f"the model now sees {len(view):,} messages; the thread keeps all {len(session.messages):,}",
                  flush=True)
        return EXIT_DONE
    finally:
        await session.close()


def compact_summary(record: Mapping[str, Any] | None, thread: str, *, stored: int, view: int) -> dict[str, Any]:
    """``compact --json``: one object — the record's figures, what was lost by kind, the summary's text."""
    data: dict[str, Any] = {"thread": thread, "compacted": record is not None, "stored_messages": stored,
                            "view_messages": view}
    if record is None:
        return data
    summary = next((op for op in record.get("ops") or () if op.get("op") == "summarize"), None)
    data.update({
        "compression": record.get("id"), "trigger": record.get("trigger"),
        "tokens_before": record.get("tokens_before"), "tokens_after": record.get("tokens_after"),
        "strategies": record.get("strategies") or {}, "lost": lost_by_kind(record),
        "note": record.get("reason") or None,
        "summary": summary.get("text") if summary else None,
        "facts": len(summary.get("facts") or ()) if summary else 0,
    })
    return data


def lost_by_kind(record: Mapping[str, Any]) -> dict[str, dict[str, int]]:
    """What a record took out of the model's view, by operation: how many messages and their characters
    (``truncate`` also: the characters kept of each)."""
    out: dict[str, dict[str, int]] = {}
    for op in record.get("lost") or ():
        kind = str(op.get("op"))
        entry = out.setdefault(kind, {"messages": 0, "chars": 0})
        if kind in ("summarize", "drop"):
            entry["messages"] += int(op.get("end", 0)) - int(op.get("start", 0))
        else:
            entry["messages"] += 1
        entry["chars"] += int(op.get("chars") or 0)
        if kind == "truncate" and op.get("max") is not None:
            entry["kept_chars"] = int(op["max"])
    return out


def record_lines(record: Mapping[str, Any], *, head: str) -> list[str]:
    """A record in words: tokens before → after, each strategy's figures, what left the view."""
    before, after = int(record.get("tokens_before") or 0), int(record.get("tokens_after") or 0)
    share = f" (−{100 * (before - after) / before:.0f}%)" if before else ""
    lines = [f"{head}: ~{before:,} → ~{after:,} tokens{share}, {record.get('trigger', '?')} "
             f"(compression {record.get('id', '?')})"]
    strategies: Mapping[str, Mapping[str, int]] = record.get("strategies") or {}
    lost = lost_by_kind(record)
    for name in ("dedupe", "truncate", "summarize", "drop"):
        if name not in strategies:
            continue
        s = strategies[name]
        what = lost.get(name, {})
        count = _count(name, int(s.get("messages", 0)))
        lines.append(f"  {name:<9}  {count:<15}  −{s.get('tokens_saved', 0):,} tokens  ({_lost_words(name, what)})")
    if record.get("reason"):
        lines.append(f"  note: {record['reason']}")
    return lines


def _lost_words(kind: str, lost: Mapping[str, int]) -> str:
    chars = f"{lost.get('chars', 0):,} characters"
    if kind == "dedupe":
        return f"{chars} replaced by a note: a newer result of the same call is kept"
    if kind == "truncate":
        return f"{chars} cut to {lost.get('kept_chars', 0):,} each"
    if kind == "summarize":
        return f"{chars} replaced by a summary"
    return f"{chars} replaced by a notice that they were dropped"


def compression_line(record: Mapping[str, Any]) -> str:
    """``show``: one line per compression."""
    before, after = int(record.get("tokens_before") or 0), int(record.get("tokens_after") or 0)
    strategies: Mapping[str, Mapping[str, int]] = record.get("strategies") or {}
    parts = [f"{name} {_count(name, int(s.get('messages', 0)))}" for name, s in strategies.items()]
    note = f"  note: {record['reason']}" if record.get("reason") else ""
    when = _fmt_time(record["time"]) if record.get("time") else "?"
    return (f"  #{record.get('id', '?')}  {when}  {record.get('trigger', '?'):<6}  ~{before:,} → ~{after:,} tokens  "
            f"{', '.join(parts) or 'nothing'}{note}")


def _count(name: str, n: int) -> str:
    return f"{n:,} {_UNITS.get(name, 'message')}{'' if n == 1 else 's'}"


def compression_lines(records: Sequence[Mapping[str, Any]]) -> list[str]:
    return [f"compressions ({len(records)}):", *(compression_line(r) for r in records)]
