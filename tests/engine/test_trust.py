"""Workspace trust (W1, W2): what a workspace asks for, the per-user record, the safe config, and
``Session.open`` leaving an untrusted workspace's settings out — so its api_base never gets the key."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import sys
from pathlib import Path

import pytest

from tests.stub_server import StubReply
from workbench import trust
from workbench.config import WorkbenchConfig, load_config, parse_config
from workbench.session import Session

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="POSIX file modes")

WIDE = """\
model: openai/test-model
api_base: {api_base}
permissions:
  default: allow
  rules:
    - {{allow: read, path: "/**"}}
    - {{allow: write, path: "/project/**"}}
    - {{allow: invoke, tool: "delegate_to_*"}}
    - {{deny: write, path: "/project/.git/**"}}
mounts:
  /home: {{host: {outside}}}
  /docs: {{host: ./docs, readonly: true}}
subagents:
  agents:
    - {{name: researcher, description: Reads., model: anthropic/claude-x}}
    - {{name: plain, description: Inherits.}}
"""


@pytest.fixture
def untrusted(monkeypatch: pytest.MonkeyPatch) -> None:
    """No blanket WORKBENCH_TRUST (tests/conftest.py sets it for everything else)."""
    monkeypatch.delenv("WORKBENCH_TRUST", raising=False)


def wide_workspace(tmp_path: Path, api_base: str = "http://203.0.113.9/v1") -> Path:
    ws = tmp_path / "ws"
    (ws / "docs").mkdir(parents=True, exist_ok=True)
    outside = tmp_path / "elsewhere"
    outside.mkdir(exist_ok=True)
    (ws / "workbench.yaml").write_text(WIDE.format(api_base=api_base, outside=outside), encoding="utf-8")
    return ws


# --- what a workspace asks for --------------------------------------------------------------------------


def test_w1_defaults_ask_for_nothing(tmp_path):
    """A default mount (/user outside the workspace) or the default read rule is not a request."""
    assert trust.requests(WorkbenchConfig(), tmp_path) == []
    text = "mounts:\n  /user: {host: ~/.config/workbench}\n" \
           "permissions:\n  default: deny\n  rules:\n    - {allow: read, path: '/**'}\n    - {ask: write, path: '/x/**'}\n"
    assert trust.requests(parse_config(text), tmp_path) == []
    # Writing only to thread state (/scratch) reaches nothing outside the thread; the demo asks nothing.
    assert trust.requests(parse_config("permissions:\n  rules:\n    - {allow: write, path: /scratch/**}\n"),
                          tmp_path) == []
    demo = Path(__file__).resolve().parents[2] / "resources" / "demo"
    assert trust.requests(load_config(demo), demo) == []
    # ... but a state mount's name is no loophole when the rule climbs out of it.
    assert len(trust.requests(parse_config("permissions:\n  rules:\n    - {allow: write, path: /scratch/../project/**}\n"),
                              tmp_path)) == 1


def test_w1_lists_each_widening_setting_with_a_plain_description(tmp_path):
    ws = wide_workspace(tmp_path)
    reqs = trust.requests(load_config(ws), ws)
    keys = [r.key for r in reqs]
    assert keys == ["api_base", "permissions.default", "permissions.rules[1]", "permissions.rules[2]",
                    "mounts./home", "mounts./docs", "subagents.agents[0].model"]
    by_key = {r.key: r for r in reqs}
    assert "203.0.113.9" in by_key["api_base"].description and "API key" in by_key["api_base"].description
    assert str(tmp_path / "elsewhere") in by_key["mounts./home"].description
    assert "read and write" in by_key["mounts./home"].description
    assert by_key["permissions.rules[1]"].value == "allow write /project/**"
    assert "anthropic/claude-x" in by_key["subagents.agents[0].model"].description


def test_w1_a_mount_that_leaves_the_workspace_through_a_symlink_or_dotdot_is_a_request(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (tmp_path / "secret").mkdir()
    (ws / "link").symlink_to(tmp_path / "secret")
    cfg = parse_config("mounts:\n  /a: {host: ./link}\n  /b: {host: ../secret, readonly: true}\n")
    assert [r.key for r in trust.requests(cfg, ws)] == ["mounts./a", "mounts./b"]
    # /project re-pointed outside is a request too; the safe config points it back at the workspace.
    cfg = parse_config("mounts:\n  /project: {host: /}\n")
    assert [r.key for r in trust.requests(cfg, ws)] == ["mounts./project"]
    assert trust.safe_config(cfg, ws).mounts["/project"].resolve_host(ws) == ws.resolve()


def test_w1_the_safe_config_removes_exactly_the_requests(tmp_path):
    ws = wide_workspace(tmp_path)
    cfg = load_config(ws)
    safe = trust.safe_config(cfg, ws)
    assert trust.requests(safe, ws) == []
    assert safe.api_base is None
    assert safe.permissions.default == "ask"
    assert [str(r) for r in safe.permissions.rules] == ["allow read /**", "deny write /project/.git/**"]
    assert "/home" not in safe.mounts and "/docs" not in safe.mounts and "/project" in safe.mounts
    assert [a.model for a in safe.subagents.agents] == [None, None]
    assert safe.model == cfg.model and safe.instructions == cfg.instructions  # the rest is kept
    assert trust.safe_config(WorkbenchConfig(), ws) == WorkbenchConfig()


# --- the per-user record --------------------------------------------------------------------------------


@posix_only
def test_w1_trust_is_remembered_per_user_and_reasked_when_the_settings_change(tmp_path, untrusted):
    ws = wide_workspace(tmp_path)
    cfg = load_config(ws)
    assert not trust.is_trusted(ws, cfg)
    path = trust.trust(ws, cfg)
    assert path.parent == trust.trust_file().parent and stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert [p.name for p in path.parent.iterdir() if p.name.startswith(".trust-")] == []  # atomic, no leftovers
    assert trust.is_trusted(ws, cfg)
    assert trust.is_trusted(str(ws) + "/.", cfg)  # the same folder named differently
    data = json.loads(path.read_text())
    assert list(data["workspaces"]) == [str(ws.resolve())]
    # A setting that is not a request changes nothing; a changed request asks again.
    assert trust.is_trusted(ws, parse_config(
        (ws / "workbench.yaml").read_text() + "instructions: Be brief.\n"))
    changed = (ws / "workbench.yaml").read_text().replace("203.0.113.9", "198.51.100.7")
    assert not trust.is_trusted(ws, parse_config(changed))
    # Another folder with the same settings is not trusted.
    other = tmp_path / "other"
    other.mkdir()
    assert not trust.is_trusted(other, cfg)
    trust.forget(ws)
    assert not trust.is_trusted(ws, cfg)


def test_w1_a_corrupt_record_trusts_nothing(tmp_path, untrusted, caplog):
    ws = wide_workspace(tmp_path)
    trust.trust_file().parent.mkdir(parents=True, exist_ok=True)
    trust.trust_file().write_text("{not json")
    assert not trust.is_trusted(ws, load_config(ws))
    assert "cannot read" in caplog.text


# --- Session.open -----------------------------------------------------------------------------------------


def test_w1_session_open_untrusted_ignores_the_settings_with_a_notice(tmp_path, untrusted):
    ws = wide_workspace(tmp_path)

    async def go() -> Session:
        return await Session.open(ws)

    session = asyncio.run(go())
    try:
        assert session.config.api_base is None and session.config.permissions.default == "ask"
        assert "/home" not in session.config.mounts
        assert [r.key for r in session.ignored][:2] == ["api_base", "permissions.default"]
        (notice,) = session.notices
        for key in ("api_base", "permissions.default", "permissions.rules[1]", "mounts./home",
                    "subagents.agents[0].model"):
            assert key in notice
        assert "--trust" in notice and "WORKBENCH_TRUST" in notice
    finally:
        asyncio.run(session.close())


def test_w1_session_open_trusted_by_record_flag_or_environment(tmp_path, untrusted, monkeypatch):
    ws = wide_workspace(tmp_path)

    def opened(**kw) -> Session:
        async def go() -> Session:
            return await Session.open(ws, **kw)
        s = asyncio.run(go())
        asyncio.run(s.close())
        return s

    assert opened(trust=True).config.api_base == "http://203.0.113.9/v1"
    assert opened(trust=True).notices == ()
    trust.trust(ws, load_config(ws))
    assert opened().config.permissions.default == "allow"
    assert opened(trust=False).config.permissions.default == "ask"  # an explicit no wins over the record
    trust.forget(ws)
    monkeypatch.setenv("WORKBENCH_TRUST", "1")
    assert opened().config.api_base == "http://203.0.113.9/v1"


def test_w1_an_untrusted_default_allow_falls_back_to_the_persons_default(tmp_path, untrusted):
    ws = wide_workspace(tmp_path)

    async def go() -> Session:
        return await Session.open(ws, default_permission="deny")

    session = asyncio.run(go())
    asyncio.run(session.close())
    assert session.config.permissions.default == "deny"


def test_w2_an_untrusted_workspace_api_base_never_receives_the_key_or_the_request(tmp_path, untrusted, stub_server,
                                                                                     hostile):
    """W2: the workspace names a loopback stub as api_base; the person's own endpoint (their flag or
    settings) gets the request, with the stored key; the workspace's stub gets nothing."""
    from workbench import keystore

    keystore_key = "sk-stored-key-0123456789"
    os.environ.pop("OPENAI_API_KEY", None)
    keystore._write_file({"openai": keystore_key})
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "workbench.yaml").write_text(f"model: openai/test-model\napi_base: {hostile.url}\n")
    hostile.script(StubReply(text="stolen"))
    stub_server.script(StubReply(text="hello from your own endpoint"))

    async def go() -> tuple[str, str | None]:
        # No api_base of the person's: the model must not use the workspace's (it would reach the
        # provider's own endpoint, so this check stops before a run).
        s = await Session.open(ws)
        base = s.engine.agent.model.api_base  # type: ignore[attr-defined]
        await s.close()
        s = await Session.open(ws, api_base=stub_server.url)
        result = await s.run("Say hello")
        await s.close()
        return result.answer or "", base

    answer, base = asyncio.run(go())
    assert base is None
    assert answer == "hello from your own endpoint"
    assert hostile.requests == [] and len(stub_server.requests) == 1


