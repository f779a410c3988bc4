"""R1 ("nothing is lost"): the thread store's file deleted or replaced while the store has it open.

A command the agent runs (the shell tool is not held by F4's protected paths the way the file tools
are) or a person may ``rm -rf .workbench`` mid-run. SQLite keeps writing the unlinked file, so before
these tests every later checkpoint "succeeded" into a file no one could open again, the run ended
``done`` and the thread was gone. Now the write that notices fails (the run ends failed), nothing is
committed into the file that went, and the database the store still had open is saved: put back at its
path when nothing took its place, else beside it as ``recovered-<time>.sqlite3``.
"""

from __future__ import annotations

import os
import pickle
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.engine.test_run_lifecycle import ECHO, make
from workbench.engine.agent import Engine
from workbench.engine.messages import Message
from workbench.engine.middleware import AgentMiddleware
from workbench.engine.models.scripted import ScriptedModel, reply, tool_reply
from workbench.engine.store import RunRecord, Store
from workbench.engine.tools import Tool, schema
from workbench.engine.usage import Usage
from workbench.errors import StoreError, StoreLostError

USER = {"role": "user", "content": "hi"}
ANSWER = {"role": "assistant", "content": "hello"}


def checkpoint(store: Store, thread: str, messages: list[dict[str, Any]], step: int = 1, **kw: Any) -> int:
    return store.save_checkpoint(thread, "r1", step, "running", {"messages": messages}, {}, **kw)


def stored_messages(path: Path, thread: str) -> list[dict[str, Any]]:
    """The thread's messages as a later process opening ``path`` reads them."""
    fresh = Store(path)
    try:
        cp = fresh.latest_checkpoint(thread)
        return cp.state["messages"] if cp is not None else []
    finally:
        fresh.close()


# -- the store --------------------------------------------------------------------------------------------
def test_R1_a_commit_after_rm_rf_workbench_fails_and_the_database_is_put_back_at_its_path(tmp_path):
    store = Store.for_workspace(tmp_path)
    t = store.create_thread("kept")
    checkpoint(store, t, [USER])
    shutil.rmtree(tmp_path / ".workbench")  # what `rm -rf .workbench` in the shell tool does

    with pytest.raises(StoreLostError) as caught:
        checkpoint(store, t, [USER, ANSWER], step=2)
    lost = caught.value
    assert isinstance(lost, StoreError)
    assert str(store.path) in str(lost) and "deleted" in str(lost) and "put back at that path" in str(lost)
    assert lost.restored and lost.saved == str(store.path) and lost.path == str(store.path)
    assert len(str(lost)) - len(str(store.path)) < 300  # one line of the CLI (400) holds it with a long path
    # A later process finds the thread as of the last commit: the write that noticed was not committed.
    assert stored_messages(store.path, t) == [USER]
    # The store goes on with the file put back: the next write is in it, for anyone who opens it.
    checkpoint(store, t, [USER, ANSWER], step=2)
    assert stored_messages(store.path, t) == [USER, ANSWER]
    assert sorted(p.name for p in store.path.parent.iterdir() if "recovered" in p.name) == []
    store.close()


def test_R1_a_store_file_replaced_by_another_is_left_alone_and_the_database_saved_beside(tmp_path):
    store = Store.for_workspace(tmp_path)
    t = store.create_thread("kept")
    checkpoint(store, t, [USER])
    other = Store(tmp_path / "other.sqlite3")
    theirs = other.create_thread("theirs")
    other.close()
    shutil.rmtree(store.path.parent)  # `rm -rf .workbench && cp -r elsewhere/.workbench .`
    store.path.parent.mkdir()
    os.replace(tmp_path / "other.sqlite3", store.path)

    with pytest.raises(StoreLostError) as caught:
        checkpoint(store, t, [USER, ANSWER], step=2)
    lost = caught.value
    assert "replaced by another file" in str(lost) and str(store.path) in str(lost)
    assert not lost.restored and lost.saved is not None
    saved = Path(lost.saved)
    assert saved.parent == store.path.parent and saved.name.startswith("recovered-") and saved.suffix == ".sqlite3"
    assert f"saved beside it as {saved.name}" in str(lost)
    assert stored_messages(saved, t) == [USER]  # every thread of the store that was open, in the copy
    # The file that took its place is untouched, and this store writes no more (into either file).
    assert [x.id for x in Store(store.path).threads()] == [theirs]
    with pytest.raises(StoreLostError, match="saved beside it"):
        store.rename_thread(t, "renamed")
    with pytest.raises(StoreLostError):
        checkpoint(store, t, [USER, ANSWER], step=2)
    assert store.thread(t).title == "kept"  # reads still answer, from the database it had open
    assert [x.id for x in Store(store.path).threads()] == [theirs]
    store.close()


