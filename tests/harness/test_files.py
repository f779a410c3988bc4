"""File tools end to end (F1, F2, R4): each tool through the real Engine with a scripted model."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from workbench.backends import CompositeBackend, HostBackend
from workbench.engine.agent import Agent, Engine
from workbench.engine.messages import ModelRequest
from workbench.engine.models.scripted import ScriptedModel, reply, tool_reply
from workbench.engine.store import Store
from workbench.harness.files import FilesMiddleware


def tool_texts(request: ModelRequest) -> list[str]:
    """The tool results of the latest step, as the model sees them."""
    msgs = list(request.messages)
    last = max(i for i, m in enumerate(msgs) if m.role == "assistant")
    return [m.content for m in msgs[last + 1 :] if m.role == "tool"]


class Env:
    def __init__(self, tmp_path: Path, **files_kw) -> None:
        self.root = tmp_path / "ws"
        self.root.mkdir()
        self.model = ScriptedModel([])
        self.backend = CompositeBackend({"/project": HostBackend(self.root),
                                         "/scratch": FilesMiddleware.state_backend()})
        self.files = FilesMiddleware(self.backend, **files_kw)
        self.store = Store(tmp_path / "store" / "threads.sqlite3")
        self.engine = Engine(Agent(self.model, middleware=[self.files], backend=self.backend), self.store)

    async def call(self, *calls, thread: str = "t") -> list[str]:
        """One run: the model makes ``calls`` in one message, then answers; returns the tool results."""
        self.model.add(tool_reply(*calls), reply("done"))
        result = await self.engine.run(thread, "go")
        assert result.status == "done", result.error
        return tool_texts(self.model.requests[-1])


@pytest.fixture
def env(tmp_path: Path) -> Env:
    return Env(tmp_path)


async def test_ls_lists_files_with_sizes_and_folders(env: Env):
    (env.root / "a.txt").write_text("hello")
    (env.root / "src").mkdir()
    (env.root / "src" / "m.py").write_text("x = 1\n")
    [out] = await env.call(("ls", {"path": "/project"}))
    assert out.splitlines() == ["/project/a.txt (5 bytes)", "/project/src/"]
    [out] = await env.call(("ls", {"path": "/project/nope"}))
    assert out == "Error: /project/nope not found"


async def test_read_file_numbers_lines_like_cat_n(env: Env):
    (env.root / "f.txt").write_text("alpha\nbeta\ngamma\n")
    [out] = await env.call(("read_file", {"path": "/project/f.txt"}))
    assert out == "     1\talpha\n     2\tbeta\n     3\tgamma"


async def test_read_file_offset_and_limit_say_how_to_read_on(env: Env):
    (env.root / "f.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    [out] = await env.call(("read_file", {"path": "/project/f.txt", "offset": 2, "limit": 3}))
    lines = out.splitlines()
    assert lines[:3] == ["     3\tline 3", "     4\tline 4", "     5\tline 5"]
    assert "5 more lines" in lines[3] and "offset=5" in lines[3] and "limit=3" in lines[3]
    [out] = await env.call(("read_file", {"path": "/project/f.txt", "offset": 8}))
    assert out.splitlines() == ["     9\tline 9", "    10\tline 10"]  # the end: no "more lines" note
    [out] = await env.call(("read_file", {"path": "/project/f.txt", "offset": 10}))
    assert out.startswith("Error: offset 10 is past the end of /project/f.txt (10 lines)")


async def test_read_file_caps_lines_at_max_read_lines(tmp_path: Path):
    env = Env(tmp_path, max_read_lines=4)
    (env.root / "f.txt").write_text("\n".join(str(i) for i in range(10)))
    [out] = await env.call(("read_file", {"path": "/project/f.txt", "limit": 100}))
    lines = out.splitlines()
    assert lines[:4] == ["     1\t0", "     2\t1", "     3\t2", "     4\t3"]
    assert "6 more lines" in lines[4] and "offset=4" in lines[4]


async def test_read_missing_file_names_the_path(env: Env):
    [out] = await env.call(("read_file", {"path": "/project/missing.md"}))
    assert out == "Error: /project/missing.md not found"


async def test_write_file_creates_file_and_confirms(env: Env):
    [out] = await env.call(("write_file", {"path": "/project/new/dir/a.txt", "content": "héllo\n"}))
    assert out == "Wrote /project/new/dir/a.txt (7 bytes)."
    assert (env.root / "new" / "dir" / "a.txt").read_text(encoding="utf-8") == "héllo\n"


async def test_edit_file_replaces_exact_text(env: Env):
    (env.root / "a.py").write_text("x = 1\ny = 2\n")
    [out] = await env.call(("edit_file", {"path": "/project/a.py", "old_string": "y = 2", "new_string": "y = 3"}))
    assert out == "Edited /project/a.py: 1 replacement."
    assert (env.root / "a.py").read_text() == "x = 1\ny = 3\n"


async def test_edit_file_mismatch_and_ambiguity_are_told_to_the_model_and_the_run_goes_on(env: Env):
    (env.root / "a.py").write_text("v = 1\nv = 1\n")
    missing, ambiguous = await env.call(
        ("edit_file", {"path": "/project/a.py", "old_string": "w = 1", "new_string": "w = 2"}),
        ("edit_file", {"path": "/project/a.py", "old_string": "v = 1", "new_string": "v = 2"}),
    )
    assert missing.startswith("Error: Cannot edit /project/a.py:") and "not found" in missing
    assert ambiguous.startswith("Error: Cannot edit /project/a.py:") and "matched 2 times" in ambiguous
    assert "replace_all" in ambiguous
    assert (env.root / "a.py").read_text() == "v = 1\nv = 1\n"
    [out] = await env.call(("edit_file", {"path": "/project/a.py", "old_string": "v = 1", "new_string": "v = 2",
                                          "replace_all": True}))
    assert out == "Edited /project/a.py: 2 replacements."
    assert (env.root / "a.py").read_text() == "v = 2\nv = 2\n"


async def test_glob_finds_files_at_any_depth(env: Env):
    (env.root / "src" / "pkg").mkdir(parents=True)
    (env.root / "src" / "a.py").write_text("")
    (env.root / "src" / "pkg" / "b.py").write_text("")
    (env.root / "src" / "c.txt").write_text("")
    [out] = await env.call(("glob", {"pattern": "**/*.py", "path": "/project"}))
    assert out.splitlines() == ["/project/src/a.py", "/project/src/pkg/b.py"]
    [out] = await env.call(("glob", {"pattern": "*.rs", "path": "/project"}))
    assert out == "No files match '*.rs' under /project."


async def test_grep_reports_path_line_text_and_caps_with_a_note(tmp_path: Path):
    env = Env(tmp_path, max_results=2)
    (env.root / "a.py").write_text("import os\nTODO one\n")
    (env.root / "b.md").write_text("TODO two\nTODO three\n")
    [out] = await env.call(("grep", {"pattern": "TODO", "path": "/project", "glob": "*.py"}))
    assert out == "/project/a.py:2: TODO one"
    [out] = await env.call(("grep", {"pattern": "TODO", "path": "/project"}))
    lines = out.splitlines()
    assert lines[:2] == ["/project/a.py:2: TODO one", "/project/b.md:1: TODO two"]
    assert "1 more matches not shown" in lines[2]
    [out] = await env.call(("grep", {"pattern": "(", "path": "/project"}))
    assert out.startswith("Error:") and "regular expression" in out


async def test_paths_leaving_the_root_are_refused_to_the_model(env: Env, tmp_path: Path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("top secret")
    os.symlink(outside, env.root / "link")
    dotdot, via_link, write_link = await env.call(
        ("read_file", {"path": "/project/../outside/secret.txt"}),
        ("read_file", {"path": "/project/link/secret.txt"}),
        ("write_file", {"path": "/project/link/new.txt", "content": "x"}),
    )
    for out in (dotdot, via_link, write_link):
        assert out.startswith("Refused:"), out
        assert "top secret" not in out
    assert "/project/link/secret.txt" in via_link
    assert not (outside / "new.txt").exists()


async def test_two_edits_of_one_file_in_one_message_apply_in_order(env: Env):
    tools = {t.name: t for t in env.files.tools()}
    assert tools["write_file"].lock == tools["edit_file"].lock == "files"
    (env.root / "a.txt").write_text("one\n")
    first, second, third = await env.call(
        ("edit_file", {"path": "/project/a.txt", "old_string": "one", "new_string": "two"}),
        ("edit_file", {"path": "/project/a.txt", "old_string": "two", "new_string": "three"}),
        ("edit_file", {"path": "/project/a.txt", "old_string": "three", "new_string": "four"}),
    )
    assert (first, second, third) == ("Edited /project/a.txt: 1 replacement.",) * 3
    assert (env.root / "a.txt").read_text() == "four\n"


def test_tools_declare_paths_and_whether_they_change_the_outside(env: Env):
    tools = {t.name: t for t in env.files.tools()}
    assert set(tools) == {"ls", "read_file", "write_file", "edit_file", "glob", "grep"}
    for name in ("ls", "read_file", "glob", "grep"):
        assert tools[name].changes_outside is False and tools[name].writes_paths == ()
    assert tools["read_file"].resources({"path": "/p/a"}) == [("invoke", "read_file"), ("read", "/p/a")]
    assert tools["write_file"].resources({"path": "/p/a", "content": ""}) == [("invoke", "write_file"),
                                                                               ("write", "/p/a")]
    assert tools["edit_file"].changes_outside is True
    assert ("write", "/p/a") in tools["edit_file"].resources({"path": "/p/a"})


async def test_state_mount_files_are_checkpointed_with_the_thread(env: Env):
    [out] = await env.call(("write_file", {"path": "/scratch/notes.md", "content": "remember\n"}))
    assert out == "Wrote /scratch/notes.md (9 bytes)."
    state = env.store.latest_checkpoint("t").state
    assert [e["content"] for e in state["files"].values()] == ["remember\n"]
    # A new engine over the same store (an app restart) reads it back from the thread's state.
    env2 = Env.__new__(Env)
    env2.__dict__.update(env.__dict__)
    env2.model = ScriptedModel([])
    env2.engine = Engine(Agent(env2.model, middleware=[FilesMiddleware(env.backend)], backend=env.backend),
                         env.store)
    [out] = await env2.call(("read_file", {"path": "/scratch/notes.md"}))
    assert out == "     1\tremember"
    # Another thread has its own scratch.
    [out] = await env2.call(("read_file", {"path": "/scratch/notes.md"}), thread="other")
    assert out == "Error: /scratch/notes.md not found"
