"""Issue 9: litellm's passes over every message of a request take a fast path only when the original
would find nothing to do, and then give what the original gives (llm_setup._lighten_per_message_passes).

Each fast path is checked against litellm's own function (kept as ``__wrapped__``) over open-ended
message shapes (hypothesis): plain dicts, content parts (text, image, PDF, tool references), developer
and repeated system messages, tool ids carrying a Gemini thought signature or Anthropic's tool-search
prefix, None fields. End to end, the stub receives the same request bodies with and without the fast
paths, a thought signature is still stripped, and a retry sends fresh dicts.
"""

from __future__ import annotations

import asyncio
import copy
import importlib
import sys
import types
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench.engine import llm_setup
from workbench.engine.llm_setup import OwnMessages, import_litellm, own_messages
from workbench.engine.messages import Message, ModelRequest, ToolCall
from workbench.engine.models.base import complete
from workbench.engine.models.litellm_model import LiteLLMModel

SEP = "__thought__"

#: (module, attribute) of every function the fast paths replace (the class method is checked apart).
PLACES = [
    ("litellm.utils", "_remove_thought_signatures_from_messages"),
    ("litellm.utils", "validate_and_fix_openai_messages"),
    ("litellm.main", "validate_and_fix_openai_messages"),
    ("litellm.llms.openai.chat.gpt_transformation", "translate_developer_role_for_openai_compatible_endpoint"),
    ("litellm.llms.openai.openai", "translate_developer_role_for_openai_compatible_endpoint"),
    ("litellm.responses.litellm_completion_transformation.tool_search", "unanswered_tool_search_call_ids"),
    ("litellm.main", "messages_have_pdf_file_part"),
    ("litellm.main", "update_messages_with_model_file_ids"),
    ("litellm.litellm_core_utils.prompt_templates.file_id_utils", "update_messages_with_model_file_ids"),
    ("litellm.litellm_core_utils.prompt_templates.common_utils", "update_messages_with_model_file_ids"),
    ("openai._utils._json", "openapi_dumps"),  # the request body's encoding
    ("openai._base_client", "openapi_dumps"),
]


@pytest.fixture(scope="module", autouse=True)
def _litellm() -> Any:
    return import_litellm()


def _fast(module: str, attr: str) -> Any:
    fn = getattr(importlib.import_module(module), attr)
    assert getattr(fn, "_workbench_fast", False), f"{module}.{attr} has no fast path (another litellm version?)"
    return fn


def _gpt_config() -> Any:
    from litellm.llms.openai.chat.gpt_transformation import OpenAIGPTConfig

    return OpenAIGPTConfig


# -- message shapes ----------------------------------------------------------------------------------

ids = st.sampled_from(["call_1", "call_2", f"call_3{SEP}c2ln", "srvtoolu_01", "toolu_9"])
names = st.sampled_from(["ls", "read_file", "tool_search_tool_regex", "tool_search_tool_bm25"])
text = st.text(max_size=12)
parts = st.lists(st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, text),
    st.just({"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}),
    st.just({"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBERi0xLjQK"}}),
    st.just({"type": "tool_reference", "tool_name": "ls"}),
), min_size=1, max_size=3)
content = st.one_of(text, text, st.none(), parts)
call = st.builds(lambda i, n: {"id": i, "type": "function", "function": {"name": n, "arguments": "{}"}}, ids, names)


@st.composite
def message(draw: Any) -> dict[str, Any]:
    role = draw(st.sampled_from(["system", "user", "user", "assistant", "assistant", "tool", "tool", "developer"]))
    m: dict[str, Any] = {"role": role, "content": draw(content if role != "system" else st.one_of(text, parts))}
    if role == "assistant" and draw(st.booleans()):
        m["tool_calls"] = draw(st.lists(call, min_size=1, max_size=2))
    if role == "tool":
        m["tool_call_id"] = draw(ids)
    if draw(st.integers(0, 5)) == 0:
        m["name"] = None  # a None field litellm drops
    return m


histories = st.lists(message(), max_size=8)
plain_histories = st.lists(st.builds(lambda r, t: {"role": r, "content": t},
                                     st.sampled_from(["user", "assistant", "tool"]), text), max_size=8)


