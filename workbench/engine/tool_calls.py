"""The tool calls of an assistant message (R4, R9, P4, P6, M5): run them in order under their locks,
ask for approval, journal each result the moment it finishes, replay the journal after a crash, and
give every call a result when a run ends between a message and its results.

``ToolCalls`` is a mixin of ``Engine`` (engine/agent.py): its methods use the engine's ``agent`` and
``store`` and end a run through its ``_finish`` and ``_suspend``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from workbench.engine.frozen import freeze
from workbench.engine.messages import FORGED_EDIT_NOTE, Message, ToolCall, edit_note, edited_arguments
from workbench.engine.middleware import AgentMiddleware, Question, RunResult, Suspend, ToolContext
from workbench.engine.runtime import CURRENT_RUN, MESSAGES, _active, _Runtime, unanswered_calls
from workbench.engine.tools import (
    Fatal,
    NeedsApproval,
    Tool,
    ToolOutcome,
    inner_question_id,
    short_json,
    validate_call,
)
from workbench.errors import RunError, WorkbenchError
from workbench.redact import scrub_known

if TYPE_CHECKING:
    from workbench.engine.agent import Agent
    from workbench.engine.store import Store

log = logging.getLogger(__name__)

class QuestionChanged(RunError):
    """R3/Q: a decision was given for a question that is no longer the one pending (another process
    answered it and the run asked again, maybe reusing the question id). Nothing ran; the run stays
    suspended and its current questions must be answered again."""


def question_fingerprint(question: Question | Mapping[str, Any]) -> str:
    """What binds a decision to the exact question it answers (R3, Q): a hash of the question's id,
    kind, call id and whole payload — for a tool approval the tool, its arguments, the reason and the
    run and step that asked (``asked_in``), so a later step's call that reuses the id (providers number
    calls ``call_0`` per message) never matches. The same for the question read back from the store and
    the one the run returned; clients send it with each answer (``{"decision": …, "fingerprint": …}``)."""
    d = question.to_dict() if isinstance(question, Question) else dict(question)
    body = {"id": d.get("id"), "kind": d.get("kind"), "call_id": d.get("call_id"), "payload": d.get("payload") or {}}
    # Through JSON once: what the store gives back (lists for tuples, string keys) hashes the same.
    canonical = json.dumps(json.loads(json.dumps(body, default=str)), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()[:20]


def describe_question(question: Question) -> str:
    """``approval-call_0 (execute {"command": "touch PWNED"})``: a question in one line, for errors."""
    p = question.payload
    if question.kind == "tool_approval":
        what = f"{p.get('tool') or 'a tool'} {short_json(p.get('arguments') or {}, 160)}"
    else:
        what = f"{question.kind} {short_json({k: v for k, v in p.items() if k != 'asked_in'}, 160)}"
    return f"{question.id} ({what})"


def changed_message(changed: Sequence[Question], new: Sequence[Question] = (), gone: Sequence[str] = ()) -> str:
    """"the question changed since it was shown: …" — what is asked now, and that nothing ran."""
    parts = [f"{describe_question(q)} is asked now" for q in changed]
    parts += [f"{describe_question(q)} was not shown" for q in new]
    parts += [f"{qid} is no longer asked" for qid in gone]
    return ("the question changed since it was shown: " + "; ".join(parts)
            + ". Nothing was run: answer the run's questions as they are now")


def check_bound(questions: Sequence[Question], decisions: Mapping[str, Any], bound: Mapping[str, str]) -> None:
    """R3/Q: refuse decisions given for questions other than the pending ones (QuestionChanged). ``bound``:
    the fingerprint each answer was given for (only answers that carry one are checked by it; once any
    answer carries one, a pending question left unanswered or an answer for one that is gone means the
    person was shown another batch)."""
    if not bound:
        return
    ids = {q.id for q in questions}
    changed = [q for q in questions if q.id in bound and bound[q.id] != question_fingerprint(q)]
    new = [q for q in questions if q.id not in decisions]
    gone = sorted(set(decisions) - ids)
    if changed or new or gone:
        raise QuestionChanged(changed_message(changed, new, gone))


#: How long a message's one read-only call runs before the message is committed anyway (see ``_steps``):
#: longer than a listing or a file read, far shorter than anything worth asking the model again for.
LAZY_COMMIT_SECONDS = 0.05

_UNKNOWN = ("Not finished: the process running this call stopped before it returned, so it may or may not have "
            "taken effect. Check before trying it again.")


def _settled(task: asyncio.Future[Any]) -> Any:
    """What ``gather(..., return_exceptions=True)`` gives for a task that is done."""
    if task.cancelled():
        return asyncio.CancelledError()
    return task.exception() or task.result()


class ToolCalls:
    """The engine's tool-call half: run, approve, journal, replay, settle."""

    agent: Agent
    store: Store

    if TYPE_CHECKING:
        async def _finish(self, rt: _Runtime, status: str, answer: str = "", error: str | None = None,
                          keep_state: bool = False) -> RunResult: ...

        async def _suspend(self, rt: _Runtime, pending: dict[str, Any]) -> RunResult: ...

    async def _run_tools(
        self,
        rt: _Runtime,
        calls: Sequence[ToolCall],
        completed: dict[str, ToolOutcome],
        resumed: dict[str, Question],
        *,
        late_commit: Callable[[], None] | None = None,
    ) -> RunResult | None:
        """Run a message's calls (R4); append their results in order, or suspend with the questions.
        ``late_commit``: the message is not committed yet (its one call only reads, see ``_steps``):
        commit it if the call is still running after ``LAZY_COMMIT_SECONDS``."""
        locks: dict[str, asyncio.Lock] = {}
        questions: dict[str, Question] = {}
        fatal: list[Exception] = []
        held: set[str] = set()  # locks whose earlier call waits for an answer
        rt.outcomes = completed  # what an abort keeps of this message (see _settle_calls)
        if rt.stop_requested:
            return await self._finish(rt, "aborted", error="stopped by the user")

        async def one(call: ToolCall) -> None:
            tool = self.agent.tool_map.get(call.name)
            name = tool.lock if tool is not None and tool.lock else None
            lock = locks.setdefault(name, asyncio.Lock()) if name else None
            acquired = False
            try:
                if lock is not None:
                    await lock.acquire()
                    acquired = True
                # R4: when an earlier call on this lock waits for the user, this one may still ask (the
                # questions of a message come together) but may not run before it: it runs on resume.
                completed[call.id] = await self._one_tool(rt, call, tool, resumed.get(call.id), name in held)
                if len(calls) > 1 or tool is None or not tool.only_reads:
                    # R9: stored the moment it finished. A message's only call to a tool the workbench
                    # knows changes nothing outside is not: the step's checkpoint follows at once, and
                    # after a crash before it, running it again is harmless (issue 9).
                    self._journal(rt, call, completed[call.id])
            except _Held:
                pass  # neither a result nor a question until the earlier call is answered
            except Suspend as s:
                questions[call.id] = Question(s.question.id, s.question.kind, s.question.payload, call.id)
                if name:
                    held.add(name)
            except Fatal as e:
                fatal.append(e)
            except asyncio.CancelledError:
                if not rt.stop_requested:
                    raise
                # stop(): this call has no result; _finish says it was stopped
            finally:
                if acquired:
                    assert lock is not None
                    lock.release()

        todo = [c for c in calls if c.id not in completed]
        # Tasks start in message order and asyncio.Lock is fair, so same-lock calls run in order (R4).
        tasks = [asyncio.ensure_future(one(c)) for c in todo]
        rt.tool_tasks = tasks
        if late_commit is not None:
            try:
                finished, _ = await asyncio.wait(tasks, timeout=LAZY_COMMIT_SECONDS)
                if not finished:
                    late_commit()
                    late_commit = None
            except BaseException:  # the run ends here (cancelled, or the commit failed): its call may not
                for task in tasks:  # keep running (asyncio.wait, unlike gather, leaves it to us)
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                rt.tool_tasks = []
                raise
        try:
            # Wait for every call, even when one fails: none may keep running after the run ended.
            if all(task.done() for task in tasks):  # waited for above: gather would only cost a loop turn
                results = [_settled(task) for task in tasks]
            else:
                results = await asyncio.gather(*tasks, return_exceptions=True)
        finally:
            rt.tool_tasks = []
        failure = fatal[0] if fatal else next(
            (r for r in results if isinstance(r, BaseException) and not isinstance(r, asyncio.CancelledError)), None)
        if failure is not None:
            if late_commit is not None and isinstance(failure, Exception):
                # The run fails on this call: its message is committed first, so the failed run's history
                # shows the call and its error, as for any other message (a kill -9 commits nothing).
                late_commit()
            raise failure
        if rt.stop_requested:  # stopped while the calls ran: no question is asked any more
            return await self._finish(rt, "aborted", error="stopped by the user")
        if any(isinstance(r, asyncio.CancelledError) for r in results):
            raise asyncio.CancelledError()
        if questions:
            ordered = [questions[c.id].to_dict() for c in calls if c.id in questions]
            return await self._suspend(
                rt,
                {
                    "phase": "tools",
                    "questions": ordered,
                    "completed": {cid: {"status": o.status, "content": o.content} for cid, o in completed.items()},
                },
            )
        for call in calls:
            outcome = completed[call.id]
            rt.append(Message.tool(call, outcome.content, status=outcome.status))
        rt.outcomes = None
        return None

    def _only_reads(self, calls: Sequence[ToolCall]) -> bool:
        """Whether every call is to a tool the workbench itself knows only reads (``Tool.only_reads``)."""
        tools = self.agent.tool_map
        return all(call.name in tools and tools[call.name].only_reads for call in calls)

    async def _one_tool(self, rt: _Runtime, call: ToolCall, tool: Tool | None, resumed: Question | None,
                        held: bool = False) -> ToolOutcome:
        approved = edited = False
        if resumed is not None and resumed.id.startswith(inner_question_id(call.id, "")):
            approved = True  # asked from inside the running call: the wrappers let it run already
        # The call's own approval; a question a tool asked for another (a sub-agent's, D9) is the tool's.
        elif resumed is not None and resumed.kind == "tool_approval" and resumed.id == f"approval-{call.id}":
            decision = rt.answers[resumed.id]
            kind = decision["decision"]
            if kind == "reject":
                self._remember_rejection(rt, call)
                message = decision.get("message") or "no reason given"
                return self._finish_tool(rt, call, ToolOutcome("rejected", f"Rejected by the user: {message}. "
                                                              "Do not try this exact call again; ask or do something else."))
            if kind == "respond":
                return self._finish_tool(rt, call, ToolOutcome.ok(str(decision.get("message", ""))))
            if kind == "edit":
                # P6: runs with the person's arguments; the committed assistant message keeps the
                # model's (never rewritten), the result records the edit (see _finish_tool).
                call = ToolCall.parse(call.id, call.name, decision.get("arguments") or {}).cleaned()
                edited = True
            approved = True
        error = validate_call(tool, call, list(self.agent.tool_map))
        rt.emit("tool_call_started", call_id=call.id, name=call.name, arguments=call.arguments or {})
        if error is not None:
            return self._finish_tool(rt, call, ToolOutcome.error(error), edited)
        assert tool is not None
        ctx = ToolContext(rt, None, call, tool, approved)
        chain = self._tool_chain(tool, held)
        try:
            outcome = await chain(call, ctx)
        except (Suspend, Fatal, RunError):  # RunError: a broken contract (M3, M4) fails the run
            raise
        except WorkbenchError as e:
            outcome = ToolOutcome.error(f"Error: {e}")
        if isinstance(outcome, NeedsApproval):
            signature = _signature(call)
            if signature in rt.state.get("_rejected", {}).get(rt.run_id, []):
                # P4: the user rejected this exact call in this run; refuse without asking again.
                return self._finish_tool(rt, call, ToolOutcome(
                    "rejected", "Rejected: the user already rejected this exact call in this run. Do not retry it."),
                    edited)
            payload = {"tool": call.name, "arguments": call.arguments or {}, "reason": outcome.reason,
                       "rule": outcome.rule,
                       # R3/Q: which run and step asked, so the question's fingerprint (what an answer is
                       # bound to) differs from a later step's call that reuses the id and arguments
                       "asked_in": {"run": rt.run_id, "step": rt.step}}
            if outcome.always:  # Q3: what "Always" would save, so the dialog can show its scope
                payload["always"] = list(outcome.always)
            for key, value in outcome.details.items():  # E2: a command's folder, sandbox, rule proposals
                payload.setdefault(key, value)
            raise Suspend(Question(id=f"approval-{call.id}", kind="tool_approval", payload=payload))
        return self._finish_tool(rt, call, outcome, edited)

    def _finish_tool(self, rt: _Runtime, call: ToolCall, outcome: ToolOutcome, edited: bool = False) -> ToolOutcome:
        # F4, R10: a key the process knows never reaches the prompt or the store through a result (an
        # unsandboxed command can print the key file; a tool server can echo what it was given).
        content = scrub_known(outcome.content)
        if content is not outcome.content:
            outcome = ToolOutcome(outcome.status, content, outcome.details)
        extra = {k: v for k, v in outcome.details.items() if k not in ("call_id", "name", "status", "edited")}
        if edited:  # P6: the event says so (no content); the result's first line says what ran
            rt.emit("tool_call_finished", call_id=call.id, name=call.name, status=outcome.status, edited=True,
                    **extra)
            return ToolOutcome(outcome.status, outcome.content + edit_note(call.arguments or {}), outcome.details)
        rt.emit("tool_call_finished", call_id=call.id, name=call.name, status=outcome.status, **extra)  # E6
        if edited_arguments(outcome.content) is not None:
            # P6: a result is read back as "edited" by its last line (results travel as text); a tool or
            # server that ends its own output with that line must not forge the person's edit
            outcome = ToolOutcome(outcome.status, outcome.content + FORGED_EDIT_NOTE, outcome.details)
        return outcome

    def _remember_rejection(self, rt: _Runtime, call: ToolCall) -> None:
        rejected = dict(rt.state.get("_rejected", {}))
        rejected = {rt.run_id: [*rejected.get(rt.run_id, []), _signature(call)]}  # only this run's matter
        rt.write_state("_rejected", rejected)

    def _tool_chain(self, tool: Tool, held: bool = False) -> Callable[[ToolCall, ToolContext], Any]:
        async def innermost(call: ToolCall, ctx: ToolContext) -> ToolOutcome | NeedsApproval:
            if held:
                raise _Held()
            rt = CURRENT_RUN.get()
            # R9: never run twice after a crash (see _recover_tools); a server's "read-only" is not our word
            if not tool.only_reads and rt is not None:
                self.store.journal_start(rt.thread_id, rt.run_id, rt.step, call.id,
                                         claim=rt.claim.token if rt.claim else None)
            try:
                with _active(f"{tool.owner.name} (tool {tool.name})" if tool.owner else f"tool {tool.name}"):
                    result = await tool.func(call.arguments or {}, ctx._bound(tool.owner))
            except (Fatal, Suspend, RunError):
                raise
            except WorkbenchError as e:
                return ToolOutcome.error(f"Error: {e}")
            except Exception as e:  # a tool's bug is the model's error message, not a crash (M5)
                log.exception("tool %s failed", tool.name)
                return ToolOutcome.error(f"Error: {tool.name} failed: {type(e).__name__}: {e}")
            return ToolOutcome.ok(result) if isinstance(result, str) else result

        call = innermost
        for mw in reversed(self.agent._tool_wrappers):
            call = _bind_tool(mw, call)
        return call

    def _journal(self, rt: _Runtime, call: ToolCall, outcome: ToolOutcome) -> None:
        """R9: a finished call's result, the state its writes left and the events so far, stored now."""
        events = list(rt.unsaved_events)
        self.store.journal_finish(rt.thread_id, rt.run_id, rt.step, call.id, outcome.status, outcome.content,
                                  rt.state, events=events, claim=rt.claim.token if rt.claim else None)
        del rt.unsaved_events[:len(events)]

    def _replay_journal(self, rt: _Runtime, completed: dict[str, ToolOutcome], *, unknown: str | None,
                        run_id: str | None = None, step: int | None = None) -> None:
        """R9: the calls of the step in flight that finished before the run ended keep their results
        and the state they left; with ``unknown``, a call that changes things outside and started but
        never finished gets that as an error result (it may have had its effect: never run twice)."""
        last: dict[str, Any] | None = None
        for entry in self.store.journal(rt.thread_id, run_id or rt.run_id, rt.step if step is None else step):
            if entry.status == "started":
                if unknown is not None and entry.call_id not in completed:
                    completed[entry.call_id] = ToolOutcome("error", unknown)
                continue
            completed[entry.call_id] = ToolOutcome(entry.status, entry.content)  # type: ignore[arg-type]
            last = entry.state
        if last is not None:
            for key, value in last.items():
                rt.state[key] = freeze(value, key)

    def _settle_calls(self, rt: _Runtime, status: str, why: str, pending: Mapping[str, Any] | None = None,
                      emit: bool = True) -> None:
        """Give every call of the last assistant message a result, so the history stays valid.

        A provider rejects a history where an assistant's tool calls are not each followed by a tool
        result. A run that ends between the two (stopped, cancelled, aborted, failed after a resume)
        keeps the results of the calls that ran and says the others did not finish.
        """
        known = dict(rt.outcomes or {})
        for cid, o in ((pending or {}).get("completed") or {}).items():
            known.setdefault(cid, ToolOutcome(o["status"], o["content"]))
        for raw in unanswered_calls(rt.state[MESSAGES]):
            call = ToolCall.from_dict(raw)
            outcome = known.get(call.id)
            if outcome is None:
                outcome = ToolOutcome(status, f"Not finished: {why}.")  # type: ignore[arg-type]
                if emit:
                    self._finish_tool(rt, call, outcome)
            rt.append(Message.tool(call, outcome.content, status=outcome.status))
        rt.outcomes = None


