"""Delegation to sub-agents (D1–D9, issue 11): real child runs on their own threads of the same store,
against the loopback stub (litellm for real), which answers the parent and each sub-agent by model name."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import sessions_on_the_task_loop
from tests.stub_server import StubReply, StubServer
from workbench.harness.delegation import DelegationMiddleware
from workbench.session import Session


@pytest.fixture(autouse=True, params=["caller's loop", "task loop"])
def runner_loop(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test runs twice: sub-agents on the caller's loop (CLI, scripts) and, as the window runs them,
    on a private loop in their own thread with their own store connection (``threaded_model=True``)."""
    if request.param == "task loop":
        if "process" in request.node.name or "kill_9" in request.node.name:
            pytest.skip("runs its sessions in subprocesses, which open them the CLI's way")
        sessions_on_the_task_loop(monkeypatch)
    return str(request.param)


def workspace(tmp_path: Path, stub: StubServer, *, extra: str = "", agents: str = "", budget: str = "",
              permissions: str = "{default: allow}") -> Path:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    agents = agents or ("    - {name: researcher, description: Reads and summarises., model: openai/researcher}\n"
                        "    - {name: writer, description: Writes reports., model: openai/writer}\n")
    (ws / "workbench.yaml").write_text(
        f"model: openai/parent\napi_base: {stub.url}\npermissions: {permissions}\n{budget}"
        f"subagents:\n  async: true\n  max_wait_seconds: 5\n{extra}  agents:\n{agents}")
    return ws


def _tool_results(session: Session) -> list[str]:
    return [m.content for m in session.messages if m.role == "tool"]


async def test_d1_foreground_delegation_returns_the_sub_agents_answer(tmp_path: Path, stub_server: StubServer) -> None:
    stub_server.script_for("parent", StubReply(tool_calls=[("delegate_to_researcher", {"task": "Find the answer"})]),
                           StubReply(text="The researcher says 42."))
    stub_server.script_for("researcher", StubReply(text="It is 42.", usage=(30, 7)))
    session = await Session.open(workspace(tmp_path, stub_server), api_key="sk-test")
    try:
        result = await session.run("Ask the researcher")
        assert result.status == "done", result
        assert result.answer == "The researcher says 42."
        [out] = _tool_results(session)
        assert "It is 42." in out and "completed" in out
        [task] = session.tasks()
        assert task.status == "completed" and task.agent == "researcher" and not task.background
        # its own thread in the same store, not listed among the person's threads
        assert task.child_thread not in [t.id for t in session.threads()]
        assert [m.content for m in session.task_messages(task.id) if m.role == "assistant"] == ["It is 42."]
        # the sub-agent's request carried the task; the parent's system prompt lists the sub-agents (D1)
        sub_req = [r for r in stub_server.requests if r["model"] == "researcher"][0]
        assert "Find the answer" in json.dumps(sub_req["messages"])
        parent_req = [r for r in stub_server.requests if r["model"] == "parent"][0]
        assert "delegate_to_researcher: Reads and summarises." in parent_req["messages"][0]["content"]
        # B4: the sub-agent's usage counts toward the parent's run
        assert session.usage.total_tokens >= 37
        events = [e.type for e in session.store.events(session.thread_id)]
        assert "task_started" in events and "task_settled" in events
    finally:
        await session.close()


async def test_d5_d7_background_launch_returns_at_once_and_the_notice_arrives_without_polling(
        tmp_path: Path, stub_server: StubServer) -> None:
    stub_server.script_for("parent",
                           StubReply(tool_calls=[("delegate_to_researcher", {"task": "Dig", "background": True})]),
                           StubReply(text="Launched; waiting."),
                           StubReply(text="Got it: deep."))
    stub_server.script_for("researcher", StubReply(text="Deep result.", delay=0.5))
    session = await Session.open(workspace(tmp_path, stub_server), api_key="sk-test")
    try:
        result = await session.run("Launch it")
        assert result.status == "done"
        [launch] = _tool_results(session)
        [task] = session.tasks()
        assert task.id in launch and "notified" in launch
        assert task.status in ("queued", "pending")  # returned before the sub-agent answered
        assert await session.wait_for_tasks(10)
        task = session.task(task.id)
        assert task is not None and task.status == "completed" and task.outcome == "Deep result."
        result = await session.run("And now?")
        assert result.answer == "Got it: deep."
        last = [r for r in stub_server.requests if r["model"] == "parent"][-1]
        text = json.dumps(last["messages"])
        assert text.count("Deep result.") == 1 and "settled: completed" in text
        # once: the next call carries the same notice in the same place, not a second one
        stub_server.script_for("parent", StubReply(text="ok"))
        await session.run("again")
        again = json.dumps([r for r in stub_server.requests if r["model"] == "parent"][-1]["messages"])
        assert again.count("Deep result.") == 1
    finally:
        await session.close()