def _same(fast: Any, original: Any, messages: list[dict[str, Any]], *args: Any, **kwargs: Any) -> None:
    pristine = copy.deepcopy(messages)
    a, b = copy.deepcopy(messages), copy.deepcopy(messages)
    try:
        want: Any = original(b, *args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - the fast path must fail the same way
        with pytest.raises(type(exc)):
            fast(a, *args, **kwargs)
        return
    got = fast(a, *args, **kwargs)
    if isinstance(want, (list, tuple)):
        want, got = list(want), list(got)
    assert got == want
    assert a == pristine  # the fast path never edits its input


SETTINGS = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# -- each fast path against litellm's own -------------------------------------------------------------


def test_every_fast_path_is_installed_on_this_litellm() -> None:
    """The version the fast paths were written against gets all of them (a test fails, not speed, when
    litellm moves)."""
    for module, attr in PLACES:
        _fast(module, attr)
    assert getattr(_gpt_config()._transform_messages, "_workbench_fast", False)
    assert llm_setup._signature_separator == SEP


@pytest.mark.parametrize(("module", "attr"), [
    ("litellm.utils", "validate_and_fix_openai_messages"),  # a role each, calls copied, None fields dropped
    ("litellm.responses.litellm_completion_transformation.tool_search", "unanswered_tool_search_call_ids"),
    ("litellm.main", "messages_have_pdf_file_part"),
])
@SETTINGS
@given(messages=histories)
def test_a_fast_path_of_messages_alone_gives_what_litellm_gives(module: str, attr: str,
                                                                 messages: list[dict[str, Any]]) -> None:
    fast = _fast(module, attr)
    _same(fast, fast.__wrapped__, messages)


file_parts = st.lists(st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, text),
    st.builds(lambda i: {"type": "file", "file": {"file_id": i}},
              st.sampled_from(["file-abc", "file-x.pdf", "bGl0ZWxsbV9wcm94eTthcHBsaWNhdGlvbi9wZGY7dW5pZmllZF9pZCx4"])),
    st.just({"type": "file", "file": "not a dict"}),
    st.just({"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBERi0xLjQK"}}),
), min_size=1, max_size=3)


@SETTINGS
@given(messages=st.lists(st.one_of(message(), st.builds(lambda p: {"role": "user", "content": p}, file_parts)),
                         max_size=6),
       mapping=st.sampled_from([{}, {"file-abc": {"m1": "provider-file-1"}}]), model_id=st.sampled_from([None, "m1"]))
def test_the_file_id_pass_gives_what_litellm_gives(messages: list[dict[str, Any]], mapping: dict[str, Any],
                                                    model_id: str | None) -> None:
    """Issue 9, cold start: with no user content but text the pass returns the list without importing
    litellm's proxy types (0.07 s of the first request); with file parts it is litellm's own."""
    fast = _fast("litellm.main", "update_messages_with_model_file_ids")
    a, b = copy.deepcopy(messages), copy.deepcopy(messages)
    want = fast.__wrapped__(messages=b, model_id=model_id, model_file_id_mapping=mapping)
    got = fast(messages=a, model_id=model_id, model_file_id_mapping=mapping)
    assert got == want and a == b  # the same answer and the same edits in place
    plain = all(m.get("role") != "user" or not m.get("content") or type(m["content"]) is str for m in messages)
    if plain:
        assert got is a  # returned as it was: nothing to map


@SETTINGS
@given(histories)
def test_developer_role_translation_gives_what_litellm_gives(messages: list[dict[str, Any]]) -> None:
    fast = _fast("litellm.llms.openai.chat.gpt_transformation",
                 "translate_developer_role_for_openai_compatible_endpoint")
    # a model declaring no system message mid-conversation is where the original hoists and folds
    for api_base, info in (("http://127.0.0.1:8000/v1", None), ("https://api.openai.com/v1", None),
                           ("http://127.0.0.1:8000/v1", {"supports_mid_conversation_system": False})):
        _same(fast, fast.__wrapped__, messages, model="test-model", custom_llm_provider="openai",
              api_base=api_base, model_info=info)


@SETTINGS
@given(histories)
def test_openai_message_transform_gives_what_litellm_gives(messages: list[dict[str, Any]]) -> None:
    config = _gpt_config()()
    fast = type(config)._transform_messages
    _same(lambda m: fast(config, m, "test-model"), lambda m: fast.__wrapped__(config, m, "test-model"), messages)
    got = asyncio.run(fast(config, copy.deepcopy(messages), "test-model", True))
    assert got == asyncio.run(fast.__wrapped__(config, copy.deepcopy(messages), "test-model", True))


def test_a_subclass_with_its_own_part_handling_keeps_litellm_transform() -> None:
    """The transform's fast path assumes litellm's own user-message handling; a config overriding it
    runs the original, which calls the override."""
    seen: list[Any] = []

    class Custom(_gpt_config()):  # type: ignore[misc]
        def _user_message_for_openai(self, message: Any) -> Any:
            seen.append(message)
            return message

    Custom()._transform_messages([{"role": "user", "content": "hi"}], "m")
    assert seen == [{"role": "user", "content": "hi"}]


