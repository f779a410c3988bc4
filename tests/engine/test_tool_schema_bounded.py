"""M5, R6, F3: a tool's JSON schema may come from an MCP server (X2), so checking a call's arguments
against it is bounded work on untrusted input, on the engine's loop (the window's GUI loop).

- Its regular expressions (``pattern``, ``patternProperties`` and the ``additionalProperties`` that
  depends on them) run in RE2, in linear time: ``"^(a+)+$"`` against 30 characters held Python's ``re``
  — and the loop, so Stop could not work — for ~30 s, one more character doubling it. A pattern RE2
  cannot compile (a backreference) is not checked here, never run by ``re``. A subschema's
  ``$schema`` cannot switch the check back to jsonschema's stock classes.
- A schema whose check grows faster than the arguments (a chain of ``anyOf`` of ``$ref``s: 2**n steps)
  stops at a step budget, and ``uniqueItems`` takes one pass instead of comparing every pair.
- A ``$ref`` is never fetched, and one that points to nothing (or a loop of them) is the call's error
  for the model — never a failed run.
- Built-in tools (no regular expressions, no ``$ref``) are checked exactly as before.
"""

from __future__ import annotations

import re
import time
from typing import Any

import jsonschema
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from workbench.engine.agent import Agent, Engine
from workbench.engine.messages import ModelRequest, ToolCall
from workbench.engine.models.scripted import ScriptedModel, reply, tool_reply
from workbench.engine.store import Store
from workbench.engine.tools import Tool, schema, validate_call

EVIL = "^(a+)+$"  # exponential backtracking in Python's re on "aaa…a!"


async def _ok(args: dict[str, Any], ctx: Any) -> str:
    return "ran"


def tool(parameters: dict[str, Any], name: str = "t") -> Tool:
    return Tool(name, "A tool.", parameters, _ok)


def check(parameters: dict[str, Any], arguments: Any) -> str | None:
    t = tool(parameters)
    return validate_call(t, ToolCall.parse("c1", t.name, arguments), [t.name])


def string_with(**keywords: Any) -> dict[str, Any]:
    return {"type": "object", "properties": {"s": {"type": "string", **keywords}}}


