"""Context compression (C1–C9): the model sees a compressed *view* of the stored history; nothing is lost.

- C5 The stored history keeps every message. Each compression is a *record* (the ``compressions``
  table of the thread store: ``CompressionStore``) of operations on stored message indices; the view
  is ``compressed_view(messages, records, cap)``, a pure function — so compression survives restarts
  and a second compression never loses what the first kept (its summary summarises the first one's,
  and carries every fact the first carried).
- C1 Triggered before each model step when the request would be over ``max_input_tokens`` (the
  input tokens the provider reported for the previous call plus an estimate of what was added since;
  an estimate of the whole request before there is one) or the view has more than ``max_messages``.
  C7: ``max_input_tokens`` null = 85% of the model's context window (litellm's model info), else
  100,000.
- C2 Strategies, cheapest first, each switchable (``enabled``): dedupe older duplicate tool responses
  (same tool and input; the newest ``keep_recent`` stay), truncate older tool responses to
  ``max_chars`` (the newest ``preserve_recent`` intact), summarise older messages with a (cheaper)
  model — skipped when the first two saved at least ``skip_summarization_threshold`` of the tokens and
  got under the trigger — and, last, drop older messages with a notice. The newest
  ``preserve_recent`` messages are never summarised or dropped.
- C3 every tool response is capped at ``max_tool_response_chars`` in every view.
- C4 leading system messages are kept; a summarised or dropped range never ends between an assistant
  message's tool calls and their results, so the view never starts with a cut-off tool response.
- C8 a summary carries, verbatim, the file paths, commands, URLs and numbers named in what it replaces
  (collected mechanically, bounded); each record lists what it cut or dropped (indices, sizes).
- Events: durable ``compression_applied`` (record id, trigger, tokens before/after, per-strategy
  figures — no content); live ``context_measured`` after each call (the request's size by source,
  the trigger and the window: the Context panel, C9) and ``context_warning`` once per thread when a
  request first comes within 90% of the trigger before any compression (C7: the person is warned
  before the first automatic compaction).
"""

from __future__ import annotations

import itertools
import json
import re
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from workbench.config import CompressionConfig
from workbench.engine import model_info
from workbench.engine.messages import Message, ModelRequest, ModelResponse, canonical_arguments
from workbench.engine.middleware import AgentMiddleware, CallModel, HookContext
from workbench.engine.prompt_log import PromptLog
from workbench.engine.store import Store
from workbench.engine.usage import Usage

#: Characters per token for the fast estimates that plan a compression (the trigger uses the
#: provider's reported count whenever there is one).
CHARS_PER_TOKEN = 4
DEFAULT_TRIGGER = 100_000
WINDOW_SHARE = 0.85
WARN_SHARE = 0.90
MAX_FACTS = 200
MAX_NUMBERS = 60  # of those, numbers (line numbers and sizes are many; paths and commands come first)
MAX_FACT_CHARS = 300

DEFAULT_SUMMARY_MODEL = "openai/gpt-4.1-nano"  # compression.summarize.model's default (config/schema.py)

SUMMARY_PROMPT = (
    "You compress a conversation between a user and a coding agent so the agent can go on without it. "
    "Write a concise summary: the goal, what was decided, what was done (files, commands, results), what "
    "is still open. Keep names, paths and numbers exact. Answer with the summary only."
)

SCHEMA = """
CREATE TABLE IF NOT EXISTS compressions (
    thread_id TEXT NOT NULL, seq INTEGER NOT NULL, created REAL NOT NULL, record TEXT NOT NULL,
    PRIMARY KEY (thread_id, seq)
);
"""


# -- records and the view (pure) --------------------------------------------------------------------------
@dataclass
class Plan:
    """A compression being planned: operations on stored indices, what each strategy did, what was lost."""

    upto: int
    ops: list[dict[str, Any]] = field(default_factory=list)
    strategies: dict[str, dict[str, int]] = field(default_factory=dict)

    def record(self, *, trigger: str, tokens_before: int, tokens_after: int, reason: str) -> dict[str, Any]:
        lost = [{k: op[k] for k in ("op", "index", "start", "end", "chars", "max") if k in op} for op in self.ops]
        return {"upto": self.upto, "ops": self.ops, "strategies": self.strategies, "trigger": trigger,
                "tokens_before": tokens_before, "tokens_after": tokens_after, "reason": reason,
                "time": time.time(), "lost": lost}


