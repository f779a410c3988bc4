"""End to end: the CLI and sub-agent tasks (issue 11, D5, D7, D9) — ``workbench run`` waits for the
thread's background tasks (printing each settling) unless ``--detach``, answers their questions as
``--approve`` says, and ``workbench tasks`` lists them. The real ``python -m workbench`` as a subprocess
against the loopback stub, which answers the parent and each sub-agent by model name.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_cli import TIMEOUT, _communicate, check_stream, cli, env, no_traceback  # noqa: F401
from tests.stub_server import StubReply, StubServer

ASK = "{default: ask, rules: [{allow: invoke, tool: delegate_to_*}]}"


def workspace(tmp_path: Path, stub: StubServer, permissions: str = "{default: allow}") -> Path:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    (ws / "workbench.yaml").write_text(
        f"model: openai/parent\napi_base: {stub.url}\npermissions: {permissions}\n"
        "subagents:\n  async: true\n  max_wait_seconds: 5\n  agents:\n"
        "    - {name: researcher, description: Reads and summarises., model: openai/researcher}\n"
        "    - {name: writer, description: Writes files., model: openai/writer}\n", encoding="utf-8")
    return ws


def launch(*agents: str) -> StubReply:
    return StubReply(tool_calls=[(f"delegate_to_{a}", {"task": f"Work for {a}", "background": True}, f"call_{a}")
                                 for a in agents], usage=(40, 10))


def tasks_json(ws: Path, env: dict[str, str], *extra: str) -> list[dict[str, Any]]:
    proc = cli(["tasks", "--json", *extra], ws, env)
    assert proc.returncode == 0, proc.stderr
    return [json.loads(ln) for ln in proc.stdout.splitlines() if ln.strip()]


def test_run_waits_for_background_tasks_prints_each_settling_and_tasks_lists_them(tmp_path, env, stub_server):
    ws = workspace(tmp_path, stub_server)
    stub_server.script_for("parent", launch("researcher", "writer"), StubReply(text="Launched both.", usage=(50, 5)))
    stub_server.script_for("researcher", StubReply(text="Deep result.", delay=1.0, usage=(30, 7)))
    stub_server.script_for("writer", StubReply(status=400, text="bad request"))
    proc = cli(["run", "Launch them"], ws, env)
    no_traceback(proc)
    assert proc.returncode == 0, proc.stderr  # the run's own code: a task's failure does not change it
    assert proc.stdout.strip() == "Launched both."
    err = proc.stderr
    done = re.search(r"task (researcher:[0-9a-f]{8}) completed \(37 tokens(, \$[\d.]+)?\)", err)
    assert done, err
    failed = re.search(r"task (writer:[0-9a-f]{8}) failed \(0 tokens\): .+", err)
    assert failed, err
    assert "waiting for 2 background tasks" in err
    lines = err.strip().splitlines()
    assert lines[-1].startswith("[done] thread ")  # the settlings come before the run's last line
    thread = lines[-1].split()[2]

    listed = tasks_json(ws, env)
    by_agent = {t["agent"]: t for t in listed}
    assert by_agent["researcher"]["task_id"] == done.group(1) and by_agent["researcher"]["status"] == "completed"
    assert by_agent["researcher"]["usage"]["total_tokens"] == 37
    assert by_agent["researcher"]["parent_thread"] == thread and by_agent["researcher"]["background"] is True
    assert by_agent["writer"]["status"] == "failed" and by_agent["writer"]["error"]
    assert [t["task_id"] for t in tasks_json(ws, env, "--thread", thread)] == [t["task_id"] for t in listed]

    table = cli(["tasks"], ws, env)
    assert table.returncode == 0, table.stderr
    header, *rows = table.stdout.splitlines()
    assert header.split()[:4] == ["ID", "AGENT", "STATUS", "ELAPSED"] and "LAST TOOL" in header
    row = next(r for r in rows if r.startswith(done.group(1)))
    assert "researcher" in row and "completed" in row and " 37 " in row and "Work for researcher" in row

    bad = cli(["tasks", "--thread", "no-such-thread"], ws, env)
    assert bad.returncode == 2 and "no thread" in bad.stderr


def test_run_json_prints_task_events_before_the_one_run_finished_line(tmp_path, env, stub_server):
    ws = workspace(tmp_path, stub_server)
    stub_server.script_for("parent", launch("researcher"), StubReply(text="Launched.", usage=(50, 5)))
    stub_server.script_for("researcher", StubReply(tool_calls=[("ls", {"path": "/project"})], usage=(20, 5)),
                           StubReply(text="Listed.", delay=0.5, usage=(30, 7)))
    proc = cli(["run", "--json", "Launch it"], ws, env)
    assert proc.returncode == 0, proc.stderr
    events = check_stream(proc.stdout)  # every line an event; one run_finished, last
    types = [e["type"] for e in events]
    assert "task_started" in types and "task_settled" in types and "task_progress" in types
    settled = next(e for e in events if e["type"] == "task_settled")
    assert settled["status"] == "completed" and settled["agent"] == "researcher"
    assert settled["usage"]["total_tokens"] == 62
    assert types.index("task_settled") > types.index("task_started")
    progress = [e for e in events if e["type"] == "task_progress"]
    assert any(p["last_tool"] == "ls" for p in progress)
    assert events[-1]["status"] == "done" and "tasks_waiting" not in events[-1]


def test_detach_returns_at_once_and_resume_waits_for_the_task(tmp_path, env, stub_server):
    ws = workspace(tmp_path, stub_server)
    stub_server.script_for("parent", launch("researcher"), StubReply(text="Launched.", usage=(50, 5)))
    # The first answer is cut when the detached process exits (if its request got out at all); the
    # task's run is recovered by the next process, which gets the second.
    stub_server.script_for("researcher", StubReply(text="lost", delay=8), StubReply(text="Recovered.", usage=(30, 7)))
    proc = cli(["run", "--detach", "Launch it"], ws, env)
    assert proc.returncode == 0, proc.stderr
    assert "--detach: 1 background task not settled" in proc.stderr
    assert "waiting for" not in proc.stderr and not re.search(r"task \S+ completed", proc.stderr)
    assert "RuntimeWarning" not in proc.stderr  # the cut model call is not reported at exit
    thread = re.search(r"\[done\] thread (\S+)", proc.stderr).group(1)  # type: ignore[union-attr]
    [task] = tasks_json(ws, env)
    assert task["status"] in ("queued", "pending") and task["live"] is False  # nobody drives it now
    table = cli(["tasks"], ws, env)
    assert "pending*" in table.stdout or "queued" in table.stdout, table.stdout

    proc = cli(["resume", "--thread", thread], ws, env)  # nothing of the run left: wait for its task
    no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    assert re.search(rf"task {re.escape(task['task_id'])} completed", proc.stderr), proc.stderr
    [task] = tasks_json(ws, env)
    assert task["status"] == "completed"


def test_approve_all_answers_a_background_tasks_approval(tmp_path, env, stub_server):
    ws = workspace(tmp_path, stub_server, permissions=ASK)
    stub_server.script_for("parent", launch("writer"), StubReply(text="Launched; I go on."))
    stub_server.script_for("writer", StubReply(tool_calls=[("write_file", {"path": "/project/y.md", "content": "y"})]),
                           StubReply(text="Wrote y.md.", usage=(30, 7)))
    proc = cli(["run", "--approve", "all", "Have the writer write y.md"], ws, env)
    no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    assert (ws / "y.md").read_text() == "y"
    assert re.search(r"task writer:[0-9a-f]{8} asked: tool_approval write_file .*y\.md.* → approve", proc.stderr), \
        proc.stderr
    assert re.search(r"task writer:[0-9a-f]{8} completed", proc.stderr), proc.stderr
    [task] = tasks_json(ws, env)
    assert task["status"] == "completed"


def test_without_a_terminal_a_tasks_approval_waits_exit_4_and_resume_answers_it(tmp_path, env, stub_server):
    ws = workspace(tmp_path, stub_server, permissions=ASK)
    stub_server.script_for("parent", launch("writer", "researcher"), StubReply(text="Launched."))
    stub_server.script_for("writer", StubReply(tool_calls=[("write_file", {"path": "/project/y.md", "content": "y"})]),
                           StubReply(text="Wrote y.md."))
    stub_server.script_for("researcher", StubReply(text="Found it.", delay=1.0))
    proc = cli(["run", "--json", "Launch"], ws, env)  # --approve ask, stdin not a terminal
    no_traceback(proc)
    assert proc.returncode == 4, proc.stderr  # like an interrupted run
    events = check_stream(proc.stdout)
    last = events[-1]
    assert last["status"] == "done"  # the run itself finished; its task waits
    [waiting] = last["tasks_waiting"]
    assert waiting["agent"] == "writer" and waiting["pending"][0]["kind"] == "tool_approval"
    assert f"workbench resume --thread {last['thread']} --approve all" in last["resume"]
    # the other task settled before the command exited
    assert any(e["type"] == "task_settled" and e["agent"] == "researcher" and e["status"] == "completed"
               for e in events)
    assert not (ws / "y.md").exists()
    statuses = {t["agent"]: t["status"] for t in tasks_json(ws, env)}
    assert statuses == {"writer": "awaiting_decision", "researcher": "completed"}

    proc = cli(["resume", "--thread", last["thread"], "--approve", "all"], ws, env)
    no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    assert (ws / "y.md").read_text() == "y"
    assert re.search(r"task writer:[0-9a-f]{8} completed", proc.stderr), proc.stderr


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")
def test_approve_ask_at_a_terminal_names_the_sub_agent_and_task(tmp_path, env, stub_server):
    ws = workspace(tmp_path, stub_server, permissions=ASK)
    stub_server.script_for("parent", launch("writer"), StubReply(text="Launched."))
    stub_server.script_for("writer", StubReply(tool_calls=[("write_file", {"path": "/project/y.md", "content": "y"})]),
                           StubReply(text="Wrote y.md."))
    master, slave = os.openpty()
    try:
        proc = subprocess.Popen([sys.executable, "-m", "workbench", "run", "Launch"], cwd=ws, env=env, stdin=slave,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        os.write(master, b"y\n")  # the terminal buffers the answer until the prompt reads it
        _out, err = _communicate(proc, TIMEOUT)
    finally:
        os.close(master)
        os.close(slave)
    assert proc.returncode == 0, err
    assert re.search(r"approval needed: write_file \(sub-agent writer, task writer:[0-9a-f]{8}\)", err), err
    assert (ws / "y.md").read_text() == "y"


def held_by_an_asking_task(tmp_path: Path, stub: StubServer) -> Path:
    """A hard run budget of 1,000 tokens; the parent launches a background writer with everything left,
    which asks before writing /project/y.txt (B2, D9)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "workbench.yaml").write_text(
        f"model: openai/parent\napi_base: {stub.url}\n"
        "permissions: {default: allow, rules: [{ask: write, path: '/project/**'}]}\n"
        "budget:\n  - {scope: run, limit: {total_tokens: 1000}}\n"
        "subagents:\n  async: true\n  max_wait_seconds: 5\n  agents:\n"
        "    - {name: writer, description: Writes files., model: openai/writer}\n", encoding="utf-8")
    stub.script_for("parent", launch("writer"), StubReply(text="All written.", usage=(10, 5)))
    stub.script_for("writer", StubReply(tool_calls=[("write_file", {"path": "/project/y.txt", "content": "y"})],
                                        usage=(100, 100)),
                    StubReply(text="wrote y", usage=(50, 50)))
    return ws


