"""The shell tool (E1–E6, issue 15): real commands through a real Session — the agent fixing a failing
test with pytest, process groups gone from the process table after Stop, a timeout, the shell's exit and
the session's close, 10 MB of output kept to head and tail, the scrubbed environment, live output
events, and the permissions that judge a command part by part.

Most tests run twice: without a sandbox (``WORKBENCH_SANDBOX=off``) and in bubblewrap where it works here
(tests/harness/test_sandbox.py says in words why it does not when it does not)."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import sys
import threading
import time
import tracemalloc
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import until
from tests.stub_server import StubReply, StubServer
from workbench.engine.models.scripted import ScriptedModel, reply, tool_reply
from workbench.harness.command_process import LIVE_BATCH_CHARS, _Command, _HeadTail
from workbench.harness.execute import ExecuteMiddleware, command_env
from workbench.harness.sandbox import detect
from workbench.session import Session


@pytest.fixture(params=["no sandbox", "bubblewrap"])
def sandbox_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each process test runs without a sandbox and, where bubblewrap works here, inside it."""
    if request.param == "no sandbox":
        monkeypatch.setenv("WORKBENCH_SANDBOX", "off")
    elif not detect().active:
        pytest.skip(f"no bubblewrap sandbox on this machine: {detect().reason}")
    return str(request.param)


def make_ws(tmp_path: Path, yaml: str = "permissions: {default: allow}\n") -> Path:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    (ws / "workbench.yaml").write_text(yaml, encoding="utf-8")
    return ws


async def open_scripted(ws: Path, *replies: Any) -> tuple[Session, ScriptedModel]:
    model = ScriptedModel(list(replies))
    return await Session.open(ws, model=model), model


def run_call(command: str, call_id: str = "c1", **extra: Any) -> Any:
    return tool_reply(("execute", {"command": command, **extra}, call_id))


def tool_results(session: Session) -> list[str]:
    return [m.content for m in session.messages if m.role == "tool"]


def alive(token: str, *, named: bool = False) -> list[str]:
    """Processes (not zombies) whose command line holds ``token`` (``named``: whose name is it — the
    sleepers, not the shell running the line): the process table, read directly."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read()
            with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        hit = cmdline.split(b"\0")[0] == token.encode() if named else token.encode() in cmdline
        if hit and state != "Z":
            out.append(f"{pid} {state} {cmdline!r}")
    return out


def with_marker(marker_of: str) -> list[str]:
    """Processes whose environment carries a command's marker (they belong to that command, E4)."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if marker_of.encode() in f.read():
                    out.append(pid)
        except OSError:
            continue
    return out


def marker_of(token: str) -> str:
    """The ``WORKBENCH_COMMAND`` marker of the running command whose process shows ``token``."""
    for line in alive(token):
        pid = line.split()[0]
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                for item in f.read().split(b"\0"):
                    if item.startswith(b"WORKBENCH_COMMAND="):
                        return item.decode()
        except OSError:
            continue
    return ""


def sleepers(token: str, n: int = 2, *, ignore_term: bool = False) -> str:
    """A command line starting ``n`` background processes named ``token`` that sleep 100 s (one ignoring
    SIGTERM when asked), then waiting for them."""
    named = f"exec -a {token} sleep 100"
    parts = [f"({named}) &" for _ in range(n)]
    if ignore_term:
        parts.append(f"(trap '' TERM; {named}) &")
    return " ".join(parts) + " wait"


# -- E1: a real pytest run, through the stub ----------------------------------------------------------------


