"""A hard limit holds while background tasks run (B2, B4, D8): before each of the parent's model calls,
when what was counted plus what its unfinished background tasks still hold (their envelopes) reaches a
hard run or session limit, the parent waits for those tasks to settle, counts their spend and checks
again with the real figures. Real sessions against the loopback stub (litellm for real), which answers
the parent and each sub-agent by model name with scripted usage figures.

The rule: what the parent and its tasks really spend never passes a hard limit by more than one turn
(B2's overshoot: the one call that crossed it). It used to pass it by up to a background task's whole
envelope: the parent's calls were checked only against what had been counted.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import sessions_on_the_task_loop
from tests.stub_server import StubReply, StubServer
from workbench.engine.events import Event
from workbench.session import Session

LS = ("ls", {"path": "/"})


@pytest.fixture(autouse=True, params=["caller's loop", "task loop"])
def runner_loop(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Sub-agents on the caller's loop (CLI, scripts) and, as the window runs them, on the task loop."""
    if request.param == "task loop":
        sessions_on_the_task_loop(monkeypatch)
    return str(request.param)


def workspace(path: Path, stub: StubServer, *, budget: str, agent_budget: str = "", extra: str = "",
              permissions: str = "{default: allow}") -> Path:
    path.mkdir(parents=True, exist_ok=True)
    own = f", budget: {agent_budget}" if agent_budget else ""
    (path / "workbench.yaml").write_text(
        f"model: openai/parent\napi_base: {stub.url}\npermissions: {permissions}\nbudget:\n  - {budget}\n"
        f"subagents:\n  async: true\n  max_wait_seconds: 20\n{extra}  agents:\n"
        f"    - {{name: a1, description: Reads., model: openai/a1{own}}}\n")
    return path


def launch(usage: tuple[int, int] = (10, 5)) -> StubReply:
    return StubReply(tool_calls=[("delegate_to_a1", {"task": "job", "background": True})], usage=usage)


def parent_calls(stub: StubServer) -> list[dict[str, Any]]:
    return [r for r in stub.requests if r["model"] == "parent"]


def real_spend(session: Session) -> int:
    """What was really spent: the parent's own calls and every task's, counted or not."""
    own = session.store.thread_usage(session.thread_id).total_tokens
    return own + sum(session.store.thread_usage(t.child_thread).total_tokens for t in session.tasks())


def waits(seen: list[Event]) -> list[dict[str, Any]]:
    """The ``waiting`` entries of the live ``budget_updated`` events (None: the wait ended)."""
    return [e.data["waiting"] for e in seen if e.type == "budget_updated" and "waiting" in e.data]


def watch(session: Session) -> list[Event]:
    seen: list[Event] = []
    session.subscribe(seen.append, replay=False)
    return seen


async def test_b2_b4_d8_a_background_task_holding_everything_left_never_carries_the_run_past_its_hard_limit(
        tmp_path: Path, stub_server: StubServer) -> None:
    """B2, B4, D8: a hard run limit of 1000 tokens; the parent launches a background task with everything
    left (its envelope: 985) and keeps working with 500-token turns. Before its next call it waits for the
    task (which spends 980), counts it (995), makes one more call (1495: one turn over, as B2 allows) and
    stops ``aborted`` with ``budget_exceeded``. It used to go on beside the task: 1015 of its own and the
    task's 980 on top, 1995 of 1000."""
    ws = workspace(tmp_path / "ws", stub_server, budget="{scope: run, limit: {total_tokens: 1000}}")
    stub_server.script_for("parent", launch(),
                           *[StubReply(tool_calls=[LS], usage=(300, 200)) for _ in range(4)],
                           StubReply(text="done", usage=(300, 200)))
    stub_server.script_for("a1", StubReply(tool_calls=[LS], usage=(450, 450)),
                           StubReply(text="finished", usage=(40, 40), delay=1.0))
    session = await Session.open(ws, api_key="sk-test")
    try:
        seen = watch(session)
        result = await session.run("go")
        assert await session.wait_for_tasks(20)
        [task] = session.tasks()
        assert task.envelope == {"total_tokens": 985.0} and task.status == "completed"
        assert result.status == "aborted" and "run budget" in (result.error or ""), result
        assert real_spend(session) <= 1000 + 500, real_spend(session)  # the limit and one turn at most
        assert real_spend(session) == 15 + 980 + 500
        assert len(parent_calls(stub_server)) == 2
        exceeded = [e for e in session.store.events(session.thread_id) if e.type == "budget_exceeded"]
        assert exceeded and exceeded[-1].data["field"] == "total_tokens"
        assert session.budget_figures()[0]["fields"]["total_tokens"]["spent"] == real_spend(session)
        first = waits(seen)[0]
        assert first["tasks"] == [task.id] and first["scope"] == "run" and first["field"] == "total_tokens"
        assert first["spent"] == 15 and first["held"] == 985 and first["limit"] == 1000
        assert task.id in first["reason"] and "hard limit" in first["reason"]
        assert waits(seen)[-1] is None
    finally:
        await session.close()


