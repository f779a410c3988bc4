"""End to end: the shell tool through the real CLI (issue 15, E1–E6) — ``workbench run`` says whether
commands run in a sandbox, ``--json`` prints the live ``command_output`` lines before the call's
``tool_call_finished`` (with the exit code), the text mode shows the exit code and duration, a compound
command under an allow rule for its first part waits for a decision, and Ctrl-C mid-command ends the run
(exit 3) with none of the command's processes left in the process table."""

from __future__ import annotations

import json
import signal
import time
import uuid
from pathlib import Path

from tests.e2e.test_cli import _communicate, check_stream, cli, env, make_workspace, running  # noqa: F401
from tests.harness.test_execute import alive
from tests.stub_server import StubReply


def execute(command: str, call_id: str = "c1") -> StubReply:
    return StubReply(tool_calls=[("execute", {"command": command}, call_id)], usage=(40, 10))


def test_E6_run_json_prints_command_output_lines_and_the_exit_code_and_says_the_sandbox(tmp_path, env, stub_server):
    ws = make_workspace(tmp_path, stub_server.url, "permissions: {default: allow}\n")
    stub_server.script(execute("echo hello; echo world >&2; exit 4"), StubReply(text="Ran it.", usage=(50, 5)))
    proc = cli(["run", "--json", "Run it"], ws, env)
    assert proc.returncode == 0, proc.stderr
    events = check_stream(proc.stdout)
    outputs = [e for e in events if e["type"] == "command_output"]
    assert outputs and all(e["call_id"] == "c1" and e["skipped"] == 0 for e in outputs)
    assert "".join(e["text"] for e in outputs) == "hello\nworld\n"
    types = [e["type"] for e in events]
    finished = next(e for e in events if e["type"] == "tool_call_finished")
    assert finished["name"] == "execute" and finished["exit_code"] == 4 and finished["duration_seconds"] >= 0
    assert types.index("tool_call_finished") > max(i for i, t in enumerate(types) if t == "command_output")
    assert "workbench: sandbox for commands (execute): " in proc.stderr
    result = [m for m in stub_server.requests[-1]["messages"] if m["role"] == "tool"][0]["content"]
    assert result.startswith("hello\nworld\n") and "[exit code 4 · " in result


def test_E5_text_mode_shows_exit_code_and_duration_and_that_no_sandbox_is_on(tmp_path, env, stub_server):
    ws = make_workspace(tmp_path, stub_server.url, "permissions: {default: allow}\n")
    stub_server.script(execute("echo hi"), StubReply(text="Done.", usage=(50, 5)))
    proc = cli(["run", "Run it"], ws, {**env, "WORKBENCH_SANDBOX": "off"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "Done."
    assert ("workbench: sandbox for commands (execute): none — switched off (WORKBENCH_SANDBOX=off); commands run "
            "with your own rights") in proc.stderr
    assert "→ execute echo hi … ok (exit 0, " in proc.stderr


def test_E2_an_allow_rule_for_the_first_part_does_not_run_a_compound_command(tmp_path, env, stub_server):
    ws = make_workspace(tmp_path, stub_server.url,
                        "permissions:\n  rules:\n    - {allow: execute, command: 'echo *'}\n")
    stub_server.script(execute("echo hi && touch pwned"), StubReply(text="never", usage=(50, 5)))
    proc = cli(["run", "--json", "Run it"], ws, env)
    assert proc.returncode == 4, proc.stderr  # waiting for a decision (no terminal)
    last = check_stream(proc.stdout)[-1]
    [q] = last["pending"]
    assert q["payload"]["command"] == "echo hi && touch pwned" and "touch pwned" in q["payload"]["reason"]
    assert not (ws / "pwned").exists()
    assert not [e for e in check_stream(proc.stdout) if e["type"] == "command_output"]


def test_E4_ctrl_c_mid_command_ends_the_run_and_leaves_no_process(tmp_path, env, stub_server):
    token = f"wb-cli-{uuid.uuid4().hex[:8]}"
    ws = make_workspace(tmp_path, stub_server.url, "permissions: {default: allow}\n")
    stub_server.script(execute(f"echo go; (exec -a {token} sleep 100) & (exec -a {token} sleep 100); wait"),
                       StubReply(text="never", usage=(50, 5)))
    with running(["run", "--json", "Sleep"], ws, env) as proc:
        deadline = time.monotonic() + 60
        while len(alive(token, named=True)) < 2 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert len(alive(token, named=True)) == 2, proc.stderr.read() if proc.poll() is not None else "not started"
        proc.send_signal(signal.SIGINT)
        out, err = _communicate(proc, 30)
    assert proc.returncode == 3, err
    assert "Traceback" not in err
    assert json.loads(out.strip().splitlines()[-1])["status"] == "aborted"
    assert alive(token) == []


def test_the_execute_benchmark_still_runs(tmp_path, env):
    """benchmarks/execute.py end to end with small figures (what is checked is that it runs, not the values)."""
    import subprocess
    import sys

    from tests.e2e.test_cli import TIMEOUT

    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, str(root / "benchmarks" / "execute.py"), "--runs", "3", "--lines", "2000",
                           "--repeat", "1"], cwd=root, env={**env, "QT_QPA_PLATFORM": "offscreen"},
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr
    assert "call < 30 ms" in done.stdout and "printing_gap_p99_ms" in done.stdout and "paced" in done.stdout