def compressed_view(messages: Sequence[Message], records: Sequence[Mapping[str, Any]], cap: int = 0, *,
                    checked: int = 0) -> list[Message]:
    """The model's view of a stored history (C5): every record's operations applied in order, every
    tool response capped at ``cap`` characters (C3; 0 = no cap). Pure: the stored messages are not
    changed; the same inputs give the same view. ``checked``: the first ``checked`` messages are known
    to be within the cap (the middleware remembers it between steps, so a step checks only new ones)."""
    if not records and not (cap and any(m.role == "tool" and len(m.content) > cap
                                        for m in itertools.islice(messages, checked, None))):
        return list(messages)  # nothing to change: the common case, every step of a short thread
    lead = _leading_system(messages)
    replaced: dict[int, str] = {}
    span: Mapping[str, Any] | None = None  # the newest summarise/drop range (it covers the earlier ones)
    for rec in records:
        for op in rec.get("ops") or ():
            kind = op.get("op")
            if kind in ("summarize", "drop"):
                if span is None or int(op["end"]) >= int(span["end"]):
                    span = op
            elif kind == "dedupe":
                i = int(op["index"])
                if 0 <= i < len(messages):
                    replaced[i] = (f"[An older result of this call, {op.get('chars', 0)} characters, omitted: the same "
                                   "call was made again later and its newer result is below.]")
            elif kind == "truncate":
                i = int(op["index"])
                if 0 <= i < len(messages) and i not in replaced:
                    replaced[i] = _cut(messages[i].content, int(op["max"]))
    out = list(messages[:lead])
    start = lead
    if span is not None:
        end = min(int(span["end"]), len(messages))
        out.append(Message.user(_span_text(span), compression=span.get("op"), stored=end - 1))
        start = max(lead, end)
    # Once the view differs from the history, each kept message says which stored one it is (``stored``
    # in meta, never sent), so a later wrapper can place what it adds by stored position (task notices).
    mark = bool(records)
    for i in range(start, len(messages)):
        m = messages[i]
        content = replaced.get(i, m.content)
        if m.role == "tool" and cap and len(content) > cap:
            content = _cut(content, cap)
        if content is m.content and not mark:
            out.append(m)
        else:
            out.append(Message(m.role, content, m.tool_calls, m.tool_call_id, m.name,
                               {**m.meta, "stored": i} if mark else dict(m.meta)))
    return out


def stored_position(view: Sequence[Message], at: int) -> int:
    """Where, in a view, what comes after stored message ``at - 1`` goes (``at`` = a stored index)."""
    for pos, m in enumerate(view):
        stored = m.meta.get("stored")
        if stored is not None and int(stored) >= at:
            return pos
    return len(view)


def _span_text(op: Mapping[str, Any]) -> str:
    n = int(op["end"]) - int(op.get("start", 0))
    if op.get("op") == "drop":
        text = (f"[{n} earlier messages of this conversation were dropped to fit the context window. "
                "Ask the user if you need what they said.]")
        if op.get("text"):  # an earlier summary's text, kept
            text += f"\n[An earlier summary of the start of the conversation]\n{op['text']}"
    else:
        text = f"[Summary of {n} earlier messages]\n{op.get('text', '')}"
    facts = op.get("facts") or []
    if facts:
        text += "\n\nNamed in those messages, verbatim: " + "; ".join(str(f) for f in facts)
    return text


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[… {len(text) - limit} more characters cut to fit the context window]"


def _leading_system(messages: Sequence[Message]) -> int:
    n = 0
    while n < len(messages) and messages[n].role == "system":
        n += 1
    return n