class _Held(Suspend):
    """A call that would run while an earlier call on its lock waits for the user (R4): it waits too."""

    def __init__(self) -> None:
        super().__init__(Question(id="", kind="held", payload={}))


def _bind_tool(mw: AgentMiddleware, call_next: Any) -> Any:
    async def call(tool_call: ToolCall, ctx: ToolContext) -> Any:
        with _active(mw.name):
            return await mw.wrap_tool_call(tool_call, ctx._bound(mw), call_next)

    return call



def _unique_ids(calls: tuple[ToolCall, ...]) -> tuple[ToolCall, ...]:
    """The calls with unique, non-empty ids (R10): a repeated id gets a suffix, so every call gets its
    own result (and journal entry). Suffixes use [A-Za-z0-9_-], which every provider accepts."""
    seen: set[str] = set()
    out: list[ToolCall] = []
    changed = False
    for i, call in enumerate(calls):
        cid = call.id or f"call_{i}"
        if cid in seen:
            n = 2
            while f"{cid}_{n}" in seen:
                n += 1
            cid = f"{cid}_{n}"
        seen.add(cid)
        if cid != call.id:
            changed = True
            call = ToolCall(cid, call.name, call.arguments, call.raw_arguments)
        out.append(call)
    return tuple(out) if changed else calls


def _signature(call: ToolCall) -> str:
    return call.name + ":" + json.dumps(call.arguments, sort_keys=True)