@pytest.fixture
def no_python_re_search(monkeypatch: pytest.MonkeyPatch) -> None:
    """jsonschema's stock keywords match with ``re.search``: any call to it fails the test."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"Python's re ran a schema's regular expression: {args[0]!r}")

    monkeypatch.setattr(re, "search", refuse)


# -- F3, R6: linear time ---------------------------------------------------------------------------------


@pytest.mark.timeout(30)
@pytest.mark.parametrize("parameters, arguments", [
    (string_with(pattern=EVIL), {"s": "a" * 60 + "!"}),
    ({"type": "object", "patternProperties": {EVIL: {"type": "integer"}}}, {"a" * 60 + "!": "x", "aaa": "x"}),
    ({"type": "object", "patternProperties": {EVIL: {"type": "integer"}}, "additionalProperties": False},
     {"a" * 60 + "!": 1}),
    ({"type": "object", "propertyNames": {"pattern": EVIL}}, {"a" * 60 + "!": 1}),
    # a subschema's $schema made jsonschema pick its stock Draft 7 class, whose keywords run re
    ({"type": "object", "properties": {"s": {"$schema": "http://json-schema.org/draft-07/schema#",
                                             "type": "string", "pattern": EVIL}}}, {"s": "a" * 60 + "!"}),
    ({"type": "object", "properties": {"s": {"$ref": "#/$defs/evil"}},
      "$defs": {"evil": {"$schema": "https://json-schema.org/draft/2020-12/schema", "pattern": EVIL}}},
     {"s": "a" * 60 + "!"}),
], ids=["pattern", "patternProperties", "additionalProperties", "propertyNames", "$schema", "$ref-$schema"])
def test_R6_F3_a_servers_regular_expression_runs_in_linear_time(parameters, arguments, no_python_re_search):
    start = time.monotonic()
    error = check(parameters, arguments)
    assert time.monotonic() - start < 5  # Python's re: longer than the universe's age
    assert error is not None and error.startswith("Error: invalid arguments for 't'"), error


@pytest.mark.timeout(30)
def test_R6_a_30_character_argument_no_longer_holds_the_loop_for_half_a_minute():
    """The reviewer's case itself, with Python's re available: the answer comes at once."""
    start = time.monotonic()
    for n in (29, 30, 1000, 100_000):
        error = check(string_with(pattern=EVIL), {"s": "a" * n + "!"})
        assert error and "does not match" in error
    assert check(string_with(pattern=EVIL), {"s": "a" * 100_000}) is None
    assert time.monotonic() - start < 5


def test_F3_what_re2_cannot_compile_is_not_checked_here_and_never_run_by_re(no_python_re_search):
    backreference = r"^(a+)\1$"
    assert check(string_with(pattern=backreference), {"s": "anything"}) is None
    lookahead = {"type": "object", "patternProperties": {"^(?=x)": {"type": "integer"}},
                 "additionalProperties": False}
    assert check(lookahead, {"xy": "not an integer", "other": 1}) is None  # server checks it


def test_M5_patterns_still_check_what_they_say(no_python_re_search):
    assert check(string_with(pattern="^[a-z]+$"), {"s": "abc"}) is None
    error = check(string_with(pattern="^[a-z]+$"), {"s": "ABC"})
    assert error == "Error: invalid arguments for 't': s: 'ABC' does not match '^[a-z]+$'"
    pp = {"type": "object", "properties": {"name": {"type": "string"}},
          "patternProperties": {"^x-": {"type": "integer"}}, "additionalProperties": False}
    assert check(pp, {"name": "n", "x-a": 1}) is None
    assert "x-a: 'one' is not of type 'integer'" in (check(pp, {"x-a": "one"}) or "")
    assert "'other' does not match any of the regexes: '^x-'" in (check(pp, {"other": 1}) or "")


def test_M5_format_is_an_annotation_not_a_check():
    assert check(string_with(format="email"), {"s": "not an email"}) is None
    assert check(string_with(format="regex"), {"s": "(unbalanced"}) is None


LINEAR_PATTERNS = ["^[a-c]+$", "b", "^a?b*c$", "(ab|ba)+", "^x{2,3}", "[0-9]-[a-z]", "^$", "a.c", "^(foo|bar)"]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(LINEAR_PATTERNS), st.text(alphabet="abcx09-fobr ", max_size=12))
def test_M5_re2_agrees_with_jsonschemas_own_check_on_plain_patterns(pattern, text):
    stock = jsonschema.Draft202012Validator(string_with(pattern=pattern)).is_valid({"s": text})
    assert (check(string_with(pattern=pattern), {"s": text}) is None) == stock


def branching(levels: int, keyword: str = "anyOf") -> dict[str, Any]:
    """A 2 KB schema whose check takes 2**levels steps: each level applies the next one twice."""
    defs: dict[str, Any] = {f"d{i}": {keyword: [{"$ref": f"#/$defs/d{i + 1}"}, {"$ref": f"#/$defs/d{i + 1}"}]}
                            for i in range(levels)}
    defs[f"d{levels}"] = {"type": "string"}
    return {"type": "object", "properties": {"a": {"$ref": "#/$defs/d0"}}, "$defs": defs}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("keyword", ["anyOf", "allOf", "oneOf"])
def test_R6_F3_a_schema_whose_check_grows_exponentially_is_cut_short(keyword):
    """16 levels held the loop 17 s; 40 would take years. The check stops at its step budget."""
    start = time.monotonic()
    error = check(branching(40, keyword), {"a": 1})
    assert time.monotonic() - start < 10
    assert error is not None and error.startswith("Error: the input schema of 't' cannot be checked: checking "
                                                  "these arguments against it takes too long"), error
    assert check(branching(4, keyword), {"a": 1}) is not None  # a shallow one is checked as ever
    assert check(branching(4, keyword), {"a": "s"}) is None or keyword == "oneOf"


@pytest.mark.timeout(60)
def test_F3_unique_items_takes_one_pass():
    """jsonschema compares every pair of objects: 4,000 took 37 s."""
    parameters = {"type": "object", "properties": {"a": {"type": "array", "uniqueItems": True}}}
    start = time.monotonic()
    assert check(parameters, {"a": [{"k": i} for i in range(20_000)]}) is None
    error = check(parameters, {"a": [{"k": i} for i in range(20_000)] + [{"k": 5.0}]})
    assert error is not None and error.endswith("has non-unique elements")
    assert time.monotonic() - start < 10


ITEM = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-2, 2), st.sampled_from([0.0, 1.0, 1.5]),
                              st.sampled_from(["", "a"])),
                    lambda inner: st.one_of(st.lists(inner, max_size=2),
                                            st.dictionaries(st.sampled_from("ab"), inner, max_size=2)),
                    max_leaves=4)


def json_equal(a: Any, b: Any) -> bool:
    """JSON Schema's equality: true is not 1, 1 is 1.0, arrays and objects item by item."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


