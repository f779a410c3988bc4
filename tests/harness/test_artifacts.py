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


def _costly_name(i: int) -> str:
    """A 200-character name of rare CJK ideographs (extension A): about 590 tokens."""
    import random

    rnd = random.Random(i)
    return f"{i:03d}" + "".join(chr(rnd.randint(0x3400, 0x4DBF)) for _ in range(197))


async def test_A2_the_listing_is_bounded_in_tokens_and_the_thread_stays_alive(tmp_path):
    """A2 (the reviewer's t10): 100 names of 200 rare characters made the listing ~60k tokens, over the
    engine's max_prompt_section_tokens, and every later model call of the thread failed. Now each name is
    cut and marked, the listing stops at max_section_tokens with "… and N more", and a cut name as listed
    reads its artifact."""
    from workbench.engine.tokens import estimate_tokens

    calls = [("write_artifact", {"name": _costly_name(i), "content": f"content {i}"}) for i in range(100)]
    model = ScriptedModel([tool_reply(*calls), reply("done"), reply("second run")])
    engine = make(tmp_path, model)
    assert (await engine.run("t", "write them")).status == "done"
    assert (await engine.run("t", "again")).status == "done"
    listing = "## Artifacts" + model.requests[-1].system.split("## Artifacts", 1)[1]
    assert estimate_tokens(listing) <= 3000
    lines = listing.splitlines()
    assert "a name cut with … is read by giving it as listed" in lines[1]
    entries = lines[2:-1]
    assert 0 < len(entries) < 100 and lines[-1] == f"- … and {100 - len(entries)} more"
    first_listed = entries[0].removeprefix("- ").split(" — ")[0]
    assert first_listed.startswith("000") and first_listed.endswith("…") and len(first_listed) < 100
    model2 = ScriptedModel([tool_reply(("read_artifact", {"name": first_listed})), reply("done")])
    await make(tmp_path, model2).run("t", "read it")
    assert tool_results(model2.requests[1])[-1] == "content 0"


async def test_A2_names_that_fit_are_listed_whole(tmp_path):
    name = "reports/" + "quarterly-summary-" * 10 + ".md"  # 190 ASCII characters: under the per-name cut
    model = ScriptedModel([tool_reply(("write_artifact", {"name": name, "content": "x"})), reply("done")])
    await make(tmp_path, model, ArtifactsMiddleware(max_section_tokens=200)).run("t", "go")
    system = model.requests[1].system
    assert f"- {name} — text/markdown, 1 bytes" in system and "is read by giving it as listed" not in system


async def test_A3_a_merge_never_replaces_an_artifact_from_another_source(tmp_path):
    """A3/A1: the agent may write under ``researcher_1/``; merging that task's artifact of the same name
    used to replace the agent's own silently. The merged one now takes a free name, returned (and so named
    to the model); the same task merging again replaces only its own."""
    merged: list[list[str]] = []

    async def delegate(args: dict[str, Any], ctx: Any) -> str:
        names = merge_subagent_artifacts(ctx, "researcher", 1, {"notes.md": args["text"], "notes (2).md": "other"})
        merged.append(names)
        return ", ".join(names)

    tool = Tool("delegate", "Delegate.", schema({"text": {"type": "string"}}), delegate)
    model = ScriptedModel([
        tool_reply(("write_artifact", {"name": "researcher_1/notes.md", "content": "the agent's own"})),
        tool_reply(("delegate", {"text": "first"})),
        tool_reply(("delegate", {"text": "continued"})),
        tool_reply(("write_artifact", {"name": "researcher_1/notes (2).md", "content": "mine now"})),
        reply("done"),
    ])
    engine = make(tmp_path, model, tools=[tool])
    assert (await engine.run("t", "go")).status == "done"
    assert merged == [["researcher_1/notes (2).md", "researcher_1/notes (2) (2).md"]] * 2
    artifacts = stored(tmp_path)["artifacts"]
    assert artifacts["researcher_1/notes.md"]["content"] == "the agent's own"
    assert artifacts["researcher_1/notes.md"]["source"] == "agent"
    assert artifacts["researcher_1/notes (2) (2).md"]["content"] == "other"
    # the continued task replaced its own earlier merge; the agent's later write names whose it replaced
    assert artifacts["researcher_1/notes (2).md"] == {**artifacts["researcher_1/notes (2).md"],
                                                     "content": "mine now", "source": "agent"}
    assert "came from researcher_1" in tool_results(model.requests[4])[-1]
