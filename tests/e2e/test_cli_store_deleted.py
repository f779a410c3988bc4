"""End to end (R1, F4): the agent's shell command deletes the workspace's ``.workbench/`` mid-run.

F4 keeps ``.workbench/`` from the file tools, but a command run outside a sandbox can still
``rm -rf .workbench``. Before this was handled the next checkpoints went into the deleted database,
``workbench run`` exited 0 and the thread was gone. Now the run fails (exit 1) with an error naming the
store and saying the database was put back at its path, and the thread — its history — is there for
``threads``, ``show`` and ``resume``, which recovers the run and goes on with its next step.
"""

from __future__ import annotations

import json

from tests.e2e.test_cli import check_stream, cli, env, make_workspace, no_traceback  # noqa: F401
from tests.stub_server import StubReply


def execute(command: str, call_id: str) -> StubReply:
    return StubReply(tool_calls=[("execute", {"command": command}, call_id)], usage=(40, 10))


def test_R1_F4_rm_rf_workbench_in_a_command_fails_the_run_and_the_thread_is_recovered(tmp_path, env, stub_server):
    ws = make_workspace(tmp_path, stub_server.url, "permissions: {default: allow}\n")
    env = {**env, "WORKBENCH_SANDBOX": "off"}  # a sandbox would show the command an empty .workbench/
    store = ws / ".workbench" / "threads.sqlite3"
    stub_server.script(execute("rm -rf .workbench && echo removed", "c1"),
                       execute("echo the next step", "c2"),
                       StubReply(text="All done.", usage=(50, 5)))

    proc = cli(["run", "--json", "--approve", "all", "Clean up"], ws, env)
    assert proc.returncode == 1, proc.stderr  # the failed-run exit code
    no_traceback(proc)
    events = check_stream(proc.stdout)
    last = events[-1]
    thread = last["thread"]
    assert last["status"] == "failed"
    assert str(store) in last["error"] and "deleted" in last["error"] and "put back at that path" in last["error"]
    assert any(e["type"] == "run_error" and "put back at" in e["error"] for e in events)
    assert len(stub_server.requests) == 1  # no step ran after the one that found the store gone
    assert store.is_file()

    # The thread and its history are where the message says, for a later process.
    listed = cli(["threads", "--json"], ws, env)
    assert listed.returncode == 0, listed.stderr
    assert thread in listed.stdout
    shown = cli(["show", thread], ws, env)
    assert shown.returncode == 0, shown.stderr
    assert "Clean up" in shown.stdout

    # `resume` recovers the failed run: the command is not run again (R9), the next step runs.
    again = cli(["resume", "--json", "--approve", "all", "--thread", thread], ws, env)
    assert again.returncode == 0, again.stderr
    assert check_stream(again.stdout)[-1]["status"] == "done"
    assert [e["call_id"] for e in json_events(again.stdout) if e["type"] == "tool_call_finished"] == ["c2"]
    tool_results = [m["content"] for m in stub_server.requests[1]["messages"] if m["role"] == "tool"]
    assert len(tool_results) == 1 and "put back at" in tool_results[0]  # the cut call says what happened
    assert store.is_file() and not list(store.parent.glob("recovered-*"))  # put back, not saved beside


def json_events(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]
