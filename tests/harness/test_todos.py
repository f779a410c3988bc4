"""The plan — write_todos (DESIGN §4, T1–T7) through the real engine and store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.engine.agent import Agent, Engine
from workbench.engine.middleware import AgentMiddleware, Block, overrides
from workbench.engine.models.scripted import ScriptedModel, reply, tool_reply
from workbench.engine.store import Store
from workbench.engine.tools import Tool, schema
from workbench.harness.todos import TodoError, TodosMiddleware, apply_todos, empty_todos


async def _echo(args: dict[str, Any], ctx: Any) -> str:
    return "echoed"


ECHO = Tool("echo", "Echo.", schema({"x": {"type": "string"}}), _echo, changes_outside=False)


def make(tmp_path: Path, model: ScriptedModel, middleware: list[AgentMiddleware] | None = None,
         db: str = "threads.sqlite3") -> Engine:
    middleware = middleware if middleware is not None else [TodosMiddleware()]
    agent = Agent(model, instructions="BASE", middleware=middleware, tools=(ECHO,))
    return Engine(agent, Store(tmp_path / db))


def todos(engine: Engine, thread: str = "t") -> dict[str, Any]:
    return engine.store.latest_checkpoint(thread).state["todos"]


def tool_results(model: ScriptedModel, request: int = -1) -> list[Any]:
    return [m for m in model.requests[request].messages if m.role == "tool"]


def write(*items: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return ("write_todos", {"todos": list(items)})


# -- T1 ----------------------------------------------------------------------------------------------------
async def test_T1_write_todos_replaces_the_whole_list_and_stores_next_id(tmp_path):
    model = ScriptedModel([
        tool_reply(write({"content": "Read", "status": "pending"}, {"content": "Fix", "status": "pending"})),
        tool_reply(write({"id": 2, "content": "Fix", "status": "completed"}, {"content": "Ship", "status": "in_progress"})),
        reply("done"),
    ])
    engine = make(tmp_path, model)
    assert (await engine.run("t", "plan")).status == "done"
    assert todos(engine) == {
        "items": [{"id": 2, "content": "Fix", "status": "done"}, {"id": 3, "content": "Ship", "status": "in_progress"}],
        "next_id": 4,
    }
    reply_text = tool_results(model)[-1].content
    assert "2 todos (1 done, 1 in progress, 0 pending)" in reply_text and "[3] in_progress: Ship" in reply_text


# -- T2 ----------------------------------------------------------------------------------------------------
def test_T2_item_without_id_takes_an_unclaimed_same_content_id_or_a_fresh_one():
    cur = apply_todos(empty_todos(), [{"content": "A", "status": "pending"}, {"content": "A", "status": "pending"},
                                      {"content": "B", "status": "pending"}])
    assert [i["id"] for i in cur["items"]] == [1, 2, 3]
    # id 1 claimed explicitly, so the id-less "A" takes the other unclaimed "A" (2); "B" keeps 3; "C" is new
    nxt = apply_todos(cur, [{"content": "B", "status": "done"}, {"content": "A", "status": "pending"},
                            {"id": 1, "content": "A renamed", "status": "pending"}, {"content": "C", "status": "pending"}])
    assert [(i["id"], i["content"]) for i in nxt["items"]] == [(3, "B"), (2, "A"), (1, "A renamed"), (4, "C")]
    # dropped ids are never handed out again
    dropped = apply_todos(nxt, [{"content": "D", "status": "pending"}])
    assert dropped["items"][0]["id"] == 5 and dropped["next_id"] == 6
    again = apply_todos(dropped, [{"content": "A", "status": "pending"}])
    assert again["items"][0]["id"] == 6


_contents = st.sampled_from(["a", "b", "c", "d", "write tests", "ünï"])


@st.composite
def _writes(draw: Any) -> list[list[dict[str, Any]]]:
    """Raw intents: each item either refers to a position in the current list (keep its id) or not."""
    n = draw(st.integers(1, 8))
    return [draw(st.lists(st.tuples(_contents, st.sampled_from(["pending", "in_progress", "done", "completed"]),
                                    st.one_of(st.none(), st.integers(0, 40))), max_size=8)) for _ in range(n)]


@settings(max_examples=200, deadline=None)
@given(_writes())
def test_T2_property_ids_never_reused_and_next_id_above_every_id_ever_issued(writes):
    state = empty_todos()
    issued: set[int] = set()
    for intents in writes:
        current_ids = [i["id"] for i in state["items"]]
        items, used = [], set()
        for content, status, pick in intents:
            item: dict[str, Any] = {"content": content, "status": status}
            if pick is not None and current_ids:
                cand = current_ids[pick % len(current_ids)]
                if cand not in used:  # valid lists only: each id at most once
                    item["id"] = cand
                    used.add(cand)
            items.append(item)
        before = set(current_ids)
        state = apply_todos(state, items)
        ids = [i["id"] for i in state["items"]]
        assert len(ids) == len(set(ids))  # unique within the list
        for i in ids:
            assert i in before or i not in issued  # kept, or brand new: never a dropped id back
        for item, new in zip(items, state["items"]):
            if "id" in item:
                assert new["id"] == item["id"]
        issued |= set(ids)
        assert all(state["next_id"] > i for i in issued)


# -- T3 ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("items", "expected"),
    [
        ([{"content": f"t{i}", "status": "pending"} for i in range(4)], "4 items, over max_todos (3)"),
        ([{"content": "  ", "status": "pending"}], "item 1: content is empty"),
        ([{"content": "x" * 11, "status": "pending"}], "over max_todo_chars (10)"),
        ([{"id": 1, "content": "a", "status": "pending"}, {"id": 1, "content": "b", "status": "pending"}],
         "item 2: id 1 given twice"),
        ([{"id": 99, "content": "a", "status": "pending"}], "item 1: id 99 is not in the current list"),
        ([{"content": "a", "status": "finished"}], "status 'finished' is not one of"),
    ],
)
def test_T3_refusals_say_what_was_wrong(items, expected):
    cur = apply_todos(empty_todos(), [{"content": "a", "status": "pending"}], max_todos=3, max_todo_chars=10)
    with pytest.raises(TodoError) as e:
        apply_todos(cur, items, max_todos=3, max_todo_chars=10)
    assert expected in str(e.value)


async def test_T3_refused_list_is_a_tool_error_the_model_sees_and_changes_nothing(tmp_path):
    model = ScriptedModel([
        tool_reply(write({"content": "Keep me", "status": "pending"})),
        tool_reply(write({"content": "x" * 11, "status": "pending"}, {"id": 7, "content": "ok", "status": "pending"})),
        tool_reply(write(*[{"content": f"t{i}", "status": "pending"} for i in range(4)])),
        reply("done"),
    ])
    engine = make(tmp_path, model, [TodosMiddleware(max_todos=3, max_todo_chars=10)])
    seen: list[Any] = []
    engine.subscribe(seen.append)
    await engine.run("t", "plan")
    first_error, second_error = tool_results(model)[1:]
    for err in (first_error, second_error):
        assert err.meta["status"] == "error" and "the plan was not changed" in err.content
        assert "at most 3 items" in err.content and "at most 10 characters" in err.content
    assert "over max_todo_chars (10)" in first_error.content and "id 7 is not in the current list" in first_error.content
    assert "4 items, over max_todos (3)" in second_error.content
    assert todos(engine)["items"] == [{"id": 1, "content": "Keep me", "status": "pending"}]
    assert [e.type for e in seen].count("todos_updated") == 1


@pytest.mark.parametrize("limit", [1, 3, 30])
def test_T3_exactly_max_todos_items_are_accepted_one_more_refused(limit):
    items = [{"content": f"t{i}", "status": "pending"} for i in range(limit)]
    assert len(apply_todos(empty_todos(), items, max_todos=limit)["items"]) == limit
    with pytest.raises(TodoError, match=f"{limit + 1} items, over max_todos \\({limit}\\)"):
        apply_todos(empty_todos(), [*items, {"content": "one more", "status": "pending"}], max_todos=limit)


@pytest.mark.parametrize("char", ["x", "\u00e9", "\U0001F600"])  # 1, 2 and 4 UTF-8 bytes: code points count
def test_T3_content_of_exactly_max_todo_chars_code_points_is_accepted_one_more_refused(char):
    exact = apply_todos(empty_todos(), [{"content": char * 10, "status": "pending"}], max_todo_chars=10)
    assert exact["items"][0]["content"] == char * 10
    with pytest.raises(TodoError, match="content has 11 characters, over max_todo_chars \\(10\\)"):
        apply_todos(empty_todos(), [{"content": char * 11, "status": "pending"}], max_todo_chars=10)


class SlowFirst(AgentMiddleware):
    """Holds the first tool call of a message a moment before it runs: without the tool's lock the
    second call would run (and write) first."""

    def __init__(self) -> None:
        self.seen = 0

    async def wrap_tool_call(self, call, ctx, call_next):
        import asyncio

        self.seen += 1
        if self.seen == 1:
            await asyncio.sleep(0.05)
        return await call_next(call, ctx)


# -- T4 ----------------------------------------------------------------------------------------------------
async def test_T4_the_lock_makes_the_second_call_wait_for_the_first_even_when_the_first_is_slow(tmp_path):
    model = ScriptedModel([
        tool_reply(write({"content": "First", "status": "pending"}),
                   write({"content": "First", "status": "done"}, {"content": "Second", "status": "pending"})),
        reply("done"),
    ])
    engine = make(tmp_path, model, [SlowFirst(), TodosMiddleware()])
    assert (await engine.run("t", "plan")).status == "done"
    assert todos(engine) == {"items": [{"id": 1, "content": "First", "status": "done"},
                                       {"id": 2, "content": "Second", "status": "pending"}], "next_id": 3}
    first, second = tool_results(model)
    assert "[1] pending: First" in first.content and "[1] done: First" in second.content

async def test_T4_two_calls_in_one_message_run_in_turn(tmp_path):
    model = ScriptedModel([
        tool_reply(write({"content": "First", "status": "pending"}),
                   write({"content": "First", "status": "done"}, {"content": "Second", "status": "pending"})),
        reply("done"),
    ])
    engine = make(tmp_path, model)
    await engine.run("t", "plan")
    assert TodosMiddleware().tools()[0].lock == "todos"
    # the second call saw the first's list: "First" kept its id 1, "Second" took 2
    assert todos(engine) == {"items": [{"id": 1, "content": "First", "status": "done"},
                                       {"id": 2, "content": "Second", "status": "pending"}], "next_id": 3}
    first, second = tool_results(model)
    assert "[1] pending: First" in first.content and "[2] pending: Second" in second.content


# -- T5 ----------------------------------------------------------------------------------------------------
async def test_T5_guide_is_cacheable_and_plan_section_shows_only_while_not_empty(tmp_path):
    model = ScriptedModel([
        tool_reply(write({"content": "Do it", "status": "in_progress"})),
        tool_reply(write()),
        reply("done"),
    ])
    engine = make(tmp_path, model)
    await engine.run("t", "plan")
    first, second, third = (r.system for r in model.requests)
    assert "# Planning with write_todos" in first and "# Current plan" not in first
    assert "# Current plan\n[1] in_progress: Do it" in second
    assert second.index("# Planning with write_todos") < second.index("# Current plan")
    assert "# Current plan" not in third  # the list was cleared

    mw = TodosMiddleware()

    class Ctx:
        def get(self, key, default=None):
            return {"items": [{"id": 1, "content": "x", "status": "pending"}], "next_id": 2}

    sections = await mw.sections(Ctx())  # type: ignore[arg-type]
    assert [(s.name, s.cacheable) for s in sections] == [("todos-guide", True), ("todos", False)]


async def test_T5_sections_bounded_by_the_limits_whatever_the_stored_list_holds(tmp_path):
    big = [{"content": f"item {i} " + "y" * 50, "status": "pending"} for i in range(6)]
    model = ScriptedModel([tool_reply(write(*big)), reply("done")])
    await make(tmp_path, model, [TodosMiddleware(max_todos=10, max_todo_chars=100)]).run("t", "plan")
    # the same thread, now under tighter limits
    model2 = ScriptedModel([reply("ok")])
    await make(tmp_path, model2, [TodosMiddleware(max_todos=3, max_todo_chars=10)]).run("t", "again")
    plan = model2.requests[0].system.split("# Current plan\n", 1)[1]
    lines = plan.splitlines()
    assert lines[:3] == ["[1] pending: item 0 yy…", "[2] pending: item 1 yy…", "[3] pending: item 2 yy…"]
    assert lines[3] == "(… 3 more not shown)" and len(lines) == 4


# -- T6 ----------------------------------------------------------------------------------------------------
async def test_T6_each_change_emits_durable_ids_and_statuses_and_live_whole_list(tmp_path):
    model = ScriptedModel([
        tool_reply(write({"content": "Secret step", "status": "pending"})),
        tool_reply(write({"id": 1, "content": "Secret step", "status": "done"})),
        tool_reply(write({"id": 1, "content": "Secret step", "status": "done"})),  # no change
        reply("done"),
    ])
    engine = make(tmp_path, model)
    live: list[Any] = []
    engine.subscribe(live.append)
    await engine.run("t", "plan")
    durable = engine.store.events("t", types={"todos_updated"})
    assert [e.data["items"] for e in durable] == [[{"id": 1, "status": "pending"}], [{"id": 1, "status": "done"}]]
    assert all("Secret" not in repr(e.data) for e in durable) and all(e.durable for e in durable)
    progress = [e for e in live if e.type == "todos_progress"]
    assert [e.data["items"] for e in progress] == [[{"id": 1, "content": "Secret step", "status": "pending"}],
                                                   [{"id": 1, "content": "Secret step", "status": "done"}]]
    assert not progress[0].durable
    assert engine.store.events("t", types={"todos_progress"}) == []


# -- T7 ----------------------------------------------------------------------------------------------------
async def test_T7_blocked_output_restores_the_list_to_before_the_turn(tmp_path):
    class Blocker(AgentMiddleware):
        def __init__(self) -> None:
            self.on = False

        async def after_agent(self, answer, ctx):
            return Block("not allowed") if self.on else None

    blocker = Blocker()
    model = ScriptedModel([
        tool_reply(write({"content": "Kept", "status": "pending"})), reply("first"),
        tool_reply(write({"content": "Dropped", "status": "done"})), reply("second"),
    ])
    engine = make(tmp_path, model, [blocker, TodosMiddleware()])
    assert (await engine.run("t", "one")).status == "done"
    before = todos(engine)
    blocker.on = True
    result = await engine.run("t", "two")
    assert result.status == "failed" and "blocked the output" in (result.error or "")
    # T7: the items go back; T2: next_id does not — id 2 was announced (todos_updated) for "Dropped"
    assert todos(engine)["items"] == before["items"] == [{"id": 1, "content": "Kept", "status": "pending"}]
    assert todos(engine)["next_id"] == 3
    assert TodosMiddleware.restore_on_block == frozenset({"todos"})


async def test_T2_an_id_announced_in_a_blocked_turn_is_never_handed_out_again(tmp_path):
    class Blocker(AgentMiddleware):
        on = True

        async def after_agent(self, answer, ctx):
            return Block("not allowed") if self.on else None

    blocker = Blocker()
    model = ScriptedModel([
        tool_reply(write({"content": "Dropped", "status": "pending"})), reply("blocked"),
        tool_reply(write({"content": "Other", "status": "pending"})), reply("fine"),
    ])
    engine = make(tmp_path, model, [blocker, TodosMiddleware()])
    assert (await engine.run("t", "one")).status == "failed"
    blocker.on = False
    assert (await engine.run("t", "two")).status == "done"
    announced = [i["id"] for e in engine.store.events("t", types={"todos_updated"}) for i in e.data["items"]]
    assert announced == [1, 2]  # never 1 twice
    assert todos(engine) == {"items": [{"id": 2, "content": "Other", "status": "pending"}], "next_id": 3}


async def test_T2_an_id_announced_in_a_failed_step_is_never_handed_out_again(tmp_path):
    """The failed step's state is undone (recover re-runs it), but its todos_updated is stored."""
    from workbench.engine.tools import Fatal

    async def boom(args: dict[str, Any], ctx: Any) -> str:
        raise Fatal("the disk is gone")

    class Boom(AgentMiddleware):
        def tools(self):
            return [Tool("boom", "Fail the run.", schema({}), boom, lock="todos")]  # runs after write_todos

    model = ScriptedModel([
        tool_reply(write({"content": "Lost", "status": "pending"}), ("boom", {})),
        tool_reply(write({"content": "Next", "status": "pending"})), reply("fine"),
    ])
    engine = make(tmp_path, model, [TodosMiddleware(), Boom()])
    assert (await engine.run("t", "one")).status == "failed"
    assert (await engine.run("t", "two")).status == "done"
    announced = [i["id"] for e in engine.store.events("t", types={"todos_updated"}) for i in e.data["items"]]
    assert announced == [1, 2]
    assert todos(engine) == {"items": [{"id": 2, "content": "Next", "status": "pending"}], "next_id": 3}


