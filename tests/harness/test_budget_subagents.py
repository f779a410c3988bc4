"""Hard budgets with sub-agents (B1, B2, B4, D5, D7, D8): envelopes handed out are reserved, a settled
task's spend is counted before the next model call's check, session budgets bound envelopes, and a
``continue_task`` is a launch bounded by what is left. Real sessions against the loopback stub (litellm
for real), which answers the parent and each sub-agent by model name with scripted usage figures.

The rule every test here holds a run to: spend never passes a hard limit by more than the one call in
flight that crossed it."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.fakes import sessions_on_the_task_loop
from tests.stub_server import StubReply, StubServer
from workbench.session import Session

LS = ("ls", {"path": "/"})


def workspace(path: Path, stub: StubServer, *, budget: str, agents: str, extra: str = "") -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "workbench.yaml").write_text(
        f"model: openai/parent\napi_base: {stub.url}\npermissions: {{default: allow}}\nbudget:\n  - {budget}\n"
        f"subagents:\n  async: true\n  max_wait_seconds: 20\n{extra}  agents:\n{agents}")
    return path


def agent_lines(*names: str, budget: str = "") -> str:
    extra = f", budget: {budget}" if budget else ""
    return "".join(f"    - {{name: {n}, description: Reads., model: openai/{n}{extra}}}\n" for n in names)


def parent_calls(stub: StubServer) -> int:
    return len([r for r in stub.requests if r["model"] == "parent"])


def real_spend(session: Session) -> int:
    """What was really spent: the parent's own calls and every task's, counted or not."""
    own = session.store.thread_usage(session.thread_id).total_tokens
    return own + sum(session.store.thread_usage(t.child_thread).total_tokens for t in session.tasks())


def tool_results(session: Session) -> list[str]:
    return [m.content for m in session.messages if m.role == "tool"]


@pytest.fixture(autouse=True, params=["caller's loop", "task loop"])
def runner_loop(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test runs with the sub-agents on the caller's loop (CLI, scripts) and, as the window runs
    them, on the task loop's own thread and store connection (``threaded_model=True``)."""
    if request.param == "task loop":
        sessions_on_the_task_loop(monkeypatch)
    return str(request.param)


@pytest.fixture
def fixed_task_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    """Task ids a1:00000001, … in launch order, so a parent's script can name a task it launched."""
    import workbench.engine.task_store as task_store

    counter = itertools.count(1)
    monkeypatch.setattr(task_store, "uuid", SimpleNamespace(uuid4=lambda: SimpleNamespace(hex=f"{next(counter):08d}")))


# -- 3a: envelopes handed out are reserved --------------------------------------------------------------------
async def test_d8_background_envelopes_are_reserved_not_handed_out_again(tmp_path: Path,
                                                                          stub_server: StubServer) -> None:
    """D8, B2, B4: three background launches under a hard run limit of 1000 tokens: the first gets what is
    left (985), which it then holds; the other two find nothing left and are refused (an envelope of
    nothing buys nothing). The run spends at most its limit and the one call that crossed it, and stops
    ``aborted`` (it did spend 3345 of 1000 and end ``done`` when each task got the same 985)."""
    ws = workspace(tmp_path / "ws", stub_server, budget="{scope: run, limit: {total_tokens: 1000}}",
                   agents=agent_lines("a1", "a2", "a3"))
    stub_server.script_for("parent",
                           StubReply(tool_calls=[(f"delegate_to_a{i}", {"task": f"job {i}", "background": True})
                                                 for i in (1, 2, 3)], usage=(10, 5)),
                           StubReply(tool_calls=[("wait_for_background_tasks", {})], usage=(10, 5)),
                           StubReply(text="past the limit", usage=(10, 5)))
    for i in (1, 2, 3):
        stub_server.script_for(f"a{i}", StubReply(tool_calls=[LS], usage=(450, 450)),
                               StubReply(text="finished", usage=(100, 100)))
    session = await Session.open(ws, api_key="sk-test")
    try:
        result = await session.run("go")
        assert await session.wait_for_tasks(20)
        tasks = session.tasks()
        assert [t.envelope for t in tasks] == [{"total_tokens": 985.0}]  # one launched, holding what was left
        outs = tool_results(session)
        assert "Launched background task" in outs[0]
        assert all("Refused" in o and "nothing is left" in o for o in outs[1:3]), outs
        assert result.status == "aborted" and "budget" in (result.error or "")
        assert real_spend(session) <= 1000 + 900  # the limit and the one call (450 + 450) that crossed it
    finally:
        await session.close()


