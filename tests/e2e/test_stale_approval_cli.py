"""Two terminals resume one suspended run; the provider reuses call ids (R3, R7, Q).

Terminal B shows ``write_file /project/a.md`` (approval-call_0) and waits. Terminal A answers it; the
model's next step asks ``execute touch PWNED`` as call_0 again and A leaves it pending. B's person then
types y — for the write they were shown. That answer is bound to the write's question: the resume is
refused ("the question changed since it was shown: …"), the command never runs, and B asks again about
what the run waits on now.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.test_cli import cli, env, make_workspace  # noqa: F401 - env is a fixture
from tests.stub_server import StubReply, StubServer

TIMEOUT = 90


def _spawn(args: list[str], ws: Path, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], int]:
    master, slave = os.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "workbench", *args], cwd=ws, env=env,
                            stdin=slave, stdout=slave, stderr=slave)
    os.close(slave)
    return proc, master


def _read_until(fd: int, needle: str, seen: list[str], timeout: float = TIMEOUT) -> str:
    """Read the terminal until ``needle`` appears in what came since the last call; returns that."""
    buf = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            buf += chunk
            if needle.encode() in buf:
                break
    text = buf.decode(errors="replace")
    seen.append(text)
    assert needle in text, f"never saw {needle!r}: {text[-1500:]}"
    return text


def _drain(fd: int) -> str:
    out = b""
    while True:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if not ready:
            break
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    return out.decode(errors="replace")


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")
def test_R3_R7_an_approval_typed_for_one_call_never_runs_the_call_asked_later_under_its_id(
        tmp_path, env, stub_server: StubServer):
    """R3/R7/Q (review p5): B's y, given for ``write_file a.md``, is refused once the run waits on
    ``execute touch PWNED`` under the same id; the command never runs; B shows the new question and
    asks again; the run stays suspended on it."""
    ws = make_workspace(tmp_path, stub_server.url)
    stub_server.script(StubReply(tool_calls=[("write_file", {"path": "/project/a.md", "content": "hello\n"}, "call_0")]),
                       StubReply(tool_calls=[("execute", {"command": "touch PWNED"}, "call_0")]),
                       StubReply(text="done"), StubReply(text="done"))
    first = cli(["run", "--json", "write a.md"], ws, env)
    assert first.returncode == 4, first.stderr
    thread = json.loads(first.stdout.splitlines()[-1])["thread"]

    seen_b: list[str] = []
    b, bfd = _spawn(["resume", "--thread", thread], ws, env)
    a = afd = None
    try:
        shown_b = _read_until(bfd, "approve? [y]es", seen_b)
        assert "approval needed: write_file" in shown_b and "/project/a.md" in shown_b

        seen_a: list[str] = []
        a, afd = _spawn(["resume", "--thread", thread], ws, env)
        _read_until(afd, "approve? [y]es", seen_a)
        os.write(afd, b"y\n")
        asked_a = _read_until(afd, "approve? [y]es", seen_a)  # the next step: execute, call_0 again
        assert "approval needed: execute" in asked_a and "touch PWNED" in asked_a
        os.write(afd, b"\x04")  # Ctrl-D: leave it pending
        a.wait(timeout=TIMEOUT)
        assert a.returncode == 4, "".join(seen_a) + _drain(afd)
        assert (ws / "a.md").read_text() == "hello\n"

        os.write(bfd, b"y\n")  # B's person approves the write they were shown
        again = _read_until(bfd, "approve? [y]es", seen_b)
        assert "the question changed since it was shown: approval-call_0 (execute" in again
        assert "touch PWNED" in again and "Nothing was run" in again
        assert "approval needed: execute" in again  # asked again, about what the run waits on now
        assert not (ws / "PWNED").exists()
        os.write(bfd, b"\x04")
        b.wait(timeout=TIMEOUT)
        tail = _drain(bfd)
        assert b.returncode == 4, "".join(seen_b) + tail
        assert "Traceback" not in "".join(seen_b) + tail
    finally:
        for proc, fd in ((a, afd), (b, bfd)):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
            if fd is not None:
                os.close(fd)

    assert not (ws / "PWNED").exists()
    shown = cli(["show", thread, "--json"], ws, env)
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    finished = [(e["name"], e["status"]) for e in data["events"] if e["type"] == "tool_call_finished"]
    assert finished == [("write_file", "ok")]
    answered = [e["id"] for e in data["events"] if e["type"] == "interrupt_answered"]
    assert answered == ["approval-call_0"]  # A's answer only; B's was refused before anything was recorded
    assert data["status"] == "interrupted"
