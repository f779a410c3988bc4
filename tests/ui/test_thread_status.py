"""R9 in the window: the threads list says ``failed`` (with Recover as what to do) for a run whose
process died, and ``running`` for one live in another process — never "running" forever."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from workbench.engine.store import RunRecord, Store
from workbench.engine.usage import Usage


def _item(panel: Any, thread_id: str) -> Any:
    from workbench.ui.threads_panel import ThreadIdRole

    for i in range(panel.list.count()):
        item = panel.list.item(i)
        if item.data(ThreadIdRole) == thread_id:
            return item
    raise AssertionError(f"thread {thread_id} is not listed: {panel.thread_ids()}")


async def test_R9_threads_list_shows_crashed_as_failed_and_live_elsewhere_as_running(
        windows: Any, demo_workspace: Path) -> None:
    store = Store.for_workspace(demo_workspace)
    crashed = store.create_thread("crashed run", thread_id="crashed")
    store.save_run(RunRecord("r1", crashed, "running", "go", "", None, Usage(), 1.0, None))  # then kill -9
    live = store.create_thread("live elsewhere", thread_id="live")
    store.save_run(RunRecord("r2", live, "running", "go", "", None, Usage(), 2.0, None))
    claim = store.claim(live)  # held by a live process (this one, through another connection)
    try:
        window = await windows(demo_workspace)
        panel = window.threads_panel
        panel.refresh()
        failed = _item(panel, crashed)
        assert "failed" in failed.text() and "running" not in failed.text()
        assert "Recover" in failed.toolTip()
        assert "running" in _item(panel, live).text()
    finally:
        store.release(claim)
        store.close()
