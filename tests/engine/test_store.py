"""The SQLite store: WAL, threads, checkpoints in one transaction, events, usage (R1, R3, R5, M8)."""

from __future__ import annotations

import sqlite3

import pytest

from workbench.engine.events import Event
from workbench.engine.store import RunRecord, Store
from workbench.engine.usage import Usage
from workbench.errors import StoreError


def test_store_uses_wal_and_lives_in_the_workspace(tmp_path):
    store = Store.for_workspace(tmp_path)
    assert store.path == tmp_path / ".workbench" / "threads.sqlite3"
    mode = sqlite3.connect(store.path).execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


def test_threads_newest_first_rename_delete(tmp_path):
    store = Store.for_workspace(tmp_path)
    a = store.create_thread("first")
    b = store.create_thread("second")
    store.save_checkpoint(a, "r1", 1, "done", {"messages": []}, {})  # touching a makes it newest
    assert [t.id for t in store.threads()] == [a, b]
    store.rename_thread(b, "renamed")
    assert store.thread(b).title == "renamed"
    store.delete_thread(a)
    assert store.thread(a) is None and store.latest_checkpoint(a) is None and store.events(a) == []


def test_R1_checkpoint_usage_and_run_record_commit_together(tmp_path):
    store = Store.for_workspace(tmp_path)
    t = store.create_thread()
    u = Usage(10, 5, calls=1, cost_usd=0.5)
    run = RunRecord("r1", t, "running", "hi", "", None, Usage(), 1.0, None)
    store.save_checkpoint(t, "r1", 1, "running", {"messages": [{"role": "user", "content": "hi"}]}, {},
                          calls=[("m", u)], run=run)
    reopened = Store.for_workspace(tmp_path)
    cp = reopened.latest_checkpoint(t)
    assert cp.step == 1 and cp.state["messages"][0]["content"] == "hi"
    assert reopened.thread_usage(t).cost_usd == 0.5 and reopened.usage_calls(t, "r1") == [("m", u)]
    assert reopened.run("r1").status == "running"


def test_R1_a_failing_checkpoint_writes_nothing(tmp_path):
    store = Store.for_workspace(tmp_path)
    t = store.create_thread()
    with pytest.raises(TypeError):
        store.save_checkpoint(t, "r1", 1, "running", {"bad": object()}, {})
    assert store.latest_checkpoint(t) is None and store.thread_usage(t) == Usage()


def test_M8_events_get_sequence_numbers_and_replay_in_order(tmp_path):
    store = Store.for_workspace(tmp_path)
    for i in range(3):
        store.append_event(Event("tool_call_finished", "t", "r", i, {"n": i}))
    events = store.events("t")
    assert [e.seq for e in events] == [1, 2, 3] and [e.data["n"] for e in events] == [0, 1, 2]
    assert [e.seq for e in store.events("t", after_seq=2)] == [3]


def test_a_corrupt_store_file_is_a_clear_error(tmp_path):
    path = tmp_path / ".workbench" / "threads.sqlite3"
    path.parent.mkdir()
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match="threads.sqlite3"):
        Store(path)


def test_a_checkpoint_can_be_read_without_its_history(tmp_path):
    store = Store.for_workspace(tmp_path)
    t = store.create_thread()
    store.save_checkpoint(t, "r1", 1, "done", {"messages": [{"role": "user", "content": "hi"}], "todos": [1]}, {})
    light = store.latest_checkpoint(t, messages=False)
    assert light.state == {"todos": [1]}
    assert store.latest_checkpoint(t).state["messages"] == [{"role": "user", "content": "hi"}]


def test_F3_big_messages_and_state_values_are_stored_compressed_and_read_back_whole(tmp_path):
    import random

    rng = random.Random(3)
    words = ["".join(rng.choice("abcdefghij") for _ in range(rng.randint(2, 8))) for _ in range(2000)]
    text = " ".join(rng.choice(words) for _ in range(200_000)) + " é ✓ 😀"  # ~1 MB of prose, non-ASCII too
    store = Store.for_workspace(tmp_path)
    t = store.create_thread()
    small = {"role": "user", "content": "hi"}
    state = {"messages": [small, {"role": "tool", "content": text, "tool_call_id": "c1"}],
             "files": {"/big.txt": text}}
    store.save_checkpoint(t, "r1", 1, "done", state, {})
    cp = store.latest_checkpoint(t)
    assert cp.state["messages"][1]["content"] == text and cp.state["files"]["/big.txt"] == text
    assert cp.state["messages"][0] == small
    db = sqlite3.connect(store.path)
    sizes = [n for (n,) in db.execute("SELECT length(message) FROM messages")]
    sizes += [n for (n,) in db.execute("SELECT length(value) FROM state_values")]
    assert max(sizes) < len(text) / 2, sizes  # stored compressed, both kinds
    assert db.execute("SELECT typeof(message) FROM messages WHERE idx=0").fetchone()[0] == "text"  # small stays text


def test_F3_state_values_are_serialised_once_per_change_and_never_stale():
    """A checkpoint and each journal entry describe the state; an unchanged frozen value is not
    serialised again, and a value changed (a new object, or a plain one changed in place) always is."""
    from workbench.engine import store as store_mod
    from workbench.engine.frozen import freeze

    memo: dict = {}
    files = freeze({"/a.txt": "one"}, "files")
    plain = {"n": 1}
    first = store_mod._state_values({"files": files, "plain": plain}, memo)
    calls = []
    real = store_mod.json.dumps
    store_mod.json.dumps = lambda v, **kw: calls.append(v) or real(v, **kw)
    try:
        plain["n"] = 2
        second = store_mod._state_values({"files": files, "plain": plain}, memo)
        third = store_mod._state_values({"files": freeze({"/a.txt": "two"}, "files"), "plain": plain}, memo)
    finally:
        store_mod.json.dumps = real
    assert second["files"] == first["files"] and files not in calls  # the same frozen object: reused
    assert second["plain"] != first["plain"]  # changed in place: never taken from the memo
    assert third["files"] != first["files"] and third["files"][1] == '{"/a.txt": "two"}'
