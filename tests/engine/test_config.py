"""workbench.yaml loading/validation and user settings (DESIGN §6, P1, B1/B3)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from workbench.config import (
    BudgetConfig,
    MountConfig,
    PermissionRule,
    SubagentConfig,
    UserSettings,
    WorkbenchConfig,
    add_recent_workspace,
    load_config,
    load_user_settings,
    parse_config,
    save_user_settings,
    user_config_dir,
    user_data_dir,
)
from workbench.errors import ConfigError

# DESIGN §6's example block, verbatim.
DESIGN_EXAMPLE = """\
model: openai/gpt-4.1-mini        # any litellm model string; "demo" = the offline scripted model
api_base: http://127.0.0.1:8000/v1 # optional: any OpenAI-compatible server
instructions: You are a careful engineering assistant.
max_prompt_section_tokens: 24000
mounts:                           # virtual path -> backend; /project is the workspace folder by default
  /project: {host: .}
  /user: {host: ~/.config/workbench}
  /scratch: {state: true}
  /memories: {store: true}
  /docs: {host: ./docs, readonly: true}
memory:      {paths: [/user/AGENTS.md, /project/AGENTS.md], max_file_tokens: 4000, max_total_tokens: 8000, max_cached_runs: 16}
skills:      {sources: [/user/skills, /project/skills], max_skills: 64, max_description_chars: 1024, max_section_tokens: 4000, max_scanned: 512}
todos:       {max_todos: 30, max_todo_chars: 400}
permissions:
  default: ask                     # for calls no rule matches
  rules:
    - {allow: read,   path: "/**"}
    - {allow: write,  path: "/scratch/**"}
    - {deny:  write,  path: "/project/.git/**"}
    - {ask:   invoke, tool: "delegate_to_*"}
budget:
  - {scope: run, limit: {total_tokens: 200000, cost_usd: 1.00}, interrupt: true}
  - {scope: session, limit: {cost_usd: 5.00}}
artifacts:   {readonly: false}
subagents:
  prefix: delegate_to
  max_delegations: 5
  history_length: 4
  artifact_strategy: inline        # or session
  async: true
  max_wait_seconds: 60
  agents:
    - {name: researcher, description: Reads and summarises sources., model: openai/gpt-4.1-mini, instructions: "..."}
compression:
  max_input_tokens: null
  max_messages: 0
  preserve_recent: 4
  max_tool_response_chars: 400000
  dedupe: {match_by: name-and-input, keep_recent: 1}
  truncate: {max_chars: 2000, preserve_recent: 2}
  summarize: {model: openai/gpt-4.1-nano, preserve_recent: 6}
  skip_summarization_threshold: 0.0
