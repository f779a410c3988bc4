"""End to end (R2): ``workbench resume`` continues a run with the model and API base ``workbench run`` was
given on its command line — real ``workbench`` processes, the loopback stub as the model.

Before, a run started with ``--model M --api-base URL`` in a workspace that names no model and then
killed (kill -9) was recovered with the defaults — the offline demo model, which went on with the run
(under ``--approve all`` it wrote notes.md into the workspace); a run suspended for a decision was
continued the same way. A record of those flags that this account did not seal (a thread store that
came with the folder) is refused, never used: its API base would receive the conversation and the key.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from tests.e2e.test_cli import check_stream, cli, env  # noqa: F401 - env is a fixture
from tests.fakes import kill_9, reap
from tests.stub_server import StubReply, StubServer


def _empty_workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws  # no workbench.yaml: no model but the flags' (the demo model otherwise)


def _flags(stub_server: StubServer) -> list[str]:
    return ["--model", "openai/test-model", "--api-base", stub_server.url]


def test_R2_resume_after_kill_9_recovers_with_the_model_and_api_base_the_run_was_started_with(
        tmp_path, env, stub_server: StubServer):
    ws = _empty_workspace(tmp_path)
    stub_server.script(StubReply(text="too late", delay=5), StubReply(text="recovered by the stub", usage=(50, 5)))
    proc = subprocess.Popen([sys.executable, "-m", "workbench", "run", "--json", *_flags(stub_server), "go"], cwd=ws,
                            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout is not None
        thread = json.loads(proc.stdout.readline())["thread"]
        deadline = time.monotonic() + 60
        while not stub_server.requests and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert stub_server.requests, "the run never called the model"
        kill_9(proc)
    finally:
        reap(proc)

    done = cli(["resume", "--thread", thread, "--json", "--approve", "all"], ws, env)
    assert done.returncode == 0, done.stderr
    last = check_stream(done.stdout)[-1]
    assert last["status"] == "done" and last["answer"] == "recovered by the stub"
    assert len(stub_server.requests) == 2  # the recovery asked the run's own model
    assert f"continuing with the model the run was started with: --model openai/test-model --api-base " \
           f"{stub_server.url}" in done.stderr
    assert sorted(p.name for p in ws.iterdir()) == [".workbench"]  # no demo notes.md


def test_R2_resume_of_a_suspended_run_answers_with_the_flags_model_and_a_later_flagless_turn_forgets_them(
        tmp_path, env, stub_server: StubServer):
    ws = _empty_workspace(tmp_path)
    stub_server.script(StubReply(tool_calls=[("write_file", {"path": "/project/a.txt", "content": "x"}, "w1")],
                                 usage=(40, 10)),
                       StubReply(text="written", usage=(50, 5)))
    first = cli(["run", "--json", *_flags(stub_server), "write it"], ws, env)
    assert first.returncode == 4, first.stderr  # waiting for the approval (no terminal)
    thread = check_stream(first.stdout)[-1]["thread"]

    done = cli(["resume", "--thread", thread, "--json", "--approve", "all"], ws, env)
    assert done.returncode == 0, done.stderr
    assert check_stream(done.stdout)[-1]["answer"] == "written"
    assert (ws / "a.txt").read_text() == "x" and len(stub_server.requests) == 2

    # a turn without flags chooses the workspace's model (here the demo): its resume must not bring the flags back
    later = cli(["run", "--thread", thread, "--json", "--approve", "none", "again"], ws, env)
    assert later.returncode in (0, 4), later.stderr
    db = sqlite3.connect(ws / ".workbench" / "threads.sqlite3")
    assert db.execute("SELECT COUNT(*) FROM command_line_models").fetchone()[0] == 0


def test_R2_a_record_of_the_flags_this_account_did_not_seal_is_refused_not_used(tmp_path, env, stub_server: StubServer):
    ws = _empty_workspace(tmp_path)
    stub_server.script(StubReply(tool_calls=[("write_file", {"path": "/project/a.txt", "content": "x"}, "w1")],
                                 usage=(40, 10)),
                       StubReply(text="never", usage=(50, 5)))
    first = cli(["run", "--json", *_flags(stub_server), "write it"], ws, env)
    assert first.returncode == 4, first.stderr
    thread = check_stream(first.stdout)[-1]["thread"]
    db = sqlite3.connect(ws / ".workbench" / "threads.sqlite3")
    with db:  # what a store that came with the folder could hold: an endpoint of someone else's choosing
        db.execute("UPDATE command_line_models SET api_base='http://127.0.0.1:9/v1'")

    done = cli(["resume", "--thread", thread, "--json", "--approve", "all"], ws, env)
    assert done.returncode == 2, done.stderr
    assert "was not made by your account" in done.stderr and "127.0.0.1:9" not in done.stderr
    assert len(stub_server.requests) == 1 and not (ws / "a.txt").exists()