def estimate(messages: Sequence[Message]) -> int:
    """A fast token estimate of messages (content and tool-call arguments)."""
    chars = 0
    for m in messages:
        chars += len(m.content) + 12
        for c in m.tool_calls:
            chars += len(c.raw_arguments or "") + len(c.name) + 12
    return chars // CHARS_PER_TOKEN


def safe_end(messages: Sequence[Message], end: int) -> int:
    """C4: move a range end past the tool results of an assistant message inside the range."""
    while end < len(messages) and messages[end].role == "tool":
        end += 1
    return end


def plan(messages: Sequence[Message], records: Sequence[Mapping[str, Any]], cfg: CompressionConfig,
         target: int) -> tuple[Plan, list[Message]]:
    """The cheap strategies (dedupe, truncate) over the current view; returns the plan and the view
    with them applied. Pure."""
    p = Plan(upto=len(messages))
    touched = _touched(records)
    tools = _tool_results(messages)
    covered = _covered(records)
    if cfg.dedupe.enabled:
        groups: dict[str, list[int]] = {}
        for i, key in tools:
            if i >= covered:
                groups.setdefault(key, []).append(i)
        n = saved = 0
        for idxs in groups.values():
            for i in idxs[: max(0, len(idxs) - max(1, cfg.dedupe.keep_recent))]:
                if i in touched:
                    continue
                chars = len(messages[i].content)
                if chars < 200:
                    continue  # a placeholder would not be shorter
                p.ops.append({"op": "dedupe", "index": i, "chars": chars})
                touched.add(i)
                n += 1
                saved += chars // CHARS_PER_TOKEN
        if n:
            p.strategies["dedupe"] = {"messages": n, "tokens_saved": saved}
    current = compressed_view(messages, [*records, {"ops": p.ops}], cfg.max_tool_response_chars)
    if cfg.truncate.enabled and estimate(current) > target:
        recent = {i for i, _ in tools[-cfg.truncate.preserve_recent:]} if cfg.truncate.preserve_recent else set()
        n = saved = 0
        for i, _ in tools:
            if i < covered or i in touched or i in recent:
                continue
            chars = len(messages[i].content)
            if chars > cfg.truncate.max_chars:
                p.ops.append({"op": "truncate", "index": i, "chars": chars, "max": cfg.truncate.max_chars})
                touched.add(i)
                n += 1
                saved += (chars - cfg.truncate.max_chars) // CHARS_PER_TOKEN
        if n:
            p.strategies["truncate"] = {"messages": n, "tokens_saved": saved}
        current = compressed_view(messages, [*records, {"ops": p.ops}], cfg.max_tool_response_chars)
    return p, current


def span_to_replace(messages: Sequence[Message], preserve_recent: int) -> tuple[int, int] | None:
    """The range a summary or a drop replaces: after the leading system messages, up to the newest
    ``preserve_recent`` messages (moved past tool results, C4); None when there is nothing to replace."""
    lead = _leading_system(messages)
    end = safe_end(messages, max(lead, len(messages) - max(1, preserve_recent)))
    if end >= len(messages):  # the tool results reach the end: keep the whole last exchange
        end = len(messages) - max(1, preserve_recent)
        while end > lead and messages[end].role == "tool":
            end -= 1
    return (lead, end) if end - lead >= 2 else None


def collect_facts(messages: Sequence[Message], earlier: Sequence[str] = ()) -> list[str]:
    """C8: the paths, URLs, commands and numbers named in ``messages`` (and every fact an earlier summary
    carried, first), verbatim, deduplicated, bounded. Collected kind by kind — paths and URLs before
    commands before numbers — so a file full of line numbers cannot crowd a path out."""
    seen: dict[str, None] = {f: None for f in earlier}
    texts = [t for m in messages for t in (m.content, *(canonical_arguments(c.arguments or {}) for c in m.tool_calls))]
    for kind, patterns in _FACT_KINDS:
        budget = MAX_FACTS - len(seen) if kind != "numbers" else min(MAX_NUMBERS, MAX_FACTS - len(seen))
        added = 0
        for text in texts:
            for pattern in patterns:
                for hit in pattern.findall(text or ""):
                    hit = hit.strip().rstrip(".,;:)")
                    if 2 <= len(hit) <= MAX_FACT_CHARS and hit not in seen:
                        if added >= budget:
                            break
                        seen[hit] = None
                        added += 1
    return list(seen)


