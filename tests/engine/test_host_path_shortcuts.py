"""The host backend's path shortcuts answer exactly as the general code they stand in for (F4, P5).

Every listed entry asks whether it is protected and what its virtual path is (issue 9: the ``ls`` of
every step). ``_is_protected`` tests all protected folders with one ``startswith`` and ``_virtual``
slices a normal path below the root instead of calling ``relpath``; for any path, hostile spellings
included, both must agree with the plain definitions below.
"""

from __future__ import annotations

import os

from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.backends.host import HostBackend

SEGMENTS = st.sampled_from(["a", "b", "src", ".", "..", "", "x y", "é", ".workbench", "keys", "a.b", "..a"])


def _reference_virtual(root: str, real: str) -> str:
    rel = os.path.relpath(real, root)
    return "/" if rel == os.curdir else "/" + "/".join(rel.split(os.sep))


def _reference_protected(protected: tuple[str, ...], real: str) -> bool:
    key = os.path.normcase(real)
    return any(key == p or key.startswith(p.rstrip(os.sep) + os.sep) for p in protected)


def _paths(root: str):
    below = st.lists(SEGMENTS, max_size=6).map(lambda parts: os.sep.join([root, *parts]))
    trailing = below.map(lambda p: p + os.sep)
    sibling = st.lists(SEGMENTS, max_size=3).map(lambda parts: os.sep.join([root + "x", *parts]))
    elsewhere = st.lists(SEGMENTS, max_size=4).map(lambda parts: os.sep + os.sep.join(parts))
    return st.one_of(below, trailing, sibling, elsewhere, st.just(root), st.just(os.path.dirname(root)))


def test_P5_virtual_paths_match_relpath(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    backend = HostBackend(root)
    real_root = os.path.realpath(root)
    assert not backend._icase  # the shortcut is for case-sensitive disks; others keep the general code

    @settings(max_examples=400, deadline=None)
    @given(_paths(real_root))
    def check(real: str) -> None:
        assert backend._virtual(real) == _reference_virtual(real_root, real)

    check()


def test_F4_protected_folders_match_the_plain_definition(tmp_path):
    root = tmp_path / "ws"
    for folder in ("a/.workbench", "keys", "src/a.b"):
        (root / folder).mkdir(parents=True)
    protected = [root / "a" / ".workbench", root / "keys", root / "src" / "a.b"]
    backend = HostBackend(root, protected=protected)
    real_root = os.path.realpath(root)
    plain = tuple(os.path.normcase(os.path.realpath(p)) for p in protected)

    @settings(max_examples=400, deadline=None)
    @given(_paths(real_root))
    def check(real: str) -> None:
        assert backend._is_protected(real) == _reference_protected(plain, real)

    check()
    assert backend._is_protected(os.path.join(real_root, "keys"))
    assert backend._is_protected(os.path.join(real_root, "keys", "k"))
    assert not backend._is_protected(os.path.join(real_root, "keysx"))
