"""End to end: the installed CLI as a subprocess against the loopback stub server (DESIGN §6, issue 2).

Each test runs ``python -m workbench ...`` in a workspace whose ``workbench.yaml`` points litellm at
the stub, with HOME and the per-user folders in tmp and a fake key. stdin is not a terminal, so
``--approve ask`` (the default) suspends a run that needs a decision.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.stub_server import StubReply, StubServer

TIMEOUT = 120
EVENT_KEYS = ("type", "thread", "run", "step", "time")


# ---------------------------------------------------------------------------------------------------
# helpers


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    e = dict(os.environ)
    home = tmp_path / "home"
    home.mkdir()
    e.update(
        OPENAI_API_KEY="sk-test",
        HOME=str(home),
        WORKBENCH_CONFIG_DIR=str(tmp_path / "config"),
        WORKBENCH_DATA_DIR=str(tmp_path / "data"),
        PYTHONUNBUFFERED="1",
        PYTHONFAULTHANDLER="1",  # a hung command prints its threads on SIGABRT (``_communicate``)
    )
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_BASE", "OPENAI_BASE_URL", "WORKBENCH_DEBUG"):
        e.pop(key, None)
    return e


def make_workspace(root: Path, api_base: str, extra: str = "") -> Path:
    ws = root / "ws"
    ws.mkdir(exist_ok=True)
    (ws / "workbench.yaml").write_text(f"model: openai/test-model\napi_base: {api_base}\n{extra}", encoding="utf-8")
    return ws


@pytest.fixture
def ws(tmp_path: Path, stub_server: StubServer) -> Path:
    return make_workspace(tmp_path, stub_server.url)


def cli(args: list[str], cwd: Path, env: dict[str, str], timeout: float = TIMEOUT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "workbench", *args],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def json_lines(stdout: str) -> list[dict[str, Any]]:
    lines = [ln for ln in stdout.splitlines() if ln.strip()]
    assert lines, "no output"
    out = []
    for ln in lines:
        obj = json.loads(ln)  # every line parses
        assert isinstance(obj, dict)
        out.append(obj)
    return out


def check_stream(stdout: str) -> list[dict[str, Any]]:
    """Every line is an event with type/thread/run/step/time; exactly one run_finished, and it is last."""
    events = json_lines(stdout)
    for e in events:
        missing = [k for k in EVENT_KEYS if k not in e]
        assert not missing, f"{e} lacks {missing}"
    finished = [e for e in events if e["type"] == "run_finished"]
    assert len(finished) == 1, [e["type"] for e in events]
    last = events[-1]
    assert last["type"] == "run_finished"
    assert {"status", "thread", "usage"} <= set(last)
    assert isinstance(last["usage"], dict) and "total_tokens" in last["usage"]
    return events


def write_call(path: str = "/project/a.md", content: str = "hello from the model\n") -> StubReply:
    return StubReply(tool_calls=[("write_file", {"path": path, "content": content}, "call_w1")], usage=(50, 10))


def tool_messages(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in request["messages"] if m.get("role") == "tool"]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _communicate(proc: subprocess.Popen[Any], timeout: float) -> tuple[Any, Any]:
    """The process's output once it exits; one that hangs is made to print where each of its threads
    is (``PYTHONFAULTHANDLER``, set in ``env``, on SIGABRT) and the test fails showing it."""
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)
        try:
            _, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
        text = err.decode(errors="replace") if isinstance(err, bytes) else err
        pytest.fail(f"{proc.args} did not exit within {timeout:g} s; its threads then:\n{(text or '')[-6000:]}")


def no_traceback(proc: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout, proc.stderr


# ---------------------------------------------------------------------------------------------------
# approvals: suspend (exit 4), resume with --approve all / none


def test_run_json_suspends_for_approval_and_resume_approve_all_writes(ws, env, stub_server):
    stub_server.script(write_call())
    proc = cli(["run", "--json", "Write a.md"], ws, env)
    assert proc.returncode == 4, proc.stderr
    assert not (ws / "a.md").exists()
    events = check_stream(proc.stdout)
    last = events[-1]
    assert last["status"] == "interrupted"
    thread = last["thread"]
    assert thread and all(e["thread"] == thread for e in events)
    assert last["usage"]["calls"] == 1
    raised = [e for e in events if e["type"] == "interrupt_raised"]
    assert raised and raised[0]["kind"] == "tool_approval" and raised[0]["tool"] == "write_file"
    assert [p["kind"] for p in last["pending"]] == ["tool_approval"]
    assert f"workbench resume --thread {thread} --approve all" in proc.stderr
    assert [e["type"] for e in events][0] == "run_started"

    stub_server.script(StubReply(text="I wrote a.md.", usage=(80, 5)))
    proc = cli(["resume", "--thread", thread, "--approve", "all", "--json"], ws, env)
    assert proc.returncode == 0, proc.stderr
    assert (ws / "a.md").read_text() == "hello from the model\n"
    events = check_stream(proc.stdout)
    last = events[-1]
    assert last["status"] == "done" and last["thread"] == thread
    assert last["answer"] == "I wrote a.md."
    assert last["usage"]["calls"] == 2  # the run's usage, counted across the resume
    assert any(e["type"] == "interrupt_answered" and e["decision"] == "approve" for e in events)
    assert any(e["type"] == "tool_call_finished" and e["name"] == "write_file" and e["status"] == "ok" for e in events)
    assert "".join(e["text"] for e in events if e["type"] == "model_delta") == "I wrote a.md."
    # the model's next request carries the tool's success
    assert len(stub_server.requests) == 2
    results = tool_messages(stub_server.requests[1])
    assert len(results) == 1 and results[0]["tool_call_id"] == "call_w1"
    assert "rejected" not in results[0]["content"].lower()


def test_approve_none_tells_the_model_it_was_rejected(ws, env, stub_server):
    stub_server.script(write_call(), StubReply(text="Understood, I will not write it."))
    proc = cli(["run", "--approve", "none", "--json", "Write a.md"], ws, env)
    assert proc.returncode == 0, proc.stderr
    assert not (ws / "a.md").exists()
    events = check_stream(proc.stdout)
    assert events[-1]["status"] == "done"
    assert any(e["type"] == "interrupt_answered" and e["decision"] == "reject" for e in events)
    assert len(stub_server.requests) == 2
    results = tool_messages(stub_server.requests[1])
    assert len(results) == 1
    assert "rejected by --approve none" in results[0]["content"]


def test_resume_approve_none_after_suspension(ws, env, stub_server):
    stub_server.script(write_call())
    first = cli(["run", "--json", "Write a.md"], ws, env)
    assert first.returncode == 4, first.stderr
    thread = json_lines(first.stdout)[-1]["thread"]
    stub_server.script(StubReply(text="Fine."))
    proc = cli(["resume", "--thread", thread, "--approve", "none"], ws, env)
    assert proc.returncode == 0, proc.stderr
    assert not (ws / "a.md").exists()
    assert "rejected by --approve none" in tool_messages(stub_server.requests[-1])[0]["content"]


def test_text_mode_streams_the_answer_and_reports_tools_and_usage(ws, env, stub_server):
    stub_server.script(write_call(), StubReply(text="All done: a.md is written.", chunks=4, usage=(90, 7)))
    proc = cli(["run", "--approve", "all", "Write a.md"], ws, env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "All done: a.md is written."
    assert "→ write_file /project/a.md … ok" in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("[done] thread ")
    assert "2 model calls" in last and "tokens" in last
    assert (ws / "a.md").exists()


def test_text_mode_without_terminal_suspends_and_says_how_to_resume(ws, env, stub_server):
    stub_server.script(write_call())
    proc = cli(["run", "Write a.md"], ws, env)
    assert proc.returncode == 4, proc.stderr
    assert "needs approval" in proc.stderr
    assert "[interrupted] thread " in proc.stderr
    assert "workbench resume --thread " in proc.stderr and "--approve all" in proc.stderr
    assert not (ws / "a.md").exists()


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")
def test_approve_ask_at_a_terminal_prompts(ws, env, stub_server):
    stub_server.script(write_call(), StubReply(text="Written."))
    master, slave = os.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "workbench", "run", "Write a.md"],
            cwd=ws, env=env, stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        os.write(master, b"y\n")  # the terminal buffers the answer until the prompt reads it
        out, err = _communicate(proc, TIMEOUT)
    finally:
        os.close(master)
        os.close(slave)
    assert proc.returncode == 0, err
    assert "approval needed: write_file" in err and "approve? [y]es / [n]o / [a]lways" in err
    assert (ws / "a.md").exists()
    assert out.strip() == "Written."


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")
@contextlib.contextmanager
def _resume_at_its_prompt(ws: Path, env: dict[str, str], stub_server: StubServer) -> Iterator[tuple[subprocess.Popen[bytes], str, bytes]]:
    """A run suspended for approval, then `workbench resume` on a terminal (a pty) showing its
    approval prompt: yields the process, the thread and the stderr seen so far."""
    import select

    stub_server.script(write_call())
    first = cli(["run", "--json", "Write a.md"], ws, env)
    assert first.returncode == 4, first.stderr
    thread = json_lines(first.stdout)[-1]["thread"]
    master, slave = os.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "workbench", "resume", "--thread", thread],
            cwd=ws, env=env, stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        assert proc.stderr is not None
        seen = b""
        deadline = time.monotonic() + TIMEOUT
        while b"approve?" not in seen and time.monotonic() < deadline and proc.poll() is None:
            ready, _, _ = select.select([proc.stderr], [], [], 0.5)
            if ready:
                seen += os.read(proc.stderr.fileno(), 65536)
        assert b"approve?" in seen, seen
        yield proc, thread, seen
    finally:
        os.close(master)
        os.close(slave)


def _left_suspended(proc: subprocess.Popen[bytes], err: str, thread: str, ws: Path, stub_server: StubServer) -> None:
    assert proc.returncode == 4, err
    assert "Traceback" not in err
    assert f"workbench resume --thread {thread}" in err
    assert not (ws / "a.md").exists()
    assert len(stub_server.requests) == 1


def test_ctrl_c_at_the_approval_prompt_leaves_the_run_suspended(ws, env, stub_server):
    """`resume` at a terminal prompts before any run starts; Ctrl-C there keeps the run suspended."""
    with _resume_at_its_prompt(ws, env, stub_server) as (proc, thread, seen):
        proc.send_signal(signal.SIGINT)
        _, rest = _communicate(proc, 30)
    _left_suspended(proc, (seen + rest).decode(), thread, ws, stub_server)


def test_always_at_the_prompt_saves_what_it_says_and_the_next_call_is_asked(ws, env, stub_server):
    """P3/Q3: "always" at the terminal saves the exact rules the prompt names for the session; a later
    call they do not cover is asked, not approved in silence (a review found "[a]lways for this tool"
    approving `touch PWNED` after `echo harmless`, and a write under an ask rule after another write)."""
    import select

    (ws / "workbench.yaml").write_text((ws / "workbench.yaml").read_text() + (
        "permissions:\n  rules:\n    - {ask: execute, command: 'touch *'}\n"
        "    - {ask: write, path: '/project/secret/**'}\n"), encoding="utf-8")
    stub_server.script(StubReply(tool_calls=[("execute", {"command": "echo harmless"}, "c1")]),
                       StubReply(tool_calls=[("execute", {"command": "touch PWNED"}, "c2")]),
                       StubReply(tool_calls=[("write_file", {"path": "/project/ok.txt", "content": "x"}, "c3")]),
                       StubReply(tool_calls=[("write_file", {"path": "/project/secret/key.txt", "content": "o"}, "c4")]),
                       StubReply(text="done"))
    master, slave = os.openpty()
    try:
        proc = subprocess.Popen([sys.executable, "-m", "workbench", "run", "go"], cwd=ws, env=env,
                                stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert proc.stderr is not None
        seen, prompts = b"", 0
        answers = [b"a\n", b"n\n", b"\n", b"a\n", b"n\n", b"\n"]  # "n" asks for a reason: Enter
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline and proc.poll() is None:
            ready, _, _ = select.select([proc.stderr], [], [], 0.5)
            if ready:
                seen += os.read(proc.stderr.fileno(), 65536)
            asked = seen.count(b"approve? [y]es") + seen.count(b"reason for the model")
            while prompts < asked and answers:
                os.write(master, answers.pop(0))
                prompts += 1
        _, rest = _communicate(proc, 60)
    finally:
        os.close(master)
        os.close(slave)
    err = (seen + rest).decode()
    assert proc.returncode == 0, err
    assert err.count("approve? [y]es") == 4, err  # every call asked; none approved unseen
    assert "always saves: allow execute echo harmless" in err
    assert not (ws / "PWNED").exists() and not (ws / "secret" / "key.txt").exists()
    assert (ws / "ok.txt").read_text() == "x"


_TGKILL = {"x86_64": 234, "aarch64": 131}.get(os.uname().machine if hasattr(os, "uname") else "")


@pytest.mark.skipif(not sys.platform.startswith("linux") or _TGKILL is None, reason="tgkill: Linux x86_64/aarch64")
def test_ctrl_c_that_lands_on_another_thread_still_ends_the_prompt(ws, env, stub_server):
    """The kernel may hand a process's SIGINT to any thread (once in CI: `resume` sat at its prompt
    after Ctrl-C and printed nothing). Sent here to each of the command's other threads: the prompt
    still ends, the run stays suspended, and the command says how to resume."""
    import ctypes

    with _resume_at_its_prompt(ws, env, stub_server) as (proc, thread, seen):
        others = [int(t) for t in os.listdir(f"/proc/{proc.pid}/task") if int(t) != proc.pid]
        assert others, "the command has no other thread to receive the signal"
        libc = ctypes.CDLL(None, use_errno=True)
        for tid in others:  # one of them is enough; a thread that has ended meanwhile is skipped
            libc.syscall(_TGKILL, proc.pid, tid, signal.SIGINT)
        _, rest = _communicate(proc, 30)
    _left_suspended(proc, (seen + rest).decode(), thread, ws, stub_server)


# ---------------------------------------------------------------------------------------------------
# configuration and usage errors: exit 2, one line, no traceback


@pytest.mark.parametrize(
    ("yaml_text", "line", "key"),
    [
        ("model: openai/test-model\nmax_prompt_section_tokens: lots\n", 2, "max_prompt_section_tokens"),
        ("model: openai/test-model\n\nmodle: x\n", 3, "modle"),
        ("permissions:\n  default: ask\n  rules:\n    - {allow: write, paht: /x}\n", 4, "paht"),
    ],
)
def test_bad_workbench_yaml_exits_2_naming_file_line_and_key(tmp_path, env, yaml_text, line, key):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "workbench.yaml").write_text(yaml_text, encoding="utf-8")
    for args in (["run", "hello"], ["run", "--json", "hello"]):
        proc = cli(args, ws, env)
        assert proc.returncode == 2, (args, proc.stderr)
        no_traceback(proc)
        errors = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        assert len(errors) == 1, proc.stderr
        assert f"workbench.yaml:{line}" in errors[0] and key in errors[0]
    assert not (ws / "a.md").exists()


def test_usage_errors_exit_2(tmp_path, ws, env, stub_server):
    assert cli(["run", "--approve", "sometimes", "x"], ws, env).returncode == 2
    assert cli(["run"], ws, env).returncode == 2  # PROMPT missing
    assert cli(["resume"], ws, env).returncode == 2  # --thread missing
    assert cli(["frobnicate"], ws, env).returncode == 2
    proc = cli(["run", "--workspace", str(tmp_path / "missing"), "x"], ws, env)
    assert proc.returncode == 2 and "not a folder" in proc.stderr
    proc = cli(["show", "nosuchthread"], ws, env)
    assert proc.returncode == 2 and "nosuchthread" in proc.stderr
    no_traceback(proc)
    proc = cli(["run", "--thread", "nosuchthread", "x"], ws, env)
    assert proc.returncode == 2 and "nosuchthread" in proc.stderr
    assert stub_server.requests == []


def test_resume_with_nothing_pending_exits_2(ws, env, stub_server):
    stub_server.script(StubReply(text="Hello."))
    proc = cli(["run", "--json", "Say hello"], ws, env)
    assert proc.returncode == 0, proc.stderr
    thread = json_lines(proc.stdout)[-1]["thread"]
    proc = cli(["resume", "--thread", thread, "--approve", "all"], ws, env)
    assert proc.returncode == 2
    assert "nothing to resume" in proc.stderr and "done" in proc.stderr
    no_traceback(proc)
    assert len(stub_server.requests) == 1


def test_run_on_a_thread_waiting_for_decisions_exits_2(ws, env, stub_server):
    stub_server.script(write_call())
    first = cli(["run", "--json", "Write a.md"], ws, env)
    thread = json_lines(first.stdout)[-1]["thread"]
    proc = cli(["run", "--thread", thread, "something else"], ws, env)
    assert proc.returncode == 2
    assert "workbench resume --thread " + thread in proc.stderr
    assert len(stub_server.requests) == 1


def test_model_and_api_base_flags_override_workbench_yaml(tmp_path, env, stub_server):
    ws = make_workspace(tmp_path, f"http://127.0.0.1:{closed_port()}/v1")
    stub_server.script(StubReply(text="Overridden."))
    proc = cli(["run", "--json", "--model", "openai/other-model", "--api-base", stub_server.url, "hi"], ws, env)
    assert proc.returncode == 0, proc.stderr
    assert stub_server.requests[0]["model"] == "other-model"
    assert json_lines(proc.stdout)[-1]["answer"] == "Overridden."


# ---------------------------------------------------------------------------------------------------
# provider failures: exit 1, one clear line, no traceback


def _failed(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 1, proc.stderr
    no_traceback(proc)
    last = check_stream(proc.stdout)[-1]
    assert last["status"] == "failed" and last["error"]
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    return lines[0]


def test_provider_401_names_the_key(ws, env, stub_server):
    stub_server.script(StubReply(status=401))
    line = _failed(cli(["run", "--json", "hi"], ws, env))
    assert "API key" in line and "OPENAI_API_KEY" in line
    assert "sk-test" not in line


def test_provider_404_says_unknown_model(ws, env, stub_server):
    stub_server.script(StubReply(status=404))
    line = _failed(cli(["run", "--json", "hi"], ws, env))
    assert "unknown model" in line and "openai/test-model" in line


def test_provider_500_repeated_fails_after_retries(ws, env, stub_server):
    stub_server.script(*[StubReply(status=500)] * 4)
    line = _failed(cli(["run", "--json", "hi"], ws, env))
    assert "server error" in line and "500" in line
    assert len(stub_server.requests) == 4  # the first try and three retries


def test_refused_connection_names_the_address(tmp_path, env):
    port = closed_port()
    ws = make_workspace(tmp_path, f"http://127.0.0.1:{port}/v1")
    line = _failed(cli(["run", "--json", "hi"], ws, env))
    assert f"127.0.0.1:{port}" in line and "refused" in line


def test_text_mode_failure_is_one_line_plus_status(ws, env, stub_server):
    stub_server.script(StubReply(status=401))
    proc = cli(["run", "hi"], ws, env)
    assert proc.returncode == 1
    no_traceback(proc)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 2 and "API key" in lines[0] and lines[1].startswith("[failed] thread ")


# ---------------------------------------------------------------------------------------------------
# a killed process, Ctrl-C


@contextlib.contextmanager
def running(args: list[str], ws: Path, env: dict[str, str]) -> Iterator[subprocess.Popen[str]]:
    """The CLI started in the background; killed (if still alive) and reaped on the way out."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "workbench", *args],
        cwd=ws, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    watchdog = threading.Timer(TIMEOUT, proc.kill)  # a blocked read of its output must not hang the suite
    watchdog.daemon = True
    watchdog.start()
    try:
        yield proc
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def _wait_for_model_call(proc: subprocess.Popen[str], stub_server: StubServer) -> dict[str, Any]:
    """Read JSON lines until step_started, then wait until the stub holds the model request."""
    assert proc.stdout is not None
    first: dict[str, Any] = {}
    for raw in proc.stdout:
        event = json.loads(raw)
        first = first or event
        if event["type"] == "step_started":
            break
    else:
        pytest.fail(f"the run ended early: {proc.stderr.read() if proc.stderr else ''}")
    deadline = time.monotonic() + 60
    while not stub_server.requests and time.monotonic() < deadline:
        time.sleep(0.05)
    assert stub_server.requests, "the model was never called"
    time.sleep(0.2)
    return first