"""


def write(ws: Path, text: str) -> Path:
    p = ws / "workbench.yaml"
    p.write_text(text, encoding="utf-8")
    return p


def config_error(ws: Path, text: str) -> str:
    write(ws, text)
    with pytest.raises(ConfigError) as exc:
        load_config(ws)
    msg = str(exc.value)
    assert "\n" not in msg
    return msg


# ---------------------------------------------------------------------------------------------- defaults


def test_defaults_without_file(tmp_path: Path) -> None:
    cfg = load_config(tmp_path)
    assert cfg == WorkbenchConfig()
    assert cfg.model == "demo"
    assert cfg.api_base is None
    assert cfg.instructions == "You are a careful engineering assistant."
    assert cfg.max_prompt_section_tokens == 24000
    assert cfg.mounts == {
        "/project": MountConfig(kind="host", host="."),
        "/user": MountConfig(kind="host", host="~/.config/workbench"),
        "/scratch": MountConfig(kind="state"),
        "/memories": MountConfig(kind="store"),
    }
    assert cfg.memory.paths == ("/user/AGENTS.md", "/project/AGENTS.md")
    assert (cfg.memory.max_file_tokens, cfg.memory.max_total_tokens, cfg.memory.max_cached_runs) == (4000, 8000, 16)
    assert cfg.skills.sources == ("/user/skills", "/project/skills")
    assert (cfg.skills.max_skills, cfg.skills.max_description_chars, cfg.skills.max_section_tokens,
            cfg.skills.max_scanned) == (64, 1024, 4000, 512)
    assert (cfg.todos.max_todos, cfg.todos.max_todo_chars) == (30, 400)
    # Reads allowed everywhere; everything else asks.
    assert cfg.permissions.default == "ask"
    assert [(r.effect, r.action, r.pattern) for r in cfg.permissions.rules] == [("allow", "read", "/**")]
    assert cfg.budget == ()
    assert cfg.artifacts.readonly is False
    sa = cfg.subagents
    assert (sa.prefix, sa.max_delegations, sa.history_length, sa.artifact_strategy, sa.async_,
            sa.max_wait_seconds, sa.agents) == ("delegate_to", 5, 4, "inline", False, 60, ())
    c = cfg.compression
    assert (c.max_input_tokens, c.max_messages, c.preserve_recent, c.max_tool_response_chars) == (None, 0, 4, 400000)
    assert (c.dedupe.match_by, c.dedupe.keep_recent) == ("name-and-input", 1)
    assert (c.truncate.max_chars, c.truncate.preserve_recent) == (2000, 2)
    assert (c.summarize.model, c.summarize.preserve_recent) == ("openai/gpt-4.1-nano", 6)
    assert c.skip_summarization_threshold == 0.0


def test_empty_or_comment_only_file_gives_defaults(tmp_path: Path) -> None:
    write(tmp_path, "")
    assert load_config(tmp_path) == WorkbenchConfig()
    write(tmp_path, "# nothing yet\n")
    assert load_config(tmp_path) == WorkbenchConfig()


def test_config_is_frozen() -> None:
    cfg = WorkbenchConfig()
    with pytest.raises(AttributeError):
        cfg.model = "x"  # type: ignore[misc]


# ----------------------------------------------------------------------------------------- full example


def test_design_example_loads(tmp_path: Path) -> None:
    write(tmp_path, DESIGN_EXAMPLE)
    cfg = load_config(tmp_path)
    assert cfg.model == "openai/gpt-4.1-mini"
    assert cfg.api_base == "http://127.0.0.1:8000/v1"
    assert cfg.instructions == "You are a careful engineering assistant."
    assert cfg.mounts["/docs"] == MountConfig(kind="host", host="./docs", readonly=True)
    assert cfg.mounts["/user"] == MountConfig(kind="host", host="~/.config/workbench", readonly=False)
    assert cfg.mounts["/scratch"].kind == "state" and cfg.mounts["/memories"].kind == "store"
    assert set(cfg.mounts) == {"/project", "/user", "/scratch", "/memories", "/docs"}
    assert cfg.memory.paths == ("/user/AGENTS.md", "/project/AGENTS.md")
    assert cfg.skills.max_scanned == 512
    assert cfg.todos.max_todo_chars == 400
    rules = cfg.permissions.rules
    assert [(r.effect, r.action, r.pattern) for r in rules] == [
        ("allow", "read", "/**"),
        ("allow", "write", "/scratch/**"),
        ("deny", "write", "/project/.git/**"),
        ("ask", "invoke", "delegate_to_*"),
    ]
    assert [r.line for r in rules] == [17, 18, 19, 20]
    assert str(rules[2]) == "deny write /project/.git/**"
    assert cfg.budget == (
        BudgetConfig(scope="run", limit={"total_tokens": 200000.0, "cost_usd": 1.0}, interrupt=True),
        BudgetConfig(scope="session", limit={"cost_usd": 5.0}, interrupt=False),
    )
    assert cfg.artifacts.readonly is False
    sa = cfg.subagents
    assert sa.async_ is True
    assert sa.artifact_strategy == "inline" and sa.max_wait_seconds == 60
    assert sa.agents == (SubagentConfig(name="researcher", description="Reads and summarises sources.",
                                        model="openai/gpt-4.1-mini", instructions="..."),)
    assert sa.tool_name("researcher") == "delegate_to_researcher"
    assert cfg.compression == WorkbenchConfig().compression


def test_values_differ_from_defaults_are_taken(tmp_path: Path) -> None:
    write(tmp_path, """\
