"""B5: the step limit is a budget hold the person can extend, not a failure.

``steps`` counts a run's model calls. Unless the workspace limits ``steps`` itself, every run has
``{scope: run, limit: {steps: 200}, interrupt: true}``: at 200 steps the run suspends on a budget hold
("The agent has taken 200 steps in this run"); approving allows 200 more, refusing ends the run
``aborted`` with its reason — never ``failed``. In process through the ``Session`` with the scripted
model, and through the real CLI (``--budget-approve``) against the loopback stub.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_cli import check_stream, cli, env, json_lines, make_workspace, no_traceback  # noqa: F401
from tests.stub_server import StubReply, StubServer
from workbench.budget_words import hold_fields, more_words
from workbench.config import BudgetConfig, WorkbenchConfig, with_step_budget
from workbench.engine.agent import Agent, Engine
from workbench.engine.models.scripted import ScriptedModel, reply, tool_reply
from workbench.engine.store import Store
from workbench.errors import BuildError
from workbench.harness.budget import BudgetMiddleware
from workbench.session import Session


def workspace(tmp_path: Path, yaml: str = "") -> Path:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    (ws / "README.md").write_text("# Project\n", encoding="utf-8")
    (ws / "workbench.yaml").write_text("model: demo\n" + yaml, encoding="utf-8")
    return ws


def ls_steps(n: int, answer: str = "All listed.") -> ScriptedModel:
    """``n`` steps that each list the project, then an answer."""
    return ScriptedModel([*(tool_reply(("ls", {"path": "/project"}, f"ls{i}")) for i in range(1, n + 1)),
                          reply(answer)])


def step_budget(session: Session) -> dict[str, Any]:
    """The run's step figures as the Budget panel and the status bar read them (G11)."""
    [figure] = [f for f in session.budget_figures() if "steps" in f["fields"]]
    return figure


async def test_b5_default_step_hold_suspends_at_200_and_approving_allows_200_more(tmp_path: Path) -> None:
    model = ls_steps(230)
    session = await Session.open(workspace(tmp_path), model=model)
    try:
        result = await session.run("List the project, again and again")
        assert result.status == "interrupted", result
        assert model.calls == 200  # held after the 200th step's model call, before its tool call runs
        [hold] = result.pending
        assert hold.kind == "budget_hold" and hold.call_id == "ls200"
        assert hold.payload["field"] == "steps" and (hold.payload["spent"], hold.payload["limit"]) == (200, 200)
        assert hold.payload["reason"] == "the agent has taken 200 steps in this run"
        # the same words everywhere: "allow 200 more steps" in the dialog and at the terminal (G11)
        assert [(f, s, cap) for f, s, _lim, cap in hold_fields(hold.payload)] == [("steps", 200, 200)]
        assert more_words("steps", 200) == "200 more steps"
        assert step_budget(session)["fields"]["steps"] == {"spent": 200, "limit": 200}
        assert session.status == "interrupted"

        result = await session.resume({hold.id: {"decision": "approve"}})
        # 200 more: the 230 steps and the answer fit (231 model calls in all), no second hold
        assert result.status == "done" and result.answer == "All listed.", result
        model.assert_all_used()
        assert step_budget(session)["fields"]["steps"] == {"spent": 231, "limit": 400}
        events = [e.type for e in session.store.events(session.thread_id)]
        assert events.count("budget_hold") == 1 and "budget_exceeded" not in events
    finally:
        await session.close()


async def test_b5_refusing_the_step_hold_aborts_the_run_with_its_reason_never_failed(tmp_path: Path) -> None:
    model = ls_steps(205)
    session = await Session.open(workspace(tmp_path), model=model)
    try:
        result = await session.run("Keep listing")
        [hold] = result.pending
        result = await session.resume({hold.id: {"decision": "reject", "reason": "enough for today"}})
        assert result.status == "aborted", result
        assert model.calls == 200  # not one model call more
        run = session.last_run
        assert run is not None and run.status == "aborted"
        assert "200 steps" in (run.error or "") and "enough for today" in (run.error or "")
        assert session.status == "aborted"
        # the held call did not run: its result says so, and the history stays valid
        [held] = [m for m in session.messages if m.role == "tool" and m.tool_call_id == "ls200"]
        assert held.meta.get("status") == "rejected"
        exceeded = session.store.events(session.thread_id, types={"budget_exceeded"})
        assert exceeded and exceeded[-1].data["field"] == "steps" and exceeded[-1].data["refused"] is True
    finally:
        await session.close()


async def test_b5_a_workspace_steps_limit_replaces_the_default(tmp_path: Path) -> None:
    ws = workspace(tmp_path, "budget:\n  - {scope: run, limit: {total_tokens: 100000}}\n"
                             "  - {scope: run, limit: {steps: 3}, interrupt: true}\n")
    model = ls_steps(4)
    session = await Session.open(ws, model=model)
    try:
        [budget] = [m for m in session.engine.agent.middleware if isinstance(m, BudgetMiddleware)]
        assert [dict(b.limit) for b in budget.limits] == [{"total_tokens": 100000}, {"steps": 3}]  # no 200
        result = await session.run("List four times")
        assert result.status == "interrupted" and model.calls == 3
        [hold] = result.pending
        assert hold.payload["budget"] == 1 and hold.payload["spent"] == 3 and hold.payload["limit"] == 3
        result = await session.resume({hold.id: {"decision": "approve", "allow_more": {"steps": 1}}})
        # one more step: the 4th is held again (a hold, not a failure), and then the answer goes through
        assert result.status == "interrupted" and model.calls == 4
        result = await session.resume({result.pending[0].id: {"decision": "approve"}})
        assert result.status == "done" and model.calls == 5
    finally:
        await session.close()


