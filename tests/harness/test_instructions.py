"""Instruction memory (DESIGN §4, I1–I6) through the real engine, store and host backend."""

from __future__ import annotations

import os
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import FailingReads
from tests.harness.os_refusals import modes_refuse, refuse
from workbench.backends.composite import CompositeBackend
from workbench.backends.host import HostBackend
from workbench.backends.readonly import ReadOnlyBackend
from workbench.engine.agent import Agent, Engine
from workbench.engine.middleware import AgentMiddleware, Section
from workbench.engine.models.scripted import ScriptedModel, reply, tool_reply
from workbench.engine.store import Store
from workbench.engine.tokens import estimate_tokens
from workbench.engine.tools import NeedsApproval, Tool, schema
from workbench.config import PermissionRule
from workbench.errors import ModelError
from workbench.harness.files import FilesMiddleware
from workbench.harness.instructions import GUIDE, InstructionsMiddleware, load_instructions
from workbench.harness.permissions import PermissionsMiddleware

PATHS = ["/user/AGENTS.md", "/project/AGENTS.md"]


async def _echo(args: dict[str, Any], ctx: Any) -> str:
    return "echoed"


ECHO = Tool("echo", "Echo.", schema({"x": {"type": "string"}}), _echo, changes_outside=False)


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    user, project = tmp_path / "user", tmp_path / "project"
    user.mkdir()
    project.mkdir()
    return user, project


def backend_for(dirs: tuple[Path, Path]) -> CompositeBackend:
    return CompositeBackend({"/user": HostBackend(dirs[0]), "/project": HostBackend(dirs[1])})


def make(tmp_path: Path, model: ScriptedModel, middleware: list[AgentMiddleware], backend: Any,
         tools: tuple[Tool, ...] = (ECHO,)) -> Engine:
    agent = Agent(model, instructions="BASE", middleware=middleware, tools=tools, backend=backend)
    return Engine(agent, Store(tmp_path / "threads.sqlite3"))


def reports(engine: Engine, thread: str = "t") -> list[dict[str, Any]]:
    return [e.data for e in engine.store.events(thread, types={"documents_reported"})
            if e.data.get("source") == "instructions"]


def fates(report: dict[str, Any]) -> dict[str, str]:
    return {d["path"]: d["fate"] for d in report["documents"]}


class Volatile(AgentMiddleware):
    """A non-cacheable section, registered before the instructions."""

    async def sections(self, ctx):
        return (Section("volatile", "VOLATILE SECTION", cacheable=False),)


# -- I1 ----------------------------------------------------------------------------------------------------
async def test_I1_files_in_order_under_path_headings_in_one_cacheable_section(tmp_path, dirs):
    (dirs[0] / "AGENTS.md").write_text("User rule: be brief.\n")
    (dirs[1] / "AGENTS.md").write_text("Project rule: run the tests.\n")
    model = ScriptedModel([reply("ok")])
    engine = make(tmp_path, model, [Volatile(), InstructionsMiddleware(PATHS)], backend_for(dirs))
    assert (await engine.run("t", "hi")).status == "done"
    system = model.requests[0].system
    order = [system.index(s) for s in ("BASE", GUIDE, "## /user/AGENTS.md", "User rule: be brief.",
                                       "## /project/AGENTS.md", "Project rule: run the tests.", "VOLATILE SECTION")]
    assert order == sorted(order), system  # cacheable instructions come before a non-cacheable section
    assert system.count(GUIDE) == 1

    sections = await InstructionsMiddleware(PATHS).sections(_Ctx(backend_for(dirs)))
    assert [(s.name, s.cacheable) for s in sections] == [("instructions", True)]


class _Rt:
    pass


class _Ctx:
    """A minimal hook context for calling a hook directly."""

    def __init__(self, backend: Any, run_id: str = "r") -> None:
        self.backend = backend
        self.run_id = run_id
        self._rt = _Rt()
        self.events: list[tuple[str, dict[str, Any]]] = []

    def emit(self, type: str, **data: Any) -> None:
        self.events.append((type, data))