async def test_b2_b4_d8_the_parent_waits_then_goes_on_when_the_tasks_real_spend_leaves_room(
        tmp_path: Path, stub_server: StubServer) -> None:
    """B2, B4, D8, D7: the task holds everything left, but really spends 300: the parent's next call waits
    for it to settle, then goes ahead (315 of 1000) with the task's outcome among its messages, and the run
    ends ``done``; the task's spend is counted once."""
    ws = workspace(tmp_path / "ws", stub_server, budget="{scope: run, limit: {total_tokens: 1000}}")
    stub_server.script_for("parent", launch(), StubReply(text="all done", usage=(10, 5)))
    stub_server.script_for("a1", StubReply(tool_calls=[LS], usage=(100, 100)),
                           StubReply(text="the task's findings", usage=(50, 50), delay=0.5))
    session = await Session.open(ws, api_key="sk-test")
    try:
        seen = watch(session)
        result = await session.run("go")
        assert result.status == "done", result
        [task] = session.tasks()
        assert task.status == "completed"  # settled before the parent's second call
        second = parent_calls(stub_server)[1]
        assert "the task's findings" in str(second["messages"])  # its notice went with that call (D7)
        assert real_spend(session) == 15 + 300 + 15
        assert session.budget_figures()[0]["fields"]["total_tokens"]["spent"] == real_spend(session)
        assert [w["tasks"] for w in waits(seen) if w] == [[task.id]]
        settled = [i for i, e in enumerate(seen) if e.type == "task_settled"]
        ended = [i for i, e in enumerate(seen) if e.type == "budget_updated" and e.data.get("waiting", 0) is None]
        assert settled and ended and settled[0] < ended[0]
    finally:
        await session.close()


async def test_b2_d8_a_task_with_its_own_small_budget_does_not_make_the_parent_wait(
        tmp_path: Path, stub_server: StubServer) -> None:
    """B2, D8: an agent with its own ``budget:`` of 200 tokens under a 1000-token hard limit leaves room
    (15 + 200 < 1000): the parent goes on beside its slow task and ends ``done`` before it settles."""
    ws = workspace(tmp_path / "ws", stub_server, budget="{scope: run, limit: {total_tokens: 1000}}",
                   agent_budget="{total_tokens: 200}")
    stub_server.script_for("parent", launch(), StubReply(text="I go on", usage=(10, 5)))
    stub_server.script_for("a1", StubReply(text="slow", usage=(50, 50), delay=3.0))
    session = await Session.open(ws, api_key="sk-test")
    try:
        seen = watch(session)
        started = time.monotonic()
        result = await session.run("go")
        assert result.status == "done", result
        assert time.monotonic() - started < 2.5
        [task] = session.tasks()
        assert task.envelope == {"total_tokens": 200.0} and task.status not in ("completed", "failed")
        assert waits(seen) == []
        assert await session.wait_for_tasks(20)
    finally:
        await session.close()


