"""Context compression (C1–C8, issue 12): the pure view, each strategy, the trigger, the summariser through
the stub (litellm for real), compaction twice, a restart. The stored history is never changed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.stub_server import StubReply, StubServer
from workbench.config import CompressionConfig, DedupeConfig, SummarizeConfig, TruncateConfig
from workbench.engine.messages import Message, ToolCall
from workbench.harness.compression import collect_facts, compressed_view, plan, span_to_replace
from workbench.session import Session


def _history(turns: list[tuple[str, int, bool]], system: int = 1) -> list[Message]:
    """[system…] then per turn: a user message, an assistant call of ``ls`` on a path, its result of
    ``size`` characters (the same path again when ``dup``), and an answer."""
    out = [Message.system(f"system {i}") for i in range(system)]
    for n, (path, size, dup) in enumerate(turns):
        call = ToolCall.parse(f"c{n}", "ls", {"path": "/project/a" if dup else path})
        out += [Message.user(f"turn {n}: look at {path}"), Message.assistant("", (call,)),
                Message.tool(call, ("x" * size)), Message.assistant(f"done {n}")]
    return out


def _check_view(view: list[Message], stored: list[Message]) -> None:
    lead = 0
    while lead < len(stored) and stored[lead].role == "system":
        lead += 1
    assert [m.content for m in view[:lead]] == [m.content for m in stored[:lead]]  # C4: leading system kept
    calls = set()
    for m in view[lead:]:
        for c in m.tool_calls:
            calls.add(c.id)
        if m.role == "tool":
            assert m.tool_call_id in calls, "a tool response cut off from its request (C4)"


turns = st.lists(st.tuples(st.sampled_from(["/project/a", "/project/b", "/etc/c"]), st.integers(0, 5000),
                           st.booleans()), min_size=1, max_size=30)


@settings(max_examples=120, deadline=None)
@given(turns, st.integers(0, 2), st.integers(1, 8), st.integers(50, 3000), st.booleans(), st.integers(100, 50_000))
def test_c4_c5_property_the_view_is_whole_pure_and_leaves_the_history_alone(
        t: list[Any], system: int, recent: int, max_chars: int, drop_too: bool, target: int) -> None:
    stored = _history(t, system)
    before = [m.to_dict() for m in stored]
    cfg = CompressionConfig(preserve_recent=recent, truncate=TruncateConfig(max_chars=max_chars, preserve_recent=1),
                            dedupe=DedupeConfig(keep_recent=1), max_tool_response_chars=4000)
    p, view = plan(stored, [], cfg, target)
    records: list[dict[str, Any]] = [{"ops": p.ops}]
    if drop_too:
        span = span_to_replace(stored, recent)
        if span is not None:
            records.append({"ops": [{"op": "drop", "start": span[0], "end": span[1], "chars": 1}]})
    view = compressed_view(stored, records, 4000)
    _check_view(view, stored)
    assert [m.to_dict() for m in stored] == before  # C5: never changed
    again = compressed_view(stored, records, 4000)
    assert [m.to_dict() for m in again] == [m.to_dict() for m in view]  # a pure function
    assert all(len(m.content) <= 4000 + 80 for m in view if m.role == "tool")  # C3


def test_c2_dedupe_keeps_the_newest_and_truncate_spares_the_recent() -> None:
    stored = _history([("/project/a", 3000, True), ("/project/b", 3000, False), ("/project/a", 3000, True),
                       ("/project/c", 3000, False)])
    cfg = CompressionConfig(truncate=TruncateConfig(max_chars=500, preserve_recent=1))
    p, view = plan(stored, [], cfg, target=1)
    ops = {(o["op"], o["index"]) for o in p.ops}
    tool_idx = [i for i, m in enumerate(stored) if m.role == "tool"]
    assert ("dedupe", tool_idx[0]) in ops and ("dedupe", tool_idx[2]) not in ops  # the newest of the pair stays
    assert ("truncate", tool_idx[1]) in ops and ("truncate", tool_idx[2]) in ops
    assert all(i != tool_idx[3] for _, i in ops)  # the newest intact
    assert "omitted" in view[tool_idx[0]].content and view[tool_idx[3]].content == "x" * 3000
    assert p.strategies["dedupe"]["messages"] == 1 and p.strategies["truncate"]["messages"] == 2
    # switched off, a strategy does nothing
    off = CompressionConfig(dedupe=DedupeConfig(enabled=False), truncate=TruncateConfig(enabled=False))
    assert plan(stored, [], off, target=1)[0].ops == []


def test_c8_facts_are_collected_verbatim() -> None:
    msgs = [Message.user("Open /project/src/app.py and run `pytest -q` then see https://example.org/x?y=1; "
                         "it took 12.5 s and 3,400 tokens")]
    facts = collect_facts(msgs, ["kept-from-before"])
    for fact in ("/project/src/app.py", "pytest -q", "https://example.org/x?y=1", "12.5 s", "3,400 tokens",
                 "kept-from-before"):
        assert fact in facts, (fact, facts)


def _ws(tmp_path: Path, stub: StubServer, compression: str) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    (ws / "big.txt").write_text("B" * 6000)
    (ws / "workbench.yaml").write_text(
        f"model: openai/main\napi_base: {stub.url}\npermissions: {{default: allow}}\ncompression:\n{compression}")
    return ws


def _sent(stub: StubServer, model: str = "main") -> list[dict[str, Any]]:
    return [r for r in stub.requests if r["model"] == model]


async def test_c1_the_reported_input_size_triggers_and_the_summary_goes_through_the_stub(
        tmp_path: Path, stub_server: StubServer) -> None:
    ws = _ws(tmp_path, stub_server, "  max_input_tokens: 5000\n  preserve_recent: 2\n"
                                    "  summarize: {model: openai/cheap, preserve_recent: 2}\n")
    read = ("read_file", {"path": "/project/big.txt"})
    stub_server.script_for("main", StubReply(tool_calls=[read], usage=(1000, 10)),
                           StubReply(text="Read it: 6000 B's.", usage=(2600, 10)),
                           StubReply(text="Second answer.", usage=(6200, 10)),  # over 5000: the next step compresses
                           StubReply(text="Third answer.", usage=(900, 10)))
    stub_server.script_for("cheap", StubReply(text="The user asked to read big.txt; it holds 6000 B's.", usage=(300, 20)))
    session = await Session.open(ws, api_key="sk-test")
    try:
        for prompt in ("Read /project/big.txt", "And?", "Go on"):
            assert (await session.run(prompt)).status == "done"
        [record] = session.compression_records()
        assert record["trigger"] == "auto" and "summarize" in record["strategies"]
        assert record["tokens_after"] < record["tokens_before"]
        last = json.dumps(_sent(stub_server)[-1]["messages"])
        assert "holds 6000 B's" in last and "/project/big.txt" in last  # the summary and its facts
        assert "B" * 1000 not in last
        assert len(session.messages) == 8  # C5: every message is still stored
        assert "B" * 1000 in json.dumps([m.to_dict() for m in session.messages])
        events = [e for e in session.store.events(session.thread_id) if e.type == "compression_applied"]
        assert len(events) == 1 and "text" not in json.dumps(events[0].data)  # figures, no content (M8)
    finally:
        await session.close()


async def test_c1_r5_b4_an_automatic_summary_counts_in_the_usage_and_every_budget(
        tmp_path: Path, stub_server: StubServer) -> None:
    """R5, B4: the summariser's call is a model call of the thread: it is in the run's and the thread's
    usage (events, the result, ``threads``), stored with the step, and a budget it exhausts stops the run
    before the call the summary made room for (it only counted toward budgets, and showed nowhere)."""
    ws = _ws(tmp_path, stub_server, "  max_input_tokens: 5000\n  preserve_recent: 2\n"
                                    "  summarize: {model: openai/cheap, preserve_recent: 2}\n")
    stub_server.script_for("main", StubReply(tool_calls=[("read_file", {"path": "/project/big.txt"})], usage=(1000, 10)),
                           StubReply(text="Read it.", usage=(2600, 10)),
                           StubReply(text="Second answer.", usage=(6200, 10)),  # over 5000: the next step compresses
                           StubReply(text="Third answer.", usage=(900, 10)))
    stub_server.script_for("cheap", StubReply(text="The user read big.txt.", usage=(4000, 500)))
    session = await Session.open(ws, api_key="sk-test")
    try:
        for prompt in ("Read /project/big.txt", "And?"):
            assert (await session.run(prompt)).status == "done"
        before = session.usage.total_tokens
        seen: list[Any] = []
        session.subscribe(seen.append, replay=False)
        result = await session.run("Go on")
        assert result.status == "done" and len(session.compression_records()) == 1
        assert result.usage.total_tokens == 4500 + 910 and result.usage.calls == 2  # the summary, then the step
        assert session.usage.total_tokens == before + 4500 + 910
        models = [e.data["model"] for e in seen if e.type == "model_call_finished"]
        assert len(models) == 2 and models[0] == "openai/cheap"  # the summary, then the step's own call
        assert [t for t in Session.list_threads(ws) if t.id == session.thread_id][0].usage.total_tokens == \
            before + 5410  # stored with the step
    finally:
        await session.close()
    (ws / "workbench.yaml").write_text((ws / "workbench.yaml").read_text().replace(
        "compression:", "budget:\n  - {scope: run, limit: {total_tokens: 3000}}\ncompression:"))
    stub_server.script_for("main", StubReply(text="One.", usage=(1000, 10)), StubReply(text="Two.", usage=(6200, 10)),
                           StubReply(text="never sent", usage=(10, 1)))
    stub_server.script_for("cheap", StubReply(text="A summary.", usage=(4000, 500)))
    session = await Session.open(ws, api_key="sk-test")
    try:
        session.new_thread()
        assert (await session.run("First")).status == "done"
        assert (await session.run("Second")).status == "done"
        result = await session.run("Third")  # compresses: the summary alone is past the run's 3,000 tokens
        assert result.status == "aborted" and "budget" in (result.error or "").lower(), result
        assert [r["messages"][-1]["content"] for r in _sent(stub_server)][-1] != "Third"  # never asked
    finally:
        await session.close()


async def test_c7_b4_compact_nows_summary_is_in_the_threads_usage_and_its_session_budget(
        tmp_path: Path, stub_server: StubServer) -> None:
    """R5, B4: "Compact now" outside a run spends a model call too: it is added to the thread's stored
    usage (a row, the total ``threads`` shows), with its events, so a session budget it exhausts stops
    the next run (it counted nowhere: compacting again and again spent without limit)."""
    ws = _ws(tmp_path, stub_server, "  preserve_recent: 2\n  summarize: {model: openai/cheap, preserve_recent: 2}\n")
    (ws / "workbench.yaml").write_text((ws / "workbench.yaml").read_text().replace(
        "compression:", "budget:\n  - {scope: session, limit: {total_tokens: 3000}}\ncompression:"))
    stub_server.script_for("main", *[StubReply(text=f"Answer {i}", usage=(100, 10)) for i in range(4)])
    stub_server.script_for("cheap", StubReply(text="A summary.", usage=(5000, 500)))
    session = await Session.open(ws, api_key="sk-test")
    try:
        for i in range(3):
            assert (await session.run(f"Question {i}")).status == "done"
        seen: list[Any] = []
        session.subscribe(seen.append, replay=False)
        assert await session.compact() is not None
        assert session.usage.total_tokens == 330 + 5500
        assert any(e.type == "usage_updated" and e.data["thread_usage"]["total_tokens"] == 5830 for e in seen)
        assert ("openai/cheap", 5500) in [(m, u.total_tokens) for m, u in session.store.usage_calls(session.thread_id)]
        result = await session.run("Question 3")
        assert result.status == "aborted" and "budget" in (result.error or "").lower(), result
    finally:
        await session.close()


async def test_c7_the_first_automatic_compaction_is_announced_even_from_under_the_warning(
        tmp_path: Path, stub_server: StubServer) -> None:
    """C7: a step that goes from under 90% of the trigger straight past it (one large file read) still
    gets the ``context_warning`` before the thread's first automatic compaction (it compacted unannounced,
    and never warned later)."""
    ws = _ws(tmp_path, stub_server, "  max_input_tokens: 3000\n  preserve_recent: 2\n"
                                    "  summarize: {model: openai/cheap, preserve_recent: 2}\n")
    stub_server.script_for("cheap", StubReply(text="A summary."))
    (ws / "big.txt").write_text("line of text\n" * 1500)
    stub_server.script_for("main", StubReply(text="Hi.", usage=(200, 5)),
                           StubReply(tool_calls=[("read_file", {"path": "/project/big.txt"})], usage=(300, 5)),
                           StubReply(text="Read it.", usage=(900, 5)))
    session = await Session.open(ws, api_key="sk-test")
    try:
        seen: list[Any] = []
        session.subscribe(seen.append, replay=False)
        assert (await session.run("Hello")).status == "done"
        assert (await session.run("Read /project/big.txt")).status == "done"
        kinds = [e.type for e in seen if e.type in ("context_warning", "compression_applied")]
        assert kinds[:2] == ["context_warning", "compression_applied"], kinds
        assert kinds.count("context_warning") == 1
    finally:
        await session.close()


async def test_c7_compact_now_twice_keeps_what_the_first_kept_and_survives_a_restart(
        tmp_path: Path, stub_server: StubServer) -> None:
    ws = _ws(tmp_path, stub_server, "  preserve_recent: 2\n  summarize: {model: openai/cheap, preserve_recent: 2}\n")
    stub_server.script_for("main", *[StubReply(text=f"Answer {i} about /project/file{i}.py") for i in range(6)])
    stub_server.script_for("cheap", StubReply(text="First summary: files 0 and 1."),
                           StubReply(text="Second summary."))
    session = await Session.open(ws, api_key="sk-test")
    thread = session.thread_id
    try:
        for i in range(3):
            await session.run(f"Question {i}")
        first = await session.compact()
        assert first is not None and first["trigger"] == "manual"
        for i in range(3, 5):
            await session.run(f"Question {i}")
        second = await session.compact()
        assert second is not None
        facts_first = next(o for o in first["ops"] if o["op"] == "summarize")["facts"]
        facts_second = next(o for o in second["ops"] if o["op"] == "summarize")["facts"]
        assert set(facts_first) <= set(facts_second)  # nothing the first kept is lost by the second
        summarizer_input = json.dumps(_sent(stub_server, "cheap")[-1]["messages"])
        assert "First summary" in summarizer_input  # the second summarises the first
        view = [m.content for m in session.context_view()]
    finally:
        await session.close()
    reopened = await Session.open(ws, thread, api_key="sk-test")
    try:
        assert [m.content for m in reopened.context_view()] == view  # C5: the same view after a restart
        assert len(reopened.compression_records()) == 2
    finally:
        await reopened.close()


async def test_c2_a_failed_summary_falls_back_to_dropping_and_says_so(tmp_path: Path, stub_server: StubServer) -> None:
    ws = _ws(tmp_path, stub_server, "  preserve_recent: 2\n  summarize: {model: openai/cheap, preserve_recent: 2}\n")
    stub_server.script_for("main", *[StubReply(text=f"A{i}") for i in range(3)])
    stub_server.script_for("cheap", StubReply(status=400, text="no"))
    session = await Session.open(ws, api_key="sk-test")
    try:
        for i in range(3):
            await session.run(f"Q{i}")
        record = await session.compact()
        assert record is not None and "drop" in record["strategies"] and "summary failed" in record["reason"]
        assert "dropped to fit" in session.context_view()[0].content
        assert {"op": "drop"}.items() <= record["lost"][0].items()
    finally:
        await session.close()


async def test_v1_v2_every_call_is_rebuilt_as_labelled_blocks_with_a_diff(tmp_path: Path,
                                                                            stub_server: StubServer) -> None:
    ws = _ws(tmp_path, stub_server, "  preserve_recent: 2\n  summarize: {model: openai/cheap, preserve_recent: 2}\n")
    (ws / "AGENTS.md").write_text("Always answer in French.\n")
    read = ("read_file", {"path": "/project/big.txt"})
    stub_server.script_for("main", StubReply(tool_calls=[read], usage=(500, 10)), StubReply(text="Lu.", usage=(2100, 4)),
                           StubReply(text="Encore.", usage=(2200, 3)), StubReply(text="Fin.", usage=(300, 2)))
    stub_server.script_for("cheap", StubReply(text="Summary: big.txt was read."))
    session = await Session.open(ws, api_key="sk-test")
    try:
        await session.run("Read big.txt")
        await session.run("Again")
        await session.compact()
        await session.run("Last")
        every = session.prompt_calls()
        # V1: every model call, the compaction's summary too (#4, between the runs' calls)
        assert [(c["seq"], c["kind"]) for c in every] == [(1, "step"), (2, "step"), (3, "step"), (4, "summary"),
                                                          (5, "step")]
        summary = session.inspect_call(4)
        [asked] = _sent(stub_server, "cheap")
        assert [b.text for b in summary["blocks"]] == [m["content"] for m in asked["messages"]]
        assert [b.label for b in summary["blocks"]] == ["summary instructions", "the messages to summarise"]
        assert every[3]["model"] == "openai/cheap" and every[3]["run"] == ""  # Compact now: no run
        calls = [c for c in every if c["kind"] == "step"]
        assert calls[1]["usage"]["input_tokens"] == 2100
        sent = _sent(stub_server)
        for call, request in zip(calls, sent):
            view = session.inspect_call(call["seq"])
            blocks = view["blocks"]
            system = "\n\n".join(b.text for b in blocks if b.role == "system")
            assert system == request["messages"][0]["content"]  # the exact system prompt, in labelled parts
            texts = [b.text.split("\n→ ")[0] for b in blocks if b.role not in ("system", "tools")]
            assert texts == [m.get("content") or "" for m in request["messages"][1:]]  # the exact messages
            labels = [b.label for b in blocks]
            assert "instructions" in labels and any("AGENTS.md" in b.text and "Instructions" in b.label for b in blocks)
            assert labels[-1].startswith("tool schemas")
            assert 0 < view["cache_prefix_end"] <= len([b for b in blocks if b.role == "system"])
        last = session.inspect_call(5)
        assert any(b.label.startswith("compression summary") for b in last["blocks"])
        assert last["diff"]["added"] and last["previous"] == 4
        second = session.inspect_call(2)
        assert "message #2 (tool, read_file)" in [b.label for b in second["blocks"]]
    finally:
        await session.close()


async def test_v1_the_inspector_rebuilds_a_call_with_the_cap_it_was_sent_with(tmp_path: Path,
                                                                               stub_server: StubServer) -> None:
    """V1: the inspector shows what was sent even after the configuration changed: a call sent with
    ``max_tool_response_chars: 300`` is rebuilt with that cap, not today's (it showed the whole result)."""
    ws = _ws(tmp_path, stub_server, "  max_tool_response_chars: 300\n")
    read = ("read_file", {"path": "/project/big.txt"})
    stub_server.script_for("main", StubReply(tool_calls=[read], usage=(500, 10)), StubReply(text="Read.", usage=(900, 4)),
                           StubReply(text="Again.", usage=(950, 4)))
    session = await Session.open(ws, api_key="sk-test")
    try:
        await session.run("Read big.txt")
        await session.run("And?")  # its request carries the earlier result, cut at 300 characters
        thread = session.thread_id
        sent = [m.get("content") or "" for m in _sent(stub_server)[-1]["messages"]]
        shown = [b.text.split("\n→ ")[0] for b in session.inspect_call(3)["blocks"] if b.role not in ("system", "tools")]
        assert shown == sent[1:] and max(len(t) for t in shown) < 1000  # cut: "B" * 6000 was read
    finally:
        await session.close()
    (ws / "workbench.yaml").write_text((ws / "workbench.yaml").read_text().replace("300", "100000"))
    reopened = await Session.open(ws, thread, api_key="sk-test")
    try:
        again = [b.text.split("\n→ ")[0] for b in reopened.inspect_call(3)["blocks"] if b.role not in ("system", "tools")]
        assert again == shown
    finally:
        await reopened.close()