# -- I2 ----------------------------------------------------------------------------------------------------
async def test_I2_read_on_first_model_call_and_kept_for_the_run(tmp_path, dirs):
    agents = dirs[1] / "AGENTS.md"
    agents.write_text("OLD TEXT\n")

    def first(request):
        agents.write_text("NEW TEXT\n")  # the file changes between the run's two steps
        return tool_reply(("echo", {"x": "1"}))

    model = ScriptedModel([first, reply("done"), reply("second run")])
    engine = make(tmp_path, model, [InstructionsMiddleware(PATHS)], backend_for(dirs))
    assert (await engine.run("t", "one")).status == "done"
    assert "OLD TEXT" in model.requests[0].system
    assert "OLD TEXT" in model.requests[1].system and "NEW TEXT" not in model.requests[1].system
    assert len(reports(engine)) == 1  # read once per run
    await engine.run("t", "two")
    assert "NEW TEXT" in model.requests[2].system and "OLD TEXT" not in model.requests[2].system
    assert len(reports(engine)) == 2


async def test_I2_cache_is_bounded_to_max_cached_runs(tmp_path, dirs):
    (dirs[1] / "AGENTS.md").write_text("rules\n")
    mw = InstructionsMiddleware(PATHS, max_cached_runs=2)
    for i in range(5):  # runs that never end (as if suspended elsewhere) still never exceed the bound
        await mw.sections(_Ctx(backend_for(dirs), run_id=f"r{i}"))
    assert len(mw._cache) == 2


async def test_I2_a_resumed_run_reads_again(tmp_path, dirs):
    agents = dirs[1] / "AGENTS.md"
    agents.write_text("BEFORE INTERRUPT\n")

    class Asker(AgentMiddleware):
        asks = True

        async def wrap_tool_call(self, call, ctx, call_next):
            return await call_next(call, ctx) if ctx.approved else NeedsApproval("check")

    model = ScriptedModel([tool_reply(("echo", {"x": "1"})), reply("done")])
    engine = make(tmp_path, model, [Asker(), InstructionsMiddleware(PATHS)], backend_for(dirs))
    first = await engine.run("t", "go")
    assert first.status == "interrupted"
    agents.write_text("AFTER INTERRUPT\n")
    done = await engine.resume("t", {first.pending[0].id: "approve"})
    assert done.status == "done" and done.run_id == first.run_id
    assert "AFTER INTERRUPT" in model.requests[1].system
    assert len(reports(engine)) == 2


async def test_I2_a_recovered_run_reads_again(tmp_path, dirs):
    agents = dirs[1] / "AGENTS.md"
    agents.write_text("BEFORE FAILURE\n")
    model = ScriptedModel([tool_reply(("echo", {"x": "1"})), ModelError("provider down"), reply("done")])
    engine = make(tmp_path, model, [InstructionsMiddleware(PATHS)], backend_for(dirs))
    assert (await engine.run("t", "go")).status == "failed"
    agents.write_text("AFTER FAILURE\n")
    assert (await engine.recover("t")).status == "done"
    assert "AFTER FAILURE" in model.requests[2].system


# -- I3 ----------------------------------------------------------------------------------------------------
def _files_middleware(backend: Any) -> AgentMiddleware:
    return FilesMiddleware(backend)


async def test_I3_agent_edits_agents_md_with_edit_file_and_it_shows_from_next_run(tmp_path, dirs):
    agents = dirs[1] / "AGENTS.md"
    agents.write_text("Use tabs.\n")
    backend = backend_for(dirs)
    edit = ("edit_file", {"path": "/project/AGENTS.md", "old_string": "Use tabs.", "new_string": "Use spaces."})
    model = ScriptedModel([tool_reply(edit), reply("edited"), reply("next run")])
    engine = make(tmp_path, model, [_files_middleware(backend), InstructionsMiddleware(PATHS)], backend, tools=())
    assert (await engine.run("t", "switch to spaces")).status == "done"
    assert agents.read_text() == "Use spaces.\n"
    assert "Use tabs." in model.requests[1].system  # same run: still the text read on its first call
    await engine.run("t", "again")
    assert "Use spaces." in model.requests[2].system and "Use tabs." not in model.requests[2].system