_FACT_KINDS: tuple[tuple[str, tuple[re.Pattern[str], ...]], ...] = (
    ("locations", (
        re.compile(r"https?://[^\s\"'<>)]+"),
        re.compile(r"(?:(?<=\s)|(?<=^)|(?<=[\"'`(]))(/[\w.\-]+(?:/[\w.\-]+)+)"),  # absolute paths
    )),
    ("commands", (
        re.compile(r"`([^`\n]{2,200})`"),  # inline code: commands and names
        re.compile(r"(?m)^\$ (.{2,200})$"),  # shell lines
        re.compile(r"\"command\": \"([^\"]{2,200})\""),  # a shell tool's argument
    )),
    ("numbers", (
        re.compile(r"(?<![\w.])(\d+(?:[.,]\d+)*(?:\s?(?:%|ms|s|MB|KB|GB|tokens))?)(?![\w])"),
    )),
)


def _tool_results(messages: Sequence[Message]) -> list[tuple[int, str]]:
    """Tool responses with the key of the call that produced them (tool name + canonical input)."""
    calls: dict[str, str] = {}
    out = []
    for i, m in enumerate(messages):
        for c in m.tool_calls:
            calls[c.id] = f"{c.name}:{canonical_arguments(c.arguments or {})}"
        if m.role == "tool":
            out.append((i, calls.get(m.tool_call_id or "", f"?{i}")))
    return out


def _touched(records: Sequence[Mapping[str, Any]]) -> set[int]:
    return {int(op["index"]) for r in records for op in r.get("ops") or () if "index" in op}


def _covered(records: Sequence[Mapping[str, Any]]) -> int:
    ends = [int(op["end"]) for r in records for op in r.get("ops") or () if op.get("op") in ("summarize", "drop")]
    return max(ends, default=0)


