"""A delegation call is matched to its task by the call itself, not by the provider's id alone (D1, D5,
R9, R10): providers reuse tool-call ids (``call_0`` in every message), so a later step's call with the
same id is a new launch, while a resumed step's call (the same run and step) still finds the task it
launched and never launches a second one. Real sessions against the loopback stub (litellm for real)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.fakes import sessions_on_the_task_loop
from tests.stub_server import StubReply, StubServer
from workbench.engine.store import Store
from workbench.engine.task_store import SqliteTaskStore
from workbench.session import Session


@pytest.fixture(autouse=True, params=["caller's loop", "task loop"])
def runner_loop(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Sub-agents on the caller's loop (CLI, scripts) and, as the window runs them, on the task loop."""
    if request.param == "task loop":
        sessions_on_the_task_loop(monkeypatch)
    return str(request.param)


def workspace(tmp_path: Path, stub: StubServer, *, permissions: str = "{default: allow}") -> Path:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    (ws / "workbench.yaml").write_text(
        f"model: openai/parent\napi_base: {stub.url}\npermissions: {permissions}\n"
        "subagents:\n  async: true\n  max_wait_seconds: 5\n  agents:\n"
        "    - {name: a1, description: Reads., model: openai/a1}\n"
        "    - {name: writer, description: Writes., model: openai/writer}\n")
    return ws


def tool_results(session: Session) -> list[str]:
    return [m.content for m in session.messages if m.role == "tool"]


async def test_d1_r10_a_call_id_reused_on_a_later_step_launches_its_own_task(tmp_path: Path,
                                                                            stub_server: StubServer) -> None:
    """D1, R10: ``call_0`` in both messages: the second delegation is launched, and its result is its
    own answer — never the first task's ("there are 3 files" for "write a poem")."""
    stub_server.script_for("parent",
                           StubReply(tool_calls=[("delegate_to_a1", {"task": "count the files"}, "call_0")]),
                           StubReply(tool_calls=[("delegate_to_a1", {"task": "write a poem"}, "call_0")]),
                           StubReply(text="parent done"))
    stub_server.script_for("a1", StubReply(text="there are 3 files"), StubReply(text="roses are red"))
    session = await Session.open(workspace(tmp_path, stub_server), api_key="sk-test")
    try:
        result = await session.run("go")
        assert result.status == "done", result
        assert [t.description for t in session.tasks()] == ["count the files", "write a poem"]
        first, second = tool_results(session)
        assert "there are 3 files" in first
        assert "roses are red" in second and "there are 3 files" not in second
        assert len([r for r in stub_server.requests if r["model"] == "a1"]) == 2
    finally:
        await session.close()


async def test_d5_r10_a_background_launch_reusing_an_earlier_steps_call_id_is_a_new_task(
        tmp_path: Path, stub_server: StubServer) -> None:
    """D5, R10: a background launch whose id an earlier step's launch used gets its own task id, not
    "was launched; its status is …" of the earlier task."""
    stub_server.script_for("parent",
                           StubReply(tool_calls=[("delegate_to_a1", {"task": "one", "background": True}, "call_0")]),
                           StubReply(tool_calls=[("delegate_to_a1", {"task": "two", "background": True}, "call_0")]),
                           StubReply(text="launched both"))
    stub_server.script_for("a1", StubReply(text="first"), StubReply(text="second"))
    session = await Session.open(workspace(tmp_path, stub_server), api_key="sk-test")
    try:
        result = await session.run("go")
        assert result.status == "done", result
        one, two = session.tasks()
        assert (one.description, two.description) == ("one", "two")
        first, second = tool_results(session)
        assert one.id in first and two.id in second and "Launched" in second
        assert await session.wait_for_tasks(10)
        assert sorted(session.task(t.id).outcome for t in (one, two)) == ["first", "second"]
    finally:
        await session.close()


async def test_d9_r9_a_resumed_step_finds_its_own_task_when_the_id_was_reused(tmp_path: Path,
                                                                           stub_server: StubServer) -> None:
    """R9, D5, D9: the second step's ``call_0`` launches the writer, whose approval suspends the run. On
    resume the same run's same step runs ``call_0`` again: it finds the writer's task (not the first
    step's, not a third launch) and the writer goes on to answer."""
    ws = workspace(tmp_path, stub_server,
                   permissions="{default: ask, rules: [{allow: invoke, tool: delegate_to_*}]}")
    stub_server.script_for("parent",
                           StubReply(tool_calls=[("delegate_to_a1", {"task": "count the files"}, "call_0")]),
                           StubReply(tool_calls=[("delegate_to_writer", {"task": "write notes.md"}, "call_0")]),
                           StubReply(text="parent done"))
    stub_server.script_for("a1", StubReply(text="there are 3 files"))
    stub_server.script_for("writer",
                           StubReply(tool_calls=[("write_file", {"path": "/project/notes.md", "content": "hi"})]),
                           StubReply(text="Wrote notes.md."))
    session = await Session.open(ws, api_key="sk-test")
    try:
        result = await session.run("go")
        assert result.status == "interrupted", result
        [q] = result.pending
        assert q.payload["agent"] == "writer"
        first, writer = session.tasks()
        assert writer.status == "awaiting_decision"
        result = await session.resume({q.id: {"decision": "approve"}})
        assert result.status == "done", result
        assert [t.id for t in session.tasks()] == [first.id, writer.id]  # nothing launched twice
        assert session.task(writer.id).status == "completed"
        assert (ws / "notes.md").read_text() == "hi"
        assert "Wrote notes.md." in tool_results(session)[1]
    finally:
        await session.close()


def test_r10_task_for_call_matches_the_same_run_and_step_only(tmp_path: Path) -> None:
    """R10, R9: ``task_for_call`` with a run and step: the same id in another step or run is another
    call; a row made before steps were recorded matches on its run."""
    store = Store(tmp_path / "s.db")
    try:
        tasks = SqliteTaskStore(store)
        parent = store.create_thread(title="p")

        def launch(run: str, step: int | None) -> str:
            return tasks.create_task(parent_thread=parent, parent_run=run, parent_step=step, call_id="call_0",
                                     agent="a1", child_thread=store.create_thread(title="c"), description="d",
                                     background=False, status="pending", envelope={}, depth=1, prompt="p").id

        step1 = launch("r1", 1)
        found = tasks.task_for_call(parent, "call_0", run_id="r1", step=1)
        assert found is not None and found.id == step1 and found.parent_step == 1
        assert tasks.task_for_call(parent, "call_0", run_id="r1", step=2) is None
        assert tasks.task_for_call(parent, "call_0", run_id="r2", step=1) is None
        step2 = launch("r1", 2)
        assert tasks.task_for_call(parent, "call_0", run_id="r1", step=1).id == step1  # type: ignore[union-attr]
        assert tasks.task_for_call(parent, "call_0", run_id="r1", step=2).id == step2  # type: ignore[union-attr]
        legacy = launch("r0", None)
        assert tasks.task_for_call(parent, "call_0", run_id="r0", step=5).id == legacy  # type: ignore[union-attr]
    finally:
        store.close()