@SETTINGS
@given(histories)
def test_own_messages_are_marked_only_without_a_thought_signature(messages: list[dict[str, Any]]) -> None:
    """A list carrying a signature anywhere in a tool-call id stays a plain list, so litellm strips it;
    a marked list is one litellm's stripping would leave as it is."""
    plain = [m for m in messages if m["role"] != "developer"]
    marked = own_messages(copy.deepcopy(plain))
    signed = any(SEP in (m.get("tool_call_id") or "") or any(SEP in c["id"] for c in m.get("tool_calls") or ())
                 for m in plain)
    assert isinstance(marked, OwnMessages) is (not signed)
    fast = _fast("litellm.utils", "_remove_thought_signatures_from_messages")
    if not signed:
        assert fast(marked, SEP) is marked
        assert fast.__wrapped__(list(marked), SEP) == plain  # what litellm would have made of it
    else:
        assert fast(marked, SEP) == fast.__wrapped__(copy.deepcopy(plain), SEP)


@SETTINGS
@given(histories)
def test_a_clean_own_list_is_what_litellms_validation_gives_and_passes_as_it_is(messages: list[dict[str, Any]]) -> None:
    """Issue 9: ``own_messages`` marks a list ``clean`` only when litellm's validation would give back the
    same messages (no None field, plain roles, a user's content a string); validating a clean list then
    costs nothing — the same list — and a list that is not clean still gets litellm's treatment."""
    plain = [m for m in messages if m["role"] != "developer"]
    marked = own_messages(copy.deepcopy(plain))
    if not isinstance(marked, OwnMessages):
        return  # a thought signature: litellm's own passes, as before
    validate = _fast("litellm.utils", "validate_and_fix_openai_messages")
    could_be = all(None not in m.values() and (m["role"] != "user" or isinstance(m["content"], str)) for m in plain)
    assert marked.clean is could_be
    try:
        want = validate.__wrapped__(copy.deepcopy(plain))
    except Exception as exc:  # noqa: BLE001 - an invalid user content part: never clean, fails the same way
        assert not marked.clean
        with pytest.raises(type(exc)):
            validate(marked)
        return
    if marked.clean:
        assert validate(marked) is marked and list(marked) == want
    else:
        assert validate(marked) == want


def test_the_wire_form_of_a_history_is_clean() -> None:
    """The messages ``LiteLLMModel`` builds — an assistant's calls without text included — are clean, so
    litellm's validation of a long history is one test, not a copy of every message."""
    built = LiteLLMModel._messages(ModelRequest(system="s", messages=_history()))
    assert isinstance(built, OwnMessages) and built.clean
    # the first call has text beside it, the others none: no content, as litellm's validation leaves them
    assert [("content" in m) for m in built if m.get("tool_calls")] == [True, False, False]


# -- the request body's encoding ------------------------------------------------------------------------

json_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)  # any text but lone surrogates
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-2**63, 2**63 - 1), json_text),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(json_text, inner, max_size=4)),
    max_leaves=12)
wire_messages = st.lists(st.dictionaries(json_text, json_values, min_size=1, max_size=5), min_size=1, max_size=6)


@SETTINGS
@given(wire_messages, st.dictionaries(st.sampled_from(["model", "tools", "stream", "temperature", "stop"]),
                                      st.one_of(json_values, st.floats(allow_nan=False, allow_infinity=False)),
                                      max_size=4), st.booleans())
def test_a_request_body_is_encoded_byte_for_byte_as_the_sdk_encodes_it(messages: list[Any], rest: dict[str, Any],
                                                                      first: bool) -> None:
    """Issue 9: the messages go through orjson, the other keys the SDK's way, in the body's own order:
    the bytes on the wire are the SDK's own, for any text (controls, quotes, emoji, U+2028) and nesting."""
    fast = _fast("openai._utils._json", "openapi_dumps")
    body = {"messages": messages, **rest} if first else {**rest, "messages": messages}
    assert fast(body) == fast.__wrapped__(body)


@SETTINGS
@given(st.lists(st.dictionaries(json_text, st.one_of(json_values, st.floats(allow_nan=False, allow_infinity=False)),
                                min_size=1, max_size=4), min_size=1, max_size=4))
def test_a_number_with_a_fraction_in_messages_is_the_same_json(messages: list[Any]) -> None:
    """Messages hold no floats; if one did, orjson may spell it otherwise (0.00001 for 1e-05): the same value."""
    import json

    fast = _fast("openai._utils._json", "openapi_dumps")
    body = {"model": "m", "messages": messages}
    assert json.loads(fast(body)) == json.loads(fast.__wrapped__(body))


class _Text(str):
    pass


