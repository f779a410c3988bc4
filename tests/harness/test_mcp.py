"""MCP tool servers (issue 13, X1–X5) against real server processes: the published ``mcp-server-git`` and
``mcp-server-time`` from the package registry, and the small SDK servers of ``tests/mcp_servers/tiny.py``
(one that crashes mid-call, one that never answers ``initialize``, one that prints garbage on stdout, one
with 60 tools, one over streamable HTTP on loopback). Model calls go to the loopback stub through litellm,
so what a tool returns is checked where the model gets it: in the stub's requests."""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fakes import alive, server_marker_fixtures, until, with_marker
from tests.stub_server import StubReply, StubServer
from workbench.errors import ConfigError
from workbench.harness import mcp_launch
from workbench.harness.mcp_tools import NAME_RE, offered_names
from workbench.session import McpServerInfo, Session

TINY = Path(__file__).resolve().parents[1] / "mcp_servers" / "tiny.py"
BIN = Path(sys.executable).parent
GIT_SERVER = BIN / "mcp-server-git"
TIME_SERVER = BIN / "mcp-server-time"

pytestmark = pytest.mark.timeout(120)


# ------------------------------------------------------------------------------------------ helpers


def tiny(mode: str, marker: str, *extra: str, **options: Any) -> str:
    """A flow mapping for one tiny server in workbench.yaml."""
    args = json.dumps([str(TINY), mode, marker, *extra])
    opts = "".join(f", {k}: {json.dumps(v)}" for k, v in options.items())
    return f"{{command: {json.dumps(sys.executable)}, args: {args}{opts}}}"


def workspace(tmp_path: Path, stub: StubServer, servers: dict[str, str], *,
              permissions: str = "{default: ask}", extra: str = "") -> Path:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    lines = "".join(f"  {name}: {spec}\n" for name, spec in servers.items())
    (ws / "workbench.yaml").write_text(
        f"model: openai/test-model\napi_base: {stub.url}\npermissions: {permissions}\n{extra}mcp_servers:\n{lines}",
        encoding="utf-8")
    return ws


def git_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    run = lambda *a: subprocess.run(["git", *a], cwd=path, check=True, capture_output=True)  # noqa: E731
    run("init", "-q")
    run("config", "user.email", "test@example.com")
    run("config", "user.name", "Test")
    (path / "readme.txt").write_text("hello\n")
    run("add", "readme.txt")
    run("commit", "-q", "-m", "The very first commit")
    return path


def commits(repo: Path) -> list[str]:
    out = subprocess.run(["git", "log", "--format=%s"], cwd=repo, check=True, capture_output=True, text=True)
    return out.stdout.splitlines()


def tool_results(request: dict[str, Any]) -> list[str]:
    return [str(m.get("content")) for m in request["messages"] if m.get("role") == "tool"]


