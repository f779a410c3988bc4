"""R7, R9 in the threads list: Delete is not offered for a thread whose run is live in another process,
and when the list was stale (the run started after it was read), the session's refusal — naming the
holder — is shown instead of the thread vanishing under that run. The other process is a real one.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QMessageBox

from tests.engine.test_delete_live_thread import RUNNER
from tests.ui.helpers import click, find_dialog, wait_for
from workbench.engine.agent import Agent, Engine
from workbench.engine.models.scripted import ScriptedModel, reply
from workbench.engine.store import Store
from workbench.session import Session
from workbench.ui.threads_panel import RUNNING_DELETE_TIP, ThreadsPanel


class FakeBridge(QObject):
    sig_thread_loaded = Signal(object)
    sig_run_started = Signal(object)
    sig_run_finished = Signal(dict)

    def __init__(self, session: Session) -> None:
        super().__init__()
        self.session = session


async def test_R7_R9_delete_is_not_offered_for_a_thread_running_in_another_process(
        tmp_path: Path, qtbot: Any, monkeypatch: Any) -> None:
    """R7/R9: the list says running and Delete is disabled (its tooltip says why); a Delete from a stale
    list is refused by the session with the holder named and said in a box; the thread and the other
    process's run are untouched, and once that run ended Delete is offered again."""
    (tmp_path / "workbench.yaml").write_text("model: demo\n")
    first = Engine(Agent(ScriptedModel([reply("first answer")]), instructions="B"), Store.for_workspace(tmp_path))
    assert (await first.run("t", "turn 1")).status == "done"
    first.store.close()
    session = await Session.open(tmp_path, "t", model=ScriptedModel([]))
    other = session.new_thread()
    gate = tmp_path / "gate"
    env = dict(os.environ, PYTHONPATH=os.getcwd() + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-c", RUNNER, str(tmp_path), "t", str(gate)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    panel = ThreadsPanel(FakeBridge(session))
    qtbot.addWidget(panel)
    panel.show()
    try:
        await wait_for(lambda: session.store.holder("t") is not None, 30, "the other process to hold the thread")
        panel.refresh()
        panel.list.setCurrentRow(panel.thread_ids().index("t"))
        assert "running" in panel.list.currentItem().text()
        assert not panel.delete_button.isEnabled() and panel.delete_button.toolTip() == RUNNING_DELETE_TIP
        panel.list.setCurrentRow(panel.thread_ids().index(other))
        assert panel.delete_button.isEnabled()  # another thread: offered

        # A stale list (read before the run started): Delete is offered, the session refuses, it is said.
        fresh = panel.threads
        stale = [dataclasses.replace(t, status="done") for t in fresh()]
        monkeypatch.setattr(panel, "threads", lambda: stale)
        panel.refresh()
        panel.list.setCurrentRow(panel.thread_ids().index("t"))
        assert panel.delete_button.isEnabled()
        deleted: list[str] = []
        panel.sig_thread_deleted.connect(deleted.append)
        click(qtbot, panel.delete_button)
        box = await find_dialog("delete_thread_dialog")
        click(qtbot, box.button(QMessageBox.StandardButton.Yes))
        refused = await find_dialog("delete_thread_refused")
        assert "running in another process" in refused.text() and f"process {proc.pid} " in refused.text()
        click(qtbot, refused.button(QMessageBox.StandardButton.Ok))
        await wait_for(lambda: panel._dialog is None, 5, "the box to close")
        assert deleted == [] and "t" in [t.id for t in session.threads()]
        monkeypatch.setattr(panel, "threads", fresh)

        gate.write_text("go")
        await wait_for(lambda: proc.poll() is not None, 30, "the other process's run to end")
        out, err = proc.communicate(timeout=10)
        assert proc.returncode == 0 and "result done second answer" in out, err
        panel.refresh()
        panel.list.setCurrentRow(panel.thread_ids().index("t"))
        assert "running" not in panel.list.currentItem().text() and panel.delete_button.isEnabled()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        await session.close()