permissions:
  default: deny
  rules: []
budget:
  - scope: run
    limit: {input_tokens: 10, my_counter: 3}
subagents: {prefix: "", artifact_strategy: session}
compression:
  truncate: {max_chars: 50}
  summarize: {model: null}
mounts:
  /memories: null
""")
    cfg = load_config(tmp_path)
    assert cfg.permissions.default == "deny"
    assert cfg.permissions.rules == ()  # explicit empty list: no rules at all
    assert cfg.budget[0].limit == {"input_tokens": 10.0, "my_counter": 3.0}
    assert cfg.budget[0].custom_counters == ("my_counter",)
    assert cfg.subagents.tool_name("x") == "x"
    assert cfg.subagents.artifact_strategy == "session"
    assert cfg.compression.truncate.max_chars == 50 and cfg.compression.truncate.preserve_recent == 2
    assert cfg.compression.summarize.model is None
    assert "/memories" not in cfg.mounts and "/project" in cfg.mounts


def test_explicit_path(tmp_path: Path) -> None:
    other = tmp_path / "elsewhere.yaml"
    other.write_text("model: openai/x\n")
    assert load_config(tmp_path / "ws", path=other).model == "openai/x"


# ---------------------------------------------------------------------------------------------- errors


def test_unknown_top_level_key(tmp_path: Path) -> None:
    msg = config_error(tmp_path, "api_base: null\n\nmodle: gpt\n")
    assert msg == f"{tmp_path / 'workbench.yaml'}:3: unknown key 'modle' (did you mean 'model'?)"


def test_unknown_nested_key(tmp_path: Path) -> None:
    msg = config_error(tmp_path, "model: demo\nmemory:\n  paths: [/project/AGENTS.md]\n  max_file_tokenz: 5\n")
    assert msg.startswith(f"{tmp_path / 'workbench.yaml'}:4: ")
    assert "memory.max_file_tokenz" in msg
    assert "max_file_tokens" in msg  # suggestion


def test_unknown_key_deep_in_list(tmp_path: Path) -> None:
    msg = config_error(tmp_path, "permissions:\n  rules:\n    - {allow: read, path: /a}\n    - {allow: read, glob: /b}\n")
    assert msg.startswith(f"{tmp_path / 'workbench.yaml'}:4: ")
    assert "permissions.rules[1].glob" in msg


def test_wrong_type_names_line_and_key(tmp_path: Path) -> None:
    msg = config_error(tmp_path, "model: demo\n# comment\nmax_prompt_section_tokens: lots\n")
    assert msg.startswith(f"{tmp_path / 'workbench.yaml'}:3: max_prompt_section_tokens: expected ")
    assert "'lots'" in msg


@pytest.mark.parametrize(
    ("text", "line", "key"),
    [
        ("todos:\n  max_todos: true\n", 2, "todos.max_todos"),  # bool is not an int
        ("todos:\n  max_todos: 2.5\n", 2, "todos.max_todos"),  # float is not an int
        ("artifacts: {readonly: yes please}\n", 1, "artifacts.readonly"),
        ("model: 42\n", 1, "model"),
        ("memory:\n  paths: /project/AGENTS.md\n", 2, "memory.paths"),
        ("budget:\n  - scope: run\n    limit: {cost_usd: -1}\n", 3, "budget[0].limit.cost_usd"),
        ("budget:\n  - scope: run\n    limit: {cost_usd: true}\n", 3, "budget[0].limit.cost_usd"),
        ("mounts:\n  /docs: {host: ./docs, state: true}\n", 2, "mounts./docs"),
        ("subagents:\n  agents:\n    - {name: r}\n", 3, "subagents.agents[0]"),
    ],
)
def test_wrong_types(tmp_path: Path, text: str, line: int, key: str) -> None:
    msg = config_error(tmp_path, text)
    assert msg.startswith(f"{tmp_path / 'workbench.yaml'}:{line}: {key}")


def test_float_fields_accept_ints(tmp_path: Path) -> None:
    write(tmp_path, "subagents: {max_wait_seconds: 5}\ncompression: {skip_summarization_threshold: 1}\n")
    cfg = load_config(tmp_path)
    assert cfg.subagents.max_wait_seconds == 5.0 and isinstance(cfg.subagents.max_wait_seconds, float)
    assert cfg.compression.skip_summarization_threshold == 1.0


def test_bad_enum(tmp_path: Path) -> None:
    msg = config_error(tmp_path, "permissions:\n  rules:\n    - {allow: read, path: /a}\n    - {allow: exec, path: /b}\n")
    assert msg == (f"{tmp_path / 'workbench.yaml'}:4: permissions.rules[1].allow: "
                   f"expected one of read, write, invoke, execute, got 'exec'")


def test_bad_enum_budget_scope(tmp_path: Path) -> None:
    msg = config_error(tmp_path, "budget:\n  - scope: forever\n    limit: {cost_usd: 1}\n")
    assert msg.startswith(f"{tmp_path / 'workbench.yaml'}:2: budget[0].scope: expected one of run, session")


def test_session_budget_with_interrupt_refused(tmp_path: Path) -> None:
    text = ("budget:\n"
            "  - {scope: run, limit: {cost_usd: 1}, interrupt: true}\n"
            "  - scope: session\n"
            "    limit: {cost_usd: 5}\n"
            "    interrupt: true\n")
    msg = config_error(tmp_path, text)
    assert msg.startswith(f"{tmp_path / 'workbench.yaml'}:5: budget[1].interrupt")
    assert "session" in msg


def test_invalid_yaml_names_line(tmp_path: Path) -> None:
    msg = config_error(tmp_path, "model: demo\ntodos:\n  max_todos: 3\n  max_todo_chars: [1, 2\nartifacts: {}\n")
    assert msg.startswith(f"{tmp_path / 'workbench.yaml'}:")
    line = int(msg.split(":")[1]) if os.name != "nt" else int(msg.split(":")[2])
    assert line in (4, 5)
    assert "invalid YAML" in msg


@pytest.mark.parametrize(("text", "line", "value", "tag"), [
    ("model: !!int abc\n", 1, "abc", "!!int"),
    ("model: demo\nexecute: {network: !!bool maybe}\n", 2, "maybe", "!!bool"),
    ("model: demo\n\n? !!float zz\n: 1\n", 3, "zz", "!!float"),
    ("model: !!timestamp 2020-99-99\n", 1, "2020-99-99", "!!timestamp"),
])
def test_a_tagged_value_yaml_cannot_convert_names_file_line_and_value(tmp_path: Path, text: str, line: int,
                                                                     value: str, tag: str) -> None:
    """PyYAML's constructors raise ValueError / KeyError for `!!int abc`, `!!bool maybe`: that was an
    internal error (exit 1) instead of a message naming the file and line (a review found it)."""
    msg = config_error(tmp_path, text)
    assert msg.startswith(f"{tmp_path / 'workbench.yaml'}:{line}: ") and repr(value) in msg and tag in msg, msg


def test_invalid_yaml_bad_indentation(tmp_path: Path) -> None:
    msg = config_error(tmp_path, "model: demo\nmemory:\n  max_file_tokens: 1\n bad: 2\n")
    assert msg.startswith(f"{tmp_path / 'workbench.yaml'}:4: invalid YAML")


def test_rule_with_both_allow_and_deny_refused(tmp_path: Path) -> None:
    msg = config_error(tmp_path, "permissions:\n  rules:\n    - {allow: read, deny: read, path: /a}\n")
    assert msg.startswith(f"{tmp_path / 'workbench.yaml'}:3: permissions.rules[0]")
    assert "allow" in msg and "deny" in msg


def test_rule_with_both_path_and_tool_refused(tmp_path: Path) -> None:
    msg = config_error(tmp_path, "permissions:\n  rules:\n    - {allow: read, path: /a, tool: x}\n")
    assert msg.startswith(f"{tmp_path / 'workbench.yaml'}:3: permissions.rules[0]")
    assert "path" in msg and "tool" in msg


def test_rule_without_effect_refused(tmp_path: Path) -> None:
    msg = config_error(tmp_path, "permissions:\n  rules:\n    - {path: /a}\n")
    assert "permissions.rules[0]" in msg and ":3:" in msg


def test_duplicate_key_refused(tmp_path: Path) -> None:
    msg = config_error(tmp_path, "model: a\nmodel: b\n")
    assert msg.startswith(f"{tmp_path / 'workbench.yaml'}:2: duplicate key 'model'")


@pytest.mark.parametrize("text, server, args", [
    # a key written in the mapping overrides one merged in with <<, as PyYAML reads it
    ("mcp_servers:\n  a: &a {command: x, args: [a]}\n  b: {<<: *a, args: [y]}\n", "b", ("y",)),
    ("mcp_servers:\n  a: &a {command: x, args: [a]}\n  b:\n    <<: *a\n    args: [z]\n", "b", ("z",)),
    ("mcp_servers:\n  a: &a {command: x, args: [a]}\n  b: {<<: *a}\n", "b", ("a",)),
])
def test_a_key_overriding_a_merged_one_is_no_duplicate(text: str, server: str, args: tuple[str, ...]) -> None:
    """§6: YAML merge keys work as YAML says: the mapping's own key wins over a merged one (it was
    refused as a "duplicate", naming the anchor's line); the same key written twice is still refused."""
    assert parse_config(text).mcp_servers[server].args == args
    with pytest.raises(ConfigError, match=r":3: duplicate key 'mcp_servers.b.args' \(first at line 3\)"):
        parse_config("mcp_servers:\n  a: &a {command: x}\n  b: {<<: *a, args: [y], args: [z]}\n")


