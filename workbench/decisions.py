"""Pending decisions across a workspace (Q1, Q2): the value type the decision inbox lists, how they
are collected from the store, the per-item decisions kept while a batch is decided part-way, and
abandoning a suspended run ("Stop this run").

No Qt here: the Session exposes these as named calls (``pending_decisions``, ``record_decision``,
``decided``, ``abandon``) and the window's inbox and approval dialog both go through them, so
answering in either place is the same call.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from workbench.engine.middleware import Question
from workbench.engine.tool_calls import QuestionChanged, changed_message, question_fingerprint
from workbench.errors import RunError

if TYPE_CHECKING:
    from workbench.engine.agent import Engine
    from workbench.engine.middleware import RunResult
    from workbench.engine.store import Store

DECISIONS = ("approve", "edit", "reject", "respond")
"""The decision names ``Session.resume`` accepts (P3, B3)."""

ABANDON_MESSAGE = "The user stopped the run."


@dataclass(frozen=True)
class PendingDecision:
    """One question a suspended run waits on, with where it comes from (Q1).

    ``source`` is where the run lives: ``"thread"`` (a thread of this workspace, the current one when
    ``current``) or ``"task"`` (a background sub-agent task's thread: ``agent`` names the sub-agent,
    ``task_id`` the task; answer it with ``Session.answer_task``, D9).
    ``index``/``count`` place it in its batch (the questions one step asked at once, Q2); ``draft`` is
    the decision already made for it while the batch was left part-way, else None.
    """

    question: Question
    thread_id: str
    thread_title: str
    asked_at: float
    source: str = "thread"
    agent: str = "main"
    current: bool = False
    index: int = 0
    count: int = 1
    draft: Mapping[str, Any] | None = field(default=None, compare=False)
    task_id: str | None = None

    @property
    def id(self) -> str:
        return self.question.id

    @functools.cached_property
    def key(self) -> str:
        """What tells this question apart from every other one waiting: two threads' calls may share an id
        (providers number calls call_0 in every message), and a question asked again under its id (another
        step's call) is another question — its thread, id and fingerprint (R3/Q)."""
        return "\0".join((self.thread_id, self.task_id or "", self.id, question_fingerprint(self.question)))

    @property
    def kind(self) -> str:
        return self.question.kind

    @property
    def tool(self) -> str:
        return str(self.question.payload.get("tool") or "")

    @property
    def arguments(self) -> dict[str, Any]:
        args = self.question.payload.get("arguments")
        return dict(args) if isinstance(args, Mapping) else {}

    def summary(self) -> str:
        """One line: ``write_file /project/a.txt`` or ``budget: total_tokens 120 of 100``."""
        p = self.question.payload
        if self.kind == "budget_hold":
            field_name = p.get("field") or "budget"
            return f"Budget hold: {field_name} {p.get('spent', '?')} of {p.get('limit', '?')}"
        if self.kind == "tool_approval":
            path = self.arguments.get("path") or self.arguments.get("command") or ""
            return f"{self.tool or 'tool'} {path}".strip()
        return f"Question: {self.kind}"

    def age(self, now: float | None = None) -> float:
        """Seconds since the run asked."""
        return max(0.0, (time.time() if now is None else now) - self.asked_at)


def format_age(seconds: float) -> str:
    """``just now``, ``42 s``, ``5 min``, ``3 h``, ``2 d``."""
    s = int(seconds)
    if s < 5:
        return "just now"
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min"
    if s < 86400:
        return f"{s // 3600} h"
    return f"{s // 86400} d"


def thread_questions(store: Store, thread_id: str) -> tuple[tuple[Question, ...], float]:
    """The questions a thread's suspended run waits on and when it asked (empty when none)."""
    cp = store.latest_checkpoint(thread_id, messages=False)
    if cp is None or cp.status != "interrupted":
        return (), 0.0
    return tuple(Question.from_dict(q) for q in cp.pending.get("questions", [])), float(cp.created)


def collect_pending(store: Store, current: str, drafts: Mapping[str, Mapping[str, Any]],
                    tasks: Mapping[str, Any] | None = None) -> list[PendingDecision]:
    """Every pending decision in the workspace's store: the current thread's first, then the other
    threads' (newest first), each batch in the order its step asked. Reads only the threads the
    store lists as interrupted, without their message histories. ``drafts`` is ``Drafts.all()``:
    keyed by thread and question fingerprint, so a draft shows only on the very question it was made
    for (never on a later question that reuses the id, R3/Q2)."""
    out: list[PendingDecision] = []
    threads = store.threads()
    ordered = sorted(threads, key=lambda t: t.id != current)  # stable: newest first otherwise
    for info in ordered:
        if info.status != "interrupted" and info.id != current:
            continue
        questions, asked = thread_questions(store, info.id)
        task = (tasks or {}).get(info.id)  # a background task's thread (D9): its own source
        if task is not None and not task.background:
            continue  # a foreground task's questions are asked through its parent's run
        if task is not None and task.status != "awaiting_decision":
            continue  # answered (its run resumes) or aborted: its old questions wait for no one
        for i, q in enumerate(questions):
            agent = str(task.agent if task is not None else q.payload.get("agent") or "main")
            out.append(PendingDecision(q, info.id, info.title or "Untitled", asked,
                                       "task" if task is not None else "thread", agent,
                                       info.id == current, i, len(questions),
                                       drafts.get((info.id, question_fingerprint(q))),
                                       task.id if task is not None else None))
    return out


class Drafts:
    """Decisions made per question while a batch is decided part-way (Q2), per thread, in memory.

    Leaving the dialog (Esc, closing) or the inbox keeps them; the next opening starts at the first
    undecided question. They are dropped once the run is resumed with them or stops waiting.

    R3/Q: each is kept with the fingerprint of the question it was made for (``question_fingerprint``:
    id, kind, call and payload — for an approval the tool, its arguments and the run and step that
    asked). A draft answers only that question: when another process answered the batch and the run
    asked again under the same id (providers reuse ``call_0``), the draft is dropped, never applied to
    the new call. A decision recorded with a ``fingerprint`` (the question as the person was shown it)
    is refused (``QuestionChanged``) when the pending question is no longer that one.
    """

    def __init__(self) -> None:
        self._by_thread: dict[str, dict[str, tuple[str, dict[str, Any]]]] = {}

    def record(self, thread_id: str, questions: tuple[Question, ...], question_id: str,
               decision: Mapping[str, Any]) -> None:
        question = next((q for q in questions if q.id == question_id), None)
        if question is None:
            raise RunError(f"no pending question {question_id!r} on thread {thread_id}: it was answered or "
                           "its run stopped; refresh the decisions")
        d = dict(decision)
        shown = d.pop("fingerprint", None)
        fingerprint = question_fingerprint(question)
        if shown is not None and str(shown) != fingerprint:
            raise QuestionChanged(changed_message([question]))
        if d.get("decision") not in DECISIONS:
            raise RunError(f"unknown decision {d.get('decision')!r} for {question_id}: use one of "
                           f"{', '.join(DECISIONS)}")
        self._by_thread.setdefault(thread_id, {})[question_id] = (fingerprint, d)

    def for_thread(self, thread_id: str, questions: tuple[Question, ...]) -> dict[str, dict[str, Any]]:
        """The drafts still pending on a thread: those whose question is still the one pending (drafts
        for answered or changed questions are dropped)."""
        now = {q.id: question_fingerprint(q) for q in questions}
        kept = {k: v for k, v in self._by_thread.get(thread_id, {}).items() if now.get(k) == v[0]}
        if kept:
            self._by_thread[thread_id] = dict(kept)
        else:
            self._by_thread.pop(thread_id, None)
        return {k: dict(d) for k, (_fp, d) in kept.items()}

    def all(self) -> dict[tuple[str, str], dict[str, Any]]:
        """Every draft, keyed by ``(thread_id, question fingerprint)`` (see ``collect_pending``)."""
        return {(tid, fp): dict(d) for tid, drafts in self._by_thread.items() for fp, d in drafts.values()}

    def clear(self, thread_id: str) -> None:
        self._by_thread.pop(thread_id, None)


def bind(decisions: Mapping[str, Any], questions: Sequence[Question]) -> dict[str, Any]:
    """The decisions (``Session.resume`` format), each carrying the fingerprint of the question it was
    given for (the one in ``questions``: what the person was shown). ``Session.resume`` then refuses
    them with ``QuestionChanged`` when the run waits on another question by then (R3/Q)."""
    by_id = {q.id: q for q in questions}
    out: dict[str, Any] = {}
    for qid, decision in decisions.items():
        q = by_id.get(qid)
        if q is None:
            out[qid] = decision
            continue
        d = {"decision": decision} if isinstance(decision, str) else dict(decision)
        d["fingerprint"] = question_fingerprint(q)
        out[qid] = d
    return out


async def abandon(engine: Engine, thread_id: str, questions: tuple[Question, ...], resume: Any,
                  message: str = ABANDON_MESSAGE) -> RunResult:
    """End a suspended run ``aborted`` ("Stop this run"): every question is rejected with ``message``
    and the run is stopped as soon as it picks the answers up, before any call runs or the model is
    asked again. ``resume`` is the session's resume (it tracks the task, so Stop works on it too)."""
    if not questions:
        raise RunError(f"thread {thread_id} has no run waiting for decisions")

    def on_event(event: Any) -> None:
        if event.thread_id == thread_id and event.type == "interrupt_answered":
            engine.stop(thread_id)

    unsubscribe = engine.subscribe(on_event)
    try:
        return await resume({q.id: {"decision": "reject", "message": message} for q in questions})
    finally:
        unsubscribe()


__all__ = ["ABANDON_MESSAGE", "Drafts", "PendingDecision", "QuestionChanged", "abandon", "bind", "changed_message",
           "collect_pending", "format_age", "question_fingerprint", "thread_questions"]
