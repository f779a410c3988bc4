"""F4: the thread store and the key folder are invisible to every tool and mount, whatever the rules."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from workbench.backends import BackendRefusal
from workbench.config import parse_config
from workbench.engine.models.scripted import ScriptedModel, reply, tool_reply
from workbench.harness.stack import build_backend
from workbench.keystore import key_folder, legacy_keys_file
from workbench.session import Session

ALLOW_ALL = """permissions:
  default: allow
  rules:
    - {allow: read, path: '/**'}
    - {allow: write, path: '/**'}
"""


async def test_F4_write_file_cannot_wipe_the_thread_store_even_when_approved(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.md").write_text("hello\n")
    model = ScriptedModel([
        tool_reply(("write_file", {"path": "/project/.workbench/threads.sqlite3", "content": "gone"}),
                   ("read_file", {"path": "/project/.workbench/threads.sqlite3"}),
                   ("edit_file", {"path": "/project/.workbench/threads.sqlite3", "old_string": "a",
                                  "new_string": "b"}),
                   ("ls", {"path": "/project"}),
                   ("ls", {"path": "/project/.workbench"}),
                   ("glob", {"pattern": "**", "path": "/project"}),
                   ("grep", {"pattern": "SQLite", "path": "/project/.workbench"})),
        reply("done"),
    ])
    session = await Session.open(ws, model=model)
    store = ws / ".workbench" / "threads.sqlite3"
    before = store.read_bytes()[:16]
    result = await session.run("go")
    while result.status == "interrupted":
        result = await session.resume({q.id: "approve" for q in result.pending})
    assert result.status == "done"
    assert store.read_bytes()[:16] == before == b"SQLite format 3\x00"
    write, read, edit, ls_root, ls_wb, glob, grep = [m.content for m in model.requests[-1].messages
                                                     if m.role == "tool"]
    for out in (write, read, edit, ls_wb, grep):
        assert "protected path" in out, out
    assert ".workbench" not in ls_root and "/project/a.md" in ls_root
    assert ".workbench" not in glob
    assert session.store.thread(session.thread_id) is not None  # the store still works


def _keys(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    f = folder / "keys.json"
    f.write_text('{"openai": "sk-THE-KEY"}')
    return f


@pytest.mark.parametrize("which", ["key_folder", "legacy"])
async def test_F4_the_key_file_is_invisible_through_a_mount_of_a_parent_folder_and_a_symlink(tmp_path, which):
    key = _keys(key_folder()) if which == "key_folder" else _keys(legacy_keys_file().parent)
    home = Path(os.path.commonpath([key_folder(), legacy_keys_file()]))  # like mounting ~
    ws = tmp_path / "ws"
    ws.mkdir()
    os.symlink(key.parent, ws / "k")
    cfg = parse_config(ALLOW_ALL + f"mounts:\n  /project: {{host: {ws}}}\n  /home: {{host: {home}}}\n")
    backend = build_backend(cfg, ws, ws / ".workbench" / "threads.sqlite3")
    vkey = "/home/" + str(key.relative_to(home))
    for path in (vkey, "/project/k/keys.json"):
        with pytest.raises(BackendRefusal, match="protected path"):
            await backend.read(path)
        with pytest.raises(BackendRefusal, match="protected path"):
            await backend.write(path, "{}")
    if which == "key_folder":  # the whole folder is protected; the config folder only loses the file
        with pytest.raises(BackendRefusal, match="protected path"):
            await backend.list("/home/" + str(key.parent.relative_to(home)))
    assert not [m for m in await backend.grep("THE-KEY", "/") if "THE-KEY" in m.text]
    assert not [p for p in await backend.glob("**/keys.json", "/")]
    listed = [i.path for i in await backend.list("/project")]
    assert "/project/k" not in listed
    assert key.read_text() == '{"openai": "sk-THE-KEY"}'