async def test_d8_a_configured_envelope_counts_what_running_tasks_hold(tmp_path: Path, stub_server: StubServer) -> None:
    """D8: with a configured ``budget:`` per agent, what is left counts the envelopes of tasks still
    running: the second launch of a 600-token agent under a 1000-token limit asks first (it did not,
    since the first task had not spent anything yet)."""
    ws = workspace(tmp_path / "ws", stub_server, budget="{scope: run, limit: {total_tokens: 1000}}",
                   agents=agent_lines("a1", "a2", budget="{total_tokens: 600}"))
    stub_server.script_for("parent",
                           StubReply(tool_calls=[("delegate_to_a1", {"task": "one", "background": True}),
                                                 ("delegate_to_a2", {"task": "two", "background": True})],
                                     usage=(10, 5)),
                           StubReply(text="ok", usage=(10, 5)))
    stub_server.script_for("a1", StubReply(text="one done", usage=(10, 5)))
    stub_server.script_for("a2", StubReply(text="two done", usage=(10, 5)))
    session = await Session.open(ws, api_key="sk-test")
    try:
        result = await session.run("go")
        assert result.status == "interrupted", result
        [q] = result.pending
        assert "would exceed" in q.payload["reason"] and "total_tokens 600 > 385 left" in q.payload["reason"]
        assert q.payload["exceeds_budget"] == "total_tokens 600 > 385 left"  # the CLI's --budget-approve decides
        assert [t.agent for t in session.tasks()] == ["a1"]
        result = await session.resume({q.id: {"decision": "reject", "message": "not now"}})
        assert result.status == "done"
        assert await session.wait_for_tasks(20)
        assert [t.agent for t in session.tasks()] == ["a1"]
    finally:
        await session.close()


# -- 3b: a settled task's spend is counted before the next call's check ------------------------------------------
async def test_b2_no_parent_model_call_once_a_settled_task_put_the_run_over(tmp_path: Path,
                                                                            stub_server: StubServer) -> None:
    """B2, B4, D7: a background task settles having spent 1100 of the run's 1000; its usage is counted
    when the parent's next model call is prepared, and that call is not made: the run stops ``aborted``
    with ``budget_exceeded`` (it made the call and ended ``done``). Its own ``budget:`` of 960 leaves room
    (15 + 960 < 1000), so the parent does not wait for it before its second call; it overshoots its own
    envelope by one turn."""
    ws = workspace(tmp_path / "ws", stub_server, budget="{scope: run, limit: {total_tokens: 1000}}",
                   agents=agent_lines("a1", budget="{total_tokens: 960}"))
    stub_server.script_for("parent",
                           StubReply(tool_calls=[("delegate_to_a1", {"task": "job", "background": True})],
                                     usage=(10, 5)),
                           StubReply(tool_calls=[("wait_for_background_tasks", {})], usage=(10, 5)),
                           StubReply(text="this call is past the hard limit", usage=(10, 5)))
    stub_server.script_for("a1", StubReply(tool_calls=[LS], usage=(450, 450)),
                           StubReply(text="finished", usage=(100, 100)))
    session = await Session.open(ws, api_key="sk-test")
    try:
        result = await session.run("go")
        assert result.status == "aborted", result
        assert parent_calls(stub_server) == 2
        exceeded = [e for e in session.store.events(session.thread_id) if e.type == "budget_exceeded"]
        assert exceeded and exceeded[-1].data["field"] == "total_tokens"
        assert session.budget_figures()[0]["fields"]["total_tokens"]["spent"] == 30 + 1100
    finally:
        await session.close()