async def test_T7_the_plan_never_routes_or_filters_tools(tmp_path):
    mw = TodosMiddleware()
    assert not overrides(mw, "wrap_model_call") and not overrides(mw, "wrap_tool_call")
    assert mw.tools()[0].changes_outside is False
    model = ScriptedModel([
        tool_reply(write({"content": "Only echo next", "status": "in_progress"})),
        tool_reply(("echo", {"x": "1"})),
        reply("done"),
    ])
    engine = make(tmp_path, model, [mw])
    await engine.run("t", "plan")
    offered = [[t.name for t in r.tools] for r in model.requests]
    assert offered == [["echo", "write_todos"]] * 3
    assert tool_results(model)[-1].content == "echoed"


# -- T3 / T5: the plan is bounded in tokens, not only in items and code points --------------------------------
def _costly(seed: int, n: int) -> str:
    """``n`` rare CJK ideographs (extension A): about three tokens each, so a plan within max_todos ×
    max_todo_chars can still be tens of thousands of tokens."""
    import random

    rnd = random.Random(seed)
    return "".join(chr(rnd.randint(0x3400, 0x4DBF)) for _ in range(n))


def test_T3_a_plan_over_max_section_tokens_is_refused_naming_its_longest_items():
    """T3/T5: counting code points alone let 30 items of 400 rare characters (~36k tokens) through."""
    from workbench.engine.tokens import estimate_tokens

    items = [{"content": f"short item {i}", "status": "pending"} for i in range(5)]
    items[3] = {"content": _costly(3, 400), "status": "pending"}
    with pytest.raises(TodoError) as e:
        apply_todos(empty_todos(), items, max_section_tokens=500)
    [problem] = e.value.problems
    assert "over max_section_tokens (500)" in problem and "item 4: " in problem
    # the same plan fits a larger bound, and a plan exactly at the bound is accepted
    accepted = apply_todos(empty_todos(), items, max_section_tokens=4000)
    lines = ["# Current plan", *(f"[{i['id']}] {i['status']}: {i['content']}" for i in accepted["items"])]
    exact = estimate_tokens("\n".join(lines))
    assert apply_todos(empty_todos(), items, max_section_tokens=exact)["items"] == accepted["items"]
    with pytest.raises(TodoError):
        apply_todos(empty_todos(), items, max_section_tokens=exact - 1)