async def test_E1_the_agent_runs_pytest_edits_the_file_and_the_second_run_passes(tmp_path: Path,
                                                                                 stub_server: StubServer,
                                                                                 monkeypatch: pytest.MonkeyPatch):
    if Path(sys.executable).absolute().is_relative_to("/tmp"):  # the venv itself, not where it links
        # The sandbox's /tmp is private (E5), so a venv under /tmp (a CI clone there) is not in it: this
        # test is about the run-edit-run loop; the sandbox has its own tests.
        monkeypatch.setenv("WORKBENCH_SANDBOX", "off")
    ws = make_ws(tmp_path, f"model: openai/test-model\napi_base: {stub_server.url}\npermissions: {{default: allow}}\n")
    (ws / "calc.py").write_text("def add(a, b):\n    return a - b\n", encoding="utf-8")
    (ws / "test_calc.py").write_text("from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
                                     encoding="utf-8")
    pytest_cmd = f"PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 {sys.executable} -m pytest -q -p no:cacheprovider test_calc.py"
    stub_server.script(
        StubReply(tool_calls=[("execute", {"command": pytest_cmd}, "run1")]),
        # The fix changes the file's size: Python's bytecode cache trusts a same-size file edited within the
        # second it was compiled in, and the second run would import the stale module.
        StubReply(tool_calls=[("edit_file", {"path": "/project/calc.py", "old_string": "a - b",
                                             "new_string": "a + b  # fixed"}, "fix")]),
        StubReply(tool_calls=[("execute", {"command": pytest_cmd}, "run2")]),
        StubReply(text="Fixed: add() subtracted."))
    session = await Session.open(ws, api_key="sk-test")
    try:
        result = await session.run("Fix the failing test")
        assert result.status == "done", result
        first, edit, second = tool_results(session)
        assert "1 failed" in first and "assert -1 == 5" in first and "[exit code 1 ·" in first
        assert "Error" not in edit
        assert "1 passed" in second and "[exit code 0 ·" in second
        assert (ws / "calc.py").read_text(encoding="utf-8").endswith("return a + b  # fixed\n")
        # the model saw the results: the second request carries the failure, the last the pass
        sent = [json.dumps(r["messages"]) for r in stub_server.requests]
        assert "1 failed" in sent[1] and "1 passed" in sent[3]
        # E6: the durable finish carries the exit codes, not the output
        finished = [e.data for e in session.store.events(session.thread_id)
                    if e.type == "tool_call_finished" and e.data.get("name") == "execute"]
        assert [f["exit_code"] for f in finished] == [1, 0]
        assert all(f["duration_seconds"] > 0 and "passed" not in json.dumps(f) for f in finished)
    finally:
        await session.close()


async def test_E1_output_interleaves_stdout_and_stderr_and_ends_with_the_exit_code(tmp_path, sandbox_mode):
    session, _ = await open_scripted(make_ws(tmp_path), run_call("echo one; echo two >&2; echo three; exit 7"),
                                     reply("ok"))
    try:
        await session.run("go")
        [out] = tool_results(session)
        assert out.startswith("one\ntwo\nthree\n") and "[exit code 7 · " in out
    finally:
        await session.close()


def _run_command(command: str, cwd: Path) -> tuple[int | None, str]:
    """One real command through ``_Command`` (what ``execute`` runs), waited for to its end."""
    ended = threading.Event()
    marker = uuid.uuid4().hex
    cmd = _Command(["bash", "-c", command], cwd, command_env(os.environ, marker=marker), 30000, marker=marker,
                   sandboxed=False, thread_id="t", on_done=ended.set)
    assert ended.wait(30), f"{command!r} did not end"
    return cmd.returncode, cmd.capture.text()


def test_E1_E4_a_command_that_ends_normally_is_never_reported_killed(tmp_path):
    """E1: the exit code is the command's. grep and ls close their stdout just before they exit; the
    group used to be killed at that EOF, and about half of these runs read "killed by SIGKILL" (-9)."""
    codes: dict[int | None, int] = {}
    for _ in range(40):
        for command in ("grep -c root /etc/passwd", "ls /"):
            code, out = _run_command(command, tmp_path)
            codes[code] = codes.get(code, 0) + 1
            assert out.strip()
    assert codes == {0: 80}


