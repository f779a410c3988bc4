"""F4, R10: a key the process knows never reaches the prompt or the thread store through a tool result.

An unsandboxed command runs with the person's rights and can print the key file; a tool server can echo
what it was given. Whatever the tool, its result is scrubbed of every key this process knows — the keys
it looked up, those in the provider variables, and every key of the key file once that file is read —
compared exactly, so a key-shaped text that is no key (a test fixture's ``sk-…``) stays as it is.
"""

from __future__ import annotations

import json
from typing import Any

from workbench import keystore, redact
from workbench.engine.agent import Agent, Engine
from workbench.engine.models.scripted import ScriptedModel, reply, tool_reply
from workbench.engine.store import Store
from workbench.engine.tools import Tool, schema

KEY = "sk-live-0123456789abcdefXYZ"


async def _cat(args: dict[str, Any], ctx: Any) -> str:
    """What ``cat`` of a file holding ``text`` (with ``KEY`` for ``$KEY``) prints."""
    return "contents: " + args["text"].replace("$KEY", KEY)


CAT = Tool("cat", "Print a file.", schema({"text": {"type": "string"}}, ["text"]), _cat, changes_outside=False)


def _stored_texts(engine: Engine) -> str:
    """Every table of the store as SQL text (the short messages here are stored unpacked)."""
    with engine.store.transaction() as db:
        return "\n".join(db.iterdump())


async def test_F4_a_known_key_printed_by_a_tool_is_redacted_in_the_result_the_prompt_and_the_store(tmp_path, monkeypatch):
    monkeypatch.setattr(redact, "_known", set())
    redact.remember(KEY)
    model = ScriptedModel([tool_reply(("cat", {"text": "api_key=$KEY!"})), reply("done")])
    engine = Engine(Agent(model, instructions="BASE", tools=(CAT,)), Store.for_workspace(tmp_path))
    result = await engine.run("t", "go")
    assert result.status == "done"
    messages = engine.store.latest_checkpoint("t").state["messages"]
    tool_result = next(m for m in messages if m["role"] == "tool")
    assert tool_result["content"] == f"contents: api_key={redact.REDACTED}!"
    second_request = model.requests[1]
    assert KEY not in json.dumps([m.to_dict() for m in second_request.messages])
    dump = _stored_texts(engine)
    assert "contents: api_key=" in dump and KEY not in dump


async def test_F4_key_shaped_text_that_is_no_known_key_is_left_as_the_tool_returned_it(tmp_path, monkeypatch):
    monkeypatch.setattr(redact, "_known", set())
    fixture = "sk-test-notarealkey000000"
    model = ScriptedModel([tool_reply(("cat", {"text": fixture})), reply("done")])
    engine = Engine(Agent(model, instructions="BASE", tools=(CAT,)), Store.for_workspace(tmp_path))
    await engine.run("t", "go")
    messages = engine.store.latest_checkpoint("t").state["messages"]
    assert next(m for m in messages if m["role"] == "tool")["content"] == f"contents: {fixture}"


def test_F4_every_key_of_the_key_file_is_known_once_the_file_is_read(monkeypatch):
    monkeypatch.setattr(redact, "_known", set())
    monkeypatch.setattr(keystore, "_keyring_backend", lambda: None)
    keystore.save_key("openai", "sk-openai-key-000111222")
    keystore.save_key("anthropic", "sk-ant-key-333444555666")
    redact._known.clear()
    assert keystore.load_key("openai") == "sk-openai-key-000111222"
    # the other provider's key was never asked for, but a command printing the file shows it too
    assert redact.scrub_known("x sk-ant-key-333444555666 y") == f"x {redact.REDACTED} y"