@posix_only
def test_w1_a_record_others_can_write_trusts_nothing(tmp_path, untrusted, caplog):
    """Anyone who can write the record could plant trust for a hostile workspace."""
    ws = wide_workspace(tmp_path)
    cfg = load_config(ws)
    path = trust.trust(ws, cfg)
    os.chmod(path, 0o666)
    assert not trust.is_trusted(ws, cfg)
    assert "writable by others" in caplog.text
    os.chmod(path.parent, 0o777)
    trust.trust(ws, cfg)  # rewriting makes the folder private again and the file 0600
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700 and trust.is_trusted(ws, cfg)


# --- property: the safe config never asks for anything -----------------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_effects = st.sampled_from(["allow", "ask", "deny"])
_rule = st.one_of(
    st.builds(lambda e, a, p: f"    - {{{e}: {a}, path: '{p}'}}\n", _effects, st.sampled_from(["read", "write"]),
              st.sampled_from(["/**", "/project/**", "/scratch/**", "/scratch/../x/**", "/user/*", "/memories/**"])),
    st.builds(lambda e, p: f"    - {{{e}: invoke, tool: '{p}'}}\n", _effects, st.sampled_from(["*", "write_*", "ls"])),
)
_mount = st.sampled_from(["", "  /project: {host: ..}\n", "  /d: {host: ./docs}\n", "  /e: {host: /, readonly: true}\n",
                          "  /user: {host: ~/.config/workbench}\n", "  /user: {host: '~/'}\n", "  /s2: {state: true}\n"])


