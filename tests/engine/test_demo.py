"""The offline demo model plays a whole session on the shipped demo workspace (G5, issue 2 item 4)."""

from __future__ import annotations

import shutil
from importlib.resources import as_file, files

from workbench.engine.models.demo import ANSWER, DemoModel
from workbench.session import Session

MAX_ROUNDS = 20
"""More approval rounds than the demo ever asks for."""


def demo_workspace(tmp_path):
    with as_file(files("workbench.resources") / "demo") as src:
        shutil.copytree(src, tmp_path / "demo")
    return tmp_path / "demo"


async def play(session: Session):
    result = await session.run("Show me what you can do")
    kinds = []
    for _ in range(MAX_ROUNDS):  # bounded: an engine that kept asking would fail, not hang
        if result.status != "interrupted":
            break
        kinds += [(q.kind, q.payload.get("tool")) for q in result.pending]
        result = await session.resume({q.id: "approve" for q in result.pending})
    assert result.status != "interrupted", f"still asking after {MAX_ROUNDS} rounds"
    return result, kinds


async def test_demo_session_plays_to_the_end_with_approvals(tmp_path):
    ws = demo_workspace(tmp_path)
    session = await Session.open(ws, model=DemoModel(chunk_delay=0))
    assert session.model_name == "demo"
    result, kinds = await play(session)
    assert result.status == "done" and result.answer == ANSWER
    # writing notes and editing AGENTS.md each asked first
    assert kinds == [("tool_approval", "write_file"), ("tool_approval", "edit_file")]
    assert "written by the offline demo model" in (ws / "notes.md").read_text()
    assert "Keep notes.md short" in (ws / "AGENTS.md").read_text()
    assert [t["status"] for t in session.todos] == ["done"] * 4
    assert "summary.md" in session.artifacts
    tool_results = [m for m in session.messages if m.role == "tool"]
    assert any("Summarise a document" in m.content or "Summarize" in m.content for m in tool_results)
    fates = {d["path"]: d["fate"] for d in session.documents if "fate" in d}
    assert fates.get("/project/AGENTS.md") == "shown"


async def test_demo_is_deterministic_and_rejection_does_not_stop_it(tmp_path):
    ws = demo_workspace(tmp_path)
    session = await Session.open(ws, model=DemoModel(chunk_delay=0))
    result = await session.run("go")
    for _ in range(MAX_ROUNDS):
        if result.status != "interrupted":
            break
        result = await session.resume({q.id: {"decision": "reject", "message": "not now"} for q in result.pending})
    assert result.status == "done" and result.answer == ANSWER
    assert not (ws / "notes.md").exists()
    rejected = [m for m in session.messages if m.role == "tool" and m.meta.get("status") == "rejected"]
    assert len(rejected) == 2 and "not now" in rejected[0].content
