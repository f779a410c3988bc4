"""G13: a long thread is read a page at a time, never whole — the store's indexed reads and the
``Session`` calls on them (``session_history.HistoryCalls``).

The window opens a thread from its newest turns (``history_tail``), reads earlier pages as the person
scrolls (``history_before``), lists threads from metadata, and replays a long thread's durable events
without the per-call ones of its earlier runs (``replay_events``). Stores made before the ``role``
column still open and page.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench.engine.events import Event
from workbench.engine.messages import Message, ToolCall
from workbench.engine.models.scripted import ScriptedModel, reply, tool_reply
from workbench.engine.store import Store
from workbench.engine.usage import Usage
from workbench.session import Session
from workbench.session_history import BULK_EVENT_TYPES, HistoryCalls, HistoryPage


class Reader(HistoryCalls):
    """The paged calls over a bare store (what ``Session`` mixes in)."""

    def __init__(self, store: Store, thread_id: str) -> None:
        self.store = store
        self.thread_id = thread_id


def history(turns: list[list[int]]) -> list[Message]:
    """A thread: per turn a user message, then steps asking for ``n`` calls each (their results after
    them), then an answer."""
    out: list[Message] = []
    for t, steps in enumerate(turns):
        out.append(Message.user(f"turn {t}", run=f"run{t}"))
        for s, n in enumerate(steps):
            calls = tuple(ToolCall.parse(f"t{t}s{s}c{c}", "ls", {"path": "/"}) for c in range(n))
            out.append(Message.assistant(f"step {t}.{s}", calls, run=f"run{t}"))
            out.extend(Message.tool(c, f"result of {c.id}") for c in calls)
        out.append(Message.assistant(f"answer {t}", run=f"run{t}"))
    return out


def store_with(tmp_path: Path, messages: list[Message], *, checkpoints: int = 3) -> Store:
    """The messages committed in a few checkpoints, as runs commit them."""
    store = Store(tmp_path / "threads.sqlite3")
    store.create_thread(thread_id="t")
    dicts = [m.to_dict() for m in messages]
    cuts = sorted({len(dicts) * (k + 1) // checkpoints for k in range(checkpoints)})
    for seq, cut in enumerate(cuts):
        store.save_checkpoint("t", "r", seq, "done", {"messages": dicts[:cut]}, {})
    return store


def texts(page: HistoryPage) -> list[str]:
    return [m.content for m in page.messages]


# -- the store ------------------------------------------------------------------------------------------------
def test_g13_a_page_is_read_by_its_key_and_turns_by_the_index_on_user_messages(tmp_path: Path) -> None:
    msgs = history([[1, 2], [3], [], [1, 1, 1]])
    store = store_with(tmp_path, msgs)
    assert store.message_count("t") == len(msgs)
    assert [json.loads(json.dumps(m)) for m in store.messages("t", 3, 7)] == [m.to_dict() for m in msgs[3:7]]
    assert store.messages("t", len(msgs) - 2) == [m.to_dict() for m in msgs[-2:]]  # to the newest
    assert store.messages("t", 5, 5) == [] and store.messages("t", 10_000) == []
    users = [i for i, m in enumerate(msgs) if m.role == "user"]
    assert store.turn_starts("t", len(msgs), 2) == users[-2:]
    assert store.turn_starts("t", users[2], 10) == users[:2]  # turns before a point
    plan = store._db.execute("EXPLAIN QUERY PLAN SELECT idx FROM messages WHERE thread_id='t' AND role='user'"
                             " AND idx<5 ORDER BY idx DESC LIMIT 2").fetchall()
    assert any("messages_user" in str(row) for row in plan), plan  # an index, not a scan of the history


def test_g13_a_store_made_before_the_role_column_opens_and_pages(tmp_path: Path) -> None:
    """Existing stores must still open: the column is added, old rows are labelled on first need."""
    path = tmp_path / "old.sqlite3"
    msgs = history([[1], [2, 1], [1]])
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE threads (id TEXT PRIMARY KEY, title TEXT NOT NULL DEFAULT '', created REAL NOT NULL,
            updated REAL NOT NULL, status TEXT NOT NULL DEFAULT 'new', usage TEXT NOT NULL DEFAULT '{}');
        CREATE TABLE checkpoints (thread_id TEXT NOT NULL, seq INTEGER NOT NULL, run_id TEXT NOT NULL,
            step INTEGER NOT NULL, status TEXT NOT NULL, state TEXT NOT NULL, pending TEXT NOT NULL DEFAULT '{}',
            created REAL NOT NULL, PRIMARY KEY (thread_id, seq));
        CREATE TABLE messages (thread_id TEXT NOT NULL, idx INTEGER NOT NULL, message TEXT NOT NULL,
            PRIMARY KEY (thread_id, idx));
    """)
    db.execute("INSERT INTO threads(id, title, created, updated, status) VALUES ('t', 'old', 1, 2, 'done')")
    db.executemany("INSERT INTO messages VALUES ('t', ?, ?)",
                   [(i, json.dumps(m.to_dict())) for i, m in enumerate(msgs)])
    db.execute("INSERT INTO checkpoints VALUES ('t', 1, 'r', 1, 'done', ?, '{}', 3)",
               (json.dumps({"__message_count": len(msgs)}),))
    db.commit()
    db.close()

    store = Store(path)
    reader = Reader(store, "t")
    page = reader.history_tail(1, at_least=0)
    assert page.messages[0].content == "turn 2" and page.end == len(msgs)
    assert [t.title for t in store.threads()] == ["old"]
    # new rows get their role as they are written; the old ones were labelled once
    store.save_checkpoint("t", "r2", 2, "done", {"messages": [m.to_dict() for m in msgs + history([[1]])]}, {})
    assert store.turn_starts("t", store.message_count("t"), 10) == [i for i, m in enumerate(msgs + history([[1]]))
                                                                    if m.role == "user"]
    assert store._db.execute("SELECT COUNT(*) FROM messages WHERE role IS NULL").fetchone()[0] == 0
    store.close()
    Store(path).close()  # and opens again, the column already there