async def test_d6_a_forged_or_foreign_task_id_is_refused_without_its_data(tmp_path: Path,
                                                                         stub_server: StubServer) -> None:
    ws = workspace(tmp_path, stub_server)
    stub_server.script_for("parent",
                           StubReply(tool_calls=[("delegate_to_researcher", {"task": "Secret", "background": True})]),
                           StubReply(text="ok"))
    stub_server.script_for("researcher", StubReply(text="TOP-SECRET-OUTCOME"))
    other = await Session.open(ws, api_key="sk-test")
    try:
        await other.run("launch")
        assert await other.wait_for_tasks(10)
        [foreign] = other.tasks()
    finally:
        await other.close()
    stub_server.script_for("parent",
                           StubReply(tool_calls=[("check_background_tasks", {"task_ids": [foreign.id, "researcher:deadbeef"]}),
                                                 ("abort_background_tasks", {"task_ids": [foreign.id]})]),
                           StubReply(text="done"))
    session = await Session.open(ws, api_key="sk-test")
    try:
        await session.run("peek")
        outs = _tool_results(session)
        assert all("TOP-SECRET-OUTCOME" not in o for o in outs)
        assert all("no such task in this conversation" in o for o in outs)
        assert session.task(foreign.id).status == "completed"  # untouched
    finally:
        await session.close()


async def test_d7_wait_with_a_timeout_and_abort(tmp_path: Path, stub_server: StubServer) -> None:
    stub_server.script_for("parent",
                           StubReply(tool_calls=[("delegate_to_researcher", {"task": "Slow", "background": True})]),
                           StubReply(text="launched"))
    stub_server.script_for("researcher", StubReply(text="never seen", delay=8))
    session = await Session.open(workspace(tmp_path, stub_server), api_key="sk-test")
    try:
        await session.run("go")
        [task] = session.tasks()
        stub_server.script_for("parent",
                               StubReply(tool_calls=[("wait_for_background_tasks", {"timeout_seconds": 30})]),
                               StubReply(tool_calls=[("abort_background_tasks", {"task_ids": [task.id]})]),
                               StubReply(text="gave up"))
        result = await session.run("wait then abort")
        assert result.status == "done"
        waited, aborted = (json.loads(o) for o in _tool_results(session)[-2:])
        assert waited["timed_out"] is True  # capped at max_wait_seconds (5), not the 30 asked
        assert waited["tasks"][0]["status"] == "pending"
        assert aborted["tasks"][0]["status"] == "aborted"
        assert session.task(task.id).status == "aborted"
    finally:
        await session.close()


async def test_d7_queued_behind_max_concurrent_and_expired(tmp_path: Path, stub_server: StubServer) -> None:
    ws = workspace(tmp_path, stub_server, extra="  max_concurrent: 1\n  timeout_seconds: 1\n")
    stub_server.script_for("parent", StubReply(tool_calls=[
        ("delegate_to_researcher", {"task": "one", "background": True}),
        ("delegate_to_writer", {"task": "two", "background": True})]), StubReply(text="both launched"))
    stub_server.script_for("researcher", StubReply(text="slow", delay=5))
    stub_server.script_for("writer", StubReply(text="written"))
    session = await Session.open(ws, api_key="sk-test")
    try:
        await session.run("launch two")
        first, second = session.tasks()
        assert {first.status, second.status} == {"pending", "queued"} or "queued" in (first.status, second.status)
        assert await session.wait_for_tasks(15)
        statuses = {t.agent: t.status for t in session.tasks()}
        assert statuses == {"researcher": "expired", "writer": "completed"}  # one expiring spares its sibling
        assert "timeout_seconds" in (session.task(first.id).error or "")
    finally:
        await session.close()


async def test_d9_siblings_unaffected_by_one_failure(tmp_path: Path, stub_server: StubServer) -> None:
    stub_server.script_for("parent", StubReply(tool_calls=[
        ("delegate_to_researcher", {"task": "fails", "background": True}),
        ("delegate_to_writer", {"task": "works", "background": True})]), StubReply(text="launched"))
    stub_server.script_for("researcher", StubReply(status=400, text="bad request"))
    stub_server.script_for("writer", StubReply(text="fine", delay=0.3))
    session = await Session.open(workspace(tmp_path, stub_server), api_key="sk-test")
    try:
        await session.run("launch")
        assert await session.wait_for_tasks(15)
        statuses = {t.agent: t.status for t in session.tasks()}
        assert statuses == {"researcher": "failed", "writer": "completed"}
    finally:
        await session.close()


async def test_d4_d9_a_foreground_sub_agents_approval_reaches_the_person_naming_it(
        tmp_path: Path, stub_server: StubServer) -> None:
    ws = workspace(tmp_path, stub_server, permissions="{default: ask, rules: [{allow: invoke, tool: delegate_to_*}]}")
    stub_server.script_for("parent",
                           StubReply(tool_calls=[("delegate_to_writer", {"task": "Write notes.md"})]),
                           StubReply(text="The writer wrote it."))
    stub_server.script_for("writer",
                           StubReply(tool_calls=[("write_file", {"path": "/project/notes.md", "content": "hi"})]),
                           StubReply(text="Wrote notes.md."))
    session = await Session.open(ws, api_key="sk-test")
    try:
        result = await session.run("Have the writer write notes")
        assert result.status == "interrupted", result
        [q] = result.pending
        assert q.kind == "tool_approval" and q.payload["agent"] == "writer" and q.payload["tool"] == "write_file"
        assert q.payload["arguments"]["path"] == "/project/notes.md" and q.id.startswith("sub-")
        assert not (ws / "notes.md").exists()
        [task] = session.tasks()
        assert task.status == "awaiting_decision"
        result = await session.resume({q.id: {"decision": "approve"}})
        assert result.status == "done", result
        assert (ws / "notes.md").read_text() == "hi"
        assert "Wrote notes.md." in _tool_results(session)[0]
        assert session.task(task.id).status == "completed"
    finally:
        await session.close()