# -- 3c: session budgets bound envelopes ------------------------------------------------------------------------
async def test_b1_d8_a_session_budget_bounds_a_sub_agents_envelope(tmp_path: Path, stub_server: StubServer) -> None:
    """B1, D8: a hard session budget bounds a foreground sub-agent as a run budget does: its envelope is
    what is left of the session's 1000 tokens, so it stops after the call that crossed it (it ran with
    envelope {} and spent 7202)."""
    ws = workspace(tmp_path / "ws", stub_server, budget="{scope: session, limit: {total_tokens: 1000}}",
                   agents=agent_lines("researcher"))
    stub_server.script_for("parent", StubReply(tool_calls=[("delegate_to_researcher", {"task": "dig"})],
                                               usage=(10, 5)),
                           StubReply(text="parent answer", usage=(10, 5)))
    stub_server.script_for("researcher", *[StubReply(tool_calls=[LS], usage=(450, 450)) for _ in range(8)],
                           StubReply(text="sub done", usage=(1, 1)))
    session = await Session.open(ws, api_key="sk-test")
    try:
        result = await session.run("go")
        [task] = session.tasks()
        assert task.envelope == {"total_tokens": 985.0}
        assert len([r for r in stub_server.requests if r["model"] == "researcher"]) == 2
        assert result.status == "aborted" and "session budget" in (result.error or "")
        assert real_spend(session) <= 1000 + 900
    finally:
        await session.close()


async def test_b1_d8_nothing_left_of_the_session_refuses_a_launch(tmp_path: Path, stub_server: StubServer) -> None:
    """B1, D8: a later run of a thread whose session budget is spent launches nothing: the delegation is
    refused as nothing is left (it launched with an empty envelope, unbounded)."""
    ws = workspace(tmp_path / "ws", stub_server, budget="{scope: session, limit: {total_tokens: 1000}}",
                   agents=agent_lines("researcher"))
    stub_server.script_for("parent", StubReply(text="a big first answer", usage=(900, 95)),
                           StubReply(tool_calls=[("delegate_to_researcher", {"task": "dig"})], usage=(10, 5)),
                           StubReply(text="never", usage=(1, 1)))
    stub_server.script_for("researcher", StubReply(text="should not run", usage=(450, 450)))
    session = await Session.open(ws, api_key="sk-test")
    try:
        assert (await session.run("first")).status == "done"
        result = await session.run("second")
        assert session.tasks() == []
        assert [r for r in stub_server.requests if r["model"] == "researcher"] == []
        assert "nothing is left" in tool_results(session)[-1]
        assert result.status == "aborted"  # 1010 of 1000: the next call is not made
    finally:
        await session.close()


# -- 3d: continue_task is a launch, bounded by what is left --------------------------------------------------------
async def test_d8_continue_task_gets_what_is_left_not_its_old_envelope(tmp_path: Path, stub_server: StubServer,
                                                                       fixed_task_ids: None) -> None:
    """D5, D8: a continued task without a configured budget runs its further turn on what is left now
    (1000 - 645 = 355 tokens), not on the 985 it was first given: it stops after the call that crossed."""
    ws = workspace(tmp_path / "ws", stub_server, budget="{scope: run, limit: {total_tokens: 1000}}",
                   agents=agent_lines("a1"))
    tid = "a1:00000001"
    stub_server.script_for("parent",
                           StubReply(tool_calls=[("delegate_to_a1", {"task": "job", "background": True})],
                                     usage=(10, 5)),
                           StubReply(tool_calls=[("wait_for_background_tasks", {})], usage=(10, 5)),
                           StubReply(tool_calls=[("continue_task", {"task_id": tid, "instructions": "more"})],
                                     usage=(10, 5)),
                           StubReply(tool_calls=[("wait_for_background_tasks", {})], usage=(10, 5)),
                           StubReply(text="end", usage=(10, 5)))
    stub_server.script_for("a1", StubReply(text="first", usage=(300, 300)),
                           StubReply(tool_calls=[LS], usage=(300, 300)),
                           StubReply(text="second", usage=(300, 300)))
    session = await Session.open(ws, api_key="sk-test")
    try:
        result = await session.run("go")
        assert await session.wait_for_tasks(20)
        [task] = session.tasks()
        assert task.id == tid
        assert task.envelope == {"total_tokens": 355.0}
        assert len([r for r in stub_server.requests if r["model"] == "a1"]) == 2  # stopped before its 3rd call
        assert result.status == "aborted"
        assert real_spend(session) <= 1000 + 600
    finally:
        await session.close()


