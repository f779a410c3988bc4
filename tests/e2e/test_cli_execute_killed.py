"""End to end: a command whose workbench dies mid-call (E4, R9, R2) — real ``workbench`` processes, a real
shell, the process table read directly.

- ``kill -9`` of ``workbench run`` mid-command: the command's shell dies with it (its parent-death
  signal), and what the shell started — re-parented to pid 1, some of it in a session of its own — is
  ended when the cut-off call is settled: by ``workbench resume`` (the engine's recover) or by the next
  turn (``workbench run --thread``), before the model is told. Before, all of it kept running and kept
  writing in the workspace after the thread was recovered.
- SIGHUP (the terminal closed) stops the run like Ctrl-C and SIGTERM (exit 3): nothing is left running.
  Before, SIGHUP's default ended the workbench at once and the command ran on.

Without a sandbox (``WORKBENCH_SANDBOX=off``): in bubblewrap the PID namespace ends everything with
bubblewrap (``--die-with-parent``), which the marker path does not need.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from tests.e2e.test_cli import _communicate, check_stream, cli, env, make_workspace, running  # noqa: F401
from tests.harness.test_execute import alive
from tests.stub_server import StubReply, StubServer


def _wait(condition, seconds: float, what: str) -> None:  # noqa: ANN001 - a predicate
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"waited {seconds:g} s for {what}")


def _command(shell: str, kid: str) -> str:
    """A line whose shell shows ``shell`` in its command line and starts three processes named ``kid``: one
    in the background, one in a new session (``setsid``), one writing ``ticks.txt`` every 0.1 s."""
    return (f": {shell}; echo start >> log.txt; (exec -a {kid} sleep 100) & "
            f"setsid bash -c 'exec -a {kid} sleep 100' & "
            f"(exec -a {kid} bash -c 'while :; do echo tick >> ticks.txt; sleep 0.1; done') & "
            f"sleep 60; echo end >> log.txt")


def _kill_9_mid_command_then_settle(ws: Path, env: dict[str, str], shell: str, kid: str,
                                   settled_by: str) -> subprocess.CompletedProcess[str]:
    """``workbench run`` until its command (``_command``) runs, then ``kill -9``: the shell dies with it and
    what it started runs on; then the cut-off call is settled (``resume`` or a new turn), which must leave
    nothing of the command running or changing the workspace. Returns the settling command."""
    with running(["run", "--json", "go"], ws, env) as proc:
        assert proc.stdout is not None
        thread = json.loads(proc.stdout.readline())["thread"]
        _wait(lambda: len(alive(kid, named=True)) == 3 and (ws / "ticks.txt").exists(), 60, "the command's processes")
        assert alive(shell)
        proc.send_signal(signal.SIGKILL)
        _communicate(proc, 30)
    # E4: the shell has a parent-death signal: it goes with the workbench (it would have waited 60 s)
    _wait(lambda: not alive(shell), 5, "the shell to die with the workbench")
    # what it started was re-parented and runs on until the cut-off call is settled
    assert len(alive(kid, named=True)) == 3

    if settled_by == "resume":
        done = cli(["resume", "--thread", thread, "--json"], ws, env)
    else:
        done = cli(["run", "--thread", thread, "--json", "next"], ws, env)
    assert done.returncode == 0, done.stderr
    assert alive(kid) == []  # R9: settled, not run again — and nothing of it left running (E4)
    ticks = (ws / "ticks.txt").read_text()
    time.sleep(0.5)
    assert (ws / "ticks.txt").read_text() == ticks  # nothing changes the workspace any more
    assert (ws / "log.txt").read_text() == "start\n"
    return done


@pytest.mark.parametrize("settled_by", ["resume", "a new turn"])
def test_E4_R9_after_kill_9_mid_command_nothing_of_the_command_outlives_its_recovery(tmp_path, env, stub_server: StubServer,
                                                                                     settled_by: str):
    shell, kid = f"wb-shell-{uuid.uuid4().hex[:8]}", f"wb-kid-{uuid.uuid4().hex[:8]}"
    env = {**env, "WORKBENCH_SANDBOX": "off"}
    ws = make_workspace(tmp_path, stub_server.url, "permissions: {default: allow}\n")
    stub_server.script(StubReply(tool_calls=[("execute", {"command": _command(shell, kid)}, "x1")], usage=(50, 10)),
                       StubReply(text="told", usage=(60, 5)))
    done = _kill_9_mid_command_then_settle(ws, env, shell, kid, settled_by)
    assert check_stream(done.stdout)[-1]["status"] == "done"
    told = [m for m in stub_server.requests[-1]["messages"] if m["role"] == "tool"]
    assert len(told) == 1 and "may or may not have taken effect" in told[0]["content"]


@pytest.mark.parametrize("settled_by", ["resume", "a new turn"])
def test_E4_D5_after_kill_9_mid_a_sub_agents_command_nothing_of_it_outlives_the_recovery(
        tmp_path, env, stub_server: StubServer, settled_by: str):
    """The same, one level down: a foreground sub-agent runs the command. Its task was settled as cut off,
    but nothing ended what its own call left running (a review found the ticks still growing)."""
    shell, kid = f"wb-shell-{uuid.uuid4().hex[:8]}", f"wb-kid-{uuid.uuid4().hex[:8]}"
    env = {**env, "WORKBENCH_SANDBOX": "off", "WORKBENCH_MODEL_DAEMON": "0"}
    ws = make_workspace(tmp_path, stub_server.url, "permissions: {default: allow}\n"
                        "subagents:\n  agents:\n    - {name: researcher, description: Runs., model: openai/researcher}\n")
    (ws / "workbench.yaml").write_text((ws / "workbench.yaml").read_text().replace("model: openai/test-model",
                                                                                  "model: openai/parent"))
    stub_server.script_for("parent", StubReply(tool_calls=[("delegate_to_researcher", {"task": "Run it"}, "d1")],
                                               usage=(40, 10)), StubReply(text="told", usage=(40, 10)))
    stub_server.script_for("researcher", StubReply(tool_calls=[("execute", {"command": _command(shell, kid)}, "x1")],
                                                   usage=(30, 5)))
    _kill_9_mid_command_then_settle(ws, env, shell, kid, settled_by)


def test_E4_sighup_mid_command_stops_the_run_like_ctrl_c_and_leaves_no_process(tmp_path, env, stub_server):
    kid = f"wb-hup-{uuid.uuid4().hex[:8]}"
    ws = make_workspace(tmp_path, stub_server.url, "permissions: {default: allow}\n")
    command = f"echo go; (exec -a {kid} sleep 100) & setsid bash -c 'exec -a {kid} sleep 100' & (exec -a {kid} sleep 100); wait"
    stub_server.script(StubReply(tool_calls=[("execute", {"command": command}, "c1")], usage=(40, 10)),
                       StubReply(text="never", usage=(50, 5)))
    with running(["run", "--json", "Sleep"], ws, env) as proc:
        _wait(lambda: len(alive(kid, named=True)) == 3 or proc.poll() is not None, 60, "the command's sleepers")
        assert len(alive(kid, named=True)) == 3, proc.stderr.read() if proc.poll() is not None else ""
        proc.send_signal(signal.SIGHUP)
        out, err = _communicate(proc, 30)
    assert proc.returncode == 3, err  # aborted: stopped as Ctrl-C and SIGTERM stop it
    assert "Traceback" not in err
    assert json.loads(out.strip().splitlines()[-1])["status"] == "aborted"
    _wait(lambda: not alive(kid), 5, f"no process named {kid}")