async def test_d4_a_rejected_sub_agent_call_is_the_sub_agents_to_handle(tmp_path: Path,
                                                                       stub_server: StubServer) -> None:
    ws = workspace(tmp_path, stub_server, permissions="{default: ask, rules: [{allow: invoke, tool: delegate_to_*}]}")
    stub_server.script_for("parent", StubReply(tool_calls=[("delegate_to_writer", {"task": "Write x"})]),
                           StubReply(text="The writer could not."))
    stub_server.script_for("writer", StubReply(tool_calls=[("write_file", {"path": "/project/x", "content": "x"})]),
                           StubReply(text="I was not allowed to write x."))
    session = await Session.open(ws, api_key="sk-test")
    try:
        result = await session.run("go")
        [q] = result.pending
        result = await session.resume({q.id: {"decision": "reject", "message": "not now"}})
        assert result.status == "done"
        assert not (ws / "x").exists()
        writer_last = [r for r in stub_server.requests if r["model"] == "writer"][-1]
        assert "not now" in json.dumps(writer_last["messages"])  # the sub-agent saw the person's reason
        assert "I was not allowed" in _tool_results(session)[0]  # the parent saw only the outcome
    finally:
        await session.close()


def background_writer(tmp_path: Path, stub_server: StubServer) -> Path:
    """A workspace whose parent launches a background writer; the writer asks to write /project/y."""
    ws = workspace(tmp_path, stub_server, permissions="{default: ask, rules: [{allow: invoke, tool: delegate_to_*}]}")
    stub_server.script_for("parent",
                           StubReply(tool_calls=[("delegate_to_writer", {"task": "Write y", "background": True})]),
                           StubReply(text="Launched; I go on."))
    stub_server.script_for("writer", StubReply(tool_calls=[("write_file", {"path": "/project/y", "content": "y"})]),
                           StubReply(text="Wrote y."))
    return ws


async def test_d9_a_background_tasks_decision_waits_in_the_inbox_while_the_parent_goes_on(
        tmp_path: Path, stub_server: StubServer) -> None:
    ws = background_writer(tmp_path, stub_server)
    session = await Session.open(ws, api_key="sk-test")
    try:
        result = await session.run("go")
        assert result.status == "done"  # the parent is not held up
        assert await session.wait_for_tasks(10)
        [task] = session.tasks()
        assert task.status == "awaiting_decision"
        [item] = [d for d in session.pending_decisions() if d.source == "task"]
        assert item.agent == "writer" and item.task_id == task.id and item.thread_id == task.child_thread
        session.answer_task(task.id, {item.id: {"decision": "approve"}})
        assert await session.wait_for_tasks(10)
        assert session.task(task.id).status == "completed"
        assert (ws / "y").read_text() == "y"
        assert not [d for d in session.pending_decisions() if d.source == "task"]
    finally:
        await session.close()


async def test_d9_r3_a_background_tasks_answer_for_a_question_it_no_longer_asks_runs_nothing(
        tmp_path: Path, stub_server: StubServer) -> None:
    """R3/Q for a background task: an answer bound to another question (the person was shown one call,
    and by the time the answer reached the task it asked another, maybe under the same id) is refused:
    nothing runs, and the task waits on its question again, to be answered anew — it does not fail."""
    from workbench.decisions import bind

    ws = background_writer(tmp_path, stub_server)
    session = await Session.open(ws, api_key="sk-test")
    try:
        assert (await session.run("go")).status == "done"
        assert await session.wait_for_tasks(10)
        [task] = session.tasks()
        [item] = [d for d in session.pending_decisions() if d.source == "task"]
        other = dataclasses.replace(item.question, payload={**item.question.payload,
                                                            "arguments": {"path": "/project/z", "content": "z"}})
        session.answer_task(task.id, bind({item.id: {"decision": "approve"}}, [other]))  # shown: another call
        assert await session.wait_for_tasks(10)
        assert session.task(task.id).status == "awaiting_decision"  # not failed: it waits again
        assert not (ws / "y").exists() and not (ws / "z").exists()
        [again] = [d for d in session.pending_decisions() if d.source == "task"]
        assert again.question == item.question
        session.answer_task(task.id, bind({again.id: {"decision": "approve"}}, [again.question]))
        assert await session.wait_for_tasks(10)
        assert session.task(task.id).status == "completed" and (ws / "y").read_text() == "y"
    finally:
        await session.close()