async def test_b3_an_interrupting_budget_does_not_make_the_parent_wait(tmp_path: Path,
                                                                       stub_server: StubServer) -> None:
    """B3: with an interrupting run budget (it asks the person at its limit instead of stopping) the
    parent goes on beside a task holding everything left, as before."""
    ws = workspace(tmp_path / "ws", stub_server,
                   budget="{scope: run, limit: {total_tokens: 1000}, interrupt: true}")
    stub_server.script_for("parent", launch(), StubReply(text="I go on", usage=(10, 5)))
    stub_server.script_for("a1", StubReply(text="slow", usage=(50, 50), delay=3.0))
    session = await Session.open(ws, api_key="sk-test")
    try:
        seen = watch(session)
        started = time.monotonic()
        result = await session.run("go")
        assert result.status == "done", result
        assert time.monotonic() - started < 2.5
        assert waits(seen) == []
        assert await session.wait_for_tasks(20)
    finally:
        await session.close()


async def test_b2_r6_stop_during_the_wait_ends_the_run_promptly(tmp_path: Path, stub_server: StubServer) -> None:
    """B2, R6: Stop while the parent waits for a background task before its next model call: the run ends
    ``aborted`` (stopped by the user) within a moment, makes no further call, and the task goes on."""
    ws = workspace(tmp_path / "ws", stub_server, budget="{scope: session, limit: {total_tokens: 1000}}")
    stub_server.script_for("parent", launch(), StubReply(text="never", usage=(10, 5)))
    stub_server.script_for("a1", StubReply(text="slow", usage=(50, 50), delay=6.0))
    session = await Session.open(ws, api_key="sk-test")
    try:
        seen = watch(session)
        run = asyncio.ensure_future(session.run("go"))
        for _ in range(200):
            if any(waits(seen)):
                break
            await asyncio.sleep(0.05)
        assert any(waits(seen)), "the parent never waited"
        assert waits(seen)[0]["scope"] == "session"
        stopped = time.monotonic()
        await session.stop()
        result = await asyncio.wait_for(run, 5)
        assert time.monotonic() - stopped < 1.5
        assert result.status == "aborted" and "stopped" in (result.error or ""), result
        assert len(parent_calls(stub_server)) == 1
        [task] = session.tasks()
        assert task.status in ("queued", "pending")  # a background task outlives its parent's run
        await session.abort_task(task.id)
    finally:
        await session.close()


async def test_b2_d9_a_task_waiting_for_a_decision_is_waited_for_and_answered_from_the_inbox(
        tmp_path: Path, stub_server: StubServer) -> None:
    """B2, D8, D9: the task holding everything left asks the person; the parent waits (its ``waiting``
    says the task waits for a decision), the person answers from the inbox while it waits, the task
    settles and the parent's call goes ahead."""
    ws = workspace(tmp_path / "ws", stub_server, budget="{scope: run, limit: {total_tokens: 1000}}",
                   permissions="{default: allow, rules: [{ask: write, path: '/project/**'}]}")
    stub_server.script_for("parent", launch(), StubReply(text="all done", usage=(10, 5)))
    stub_server.script_for("a1",
                           StubReply(tool_calls=[("write_file", {"path": "/project/y", "content": "y"})],
                                     usage=(100, 100)),
                           StubReply(text="wrote y", usage=(50, 50)))
    session = await Session.open(ws, api_key="sk-test")
    try:
        seen = watch(session)
        run = asyncio.ensure_future(session.run("go"))
        item = None
        for _ in range(200):
            items = [d for d in session.pending_decisions() if d.source == "task"]
            if items and any(w and "decision" in w["reason"] for w in waits(seen)):
                item = items[0]
                break
            await asyncio.sleep(0.05)
        assert item is not None, waits(seen)
        assert not run.done() and len(parent_calls(stub_server)) == 1
        session.answer_task(item.task_id, {item.id: {"decision": "approve"}})
        result = await asyncio.wait_for(run, 20)
        assert result.status == "done", result
        assert (ws / "y").read_text() == "y"
        assert real_spend(session) == 15 + 300 + 15
    finally:
        await session.close()


