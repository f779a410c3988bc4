"""R7, R9: deleting a thread whose run is live in ANOTHER process is refused, naming the holder (as
Compact now is); the thread and its rows stay, and the other process's run finishes normally. Once that
run has ended, the thread can be deleted.

The other process is a real one (``python -c RUNNER``): it runs a turn on the thread with a model that
waits for a gate file, so its claim is live while this process tries the delete.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.engine.agent import Agent, Engine
from workbench.engine.models.scripted import ScriptedModel, reply
from workbench.engine.store import Store
from workbench.errors import RunError
from workbench.session import Session

RUNNER = """
import asyncio, os, sys
from workbench.engine.agent import Agent, Engine
from workbench.engine.models.scripted import ScriptedModel, reply
from workbench.engine.store import Store

ws, thread, gate = sys.argv[1], sys.argv[2], sys.argv[3]

class Gated(ScriptedModel):
    async def stream(self, request):
        print("waiting", flush=True)
        while not os.path.exists(gate):
            await asyncio.sleep(0.02)
        async for item in super().stream(request):
            yield item

engine = Engine(Agent(Gated([reply("second answer")]), instructions="B"), Store.for_workspace(ws))
result = asyncio.run(engine.run(thread, "turn 2"))
print("result", result.status, result.answer, flush=True)
"""


def _rows(store: Store, thread: str) -> dict[str, int]:
    with store.transaction() as db:
        return {table: db.execute(f"SELECT COUNT(*) FROM {table} WHERE thread_id=?", (thread,)).fetchone()[0]
                for table in ("checkpoints", "messages", "runs", "events")}


async def _readline(proc: subprocess.Popen[str], timeout: float = 30) -> str:
    assert proc.stdout is not None
    return await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), timeout)


async def test_R7_R9_delete_is_refused_while_the_thread_runs_in_another_process(tmp_path: Path) -> None:
    """R7/R9: the window's Delete on a thread a `workbench run` elsewhere is running is refused with the
    holder named; its rows stay, and the other process's run ends done with its answer."""
    (tmp_path / "workbench.yaml").write_text("model: demo\n")
    first = Engine(Agent(ScriptedModel([reply("first answer")]), instructions="B"), Store.for_workspace(tmp_path))
    assert (await first.run("t", "turn 1")).status == "done"
    first.store.close()
    gate = tmp_path / "gate"
    env = dict(os.environ, PYTHONPATH=os.getcwd() + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-c", RUNNER, str(tmp_path), "t", str(gate)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    session = None
    try:
        assert await _readline(proc) == "waiting\n"  # the other process holds the thread, mid-step
        session = await Session.open(tmp_path, "t", model=ScriptedModel([]))
        assert session.status == "running" and f"process {proc.pid} " in (session.holder or "")
        before = _rows(session.store, "t")
        with pytest.raises(RunError, match=rf"running in another process \(process {proc.pid} on .*\)"):
            session.delete_thread("t")
        assert [t.id for t in session.threads()] == ["t"]
        assert _rows(session.store, "t") == before
        held = session.store.holder("t")
        assert held is not None and held.pid == proc.pid  # its claim untouched

        gate.write_text("go")
        assert await _readline(proc) == "result done second answer\n"
        out, err = await asyncio.to_thread(proc.communicate, timeout=30)
        assert proc.returncode == 0, err
        assert "taken over" not in err
        assert session.status == "done"
        texts = [m.content for m in session.messages]
        assert "first answer" in texts and "second answer" in texts

        session.delete_thread("t")  # the run has ended: the thread may go now
        assert session.threads() == [] or all(t.id != "t" for t in session.threads())
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        if session is not None:
            await session.close()