async def test_I3_a_read_only_mount_refuses_the_edit(tmp_path, dirs):
    agents = dirs[1] / "AGENTS.md"
    agents.write_text("Use tabs.\n")
    backend = CompositeBackend({"/project": ReadOnlyBackend(HostBackend(dirs[1]))})
    edit = ("edit_file", {"path": "/project/AGENTS.md", "old_string": "Use tabs.", "new_string": "Use spaces."})
    model = ScriptedModel([tool_reply(edit), reply("could not")])
    engine = make(tmp_path, model, [_files_middleware(backend), InstructionsMiddleware(PATHS)], backend, tools=())
    assert (await engine.run("t", "switch")).status == "done"
    tool_msg = [m for m in model.requests[1].messages if m.role == "tool"][0]
    assert tool_msg.content.startswith("Refused") and agents.read_text() == "Use tabs.\n"


async def test_I3_a_deny_rule_on_the_path_blocks_the_edit(tmp_path, dirs):
    agents = dirs[1] / "AGENTS.md"
    agents.write_text("Use tabs.\n")
    backend = backend_for(dirs)
    rules = [PermissionRule("allow", "read", "/**"), PermissionRule("allow", "write", "/project/**"),
             PermissionRule("deny", "write", "/project/AGENTS.md")]
    edit = ("edit_file", {"path": "/project/AGENTS.md", "old_string": "Use tabs.", "new_string": "Use spaces."})
    model = ScriptedModel([tool_reply(edit), reply("denied")])
    stack = [PermissionsMiddleware(rules, "ask"), _files_middleware(backend), InstructionsMiddleware(PATHS)]
    engine = make(tmp_path, model, stack, backend, tools=())
    assert (await engine.run("t", "switch")).status == "done"
    tool_msg = [m for m in model.requests[1].messages if m.role == "tool"][0]
    assert tool_msg.content.startswith("Denied") and agents.read_text() == "Use tabs.\n"


# -- I4 ----------------------------------------------------------------------------------------------------
async def test_I4_file_over_limit_is_cut_and_marked(tmp_path, dirs):
    big = " ".join(f"word{i}" for i in range(2000))
    (dirs[0] / "AGENTS.md").write_text(big)
    (dirs[1] / "AGENTS.md").write_text("Small project file.")
    model = ScriptedModel([reply("ok")])
    mw = InstructionsMiddleware(PATHS, max_file_tokens=100, max_total_tokens=1000)
    engine = make(tmp_path, model, [mw], backend_for(dirs))
    await engine.run("t", "hi")
    system = model.requests[0].system
    assert "[… cut: file over max_file_tokens (100)]" in system
    assert "word5 " in system and "word1999" not in system
    assert "## /project/AGENTS.md\nSmall project file." in system  # the next file still shows
    (report,) = reports(engine)
    assert fates(report) == {"/user/AGENTS.md": "cut", "/project/AGENTS.md": "shown"}
    cut = report["documents"][0]
    assert cut["tokens"] > 1000 and cut["shown_tokens"] <= 100 and "max_file_tokens" in cut["reason"]
    assert all("content" not in d for d in report["documents"])  # durable: no content


async def test_I4_section_full_cuts_then_leaves_out_later_files(tmp_path, dirs):
    third = dirs[1] / "more"
    third.mkdir()
    (dirs[0] / "AGENTS.md").write_text("First file. " * 50)
    (dirs[1] / "AGENTS.md").write_text(" ".join(f"second{i}" for i in range(400)))
    (third / "AGENTS.md").write_text("Third file.")
    paths = [*PATHS, "/project/more/AGENTS.md"]
    mw = InstructionsMiddleware(paths, max_file_tokens=4000, max_total_tokens=400)
    report = await load_instructions(backend_for(dirs), paths, max_file_tokens=4000, max_total_tokens=400)
    assert [d["fate"] for d in report.documents] == ["shown", "cut", "left_out"]
    text = report.section.text
    assert estimate_tokens(text) <= 400
    assert "[… cut: section over max_total_tokens (400)]" in text and "Third file." not in text
    # through the engine: the prompt holds the same bounded section
    model = ScriptedModel([reply("ok")])
    engine = make(tmp_path, model, [mw], backend_for(dirs))
    await engine.run("t", "hi")
    assert text in model.requests[0].system
    assert [d["path"] for d in reports(engine)[0]["documents"]] == paths  # every file named, in order