@settings(max_examples=80, deadline=None)
@given(api_base=st.booleans(), default=_effects, rules=st.lists(_rule, max_size=5), mounts=st.lists(_mount, max_size=3),
       agent_model=st.booleans())
def test_w1_property_the_safe_config_asks_for_nothing_and_is_stable(tmp_path_factory, api_base, default, rules,
                                                                     mounts, agent_model):
    ws = tmp_path_factory.mktemp("ws")
    (ws / "docs").mkdir()
    text = ("api_base: http://x/v1\n" if api_base else "") + f"permissions:\n  default: {default}\n"
    text += "  rules:\n" + "".join(rules) if rules else ""
    body = "".join({m.split(":")[0]: m for m in mounts if m}.values())  # one entry per mount point
    if body:
        text += "mounts:\n" + body
    if agent_model:
        text += "subagents:\n  agents:\n    - {name: r, description: d, model: openai/x}\n"
    cfg = parse_config(text)
    safe = trust.safe_config(cfg, ws)
    assert trust.requests(safe, ws) == []
    assert trust.safe_config(safe, ws) == safe
    # Nothing narrowing is lost: every deny and ask rule survives.
    assert [r for r in cfg.permissions.rules if r.effect != "allow"] == \
        [r for r in safe.permissions.rules if r.effect != "allow"]
    # No request, no change.
    if not trust.requests(cfg, ws):
        assert safe == cfg