async def test_d9_r3_the_cli_answers_a_background_tasks_question_bound_to_the_one_it_showed(
        tmp_path: Path, stub_server: StubServer) -> None:
    """``workbench run --approve all`` waiting on a background task: the answers it hands the task name
    the questions it decided (R3/Q), so a task that asks another by then refuses them and runs nothing."""
    import io

    from workbench.cli.decide import _Decider
    from workbench.cli.output import _Output
    from workbench.cli.tasks import wait_for_background
    from workbench.decisions import question_fingerprint

    ws = background_writer(tmp_path, stub_server)
    session = await Session.open(ws, api_key="sk-test")
    try:
        assert (await session.run("go")).status == "done"
        sent: list[dict[str, Any]] = []
        shown: dict[str, str] = {}
        answer = session.answer_task

        def recording(task_id: str, decisions: dict[str, Any]) -> None:
            shown.update({d.id: question_fingerprint(d.question) for d in session.pending_decisions()
                          if d.task_id == task_id})
            sent.append({k: dict(v) for k, v in decisions.items()})
            answer(task_id, decisions)

        session.answer_task = recording  # type: ignore[method-assign]
        output = _Output(False, out=io.StringIO(), err=io.StringIO())
        left = await wait_for_background(session, output, _Decider("all", "ask", interactive=False, output=output))
        assert left == [] and (ws / "y").read_text() == "y"
        assert [{k: d["fingerprint"] for k, d in ds.items()} for ds in sent] == [shown] and shown
    finally:
        await session.close()


async def test_d8_budget_envelope_stops_the_sub_agent_and_its_usage_counts_toward_the_parent(
        tmp_path: Path, stub_server: StubServer) -> None:
    agents = ("    - {name: researcher, description: Reads., model: openai/researcher, "
              "budget: {total_tokens: 150}}\n")
    ws = workspace(tmp_path, stub_server, agents=agents,
                   budget="budget:\n  - {scope: run, limit: {total_tokens: 100000}}\n")
    stub_server.script_for("parent", StubReply(tool_calls=[("delegate_to_researcher", {"task": "Spend"})], usage=(10, 5)),
                           StubReply(text="It stopped.", usage=(10, 5)))
    stub_server.script_for("researcher",
                           StubReply(tool_calls=[("ls", {"path": "/project"})], usage=(100, 100)),
                           StubReply(text="never reached", usage=(1, 1)))
    session = await Session.open(ws, api_key="sk-test")
    try:
        result = await session.run("go")
        assert result.status == "done", result
        [task] = session.tasks()
        assert task.status == "aborted" and task.envelope == {"total_tokens": 150.0}
        assert "budget" in (task.error or "").lower()
        assert len([r for r in stub_server.requests if r["model"] == "researcher"]) == 1  # stopped before the 2nd
        fig, steps = session.budget_figures()  # B5: the default step hold comes after the workspace's budget
        assert fig["fields"]["total_tokens"]["spent"] >= 200 + 30  # the sub-agent's 200 count toward the run (B4)
        assert steps["fields"] == {"steps": {"spent": 2, "limit": 200}}  # the sub-agent's steps are its own
    finally:
        await session.close()


async def test_d8_a_launch_that_would_exceed_what_is_left_asks_first(tmp_path: Path, stub_server: StubServer) -> None:
    agents = ("    - {name: researcher, description: Reads., model: openai/researcher, "
              "budget: {total_tokens: 5000}}\n")
    ws = workspace(tmp_path, stub_server, agents=agents,
                   budget="budget:\n  - {scope: run, limit: {total_tokens: 1000}}\n")
    stub_server.script_for("parent", StubReply(tool_calls=[("delegate_to_researcher", {"task": "Big"})], usage=(10, 5)),
                           StubReply(text="ok", usage=(10, 5)))
    stub_server.script_for("researcher", StubReply(text="done", usage=(10, 5)))
    session = await Session.open(ws, api_key="sk-test")
    try:
        result = await session.run("go")
        assert result.status == "interrupted"
        [q] = result.pending
        assert "would exceed" in q.payload["reason"] and "total_tokens 5000" in q.payload["reason"]
        assert session.tasks() == []  # nothing launched before the person said yes
        result = await session.resume({q.id: {"decision": "approve"}})
        assert result.status == "done"
        assert session.tasks()[0].status == "completed"
    finally:
        await session.close()


async def test_d2_max_delegations_and_d5_continue_task(tmp_path: Path, stub_server: StubServer) -> None:
    ws = workspace(tmp_path, stub_server, extra="  max_delegations: 1\n")
    stub_server.script_for("parent", StubReply(tool_calls=[
        ("delegate_to_researcher", {"task": "first", "background": True}),
        ("delegate_to_writer", {"task": "second", "background": True})]), StubReply(text="one refused"))
    stub_server.script_for("researcher", StubReply(text="first done"), StubReply(text="second turn done"))
    session = await Session.open(ws, api_key="sk-test")
    try:
        await session.run("launch two")
        outs = _tool_results(session)
        assert "Launched background task" in outs[0] and "max_delegations" in outs[1]
        assert await session.wait_for_tasks(10)
        [task] = session.tasks()
        stub_server.script_for("parent", StubReply(tool_calls=[("continue_task", {"task_id": task.id,
                                                                                 "instructions": "more"})]),
                               StubReply(text="continued"))
        await session.run("continue it")
        assert "continues in the background" in _tool_results(session)[-1]
        assert await session.wait_for_tasks(10)
        task = session.task(task.id)
        assert task.status == "completed" and task.outcome == "second turn done"
        assert len(session.task_messages(task.id)) == 4  # two turns on the task's own thread
    finally:
        await session.close()