@settings(max_examples=300, deadline=None)
@given(st.lists(ITEM, max_size=5))
@example([[True, 1], [True, True], [True, 1]])  # jsonschema 4 calls these unique (its sort mixes true and 1)
def test_M5_unique_items_agrees_with_json_schemas_equality(items):
    """Checked against the definition (every pair compared), not jsonschema's own check, which a seed
    showed wrong: it sorts the items, and Python's sort takes true for 1, so equal items end up apart."""
    parameters = {"type": "object", "properties": {"a": {"type": "array", "uniqueItems": True}}}
    unique = not any(json_equal(x, y) for i, x in enumerate(items) for y in items[i + 1:])
    assert (check(parameters, {"a": items}) is None) == unique


# -- M5, X3: a $ref that points to nothing ----------------------------------------------------------------


@pytest.mark.timeout(30)
@pytest.mark.parametrize("ref", ["#/$defs/missing", "#no-anchor", "other.json", "http://127.0.0.1:9/x.json",
                                 "file:///etc/passwd"])
def test_M5_an_unresolvable_ref_is_an_error_for_the_model_and_is_never_fetched(ref, monkeypatch):
    import urllib.request

    def no_fetch(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"a schema's $ref was fetched: {args!r}")

    monkeypatch.setattr(urllib.request, "urlopen", no_fetch)
    error = check({"type": "object", "properties": {"s": {"$ref": ref}}}, {"s": 1})
    assert error is not None and error.startswith("Error: the input schema of 't' cannot be checked: "), error
    assert repr(ref) in error and "Traceback" not in error


def test_M5_a_loop_of_refs_is_an_error_for_the_model():
    error = check({"$ref": "#"}, {"s": 1})
    assert error is not None and error.startswith("Error: the input schema of 't' cannot be checked: "), error


def test_M5_refs_inside_the_schema_and_to_a_drafts_meta_schema_resolve():
    local = {"type": "object", "properties": {"s": {"$ref": "#/$defs/word"}}, "$defs": {"word": {"type": "string"}}}
    assert check(local, {"s": "w"}) is None
    assert "is not of type 'string'" in (check(local, {"s": 1}) or "")
    meta = {"type": "object", "properties": {"s": {"$ref": "https://json-schema.org/draft/2020-12/schema"}}}
    assert check(meta, {"s": {"type": "string"}}) is None


async def test_M5_R6_a_run_whose_tool_schema_cannot_be_checked_goes_on(tmp_path):
    """The whole run failed with a traceback (jsonschema's _WrappedReferencingError) when the model
    called such a tool; now the model reads why and the run ends ``done``."""
    bad = tool({"type": "object", "properties": {"s": {"$ref": "#/$defs/missing"}}}, name="bad")
    model = ScriptedModel([tool_reply(ToolCall.parse("c1", "bad", {"s": 1})), reply("recovered")])
    engine = Engine(Agent(model, instructions="BASE", tools=(bad,)), Store.for_workspace(tmp_path))
    result = await engine.run("t", "go")
    assert result.status == "done" and result.answer == "recovered", result.error
    request: ModelRequest = model.requests[1]
    texts = [m.content for m in request.messages if m.role == "tool"]
    assert texts == ["Error: the input schema of 'bad' cannot be checked: its $ref '#/$defs/missing' points to "
                     "nothing in the schema (a schema's references are never fetched)"]


# -- built-in tools: unchanged ----------------------------------------------------------------------------

PROPERTY = st.sampled_from([{"type": "string"}, {"type": "integer"}, {"type": ["string", "null"]},
                            {"type": "array", "items": {"type": "string"}}, {"type": "boolean", "default": False},
                            {"type": "string", "enum": ["a", "b"]}, {"type": "integer", "minimum": 1}])
VALUE = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.text(max_size=3),
                  st.lists(st.text(max_size=2), max_size=2), st.dictionaries(st.text(max_size=2), st.integers(),
                                                                             max_size=2))


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["path", "x", "n", "flag"]), PROPERTY, min_size=1, max_size=3),
       st.data())
def test_M5_a_built_in_shaped_schema_reports_what_jsonschema_always_reported(properties, data):
    parameters = schema(properties, data.draw(st.lists(st.sampled_from(sorted(properties)), unique=True)))
    arguments = data.draw(st.dictionaries(st.sampled_from(["path", "x", "n", "flag", "extra"]), VALUE, max_size=4))
    stock = sorted(jsonschema.Draft202012Validator(parameters).iter_errors(arguments),
                   key=lambda e: list(e.absolute_path))
    error = check(parameters, arguments)
    if not stock:
        assert error is None
    else:
        parts = [f"{'/'.join(str(p) for p in e.absolute_path) or '(arguments)'}: {e.message}" for e in stock[:5]]
        assert error == "Error: invalid arguments for 't': " + "; ".join(parts)