async def test_E1_a_command_that_sends_its_output_elsewhere_runs_to_its_end(tmp_path, sandbox_mode):
    """E1: the end of the output is not the end of the command — a script that redirects its own output
    (``exec >log``) ran for milliseconds and was killed before it finished."""
    command = "echo before; exec >out.log 2>&1; sleep 1; echo finished > marker.txt; echo logged"
    ws = make_ws(tmp_path)
    session, _ = await open_scripted(ws, run_call(command), reply("ok"))
    try:
        await session.run("go")
        [out] = tool_results(session)
        assert out.startswith("before\n") and "[exit code 0 · " in out
        assert (ws / "marker.txt").read_text() == "finished\n"
        assert (ws / "out.log").read_text() == "logged\n"
    finally:
        await session.close()


async def test_E4_a_command_with_its_output_closed_still_stops_at_its_timeout(tmp_path, sandbox_mode):
    """E4: waiting past EOF for the shell still ends at the call's timeout, with the whole group."""
    token = f"wb-closed-{uuid.uuid4().hex[:8]}"
    command = f"exec >/dev/null 2>&1; {sleepers(token, 1, ignore_term=True)}"
    session, _ = await open_scripted(make_ws(tmp_path), run_call(command, timeout_seconds=1), reply("it hung"))
    try:
        started = time.monotonic()
        result = await session.run("go")
        assert result.status == "done" and time.monotonic() - started < 8
        [out] = tool_results(session)
        assert "timed out after 1 s" in out
        assert alive(token) == []
    finally:
        await session.close()


async def test_E1_cwd_is_a_folder_of_a_host_mount_else_a_clear_error(tmp_path, sandbox_mode):
    ws = make_ws(tmp_path)
    (ws / "sub").mkdir()
    (tmp_path / "outside").mkdir()
    (ws / "link").symlink_to(tmp_path / "outside")
    (ws / ".workbench").mkdir(exist_ok=True)
    calls = [("execute", {"command": "pwd", "cwd": "/project/sub"}, "a"),
             ("execute", {"command": "pwd", "cwd": "/scratch"}, "b"),
             ("execute", {"command": "pwd", "cwd": "/project/../.."}, "c"),
             ("execute", {"command": "pwd", "cwd": "/project/link"}, "d"),
             ("execute", {"command": "pwd", "cwd": "/project/.workbench"}, "e"),
             ("execute", {"command": "pwd", "cwd": "/project/nope"}, "f"),
             ("execute", {"command": "pwd", "timeout_seconds": 10_000}, "g")]
    session, _ = await open_scripted(ws, tool_reply(*calls), reply("ok"))
    try:
        await session.run("go")
        a, b, c, d, e, f, g = tool_results(session)
        assert a.startswith(str((ws / "sub").resolve())) and "[exit code 0" in a
        assert "not in a mount with a folder on disk" in b and "/project" in b
        assert "leaves the root" in c
        assert "outside the mount /project" in d
        assert "keeps this folder out of every tool" in e
        assert "no such folder" in f
        assert "timeout_seconds" in g and "600" in g  # over execute.max_timeout_seconds: refused by the schema
    finally:
        await session.close()


# -- E4: nothing outlives the command ----------------------------------------------------------------------


async def test_E4_stop_during_a_command_kills_its_whole_process_group(tmp_path, sandbox_mode):
    token = f"wb-stop-{uuid.uuid4().hex[:8]}"
    session, _ = await open_scripted(make_ws(tmp_path), run_call(f"{sleepers(token, ignore_term=True)}"), reply("x"))
    try:
        task = asyncio.ensure_future(session.run("go"))
        await until(lambda: len(alive(token, named=True)) == 3, 15, "the command's three sleepers")
        marker = marker_of(token)
        assert marker
        started = time.monotonic()
        await session.stop()
        result = await task
        assert result.status == "aborted"
        assert time.monotonic() - started < 5
        assert alive(token) == []  # the one ignoring SIGTERM too: SIGKILL followed
        assert with_marker(marker) == []
        [out] = tool_results(session)
        assert out.startswith("Not finished")
    finally:
        await session.close()