_LAUNCHER = r"""
import asyncio, sys
from workbench.harness.delegation import DelegationMiddleware
from workbench.session import Session

async def main() -> None:
    session = await Session.open(sys.argv[1], api_key="sk-test")
    await session.run("Launch both")
    while sorted(t.status for t in session.tasks()) != sys.argv[2].split(","):
        await asyncio.sleep(0.05)
    await asyncio.sleep(float(sys.argv[3]))  # e.g. both sub-agents' model calls in flight
    print("READY", flush=True)
    await asyncio.sleep(600)

asyncio.run(main())
"""


async def _launch_in_another_process(ws: Path, statuses: str, settle: float) -> Any:
    """A real second process that runs the parent on ``ws`` until its tasks have ``statuses``, then idles."""
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", _LAUNCHER, str(ws), statuses, str(settle)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=str(Path(__file__).resolve().parents[2]))
    line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 60)  # type: ignore[union-attr]
    if line.strip() != "READY":
        proc.kill()
        raise AssertionError(proc.stderr.read() if proc.poll() is not None else line)  # type: ignore[union-attr]
    return proc


def _parent_thread(ws: Path) -> str:
    """The thread that launched the workspace's tasks (read from the store, as another process would)."""
    from workbench.engine.store import Store
    from workbench.engine.task_store import SqliteTaskStore

    store = Store.for_workspace(ws)
    try:
        return SqliteTaskStore(store).tasks()[0].parent_thread
    finally:
        store.close()


async def test_d5_kill_9_in_the_middle_of_two_background_tasks_then_they_are_recovered(
        tmp_path: Path, stub_server: StubServer) -> None:
    import os
    import signal

    ws = workspace(tmp_path, stub_server)
    stub_server.script_for("parent", StubReply(tool_calls=[
        ("delegate_to_researcher", {"task": "R", "background": True}),
        ("delegate_to_writer", {"task": "W", "background": True})]), StubReply(text="both launched"))
    # the first answers are cut by the kill; the recovered runs get the second ones
    stub_server.script_for("researcher", StubReply(text="lost", delay=6), StubReply(text="R done"))
    stub_server.script_for("writer", StubReply(text="lost", delay=6), StubReply(text="W done"))
    proc = await _launch_in_another_process(ws, "pending,pending", 0.5)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    parent = _parent_thread(ws)
    elsewhere = await Session.open(ws, api_key="sk-test")  # another thread: its tasks are not this one's to run
    try:
        await asyncio.sleep(0.3)
        assert not elsewhere._delegation.runner._drivers
    finally:
        await elsewhere.close()
    session = await Session.open(ws, parent, api_key="sk-test")  # the parent thread: recovered
    try:
        tasks = session.tasks(all_threads=True)
        assert sorted(t.status for t in tasks) == ["pending", "pending"]
        ids = [t.id for t in tasks]
        for _ in range(200):
            if all(session.task(i).status == "completed" for i in ids):
                break
            await asyncio.sleep(0.1)
        assert {session.task(i).outcome for i in ids} == {"R done", "W done"}
    finally:
        await session.close()


async def test_stopping_the_parent_stops_its_foreground_sub_agent(tmp_path: Path, stub_server: StubServer) -> None:
    stub_server.script_for("parent", StubReply(tool_calls=[("delegate_to_researcher", {"task": "Slow"})]))
    stub_server.script_for("researcher", StubReply(text="too late", delay=3))
    session = await Session.open(workspace(tmp_path, stub_server), api_key="sk-test")
    try:
        run = asyncio.ensure_future(session.run("go"))
        for _ in range(100):
            if session.tasks() and session.tasks()[0].status == "pending":
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)
        await session.stop()
        result = await run
        assert result.status == "aborted"
        [task] = session.tasks()
        assert task.status == "aborted"
        assert session.store.runs(task.child_thread)[-1].status == "aborted"
    finally:
        await session.close()


async def test_d5_closing_the_app_leaves_background_tasks_to_be_recovered_then_deleting_needs_them_settled(
        tmp_path: Path, stub_server: StubServer) -> None:
    ws = workspace(tmp_path, stub_server)
    stub_server.script_for("parent", StubReply(tool_calls=[("delegate_to_researcher", {"task": "R", "background": True})]),
                           StubReply(text="launched"))
    stub_server.script_for("researcher", StubReply(text="cut", delay=1.5), StubReply(text="after the restart"))
    session = await Session.open(ws, api_key="sk-test")
    parent = session.thread_id
    await session.run("go")
    await asyncio.sleep(0.3)
    [task] = session.tasks()
    assert task.status == "pending"
    with pytest.raises(Exception, match="unfinished task"):
        session.delete_thread(parent)
    await session.close()
    session = await Session.open(ws, parent, api_key="sk-test")
    try:
        assert session.task(task.id).status == "pending"  # recovered by this process
        assert await session.wait_for_tasks(10)
        assert session.task(task.id).outcome == "after the restart"
        session.delete_thread(parent)
        assert session.store.thread(task.child_thread) is None and session.task(task.id) is None
    finally:
        await session.close()