def offered(request: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools") or []]


def server(session: Session, name: str) -> McpServerInfo:
    return next(i for i in session.mcp_servers() if i.name == name)


marker, _no_leftovers = server_marker_fixtures("wbtest")


# ------------------------------------------------------------------------------------------ real published servers


async def test_x2_git_log_runs_without_asking_and_its_output_reaches_the_model(tmp_path: Path, stub_server: StubServer):
    """X2: mcp-server-git's git_log is annotated read-only: under the default `ask` it runs unasked, and
    the repository's real log is what the model gets."""
    repo = git_repo(tmp_path / "repo")
    ws = workspace(tmp_path, stub_server, {"git": f"{{command: {json.dumps(str(GIT_SERVER))}, "
                                                  f"args: [--repository, {json.dumps(str(repo))}]}}"})
    stub_server.script(StubReply(tool_calls=[("mcp__git__git_log", {"repo_path": str(repo)})]),
                       StubReply(text="The last commit is the very first."))
    session = await Session.open(ws, api_key="sk-test")
    try:
        result = await session.run("What is the last commit?")
        assert result.status == "done", result
        assert result.answer == "The last commit is the very first."
        first, second = stub_server.requests
        assert "mcp__git__git_log" in offered(first) and "mcp__git__git_commit" in offered(first)
        [out] = tool_results(second)
        assert "The very first commit" in out and "Commit:" in out
        info = server(session, "git")
        assert info.status == "ready" and info.pid is not None and "mcp-git" in (info.server_info or "")
        log_tool = next(t for t in info.tools if t.tool == "git_log")
        assert log_tool.read_only and log_tool.name == "mcp__git__git_log"
    finally:
        await session.close()


async def test_x2_git_commit_asks_and_rejected_changes_nothing(tmp_path: Path, stub_server: StubServer):
    """X2/P3: git_commit is not read-only: it asks; rejected, the repository keeps its one commit."""
    repo = git_repo(tmp_path / "repo")
    (repo / "readme.txt").write_text("changed\n")
    subprocess.run(["git", "add", "readme.txt"], cwd=repo, check=True)
    ws = workspace(tmp_path, stub_server, {"git": f"{{command: {json.dumps(str(GIT_SERVER))}, "
                                                  f"args: [--repository, {json.dumps(str(repo))}]}}"})
    stub_server.script(StubReply(tool_calls=[("mcp__git__git_commit", {"repo_path": str(repo), "message": "Sneaky"})]),
                       StubReply(text="Fine, no commit."))
    session = await Session.open(ws, api_key="sk-test")
    try:
        result = await session.run("Commit it")
        assert result.status == "interrupted", result
        [question] = result.pending
        assert question.kind == "tool_approval" and question.payload["tool"] == "mcp__git__git_commit"
        result = await session.resume({question.id: {"decision": "reject", "message": "not now"}})
        assert result.status == "done", result
        assert commits(repo) == ["The very first commit"]
        assert "Rejected by the user: not now" in tool_results(stub_server.requests[-1])[0]
    finally:
        await session.close()


async def test_x2_mcp_server_time_answers_once_as_json(tmp_path: Path, stub_server: StubServer):
    """mcp-server-time: its structured result reaches the model once (the text already is that JSON)."""
    ws = workspace(tmp_path, stub_server, {"time": f"{{command: {json.dumps(str(TIME_SERVER))}, "
                                                   "args: [--local-timezone, UTC]}"})
    stub_server.script(StubReply(tool_calls=[("mcp__time__get_current_time", {"timezone": "Europe/Paris"})]),
                       StubReply(text="ok"))
    session = await Session.open(ws, api_key="sk-test")
    try:
        assert (await session.run("What time is it in Paris?")).status == "done"
        [out] = tool_results(stub_server.requests[-1])
        data = json.loads(out)
        assert data["timezone"] == "Europe/Paris" and "datetime" in data
        assert "Structured content" not in out
    finally:
        await session.close()


# ------------------------------------------------------------------------------------------ permissions


async def test_x2_invoke_rules_with_globs_cover_a_servers_tools(tmp_path: Path, stub_server: StubServer, marker: str):
    """P1/X2: `{allow: invoke, tool: "mcp__tiny__*"}` lets a changing tool run unasked; a deny glob refuses
    even a read-only one."""
    note = tmp_path / "note.txt"
    ws = workspace(tmp_path, stub_server, {"tiny": tiny("normal", marker), "other": tiny("normal", marker)},
                   permissions='{default: ask, rules: [{allow: invoke, tool: "mcp__tiny__*"}, '
                               '{deny: invoke, tool: "mcp__other__*"}]}')
    stub_server.script(StubReply(tool_calls=[("mcp__tiny__note", {"path": str(note), "text": "hi"}, "c1"),
                                             ("mcp__other__echo", {"text": "x"}, "c2")]),
                       StubReply(text="done"))
    session = await Session.open(ws, api_key="sk-test")
    try:
        result = await session.run("go")
        assert result.status == "done", result
        wrote, denied = tool_results(stub_server.requests[-1])
        assert "wrote 2 characters" in wrote and note.read_text() == "hi\n"
        assert denied.startswith("Denied:") and "mcp__other__*" in denied
    finally:
        await session.close()


async def test_x2_a_tool_that_changes_things_asks_under_the_default(tmp_path: Path, stub_server: StubServer,
                                                                   marker: str):
    note = tmp_path / "note.txt"
    ws = workspace(tmp_path, stub_server, {"tiny": tiny("normal", marker)})
    stub_server.script(StubReply(tool_calls=[("mcp__tiny__note", {"path": str(note), "text": "hi"})]),
                       StubReply(text="done"))
    session = await Session.open(ws, api_key="sk-test")
    try:
        result = await session.run("go")
        assert result.status == "interrupted" and result.pending[0].payload["tool"] == "mcp__tiny__note"
        assert not note.exists()
        result = await session.resume({result.pending[0].id: "approve"})
        assert result.status == "done" and note.read_text() == "hi\n"
    finally:
        await session.close()


# ------------------------------------------------------------------------------------------ failures (X3)


async def test_x3_a_server_that_crashes_mid_call_is_a_tool_error_and_comes_back(tmp_path: Path,
                                                                                stub_server: StubServer, marker: str):
    ws = workspace(tmp_path, stub_server, {"tiny": tiny("normal", marker)})
    stub_server.script(StubReply(tool_calls=[("mcp__tiny__crash", {})]), StubReply(text="it crashed"))
    session = await Session.open(ws, api_key="sk-test")
    try:
        result = await session.run("crash it")
        assert result.status == "done", result  # the run goes on: the crash is the call's error
        [out] = tool_results(stub_server.requests[-1])
        assert "stopped during the call" in out and "tiny" in out
        msg = [m for m in session.messages if m.role == "tool"][0]
        assert msg.meta.get("status") == "error" or "Error" in msg.content
        info = await until(lambda: (i := server(session, "tiny")).status == "ready" and i.restarts >= 1 and i, 15,
                           "the server restarted")
        assert "about to crash" in "\n".join(info.log)  # its stderr is in the log tail
        stub_server.script(StubReply(tool_calls=[("mcp__tiny__echo", {"text": "again"})]), StubReply(text="ok"))
        assert (await session.run("again")).status == "done"
        assert tool_results(stub_server.requests[-1])[-1] == "echo: again"
    finally:
        await session.close()


async def test_x3_a_server_that_never_answers_initialize_fails_its_start_in_time(tmp_path: Path,
                                                                               stub_server: StubServer, marker: str):
    ws = workspace(tmp_path, stub_server, {"hang": tiny("hang", marker, startup_timeout=4)})
    stub_server.script(StubReply(text="no tools, still fine"))
    session = await Session.open(ws, api_key="sk-test")
    try:
        began = time.monotonic()
        result = await session.run("hi")
        assert result.status == "done" and time.monotonic() - began < 15
        info = server(session, "hang")
        assert info.status in ("failed", "starting")  # failed, then tried again after its backoff
        assert "startup_timeout (4 s)" in (info.error or "") and "tiny: hanging" in "\n".join(info.log)
        assert not [t for t in offered(stub_server.requests[-1]) if t.startswith("mcp__hang")]
        stub_server.script(StubReply(text="again"))
        began = time.monotonic()
        assert (await session.run("hi again")).status == "done"
        assert time.monotonic() - began < 3.5  # its retries in the background hold no run up (each takes 4 s)
    finally:
        await session.close()


async def test_x3_garbage_on_stdout_is_noted_and_the_server_works(tmp_path: Path, stub_server: StubServer, marker: str):
    ws = workspace(tmp_path, stub_server, {"noisy": tiny("garbage", marker)},
                   permissions='{default: ask, rules: [{allow: invoke, tool: "mcp__noisy__*"}]}')
    stub_server.script(StubReply(tool_calls=[("mcp__noisy__noisy", {})]), StubReply(text="ok"))
    session = await Session.open(ws, api_key="sk-test")
    try:
        assert (await session.run("go")).status == "done"
        assert tool_results(stub_server.requests[-1]) == ["noisy done"]
        info = server(session, "noisy")
        log = "\n".join(info.log)
        assert info.status == "ready"
        assert "not JSON-RPC (ignored): Welcome to tiny!" in log and "stray output during a call" in log
    finally:
        await session.close()


async def test_x3_a_slow_tool_ends_at_tool_timeout(tmp_path: Path, stub_server: StubServer, marker: str):
    ws = workspace(tmp_path, stub_server, {"tiny": tiny("normal", marker, tool_timeout=0.5)})
    stub_server.script(StubReply(tool_calls=[("mcp__tiny__slow", {"seconds": 5})]), StubReply(text="ok"))
    session = await Session.open(ws, api_key="sk-test")
    try:
        began = time.monotonic()
        assert (await session.run("go")).status == "done"
        assert time.monotonic() - began < 4
        [out] = tool_results(stub_server.requests[-1])
        assert "tool_timeout (0.5 s)" in out
    finally:
        await session.close()


async def test_x3_a_tool_error_result_is_the_tools_error(tmp_path: Path, stub_server: StubServer, marker: str):
    ws = workspace(tmp_path, stub_server, {"tiny": tiny("normal", marker)})
    stub_server.script(StubReply(tool_calls=[("mcp__tiny__fail", {})]), StubReply(text="ok"))
    session = await Session.open(ws, api_key="sk-test")
    try:
        assert (await session.run("go")).status == "done"
        [out] = tool_results(stub_server.requests[-1])
        assert out.startswith("Error from MCP server 'tiny' (fail): ")
        assert [m.meta.get("status") for m in session.messages if m.role == "tool"] == ["error"]
    finally:
        await session.close()


async def test_x3_a_failed_start_says_why_with_its_stderr(tmp_path: Path, stub_server: StubServer, marker: str):
    ws = workspace(tmp_path, stub_server, {"broken": tiny("stderr", marker)})
    session = await Session.open(ws, api_key="sk-test")
    try:
        [info] = await session.start_mcp_servers()
        assert info.status == "failed"
        assert "missing configuration file /etc/tiny.conf" in (info.error or "")
        assert "exit code 2" in (info.error or "")
    finally:
        await session.close()


async def test_x3_closing_the_session_stops_every_server_process(tmp_path: Path, stub_server: StubServer, marker: str):
    """X3: no process outlives Session.close() — the servers, a grandchild one of them started, and one
    stuck before answering ``initialize`` (checked in the process table)."""
    repo = git_repo(tmp_path / marker)  # the marker in its command line
    ws = workspace(tmp_path, stub_server, {
        "tiny": tiny("normal", marker), "spawner": tiny("spawner", marker), "hang": tiny("hang", marker),
        "git": f"{{command: {json.dumps(str(GIT_SERVER))}, args: [--repository, {json.dumps(str(repo))}]}}",
    })
    session = await Session.open(ws, api_key="sk-test")
    starting = asyncio.ensure_future(session.start_mcp_servers())
    try:
        await until(lambda: all(server(session, n).status == "ready" for n in ("tiny", "spawner", "git"))
                    and len(with_marker(marker)) >= 5, 30, "servers up (and the grandchild)")
        pids = with_marker(marker)
        assert server(session, "hang").status == "starting"
        assert set(session._mcp().pids) < set(pids)  # the grandchild is not a server: its group goes with it
    finally:
        await session.close()
        starting.cancel()
        await asyncio.gather(starting, return_exceptions=True)
    assert not [p for p in pids if alive(p)], "a server process outlived Session.close()"


async def test_x3_stop_ends_a_run_waiting_on_a_slow_call(tmp_path: Path, stub_server: StubServer, marker: str):
    ws = workspace(tmp_path, stub_server, {"tiny": tiny("normal", marker)})
    stub_server.script(StubReply(tool_calls=[("mcp__tiny__slow", {"seconds": 30})]), StubReply(text="ok"))
    session = await Session.open(ws, api_key="sk-test")
    try:
        run = asyncio.ensure_future(session.run("go"))
        await until(lambda: server(session, "tiny").status == "ready" and session.running, 20)
        await asyncio.sleep(0.5)
        began = time.monotonic()
        await session.stop()
        result = await run
        assert result.status == "aborted" and time.monotonic() - began < 5
    finally:
        await session.close()


@pytest.mark.parametrize("threaded", [False, True], ids=["caller's loop", "own loop (the window)"])
async def test_x3_a_sub_agent_calls_the_same_server_processes(tmp_path: Path, stub_server: StubServer, marker: str,
                                                              threaded: bool):
    """A sub-agent runs the same workbench.yaml stack: it gets the MCP tools, from the session's own server
    processes (not a second set), under its own permission checks — on the caller's loop, and on the
    sub-agents' own loop and thread as the window runs them."""
    ws = workspace(tmp_path, stub_server, {"tiny": tiny("normal", marker)}, permissions="{default: allow}",
                   extra="subagents:\n  agents:\n    - {name: helper, description: Helps., model: openai/helper}\n")
    stub_server.script_for("test-model", StubReply(tool_calls=[("delegate_to_helper", {"task": "echo hi"})]),
                           StubReply(text="done"))
    stub_server.script_for("helper", StubReply(tool_calls=[("mcp__tiny__echo", {"text": "from the helper"})]),
                           StubReply(text="It said: echo: from the helper"))
    session = await Session.open(ws, api_key="sk-test", threaded_model=threaded)
    try:
        assert (await session.run("delegate")).status == "done"
        helper_last = [r for r in stub_server.requests if r["model"] == "helper"][-1]
        assert tool_results(helper_last) == ["echo: from the helper"]
        assert len(with_marker(marker)) == 1  # one server process for the agent and its sub-agent
    finally:
        await session.close()


# ------------------------------------------------------------------------------------------ tools and results


async def test_x2_sixty_tools_are_all_offered_with_names_every_provider_takes(tmp_path: Path,
                                                                             stub_server: StubServer, marker: str):
    ws = workspace(tmp_path, stub_server, {"many": tiny("many", marker)}, permissions="{default: allow}")
    stub_server.script(StubReply(text="ok"))
    session = await Session.open(ws, api_key="sk-test")
    try:
        assert (await session.run("hi")).status == "done"
        names = [n for n in offered(stub_server.requests[-1]) if n.startswith("mcp__many__")]
        assert len(names) == 60 and len(set(names)) == 60
        assert all(NAME_RE.match(n) for n in names), [n for n in names if not NAME_RE.match(n)]
        info = server(session, "many")
        by_tool = {t.tool: t.name for t in info.tools}
        assert by_tool["tool_00"] == "mcp__many__tool_00"  # valid names are kept as they are
        assert by_tool["dotted.name"].startswith("mcp__many__dotted_name_")
        assert by_tool["a" * 80] != by_tool["a" * 81] and len(by_tool["a" * 81]) == 64
        # a renamed tool is called by its server's own name
        stub_server.script(StubReply(tool_calls=[(by_tool["with space"], {"x": 5})]), StubReply(text="ok"))
        assert (await session.run("call it")).status == "done"
        index = [t for t in info.tools if t.tool == "with space"][0].description.split()[-1].rstrip(".")
        assert tool_results(stub_server.requests[-1]) == [f"tool {index} got 5"]
    finally:
        await session.close()


async def test_x2_an_image_becomes_an_artifact_named_in_the_result(tmp_path: Path, stub_server: StubServer, marker: str):
    ws = workspace(tmp_path, stub_server, {"tiny": tiny("normal", marker)})
    # the same call id in two steps (providers number calls call_0, call_1 in every message): two images
    stub_server.script(StubReply(tool_calls=[("mcp__tiny__picture", {}, "call_pic")]),
                       StubReply(tool_calls=[("mcp__tiny__picture", {}, "call_pic")]), StubReply(text="ok"))
    session = await Session.open(ws, api_key="sk-test")
    try:
        assert (await session.run("draw")).status == "done"
        first, second = tool_results(stub_server.requests[-1])
        name = "mcp/tiny/picture-s1-call_pic-1.png"
        assert f"saved as the artifact '{name}'" in first and "image/png" in first
        assert "saved as the artifact 'mcp/tiny/picture-s2-call_pic-1.png'" in second  # not over the first
        art = session.artifacts[name]
        assert art["mime"] == "image/png" and art["content"].startswith("iVBOR")
        assert "mcp/tiny/picture-s2-call_pic-1.png" in session.artifacts
        events = [e for e in session.store.events(session.thread_id) if e.type == "artifact_written"]
        assert [e.data["name"] for e in events] == [name, "mcp/tiny/picture-s2-call_pic-1.png"]
    finally:
        await session.close()


async def test_x2_an_image_over_the_artifacts_limit_is_not_kept_and_the_result_says_so(
        tmp_path: Path, stub_server: StubServer, marker: str, monkeypatch: pytest.MonkeyPatch):
    """A server's binary bypassed the artifacts' own cap (four 6.7 MB images were kept, a review found)."""
    from workbench.harness.artifacts import ArtifactsMiddleware

    original = ArtifactsMiddleware.__init__

    def small(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        original(self, *args, **kwargs)
        self.max_bytes = 10

    monkeypatch.setattr(ArtifactsMiddleware, "__init__", small)
    ws = workspace(tmp_path, stub_server, {"tiny": tiny("normal", marker)})
    stub_server.script(StubReply(tool_calls=[("mcp__tiny__picture", {}, "call_pic")]), StubReply(text="ok"))
    session = await Session.open(ws, api_key="sk-test")
    try:
        assert (await session.run("draw")).status == "done"
        [out] = tool_results(stub_server.requests[-1])
        assert "it was not kept: over the artifacts limit of 10 bytes" in out
        assert not any(n.startswith("mcp/") for n in session.artifacts)
    finally:
        await session.close()


async def test_x2_structured_content_reaches_the_model_as_json(tmp_path: Path, stub_server: StubServer, marker: str):
    ws = workspace(tmp_path, stub_server, {"tiny": tiny("normal", marker)})
    stub_server.script(StubReply(tool_calls=[("mcp__tiny__add", {"a": 2, "b": 40})]), StubReply(text="ok"))
    session = await Session.open(ws, api_key="sk-test")
    try:
        assert (await session.run("add")).status == "done"
        [out] = tool_results(stub_server.requests[-1])
        assert json.loads(out.split("Structured content (JSON):")[-1]) == {"sum": 42} or json.loads(out) == {"sum": 42}
    finally:
        await session.close()


async def test_c3_an_mcp_result_is_capped_like_any(tmp_path: Path, stub_server: StubServer, marker: str):
    ws = workspace(tmp_path, stub_server, {"tiny": tiny("normal", marker)},
                   extra="compression: {max_tool_response_chars: 1000}\n")
    stub_server.script(StubReply(tool_calls=[("mcp__tiny__big", {"n": 200000})]), StubReply(text="ok"))
    session = await Session.open(ws, api_key="sk-test")
    try:
        assert (await session.run("big")).status == "done"
        [out] = tool_results(stub_server.requests[-1])
        assert len(out) < 1500 and out.startswith("xxx")
    finally:
        await session.close()


async def test_x5_a_tool_switched_off_is_not_offered_and_stays_off(tmp_path: Path, stub_server: StubServer, marker: str):
    ws = workspace(tmp_path, stub_server, {"tiny": tiny("normal", marker)})
    stub_server.script(StubReply(text="one"), StubReply(text="two"))
    session = await Session.open(ws, api_key="sk-test")
    try:
        await session.run("first")
        assert "mcp__tiny__echo" in offered(stub_server.requests[-1])
        session.set_mcp_tool_enabled("tiny", "echo", False)
        assert not next(t for t in server(session, "tiny").tools if t.tool == "echo").enabled
        await session.run("second")
        names = offered(stub_server.requests[-1])
        assert "mcp__tiny__echo" not in names and "mcp__tiny__add" in names
    finally:
        await session.close()
    stub_server.script(StubReply(text="three"))
    again = await Session.open(ws, api_key="sk-test")
    try:
        await again.run("third")
        assert "mcp__tiny__echo" not in offered(stub_server.requests[-1])  # kept in .workbench/
        again.set_mcp_tool_enabled("tiny", "mcp__tiny__echo", True)
        assert "mcp__tiny__echo" in again.engine.agent.tool_map
    finally:
        await again.close()


async def test_x5_check_and_restart(tmp_path: Path, stub_server: StubServer, marker: str):
    ws = workspace(tmp_path, stub_server, {"tiny": tiny("normal", marker), "idle": tiny("normal", marker, enabled=False)})
    session = await Session.open(ws, api_key="sk-test")
    try:
        assert server(session, "tiny").status == "stopped"  # started by the first run that needs it, not at open
        assert "disabled" in (server(session, "idle").note or "")
        info = await session.check_mcp_server("tiny")
        assert info.status == "ready" and "echo" in [t.tool for t in info.tools]
        pid = info.pid
        info = await session.restart_mcp_server("tiny")
        assert info.status == "ready" and info.pid != pid and info.restarts == 1
        assert not alive(pid)
        with pytest.raises(Exception, match="disabled"):
            await session.check_mcp_server("idle")
        with pytest.raises(Exception, match="no MCP server 'nope'"):
            await session.check_mcp_server("nope")
    finally:
        await session.close()


async def test_x1_streamable_http_server_on_loopback(tmp_path: Path, stub_server: StubServer, marker: str):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, str(TINY), "http", marker, str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        async def listening() -> bool:
            try:
                _, w = await asyncio.open_connection("127.0.0.1", port)
                w.close()
                return True
            except OSError:
                return False

        deadline = time.monotonic() + 20
        while not await listening():
            assert time.monotonic() < deadline and proc.poll() is None, "the HTTP server did not come up"
            await asyncio.sleep(0.1)
        ws = workspace(tmp_path, stub_server, {
            "web": f'{{url: "http://127.0.0.1:{port}/mcp", headers: {{X-Token: "${{WB_TEST_TOKEN}}"}}}}'})
        os.environ["WB_TEST_TOKEN"] = "token-value-123"
        stub_server.script(StubReply(tool_calls=[("mcp__web__echo", {"text": "over http"})]), StubReply(text="ok"))
        session = await Session.open(ws, api_key="sk-test")
        try:
            assert (await session.run("go")).status == "done"
            assert tool_results(stub_server.requests[-1]) == ["echo: over http"]
            info = server(session, "web")
            assert info.transport == "http" and info.status == "ready" and info.pid is None
        finally:
            await session.close()
    finally:
        os.environ.pop("WB_TEST_TOKEN", None)
        proc.terminate()
        proc.wait(10)


# ------------------------------------------------------------------------------------------ launching (X1, X4)


async def test_x1_env_vars_resolve_from_the_environment_or_the_keyring_and_are_never_written(
        tmp_path: Path, stub_server: StubServer, marker: str, monkeypatch: pytest.MonkeyPatch):
    import keyring

    from tests.fakes import MemoryKeyring

    ring = MemoryKeyring()
    ring.set_password("workbench", "WB_RING_TOKEN", "from-the-keyring-42")
    monkeypatch.setattr(keyring, "get_keyring", lambda: ring)
    monkeypatch.setenv("WB_ENV_TOKEN", "from-the-environment-7")
    monkeypatch.setenv("WB_NOT_PASSED", "should-not-reach-the-server")
    spec = tiny("normal", marker).rstrip("}") + ', env: {A: "${WB_ENV_TOKEN}", B: "x-${WB_RING_TOKEN}"}}'
    ws = workspace(tmp_path, stub_server, {"tiny": spec})
    text = (ws / "workbench.yaml").read_text()
    stub_server.script(StubReply(tool_calls=[("mcp__tiny__getenv", {"name": "A"}, "c1"),
                                             ("mcp__tiny__getenv", {"name": "B"}, "c2"),
                                             ("mcp__tiny__getenv", {"name": "WB_NOT_PASSED"}, "c3")]),
                       StubReply(text="ok"))
    session = await Session.open(ws, api_key="sk-test")
    try:
        assert (await session.run("go")).status == "done"
        a, b, not_passed = tool_results(stub_server.requests[-1])
        assert (a, b) == ("from-the-environment-7", "x-from-the-keyring-42")
        assert not_passed == "(the tool returned nothing)"  # only the minimal environment and `env:` reach it
        assert (ws / "workbench.yaml").read_text() == text
        shown = json.dumps([i.target for i in session.mcp_servers()]) + "\n".join(server(session, "tiny").log)
        assert "from-the-keyring-42" not in shown
    finally:
        await session.close()


async def test_x1_a_missing_variable_fails_the_start_naming_it(tmp_path: Path, stub_server: StubServer, marker: str,
                                                              monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("WB_ABSENT_TOKEN", raising=False)
    spec = tiny("normal", marker).rstrip("}") + ', env: {TOKEN: "${WB_ABSENT_TOKEN}"}}'
    session = await Session.open(workspace(tmp_path, stub_server, {"tiny": spec}), api_key="sk-test")
    try:
        [info] = await session.start_mcp_servers()
        assert info.status == "failed"
        assert "mcp_servers.tiny.env.TOKEN: ${WB_ABSENT_TOKEN} is not set in the environment or the keyring" in info.error
    finally:
        await session.close()


async def test_x1_a_secret_written_into_the_file_is_pointed_out(tmp_path: Path, stub_server: StubServer, marker: str):
    spec = tiny("normal", marker).rstrip("}") + ', env: {GH: "ghp_abcdefghijklmnopqrstuvwxyz0123"}}'
    session = await Session.open(workspace(tmp_path, stub_server, {"tiny": spec}), api_key="sk-test")
    try:
        [info] = await session.start_mcp_servers()
        log = "\n".join(info.log)
        assert "mcp_servers.tiny.env.GH looks like a secret written into workbench.yaml: write ${VAR}" in log
        assert "ghp_abcdefghijklmnopqrstuvwxyz0123" not in log
    finally:
        await session.close()


async def test_x4_the_login_shell_path_finds_a_command_the_minimal_path_lacks(
        tmp_path: Path, stub_server: StubServer, marker: str, monkeypatch: pytest.MonkeyPatch):
    """X4: a desktop launch's PATH is /usr/bin:/bin; the command is in a folder only the login shell's
    PATH has. It starts, and the server gets that PATH too."""
    tools = tmp_path / "user-bin"
    tools.mkdir()
    wrapper = tools / "tiny-mcp"
    wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} {TINY} normal {marker}\n")
    wrapper.chmod(0o755)
    shell = tmp_path / "fake-login-shell"
    shell.write_text(f'#!/bin/sh\nPATH="/usr/bin:/bin:{tools}"\nexport PATH\nshift\nexec /bin/sh -c "$1"\n')
    shell.chmod(0o755)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.setenv("SHELL", str(shell))
    monkeypatch.setattr(mcp_launch, "_login_path", None)
    session = await Session.open(workspace(tmp_path, stub_server, {"tiny": "{command: tiny-mcp}"}), api_key="sk-test")
    try:
        [info] = await session.start_mcp_servers()
        assert info.status == "ready", info.error
        result = await session._mcp().call("tiny", "getenv", {"name": "PATH"})
        assert str(tools) in result.texts[0]
    finally:
        await session.close()
        monkeypatch.setattr(mcp_launch, "_login_path", None)


async def test_x4_not_found_names_the_command_and_the_path_searched(tmp_path: Path, stub_server: StubServer,
                                                                   monkeypatch: pytest.MonkeyPatch):
    shell = tmp_path / "fake-login-shell"
    shell.write_text('#!/bin/sh\nPATH="/usr/bin:/bin:/opt/login-only/bin"\nexport PATH\nshift\nexec /bin/sh -c "$1"\n')
    shell.chmod(0o755)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.setenv("SHELL", str(shell))
    monkeypatch.setattr(mcp_launch, "_login_path", None)
    session = await Session.open(workspace(tmp_path, stub_server, {"npx-thing": "{command: npx-not-installed-xyz}"}),
                                 api_key="sk-test")
    try:
        [info] = await session.start_mcp_servers()
        assert info.status == "failed"
        assert ("mcp_servers.npx-thing.command: command 'npx-not-installed-xyz' not found on PATH "
                "/usr/bin:/bin:/opt/login-only/bin") in info.error
    finally:
        await session.close()
        monkeypatch.setattr(mcp_launch, "_login_path", None)


# ------------------------------------------------------------------------------------------ trust (W1) and config


async def test_w1_an_untrusted_workspace_starts_no_mcp_server(tmp_path: Path, stub_server: StubServer, marker: str,
                                                             monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("WORKBENCH_TRUST", raising=False)
    ws = workspace(tmp_path, stub_server, {"tiny": tiny("normal", marker)})
    assert any(r.key == "mcp_servers.tiny" and str(TINY) in r.value for r in Session.trust_requests(ws))
    stub_server.script(StubReply(text="ok"))
    session = await Session.open(ws, api_key="sk-test")  # api_base is ignored too: the demo model answers
    try:
        await session.run("hi")
        assert not with_marker(marker)
        [info] = session.mcp_servers()
        assert info.name == "tiny" and info.status == "stopped" and "not trusted" in (info.note or "")
        assert not [n for n in session.engine.agent.tool_map if n.startswith("mcp__")]
        with pytest.raises(ConfigError, match="not trusted"):
            await session.check_mcp_server("tiny")
    finally:
        await session.close()


def test_w1_an_mcp_servers_command_env_or_url_change_asks_again(tmp_path: Path):
    from workbench import trust
    from workbench.config import parse_config

    def h(text: str) -> str:
        return trust.settings_hash(trust.requests(parse_config(text), tmp_path))

    base = h("mcp_servers: {a: {command: x, args: [1]}}")
    assert base != h("mcp_servers: {a: {command: x, args: [2]}}")
    assert base != h("mcp_servers: {a: {command: x, args: [1], env: {LD_PRELOAD: /evil.so}}}")
    assert base != h("mcp_servers: {a: {command: x, args: [1], cwd: /elsewhere}}")
    web = trust.requests(parse_config('mcp_servers: {d: {url: "https://e.example/mcp", headers: {A: "${T}"}}}'),
                         tmp_path)
    assert [r.key for r in web] == ["mcp_servers.d"] and "https://e.example/mcp" in web[0].description


@pytest.mark.parametrize("text,message", [
    ("mcp_servers: {a__b: {command: x}}", "a server name is letters and digits"),
    ("mcp_servers: {a: {command: x, url: 'http://h'}}", "exactly one of command"),
    ("mcp_servers: {a: {}}", "got neither"),
    ("mcp_servers: {a: {url: 'ftp://h'}}", "mcp_servers.a.url: expected an http:// or https:// URL"),
    ("mcp_servers: {a: {url: 'http://h', env: {A: b}}}", "mcp_servers.a.env: only a command server takes env"),
    ("mcp_servers: {a: {command: x, headers: {A: b}}}", "mcp_servers.a.headers: only a url server"),
    ("mcp_servers: {a: {command: x, startup_timeout: 0}}", "mcp_servers.a.startup_timeout: expected a number"),
    ("mcp_servers: {a: {command: x, comand: y}}", "did you mean 'command'"),
    ("mcp_servers: [x]", "expected a mapping of server names"),
])
def test_x1_a_bad_mcp_servers_entry_names_the_key_and_line(text: str, message: str) -> None:
    from workbench.config import parse_config

    with pytest.raises(ConfigError, match=re.escape(message)) as e:
        parse_config(f"model: demo\n{text}\n")
    assert str(e.value).startswith("workbench.yaml:2:")


def test_x1_the_design_example_parses() -> None:
    from workbench.config import parse_config

    cfg = parse_config('mcp_servers:\n  time: {command: mcp-server-time, args: [--local-timezone, UTC]}\n'
                       '  docs: {url: http://127.0.0.1:8931/mcp, headers: {Authorization: "Bearer ${DOCS_TOKEN}"}, '
                       'enabled: false}\n')
    time_cfg, docs = cfg.mcp_servers["time"], cfg.mcp_servers["docs"]
    assert time_cfg.args == ("--local-timezone", "UTC") and time_cfg.startup_timeout == 30 and time_cfg.tool_timeout == 60
    assert docs.transport == "http" and not docs.enabled and docs.headers["Authorization"] == "Bearer ${DOCS_TOKEN}"


# ------------------------------------------------------------------------------------------ naming


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(min_size=0, max_size=120), min_size=1, max_size=30),
       st.from_regex(r"[A-Za-z0-9]{1,8}(?:[-_][A-Za-z0-9]{1,8}){0,2}", fullmatch=True))
def test_x2_offered_names_are_valid_unique_and_stable(tools: list[str], server_name: str) -> None:
    names = offered_names(server_name, tools)
    assert set(names) == set(tools)
    assert len(set(names.values())) == len(names)
    for tool, name in names.items():
        assert NAME_RE.match(name), name
        assert name.startswith(f"mcp__{server_name}__")
        if re.fullmatch(r"[A-Za-z0-9_-]+", tool) and len(f"mcp__{server_name}__{tool}") <= 64:
            assert name == f"mcp__{server_name}__{tool}" or name.endswith(
                "_" + __import__("hashlib").sha256(tool.encode("utf-8", "surrogatepass")).hexdigest()[:len(name.rsplit("_", 1)[-1])])
    assert offered_names(server_name, list(reversed(tools))) == names


def test_x1_resolve_vars_names_what_is_missing() -> None:
    values, secrets = mcp_launch.resolve_vars({"A": "Bearer ${T1}", "B": "plain"}, "mcp_servers.d.headers",
                                              {"T1": "abc"})
    assert values == {"A": "Bearer abc", "B": "plain"} and secrets == ["abc"]
    with pytest.raises(mcp_launch.LaunchError, match=r"mcp_servers.d.headers.A: \$\{T2\} is not set"):
        mcp_launch.resolve_vars({"A": "${T2}"}, "mcp_servers.d.headers", {})


async def test_x3_two_sessions_on_one_config_object_share_servers_until_the_last_closes(
        tmp_path: Path, stub_server: StubServer, marker: str):
    """A script may open two sessions with one config object: they share one set of server processes
    (as an agent and its sub-agents do), and closing the first leaves the second's servers running."""
    from workbench.config import load_config

    ws = workspace(tmp_path, stub_server, {"tiny": tiny("normal", marker)})
    config = load_config(ws)
    first = await Session.open(ws, config=config, api_key="sk-test", trust=True)
    second = await Session.open(ws, config=config, api_key="sk-test", trust=True)
    try:
        await first.start_mcp_servers()
        await until(lambda: server(second, "tiny").status == "ready", 30, "the shared server ready")
        pids = with_marker(marker)
        assert pids
        await first.close()
        assert server(second, "tiny").status == "ready" and all(alive(p) for p in pids)
    finally:
        await second.close()
    assert not [p for p in pids if alive(p)], "a server process outlived the last Session.close()"