async def test_c1_before_any_reported_size_the_trigger_uses_an_estimate(tmp_path: Path,
                                                                         stub_server: StubServer) -> None:
    """A reopened thread (a new process knows no reported size yet) over the trigger by estimate
    compresses before its first call."""
    ws = _ws(tmp_path, stub_server, "  preserve_recent: 2\n  summarize: {model: openai/cheap, preserve_recent: 2}\n")
    read = ("read_file", {"path": "/project/big.txt"})
    stub_server.script_for("main", StubReply(tool_calls=[read], usage=(10, 1)), StubReply(text="ok", usage=(10, 1)),
                           StubReply(text="short", usage=(10, 1)), StubReply(text="after", usage=(10, 1)))
    stub_server.script_for("cheap", StubReply(text="Summary of the reading."))
    session = await Session.open(ws, api_key="sk-test")
    thread = session.thread_id
    try:
        await session.run("Read it")
        await session.run("Short one")
        assert session.compression_records() == []  # the reported sizes (10 tokens) never reached a trigger
    finally:
        await session.close()
    yaml = (ws / "workbench.yaml").read_text().replace("compression:\n", "compression:\n  max_input_tokens: 1500\n")
    (ws / "workbench.yaml").write_text(yaml)
    session = await Session.open(ws, thread, api_key="sk-test")
    try:
        await session.run("Go on")
        [record] = session.compression_records()
        assert record["trigger"] == "auto" and record["tokens_before"] > 1500
        assert "Summary of the reading." in json.dumps(_sent(stub_server)[-1]["messages"])
    finally:
        await session.close()


