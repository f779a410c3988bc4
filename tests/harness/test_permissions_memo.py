"""Remembered path judgements answer exactly as computing them afresh (P1, P5; issue 9).

``_canonical`` and ``match_path`` keep their recent answers (a step's ``ls`` judged the same paths
eleven times). For any pattern and path — hostile spellings, other Unicode forms, in any order and
with the memory full — the remembered answer must be the fresh one, and a judgement must follow a
rule change at once (rules are never remembered, only these pure functions).
"""

from __future__ import annotations

import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.config import PermissionRule
from workbench.harness import permissions
from workbench.harness.permissions import PermissionsMiddleware, _canonical, match_path

NAMES = st.sampled_from(["a", "b", "src", ".", "..", "", "x y", "é", unicodedata.normalize("NFD", "é"), "*", ".env",
                         "keys", "a.py", "b.md", "[x]", "{a,b}"])
PATHS = st.lists(NAMES, max_size=6).map(lambda parts: "/" + "/".join(parts)) | st.text(max_size=12)
PATTERNS = st.sampled_from(["/**", "/project/**", "/project/*.py", "/project/src/**", "**/.env", "/project/{a,b}/**",
                            "/project/[x]", "/*/a.py", "/project/é/**", "/project"])


def _fresh_canonical(path: str) -> str:
    return permissions._spell(path)


def _fresh_match(pattern: str, path: str) -> bool:
    return permissions._match_path(pattern, path)


@settings(max_examples=600, deadline=None)
@given(st.lists(st.tuples(PATTERNS, PATHS), min_size=1, max_size=30))
def test_P5_remembered_answers_are_the_fresh_ones(pairs: list[tuple[str, str]]) -> None:
    for pattern, path in pairs + pairs[::-1]:  # asked again, in another order: from memory now
        assert _canonical(path) == _fresh_canonical(path)
        assert match_path(pattern, "/project" + path) == _fresh_match(pattern, "/project" + path)
        assert match_path(pattern, path) == _fresh_match(pattern, path)


def test_P5_a_full_memory_still_answers_right() -> None:
    for i in range(10_000):  # more paths than either memory keeps
        path = f"/project/f{i}/../g{i}.py"
        assert _canonical(path) == f"/project/g{i}.py"
        assert match_path("/project/*.py", path)
        assert not match_path("/project/src/**", path)
    assert permissions._canonical_str.cache_info().currsize <= 4096
    assert permissions._match_path_str.cache_info().currsize <= 8192


def test_P1_a_rule_change_applies_at_once_to_paths_judged_before() -> None:
    perms = PermissionsMiddleware([PermissionRule("allow", "read", "/**")], "ask")
    for _ in range(3):
        assert perms.judge("read", "/project/.env", has_paths=True).effect == "allow"
    perms.rules = (PermissionRule("deny", "read", "**/.env"), *perms.rules)
    assert perms.judge("read", "/project/.env", has_paths=True).effect == "deny"
    assert perms.judge("read", "/project/./x/../.env", has_paths=True).effect == "deny"
    assert perms.judge("read", "/project/a.py", has_paths=True).effect == "allow"


def test_P5_a_string_subclass_is_judged_afresh_and_never_answers_for_a_plain_string() -> None:
    class Marked(str):
        pass

    marked = Marked("/project/a/../b.py")
    assert _canonical(marked) == "/project/b.py"
    plain = _canonical("/project/b.py")
    assert type(plain) is str