async def test_E4_a_timeout_kills_the_command_and_every_child_and_the_run_goes_on(tmp_path, sandbox_mode):
    token = f"wb-timeout-{uuid.uuid4().hex[:8]}"
    command = f"echo started; {sleepers(token, 2, ignore_term=True)}"
    session, _ = await open_scripted(make_ws(tmp_path), run_call(command, timeout_seconds=1), reply("it hung"))
    try:
        started = time.monotonic()
        result = await session.run("go")
        assert result.status == "done" and result.answer == "it hung"  # documented: the model is told, the run goes on
        assert time.monotonic() - started < 8
        [out] = tool_results(session)
        assert out.startswith("started\n") and "timed out after 1 s" in out
        assert alive(token) == []
        finished = [e.data for e in session.store.events(session.thread_id) if e.type == "tool_call_finished"]
        assert finished[-1]["timed_out"] is True and finished[-1]["status"] == "error"
    finally:
        await session.close()


async def test_E4_what_the_shell_leaves_running_dies_when_it_exits_even_a_new_session(tmp_path, sandbox_mode):
    token = f"wb-left-{uuid.uuid4().hex[:8]}"
    command = (f"(exec -a {token} sleep 100) & setsid -f bash -c 'exec -a {token} sleep 100'; "
               f"nohup bash -c 'exec -a {token} sleep 100' >/dev/null 2>&1 & echo left")
    session, _ = await open_scripted(make_ws(tmp_path), run_call(command), reply("ok"))
    try:
        started = time.monotonic()
        await session.run("go")
        assert time.monotonic() - started < 6  # the background processes did not hold the result
        [out] = tool_results(session)
        assert out.startswith("left\n") and "[exit code 0" in out
        await until(lambda: not alive(token), 5, f"no process named {token}")
    finally:
        await session.close()


async def test_E4_a_command_keeps_running_while_another_call_asks_only_until_its_own_timeout(tmp_path, sandbox_mode):
    token = f"wb-held-{uuid.uuid4().hex[:8]}"
    ws = make_ws(tmp_path, "permissions:\n  rules:\n    - {allow: execute, command: '*'}\n")
    calls = tool_reply(("execute", {"command": f"exec -a {token} sleep 100", "timeout_seconds": 1}, "slow"),
                       ("write_file", {"path": "/project/a.txt", "content": "x"}, "asks"))
    session, _ = await open_scripted(ws, calls, reply("done"))
    try:
        started = time.monotonic()
        result = await session.run("go")
        assert result.status == "interrupted" and [q.call_id for q in result.pending] == ["asks"]
        assert 0.9 < time.monotonic() - started < 6
        assert alive(token) == []  # suspended: nothing of the command is left running
        result = await session.resume({result.pending[0].id: {"decision": "approve"}})
        assert result.status == "done"
        slow, _asks = tool_results(session)
        assert "timed out after 1 s" in slow
    finally:
        await session.close()


async def test_E4_closing_the_session_mid_command_kills_it(tmp_path, sandbox_mode):
    token = f"wb-close-{uuid.uuid4().hex[:8]}"
    session, _ = await open_scripted(make_ws(tmp_path), run_call(sleepers(token, 1)), reply("x"))
    task = asyncio.ensure_future(session.run("go"))
    await until(lambda: alive(token), 15, "the sleeper")
    await session.close()
    await task
    assert alive(token) == []


# -- E1: 10 MB of output --------------------------------------------------------------------------------------


def _store_bytes(path: Path) -> int:
    db = sqlite3.connect(path)
    try:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages = db.execute("PRAGMA page_count").fetchone()[0]
        free = db.execute("PRAGMA freelist_count").fetchone()[0]
        size = db.execute("PRAGMA page_size").fetchone()[0]
        return (pages - free) * size
    finally:
        db.close()