@pytest.mark.parametrize("limit", [60, 90, 150, 300])
async def test_I4_section_never_exceeds_max_total_tokens(dirs, limit):
    (dirs[0] / "AGENTS.md").write_text("ünïcödé 文字 " * 300)
    (dirs[1] / "AGENTS.md").write_text("x" * 5000)
    report = await load_instructions(backend_for(dirs), PATHS, max_file_tokens=100, max_total_tokens=limit)
    if report.section is not None:
        assert estimate_tokens(report.section.text) <= limit
    assert len(report.documents) == 2


# -- I5 ----------------------------------------------------------------------------------------------------
async def test_I5_missing_and_whitespace_files_are_skipped_refused_reported(tmp_path, dirs):
    (dirs[1] / "AGENTS.md").write_text("  \n\t\n")
    (dirs[1] / "REAL.md").write_text("Real rules.")
    paths = ["/nomount/AGENTS.md", "/user/AGENTS.md", "/project/AGENTS.md", "/project/REAL.md"]
    model = ScriptedModel([reply("ok")])
    engine = make(tmp_path, model, [InstructionsMiddleware(paths)], backend_for(dirs))
    assert (await engine.run("t", "hi")).status == "done"
    system = model.requests[0].system
    assert "## /project/REAL.md\nReal rules." in system
    assert "/project/AGENTS.md" not in system and "/user/AGENTS.md" not in system
    (report,) = reports(engine)
    assert fates(report) == {"/nomount/AGENTS.md": "refused", "/user/AGENTS.md": "skipped",
                             "/project/AGENTS.md": "skipped", "/project/REAL.md": "shown"}
    assert "no mount" in report["documents"][0]["reason"]


async def test_I5_no_file_shown_means_no_section(tmp_path, dirs):
    model = ScriptedModel([reply("ok")])
    engine = make(tmp_path, model, [InstructionsMiddleware(PATHS)], backend_for(dirs))
    await engine.run("t", "hi")
    assert model.requests[0].system == "BASE"
    assert set(fates(reports(engine)[0]).values()) == {"skipped"}


async def test_I5_backend_error_fails_the_step_and_recover_runs_it_again(tmp_path, dirs):
    (dirs[1] / "AGENTS.md").write_text("Project rules.")
    flaky = FailingReads(HostBackend(dirs[1]), "disk on fire")
    backend = CompositeBackend({"/project": flaky})
    model = ScriptedModel([reply("done")])
    engine = make(tmp_path, model, [InstructionsMiddleware(PATHS)], backend)
    failed = await engine.run("t", "hi")
    assert failed.status == "failed" and "disk on fire" in (failed.error or "")
    assert model.calls == 0 and reports(engine) == []
    flaky.broken = False
    again = await engine.recover("t")
    assert again.status == "done" and again.run_id == failed.run_id
    assert "Project rules." in model.requests[0].system


def _hostile_files(project: Path) -> dict[str, str]:
    """AGENTS.md files that are not UTF-8 text files, by virtual path, with a word their reason holds."""
    made: dict[str, str] = {}

    def put(name: str, data: bytes) -> None:
        (project / name).mkdir()
        (project / name / "AGENTS.md").write_bytes(data)

    put("notepad", "\ufeffUse tabs.\r\n".encode("utf-16"))  # UTF-16 with its BOM, as Notepad saves it
    made["/project/notepad/AGENTS.md"] = "UTF-8"
    put("latin1", "Règles: café.\n".encode("latin-1"))
    made["/project/latin1/AGENTS.md"] = "UTF-8"
    put("binary", bytes(range(256)) * 4)
    made["/project/binary/AGENTS.md"] = "UTF-8"
    put("nul", b"looks like text\x00\x01\x02 but is not\n")  # valid UTF-8, yet binary
    made["/project/nul/AGENTS.md"] = "binary"
    (project / "folder" / "AGENTS.md").mkdir(parents=True)
    made["/project/folder/AGENTS.md"] = "directory"
    (project / "loop").mkdir()
    os.symlink("AGENTS.md", project / "loop" / "AGENTS.md")
    made["/project/loop/AGENTS.md"] = "loop"
    if hasattr(os, "mkfifo"):
        (project / "fifo").mkdir()
        os.mkfifo(project / "fifo" / "AGENTS.md")  # nobody writes to it: a blocking read would hang
        made["/project/fifo/AGENTS.md"] = "FIFO"
    return made