async def test_b2_d7_a_task_waiting_for_a_decision_past_its_time_limit_is_aborted_and_the_wait_ends(
        tmp_path: Path, stub_server: StubServer) -> None:
    """B2, D7: nobody answers the task's question; once past its wall-clock limit (``timeout_seconds``:
    answered, it would expire at once) the task is aborted, its spend counted, and the parent goes on."""
    ws = workspace(tmp_path / "ws", stub_server, budget="{scope: run, limit: {total_tokens: 1000}}",
                   extra="  timeout_seconds: 1.5\n",
                   permissions="{default: allow, rules: [{ask: write, path: '/project/**'}]}")
    stub_server.script_for("parent", launch(), StubReply(text="all done", usage=(10, 5)))
    stub_server.script_for("a1", StubReply(tool_calls=[("write_file", {"path": "/project/y", "content": "y"})],
                                           usage=(100, 100)))
    session = await Session.open(ws, api_key="sk-test")
    try:
        result = await asyncio.wait_for(session.run("go"), 20)
        assert result.status == "done", result
        [task] = session.tasks()
        assert task.status == "aborted"
        assert not (ws / "y").exists()
        assert real_spend(session) == 15 + 200 + 15
        assert session.budget_figures()[0]["fields"]["total_tokens"]["spent"] == real_spend(session)
    finally:
        await session.close()


def test_b2_the_cli_says_what_the_run_waits_for(runner_loop: str) -> None:
    """B2, D8: ``workbench run`` prints the wait's reason on its status stream (``--json``: the event as it
    is); the wait's end and the ordinary meter updates print nothing."""
    import io

    from workbench.cli.output import _Output

    if runner_loop != "caller's loop":
        pytest.skip("no sub-agents run here")
    out, err = io.StringIO(), io.StringIO()
    output = _Output(False, out, err)
    reason = "waiting for background task a1:1 (pending) to settle before the next model call: …"
    output.on_event(Event("budget_updated", "t", "r", 2, {"budgets": [], "waiting": {"tasks": ["a1:1"],
                                                                                        "reason": reason}}))
    output.on_event(Event("budget_updated", "t", "r", 2, {"budgets": [], "waiting": None}))
    output.on_event(Event("budget_updated", "t", "r", 2, {"budgets": []}))
    assert err.getvalue() == f"budget: {reason}\n" and out.getvalue() == ""


def test_b2_b4_d8_property_a_parent_working_beside_its_tasks_passes_a_hard_limit_by_one_turn_at_most(
        tmp_path: Path, stub_server: StubServer) -> None:
    """B2, B4, D8 (property): the parent launches background tasks (with everything left, or with their own
    ``budget:``) and keeps working without waiting for them. Whatever the limit and the turns cost, what
    it and its tasks really spend never passes the hard limit by more than the turns under way when it was
    crossed: one of the parent's and one of a task's (each stops at its own limit after the turn that
    crossed it, B2). It used to pass it by a task's whole envelope on top."""
    import itertools

    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    usage = st.tuples(st.integers(1, 300), st.integers(0, 200))
    scenario = st.tuples(
        st.integers(200, 2000),  # the hard limit
        st.lists(usage, min_size=1, max_size=5),  # the parent's working turns after the launch
        st.lists(usage, min_size=1, max_size=4),  # the task's calls
        st.one_of(st.none(), st.integers(50, 400)),  # the agent's own budget, if any
    )
    runs = itertools.count()

    @settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
    @given(scenario)
    def check(case: tuple[int, list[tuple[int, int]], list[tuple[int, int]], int | None]) -> None:
        limit, turns, calls, own = case
        stub_server.reset()
        ws = workspace(tmp_path / f"ws{next(runs)}", stub_server,
                       budget=f"{{scope: run, limit: {{total_tokens: {limit}}}}}",
                       agent_budget=f"{{total_tokens: {own}}}" if own else "")
        stub_server.script_for("parent", launch((10, 5)), *[StubReply(tool_calls=[LS], usage=u) for u in turns],
                               StubReply(text="end", usage=(1, 1)))
        stub_server.script_for("a1", *[StubReply(tool_calls=[LS], usage=u, delay=0.05) for u in calls[:-1]],
                               StubReply(text="done", usage=calls[-1], delay=0.05))
        parent_turn = max(sum(u) for u in [(10, 5), (1, 1), *turns])
        task_turn = max(sum(u) for u in calls)

        async def run() -> None:
            session = await Session.open(ws, api_key="sk-test")
            try:
                result = await session.run("go")
                assert await session.wait_for_tasks(20)
                spent = real_spend(session)
                assert spent <= limit + parent_turn + task_turn, (spent, limit, parent_turn, task_turn, result)
            finally:
                await session.close()

        asyncio.run(run())

    check()