async def test_d8_continue_task_asks_when_its_budget_exceeds_what_is_left(tmp_path: Path, stub_server: StubServer,
                                                                         fixed_task_ids: None) -> None:
    """D8: continuing a task whose agent's budget (900) exceeds what is left (355) asks first, as a fresh
    launch would; refused, the task is not continued (it was re-granted its 900 without a question)."""
    ws = workspace(tmp_path / "ws", stub_server, budget="{scope: run, limit: {total_tokens: 1000}}",
                   agents=agent_lines("a1", budget="{total_tokens: 900}"))
    tid = "a1:00000001"
    stub_server.script_for("parent",
                           StubReply(tool_calls=[("delegate_to_a1", {"task": "job", "background": True})],
                                     usage=(10, 5)),
                           StubReply(tool_calls=[("wait_for_background_tasks", {})], usage=(10, 5)),
                           StubReply(tool_calls=[("continue_task", {"task_id": tid, "instructions": "more"})],
                                     usage=(10, 5)),
                           StubReply(text="end", usage=(10, 5)))
    stub_server.script_for("a1", StubReply(text="first", usage=(300, 300)),
                           StubReply(text="second", usage=(300, 300)))
    session = await Session.open(ws, api_key="sk-test")
    try:
        result = await session.run("go")
        assert result.status == "interrupted", result
        [q] = result.pending
        assert "Continuing" in q.payload["reason"] and "total_tokens 900 > 355 left" in q.payload["reason"]
        result = await session.resume({q.id: {"decision": "reject", "message": "no"}})
        assert result.status == "done"
        assert session.task(tid).status == "completed"
        assert len([r for r in stub_server.requests if r["model"] == "a1"]) == 1  # never continued
    finally:
        await session.close()


# -- the property: whatever the tasks and their calls cost, one call of overshoot at most ---------------------------
def test_b2_d8_property_background_spend_never_passes_a_hard_limit_by_more_than_one_call(
        tmp_path: Path, stub_server: StubServer) -> None:
    """B2, B4, D7, D8 (property): for any number of background tasks and any usage per call, what the
    parent and its tasks really spend never passes the run's hard limit by more than the one call that
    crossed it, and the parent makes no model call once its settled tasks put it over."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    usage = st.tuples(st.integers(1, 400), st.integers(0, 200))
    scenario = st.tuples(
        st.integers(100, 3000),  # the hard limit
        usage,  # the parent's launching call
        st.lists(st.lists(usage, min_size=1, max_size=4), min_size=1, max_size=4),  # each task's calls
    )
    runs = itertools.count()

    @settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
    @given(scenario)
    def check(case: tuple[int, tuple[int, int], list[list[tuple[int, int]]]]) -> None:
        limit, launch, tasks = case
        names = [f"a{i + 1}" for i in range(len(tasks))]
        stub_server.reset()
        ws = workspace(tmp_path / f"ws{next(runs)}", stub_server,
                       budget=f"{{scope: run, limit: {{total_tokens: {limit}}}}}", agents=agent_lines(*names))
        # launches and the wait in one message: the parent makes no model call while its tasks run
        stub_server.script_for("parent",
                               StubReply(tool_calls=[*[(f"delegate_to_{n}", {"task": "job", "background": True})
                                                       for n in names], ("wait_for_background_tasks", {})],
                                         usage=launch),
                               StubReply(text="end", usage=(1, 1)))
        for n, calls in zip(names, tasks):
            stub_server.script_for(n, *[StubReply(tool_calls=[LS], usage=u) for u in calls[:-1]],
                                   StubReply(text="done", usage=calls[-1]))
        biggest = max([sum(launch), 2, *(sum(u) for calls in tasks for u in calls)])

        async def run() -> None:
            session = await Session.open(ws, api_key="sk-test")
            try:
                result = await session.run("go")
                assert await session.wait_for_tasks(20)
                spent = real_spend(session)
                assert spent <= limit + biggest, (spent, limit, biggest, result)
                envelopes = [t.envelope.get("total_tokens", 0.0) for t in session.tasks()]
                assert sum(envelopes) <= max(0, limit - sum(launch)), envelopes
                if spent - 2 * (result.status == "done") >= limit:  # over before the last call: never made
                    assert result.status == "aborted" and parent_calls(stub_server) == 1, (spent, limit, result)
            finally:
                await session.close()

        asyncio.run(run())

    check()