@pytest.mark.parametrize("value", ["5", "1.01", "-0.1"])
def test_skip_summarization_threshold_is_a_share(tmp_path: Path, value: str) -> None:
    """compression.skip_summarization_threshold is a share of the trigger (0.0–1.0, as documented): 5 was
    taken silently as "always summarise"."""
    msg = config_error(tmp_path, f"compression:\n  skip_summarization_threshold: {value}\n")
    assert msg.startswith(f"{tmp_path / 'workbench.yaml'}:2: compression.skip_summarization_threshold")
    assert "from 0 to 1" in msg
    assert parse_config("compression:\n  skip_summarization_threshold: 1\n").compression.skip_summarization_threshold == 1


def test_top_level_must_be_mapping(tmp_path: Path) -> None:
    msg = config_error(tmp_path, "- model\n")
    assert msg.startswith(f"{tmp_path / 'workbench.yaml'}:1: ")


def test_parse_config_source_name() -> None:
    with pytest.raises(ConfigError, match=r"^editor:1: unknown key 'x'"):
        parse_config("x: 1\n", source="editor")


# ------------------------------------------------------------------------------------ mounts, overrides


def test_resolve_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("USERPROFILE", str(home))
    ws = tmp_path / "ws"
    ws.mkdir()
    cfg = WorkbenchConfig()
    assert cfg.mounts["/project"].resolve_host(ws) == ws.resolve()
    assert cfg.mounts["/user"].resolve_host(ws) == (home / ".config" / "workbench").resolve()
    assert MountConfig(kind="host", host="./docs").resolve_host(ws) == (ws / "docs").resolve()
    assert cfg.mounts["/user"].host == "~/.config/workbench"  # kept as written
    with pytest.raises(ValueError):
        cfg.mounts["/scratch"].resolve_host(ws)