@pytest.mark.parametrize("max_depth, offered", [(1, False), (2, True)])
async def test_d9_a_sub_agent_delegates_only_below_max_depth(tmp_path: Path, stub_server: StubServer,
                                                            max_depth: int, offered: bool) -> None:
    ws = workspace(tmp_path, stub_server, extra=f"  max_depth: {max_depth}\n")
    stub_server.script_for("parent", StubReply(tool_calls=[("delegate_to_researcher", {"task": "look"})]),
                           StubReply(text="ok"))
    stub_server.script_for("researcher", StubReply(text="looked"))
    session = await Session.open(ws, api_key="sk-test")
    try:
        assert (await session.run("go")).status == "done"
        sub = [r for r in stub_server.requests if r["model"] == "researcher"][0]
        names = {t["function"]["name"] for t in sub.get("tools") or []}
        assert ("delegate_to_writer" in names) is offered
        assert "read_file" in names  # the same workbench.yaml's tools otherwise
    finally:
        await session.close()


def test_d6_no_id_reaches_another_conversations_task(tmp_path: Path) -> None:
    """Property: whatever ids a model sends, the task tools see only this conversation's tasks."""
    from types import SimpleNamespace

    from hypothesis import given, settings
    from hypothesis import strategies as st

    from workbench.config import load_config
    from workbench.engine.store import Store
    from workbench.engine.task_store import SqliteTaskStore
    from workbench.harness.delegation import DelegationMiddleware

    ws = tmp_path / "w"
    ws.mkdir()
    (ws / "workbench.yaml").write_text("subagents:\n  async: true\n  agents:\n    - {name: a, description: d}\n")
    store = Store(tmp_path / "s.sqlite3")
    tasks = SqliteTaskStore(store)
    made = {}
    for thread in ("mine", "theirs"):
        made[thread] = tasks.create_task(parent_thread=thread, parent_run="r", call_id="c", agent="a",
                                         child_thread=f"child-{thread}", description="x", background=True,
                                         status="completed", envelope={}, depth=1, prompt="p")
        tasks.update_task(made[thread].id, outcome=f"OUTCOME-{thread}")
    mw = DelegationMiddleware(load_config(ws), ws)
    mw.tasks = tasks
    ctx = SimpleNamespace(thread_id="mine")
    ids = st.one_of(st.text(max_size=40), st.sampled_from([made["mine"].id, made["theirs"].id,
                                                          made["theirs"].id.upper(), made["theirs"].id + " "]))

    @settings(max_examples=200, deadline=None)
    @given(st.lists(ids, max_size=6))
    def check(task_ids: list[str]) -> None:
        found, refused = mw._own(ctx, task_ids)
        assert all(t.parent_thread == "mine" for t in found)
        report = mw._report(found, refused)
        assert "OUTCOME-theirs" not in report and "child-theirs" not in report

    try:
        check()
    finally:
        store.close()


async def test_d9_an_approved_delegation_is_not_asked_again_when_its_sub_agent_asks(
        tmp_path: Path, stub_server: StubServer) -> None:
    ws = workspace(tmp_path, stub_server, permissions="{default: ask}")
    stub_server.script_for("parent", StubReply(tool_calls=[("delegate_to_writer", {"task": "Write z"})]),
                           StubReply(text="done"))
    stub_server.script_for("writer", StubReply(tool_calls=[("write_file", {"path": "/project/z", "content": "z"})]),
                           StubReply(text="Wrote z."))
    session = await Session.open(ws, api_key="sk-test")
    try:
        result = await session.run("go")
        [q] = result.pending
        assert q.payload["tool"] == "delegate_to_writer" and "agent" not in q.payload  # the delegation itself
        result = await session.resume({q.id: {"decision": "approve"}})
        [q] = result.pending
        assert q.payload["tool"] == "write_file" and q.payload["agent"] == "writer"  # the sub-agent's call
        result = await session.resume({q.id: {"decision": "approve"}})
        assert result.status == "done", result.pending  # not asked about the delegation a second time
        assert (ws / "z").read_text() == "z"
    finally:
        await session.close()


async def test_d5_another_process_opening_the_workspace_never_takes_a_live_processs_tasks(
        tmp_path: Path, stub_server: StubServer) -> None:
    import os
    import signal

    ws = workspace(tmp_path, stub_server, extra="  max_concurrent: 1\n")
    stub_server.script_for("parent", StubReply(tool_calls=[
        ("delegate_to_researcher", {"task": "R", "background": True}),
        ("delegate_to_writer", {"task": "W", "background": True})]), StubReply(text="both launched"))
    stub_server.script_for("researcher", StubReply(text="slow", delay=6), StubReply(text="R done"))
    stub_server.script_for("writer", StubReply(text="W done"))
    proc = await _launch_in_another_process(ws, "pending,queued", 0.0)
    try:
        parent = _parent_thread(ws)
        other = await Session.open(ws, parent, api_key="sk-test")  # a window opening the same thread
        try:
            await asyncio.sleep(0.5)
            statuses = {t.agent: t.status for t in other.tasks(all_threads=True)}
            assert statuses == {"researcher": "pending", "writer": "queued"}  # the queued one is not taken
            assert not other._delegation.runner._drivers
        finally:
            await other.close()
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    after = await Session.open(ws, parent, api_key="sk-test")  # now its owner is gone: recovered
    try:
        for _ in range(200):
            if all(t.status == "completed" for t in after.tasks(all_threads=True)):
                break
            await asyncio.sleep(0.1)
        assert {t.agent: t.outcome for t in after.tasks(all_threads=True)} == {"researcher": "R done",
                                                                              "writer": "W done"}
    finally:
        await after.close()