@pytest.mark.timeout(60)
async def test_I5_files_that_are_not_utf8_text_files_are_skipped_reported_and_never_fail_runs(tmp_path, dirs):
    hostile = _hostile_files(dirs[1])
    (dirs[1] / "AGENTS.md").write_text("Good rules.")
    paths = [*hostile, "/project/AGENTS.md"]
    model = ScriptedModel([reply("one"), reply("two"), reply("three")])
    engine = make(tmp_path, model, [InstructionsMiddleware(paths)], backend_for(dirs))
    assert (await engine.run("t", "hi")).status == "done"
    assert (await engine.run("t", "again")).status == "done"
    assert (await engine.run("new-thread", "hi")).status == "done"  # new threads too
    for request in model.requests:
        assert "## /project/AGENTS.md\nGood rules." in request.system
        assert not any(p in request.system for p in hostile)
    for thread in ("t", "new-thread"):
        docs = {d["path"]: d for d in reports(engine, thread)[0]["documents"]}
        assert docs["/project/AGENTS.md"]["fate"] == "shown"
        for path, word in hostile.items():
            assert docs[path]["fate"] == "skipped", (path, docs[path])
            assert word.lower() in docs[path]["reason"].lower(), (path, docs[path])


async def test_I5_a_bom_counts_as_whitespace_is_never_shown_and_crlf_is_shown_as_lf(tmp_path, dirs):
    (dirs[0] / "AGENTS.md").write_bytes(b"\xef\xbb\xbf")  # only a BOM
    (dirs[1] / "AGENTS.md").write_bytes(b"\xef\xbb\xbf\r\nLine one.\r\nLine two.\r\n")
    model = ScriptedModel([reply("ok")])
    engine = make(tmp_path, model, [InstructionsMiddleware(PATHS)], backend_for(dirs))
    assert (await engine.run("t", "hi")).status == "done"
    system = model.requests[0].system
    assert "\ufeff" not in system and "\r" not in system
    assert "## /project/AGENTS.md\nLine one.\nLine two." in system
    assert "/user/AGENTS.md" not in system
    docs = {d["path"]: d for d in reports(engine)[0]["documents"]}
    assert docs["/user/AGENTS.md"]["fate"] == "skipped" and "whitespace" in docs["/user/AGENTS.md"]["reason"]
    assert docs["/project/AGENTS.md"]["fate"] == "shown"