def test_with_overrides() -> None:
    cfg = WorkbenchConfig()
    out = cfg.with_overrides(model="openai/gpt-4o", api_base="http://x/v1")
    assert (out.model, out.api_base) == ("openai/gpt-4o", "http://x/v1")
    assert cfg.model == "demo"
    assert cfg.with_overrides(model=None) == cfg  # absent flag keeps the file's value
    with pytest.raises(ConfigError):
        cfg.with_overrides(model="")


def test_permission_rule_defaults() -> None:
    r = PermissionRule(effect="allow", action="invoke", pattern="write_todos")
    assert r.line == 0


# ------------------------------------------------------------------------------------------ user settings


@pytest.fixture
def config_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "cfg"
    monkeypatch.setenv("WORKBENCH_CONFIG_DIR", str(d))
    monkeypatch.setenv("WORKBENCH_DATA_DIR", str(tmp_path / "data"))
    return d


def test_dirs_follow_env(config_dir: Path, tmp_path: Path) -> None:
    assert user_config_dir() == config_dir
    assert user_data_dir() == tmp_path / "data"


def test_user_settings_defaults_when_missing(config_dir: Path) -> None:
    assert load_user_settings() == UserSettings()
    assert not config_dir.exists()  # loading writes nothing


def test_user_settings_round_trip(config_dir: Path) -> None:
    s = UserSettings(model="openai/gpt-4.1-mini", api_base="http://127.0.0.1:8000/v1", default_permission="deny",
                     recent_workspaces=["/a", "/b"], last_workspace="/a", window={"geometry": "AAEC"})
    path = save_user_settings(s)
    assert path == config_dir / "settings.json"
    assert json.loads(path.read_text())["window"] == {"geometry": "AAEC"}
    assert load_user_settings() == s
    assert [p.name for p in config_dir.iterdir()] == ["settings.json"]  # no temp file left behind