async def test_r10_a_task_with_odd_text_is_launched_and_stored(tmp_path: Path, stub_server: StubServer) -> None:
    from workbench.harness.delegation import DelegationMiddleware

    session = await Session.open(workspace(tmp_path, stub_server), api_key="sk-test")
    try:
        mw = session.middleware(DelegationMiddleware)
        from types import SimpleNamespace

        calls = SimpleNamespace(id="call_odd")
        seen: list[Any] = []
        ctx = SimpleNamespace(thread_id=session.thread_id, run_id="r", step=1, call=calls, get=lambda k, d=None: d,
                              context_for=lambda kind: None,
                              emit=lambda *a, **k: seen.append(a))
        mw.runner.start = lambda task: seen.append(task)  # launched, not run (this test is about storing)
        out = await mw._delegate("researcher", {"task": "Look \udcff at\x00 this " + "y" * 100_000,
                                                "background": True}, ctx)
        assert "Launched background task" in out
        [task] = session.tasks()
        assert task.description.startswith("Look") and len(task.prompt) > 100_000
    finally:
        await session.close()


async def test_d11_in_the_window_sub_agents_run_on_their_own_thread_and_loop(tmp_path: Path, stub_server: StubServer,
                                                                            runner_loop: str) -> None:
    """The window opens sessions with threaded_model=True: there a background sub-agent's steps run on the
    task loop's thread (not the caller's, which is the GUI's), and closing the session ends that thread."""
    import threading

    if runner_loop != "task loop":
        pytest.skip("the window's way only")
    stub_server.script_for("parent",
                           StubReply(tool_calls=[("delegate_to_researcher", {"task": "Dig", "background": True})]),
                           StubReply(text="Launched."))
    stub_server.script_for("researcher", StubReply(tool_calls=[("ls", {"path": "/project"})]),
                           StubReply(text="Deep result.", delay=0.2))
    session = await Session.open(workspace(tmp_path, stub_server), api_key="sk-test")
    seen: list[str] = []
    try:
        assert (await session.run("Launch it")).status == "done"
        [task] = session.tasks()
        engine = session._delegation.engine_for_task(task)  # the child engine the runner drives
        engine.subscribe(lambda e: seen.append(threading.current_thread().name))
        assert await session.wait_for_tasks(10)
        assert session.task(task.id).status == "completed"
        assert seen and set(seen) == {"workbench-tasks"}, seen
        assert any(t.name == "workbench-tasks" for t in threading.enumerate())
    finally:
        await session.close()
    assert not any(t.name == "workbench-tasks" and t.is_alive() for t in threading.enumerate())


