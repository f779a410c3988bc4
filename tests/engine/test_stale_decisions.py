"""A decision answers only the question it was given for (R3, R7, Q1/Q2).

Providers reuse tool-call ids (``call_0`` in every message), so a run's next step may ask a new
question under the id of the one a person was shown. Another process (a second terminal, the window)
may answer and continue the run meanwhile. An answer carries the fingerprint of the question it was
given for; the engine checks it under the thread's claim and refuses a changed question, nothing run,
the run still suspended. Drafts of a batch left part-way (Q2) are kept per fingerprint too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from workbench.decisions import Drafts, QuestionChanged, bind, collect_pending, question_fingerprint, thread_questions
from workbench.engine.agent import Agent, Engine
from workbench.engine.middleware import AgentMiddleware, NeedsApproval, Question
from workbench.engine.models.scripted import ScriptedModel, reply, tool_reply
from workbench.engine.store import Store
from workbench.engine.tools import Tool, schema


class AskAll(AgentMiddleware):
    """Every call asks for approval (as the default rules do for writes and commands)."""

    async def wrap_tool_call(self, call, ctx, call_next):
        return await call_next(call, ctx) if ctx.approved else NeedsApproval("check")


def _engine(tmp_path: Path, model: ScriptedModel, ran: list[str], middleware: tuple[AgentMiddleware, ...] = ()) -> Engine:
    async def write(args: dict[str, Any], ctx: Any) -> str:
        ran.append(f"write {args['path']}")
        return "written"

    async def execute(args: dict[str, Any], ctx: Any) -> str:
        ran.append(f"execute {args['command']}")
        return "ran"

    tools = [Tool("write_file", "", schema({"path": {"type": "string"}}, ["path"]), write),
             Tool("execute", "", schema({"command": {"type": "string"}}, ["command"]), execute)]
    return Engine(Agent(model, instructions="BASE", tools=tools, middleware=(AskAll(), *middleware)),
                  Store.for_workspace(tmp_path))


async def test_R3_R7_an_approval_shown_for_one_call_never_runs_another_call_with_the_same_id(tmp_path):
    """R3/R7 (review p5): B is shown ``write_file a.md`` (approval-call_0); A answers it and the next step
    asks ``execute touch PWNED`` as call_0 again; B's approval, bound to the write it saw, is refused with
    "the question changed since it was shown", nothing runs, the run stays suspended on the execute."""
    ran: list[str] = []
    model = ScriptedModel([tool_reply(("write_file", {"path": "/project/a.md"}, "call_0")),
                           tool_reply(("execute", {"command": "touch PWNED"}, "call_0")),
                           reply("done")])
    engine = _engine(tmp_path, model, ran)
    first = await engine.run("t", "go")
    [shown_to_b] = first.pending
    b_answer = bind({shown_to_b.id: "approve"}, [shown_to_b])  # what terminal B will send

    a_view = Store.for_workspace(tmp_path)  # terminal A reads the same question from the store
    [a_q], _ = thread_questions(a_view, "t")
    assert question_fingerprint(a_q) == question_fingerprint(shown_to_b)  # the same question, read back
    second = await engine.resume("t", bind({a_q.id: "approve"}, [a_q]))
    [now] = second.pending
    assert now.id == shown_to_b.id and now.payload["tool"] == "execute"  # same id, another call
    assert ran == ["write /project/a.md"]

    with pytest.raises(QuestionChanged) as refused:
        await engine.resume("t", b_answer)
    text = str(refused.value)
    assert text.startswith("the question changed since it was shown: approval-call_0 (execute ")
    assert "touch PWNED" in text and "Nothing was run" in text
    assert ran == ["write /project/a.md"]  # the execute never ran
    cp = engine.store.latest_checkpoint("t")
    assert cp.status == "interrupted" and [q["payload"]["tool"] for q in cp.pending["questions"]] == ["execute"]
    assert engine.store.holder("t") is None  # the claim was released: the person is asked again

    third = await engine.resume("t", bind({now.id: "reject"}, [now]))  # answered as it is now: accepted
    assert third.status == "done" and ran == ["write /project/a.md"]


async def test_R3_the_same_call_asked_again_at_a_later_step_is_a_new_question(tmp_path):
    """R3: even the very same tool and arguments, asked again under the same id by a later step, is
    another question (it would run a second time): an answer bound to the first is refused."""
    ran: list[str] = []
    call = ("write_file", {"path": "/project/a.md"}, "call_0")
    engine = _engine(tmp_path, ScriptedModel([tool_reply(call), tool_reply(call), reply("done")]), ran)
    first = await engine.run("t", "go")
    stale = bind({q.id: "approve" for q in first.pending}, first.pending)
    second = await engine.resume("t", bind({q.id: "approve" for q in first.pending}, first.pending))
    assert second.status == "interrupted" and ran == ["write /project/a.md"]
    assert question_fingerprint(second.pending[0]) != question_fingerprint(first.pending[0])
    with pytest.raises(QuestionChanged):
        await engine.resume("t", stale)
    assert ran == ["write /project/a.md"]


async def test_R3_honest_resumes_keep_working_bound_or_not(tmp_path):
    """R3 unchanged for honest resumes: the returned question, the stored one and a restarted process's
    all have one fingerprint; answers with it, or in the old format (no fingerprint), continue the run.
    Hooks see the decision without the fingerprint (it binds, it is not part of the answer)."""
    seen: list[dict[str, Any]] = []

    class Hear(AgentMiddleware):
        async def on_decision(self, question, decision, ctx):
            seen.append(dict(decision))

    ran: list[str] = []
    model = ScriptedModel([tool_reply(("write_file", {"path": "/project/a.md"}, "call_0")),
                           tool_reply(("write_file", {"path": "/project/b.md"}, "call_0")), reply("done")])
    engine = _engine(tmp_path, model, ran, (Hear(),))
    first = await engine.run("t", "go")
    restarted = Store.for_workspace(tmp_path)
    [stored], _ = thread_questions(restarted, "t")
    assert question_fingerprint(stored) == question_fingerprint(first.pending[0])
    second = await engine.resume("t", bind({stored.id: {"decision": "approve"}}, [stored]))
    assert second.status == "interrupted"
    third = await engine.resume("t", {second.pending[0].id: "approve"})  # the public format, unbound
    assert third.status == "done" and ran == ["write /project/a.md", "write /project/b.md"]
    assert seen == [{"decision": "approve"}, {"decision": "approve"}]


async def test_Q2_a_draft_never_answers_a_new_question_that_reuses_its_id(tmp_path):
    """Q2/R3 (review p7): a decision kept for a batch left part-way is dropped once the run asks another
    question under that id (another process answered the batch): ``decided()`` no longer lists it, the
    inbox shows no draft for it, and recording one bound to the old question is refused."""
    ran: list[str] = []
    model = ScriptedModel([tool_reply(("write_file", {"path": "/project/a.md"}, "call_0"),
                                      ("write_file", {"path": "/project/b.md"}, "call_1")),
                           tool_reply(("execute", {"command": "touch PWNED"}, "call_0")), reply("done")])
    engine = _engine(tmp_path, model, ran)
    first = await engine.run("t", "go")
    drafts = Drafts()
    questions, _ = thread_questions(engine.store, "t")
    drafts.record("t", questions, "approval-call_0", bind({"approval-call_0": "approve"}, questions)["approval-call_0"])
    assert drafts.for_thread("t", questions) == {"approval-call_0": {"decision": "approve"}}
    inbox = collect_pending(engine.store, "t", drafts.all())
    assert [i.draft for i in inbox] == [{"decision": "approve"}, None]

    # meanwhile, elsewhere: the batch is answered and the next step asks the execute as call_0
    second = await engine.resume("t", {q.id: "approve" for q in first.pending})
    assert second.pending[0].id == "approval-call_0" and second.pending[0].payload["tool"] == "execute"
    now, _ = thread_questions(engine.store, "t")
    assert [i.draft for i in collect_pending(engine.store, "t", drafts.all())] == [None]
    assert drafts.for_thread("t", now) == {}  # what DecisionDesk.ask would have resumed with
    with pytest.raises(QuestionChanged):
        drafts.record("t", now, "approval-call_0", bind({"approval-call_0": "approve"}, questions)["approval-call_0"])
    assert drafts.for_thread("t", now) == {}
    assert "execute touch PWNED" not in ran


def test_Q2_drafts_of_two_threads_with_the_same_question_id_stay_apart():
    """Q1/Q2: two threads each waiting on ``approval-call_0`` (a different call each): a draft made on one
    is shown on that one only."""
    a = Question("approval-call_0", "tool_approval", {"tool": "write_file", "arguments": {"path": "/a"}}, "call_0")
    b = Question("approval-call_0", "tool_approval", {"tool": "execute", "arguments": {"command": "rm"}}, "call_0")
    drafts = Drafts()
    drafts.record("A", (a,), a.id, {"decision": "approve"})
    assert drafts.for_thread("B", (b,)) == {}
    assert ("A", question_fingerprint(a)) in drafts.all() and ("B", question_fingerprint(b)) not in drafts.all()