def test_killed_mid_run_reopens_at_checkpoint_and_resume_recovers(ws, env, stub_server):
    stub_server.script(StubReply(text="never delivered", delay=8), StubReply(text="Recovered answer."))
    with running(["run", "--json", "Slow question"], ws, env) as proc:
        first = _wait_for_model_call(proc, stub_server)
        thread = first["thread"]
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    assert proc.returncode == -signal.SIGKILL

    listed = cli(["threads", "--json"], ws, env)
    assert listed.returncode == 0, listed.stderr
    rows = json_lines(listed.stdout)
    assert [r["id"] for r in rows] == [thread]
    assert rows[0]["status"] == "failed"  # R9: cut off in flight, its process is gone (it used to list "running")
    text = cli(["threads"], ws, env)
    assert thread in text.stdout and "Slow question" in text.stdout

    shown = cli(["show", thread, "--json"], ws, env)
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert [m["role"] for m in data["messages"]] == ["user"]
    assert data["messages"][0]["content"] == "Slow question"
    assert any(e["type"] == "run_started" for e in data["events"])
    assert not any(e["type"] == "run_finished" for e in data["events"])

    proc2 = cli(["resume", "--thread", thread, "--json"], ws, env)
    assert proc2.returncode == 0, proc2.stderr
    events = check_stream(proc2.stdout)
    assert events[-1]["status"] == "done" and events[-1]["answer"] == "Recovered answer."
    assert events[-1]["thread"] == thread and events[-1]["run"] == first["run"]  # the same run, finished
    last_request = stub_server.requests[-1]
    assert [m["content"] for m in last_request["messages"] if m["role"] == "user"] == ["Slow question"]

    data = json.loads(cli(["show", thread, "--json"], ws, env).stdout)
    assert data["status"] == "done"
    assert [m["role"] for m in data["messages"]] == ["user", "assistant"]