async def test_b5_a_hard_step_limit_stops_the_run_aborted(tmp_path: Path) -> None:
    ws = workspace(tmp_path, "budget:\n  - {scope: run, limit: {steps: 2}}\n")
    model = ScriptedModel([tool_reply(("ls", {"path": "/project"}), text="Looking. "),
                           tool_reply(("ls", {"path": "/project"})), reply("never asked")])
    session = await Session.open(ws, model=model)
    try:
        result = await session.run("List")
        assert result.status == "aborted" and model.calls == 2, result  # B2: stopped before the 3rd call
        [exceeded] = session.store.events(session.thread_id, types={"budget_exceeded"})
        assert (exceeded.data["field"], exceeded.data["spent"], exceeded.data["limit"]) == ("steps", 2, 2)
        assert "2 steps" in (session.last_run.error or "")
    finally:
        await session.close()


def test_b5_the_default_is_added_unless_a_budget_limits_steps() -> None:
    own = BudgetConfig("run", {"total_tokens": 10.0}, True)
    assert with_step_budget((own,)) == (own, BudgetConfig("run", {"steps": 200.0}, True))
    mine = BudgetConfig("run", {"steps": 500.0, "cost_usd": 1.0})
    assert with_step_budget((own, mine)) == (own, mine)
    assert WorkbenchConfig().effective_budget == (BudgetConfig("run", {"steps": 200.0}, True),)


def test_b5_steps_in_a_session_budget_is_refused_naming_it() -> None:
    from workbench.harness.budget import BudgetLimit

    with pytest.raises(BuildError, match=r"budget\[0\].*steps counts one run's model calls.*scope: run"):
        BudgetMiddleware([BudgetLimit("session", {"steps": 1000})])


async def test_b5_a_bare_agents_step_backstop_ends_the_run_aborted_not_failed(tmp_path: Path) -> None:
    """An Agent built without the stack (a script) keeps the engine's own limit; reaching it is a stop."""
    model = ScriptedModel([tool_reply(("nothing", {})) for _ in range(5)])
    engine = Engine(Agent(model, max_steps=3), Store.for_workspace(tmp_path))
    result = await engine.run("t", "go")
    assert result.status == "aborted" and model.calls == 3
    [run] = engine.store.runs("t")
    assert run.status == "aborted" and "step limit (3 steps)" in (run.error or "")


# -- the CLI: --budget-approve decides the step hold as any budget hold --------------------------------------
def _stub_steps(stub: StubServer, n: int, answer: str = "Done listing.") -> None:
    stub.script(*(StubReply(tool_calls=[("ls", {"path": "/project"}, f"ls{i}")], usage=(20, 2))
                  for i in range(1, n + 1)), StubReply(text=answer, usage=(20, 2)))


def test_b5_cli_default_hold_refused_by_budget_approve_no_exits_3(tmp_path: Path, env: dict[str, str],
                                                                    stub_server: StubServer) -> None:
    ws = make_workspace(tmp_path, stub_server.url)
    _stub_steps(stub_server, 201)
    proc = cli(["run", "--json", "--budget-approve", "no", "List the project"], ws, env, timeout=240)
    no_traceback(proc)
    assert proc.returncode == 3, proc.stderr
    events = check_stream(proc.stdout)
    assert events[-1]["status"] == "aborted"
    holds = [e for e in events if e["type"] == "budget_hold"]
    assert holds and holds[0]["field"] == "steps" and holds[0]["spent"] == 200 and holds[0]["limit"] == 200
    assert len(stub_server.requests) == 200  # no model call after the hold


def test_b5_cli_hold_suspends_without_a_terminal_and_budget_approve_yes_goes_on(
        tmp_path: Path, env: dict[str, str], stub_server: StubServer) -> None:
    ws = make_workspace(tmp_path, stub_server.url, "budget:\n  - {scope: run, limit: {steps: 2}, interrupt: true}\n")
    _stub_steps(stub_server, 3)
    proc = cli(["run", "--json", "List the project"], ws, env)
    no_traceback(proc)
    assert proc.returncode == 4, proc.stderr  # --budget-approve ask and no terminal: suspended
    last = check_stream(proc.stdout)[-1]
    assert last["status"] == "interrupted" and [p["kind"] for p in last["pending"]] == ["budget_hold"]
    assert "--budget-approve yes" in proc.stderr

    proc = cli(["resume", "--thread", last["thread"], "--budget-approve", "yes", "--json"], ws, env)
    no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    assert check_stream(proc.stdout)[-1]["answer"] == "Done listing."
    assert "allowed 2 more steps by --budget-approve yes" in proc.stderr
    assert len(stub_server.requests) == 4

    assert json.loads(cli(["show", last["thread"], "--json"], ws, env).stdout)["status"] == "done"


def test_b5_cli_budget_approve_yes_in_one_go(tmp_path: Path, env: dict[str, str], stub_server: StubServer) -> None:
    ws = make_workspace(tmp_path, stub_server.url, "budget:\n  - {scope: run, limit: {steps: 2}, interrupt: true}\n")
    _stub_steps(stub_server, 5)
    proc = cli(["run", "--budget-approve", "yes", "List the project"], ws, env)
    no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "Done listing."
    assert proc.stderr.count("allowed 2 more steps") == 2  # held at 2 and at 4 steps, 6 model calls in all
    assert len(stub_server.requests) == 6
