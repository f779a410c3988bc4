"""The threads list says how the thread's last run ended once it has ended — not "running" (the list
was refreshed on run_finished, before the run let go of its thread). Issue 10 journeys; R9 wording."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.stub_server import StubReply, StubServer
from tests.ui.helpers import wait_for


async def test_the_threads_list_does_not_say_running_after_the_run_ended(
        windows: Any, stub_workspace: Path, stub_server: StubServer, qtbot: Any) -> None:
    stub_server.script(StubReply(text="one"), StubReply(status=401))
    window = await windows(stub_workspace)
    assert await asyncio.wait_for(window.send("first"), 20) == "done"
    await wait_for(lambda: "running" not in window.threads_panel.list.item(0).text(), 5,
                   "the list to stop saying running")
    assert await asyncio.wait_for(window.send("second"), 20) == "failed"
    await wait_for(lambda: "failed" in window.threads_panel.list.item(0).text(), 5, "the list to say failed")
