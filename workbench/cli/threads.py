"""``workbench threads`` and ``workbench show``: list a workspace's threads, print one thread (with its
compressions and how many model calls its prompt log holds)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.cli.codes import CUT_OFF, EXIT_DONE
from workbench.cli.output import (_err, _fmt_time, _one_line, _question_summary, _safe, _short, event_dict,
                                  format_usage)
from workbench.terminal_text import terminal_safe
from workbench.cli.run import _open

if TYPE_CHECKING:
    from workbench.engine.events import Event


async def _threads(workspace: Path, args: argparse.Namespace) -> int:
    from workbench.session import Session

    infos = Session.list_threads(workspace)
    if args.json:
        for t in infos:
            print(json.dumps({"id": t.id, "title": t.title, "status": t.status, "created": t.created,
                              "updated": t.updated, "usage": t.usage.to_dict()}), flush=True)
        return EXIT_DONE
    if not infos:
        _err(f"no threads in {workspace}")
        return EXIT_DONE
    # P3: a title is the person's first prompt or what a model named the thread: one line, shown as it is
    rows = [(_safe(t.id), _fmt_time(t.updated), _safe(t.status), _safe(t.title) if t.title else "(untitled)")
            for t in infos]
    width = max(len("ID"), *(len(r[0]) for r in rows))
    status_width = max(len("STATUS"), *(len(r[2]) for r in rows))
    print(f"{'ID':<{width}}  {'UPDATED':<19}  {'STATUS':<{status_width}}  TITLE")
    for tid, updated, status, title in rows:
        print(f"{tid:<{width}}  {updated:<19}  {status:<{status_width}}  {title}")
    sys.stdout.flush()
    if any(t.status == "failed" for t in infos):  # R9: a crashed run reads failed, with what to do
        _err("failed: the run failed or its process died; `workbench resume --thread ID` recovers it")
    return EXIT_DONE


async def _show(workspace: Path, args: argparse.Namespace) -> int:
    session = await _open(workspace, args.thread)
    try:
        info = next((t for t in session.threads() if t.id == session.thread_id), None)
        events: list[Event] = []
        session.subscribe(events.append, replay=True)()
        messages = session.messages
        artifacts = [_artifact_entry(name, a) for name, a in session.artifacts.items()]
        pending = session.pending
        data: dict[str, Any] = {
            "thread": session.thread_id,
            "title": info.title if info else "",
            "status": session.status,
            "created": info.created if info else None,
            "updated": info.updated if info else None,
            "usage": session.usage.to_dict(),
            "messages": [m.to_dict() for m in messages],
            "todos": session.todos,
            "artifacts": artifacts,
            "pending": [q.to_dict() for q in pending],
            "last_error": session.last_error(),
            "holder": session.holder,  # R7: the live process running it, if any
            "events": [event_dict(e) for e in events],
            # C5: what the model's view leaves out (the messages above are all stored), V1: calls logged
            "compressions": session.compression_records(),
            "prompt_calls": len(session.prompt_calls()),
        }
        if args.json:
            print(json.dumps(data, default=str), flush=True)
            return EXIT_DONE
        _print_thread(data, messages)
        return EXIT_DONE
    finally:
        await session.close()


def _artifact_entry(name: str, a: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": name}
    if isinstance(a, Mapping):
        size = a.get("size")
        if size is None and isinstance(a.get("content"), str):
            size = len(a["content"].encode("utf-8"))
        entry["size"] = size
        for key in ("mime", "source"):
            if a.get(key) is not None:
                entry[key] = a[key]
    elif isinstance(a, str):
        entry["size"] = len(a.encode("utf-8"))
    return entry


def _print_thread(data: dict[str, Any], messages: Sequence[Any]) -> None:
    """P3: a stored thread holds what models, tools and servers wrote: each name, title and value is made
    safe on its one line (``_safe``, ``_short``, ``_one_line``), and the whole print once more
    (``terminal_safe``: a message's own line breaks and tabs kept, every other control shown)."""
    out: list[str] = []
    title = _safe(data["title"]) if data["title"] else "(untitled)"
    updated = f" · updated {_fmt_time(data['updated'])}" if data.get("updated") else ""
    out.append(f"thread {data['thread']} · {title} · {data['status']}{updated}")
    out.append(f"usage: {format_usage(data['usage'])}")
    if data.get("holder"):  # R9: live in another process: never "cut off, recover it"
        out.append(f"running in {data['holder']}")
    if data.get("last_error") and data["status"] in CUT_OFF:
        out.append(f"last error: {_one_line(data['last_error'], 300)}")
        out.append(f"to go on: workbench resume --thread {data['thread']}")
    if data["pending"]:
        out.append("pending:")
        for q in data["pending"]:
            out.append(f"  {_safe(q['id'])}  {_safe(q['kind'])}  {_question_summary(q['kind'], q.get('payload') or {})}")
    out.append("")
    out.append(f"messages ({len(messages)}):")
    for m in messages:
        role = _safe(m.role) if m.role != "tool" else f"tool {_safe(m.name or '')}".rstrip()
        text = (m.content or "").rstrip()
        lines = text.splitlines() or [""]
        edited = m.role == "tool" and (m.meta or {}).get("edited")
        if edited:  # P6: the note is shown as its own line below, with the arguments that ran
            from workbench.engine.messages import split_edit_note

            text = split_edit_note(text)[0].rstrip()
            lines = text.splitlines() or [""]
        if m.role == "tool":  # results can be whole files: one line of them
            status = (m.meta or {}).get("status")
            role += f" [{_safe(status)}]" if status else ""
            if len(lines) > 1 or len(text) > 200:
                lines = [f"{_one_line(text, 200)} ({len(text):,} chars)"]
        out.append(f"  {role}: {lines[0]}")
        out.extend(f"    {ln}" for ln in lines[1:])
        if edited:
            out.append(f"    ✎ edited by the person; ran with {_short(m.meta.get('arguments') or {}, 200)}")
        for c in m.tool_calls:
            out.append(f"    → {_safe(c.name)} {_short(c.arguments if c.arguments is not None else c.raw_arguments, 200)}")
    out.append("")
    out.append(f"todos ({len(data['todos'])}):")
    marks = {"completed": "x", "in_progress": "~", "pending": " "}
    for t in data["todos"]:
        if isinstance(t, Mapping):
            out.append(f"  [{marks.get(str(t.get('status')), '?')}] {_safe(t.get('content') or t.get('text') or _short(t))}")
        else:
            out.append(f"  - {_safe(t)}")
    out.append(f"artifacts ({len(data['artifacts'])}):")
    for a in data["artifacts"]:
        size = f"{a['size']:,} bytes" if isinstance(a.get("size"), int) else "size unknown"
        out.append(f"  {_safe(a['name'])}  ({size})")
    if data.get("compressions"):
        from workbench.cli.compact import compression_lines

        out.append("")
        out.extend(_safe(ln) for ln in compression_lines(data["compressions"]))
        out.append("  (the messages above are all stored; a compression changes only what the model is sent)")
    if data.get("prompt_calls"):
        out.append(f"prompt log: {data['prompt_calls']:,} model calls stored "
                   "(the window's prompt inspector shows each)")
    out.append("")
    out.append(f"events ({len(data['events'])}):")
    for e in data["events"]:
        extra = {k: v for k, v in e.items() if k not in ("type", "thread", "run", "step", "time")}
        out.append(f"  {_fmt_time(e['time'])}  run {_safe(e['run'])}  step {e['step']:>3}  {_safe(e['type'])}"
                   f"{'  ' + _short(extra, 160) if extra else ''}")
    print(terminal_safe("\n".join(out), multiline=True), flush=True)
