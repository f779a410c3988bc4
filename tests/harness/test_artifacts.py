"""Artifacts (DESIGN §4 A1–A3) through the real Engine, Store and a scripted model."""

from __future__ import annotations

import base64
from typing import Any

from workbench.engine.agent import Agent, Engine
from workbench.engine.messages import ModelRequest
from workbench.engine.middleware import AgentMiddleware, Section
from workbench.engine.models.scripted import ScriptedModel, reply, tool_reply
from workbench.engine.store import Store
from workbench.engine.tools import Tool, schema
from workbench.harness.artifacts import ArtifactsMiddleware, guess_mime, merge_subagent_artifacts


def make(tmp_path, model, mw: ArtifactsMiddleware | None = None, tools=(), extra=()) -> Engine:
    middleware = [mw or ArtifactsMiddleware(), *extra]
    return Engine(Agent(model, instructions="BASE", middleware=middleware, tools=tools), Store.for_workspace(tmp_path))


def tool_results(request: ModelRequest) -> list[str]:
    return [m.content for m in request.messages if m.role == "tool"]


def stored(tmp_path, thread: str = "t") -> dict[str, Any]:
    """The thread's committed state, read through a fresh connection (what a restarted app sees)."""
    store = Store.for_workspace(tmp_path)
    try:
        return store.latest_checkpoint(thread).state
    finally:
        store.close()


# -- A1 tools ------------------------------------------------------------------------------------------------
async def test_A1_write_read_and_same_name_replaces(tmp_path):
    model = ScriptedModel([
        tool_reply(("write_artifact", {"name": "report.md", "content": "# v1"}, "w1")),
        tool_reply(("read_artifact", {"name": "report.md"}, "r1")),
        tool_reply(("write_artifact", {"name": "report.md", "content": "# version two"}, "w2"),
                   ("read_artifact", {"name": "report.md"}, "r2")),
        reply("done"),
    ])
    engine = make(tmp_path, model)
    result = await engine.run("t", "go")
    assert result.status == "done"
    assert tool_results(model.requests[1])[-1].startswith("Wrote artifact 'report.md'")
    assert tool_results(model.requests[2])[-1] == "# v1"
    replaced, read_back = tool_results(model.requests[3])[-2:]
    assert replaced.startswith("Replaced artifact 'report.md'")
    assert read_back == "# version two"  # a read after a write in the same message sees it (lock)
    artifacts = stored(tmp_path)["artifacts"]
    assert list(artifacts) == ["report.md"]
    entry = artifacts["report.md"]
    assert entry["content"] == "# version two" and entry["mime"] == "text/markdown"
    assert entry["size"] == 13 and entry["source"] == "agent" and isinstance(entry["updated"], float)


async def test_A1_read_artifact_holds_the_lock_it_reads_after_a_slow_write_in_the_same_message(tmp_path):
    """R4: without the lock on read_artifact the read would run while the write still waits."""
    import asyncio

    class SlowWrite(AgentMiddleware):
        async def wrap_tool_call(self, call, ctx, call_next):
            if call.name == "write_artifact":
                await asyncio.sleep(0.05)
            return await call_next(call, ctx)

    model = ScriptedModel([
        tool_reply(("write_artifact", {"name": "a.md", "content": "fresh"}, "w"), ("read_artifact", {"name": "a.md"}, "r")),
        reply("done"),
    ])
    engine = make(tmp_path, model, extra=[SlowWrite()])
    assert (await engine.run("t", "go")).status == "done"
    assert tool_results(model.requests[1])[-1] == "fresh"


async def test_A1_mime_is_guessed_from_the_name_or_taken_as_given(tmp_path):
    model = ScriptedModel([
        tool_reply(("write_artifact", {"name": "data.json", "content": "{}"}),
                   ("write_artifact", {"name": "notes", "content": "x"}),
                   ("write_artifact", {"name": "table", "content": "a,b", "mime": "text/csv"}),
                   ("write_artifact", {"name": "héllo.txt", "content": "né"})),
        reply("done"),
    ])
    await make(tmp_path, model).run("t", "go")
    artifacts = stored(tmp_path)["artifacts"]
    assert {n: a["mime"] for n, a in artifacts.items()} == {
        "data.json": "application/json", "notes": "text/plain", "table": "text/csv", "héllo.txt": "text/plain"}
    assert artifacts["héllo.txt"]["size"] == 3  # bytes of UTF-8, not characters
    assert guess_mime("chart.png") == "image/png"


async def test_A1_reading_a_missing_artifact_is_an_error_for_the_model(tmp_path):
    model = ScriptedModel([
        tool_reply(("write_artifact", {"name": "a.md", "content": "A"})),
        tool_reply(("read_artifact", {"name": "b.md"})),
        reply("done"),
    ])
    result = await make(tmp_path, model).run("t", "go")
    assert result.status == "done"
    error = tool_results(model.requests[2])[-1]
    assert "no artifact named 'b.md'" in error and "a.md" in error
    messages = stored(tmp_path)["messages"]
    assert messages[-2]["meta"]["status"] == "error"


async def test_A1_oversized_write_is_refused(tmp_path):
    model = ScriptedModel([tool_reply(("write_artifact", {"name": "big.txt", "content": "x" * 11})), reply("done")])
    await make(tmp_path, model, ArtifactsMiddleware(max_bytes=10)).run("t", "go")
    assert "over the limit of 10" in tool_results(model.requests[1])[-1]
    assert stored(tmp_path)["artifacts"] == {}