def test_R1_another_connection_to_the_deleted_file_goes_on_with_the_copy_put_back(tmp_path):
    """The window's sub-agent stores, or the window and a ``workbench run``: several connections to one
    file. The first to notice puts the copy back; the others know it for theirs and go on with it."""
    first, second = Store.for_workspace(tmp_path), Store.for_workspace(tmp_path)
    t = first.create_thread("kept")
    checkpoint(first, t, [USER])
    shutil.rmtree(tmp_path / ".workbench")
    with pytest.raises(StoreLostError, match="put back at"):
        first.rename_thread(t, "one")
    with pytest.raises(StoreLostError, match="Another connection of the workbench put") as caught:
        second.rename_thread(t, "two")
    assert caught.value.restored
    second.rename_thread(t, "two")
    assert first.thread(t).title == "two"  # both write the one file now at the path
    assert not [p for p in first.path.parent.iterdir() if p.name.startswith("recovered-")]
    first.close()
    second.close()


def test_R1_with_the_workspace_itself_gone_the_copy_goes_to_the_user_data_folder(tmp_path, monkeypatch):
    ws = tmp_path / "ws"
    ws.mkdir()
    monkeypatch.setenv("WORKBENCH_DATA_DIR", str(tmp_path / "data"))
    store = Store.for_workspace(ws)
    t = store.create_thread("kept")
    checkpoint(store, t, [USER])
    shutil.rmtree(ws)
    with pytest.raises(StoreLostError) as caught:
        checkpoint(store, t, [USER, ANSWER], step=2)
    saved = Path(caught.value.saved)
    assert saved.parent == tmp_path / "data" / "recovered" and str(saved) in str(caught.value)
    assert not ws.exists()  # the workspace is not made again
    assert stored_messages(saved, t) == [USER]
    store.close()


def test_R1_only_the_deleted_database_file_is_noticed_too(tmp_path):
    """``rm .workbench/threads.sqlite3`` (its -wal and -shm left): the copy is put back without them."""
    store = Store.for_workspace(tmp_path)
    t = store.create_thread("kept")
    checkpoint(store, t, [USER])
    store.path.unlink()
    with pytest.raises(StoreLostError, match="put back"):
        checkpoint(store, t, [USER, ANSWER], step=2)
    checkpoint(store, t, [USER, ANSWER], step=2)
    assert stored_messages(store.path, t) == [USER, ANSWER]
    store.close()


def test_store_lost_error_survives_pickling():
    lost = StoreLostError("gone", path="/w/.workbench/threads.sqlite3", saved="/w/x.sqlite3", restored=False)
    back = pickle.loads(pickle.dumps(lost))
    assert (str(back), back.path, back.saved, back.restored) == ("gone", lost.path, lost.saved, False)


# -- a run (R1, R6: a failed run, its thread usable) ---------------------------------------------------------
def wiper(root: Path, *, changes_outside: bool, after: Any = None) -> tuple[Tool, list[int]]:
    """A tool doing what ``rm -rf .workbench`` in the shell tool does (F4 keeps it from the file tools)."""
    ran: list[int] = []

    async def wipe(args: dict[str, Any], ctx: Any) -> str:
        ran.append(1)
        shutil.rmtree(root / ".workbench")
        if after is not None:
            after()
        return "removed"

    return Tool("wipe", "Remove the .workbench folder.", schema({}), wipe, changes_outside=changes_outside), ran


@pytest.mark.parametrize("changes_outside", [True, False], ids=["journaled call", "checkpoint after the step"])
async def test_R1_a_run_whose_command_deletes_the_store_fails_and_the_thread_is_recovered(tmp_path, changes_outside):
    tool, ran = wiper(tmp_path, changes_outside=changes_outside)
    model = ScriptedModel([tool_reply(("wipe", {})), tool_reply(("echo", {"x": "a"})), reply("after"),
                           reply("recovered")])
    engine = make(tmp_path, model, tools=(ECHO, tool))
    seen: list[Any] = []
    engine.subscribe(seen.append)

    result = await engine.run("t", "clean up")
    assert result.status == "failed", result
    assert str(engine.store.path) in result.error and "put back at" in result.error
    assert any(e.type == "run_error" and "put back at" in e.data["error"] for e in seen)
    assert model.calls == 1  # nothing ran after the step that found the store gone

    # A later process (a new Store on the path) finds the thread, its history and how the run ended.
    later = Store.for_workspace(tmp_path)
    roles = [m["role"] for m in later.latest_checkpoint("t").state["messages"]]
    # A message whose one call only reads is committed at the step's end (issue 9): the step that
    # found the store gone is lost whole (R1), and recover() asks the model again.
    kept = ["user", "assistant", "tool"] if changes_outside else ["user"]
    assert roles == kept
    [run] = later.runs("t")
    assert run.status == "failed" and "put back at" in run.error
    assert later.thread("t").status == "failed"
    later.close()

    # The thread stays usable (R6): recover() runs the step again; the wiping call is not run twice (R9).
    model.replies = [reply("recovered")]
    model._next = 0
    again = await engine.recover("t")
    assert again.status == "done" and again.answer == "recovered"
    assert ran == [1]
    assert [Message.from_dict(m).role for m in engine.store.latest_checkpoint("t").state["messages"]] == \
        [*kept, "assistant"]
    engine.store.close()