def test_user_settings_have_no_api_key(config_dir: Path) -> None:
    save_user_settings(UserSettings())
    data = json.loads((config_dir / "settings.json").read_text())
    assert not any("key" in k.lower() for k in data)
    (config_dir / "settings.json").write_text(json.dumps({"api_key": "sk-secret", "model": "m"}))
    s = load_user_settings()
    assert s.model == "m" and "sk-secret" not in repr(s)


def test_corrupt_settings_give_defaults_and_keep_bad_file(config_dir: Path) -> None:
    config_dir.mkdir()
    (config_dir / "settings.json").write_text("{not json", encoding="utf-8")
    assert load_user_settings() == UserSettings()
    assert (config_dir / "settings.json.bad").read_text(encoding="utf-8") == "{not json"
    assert not (config_dir / "settings.json").exists()
    save_user_settings(UserSettings(model="x"))
    assert load_user_settings().model == "x"


def test_settings_wrong_shapes_do_not_crash(config_dir: Path) -> None:
    config_dir.mkdir()
    (config_dir / "settings.json").write_text("[1, 2]")
    assert load_user_settings() == UserSettings()
    assert (config_dir / "settings.json.bad").exists()
    (config_dir / "settings.json").write_text(json.dumps(
        {"model": 3, "recent_workspaces": "nope", "default_permission": "sometimes", "window": {"g": 1}}))
    assert load_user_settings() == UserSettings()


def test_recent_workspaces_order_dedupe_limit(tmp_path: Path) -> None:
    s = UserSettings()
    a, b = tmp_path / "a", tmp_path / "b"
    add_recent_workspace(s, a)
    add_recent_workspace(s, b)
    assert s.recent_workspaces == [str(b.resolve()), str(a.resolve())]
    # Re-adding moves to the front without a duplicate, even spelled differently.
    returned = add_recent_workspace(s, tmp_path / "b" / ".." / "a")
    assert returned is s
    assert s.recent_workspaces == [str(a.resolve()), str(b.resolve())]
    assert s.last_workspace == str(a.resolve())
    for i in range(15):
        add_recent_workspace(s, tmp_path / f"w{i}")
    assert len(s.recent_workspaces) == 10
    assert s.recent_workspaces[0] == str((tmp_path / "w14").resolve())
    assert s.recent_workspaces[-1] == str((tmp_path / "w5").resolve())
    assert len(set(s.recent_workspaces)) == 10