def test_b2_d9_a_task_the_run_waits_for_is_answered_during_the_run_as_approve_says(tmp_path, env, stub_server):
    """B2, D8, D9: a hard run budget; the background task holds everything left and asks before writing.
    The run waits for it before its next model call — and ``--approve all`` answers the task's question
    then, during the run, not after it (which would wait on it until the task's 600 s time limit)."""
    ws = held_by_an_asking_task(tmp_path, stub_server)
    proc = cli(["run", "--approve", "all", "Write y"], ws, env, timeout=90)
    no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "All written."
    assert (ws / "y.txt").read_text() == "y"
    err = proc.stderr
    waited = err.index("budget: waiting for background task writer:")
    asked = re.search(r"task writer:[0-9a-f]{8} asked: tool_approval .* → approve", err)
    assert asked and asked.start() > waited, err
    assert err.index("[done] thread") > asked.start()


def test_b2_d9_with_no_one_to_answer_the_task_the_run_waits_for_the_run_stops_instead_of_waiting(
        tmp_path, env, stub_server):
    """B2, D9: the same, with ``--approve ask`` and no terminal: nobody can answer the task the run waits
    for, so the run stops at once, saying why, and the task's question is listed with the resume command
    (exit 3: the run was stopped) — never a wait as long as the task's 600 s time limit."""
    ws = held_by_an_asking_task(tmp_path, stub_server)
    proc = cli(["run", "Write y"], ws, env, timeout=60)
    no_traceback(proc)
    err = proc.stderr
    assert "waits for a decision no one here can give: stopping the run" in err, err
    assert proc.returncode == 3, err
    assert "workbench resume --thread" in err and not (ws / "y.txt").exists()