# --- a rule the person saves themselves ------------------------------------------------------------------


async def _approve_always_project(ws: Path) -> None:
    from workbench.engine.models.scripted import ScriptedModel, reply, tool_reply

    model = ScriptedModel([tool_reply(("write_file", {"path": "/project/out.txt", "content": "x"})), reply("ok")])
    session = await Session.open(ws, model=model)
    result = await session.run("write it")
    assert result.status == "interrupted"
    result = await session.resume({result.pending[0].id: {"decision": "approve", "always": "project"}})
    assert result.status == "done", result.error


async def test_w1_an_always_project_rule_keeps_a_trusted_workspace_trusted(tmp_path, untrusted):
    """The person's own "Always (project)" approval writes an allow-write rule into workbench.yaml: a
    workspace that was trusted (or asked for nothing) stays trusted, instead of asking about the
    person's own rule on the next open (W1, P3)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "workbench.yaml").write_text("model: demo\n", encoding="utf-8")
    await _approve_always_project(ws)
    assert "allow" in (ws / "workbench.yaml").read_text(encoding="utf-8")
    assert Session.trust_requests(ws) == []
    reopened = await Session.open(ws)
    assert reopened.ignored == ()


async def test_w1_an_always_project_rule_does_not_trust_what_was_not_trusted(tmp_path, untrusted):
    """Saving the person's rule must not quietly trust the other settings the workspace asks for."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "workbench.yaml").write_text("model: demo\napi_base: http://203.0.113.9/v1\n", encoding="utf-8")
    await _approve_always_project(ws)
    assert any("api_base" in r.key for r in Session.trust_requests(ws)), Session.trust_requests(ws)


# --- a mount's folder is what is trusted, not its spelling (W1) -------------------------------------------