def _newest_summary(records: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The newest summary (or a drop that carries one) among the records."""
    found = None
    for r in records:
        for op in r.get("ops") or ():
            if op.get("op") in ("summarize", "drop") and op.get("text"):
                found = op
    return found


def _earlier_facts(records: Sequence[Mapping[str, Any]]) -> list[str]:
    out: list[str] = []
    for r in records:
        for op in r.get("ops") or ():
            if op.get("op") in ("summarize", "drop"):
                out.extend(str(f) for f in op.get("facts") or ())
    return out


# -- the store of records -----------------------------------------------------------------------------------
class CompressionStore:
    """Compression records per thread in the thread store (C5): append-only, each referring only to
    committed messages, so a record written just before a crash is still right after it."""

    def __init__(self, store: Store) -> None:
        self.store = store
        with store._lock:
            store._db.executescript(SCHEMA)

    def records(self, thread_id: str) -> list[dict[str, Any]]:
        with self.store._lock:
            rows = self.store._db.execute("SELECT seq, record FROM compressions WHERE thread_id=? ORDER BY seq",
                                          (thread_id,)).fetchall()
        return [{**json.loads(r[1]), "id": r[0]} for r in rows]

    def add(self, thread_id: str, record: Mapping[str, Any]) -> int:
        with self.store.transaction() as db:
            row = db.execute("SELECT COALESCE(MAX(seq), 0) FROM compressions WHERE thread_id=?", (thread_id,)).fetchone()
            seq = int(row[0]) + 1
            db.execute("INSERT INTO compressions(thread_id, seq, created, record) VALUES (?,?,?,?)",
                       (thread_id, seq, time.time(), json.dumps(record)))
        return seq

    def delete_thread(self, thread_id: str) -> None:
        with self.store.transaction() as db:
            db.execute("DELETE FROM compressions WHERE thread_id=?", (thread_id,))


# -- the middleware ------------------------------------------------------------------------------------------
Summarizer = Callable[[list[Message]], Awaitable[tuple[str, Usage]]]


class CompressionMiddleware(AgentMiddleware):
    """Sends the model the compressed view and compresses when a request would be too big (see the module)."""

    def __init__(self, config: CompressionConfig) -> None:
        self.config = config
        self.records_store: CompressionStore | None = None
        self._summarizer: Summarizer | None = None
        self._window: int | None = None
        self._model_name = ""
        self._last: dict[str, tuple[int, int]] = {}  # thread -> (reported input tokens, view length then)
        self._checked: dict[str, tuple[int, Message, int]] = {}  # thread -> (n within the cap, messages[n-1], cap)
        self._warned: set[str] = set()
        self._forced: set[str] = set()
        self.summary_model = ""  # the summariser's model string, for its usage row (bind_compression)
        self.prompt_log: PromptLog | None = None  # where its calls are logged (V1, bind_compression)
        self._sums: dict[str, tuple[int, int, int, int]] = {}  # thread -> (records, view length, tokens by role)

    def bind(self, store: Store, summarizer: Summarizer | None, model_name: str = "") -> None:
        """Attach to the thread store, the summariser (a model call) and the model whose window sets
        the default trigger (C7)."""
        self.records_store = CompressionStore(store)
        self._summarizer = summarizer
        self._model_name = model_name

    @property
    def trigger(self) -> int:
        """C7: the input size that triggers a compression."""
        if self.config.max_input_tokens:
            return int(self.config.max_input_tokens)
        if self._window is None and self._model_name and model_info.known(self._model_name):
            # asked once, when it can be answered (a model host's look-up, or litellm imported here): a
            # model litellm does not know costs a raised exception per look-up
            self._window = model_info.context_window(self._model_name)
            self._model_name = ""
        if self._window:
            return int(self._window * WINDOW_SHARE)
        return DEFAULT_TRIGGER

    def force(self, thread_id: str) -> None:
        """Compact at the thread's next model step, whatever its size ("Compact now" during a run)."""
        self._forced.add(thread_id)

    async def wrap_model_call(self, request: ModelRequest, call_next: CallModel, ctx: HookContext) -> ModelResponse:
        if self.records_store is None:
            return await call_next(request)
        if self._window is None and self._model_name and not self.config.max_input_tokens:
            # C7: the window a model host is looking up (a stop ends the wait, R6)
            await model_info.settled(self._model_name, stopped=lambda: ctx.stopping)
        messages = list(request.messages)
        records = self.records_store.records(ctx.thread_id)
        view = compressed_view(messages, records, self.config.max_tool_response_chars,
                               checked=self._within_cap(ctx.thread_id, messages))
        system_tokens, schema_tokens = estimate([Message.system(request.system)]), _schema_tokens(request)
        fixed = system_tokens + schema_tokens
        size = self._size(ctx.thread_id, view, fixed)
        forced = ctx.thread_id in self._forced
        over = size > self.trigger or (self.config.max_messages and len(view) > self.config.max_messages)
        near = over or size >= WARN_SHARE * self.trigger
        if near and not forced and not records and ctx.thread_id not in self._warned:
            # C7: once a thread, near the trigger — or past it, as its first automatic compaction is made
            # (one step, a large file read, can go from under the warning's share straight past it)
            self._warn(ctx, size, now=bool(over))
        if forced or over:
            self._forced.discard(ctx.thread_id)
            # Plan in the estimate's units: the view must lose what the request is over the trigger, and
            # a margin (a tenth of the trigger) so the next steps do not compress again at once.
            target = estimate(view) - max(0, size - self.trigger) - self.trigger // 10
            record = await self.compress(messages, records, target=max(1, target),
                                         trigger="manual" if forced and not over else "auto", fixed=fixed, ctx=ctx)
            if record is not None:
                records = self.records_store.records(ctx.thread_id)
                view = compressed_view(messages, records, self.config.max_tool_response_chars)
                size = estimate(view) + fixed
                self._last.pop(ctx.thread_id, None)
        response = await call_next(request.replace(messages=tuple(view),
                                                    meta={**request.meta, "compression_records": len(records),
                                                          "compression_cap": self.config.max_tool_response_chars}))
        if response.usage.input_tokens:
            self._last[ctx.thread_id] = (response.usage.input_tokens, len(view))
        ctx.emit("context_measured", **self._measure(ctx.thread_id, len(records), view, size,
                                                     system_tokens, schema_tokens))
        return response

    def _warn(self, ctx: HookContext, size: int, *, now: bool) -> None:
        self._warned.add(ctx.thread_id)
        when = ("it is over the trigger, so now" if now else "at the trigger")
        ctx.emit("context_warning", tokens=size, trigger=self.trigger,
                 text=f"This thread's context is at {size:,} of {self.trigger:,} tokens: {when}, older tool "
                      "results are shortened and older messages summarised (nothing is deleted from the thread). "
                      "Compact now to do it at once, or raise compression.max_input_tokens.")

    def _measure(self, thread_id: str, n_records: int, view: Sequence[Message], size: int, system_tokens: int,
                 schema_tokens: int) -> dict[str, Any]:
        """``measure`` kept up incrementally: the view only grows between compressions, so only its new
        messages are counted (the history may be 10,000 messages long: this runs every step)."""
        cached = self._sums.get(thread_id)
        if cached is None or cached[0] != n_records or cached[1] > len(view):
            cached = (n_records, 0, 0, 0)
        _, done, msgs, tools = cached
        for m in view[done:]:
            n = estimate((m,))
            if m.role == "tool":
                tools += n
            else:
                msgs += n
        self._sums[thread_id] = (n_records, len(view), msgs, tools)
        return {"tokens": size, "trigger": self.trigger, "window": self._window, "messages": len(view),
                "parts": {"system_prompt": system_tokens, "messages": msgs, "tool_results": tools,
                          "tool_schemas": schema_tokens}}

    def _within_cap(self, thread_id: str, messages: list[Message]) -> int:
        """How many leading ``messages`` are known to be within the tool-response cap (C3). Remembered
        from the thread's previous step: within a run the history is the same message objects, only
        longer (append-only), so a step checks its new messages, not all 1,000 of them (issue 9)."""
        cap = self.config.max_tool_response_chars
        if not cap:
            return 0
        known = self._checked.get(thread_id)
        n = 0
        if known is not None and known[2] == cap and 0 < known[0] <= len(messages) and messages[known[0] - 1] is known[1]:
            n = known[0]
        while n < len(messages) and not (messages[n].role == "tool" and len(messages[n].content) > cap):
            n += 1
        if n:
            self._checked[thread_id] = (n, messages[n - 1], cap)
        return n

    def _size(self, thread_id: str, view: Sequence[Message], fixed: int) -> int:
        last = self._last.get(thread_id)
        if last is not None and last[1] <= len(view):
            return last[0] + estimate(view[last[1]:])
        return estimate(view) + fixed

    async def compress(self, messages: Sequence[Message], records: Sequence[Mapping[str, Any]], *, target: int,
                       trigger: str, fixed: int = 0, ctx: HookContext | None = None,
                       thread_id: str | None = None, emit: Callable[..., Any] | None = None) -> dict[str, Any] | None:
        """Plan and store one compression of ``messages``; returns its record (None when nothing could be
        made smaller). ``ctx`` inside a run; else ``thread_id`` and ``emit`` (Compact now outside a run)."""
        assert self.records_store is not None
        cfg = self.config
        before = estimate(compressed_view(messages, records, cfg.max_tool_response_chars))
        p, view = plan(messages, records, cfg, target)
        after = estimate(view)
        cheap_saved = before - after
        # C2: no summary when the cheap strategies got under the target and saved enough ("Compact now"
        # always summarises what is older than the recent messages).
        skip = after <= target and bool(before) and cheap_saved / before >= cfg.skip_summarization_threshold
        reason = ""
        summarized = False
        if trigger == "manual" or not skip:
            span = span_to_replace(messages, cfg.summarize.preserve_recent if cfg.summarize.enabled
                                   else cfg.preserve_recent)
            if span is not None and span[1] > _covered(records):
                start, end = span
                old_view = compressed_view(messages[:end], [*records, {"ops": p.ops}], cfg.max_tool_response_chars)
                summary = None
                if cfg.summarize.enabled and self._summarizer is None:
                    reason = "no summariser for this model (the demo model cannot summarise)"
                if cfg.summarize.enabled and self._summarizer is not None:
                    sent = old_view[_leading_system(messages):]
                    try:
                        text, usage = await self._summarizer(sent)
                        self._count_summary(usage, ctx, tid=thread_id, emit=emit)
                        self._log_summary(sent, usage, "ok", ctx, tid=thread_id)
                        summarized = True
                        facts = collect_facts(messages[start:end], _earlier_facts(records))
                        summary = {"op": "summarize", "start": start, "end": end, "text": text.strip(),
                                   "facts": facts, "chars": sum(len(m.content) for m in messages[start:end])}
                    except Exception as e:  # the summariser failed: fall back to dropping, and say why
                        reason = f"the summary failed ({type(e).__name__}: {str(e)[:200]})"
                        if not summarized:
                            self._log_summary(sent, None, "failed", ctx, tid=thread_id)
                if summary is not None:
                    p.ops.append(summary)
                    p.strategies["summarize"] = {"messages": end - start, "tokens_saved": 0}
                elif cfg.drop.enabled:
                    drop: dict[str, Any] = {"op": "drop", "start": start, "end": end,
                                            "chars": sum(len(m.content) for m in messages[start:end])}
                    earlier = _newest_summary(records)
                    if earlier is not None:  # what an earlier summary kept stays (C8), even when this one failed
                        drop["text"], drop["facts"] = earlier.get("text", ""), list(earlier.get("facts") or [])
                    p.ops.append(drop)
                    p.strategies["drop"] = {"messages": end - start, "tokens_saved": 0}
                view = compressed_view(messages, [*records, {"ops": p.ops}], cfg.max_tool_response_chars)
                saved = after - estimate(view)
                for k in ("summarize", "drop"):
                    if k in p.strategies:
                        p.strategies[k]["tokens_saved"] = max(0, saved)
                after = estimate(view)
        if not p.ops:
            return None
        record = p.record(trigger=trigger, tokens_before=before + fixed, tokens_after=after + fixed, reason=reason)
        tid = ctx.thread_id if ctx is not None else thread_id
        assert tid is not None
        record["id"] = self.records_store.add(tid, record)
        data = {"compression": record["id"], "trigger": trigger, "tokens_before": record["tokens_before"],
                "tokens_after": record["tokens_after"], "strategies": record["strategies"]}
        if reason:
            data["note"] = reason
        if ctx is not None:
            ctx.emit("compression_applied", **data)
        elif emit is not None:
            emit("compression_applied", **data)
        if summarized and ctx is not None:
            from workbench.harness.budget import recheck_budgets

            # B2/B4: the summary was spent before the call it made room for: a hard limit it reached stops
            # the run here, an interrupting one asks (the record above is kept: the summary is paid for)
            recheck_budgets(ctx)
        return record


    def _log_summary(self, sent: Sequence[Message], usage: Usage | None, status: str, ctx: HookContext | None, *,
                     tid: str | None) -> None:
        """V1: the summary call in the thread's prompt log, as it was sent (never fails the compression)."""
        log = self.prompt_log
        thread = ctx.thread_id if ctx is not None else tid
        if log is None or thread is None:
            return
        try:
            log.record_summary(thread, ctx.run_id if ctx is not None else "", ctx.step if ctx is not None else 0,
                               summary_request(sent), self.summary_model or "summariser", usage, status)
        except Exception:  # noqa: BLE001 - a full disk must not undo a summary that was paid for
            import logging

            logging.getLogger(__name__).exception("could not store the summary call of thread %s", thread)

    def _count_summary(self, usage: Usage, ctx: HookContext | None, *, tid: str | None,
                       emit: Callable[..., Any] | None) -> None:
        """R5, B4: the summary is a model call of the thread and counts as one — in its usage and
        toward every budget. In a run it is one of the step's calls (``compress`` checks the budgets
        again before the call the summary made room for); "Compact now" outside a run adds it to the
        thread's stored usage, where the next run's session budgets see it."""
        usage = usage.as_call()
        model = self.summary_model or "summariser"
        if ctx is not None:
            ctx.count_model_call(model, usage)
            return
        assert self.records_store is not None and tid is not None
        total = self.records_store.store.add_usage(tid, model, usage)
        if emit is not None:
            emit("model_call_finished", model=model, usage=usage.to_dict())
            emit("usage_updated", run_usage=usage.to_dict(), thread_usage=total.to_dict(), model=model,
                 call=usage.to_dict())


def summary_request(messages: Sequence[Message]) -> ModelRequest:
    """The summariser's request: the instructions, and the messages rendered as one transcript."""
    lines = []
    for m in messages:
        text = m.content if m.role != "tool" else _cut(m.content, 2000)
        calls = "".join(f"\n  -> {c.name}({(c.raw_arguments or '')[:500]})" for c in m.tool_calls)
        lines.append(f"{m.role}: {text}{calls}")
    body = _cut("\n".join(lines), 400_000)
    return ModelRequest(system=SUMMARY_PROMPT, messages=(Message.user(body),))


def make_summarizer(model: Any) -> Summarizer:
    """A summariser over ``model`` (a ``Model``): the messages rendered as a transcript, one call."""
    from workbench.engine.messages import ModelDelta

    async def summarize(messages: list[Message]) -> tuple[str, Usage]:
        request = summary_request(messages)
        final = None
        async for item in model.stream(request):
            if not isinstance(item, ModelDelta):
                final = item
        if final is None or not final.message.content.strip():
            raise RuntimeError("the summariser gave no text")
        return final.message.content, final.usage

    return summarize


def bind_compression(stack: Sequence[AgentMiddleware], store: Store, model_for: Callable[[str | None], Any],
                     model_name: str, prompt_log: PromptLog | None = None) -> CompressionMiddleware | None:
    """Wire a stack's compression middleware: the records in ``store``, the summariser's model
    (``compression.summarize.model``, None = the run's own: ``model_for(None)``), the run's model name."""
    for mw in stack:
        if isinstance(mw, CompressionMiddleware):
            name = mw.config.summarize.model

            async def summarize(messages: list[Message]) -> tuple[str, Usage]:
                return await make_summarizer(model_for(name))(messages)

            usable = mw.config.summarize.enabled and not (model_name == "demo" and name in (None, DEFAULT_SUMMARY_MODEL))
            mw.bind(store, summarize if usable else None, model_name)
            mw.summary_model = name or model_name
            mw.prompt_log = prompt_log
            return mw
    return None


_SCHEMA_TOKENS: dict[tuple[Any, ...], int] = {}


def _schema_tokens(request: ModelRequest) -> int:
    key = tuple((t.name, t.description, len(t.parameters)) for t in request.tools)
    n = _SCHEMA_TOKENS.get(key)
    if n is None:
        n = sum(len(json.dumps(t.to_openai())) for t in request.tools) // CHARS_PER_TOKEN
        if len(_SCHEMA_TOKENS) > 64:
            _SCHEMA_TOKENS.clear()
        _SCHEMA_TOKENS[key] = n
    return n


def measure(request: ModelRequest, view: Sequence[Message], trigger: int, window: int | None,
            size: int) -> dict[str, Any]:
    """C9: the request's size by source (estimates), for the Context panel."""
    by_role = {"messages": 0, "tool_results": 0}
    for m in view:
        by_role["tool_results" if m.role == "tool" else "messages"] += estimate([m])
    parts = {"system_prompt": estimate([Message.system(request.system)]), **by_role,
             "tool_schemas": _schema_tokens(request)}
    return {"tokens": size, "trigger": trigger, "window": window, "parts": parts, "messages": len(view)}


__all__ = ["CompressionMiddleware", "CompressionStore", "Plan", "bind_compression", "make_summarizer", "collect_facts", "compressed_view",
           "estimate", "measure", "plan", "safe_end", "span_to_replace", "stored_position"]