async def test_A1_readonly_offers_no_write_tool(tmp_path):
    mw = ArtifactsMiddleware(readonly=True)
    assert [t.name for t in mw.tools()] == ["read_artifact"]
    assert [t.name for t in ArtifactsMiddleware().tools()] == ["read_artifact", "write_artifact"]
    model = ScriptedModel([tool_reply(("write_artifact", {"name": "a.md", "content": "A"})), reply("done")])
    result = await make(tmp_path, model, mw).run("t", "go")
    assert result.status == "done"
    assert [t.name for t in model.requests[0].tools] == ["read_artifact"]
    assert "unknown tool 'write_artifact'" in tool_results(model.requests[1])[-1]
    assert stored(tmp_path)["artifacts"] == {}


# -- A2 listing in every step's system prompt -------------------------------------------------------------------
async def test_A2_each_step_lists_names_types_and_sizes_never_content(tmp_path):
    class Cached(AgentMiddleware):
        async def sections(self, ctx):
            return [Section("cached", "CACHED-SECTION", cacheable=True)]

    model = ScriptedModel([
        tool_reply(("write_artifact", {"name": "report.md", "content": "SECRET-CONTENT-12"})),
        reply("done"),
        reply("second run"),
    ])
    engine = make(tmp_path, model, extra=[Cached()])
    await engine.run("t", "go")
    await engine.run("t", "again")
    first, after_write, next_run = (r.system for r in model.requests)
    assert "Artifacts" not in first and "report.md" not in first  # nothing to list yet
    for system in (after_write, next_run):
        assert "report.md — text/markdown, 17 bytes" in system
        assert "SECRET-CONTENT-12" not in system
        # Not cacheable: it comes after the cacheable sections although it is earlier in the stack.
        assert system.index("CACHED-SECTION") < system.index("report.md")


async def test_A2_the_listing_is_bounded(tmp_path):
    calls = [("write_artifact", {"name": f"f{i:02}.txt", "content": "x"}) for i in range(5)]
    model = ScriptedModel([tool_reply(*calls), reply("done")])
    await make(tmp_path, model, ArtifactsMiddleware(max_listed=3)).run("t", "go")
    system = model.requests[1].system
    assert "f02.txt" in system and "f03.txt" not in system and "… and 2 more" in system


# -- A3 stored with the thread, events, sub-agent merge ----------------------------------------------------------
async def test_A3_artifacts_are_in_the_checkpoint_and_survive_a_reopened_store(tmp_path):
    model = ScriptedModel([tool_reply(("write_artifact", {"name": "plan.md", "content": "step 1"})), reply("done")])
    engine = make(tmp_path, model)
    await engine.run("t", "go")
    engine.store.close()
    state = stored(tmp_path)
    assert state["artifacts"]["plan.md"]["content"] == "step 1"
    # A new engine on the reopened store reads it back.
    model2 = ScriptedModel([tool_reply(("read_artifact", {"name": "plan.md"})), reply("done")])
    await make(tmp_path, model2).run("t", "read it")
    assert tool_results(model2.requests[1])[-1] == "step 1"


async def test_A3_artifact_written_is_a_durable_event_without_content(tmp_path):
    model = ScriptedModel([tool_reply(("write_artifact", {"name": "r.md", "content": "hello"})), reply("done")])
    engine = make(tmp_path, model)
    await engine.run("t", "go")
    [ev] = engine.store.events("t", types={"artifact_written"})
    assert ev.seq > 0
    assert ev.data == {"name": "r.md", "size": 5, "mime": "text/markdown", "source": "agent"}


async def test_A3_subagent_artifacts_merge_namespaced(tmp_path):
    png = base64.b64encode(b"\x89PNG\r\n\x1a\nfake").decode()
    merged: list[list[str]] = []

    async def delegate(args: dict[str, Any], ctx: Any) -> str:
        names = merge_subagent_artifacts(ctx, "researcher", 1, {
            "notes.md": "found it",
            "chart.png": {"content": png, "mime": "image/png"},
        })
        merged.append(names)
        return "delegated"

    tool = Tool("delegate", "Delegate.", schema({}), delegate)
    model = ScriptedModel([
        tool_reply(("delegate", {})),
        tool_reply(("read_artifact", {"name": "researcher_1/notes.md"})),
        reply("done"),
    ])
    engine = make(tmp_path, model, tools=[tool])
    await engine.run("t", "go")
    assert merged == [["researcher_1/notes.md", "researcher_1/chart.png"]]
    artifacts = stored(tmp_path)["artifacts"]
    assert artifacts["researcher_1/notes.md"]["source"] == "researcher_1"
    assert artifacts["researcher_1/chart.png"] == {**artifacts["researcher_1/chart.png"], "content": png,
                                                  "mime": "image/png", "source": "researcher_1"}
    assert tool_results(model.requests[2])[-1] == "found it"
    assert "researcher_1/notes.md — text/markdown, 8 bytes" in model.requests[1].system
    sources = [e.data["source"] for e in engine.store.events("t", types={"artifact_written"})]
    assert sources == ["researcher_1", "researcher_1"]