async def test_E1_ten_megabytes_of_output_keep_head_tail_and_a_note_and_the_store_grows_by_the_cap(tmp_path):
    cap = 30_000
    big = ("python3 -c \"import sys; w = sys.stdout.write; w('HEAD-MARK\\n'); "
           "[w('x' * 99 + '\\n') for _ in range(100_000)]; w('TAIL-MARK\\n')\"")
    ws = make_ws(tmp_path)
    session, _ = await open_scripted(ws, run_call("echo small", "s"), reply("ok"), run_call(big, "b"), reply("ok"))
    try:
        await session.run("small first")
        before = _store_bytes(session.store.path)
        tracemalloc.start()
        try:
            await session.run("then big")
            _now, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        small, out = tool_results(session)
        assert out.startswith("HEAD-MARK\n") and "TAIL-MARK\n[exit code 0" in out
        assert "characters cut here: the output was 10,000,020 characters" in out
        assert len(out) <= cap
        grown = _store_bytes(session.store.path) - before
        assert grown <= cap + 16 * 1024, grown  # the result (≤ the cap) and a step's bookkeeping, not 10 MB
        assert peak < 4 * 1024 * 1024, peak  # read through a bounded buffer, never held whole
        finished = [e.data for e in session.store.events(session.thread_id) if e.type == "tool_call_finished"]
        assert finished[-1]["output_chars"] == 10_000_020
    finally:
        await session.close()


def test_E1_the_head_and_tail_buffer_stays_bounded_and_exact():
    buf = _HeadTail(1000)
    for i in range(10_000):
        buf.add(f"{i:05d}\n")
        assert buf.head_len + buf.tail_len <= 1000 + 6
    text = buf.text()
    assert text.startswith("00000\n") and text.endswith("09999\n") and len(text) <= 1000
    small = _HeadTail(1000)
    small.add("a" * 900)
    assert small.text() == "a" * 900


# -- E3: the environment --------------------------------------------------------------------------------------


async def test_E3_env_inside_a_command_holds_no_key_and_shows_what_env_allow_names(tmp_path, monkeypatch, sandbox_mode):
    secret = "sk-live-abcdefghijklmnop1234"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_shouldnotleak0000000000000000")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-should-not-leak")
    monkeypatch.setenv("DB_PASSWORD", "hunter2-should-not-leak")
    monkeypatch.setenv("PIP_INDEX_KEY", "pip-key-should-not-leak")
    monkeypatch.setenv("PIP_INDEX_URL", "https://pypi.example/simple")
    monkeypatch.setenv("JAVA_HOME", "/opt/jdk")
    monkeypatch.setenv("UNLISTED_VAR", "not-passed")
    monkeypatch.setenv("CARRIES_THE_KEY", f"Bearer {secret}")
    ws = make_ws(tmp_path, "permissions: {default: allow}\nexecute: {env_allow: [JAVA_HOME, 'PIP_*', 'CARRIES_*']}\n")
    session, _ = await open_scripted(ws, run_call("env"), reply("ok"))
    try:
        await session.run("go")
        [out] = tool_results(session)
        env = dict(line.split("=", 1) for line in out.splitlines() if "=" in line and not line.startswith("["))
        assert env["JAVA_HOME"] == "/opt/jdk" and env["PIP_INDEX_URL"] == "https://pypi.example/simple"
        for leaked in ("OPENAI_API_KEY", "GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD", "PIP_INDEX_KEY",
                       "UNLISTED_VAR", "CARRIES_THE_KEY"):
            assert leaked not in env, leaked
        assert secret not in out and "should-not-leak" not in out and "shouldnotleak" not in out
        assert {"PATH", "HOME"} <= set(env) and env["TERM"] == "dumb"
    finally:
        await session.close()


def test_E3_an_exact_name_in_env_allow_passes_even_a_key_and_a_glob_never_does():
    environ = {"PATH": "/bin", "OPENAI_API_KEY": "sk-1234567890abcdef", "MY_TOKEN": "t", "HOME": "/h"}
    assert "OPENAI_API_KEY" not in command_env(environ, ["*"])
    assert "MY_TOKEN" not in command_env(environ, ["MY_*"])
    assert command_env(environ, ["OPENAI_API_KEY"])["OPENAI_API_KEY"] == "sk-1234567890abcdef"
    assert command_env(environ, [], marker="m")["WORKBENCH_COMMAND"] == "m"


