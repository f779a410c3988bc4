"""Prompt provenance (V1): every model call can be rebuilt and explained afterwards.

Each call the engine makes stores one small row (``prompt_calls``): the system prompt as labelled parts
(the agent's instructions, each middleware's section, with where the cacheable prefix ends), how the
messages were made (the thread's first ``n`` stored messages through its first ``k`` compression
records — both append-only — plus anything a wrapper inserted, such as a task notice), the tool
schemas, the model and the call's usage. Texts are stored once per distinct content, by hash
(``prompt_texts``), never in durable events (M8): once the sections repeat, a step adds a few hundred
bytes. ``rebuild`` turns a row back into the exact request as labelled blocks with token counts.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from workbench.engine.messages import Message, ModelRequest, clean_text
from workbench.engine.store import Store
from workbench.engine.usage import Usage

SCHEMA = """
CREATE TABLE IF NOT EXISTS prompt_texts (hash TEXT PRIMARY KEY, text TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS prompt_calls (
    thread_id TEXT NOT NULL, seq INTEGER NOT NULL, run_id TEXT NOT NULL, step INTEGER NOT NULL,
    created REAL NOT NULL, record TEXT NOT NULL, PRIMARY KEY (thread_id, seq)
);
"""


def text_hash(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()


@dataclass(frozen=True)
class PromptPart:
    """One labelled piece of the system prompt (V1)."""

    label: str  # "instructions" or "section <name> (<middleware>)"
    text: str
    cacheable: bool = False


@dataclass(frozen=True)
class Block:
    """One block of a rebuilt request: where it came from, its role, text and token count."""

    label: str
    role: str
    text: str
    tokens: int
    cacheable: bool = False


class PromptLog:
    """The ``prompt_calls`` / ``prompt_texts`` tables of a thread store."""

    def __init__(self, store: Store) -> None:
        self.store = store
        with store._lock:
            store._db.executescript(SCHEMA)
        self._known: set[str] = set()  # hashes this process stored or saw stored already
        self._pending: list[tuple[Any, ...]] = []
        self._seq: dict[str, int] = {}
        self._flushed = time.monotonic()
        self._tools: tuple[Any, str, list[str], str] | None = None  # key, JSON, names, hash of the tools

    def record(self, thread_id: str, run_id: str, step: int, parts: Sequence[PromptPart], request: ModelRequest,
               stored_count: int, records_count: int, model: str, usage: Usage | None, status: str, *,
               tool_cap: int | None = None) -> int:
        """Store one call (one transaction; texts only when new). Returns its number in the thread.
        ``tool_cap``: the cap on tool results the compressed view had then (``max_tool_response_chars``,
        V1: the inspector rebuilds the call with it, whatever the configuration says later)."""
        texts: dict[str, str] = {}
        ref = self._referrer(texts)
        system = [{"label": p.label, "hash": ref(p.text), "cacheable": p.cacheable} for p in parts if p.text]
        injected = []
        # A request is the first ``stored_count`` messages through the compression records plus what a
        # wrapper inserted (see ``rebuild``): with no record and no more messages than stored, nothing was
        # inserted, and the usual step skips a pass over the whole history (issue 9: 1,000 messages).
        if records_count or len(request.messages) != stored_count:
            for pos, m in enumerate(request.messages):
                if "task_notice" in m.meta:
                    injected.append({"pos": pos, "hash": ref(m.content),
                                     "label": f"task notice ({m.meta['task_notice']})"})
        key = tuple((t.name, t.description, id(t.parameters)) for t in request.tools)
        cached = self._tools if self._tools is not None and self._tools[0] == key else None
        if cached is None:
            tools_json = json.dumps([t.to_openai() for t in request.tools], sort_keys=True)
            cached = self._tools = (key, tools_json, [t.name for t in request.tools], text_hash(tools_json))
        record = {"system": system, "stored": stored_count, "records": records_count, "injected": injected,
                  "tools": ref(cached[1], cached[3]), "tool_names": cached[2], "model": model,
                  "messages": len(request.messages), "status": status,
                  "usage": usage.to_dict() if usage is not None else None}
        if tool_cap is not None:
            record["tool_cap"] = int(tool_cap)
        return self._add(thread_id, run_id, step, record, texts)

    def record_summary(self, thread_id: str, run_id: str, step: int, request: ModelRequest, model: str,
                       usage: Usage | None, status: str) -> int:
        """Store a compression's summary call (V1: every model call can be inspected): its instructions
        and the transcript it was sent, which is no stored message (``rebuild`` shows it as given).
        ``run_id`` is "" for "Compact now" outside a run."""
        texts: dict[str, str] = {}
        ref = self._referrer(texts)
        record = {"kind": "summary",
                  "system": [{"label": "summary instructions", "hash": ref(request.system), "cacheable": False}],
                  "stored": 0, "records": 0,
                  "injected": [{"pos": i, "hash": ref(m.content), "label": "the messages to summarise"}
                               for i, m in enumerate(request.messages)],
                  "tools": ref("[]"), "tool_names": [], "model": model, "messages": len(request.messages),
                  "status": status, "usage": usage.to_dict() if usage is not None else None}
        return self._add(thread_id, run_id, step, record, texts)

    def _referrer(self, texts: dict[str, str]) -> Callable[..., str]:
        """A text's hash for a record (``known``: already computed), the text put in ``texts`` when this
        process has not stored it yet."""
        def ref(text: str, known: str | None = None) -> str:
            h = known or text_hash(text)
            if h not in self._known:
                texts[h] = clean_text(text)  # R10: storable whatever a section or a notice holds
            return h

        return ref

    def _add(self, thread_id: str, run_id: str, step: int, record: dict[str, Any], texts: dict[str, str]) -> int:
        seq = self._next_seq(thread_id)
        self._pending.append((thread_id, seq, run_id, step, time.time(), json.dumps(record), texts))
        self._known.update(texts)
        # Written in batches (one transaction for several calls, issue 9's budget of a step), and whenever
        # anything reads the log: a crash loses at most the last second's records, never a run's data.
        if len(self._pending) >= 16 or time.monotonic() - self._flushed > 1.0:
            self.flush()
        return seq

    def _next_seq(self, thread_id: str) -> int:
        seq = self._seq.get(thread_id)
        if seq is None:
            with self.store._lock:
                row = self.store._db.execute("SELECT COALESCE(MAX(seq), 0) FROM prompt_calls WHERE thread_id=?",
                                             (thread_id,)).fetchone()
            seq = int(row[0])
        seq += 1
        self._seq[thread_id] = seq
        return seq

    def flush(self) -> None:
        """Write the records not written yet."""
        self._flushed = time.monotonic()
        pending, self._pending = self._pending, []
        if not pending:
            return
        try:
            with self.store.transaction() as db:
                for thread_id, seq, run_id, step, created, record, texts in pending:
                    for h, text in texts.items():
                        db.execute("INSERT OR IGNORE INTO prompt_texts(hash, text) VALUES (?,?)", (h, text))
                    db.execute("INSERT OR REPLACE INTO prompt_calls(thread_id, seq, run_id, step, created, record) "
                               "VALUES (?,?,?,?,?,?)", (thread_id, seq, run_id, step, created, record))
        except Exception:
            for *_, texts in pending:
                self._known.difference_update(texts)
            self._seq.clear()  # numbered again from the store
            raise

    def calls(self, thread_id: str) -> list[dict[str, Any]]:
        """Every stored call of a thread, oldest first (``seq``, ``run``, ``step``, ``time`` and the record)."""
        self.flush()
        with self.store._lock:
            rows = self.store._db.execute(
                "SELECT seq, run_id, step, created, record FROM prompt_calls WHERE thread_id=? ORDER BY seq",
                (thread_id,)).fetchall()
        return [{"seq": r[0], "run": r[1], "step": r[2], "time": r[3], **json.loads(r[4])} for r in rows]

    def text(self, h: str) -> str:
        self.flush()
        with self.store._lock:
            row = self.store._db.execute("SELECT text FROM prompt_texts WHERE hash=?", (h,)).fetchone()
        return row[0] if row else ""

    def delete_thread(self, thread_id: str) -> None:
        self.flush()
        self._seq.pop(thread_id, None)
        with self.store.transaction() as db:
            db.execute("DELETE FROM prompt_calls WHERE thread_id=?", (thread_id,))

    def size(self) -> int:
        """Bytes of the two tables' payload (the benchmark's store overhead)."""
        self.flush()
        with self.store._lock:
            a = self.store._db.execute("SELECT COALESCE(SUM(LENGTH(text)), 0) FROM prompt_texts").fetchone()[0]
            b = self.store._db.execute("SELECT COALESCE(SUM(LENGTH(record)), 0) FROM prompt_calls").fetchone()[0]
        return int(a) + int(b)


def rebuild(log: PromptLog, call: Mapping[str, Any], stored: Sequence[Message],
            records: Sequence[Mapping[str, Any]], view_of: Any) -> list[Block]:
    """V1: a stored call as the blocks that were sent, each labelled with its source and token count.
    ``view_of(messages, records)`` is the compressed view (harness/compression.py, C5)."""
    from workbench.engine.tokens import estimate_tokens

    blocks: list[Block] = []
    for part in call.get("system") or ():
        text = log.text(part["hash"])
        blocks.append(Block(part["label"], "system", text, estimate_tokens(text), bool(part.get("cacheable"))))
    view = view_of(list(stored[: int(call["stored"])]), list(records[: int(call["records"])]))
    labelled: list[tuple[str, Message]] = []
    for i, m in enumerate(view):
        if "compression" in m.meta:
            labelled.append((f"compression summary ({m.meta['compression']})", m))
        else:
            index = m.meta.get("stored", i)
            labelled.append((f"message #{index} ({m.role}{', ' + m.name if m.name else ''})", m))
    for inj in sorted(call.get("injected") or (), key=lambda x: x["pos"]):
        labelled.insert(min(int(inj["pos"]), len(labelled)), (inj["label"], Message.user(log.text(inj["hash"]))))
    for label, m in labelled:
        text = m.content
        if m.tool_calls:
            text += "".join(f"\n→ {c.name}({c.raw_arguments or json.dumps(c.arguments or {})})" for c in m.tool_calls)
        blocks.append(Block(label, m.role, text, estimate_tokens(text)))
    tools = log.text(call["tools"])
    if tools and tools != "[]":
        blocks.append(Block(f"tool schemas ({len(call.get('tool_names') or [])})", "tools", tools,
                            estimate_tokens(tools)))
    return blocks


def cache_prefix_end(blocks: Sequence[Block]) -> int:
    """The index after the last block of the cacheable prefix (instructions and cacheable sections)."""
    end = 0
    for i, b in enumerate(blocks):
        if b.role == "system" and (b.cacheable or b.label == "instructions"):
            end = i + 1
        elif b.role == "system":
            break
    return end


__all__ = ["Block", "PromptLog", "PromptPart", "cache_prefix_end", "rebuild", "text_hash"]