async def test_d11_a_background_tasks_engine_is_built_where_its_run_goes(tmp_path: Path, stub_server: StubServer,
                                                                         runner_loop: str,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 9: launching background tasks builds each child engine (realpath checks, config reads,
    middleware) where its run goes — in the window the task loop's thread, never the GUI's — once per
    task, and its progress still reaches the caller's loop."""
    import threading

    built: list[tuple[str, str]] = []
    original = DelegationMiddleware._engine_for_task

    def recording(self: DelegationMiddleware, task: Any) -> Any:
        known = task.id in self._engines
        engine = original(self, task)
        if not known:
            built.append((task.agent, threading.current_thread().name))
        return engine

    monkeypatch.setattr(DelegationMiddleware, "_engine_for_task", recording)
    stub_server.script_for("parent", StubReply(tool_calls=[
        ("delegate_to_researcher", {"task": "Dig", "background": True}),
        ("delegate_to_writer", {"task": "Write", "background": True})]), StubReply(text="Launched."))
    stub_server.script_for("researcher", StubReply(tool_calls=[("ls", {"path": "/project"})]), StubReply(text="Dug."))
    stub_server.script_for("writer", StubReply(text="Wrote."))
    session = await Session.open(workspace(tmp_path, stub_server), api_key="sk-test")
    progress: list[tuple[str, str]] = []
    session.subscribe(lambda e: progress.append((e.data.get("agent"), threading.current_thread().name))
                      if e.type == "task_progress" else None, replay=False)
    try:
        assert (await session.run("Launch both")).status == "done"
        assert await session.wait_for_tasks(10)
        assert sorted(t.status for t in session.tasks()) == ["completed", "completed"]
        assert sorted(a for a, _ in built) == ["researcher", "writer"], built  # one engine a task
        where = {name for _, name in built}
        assert where == ({"workbench-tasks"} if runner_loop == "task loop" else {threading.current_thread().name})
        # the researcher's ls reached the caller as progress, on the caller's thread
        assert ("researcher", threading.current_thread().name) in progress
        assert {name for _, name in progress} == {threading.current_thread().name}
    finally:
        await session.close()


async def test_d9_a_child_engine_that_cannot_be_built_fails_its_task_only(tmp_path: Path, stub_server: StubServer,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A sub-agent whose engine cannot be built (here: a broken stack) ends its own task ``failed``, naming
    why; the parent's run and the sibling go on (D9)."""
    original = DelegationMiddleware._engine_for_task

    def broken(self: DelegationMiddleware, task: Any) -> Any:
        if task.agent == "writer":
            raise ValueError("sub-agent 'writer' is not configured in workbench.yaml any more")
        return original(self, task)

    monkeypatch.setattr(DelegationMiddleware, "_engine_for_task", broken)
    stub_server.script_for("parent", StubReply(tool_calls=[
        ("delegate_to_researcher", {"task": "Dig", "background": True}),
        ("delegate_to_writer", {"task": "Write", "background": True})]), StubReply(text="Launched."))
    stub_server.script_for("researcher", StubReply(text="Dug."))
    session = await Session.open(workspace(tmp_path, stub_server), api_key="sk-test")
    try:
        assert (await session.run("Launch both")).status == "done"
        assert await session.wait_for_tasks(10)
        tasks = {t.agent: t for t in session.tasks()}
        assert tasks["researcher"].status == "completed"
        assert tasks["writer"].status == "failed" and "not configured in workbench.yaml" in (tasks["writer"].error or "")
    finally:
        await session.close()


async def test_d7_a_task_stopped_before_its_run_began_ends_aborted_without_running(
        tmp_path: Path, stub_server: StubServer, runner_loop: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """An abort that comes after the launch but before the task's run took its first step (its engine not
    even built) is not lost: the task ends ``aborted`` and its sub-agent never calls the model."""
    import threading

    stub_server.script_for("parent", StubReply(tool_calls=[("delegate_to_researcher", {"task": "Dig", "background": True})]),
                           StubReply(text="Launched."))
    stub_server.script_for("researcher", StubReply(text="Dug."))
    session = await Session.open(workspace(tmp_path, stub_server), api_key="sk-test")
    runner = session.middleware(DelegationMiddleware).runner
    gate = threading.Event()  # holds the task loop, so the launch and the stop queue there in this order
    aborts: list[Any] = []
    original_start = runner.start

    def start_then_abort(task: Any) -> None:
        if runner._task_loop is not None:
            runner._task_loop.call(gate.wait, 5)
        original_start(task)
        # Next on this loop: the task's driver launches its run, then the abort asks the stop — before the
        # run's first step (here the next turn; on the task loop, queued behind the launch until the gate).
        aborts.append(asyncio.ensure_future(runner.abort(task.id)))
        asyncio.get_running_loop().call_soon(gate.set)

    monkeypatch.setattr(runner, "start", start_then_abort)
    try:
        assert (await session.run("Launch it")).status == "done"
        [record] = await asyncio.gather(*aborts)
        assert await session.wait_for_tasks(10)
        [task] = session.tasks()
        assert record.status == "aborted" and task.status == "aborted", (record, task)
        await asyncio.sleep(0.3)  # a run that was not stopped would call the model by now
        assert session.task(task.id).status == "aborted"
        assert not [r for r in stub_server.requests if r["model"] == "researcher"]
    finally:
        gate.set()
        await session.close()


async def test_a3_d3_a_sub_agents_artifacts_keep_their_type_and_never_replace_the_parents(
        tmp_path: Path, stub_server: StubServer) -> None:
    """A3, D3 (the reviewer's t6): the merge kept only name → content, so ``researcher_1/chart`` became
    text/plain; and the parent's own ``researcher_1/notes.md`` was silently replaced by the task's
    ``notes.md``. Now the type goes with the content and the merged note takes a free name, which the
    tool result (inline: with its content) names."""
    png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
    stub_server.script_for(
        "parent",
        StubReply(tool_calls=[("write_artifact", {"name": "researcher_1/notes.md", "content": "PARENT'S OWN"})]),
        StubReply(tool_calls=[("delegate_to_researcher", {"task": "Make a chart"})]),
        StubReply(text="ok"))
    stub_server.script_for(
        "researcher",
        StubReply(tool_calls=[("write_artifact", {"name": "chart", "content": png, "mime": "image/png"}),
                              ("write_artifact", {"name": "notes.md", "content": "child notes"})]),
        StubReply(text="Chart made."))
    session = await Session.open(workspace(tmp_path, stub_server), api_key="sk-test")
    try:
        assert (await session.run("Chart it")).status == "done"
        arts = session.artifacts
        assert {n: (a["mime"], a["source"], a["content"]) for n, a in arts.items()} == {
            "researcher_1/notes.md": ("text/markdown", "agent", "PARENT'S OWN"),
            "researcher_1/chart": ("image/png", "researcher_1", png),
            "researcher_1/notes (2).md": ("text/markdown", "researcher_1", "child notes"),
        }
        out = _tool_results(session)[-1]
        assert "Artifacts merged into this thread: researcher_1/chart, researcher_1/notes (2).md" in out
        assert "--- researcher_1/notes (2).md ---\nchild notes" in out
    finally:
        await session.close()
