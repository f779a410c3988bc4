"""A session of edit_file steps in its own process, for tests/e2e/test_processes.py (R9).

``python tests/e2e/edit_driver.py WORKSPACE STEPS``: runs thread ``t`` (or recovers it when its last
run failed or its process died) with a deterministic model: step k appends ``line k`` to
``/log.txt`` through ``edit_file``; after STEPS steps it answers. Prints ``ready`` once the engine is
built (the parent kills it at random moments after that) and ``finished`` when the run is done; then
writes the committed history to ``history.json`` for the test to check.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path

from workbench.backends.host import HostBackend
from workbench.engine.agent import Agent, Engine
from workbench.engine.messages import ModelDelta, ModelRequest, ModelResponse, ToolCall
from workbench.engine.models.scripted import reply, tool_reply
from workbench.engine.store import Store
from workbench.harness.files import FilesMiddleware


class EditModel:
    """Step k (k = assistant messages so far + 1) asks for one edit adding ``line k``."""

    name = "edit-driver"

    def __init__(self, steps: int) -> None:
        self.steps = steps

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelDelta | ModelResponse]:
        await asyncio.sleep(0.004)  # a model call takes a moment: kills land in every phase
        k = sum(1 for m in request.messages if m.role == "assistant") + 1
        if k > self.steps:
            yield reply("all lines written")
            return
        yield tool_reply(ToolCall.parse(f"call-{k}", "edit_file", {
            "path": "/log.txt", "old_string": "END\n", "new_string": f"line {k}\nEND\n"}))


async def main(ws: Path, steps: int) -> int:
    store = Store.for_workspace(ws)
    engine = Engine(Agent(EditModel(steps), max_steps=steps + 10, middleware=[FilesMiddleware(HostBackend(ws))]), store)
    info = store.thread("t")
    last = store.runs("t")[-1] if info is not None and store.runs("t") else None
    if last is not None and last.status == "done":
        return _done(store, ws)
    print("ready", flush=True)
    if info is None or last is None:
        result = await engine.run("t", "write the lines")
    else:
        result = await engine.recover("t")
    if result.status != "done":
        print(f"ended {result.status}: {result.error}", file=sys.stderr, flush=True)
        return 1
    return _done(store, ws)


def _done(store: Store, ws: Path) -> int:
    cp = store.latest_checkpoint("t")
    assert cp is not None
    (ws / "history.json").write_text(json.dumps(cp.state["messages"]), encoding="utf-8")
    print("finished", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(Path(sys.argv[1]), int(sys.argv[2]))))
