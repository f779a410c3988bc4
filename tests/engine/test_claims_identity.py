"""R7: who holds a claim, told by the holder's identity — boot, PID and time namespaces, its own start
time in clock ticks — never by the wall clock or the host name alone (engine/store_claims.py).

Two "processes" are two ``Store`` objects on one file, or real subprocesses where the requirement is
about processes: a holder whose clock was stepped forward after it claimed (a sitecustomize puts its
``time.time()`` behind the host's), and a holder in its own PID namespace (``unshare -p``; skipped where
it is not permitted). The same test decides a sub-agent task's owner (D5, harness/task_recovery.py).
"""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fakes import alive
from workbench.engine import store_claims
from workbench.engine.store import Store
from workbench.errors import ThreadBusyError

LINUX = os.path.exists("/proc/self/stat") and os.path.exists("/proc/sys/kernel/random/boot_id")
needs_proc = pytest.mark.skipif(not LINUX, reason="process identities are read from /proc (Linux)")

HANG = """
import asyncio, sys
from workbench.engine.agent import Agent, Engine
from workbench.engine.models.scripted import ScriptedModel
from workbench.engine.store import Store

class Hang(ScriptedModel):
    async def stream(self, request):
        print("waiting", flush=True)
        await asyncio.Event().wait()
        yield None

engine = Engine(Agent(Hang([]), instructions="B"), Store.for_workspace(sys.argv[1]))
asyncio.run(engine.run("t", "go"))
"""

#: Puts this process's wall clock ``WB_CLOCK_BEHIND`` seconds behind the host's: the clock was stepped
#: forward that much after it claimed (NTP, a VM resumed).
CLOCK_BEHIND = """
import os, time
_behind = float(os.environ.get("WB_CLOCK_BEHIND", "0"))
if _behind:
    _real = time.time
    time.time = lambda: _real() - _behind
"""


def _ticks(pid: int | str = "self") -> int:
    stat = Path(f"/proc/{pid}/stat").read_bytes()
    return int(stat[stat.rindex(b")") + 2:].split()[19])


def _scope() -> str:
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    pid_ns = os.stat("/proc/self/ns/pid").st_ino
    try:
        time_ns = os.stat("/proc/self/ns/time").st_ino
    except OSError:
        time_ns = 0
    return f"{boot}/{pid_ns}/{time_ns}"


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(done.stdout)


def _write_claim(store: Store, thread: str, *, pid: int, since: float, heartbeat: float,
                 process: str | None, host: str | None = None, token: str = "tok") -> None:
    """A claims row as another process would have left it (``process``: its identity; None: a row of an
    older workbench, which records none)."""
    with store.transaction() as db:
        db.execute("CREATE TABLE IF NOT EXISTS claim_processes (thread_id TEXT PRIMARY KEY, token TEXT NOT NULL, "
                   "process TEXT NOT NULL)")
        db.execute("DELETE FROM claims WHERE thread_id=?", (thread,))
        db.execute("DELETE FROM claim_processes WHERE thread_id=?", (thread,))
        db.execute("INSERT INTO claims(thread_id, token, pid, host, since, heartbeat) VALUES (?,?,?,?,?,?)",
                   (thread, token, pid, host or socket.gethostname(), since, heartbeat))
        if process is not None:
            db.execute("INSERT INTO claim_processes(thread_id, token, process) VALUES (?,?,?)", (thread, token, process))


def _other(tmp_path: Path) -> Store:
    """Another process's connection to the workspace's store."""
    return Store.for_workspace(tmp_path)