def test_c8_numbers_never_crowd_out_a_path() -> None:
    msgs = [Message.user(" ".join(str(n) for n in range(1000))), Message.user("then edit /project/other.txt")]
    facts = collect_facts(msgs)
    assert "/project/other.txt" in facts and len(facts) <= 200


async def test_c8_a_failed_second_summary_keeps_what_the_first_kept(tmp_path: Path, stub_server: StubServer) -> None:
    ws = _ws(tmp_path, stub_server, "  preserve_recent: 2\n  summarize: {model: openai/cheap, preserve_recent: 2}\n")
    stub_server.script_for("main", *[StubReply(text=f"Answer {i}") for i in range(6)])
    stub_server.script_for("cheap", StubReply(text="FIRST-SUMMARY about /project/kept.py"), StubReply(status=400, text="x"))
    session = await Session.open(ws, api_key="sk-test")
    try:
        for i in range(3):
            await session.run(f"Question {i} on /project/kept.py")
        assert (await session.compact()) is not None
        for i in range(3, 5):
            await session.run(f"Question {i}")
        second = await session.compact()
        assert second is not None and "drop" in second["strategies"]
        first_text = session.context_view()[0].content
        assert "FIRST-SUMMARY" in first_text and "/project/kept.py" in first_text
    finally:
        await session.close()