async def test_T3_T5_a_costly_plan_is_refused_and_the_thread_stays_alive(tmp_path):
    """T3/T5 (the reviewer's t11): before, write_todos accepted the plan and every later model call of the
    thread failed over the engine's max_prompt_section_tokens; now the model is told and can shorten it."""
    costly = [{"content": _costly(i, 400), "status": "pending"} for i in range(30)]
    model = ScriptedModel([
        tool_reply(write(*costly)),
        tool_reply(write({"content": "A short plan", "status": "pending"})),
        reply("done"),
        reply("second run"),
    ])
    engine = make(tmp_path, model)
    assert (await engine.run("t", "plan")).status == "done"
    refused, accepted = tool_results(model)
    assert refused.meta["status"] == "error" and "the plan was not changed" in refused.content
    assert "over max_section_tokens (4000)" in refused.content and "shorten the longest items" in refused.content
    assert accepted.content.startswith("Plan updated")
    assert todos(engine)["items"] == [{"id": 1, "content": "A short plan", "status": "pending"}]
    assert (await engine.run("t", "again")).status == "done"


async def test_T5_the_plan_section_is_cut_in_tokens_whatever_the_stored_list_holds(tmp_path):
    """T5: a plan stored before the token bound (or under a larger one) is shown cut and marked, within
    max_section_tokens, and the run goes on under the engine's default max_prompt_section_tokens."""
    from workbench.engine.tokens import estimate_tokens

    costly = [{"content": _costly(i, 400), "status": "pending"} for i in range(30)]
    model = ScriptedModel([tool_reply(write(*costly)), reply("done")])
    unbounded = Agent(model, instructions="BASE", middleware=[TodosMiddleware(max_section_tokens=100_000)],
                      max_prompt_section_tokens=100_000)
    assert (await Engine(unbounded, Store(tmp_path / "threads.sqlite3")).run("t", "plan")).status == "done"
    assert len(todos(make(tmp_path, ScriptedModel([])))["items"]) == 30

    model2 = ScriptedModel([reply("ok")])
    engine = make(tmp_path, model2)  # the default bound, 4,000 tokens
    assert (await engine.run("t", "again")).status == "done"
    plan = "# Current plan" + model2.requests[0].system.split("# Current plan", 1)[1]
    assert estimate_tokens(plan) <= 4000
    lines = plan.splitlines()
    shown = len(lines) - 2
    assert 0 < shown < 30 and lines[1].startswith("[1] pending: ")
    assert lines[-1] == f"(… {30 - shown} more not shown)"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(st.characters(blacklist_characters="\n"), max_size=60), max_size=12),
       st.integers(1, 120), st.integers(0, 5))
def test_T5_fit_lines_to_tokens_keeps_its_bound_and_marks_what_it_leaves_out(lines, bound, hidden):
    """T5, A2: the listing sections' shared bound. Over the bound only when not one line fits (the
    heading and the marker alone)."""
    from workbench.engine.tokens import estimate_tokens
    from workbench.harness.todos import fit_lines_to_tokens

    def more(n):
        return f"(… {n} more not shown)"

    text, shown = fit_lines_to_tokens("# Head", lines, bound, more, hidden=hidden)
    left_out = hidden + len(lines) - shown
    assert text == "\n".join(["# Head", *lines[:shown], *([more(left_out)] if left_out else [])])
    if shown:
        assert estimate_tokens(text) <= bound