# --- hostile files (G9, issue 8 item 19) -------------------------------------------------------------------


@pytest.mark.parametrize("text", ["a: " + "[" * 5000 + "]" * 5000, "model: " + "{a: " * 3000 + "1" + "}" * 3000,
                                  "- " * 4000 + "x"])
def test_deeply_nested_yaml_is_a_config_error_naming_the_file(tmp_path, text):
    """Was "internal error: RecursionError" (exit 1); a config error names the file (exit 2)."""
    msg = config_error(tmp_path, text)
    assert str(tmp_path / "workbench.yaml") in msg and "nested too deeply" in msg


def test_deeply_nested_yaml_exits_2_from_the_cli(tmp_path, capsys):
    from workbench.cli import main

    write(tmp_path, "a: " + "[" * 5000 + "]" * 5000)
    assert main(["run", "--workspace", str(tmp_path), "--model", "demo", "hi"]) == 2
    err = capsys.readouterr().err
    assert "nested too deeply" in err and "internal error" not in err


SECRET_LINE = "root-secret-3f9a: do not quote me"


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="symlinks")
def test_a_symlinked_workbench_yaml_outside_the_workspace_is_refused_and_nothing_quoted(tmp_path):
    """A workbench.yaml symlinked to a file outside the workspace was read and ~200 characters of it
    quoted in the error; it is refused, and nothing of the target appears in the message."""
    ws = tmp_path / "ws"
    ws.mkdir()
    secret = tmp_path / "private.txt"
    secret.write_text(SECRET_LINE + "\n" + "x" * 500)
    (ws / "workbench.yaml").symlink_to(secret)
    with pytest.raises(ConfigError) as exc:
        load_config(ws)
    msg = str(exc.value)
    assert "root-secret" not in msg and "do not quote" not in msg
    assert "symlink" in msg and "outside the workspace" in msg and str(ws / "workbench.yaml") in msg


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="symlinks")
def test_a_symlinked_workbench_yaml_inside_the_workspace_is_read(tmp_path):
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "wb.yaml").write_text("model: openai/gpt-4o\n")
    (tmp_path / "workbench.yaml").symlink_to(tmp_path / "conf" / "wb.yaml")
    assert load_config(tmp_path).model == "openai/gpt-4o"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs")
def test_a_workbench_yaml_that_is_not_a_regular_file_is_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "workbench.yaml")  # reading a FIFO nobody writes would block forever
    with pytest.raises(ConfigError) as exc:
        load_config(tmp_path)
    assert "not a regular file" in str(exc.value)
    (tmp_path / "workbench.yaml").unlink()
    (tmp_path / "workbench.yaml").mkdir()
    with pytest.raises(ConfigError) as exc:
        load_config(tmp_path)
    assert "not a regular file" in str(exc.value)


def test_a_huge_workbench_yaml_is_refused_before_parsing(tmp_path):
    write(tmp_path, "# " + "x" * (2 * 1024 * 1024) + "\n")
    with pytest.raises(ConfigError) as exc:
        load_config(tmp_path)
    assert "too large" in str(exc.value)


@pytest.mark.skipif(os.name != "posix", reason="POSIX modes")
def test_a_world_writable_config_folder_is_made_private(caplog):
    """An existing world-writable config folder was left that way: anyone could plant settings or a
    trust record there. It becomes 0700 when the settings are read or written."""
    import stat

    from workbench.config import user_config_dir

    folder = user_config_dir()
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o777)
    load_user_settings()
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert "writable by others" in caplog.text
    os.chmod(folder, 0o777)
    save_user_settings(UserSettings(model="demo"))
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