# -- F3: bounded reads -------------------------------------------------------------------------------------
class _CountingReads:
    """Wraps a backend and records how many characters each read handed back."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.returned: list[tuple[str, str, int]] = []

    async def read(self, path: str) -> str:
        text = await self.inner.read(path)
        self.returned.append(("read", path, len(text)))
        return text

    async def read_head(self, path: str, max_bytes: int) -> tuple[str, bool]:
        text, cut = await self.inner.read_head(path, max_bytes)
        self.returned.append(("read_head", path, len(text)))
        return text, cut

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def test_F3_a_huge_agents_md_is_read_only_up_to_4x_max_file_tokens_bytes_and_marked_cut(tmp_path, dirs):
    big = dirs[1] / "AGENTS.md"
    with big.open("w") as f:  # 32 MB of text, written in chunks (never one 32 MB string)
        for _ in range(32):
            f.write("rule " * (1024 * 1024 // 5))
    backend = _CountingReads(backend_for(dirs))
    model = ScriptedModel([reply("ok")])
    engine = make(tmp_path, model, [InstructionsMiddleware(PATHS, max_file_tokens=500)], backend)
    tracemalloc.start()
    try:
        started = time.perf_counter()
        assert (await engine.run("t", "hi")).status == "done"
        elapsed = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert max(n for _, _, n in backend.returned) <= 4 * 500, backend.returned
    assert peak < 8 * 1024 * 1024, f"a 32 MB AGENTS.md cost {peak} bytes"
    assert elapsed < 5, elapsed
    assert "[… cut: file over max_file_tokens (500)]" in model.requests[0].system
    doc = reports(engine)[0]["documents"][1]
    assert doc["fate"] == "cut" and doc["shown_tokens"] <= 500 and "2000 bytes" in doc["reason"]


async def test_F3_a_file_just_over_the_byte_cap_but_under_the_token_bound_is_still_marked_cut(dirs):
    (dirs[1] / "AGENTS.md").write_text("x" * 4001)  # 4001 bytes: over 4 × 1000, few tokens
    report = await load_instructions(backend_for(dirs), ["/project/AGENTS.md"], max_file_tokens=1000)
    (doc,) = report.documents
    assert doc["fate"] == "cut" and "4000 bytes" in doc["reason"]
    assert "[… cut: file over max_file_tokens (1000)]" in report.section.text
    (dirs[1] / "AGENTS.md").write_text("x" * 4000)  # exactly at the cap: whole, not cut
    (doc,) = (await load_instructions(backend_for(dirs), ["/project/AGENTS.md"], max_file_tokens=1000)).documents
    assert doc["fate"] == "shown"


# -- I6 ----------------------------------------------------------------------------------------------------
async def test_I6_writes_no_state_keys(tmp_path, dirs):
    (dirs[1] / "AGENTS.md").write_text("rules")
    mw = InstructionsMiddleware(PATHS)
    assert mw.writes == frozenset() and not mw.state_defaults and not mw.restore_on_block
    model = ScriptedModel([reply("ok")])
    engine = make(tmp_path, model, [mw], backend_for(dirs))
    await engine.run("t", "hi")
    assert set(engine.store.latest_checkpoint("t").state) == {"messages"}
    assert len(mw._cache) == 0  # the run's entry is dropped when it ends


# -- I5: a file the OS refuses (EACCES) --------------------------------------------------------------------
async def test_I5_an_agents_md_the_os_refuses_is_reported_refused_and_the_run_goes_on(tmp_path, dirs, monkeypatch):
    """I5: an AGENTS.md the OS will not open (mode 000, another user's) failed every run and every
    recover with "I/O error ... Permission denied"; it is the file's condition, reported like a refusal."""
    (dirs[0] / "AGENTS.md").write_text("User rule: be brief.\n")
    (dirs[1] / "AGENTS.md").write_text("Project rule.\n")
    refuse(monkeypatch, "open", "project/AGENTS.md")
    model = ScriptedModel([reply("ok")])
    engine = make(tmp_path, model, [InstructionsMiddleware(PATHS)], backend_for(dirs))
    result = await engine.run("t", "hi")
    assert result.status == "done", result.error
    assert "User rule: be brief." in model.requests[0].system
    docs = {d["path"]: d for d in reports(engine)[0]["documents"]}
    assert docs["/user/AGENTS.md"]["fate"] == "shown"
    assert docs["/project/AGENTS.md"]["fate"] == "refused"
    assert docs["/project/AGENTS.md"]["reason"] == "Permission denied"


async def test_I5_an_agents_md_in_a_folder_the_os_refuses_is_reported_refused(dirs, monkeypatch):
    """I5: a folder without search permission refuses the stat of the file inside it."""
    (dirs[1] / "locked").mkdir()
    (dirs[1] / "locked" / "AGENTS.md").write_text("rules\n")
    refuse(monkeypatch, "stat", "locked/AGENTS.md")
    report = await load_instructions(backend_for(dirs), ["/project/locked/AGENTS.md"])
    assert report.section is None
    assert report.documents == [{"path": "/project/locked/AGENTS.md", "fate": "refused", "tokens": 0,
                                 "shown_tokens": 0, "reason": "Permission denied"}]


async def test_I5_a_real_mode_000_agents_md_is_reported_refused(tmp_path, dirs):
    """I5 with the OS's own EACCES (skipped where file modes refuse nothing: root with CAP_DAC_OVERRIDE)."""
    if not modes_refuse(tmp_path):
        pytest.skip("this process reads mode-000 files (root): the monkeypatched tests above cover it")
    (dirs[1] / "AGENTS.md").write_text("rules\n")
    (dirs[1] / "AGENTS.md").chmod(0)
    try:
        model = ScriptedModel([reply("ok")])
        engine = make(tmp_path, model, [InstructionsMiddleware(PATHS)], backend_for(dirs))
        assert (await engine.run("t", "hi")).status == "done"
        doc = reports(engine)[0]["documents"][1]
        assert doc["fate"] == "refused" and doc["reason"] == "Permission denied"
    finally:
        (dirs[1] / "AGENTS.md").chmod(0o600)