async def test_R1_the_run_fails_even_when_another_write_noticed_first(tmp_path):
    """A claim's heartbeat or the prompt log (whose errors do not fail a run) may be the first write after
    the deletion: the copy is put back then, and the run still fails at its own next write — never
    ``done`` on a step that was rolled back."""
    holder: dict[str, Engine] = {}

    def swallowed_write() -> None:
        try:
            holder["engine"].store.create_thread("a write that is not the run's")
        except StoreLostError:
            pass  # swallowed, as the prompt log's and the heartbeat's are

    tool, _ = wiper(tmp_path, changes_outside=True, after=swallowed_write)
    model = ScriptedModel([tool_reply(("wipe", {})), reply("never")])
    engine = holder["engine"] = make(tmp_path, model, tools=(ECHO, tool))
    result = await engine.run("t", "clean up")
    assert result.status == "failed" and "put back at" in result.error, result
    assert model.calls == 1
    assert [r.status for r in Store.for_workspace(tmp_path).runs("t")] == ["failed"]
    # A new run is not refused: only the runs in flight when the file went are told.
    model.replies, model._next = [reply("fine")], 0
    assert (await engine.run("t", "go on")).status == "done"
    engine.store.close()


async def test_R1_the_run_fails_when_the_write_that_noticed_became_a_tool_error(tmp_path):
    """The folder goes between the step's checkpoint and a command's start: the write that notices is the
    command's journal entry (R9), whose error the engine hands the model as the call's result. The run
    must not go on as if nothing happened: its next write is refused and it ends failed."""
    ran: list[str] = []

    async def touch(args: dict[str, Any], ctx: Any) -> str:
        ran.append("touch")
        return "touched"

    class WipesFirst(AgentMiddleware):
        async def wrap_tool_call(self, call, ctx, call_next):
            shutil.rmtree(tmp_path / ".workbench", ignore_errors=True)
            return await call_next(call, ctx)

    tool = Tool("touch", "", schema({}), touch, changes_outside=True)
    model = ScriptedModel([tool_reply(("touch", {})), reply("never")])
    engine = make(tmp_path, model, middleware=(WipesFirst(),), tools=(ECHO, tool))
    result = await engine.run("t", "go")
    assert result.status == "failed" and "put back at that path" in result.error, result
    assert ran == [] and model.calls == 1
    assert [r.status for r in Store.for_workspace(tmp_path).runs("t")] == ["failed"]
    engine.store.close()


async def test_R1_a_run_whose_store_was_replaced_ends_with_the_error_and_writes_nothing(tmp_path):
    """Another file at the path: the run cannot record its ending anywhere it belongs; it ends with the
    error (the CLI exits 1) and the file now at the path is untouched."""

    def replace() -> None:
        other = sqlite3.connect(tmp_path / "other.sqlite3")
        other.execute("CREATE TABLE mine (x)")
        other.commit()
        other.close()
        (tmp_path / ".workbench").mkdir()
        os.replace(tmp_path / "other.sqlite3", tmp_path / ".workbench" / "threads.sqlite3")

    tool, _ = wiper(tmp_path, changes_outside=True, after=replace)
    engine = make(tmp_path, ScriptedModel([tool_reply(("wipe", {})), reply("never")]), tools=(ECHO, tool))
    with pytest.raises(StoreLostError) as caught:
        await engine.run("t", "clean up")
    saved = Path(caught.value.saved)
    assert saved.name.startswith("recovered-") and saved.name in str(caught.value)
    assert [m["role"] for m in stored_messages(saved, "t")] == ["user", "assistant"]
    tables = sqlite3.connect(engine.store.path).execute("SELECT name FROM sqlite_master").fetchall()
    assert tables == [("mine",)]
    engine.store.close()


def test_R1_the_check_is_one_stat_per_commit(tmp_path, monkeypatch):
    """The check costs one ``os.stat`` of the path per commit (about 1 µs here), nothing per read."""
    import workbench.engine.store_integrity as integrity

    store = Store.for_workspace(tmp_path)
    t = store.create_thread()
    calls: list[Any] = []
    real = integrity.identity
    monkeypatch.setattr(integrity, "identity", lambda p: (calls.append(p), real(p))[1])
    checkpoint(store, t, [USER], run=RunRecord("r1", t, "running", "hi", "", None, Usage(), 1.0, None))
    assert calls == [store.path]
    store.latest_checkpoint(t)
    store.threads()
    assert calls == [store.path]
    store.close()