def test_g13_event_types_are_chosen_in_sql_and_a_late_subscriber_gets_the_recent_ones(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.sqlite3")
    kinds = ["run_started", *(["model_call_finished", "tool_call_finished"] * 40), "run_finished"] * 5
    store.append_events([Event(k, "t", f"r{i // 82}", i, {"n": i}, seq=i + 1) for i, k in enumerate(kinds)])
    every = store.events("t")
    assert [e.seq for e in store.events("t", types={"run_finished", "run_started"})] == \
        [e.seq for e in every if e.type in ("run_finished", "run_started")]
    assert store.events("t", types=set()) == []
    recent = Reader(store, "t").replay_events(30)
    last = every[-1].seq
    assert [e.seq for e in recent] == [e.seq for e in every if e.seq > last - 30 or e.type not in BULK_EVENT_TYPES]
    assert sum(e.type == "run_started" for e in recent) == 5  # every run's start and end, whatever its age
    assert Reader(store, "t").last_event_seq() == last


def test_g13_usage_per_model_is_summed_by_the_store(tmp_path: Path) -> None:
    store = Store(tmp_path / "u.sqlite3")
    store.create_thread(thread_id="t")
    calls = [("gpt-a", Usage(10, 2, 1, 3, 0.01, 1)), ("local", Usage(5, 1, calls=1, unpriced_calls=1)),
             ("gpt-a", Usage(7, 3, cost_usd=0.02, calls=1))]
    store.save_checkpoint("t", "r1", 1, "done", {"messages": []}, {}, calls=calls[:2])
    store.save_checkpoint("t", "r2", 1, "done", {"messages": []}, {}, calls=calls[2:])
    expected: dict[str, Usage] = {}
    for model, u in calls:
        expected[model] = expected.get(model, Usage()) + u
    got = store.usage_by_model("t")
    assert list(got) == ["gpt-a", "local"]
    assert got["local"] == expected["local"] and got["gpt-a"].cost_usd is not None
    assert abs(got["gpt-a"].cost_usd - 0.03) < 1e-12 and got["gpt-a"].input_tokens == 17
    assert store.usage_by_model("t", "r2") == {"gpt-a": Usage(7, 3, cost_usd=0.02, calls=1)}


# -- the Session calls: pages, whatever the history ------------------------------------------------------------
turns_st = st.lists(st.lists(st.integers(0, 6), max_size=6), min_size=1, max_size=8)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(turns=turns_st, limit=st.integers(1, 25), tail_turns=st.integers(1, 3), at_least=st.integers(0, 30))
def test_g13_paging_back_from_the_tail_gives_every_message_once_in_order(
        tmp_path_factory: Any, turns: list[list[int]], limit: int, tail_turns: int, at_least: int) -> None:
    msgs = history(turns)
    store = store_with(tmp_path_factory.mktemp("paged"), msgs)
    reader = Reader(store, "t")
    page = reader.history_tail(tail_turns, limit=limit, at_least=min(at_least, limit))
    assert page.end == page.total == len(msgs)
    users = [i for i, m in enumerate(msgs) if m.role == "user"]
    turn_start = users[-tail_turns] if len(users) >= tail_turns else 0
    # the newest turns (at least at_least messages), within the limit…
    start = max(0, len(msgs) - limit, min(turn_start, len(msgs) - min(at_least, limit)))
    while start > 0 and msgs[start].role == "tool":  # …moved back to the message that asked for the calls
        start -= 1
    assert page.start == start
    pages = [page]
    while not pages[-1].at_start:
        before = reader.history_before(pages[-1].start, limit=limit)
        assert before.end == pages[-1].start and before.messages, "each page ends where the next one starts"
        pages.append(before)
    for p in pages:
        assert p.at_start or p.messages[0].role != "tool", "a page starts at the message that asked for its calls"
    seen = [m for p in reversed(pages) for m in p.messages]
    assert [m.to_dict() for m in seen] == [m.to_dict() for m in msgs]  # nothing missing, nothing twice
    store.close()


async def test_g13_the_session_pages_a_thread_it_ran(tmp_path: Path) -> None:
    """Through the Session with the scripted model: the tail is the newest turns, history_since has the
    step's results, the threads list is metadata only (no message is read for it)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "workbench.yaml").write_text("model: demo\n")
    script = []
    for r in range(4):
        script += [tool_reply(("ls", {"path": "/project"}, f"r{r}c{i}")) for i in range(5)] + [reply(f"done {r}")]
    session = await Session.open(ws, model=ScriptedModel(script))
    try:
        for r in range(4):
            assert (await session.run(f"pass {r}")).status == "done"
        total = session.message_count()
        assert total == 4 * 12
        tail = session.history_tail(2, limit=400)
        assert tail.start == 24 and tail.messages[0].content == "pass 2" and tail.end == total
        earlier = session.history_before(tail.start, limit=12)
        assert earlier.start == 12 and texts(earlier) == [m.content for m in session.messages[12:24]]
        since = session.history_since(total - 3)
        assert [m.role for m in since.messages] == ["assistant", "tool", "assistant"]

        reads: list[str] = []
        session.store._db.set_trace_callback(reads.append)
        try:
            listed = session.threads()
        finally:
            session.store._db.set_trace_callback(None)
        assert [t.id for t in listed] == [session.thread_id]
        assert reads and not any("messages" in sql or "checkpoints" in sql for sql in reads), reads
    finally:
        await session.close()
