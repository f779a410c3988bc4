"""The ``Session`` facade's calls on a thread's context (C5–C9, V1–V2): the compressed view the model sees,
the compressions and "Compact now", and the prompt log's calls rebuilt for the inspector.

A mixin of ``workbench.session.Session`` (one facade; split along its seams to keep files short).
"""

from __future__ import annotations

import logging
import os
import socket
from typing import TYPE_CHECKING, Any

from workbench.engine.claims import _Heartbeat
from workbench.engine.events import Event
from workbench.engine.messages import Message
from workbench.engine.usage import Usage
from workbench.errors import RunError, ThreadBusyError

if TYPE_CHECKING:
    from workbench.config import WorkbenchConfig
    from workbench.engine.agent import Engine
    from workbench.engine.store import Claim, Store

log = logging.getLogger(__name__)


class ContextCalls:
    """Compression and prompt provenance, on the session's thread (see the module)."""

    if TYPE_CHECKING:
        store: Store
        engine: Engine
        config: WorkbenchConfig
        thread_id: str

        @property
        def messages(self) -> list[Message]: ...

        @property
        def running(self) -> bool: ...

        def middleware(self, kind: type) -> Any: ...

    def _compression(self) -> Any:
        from workbench.harness.compression import CompressionMiddleware

        return self.middleware(CompressionMiddleware)

    def compression_records(self, thread_id: str | None = None) -> list[dict[str, Any]]:
        """The thread's compressions, oldest first: each with its trigger, tokens before/after, what each
        strategy did and what was lost (``lost``: indices and sizes of the messages cut or replaced)."""
        from workbench.harness.compression import CompressionStore

        return CompressionStore(self.store).records(thread_id or self.thread_id)

    def context_view(self) -> list[Message]:
        """The messages the model sees of this thread now (the compressed view, C5)."""
        from workbench.harness.compression import compressed_view

        return compressed_view(self.messages, self.compression_records(), self.config.compression.max_tool_response_chars)

    def context_figures(self) -> dict[str, Any]:
        """C9 between runs: the thread's view size (an estimate), the trigger, the model's window, and
        the newest compression (the window updates live from ``context_measured`` events). ``parts``:
        the next request by source as ``context_measured`` has it (``system_prompt`` and
        ``tool_schemas`` as the newest model call sent them, 0 before the first; the same estimate in
        characters / 4); ``tokens`` stays the view's own estimate."""
        from workbench.harness.compression import CHARS_PER_TOKEN, compressed_view, estimate

        mw = self._compression()
        records = self.compression_records()
        stored = self.messages
        view = compressed_view(stored, records, self.config.compression.max_tool_response_chars)
        parts = {"system_prompt": 0, "messages": 0, "tool_results": 0, "tool_schemas": 0}
        for m in view:
            parts["tool_results" if m.role == "tool" else "messages"] += estimate((m,))
        log = self.engine.prompt_log
        calls = log.calls(self.thread_id) if log is not None else []
        if calls:
            system = "\n\n".join(log.text(p["hash"]) for p in calls[-1].get("system") or ())
            parts["system_prompt"] = estimate((Message.system(system),))
            tools = log.text(calls[-1]["tools"]) if calls[-1].get("tools") else ""
            parts["tool_schemas"] = len(tools) // CHARS_PER_TOKEN if tools and tools != "[]" else 0
        return {"tokens": estimate(view), "messages": len(view), "stored_messages": len(stored),
                "trigger": mw.trigger if mw is not None else None,
                "window": getattr(mw, "_window", None) if mw is not None else None,
                "last": records[-1] if records else None, "parts": parts}

    def prompt_sections(self, seq: int | None = None, thread_id: str | None = None) -> list[dict[str, Any]]:
        """The system prompt of a model call (the newest when ``seq`` is None) by source, as the inspector
        labels it: ``label`` ("instructions", "section <name> (<middleware>)"), ``tokens``, ``cacheable``.
        Empty before the thread's first call. Cheap: no history is rebuilt (the Context panel, C9)."""
        from workbench.engine.tokens import estimate_tokens

        log = self.engine.prompt_log
        calls = log.calls(thread_id or self.thread_id) if log is not None else []
        if seq is not None:
            calls = [c for c in calls if c["seq"] == seq]
        if not calls or log is None:
            return []
        out = []
        for part in calls[-1].get("system") or ():
            text = log.text(part["hash"])
            out.append({"label": part["label"], "tokens": estimate_tokens(text), "cacheable": bool(part.get("cacheable"))})
        return out

    async def compact(self) -> dict[str, Any] | None:
        """"Compact now" (C7): compress this thread's history now, whatever its size (during a run: at its
        next model step). Returns the new record, or None when nothing could be made smaller. Outside a
        run it claims the thread for the whole compaction (R7): ``ThreadBusyError`` names the holder when
        a run or another compaction holds it, and a run or compaction asked meanwhile is refused."""
        mw = self._compression()
        if mw is None or mw.records_store is None:
            raise RunError("compression is not available in this session")
        if self.running:
            mw.force(self.thread_id)
            return None
        claim = self._claim_to_compact()
        beat: _Heartbeat | None = None
        seq = claim.next_event_seq

        def emit(type: str, **data: Any) -> None:
            # Stored under the claim, numbered after the thread's last event (no run numbers them now)
            nonlocal seq
            event = Event(type, self.thread_id, "", 0, data)
            if event.durable:
                event = Event(type, self.thread_id, "", 0, data, event.time, seq)
                self.store.append_events([event], claim=claim.token)
                seq += 1
            self.engine._publish(event)

        try:
            beat = _Heartbeat(self.store, claim)  # the summary call takes seconds: the claim stays fresh
            messages = self.messages  # read under the claim: what is compacted is what the next run sees
            records = mw.records_store.records(self.thread_id)
            return await mw.compress(messages, records, target=max(1, mw.trigger // 2), trigger="manual",
                                     thread_id=self.thread_id, emit=emit)
        finally:
            if beat is not None:
                beat.stop()
            try:
                self.store.release(claim)
            except Exception:  # it goes stale by itself (its pid ends with this process)
                log.exception("could not release the claim on thread %s", self.thread_id)

    def _claim_to_compact(self) -> Claim:
        """R7, C7: Compact now holds the thread, as a run does, from reading its history to storing the
        record — no run, resume or second compaction writes it meanwhile. Refused with the holder named
        (the CLI's exit 2) when a run or a compaction holds it."""
        try:
            return self.store.claim(self.thread_id)
        except ThreadBusyError as e:
            holder = self.store.holder(self.thread_id)
            if holder is None:  # it ended meanwhile: the store's own words
                raise
            where = "this" if holder.pid == os.getpid() and holder.host == socket.gethostname() else "another"
            raise ThreadBusyError(f"thread {self.thread_id} is running in {where} process ({holder.describe()})") from e

    # -- prompt provenance (V1, V2) ---------------------------------------------------------------------------
    def prompt_calls(self, thread_id: str | None = None) -> list[dict[str, Any]]:
        """The model calls of a thread, oldest first: ``seq``, ``run``, ``step``, ``time``, ``model``,
        ``status`` (ok, cut; a summary's ok or failed), ``usage``, ``messages`` (how many were sent),
        ``stored`` (how many stored messages the thread had then: the call's answer is stored message
        #``stored``), ``kind`` (``step``: the run's own call; ``summary``: a compression's, V1)."""
        log = self.engine.prompt_log
        calls = log.calls(thread_id or self.thread_id) if log is not None else []
        return [{**{k: c.get(k) for k in ("seq", "run", "step", "time", "model", "status", "usage", "messages",
                                          "stored")}, "kind": c.get("kind", "step")} for c in calls]

    def inspect_call(self, seq: int, thread_id: str | None = None) -> dict[str, Any]:
        """V2: one model call as sent — ``blocks`` (label, role, text, tokens, cacheable), ``cache_prefix_end``
        (blocks before it are the cacheable prefix), ``diff`` against the previous call (block labels
        ``added``/``removed``/``changed``), ``usage`` and ``model``. RunError for an unknown call."""
        from workbench.engine.prompt_log import cache_prefix_end, rebuild
        from workbench.harness.compression import compressed_view

        tid = thread_id or self.thread_id
        log = self.engine.prompt_log
        calls = log.calls(tid) if log is not None else []
        by_seq = {c["seq"]: c for c in calls}
        if log is None or seq not in by_seq:
            raise RunError(f"no model call #{seq} in thread {tid}")
        cp = self.store.latest_checkpoint(tid)
        stored = [Message.from_dict(m) for m in (cp.state.get("messages") or [])] if cp else []
        records = self.compression_records(tid)
        cap = self.config.compression.max_tool_response_chars

        def blocks_of(call: dict[str, Any]) -> list[Any]:
            # V1: the view as it was sent — with the cap on tool results then (a call logged before the
            # cap was stored: the configuration's)
            at = int(call.get("tool_cap", cap))
            return rebuild(log, call, stored, records, lambda m, r: compressed_view(m, r, at))

        blocks = blocks_of(by_seq[seq])
        earlier = [c for c in calls if c["seq"] < seq]
        diff: dict[str, list[str]] = {"added": [], "removed": [], "changed": []}
        if earlier:
            before = {b.label: b.text for b in blocks_of(earlier[-1])}
            now = {b.label: b.text for b in blocks}
            diff = {"added": [k for k in now if k not in before], "removed": [k for k in before if k not in now],
                    "changed": [k for k in now if k in before and before[k] != now[k]]}
        call = by_seq[seq]
        return {"seq": seq, "model": call.get("model"), "usage": Usage.from_dict(call.get("usage")),
                "status": call.get("status"), "blocks": blocks, "cache_prefix_end": cache_prefix_end(blocks),
                "diff": diff, "previous": earlier[-1]["seq"] if earlier else None}