# -- E6: live output ------------------------------------------------------------------------------------------


async def test_E6_output_streams_live_in_batches_before_the_finish_which_carries_exit_code_and_duration(tmp_path):
    command = ("python3 -c \"import time; [(print('line%d' % i, flush=True), time.sleep(0.01)) "
               "for i in range(1, 41)]\"")
    session, _ = await open_scripted(make_ws(tmp_path), run_call(command, "live"), reply("ok"))
    events: list[Any] = []
    unsubscribe = session.subscribe(events.append, replay=False)
    try:
        await session.run("go")
        outputs = [e for e in events if e.type == "command_output"]
        assert outputs and all(e.data["call_id"] == "live" for e in outputs)
        assert "".join(e.data["text"] for e in outputs) == "".join(f"line{i}\n" for i in range(1, 41))
        assert 2 <= len(outputs) < 40  # batched (~30 ms), not one event per line
        types = [e.type for e in events]
        finish = types.index("tool_call_finished")
        assert max(i for i, t in enumerate(types) if t == "command_output") < finish
        data = events[finish].data
        assert data["exit_code"] == 0 and data["duration_seconds"] >= 0.3 and data["output_chars"] == len(
            "".join(f"line{i}\n" for i in range(1, 41)))
        assert "command_output" not in {e.type for e in session.store.events(session.thread_id)}  # live only (M8)
    finally:
        unsubscribe()
        await session.close()


async def test_F4_a_known_key_a_command_prints_is_redacted_live_and_in_the_result(tmp_path, monkeypatch):
    """A command outside the sandbox can print the key file: neither the live output nor the result
    (the prompt, the store) shows a key the process knows."""
    from workbench import redact

    key = "sk-printed-by-a-command-0123456789"
    monkeypatch.setattr(redact, "_known", {key})
    command = "python3 -c \"print('key: ' + 'sk-printed-by-a-command-' + '0123456789')\""
    session, _ = await open_scripted(make_ws(tmp_path), run_call(command, "k"), reply("ok"))
    events: list[Any] = []
    unsubscribe = session.subscribe(events.append, replay=False)
    try:
        await session.run("go")
        live = "".join(e.data["text"] for e in events if e.type == "command_output")
        assert live == f"key: {redact.REDACTED}\n"
        [out] = tool_results(session)
        assert key not in out and f"key: {redact.REDACTED}" in out
    finally:
        unsubscribe()
        await session.close()


async def test_E6_a_flood_of_output_keeps_each_live_batch_bounded_and_counts_what_it_skipped(tmp_path):
    command = "python3 -c \"import sys; [sys.stdout.write('y' * 1000 + '\\n') for _ in range(3000)]\""
    session, _ = await open_scripted(make_ws(tmp_path), run_call(command), reply("ok"))
    events: list[Any] = []
    unsubscribe = session.subscribe(events.append, replay=False)
    try:
        await session.run("go")
        outputs = [e.data for e in events if e.type == "command_output"]
        assert all(len(o["text"]) <= LIVE_BATCH_CHARS for o in outputs)
        assert sum(len(o["text"]) + o["skipped"] for o in outputs) == 3000 * 1001
        assert outputs[-1]["text"].endswith("y\n")  # the newest output is what is shown
    finally:
        unsubscribe()
        await session.close()


# -- E2: permissions in a run ---------------------------------------------------------------------------------


async def test_E2_an_allowed_prefix_does_not_run_a_compound_command_it_asks_and_says_what_and_where(tmp_path,
                                                                                                   sandbox_mode):
    ws = make_ws(tmp_path, "permissions:\n  rules:\n    - {allow: execute, command: 'echo *'}\n")
    session, _ = await open_scripted(ws, run_call("echo hi && touch pwned", "c1"), reply("ok"))
    try:
        result = await session.run("go")
        assert result.status == "interrupted"
        [q] = result.pending
        p = q.payload
        assert "touch pwned" in p["reason"] and "echo hi" not in p["reason"]  # only what asked is named
        assert p["command"] == "echo hi && touch pwned" and p["folder"] == "/project"
        assert p["host_folder"] == str(ws.resolve())
        assert p["sandboxed"] is (sandbox_mode == "bubblewrap")
        assert p["sandbox"].startswith("bubblewrap — " if sandbox_mode == "bubblewrap" else "none — ")
        assert "touch *" in p["proposals"] and "echo *" in p["proposals"]
        assert p["always"] == ["allow execute touch pwned"]
        assert not (ws / "pwned").exists()
        result = await session.resume({q.id: {"decision": "reject", "message": "no"}})
        assert result.status == "done" and not (ws / "pwned").exists()
    finally:
        await session.close()