def test_ctrl_c_mid_run_stops_it_aborted_exit_3(ws, env, stub_server):
    stub_server.script(StubReply(text="too late", delay=8))
    with running(["run", "--json", "Slow question"], ws, env) as proc:
        _wait_for_model_call(proc, stub_server)
        proc.send_signal(signal.SIGINT)
        out, err = _communicate(proc, 30)
    assert proc.returncode == 3, err
    assert "Traceback" not in err
    last = json.loads(out.strip().splitlines()[-1])
    assert last["type"] == "run_finished" and last["status"] == "aborted"


# ---------------------------------------------------------------------------------------------------
# threads and show


def test_threads_and_show_outputs(ws, env, stub_server):
    empty = cli(["threads"], ws, env)
    assert empty.returncode == 0 and "no threads" in empty.stderr
    assert not (ws / ".workbench").exists()  # listing created nothing

    stub_server.script(write_call(), StubReply(text="Done writing.", usage=(70, 4)))
    run = cli(["run", "--approve", "all", "--json", "Write the notes file"], ws, env)
    assert run.returncode == 0, run.stderr
    thread = json_lines(run.stdout)[-1]["thread"]

    listed = cli(["threads"], ws, env)
    assert listed.returncode == 0
    header, *rows = listed.stdout.strip().splitlines()
    assert header.split() == ["ID", "UPDATED", "STATUS", "TITLE"]
    assert len(rows) == 1
    assert rows[0].startswith(thread) and " done " in rows[0] and rows[0].endswith("Write the notes file")
    assert len(json_lines(cli(["threads", "--json"], ws, env).stdout)) == 1  # listing left no thread behind

    shown = cli(["show", thread], ws, env)
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    assert f"thread {thread} · Write the notes file · done" in out
    assert "user: Write the notes file" in out
    assert "→ write_file" in out and "/project/a.md" in out
    assert "assistant: Done writing." in out
    assert "usage: 2 model calls" in out
    assert "artifacts (0)" in out and "todos (0)" in out
    for kind in ("run_started", "tool_call_finished", "interrupt_answered", "run_finished"):
        assert kind in out

    data = json.loads(cli(["show", thread, "--json", "--workspace", str(ws)], ws.parent, env).stdout)
    assert data["thread"] == thread and data["status"] == "done" and data["title"] == "Write the notes file"
    assert [m["role"] for m in data["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert data["usage"]["calls"] == 2 and data["usage"]["input_tokens"] == 120
    assert data["todos"] == [] and data["artifacts"] == [] and data["pending"] == []
    types = [e["type"] for e in data["events"]]
    assert types[0] == "run_started" and types[-1] == "run_finished"
    assert "model_delta" not in types  # durable events only
    for e in data["events"]:
        assert all(k in e for k in EVENT_KEYS)


def test_show_lists_artifacts_with_sizes(ws, env, stub_server):
    stub_server.script(
        StubReply(tool_calls=[("write_artifact", {"name": "report.md", "content": "# Report\n"}, "call_a1")]),
        StubReply(text="Kept a report."),
    )
    run = cli(["run", "--approve", "all", "--json", "Keep a report"], ws, env)
    assert run.returncode == 0, run.stderr
    thread = json_lines(run.stdout)[-1]["thread"]
    data = json.loads(cli(["show", thread, "--json"], ws, env).stdout)
    assert [(a["name"], a["size"]) for a in data["artifacts"]] == [("report.md", 9)]
    assert "report.md  (9 bytes)" in cli(["show", thread], ws, env).stdout


# ---------------------------------------------------------------------------------------------------
# budgets (issue 5): holds suspend (exit 4) and --budget-approve decides; a stop exits 3

BUDGET_HOLD = "budget:\n  - {scope: run, limit: {total_tokens: 100}, interrupt: true}\n" \
              "permissions:\n  rules:\n    - {allow: read, path: \"/**\"}\n    - {allow: write, path: \"/project/**\"}\n"
BUDGET_STOP = "budget:\n  - {scope: run, limit: {total_tokens: 100}}\n" \
              "permissions:\n  rules:\n    - {allow: read, path: \"/**\"}\n    - {allow: write, path: \"/project/**\"}\n"


def test_budget_hold_suspends_and_budget_approve_yes_finishes(tmp_path, env, stub_server):
    ws = make_workspace(tmp_path, stub_server.url, BUDGET_HOLD)
    stub_server.script(StubReply(tool_calls=[("ls", {"path": "/project"}, "call_l1")], usage=(150, 10)))
    proc = cli(["run", "--json", "--approve", "all", "List the project"], ws, env)
    assert proc.returncode == 4, proc.stderr
    last = check_stream(proc.stdout)[-1]
    assert last["status"] == "interrupted"
    assert [p["kind"] for p in last["pending"]] == ["budget_hold"]
    assert "--budget-approve yes" in proc.stderr

    stub_server.script(StubReply(text="Listed.", usage=(20, 2)))
    proc = cli(["resume", "--thread", last["thread"], "--budget-approve", "yes", "--json"], ws, env)
    assert proc.returncode == 0, proc.stderr
    assert check_stream(proc.stdout)[-1]["answer"] == "Listed."


def test_budget_hold_refused_with_budget_approve_no_exits_3(tmp_path, env, stub_server):
    ws = make_workspace(tmp_path, stub_server.url, BUDGET_HOLD)
    stub_server.script(StubReply(text="Let me look. ", tool_calls=[("ls", {"path": "/project"}, "call_l1")],
                                 usage=(150, 10)))
    proc = cli(["run", "--json", "--budget-approve", "no", "List the project"], ws, env)
    assert proc.returncode == 3, proc.stderr
    last = check_stream(proc.stdout)[-1]
    assert last["status"] == "aborted"
    assert len(stub_server.requests) == 1


def test_budget_exceeded_without_interrupt_exits_3(tmp_path, env, stub_server):
    ws = make_workspace(tmp_path, stub_server.url, BUDGET_STOP)
    stub_server.script(StubReply(text="Partial so far. ", tool_calls=[("ls", {"path": "/project"}, "call_l1")],
                                 usage=(150, 10)))
    proc = cli(["run", "--json", "List the project"], ws, env)
    assert proc.returncode == 3, proc.stderr
    events = check_stream(proc.stdout)
    assert events[-1]["status"] == "aborted"
    exceeded = [e for e in events if e["type"] == "budget_exceeded"]
    assert exceeded and exceeded[0]["field"] == "total_tokens"
    assert exceeded[0]["spent"] == 160 and exceeded[0]["limit"] == 100
    assert events[-1]["answer"] == "Partial so far. "  # B2: the partial answer is kept
    assert len(stub_server.requests) == 1


def test_run_budget_counts_across_a_resume(tmp_path, env, stub_server):
    """B1: a run-scope budget sees what the run spent before it was suspended for an approval."""
    ws = make_workspace(tmp_path, stub_server.url, "budget:\n  - {scope: run, limit: {total_tokens: 200}}\n")
    stub_server.script(StubReply(tool_calls=[("write_file", {"path": "/project/a.txt", "content": "a"}, "c1")],
                                 usage=(150, 10)))
    proc = cli(["run", "--json", "Write a"], ws, env)
    assert proc.returncode == 4, proc.stderr
    thread = check_stream(proc.stdout)[-1]["thread"]
    stub_server.script(StubReply(tool_calls=[("ls", {"path": "/project"}, "c2")], usage=(50, 10)),
                       StubReply(text="never asked"))
    proc = cli(["resume", "--thread", thread, "--approve", "all", "--json"], ws, env)
    # 160 before the suspension + 60 after = 220 >= 200: the third call is never made
    assert proc.returncode == 3, proc.stderr
    exceeded = [e for e in check_stream(proc.stdout) if e["type"] == "budget_exceeded"]
    assert exceeded[0]["spent"] == 220
    assert len(stub_server.requests) == 2 and (ws / "a.txt").read_text() == "a"


def test_session_budget_with_interrupt_is_a_config_error(tmp_path, env, stub_server):
    ws = make_workspace(tmp_path, stub_server.url,
                        "budget:\n  - {scope: session, limit: {cost_usd: 5}, interrupt: true}\n")
    proc = cli(["run", "--json", "hello"], ws, env)
    assert proc.returncode == 2
    assert "workbench.yaml:4" in proc.stderr and "budget[0].interrupt" in proc.stderr
    assert "Traceback" not in proc.stderr and stub_server.requests == []
