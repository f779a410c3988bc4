"""The Session facade (DESIGN §6): open, run, resume, events replayed then live, state, threads, documents."""

from __future__ import annotations

import pytest

from workbench.backends.base import BackendRefusal
from workbench.engine.models.scripted import ScriptedModel, reply, tool_reply
from workbench.errors import ConfigError
from workbench.session import Session


@pytest.fixture
def workspace(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "AGENTS.md").write_text("# Rules\nBe brief.\n")
    return ws


async def test_open_run_resume_and_state(workspace):
    model = ScriptedModel([tool_reply(("write_file", {"path": "/project/a.txt", "content": "hi"})), reply("wrote it")])
    session = await Session.open(workspace, model=model)
    result = await session.run("write a file")
    assert result.status == "interrupted" and session.status == "interrupted"
    assert [q.kind for q in session.pending] == ["tool_approval"]
    assert not (workspace / "a.txt").exists()
    done = await session.resume({q.id: "approve" for q in result.pending})
    assert done.status == "done" and (workspace / "a.txt").read_text() == "hi"
    assert session.pending == () and session.usage.calls == 2
    assert [m.role for m in session.messages] == ["user", "assistant", "tool", "assistant"]
    await session.close()


async def test_events_replay_durable_ones_to_a_late_subscriber(workspace):
    session = await Session.open(workspace, model=ScriptedModel([reply("hello")]))
    await session.run("hi")
    seen = []
    unsubscribe = session.subscribe(seen.append)
    assert [e.type for e in seen][0] == "run_started" and seen[-1].type == "run_finished"
    assert all(e.durable for e in seen)
    unsubscribe()


async def test_reopen_a_thread_and_unknown_thread_is_a_clear_error(workspace):
    s1 = await Session.open(workspace, model=ScriptedModel([reply("one")]))
    await s1.run("first")
    tid = s1.thread_id
    await s1.close()
    s2 = await Session.open(workspace, tid, model=ScriptedModel([]))
    assert s2.messages[-1].content == "one" and s2.status == "done"
    with pytest.raises(ConfigError, match="no thread 'nope'"):
        await Session.open(workspace, "nope", model=ScriptedModel([]))


async def test_threads_new_rename_delete(workspace):
    session = await Session.open(workspace, model=ScriptedModel([]))
    first = session.thread_id
    second = session.new_thread()
    session.rename_thread(second, "Renamed")
    assert {t.id for t in session.threads()} == {first, second}
    session.delete_thread(first)
    assert [t.title for t in session.threads()] == ["Renamed"]


async def test_documents_save_through_the_agents_rules(workspace):
    (workspace / "workbench.yaml").write_text(
        "permissions:\n  rules:\n    - {allow: read, path: '/**'}\n    - {deny: write, path: '/project/secret/**'}\n"
    )
    session = await Session.open(workspace, model=ScriptedModel([]))
    assert "Be brief" in await session.read_document("/project/AGENTS.md")
    await session.write_document("/project/AGENTS.md", "# Rules\nBe very brief.\n")
    assert "very brief" in (workspace / "AGENTS.md").read_text()
    ok, why = session.write_verdict("/project/secret/x.md")
    assert not ok and "deny write /project/secret/**" in why
    with pytest.raises(BackendRefusal):
        await session.write_document("/project/secret/x.md", "nope")
    assert not (workspace / "secret").exists()


async def test_bad_config_is_a_config_error_naming_file_and_line(workspace):
    (workspace / "workbench.yaml").write_text("model: demo\nmax_prompt_section_tokens: lots\n")
    with pytest.raises(ConfigError, match=r"workbench.yaml:2.*max_prompt_section_tokens"):
        await Session.open(workspace)


async def test_list_threads_without_opening_and_last_run(workspace):
    assert Session.list_threads(workspace) == []
    assert not (workspace / ".workbench").exists()  # listing created nothing
    session = await Session.open(workspace, model=ScriptedModel([reply("hi", )]))
    assert session.last_run is None
    result = await session.run("hello")
    assert [t.id for t in Session.list_threads(workspace)] == [session.thread_id]
    assert session.last_run.id == result.run_id and session.last_run.status == "done"
    assert session.last_run.usage.calls == 1


async def test_the_users_default_permission_applies_unless_the_workspace_sets_one(workspace):
    calls = [("write_file", {"path": "/project/b.txt", "content": "b"})]
    denied = await Session.open(workspace, model=ScriptedModel([tool_reply(*calls), reply("ok")]),
                                default_permission="deny")
    assert (await denied.run("write")).status == "done"
    assert "Denied" in [m for m in denied.messages if m.role == "tool"][0].content
    assert not (workspace / "b.txt").exists()

    (workspace / "workbench.yaml").write_text("permissions:\n  default: ask\n")
    asked = await Session.open(workspace, model=ScriptedModel([tool_reply(*calls)]), default_permission="deny")
    assert (await asked.run("write")).status == "interrupted"  # the workspace's own default wins


async def test_a_run_cut_off_by_a_crash_reads_as_failed_and_recovers(workspace):
    from workbench.engine.store import RunRecord
    from workbench.engine.usage import Usage

    session = await Session.open(workspace, model=ScriptedModel([reply("after the crash")]))
    session.store.create_thread(thread_id=session.thread_id)
    session.store.save_run(RunRecord("r1", session.thread_id, "running", "hello", "", None, Usage(), 1.0, None))
    assert session.status == "failed" and "cut off" in session.last_error()
    result = await session.recover()
    assert result.status == "done" and session.status == "done"
    assert [m.content for m in session.messages] == ["hello", "after the crash"]


async def test_open_looks_the_key_up_off_the_loop(workspace):
    """The OS keyring may take a while (D-Bus, a prompt to unlock it); in the window the loop is the GUI's,
    so Session.open asks it on a worker thread and the loop goes on turning meanwhile."""
    import keyring

    from tests.fakes import SlowKeyring, ticks_during
    from workbench import keystore

    (workspace / "workbench.yaml").write_text("model: openai/test-model\n")
    ring = SlowKeyring(delay=0.5)
    ring.passwords[(keystore.SERVICE, "openai")] = "sk-from-the-keyring"
    previous = keyring.get_keyring()
    keyring.set_keyring(ring)
    try:
        session, ticks = await ticks_during(Session.open(workspace))
    finally:
        keyring.set_keyring(previous)
    try:
        assert len(ring.reads) == 1, ring.reads  # asked once, not again by make_model
        start, end, on_main = ring.reads[0]
        assert not on_main
        assert sum(start <= t <= end for t in ticks) >= 10, "the loop stood still while the keyring answered"
        inner = getattr(session.engine.agent.model, "inner", session.engine.agent.model)
        assert inner.api_key == "sk-from-the-keyring"
    finally:
        await session.close()