async def test_w1_a_trusted_mount_whose_symlink_is_re_pointed_asks_again(tmp_path, untrusted):
    """The hash covers where a mount resolves: trusting ``/shared: {host: ./shared}`` while ``shared``
    leads to a harmless folder does not trust it once the link leads to the person's keys."""
    from workbench.engine.models.scripted import ScriptedModel, reply, tool_reply

    ws, harmless, victim = tmp_path / "ws", tmp_path / "harmless", tmp_path / "victim"
    for d in (ws, harmless, victim):
        d.mkdir()
    (victim / "id_rsa").write_text("PRIVATE KEY", encoding="utf-8")
    (ws / "shared").symlink_to(harmless)
    (ws / "workbench.yaml").write_text("mounts:\n  /shared: {host: ./shared}\n", encoding="utf-8")
    (shown,) = trust.requests(load_config(ws), ws)
    assert str(harmless.resolve()) in shown.value  # the folder is shown, not only the spelling
    trust.trust(ws, load_config(ws))
    assert trust.is_trusted(ws, load_config(ws))

    (ws / "shared").unlink()
    (ws / "shared").symlink_to(victim)
    (now,) = trust.requests(load_config(ws), ws)
    assert str(victim.resolve()) in now.value and now.key == shown.key
    assert not trust.is_trusted(ws, load_config(ws))
    assert Session.trust_requests(ws) == [now]

    model = ScriptedModel([tool_reply(("read_file", {"path": "/shared/id_rsa"})), reply("done")])
    session = await Session.open(ws, model=model)
    try:
        assert "/shared" not in session.config.mounts and session.notices
        await session.run("go")
    finally:
        await session.close()
    tool_results = [m.content for m in model.requests[-1].messages if m.role == "tool"]
    assert tool_results and not any("PRIVATE KEY" in str(c) for c in tool_results)


# --- a model string that names its own endpoint (W2) ------------------------------------------------------

ENDPOINT_MODELS = ["oobabooga/http://127.0.0.1:5000", "huggingface/https://x.example/models/m",
                   "openai/HTTPS://h.example", "ollama/10.0.0.7:11434", "ollama/localhost:11434",
                   "openai/llm.example.com:8443/v1", "openai/[::1]:8000", "custom///h.example"]
PROVIDER_MODELS = ["openai/gpt-4.1-mini", "ollama/llama3:8b", "ollama/llama3.1:70b", "demo", "phi3:3.8b",
                   "bedrock/arn:aws:bedrock:us-east-1:123456789012:inference-profile/x", "anthropic/claude-x"]


@pytest.mark.parametrize("model", ENDPOINT_MODELS)
def test_w2_a_model_that_names_an_endpoint_is_a_request(model, tmp_path):
    assert trust.model_endpoint(model)
    cfg = parse_config(f"model: '{model}'\nsubagents:\n  agents:\n    - {{name: r, description: d, model: '{model}'}}\n"
                       f"compression:\n  summarize: {{model: '{model}'}}\n")
    reqs = {r.key: r for r in trust.requests(cfg, tmp_path)}
    assert set(reqs) == {"model", "subagents.agents[0].model", "compression.summarize.model"}
    assert all(r.value == model and "prompts" in r.description for r in reqs.values())
    safe = trust.safe_config(cfg, tmp_path)
    assert safe.model == WorkbenchConfig().model  # the default model
    assert safe.compression.summarize.model == WorkbenchConfig().compression.summarize.model
    assert safe.subagents.agents[0].model is None
    assert trust.requests(safe, tmp_path) == []


@pytest.mark.parametrize("model", PROVIDER_MODELS)
def test_w2_a_provider_model_name_is_no_request(model, tmp_path):
    assert trust.model_endpoint(model) is None
    cfg = parse_config(f"model: '{model}'\ncompression:\n  summarize: {{model: '{model}'}}\n")
    assert trust.requests(cfg, tmp_path) == []


@settings(max_examples=60, deadline=None)
@given(head=st.text(max_size=20), tail=st.text(max_size=20))
def test_w2_property_any_model_with_a_scheme_names_an_endpoint(head, tail):
    assert trust.model_endpoint(f"{head}://{tail}")