# -- the wall clock never decides (issue: a forward clock step) ---------------------------------------------
@needs_proc
def test_R7_a_clock_stepped_forward_after_the_claim_never_makes_the_live_holder_look_gone(tmp_path):
    """The holder's claim reads as made long before its process seems to have started (the clock moved
    forward 30 days since): its pid still runs with the start ticks it recorded, so it holds the thread."""
    holder = Store.for_workspace(tmp_path)
    claim = holder.claim("t")
    with holder.transaction() as db:
        db.execute("UPDATE claims SET since=since-?, heartbeat=heartbeat-? WHERE thread_id='t'", (30 * 86400,) * 2)
    other = _other(tmp_path)
    assert other.holder("t") is not None
    with pytest.raises(ThreadBusyError, match=rf"in flight in this process \(process {os.getpid()} on "):
        other.claim("t")
    holder.release(claim)
    assert other.holder("t") is None


@needs_proc
def test_R7_a_real_holder_whose_clock_was_stepped_forward_keeps_its_thread(tmp_path):
    """A real run whose ``time.time()`` is 120 s behind the host's (as after a forward step): another
    process's run on its thread is refused naming it, and the holder's claim is not taken over."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(CLOCK_BEHIND, encoding="utf-8")
    env = dict(os.environ, WB_CLOCK_BEHIND="120",
               PYTHONPATH=os.pathsep.join([str(site), os.getcwd(), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen([sys.executable, "-c", HANG, str(tmp_path)], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "waiting"
        store = _other(tmp_path)
        held = store.holder("t")
        assert held is not None and held.pid == proc.pid
        assert held.since < time.time() - 100  # its clock: behind this one's
        with pytest.raises(ThreadBusyError, match=rf"another process \(process {proc.pid} on "):
            store.claim("t")
        assert store.holder("t") is not None and store.holder("t").pid == proc.pid  # not taken over
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        assert store.holder("t") is None  # once it is gone, at once
        store.release(store.claim("t"))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


# -- the start ticks decide a reused pid ------------------------------------------------------------------
@needs_proc
def test_R7_a_pid_now_running_another_process_is_gone_however_fresh_the_claim(tmp_path):
    """The claim's pid runs, but not with the start ticks its holder recorded: another process has the
    pid (reused) — the claim is a dead process's, whatever its times say."""
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        store = Store.for_workspace(tmp_path)
        now = time.time()
        _write_claim(store, "t", pid=stranger.pid, since=now, heartbeat=now,
                     process=f"{_scope()}/{_ticks(stranger.pid) - 1}")  # the holder started a tick earlier
        assert store.holder("t") is None
        store.release(store.claim("t"))  # taken over
        _write_claim(store, "t", pid=stranger.pid, since=now - 86400, heartbeat=0.0,
                     process=f"{_scope()}/{_ticks(stranger.pid)}")  # the very process: alive, however old
        assert store.holder("t") is not None
        with pytest.raises(ThreadBusyError):
            _other(tmp_path).claim("t")
        stranger.kill()  # a zombie (not reaped yet) holds no thread
        deadline = time.monotonic() + 10
        while alive(stranger.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert store.holder("t") is None
    finally:
        stranger.kill()
        stranger.wait(10)


# -- another PID namespace: the heartbeat decides, never the local pid table -------------------------------
@needs_proc
def test_R7_a_claim_from_another_pid_namespace_with_the_same_host_name_goes_by_its_heartbeat(tmp_path, monkeypatch):
    """(a) A live holder in another PID namespace (a container sharing the host name): its pid does not
    exist here, but its heartbeat is fresh — it holds the thread. (b) One that was pid 1 there and was
    killed: pid 1 here is alive and older, but the heartbeat went stale — it is gone."""
    store = Store.for_workspace(tmp_path)
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    elsewhere = f"{boot}/4026599999/0"  # another PID namespace's inode, same boot, same host name
    now = time.time()
    _write_claim(store, "t", pid=_dead_pid(), since=now, heartbeat=now, process=f"{elsewhere}/1234")
    assert store.holder("t") is not None
    with pytest.raises(ThreadBusyError, match="in flight in another process"):
        _other(tmp_path).claim("t")
    _write_claim(store, "t", pid=1, since=now - 600, heartbeat=now - store_claims.STALE_AFTER - 5,
                 process=f"{elsewhere}/1")
    assert alive(1)
    assert store.holder("t") is None
    store.release(_other(tmp_path).claim("t"))
    # the same for this very process's pid, seen from another namespace: the heartbeat decides
    _write_claim(store, "t", pid=os.getpid(), since=now, heartbeat=now - store_claims.STALE_AFTER - 5,
                 process=f"{elsewhere}/{_ticks()}")
    assert store.holder("t") is None
    # another boot (another machine, or this one before a reboot): the heartbeat too
    _write_claim(store, "t", pid=os.getpid(), since=now, heartbeat=now,
                 process=f"00000000-0000-0000-0000-000000000000/{os.stat('/proc/self/ns/pid').st_ino}/0/{_ticks()}")
    assert store.holder("t") is not None
    monkeypatch.setattr(store_claims, "STALE_AFTER", 0.0)
    time.sleep(0.01)
    assert store.holder("t") is None


def _unshare_allowed() -> bool:
    try:
        return subprocess.run(["unshare", "-p", "-f", "--mount-proc", "true"], capture_output=True,
                              timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _in_namespace(tmp_path: Path, *, as_init: bool) -> subprocess.Popen[str]:
    """A real run in a PID namespace of its own with this host name: as its pid 1 (``as_init``), or as a
    process whose pid (30001 where the namespace's next pid can be set) does not exist here."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")]))
    script = tmp_path / "hang.py"
    script.write_text(HANG, encoding="utf-8")
    run = f"'{sys.executable}' '{script}' '{tmp_path}'"
    command = f"exec {run}" if as_init else f"echo 30000 > /proc/sys/kernel/ns_last_pid 2>/dev/null; {run}"
    return subprocess.Popen(["unshare", "-p", "-f", "--mount-proc", "sh", "-c", command], stdout=subprocess.PIPE,
                            text=True, env=env, start_new_session=True)


@needs_proc
@pytest.mark.skipif(not _unshare_allowed(), reason="unshare -p is not permitted here")
@pytest.mark.parametrize("as_init", [False, True], ids=["pid-unknown-here", "pid-1-there"])
def test_R7_a_real_holder_in_another_pid_namespace_is_refused_live_and_taken_over_once_dead(tmp_path, monkeypatch,
                                                                                             as_init):
    """A live run in its own PID namespace keeps its thread from a process outside (its pid means
    nothing here); killed -9, its claim goes stale by its heartbeat — never held forever by whatever
    process has that pid here (pid 1 is always alive)."""
    proc = _in_namespace(tmp_path, as_init=as_init)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "waiting"
        store = Store.for_workspace(tmp_path)
        held = store.holder("t")
        assert held is not None and held.pid != proc.pid  # the pid it has in its namespace
        if as_init:
            assert held.pid == 1
        with pytest.raises(ThreadBusyError, match=rf"in flight in another process \(process {held.pid} on "):
            store.claim("t")
        os.killpg(proc.pid, signal.SIGKILL)  # the namespace's processes, all at once
        proc.wait(10)
        monkeypatch.setattr(store_claims, "STALE_AFTER", 1.0)  # its heartbeat is 10 s apart: stale after 1 s
        deadline = time.monotonic() + 15
        while store.holder("t") is not None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert store.holder("t") is None
        store.release(store.claim("t"))
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


# -- rows an older workbench wrote, and a store made before identities ----------------------------------------
def test_R7_a_claim_an_older_workbench_wrote_keeps_its_rule(tmp_path):
    """No identity: on this host the pid decides (a dead pid is gone; a live one is the holder unless it
    started after the claim); another host's claim goes by its heartbeat — as before."""
    store = Store.for_workspace(tmp_path)
    now = time.time()
    _write_claim(store, "t", pid=_dead_pid(), since=now, heartbeat=now, process=None)
    assert store.holder("t") is None
    _write_claim(store, "t", pid=os.getpid(), since=now, heartbeat=0.0, process=None)
    assert store.holder("t") is not None
    _write_claim(store, "t", pid=os.getpid(), since=now, heartbeat=now - store_claims.STALE_AFTER - 5,
                 host="elsewhere.invalid", process=None)
    assert store.holder("t") is None


@needs_proc
def test_R7_an_identity_left_from_a_previous_token_is_never_read_for_a_later_holder(tmp_path):
    """An older workbench that takes a claim over updates ``claims`` only: the identity its predecessor
    left beside it names another token and is ignored (the older rule judges the row)."""
    store = Store.for_workspace(tmp_path)
    now = time.time()
    _write_claim(store, "t", pid=os.getpid(), since=now, heartbeat=now,
                 process=f"{_scope()}/{_ticks() + 1}", token="before")  # judged by it, this pid would be reused
    assert store.holder("t") is None
    with store.transaction() as db:  # the older workbench's takeover
        db.execute("UPDATE claims SET token='after', since=? WHERE thread_id='t'", (now,))
    assert store.holder("t") is not None


def test_R7_a_store_made_before_identities_gets_their_table_at_its_first_claim(tmp_path):
    """Backward compatible: the ``claims`` table keeps its columns (an older workbench writes it as
    before, by position too); reads of a store no claim was taken in since need no change; the first
    claim adds the identities table."""
    store = Store.for_workspace(tmp_path)
    db = sqlite3.connect(store.path)
    has_table = lambda: db.execute(  # noqa: E731
        "SELECT 1 FROM sqlite_master WHERE name='claim_processes'").fetchone() is not None
    assert not has_table()
    assert [r[1] for r in db.execute("PRAGMA table_info(claims)")] == ["thread_id", "token", "pid", "host", "since",
                                                                       "heartbeat"]
    with store.transaction() as tx:  # an older workbench's row, written by position
        tx.execute("INSERT INTO claims VALUES ('old', 'x', ?, ?, ?, ?)", (os.getpid(), socket.gethostname(),
                                                                         time.time(), time.time()))
    assert store.holder("old") is not None and store.holder("old").process is None
    claim = store.claim("t")
    assert has_table()
    assert [r[1] for r in db.execute("PRAGMA table_info(claims)")] == ["thread_id", "token", "pid", "host", "since",
                                                                       "heartbeat"]
    if LINUX:
        assert claim.process is not None and store.holder("t").process == claim.process
    store.release(claim)
    assert db.execute("SELECT COUNT(*) FROM claim_processes").fetchone()[0] == 0  # released with the claim
    assert store.holder("old") is not None  # the older row: still its rule


# -- task ownership: the same test (D5) ---------------------------------------------------------------------
@needs_proc
def test_R7_D5_a_task_owner_is_judged_as_a_claim_holder():
    """A task's owner names its process as a claim does: this process lives; its pid with other start
    ticks is another process (gone); one in another PID namespace cannot be judged by its pid here and is
    left alone; an older workbench's owner keeps its rule."""
    from workbench.harness.task_runner import describe_owner, owner_alive, process_owner

    mine = process_owner()
    host, pid, since = mine.split(" ")
    assert host.startswith(socket.gethostname() + "|") and int(pid) == os.getpid()
    assert owner_alive(mine)
    assert describe_owner(mine).startswith(f"process {os.getpid()} on {socket.gethostname()}, since ")
    reused = f"{socket.gethostname()}|{_scope()}/{_ticks() + 1} {os.getpid()} {since}"
    assert not owner_alive(reused)
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    contained = f"{socket.gethostname()}|{boot}/4026599999/0/77 {_dead_pid()} {time.time():.3f}"
    assert owner_alive(contained)  # no heartbeat to go by: its process drives the task
    assert not owner_alive(f"{socket.gethostname()} {_dead_pid()} {time.time():.3f}")  # an older row, dead pid
    assert owner_alive(f"{socket.gethostname()} {os.getpid()} {time.time():.3f}")