@pytest.mark.parametrize("odd", [
    _Text("a str subclass"), {"when": __import__("datetime").datetime(2026, 12, 1, 12, 0)}, 2**64,
    "lone \udcff surrogate", {1: "a key that is not a string"}, float("nan"),
])
def test_a_body_orjson_would_encode_otherwise_goes_the_sdks_way(odd: Any) -> None:
    """Whatever orjson would encode otherwise than the SDK (or the SDK refuses) gives the SDK's own bytes,
    or its own error. (A NaN: never in messages; in any other key the SDK's refusal stands.)"""
    fast = _fast("openai._utils._json", "openapi_dumps")
    bodies = [{"model": "m", "messages": [{"role": "user", "content": odd}]}] if not isinstance(odd, float) else []
    bodies.append({"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": odd})
    for body in bodies:
        try:
            want = fast.__wrapped__(body)
        except Exception as exc:  # noqa: BLE001 - the fast path must fail the same way
            with pytest.raises(type(exc)):
                fast(body)
            continue
        assert fast(body) == want


def test_a_patch_is_only_installed_over_the_code_it_was_written_against(monkeypatch) -> None:
    """Another litellm version (its function names other helpers) keeps its own function."""
    module = types.ModuleType("workbench_test_fake_litellm")

    def validate(messages):  # noqa: ANN001, ANN202 - a stand-in for another version's function
        return list(messages)

    module.validate = validate  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    assert not llm_setup._install(module.__name__, "validate", {"cleanup_none_field_in_message"}, lambda f: f)
    assert module.validate is validate


# -- end to end: what reaches the server ------------------------------------------------------------


def _history() -> tuple[Message, ...]:
    out: list[Message] = [Message.user("List /project twice.")]
    for i in range(3):
        c = ToolCall.parse(f"call_{i}", "ls", {"path": "/project"})
        out += [Message.assistant("" if i else "Listing.", (c,)), Message.tool(c, f"README.md\nsrc{i}/")]
    return tuple(out)


def _signed_history() -> tuple[Message, ...]:
    c = ToolCall.parse(f"call_g{SEP}c2lnbmF0dXJl", "ls", {"path": "/"})
    return (*_history(), Message.assistant("", (c,)), Message.tool(c, "a\nb"))


def _bodies(stub_server: Any, requests: list[ModelRequest]) -> list[dict[str, Any]]:
    stub_server.script(*({"text": "ok", "usage": [10, 1]} for _ in requests))
    model = LiteLLMModel("openai/test-model", stub_server.url, "sk-test")

    async def run() -> None:
        for r in requests:
            await complete(model, r)

    before = len(stub_server.requests)
    asyncio.run(run())
    return [{k: v for k, v in b.items() if k in ("messages", "tools", "model")} for b in stub_server.requests[before:]]


def test_the_server_gets_the_same_requests_with_and_without_the_fast_paths(stub_server, monkeypatch) -> None:
    """The body litellm sends is the same whichever path built it; a Gemini thought signature in a tool
    call id is stripped before a non-Gemini model sees it, as litellm does."""
    requests = [ModelRequest(system="Be brief.", messages=h) for h in (_history(), _signed_history())]
    fast = _bodies(stub_server, requests)
    for module, attr in PLACES:
        monkeypatch.setattr(importlib.import_module(module), attr, _fast(module, attr).__wrapped__)
    monkeypatch.setattr(_gpt_config(), "_transform_messages", _gpt_config()._transform_messages.__wrapped__)
    original = _bodies(stub_server, requests)
    assert fast == original
    signed = fast[1]["messages"]
    assert not any(SEP in str(m) for m in signed) and signed[-1]["tool_call_id"] == "call_g"


def test_a_retry_sends_fresh_dicts(stub_server, monkeypatch) -> None:
    """litellm may edit a call's dicts in place once they are marked as its own: a retried attempt is
    built again, and the server sees the same messages both times."""
    built: list[Any] = []
    original = LiteLLMModel._messages

    def spy(request: ModelRequest) -> Any:
        built.append(original(request))
        return built[-1]

    monkeypatch.setattr(LiteLLMModel, "_messages", staticmethod(spy))
    stub_server.script({"status": 503}, {"text": "ok", "usage": [10, 1]})
    model = LiteLLMModel("openai/test-model", stub_server.url, "sk-test", backoff_base=0.01)
    before = len(stub_server.requests)
    asyncio.run(complete(model, ModelRequest(system="s", messages=_history())))
    sent = stub_server.requests[before:]
    assert len(sent) == 2 and sent[0]["messages"] == sent[1]["messages"]
    assert len(built) == 2 and built[0] is not built[1] and isinstance(built[1], OwnMessages)