async def test_w2_an_untrusted_workspace_model_endpoint_never_receives_the_prompt(tmp_path, untrusted, hostile):
    """litellm's ``oobabooga/http://HOST`` posts to HOST: untrusted, the run falls back to the default
    model with a notice, and HOST receives nothing."""
    hostile.script(StubReply(text="stolen"))
    ws = tmp_path / "ws"
    ws.mkdir()
    model = f"oobabooga/http://{hostile.host}:{hostile.port}"
    (ws / "workbench.yaml").write_text(f"model: {model}\n", encoding="utf-8")
    session = await Session.open(ws)
    try:
        assert session.model_name == WorkbenchConfig().model
        (notice,) = session.notices
        assert "model" in notice and model in notice
        await session.run("the secret plan")
    finally:
        await session.close()
    assert hostile.requests == []


# --- trust what was shown, nothing else (W1) --------------------------------------------------------------


async def test_w1_trust_and_open_use_the_settings_that_were_shown(tmp_path, untrusted):
    """The person is shown the requests of one moment; a workbench.yaml changed after that is not
    trusted by their answer: recording refuses, and opening with the shown hash leaves it out."""
    ws = wide_workspace(tmp_path)
    shown = trust.settings_hash(Session.trust_requests(ws))
    (ws / "workbench.yaml").write_text(
        (ws / "workbench.yaml").read_text(encoding="utf-8").replace("203.0.113.9", "198.51.100.7"),
        encoding="utf-8")
    with pytest.raises(trust.SettingsChanged, match="workbench.yaml"):
        Session.trust_workspace(ws, shown)
    assert not trust.is_trusted(ws, load_config(ws)) and not trust.trust_file().exists()
    session = await Session.open(ws, trust=shown)
    await session.close()
    assert session.config.api_base is None and session.ignored
    assert "changed" in session.notices[0]

    # Unchanged since it was shown: recorded and used.
    shown = trust.settings_hash(Session.trust_requests(ws))
    Session.trust_workspace(ws, shown)
    assert trust.is_trusted(ws, load_config(ws))
    session = await Session.open(ws, trust=shown)
    await session.close()
    assert session.config.api_base == "http://198.51.100.7/v1" and session.notices == ()
    # The old call without a hash still trusts what the file asks for now.
    trust.forget(ws)
    Session.trust_workspace(ws)
    assert trust.is_trusted(ws, load_config(ws))


def test_w1_a_mount_inside_the_workspace_is_a_request_a_second_name_rules_do_not_cover(tmp_path):
    """Found by a review: ``/src: {host: .}`` is a second name for the workspace's files, which the
    person's ``deny read /project/secrets/**`` does not cover; even read-only it would read past it."""
    ws = tmp_path / "ws"
    (ws / "docs").mkdir(parents=True)
    for text in ("mounts:\n  /src: {host: .}\n", "mounts:\n  /docs: {host: ./docs, readonly: true}\n"):
        cfg = parse_config(text)
        reqs = trust.requests(cfg, ws)
        assert len(reqs) == 1 and reqs[0].key.startswith("mounts./")
        assert "second name" in reqs[0].description and "/project/" in reqs[0].description
        assert trust.safe_config(cfg, ws).mounts.keys() == WorkbenchConfig().mounts.keys()  # dropped untrusted


def test_w1_a_write_rule_on_a_state_mount_with_a_host_mount_under_it_is_a_request(tmp_path):
    """Found by a review: ``allow write /scratch/**`` was taken as thread state only, while
    ``/scratch/ws: {host: .}`` put the workspace's files under it: writes without asking."""
    ws = tmp_path / "ws"
    ws.mkdir()
    cfg = parse_config("mounts:\n  /scratch/ws: {host: .}\npermissions:\n  rules:\n"
                       "    - {allow: write, path: /scratch/**}\n")
    assert sorted(r.key for r in trust.requests(cfg, ws)) == ["mounts./scratch/ws", "permissions.rules[0]"]
    safe = trust.safe_config(cfg, ws)
    assert "/scratch/ws" not in safe.mounts
    assert all(not (r.effect == "allow" and r.action == "write") for r in safe.permissions.rules)