async def test_E2_a_denied_part_refuses_the_whole_command_and_nothing_of_it_runs(tmp_path):
    ws = make_ws(tmp_path, "permissions:\n  default: allow\n  rules:\n    - {deny: execute, command: 'rm *'}\n")
    session, _ = await open_scripted(ws, run_call("touch made && 'r'm -rf made"), reply("ok"))
    try:
        result = await session.run("go")
        assert result.status == "done"
        [out] = tool_results(session)
        assert out.startswith("Denied: the command `rm -rf made` matches 'deny execute rm *'")
        assert not (ws / "made").exists()  # not even the allowed first part ran
    finally:
        await session.close()


async def test_E2_always_allows_exactly_the_parts_that_asked_from_then_on(tmp_path):
    ws = make_ws(tmp_path, "model: demo\n")
    session, _ = await open_scripted(ws, run_call("echo one", "a"), reply("ok"), run_call("echo one", "b"), reply("ok"),
                                     run_call("echo two", "c"), reply("ok"))
    try:
        result = await session.run("first")
        [q] = result.pending
        result = await session.resume({q.id: {"decision": "approve", "always": "session"}})
        assert result.status == "done"
        assert (await session.run("same again")).status == "done"  # no question
        assert (await session.run("another")).status == "interrupted"  # exactly that command, not echo *
    finally:
        await session.close()


def test_E5_the_tool_description_and_workbench_run_say_whether_a_sandbox_is_on(tmp_path, monkeypatch):
    from workbench.config import load_config

    monkeypatch.setenv("WORKBENCH_SANDBOX", "off")
    mw = ExecuteMiddleware.from_config(load_config(make_ws(tmp_path)), tmp_path / "ws")
    [tool] = mw.tools()
    assert "Sandbox: none — switched off (WORKBENCH_SANDBOX=off)" in tool.description
    assert mw.sandbox_line().startswith("sandbox for commands (execute): none — switched off")


async def test_E2_P5_a_redirection_through_a_link_then_up_is_judged_where_the_kernel_writes(tmp_path):
    """``> L/../config`` with L a link to ``.git/hooks`` writes ``.git/config``: the kernel follows L
    before ``..``. The target was judged on its lexically cleaned name (``/project/config``), so a deny
    on ``.git/**`` let a workspace's own link plant git config (a review found it)."""
    ws = make_ws(tmp_path, "permissions:\n  default: ask\n  rules:\n"
                           "    - {allow: execute, command: 'echo *'}\n"
                           "    - {allow: write, path: '/project/**'}\n"
                           "    - {deny: write, path: '/project/.git/**'}\n")
    (ws / ".git" / "hooks").mkdir(parents=True)
    (ws / ".git" / "config").write_text("[core]\n")
    (ws / "L").symlink_to(ws / ".git" / "hooks")
    session, _ = await open_scripted(ws, run_call("echo planted > L/../config", "c1"),
                                     run_call("echo fine > notes/../notes.txt", "c2"), reply("ok"))
    (ws / "notes").mkdir()
    try:
        result = await session.run("go")
        assert result.status == "done", result
        first, second = tool_results(session)
        assert first.startswith("Denied:") and "/project/.git/config" in first, first
        assert (ws / ".git" / "config").read_text() == "[core]\n"
        assert "[exit code 0" in second and (ws / "notes.txt").read_text() == "fine\n"  # no link: as before
    finally:
        await session.close()