async def test_the_demo_model_has_no_summariser_and_says_so(tmp_path: Path) -> None:
    from workbench.engine.models.scripted import ScriptedModel, reply

    ws = tmp_path / "demo"
    ws.mkdir()
    (ws / "workbench.yaml").write_text("model: demo\ncompression: {preserve_recent: 2}\n")
    session = await Session.open(ws)
    try:
        session.engine.agent.model = ScriptedModel([reply(f"a{i}") for i in range(6)], name="demo")
        for i in range(6):  # summarize.preserve_recent (6) newest messages stay: 12 stored, 6 replaced
            await session.run(f"q{i}")
        record = await session.compact()
        assert record is not None and "drop" in record["strategies"] and "cannot summarise" in record["reason"]
    finally:
        await session.close()


def test_v1_the_prompt_log_stores_any_text(tmp_path: Path) -> None:
    """R10: a section or a notice with lone surrogates, NUL or 2 MB is stored and read back."""
    from workbench.engine.messages import ModelRequest
    from workbench.engine.prompt_log import PromptLog, PromptPart
    from workbench.engine.store import Store

    store = Store(tmp_path / "s.sqlite3")
    try:
        log = PromptLog(store)
        odd = "bad \udcff surrogate, NUL \x00 and " + "x" * 2_000_000
        request = ModelRequest(system=odd, messages=(Message.user(odd, task_notice="t:1"),))
        # the notice is inserted before an empty stored history (0 stored messages, as delegation inserts)
        log.record("th", "run", 1, [PromptPart("section odd (X)", odd)], request, 0, 0, "m", None, "ok")
        [call] = log.calls("th")
        assert log.text(call["system"][0]["hash"]).endswith("x" * 100)
        assert len(log.text(call["injected"][0]["hash"])) > 2_000_000
    finally:
        store.close()
