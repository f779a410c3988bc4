"""``backends/realpath.py``: ``os.path.realpath`` with a bound on its work, for the window's Save verdict
(P5 on the GUI thread). It must answer exactly what ``os.path.realpath`` answers, for any tree of
folders, files and links (loops, dangling links, ``..`` through links, absolute targets), and stop
after the components it was allowed instead of resolving a hostile chain for seconds."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from workbench.backends import realpath as bounded
from workbench.backends.realpath import TooManySteps, realpath

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX symlinks")

NAMES = ("a", "b", "c")
# Link targets: relative, through "..", into a subfolder, absolute (ROOT is the example's folder), loops.
TARGETS = (".", "..", "a", "b", "c", "a/b", "../a", "b/../c", "zz", "ROOT/a", "ROOT/b/c", "ROOT", "/", "a/..")
KINDS = st.sampled_from(("dir", "file", "none")) | st.tuples(st.just("link"), st.sampled_from(TARGETS))
SEGMENTS = st.sampled_from((*NAMES, ".", "..", "zz"))


def build(root: Path, tree: dict[str, object]) -> None:
    for rel, kind in sorted(tree.items(), key=lambda item: item[0].count("/")):
        path = root / rel
        if not path.parent.is_dir() or path.exists() or path.is_symlink():
            continue  # its folder is a file or a link here: that entry does not exist
        if kind == "dir":
            path.mkdir()
        elif kind == "file":
            path.write_text("x")
        elif isinstance(kind, tuple):
            os.symlink(kind[1].replace("ROOT", str(root)), path)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tree=st.dictionaries(st.sampled_from([*NAMES, *(f"{p}/{n}" for p in NAMES for n in NAMES)]), KINDS,
                            max_size=9),
       query=st.lists(SEGMENTS, min_size=0, max_size=6), absolute=st.booleans())
@example(tree={"a": ("link", "a")}, query=["a", "b"], absolute=True)  # a loop
@example(tree={"a": ("link", "b"), "b": ("link", "a")}, query=["a", "..", "c"], absolute=True)
@example(tree={"a": "dir", "a/b": ("link", "..")}, query=["a", "b", "b", "..", "a"], absolute=True)
@example(tree={"a": ("link", "ROOT/b/c"), "b": "dir", "b/c": ("link", "../a")}, query=["a"], absolute=True)
def test_it_answers_what_os_path_realpath_answers(tree, query, absolute):
    root = Path(tempfile.mkdtemp(prefix="wbrp-")).resolve()
    cwd = os.getcwd()
    try:
        build(root, tree)
        os.chdir(root)  # a relative query is resolved from the current folder, as realpath does
        path = os.path.join(str(root) if absolute else "", *query) if query else (str(root) if absolute else ".")
        assert realpath(path) == os.path.realpath(path)
        try:
            assert realpath(path, 3) == os.path.realpath(path)  # within its bound, the same answer
        except TooManySteps:
            pass
    finally:
        os.chdir(cwd)
        shutil.rmtree(root, ignore_errors=True)


def hostile_chain(root: Path, links: int, width: int) -> Path:
    """``start`` -> l1 -> l2 ... each link's target ``width`` components of ``a`` (a link to ".") first."""
    os.symlink(".", root / "a")
    (root / "end.md").write_text("x")
    for i in range(links, 0, -1):
        os.symlink("a/" * width + (f"l{i + 1}" if i < links else "end.md"), root / f"l{i}")
    os.symlink("l1", root / "start")
    return root / "start"


def test_a_hostile_chain_is_given_up_after_its_bound_with_that_many_lookups(tmp_path, monkeypatch):
    start = hostile_chain(tmp_path, links=40, width=1000)  # 40,000 components: ~0.1 s here, unbounded
    assert realpath(str(start)) == os.path.realpath(start) == str(tmp_path / "end.md")
    looked = []
    real_lstat = os.lstat
    mine = str(tmp_path)
    monkeypatch.setattr(bounded.os, "lstat", lambda p: (str(p).startswith(mine) and looked.append(p)) or real_lstat(p))
    with pytest.raises(TooManySteps, match="more than 500 path components"):
        realpath(str(start), 500)
    assert len(looked) <= 500


def test_every_component_counts_so_links_spelled_long_cannot_outrun_the_bound(tmp_path, monkeypatch):
    """``./././…`` (a link to "." spelled 4 KB long) has no name to look up, but each is still a step:
    2,000 such links, each named once, made 0.44 s of work within a bound that counted names only."""
    names = [f"{a}{b}" for a in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ" for b in "abcdefghijklmnopqrstuvwxyz"]
    names = names[:600]
    for name in names:
        os.symlink("./" * 2040 + ".", tmp_path / name)
    (tmp_path / "end.md").write_text("x")
    os.symlink("/".join(names) + "/end.md", tmp_path / "start")
    assert realpath(str(tmp_path / "start")) == os.path.realpath(tmp_path / "start") == str(tmp_path / "end.md")
    looked = []
    real_lstat = os.lstat
    mine = str(tmp_path)
    monkeypatch.setattr(bounded.os, "lstat", lambda p: (str(p).startswith(mine) and looked.append(p)) or real_lstat(p))
    with pytest.raises(TooManySteps, match="more than 2048 path components"):
        realpath(str(tmp_path / "start"), 2048)
    assert len(looked) < 10  # given up within the first link's 2,041 components, not after 2,048 names


def test_a_path_grown_long_through_links_is_given_up_before_its_copies_grow_square(tmp_path):
    """Each step copies the path so far: links whose long names (4,000 characters, which ``lstat`` refuses
    at once) nest made 0.5 s and 200 MB within 2,048 steps. Past 8,192 characters the walk gives up."""
    n = 60
    for i in range(1, n + 1):
        os.symlink((f"L{i + 1}/" if i < n else "./") + "x" * 4000, tmp_path / f"L{i}")
    os.symlink("L1/" + "/".join(["a", ".."] * 200), tmp_path / "L0")
    answer = realpath(str(tmp_path / "L0"))
    assert answer == os.path.realpath(tmp_path / "L0") and len(answer) > 200_000  # unbounded: the same
    with pytest.raises(TooManySteps, match="grows past 8192 characters"):
        realpath(str(tmp_path / "L0"), 2048)


@pytest.mark.skipif(sys.version_info >= (3, 13), reason="3.13's realpath is iterative: no recursion to exhaust")
def test_links_nested_deeper_than_python_can_follow_are_refused_not_a_crash(tmp_path):
    depth = sys.getrecursionlimit() + 50
    for i in range(depth):
        os.symlink(f"n{i + 1}", tmp_path / f"n{i}")
    (tmp_path / f"n{depth}").write_text("x")
    with pytest.raises(RecursionError):
        os.path.realpath(tmp_path / "n0")  # what the standard one does
    with pytest.raises(TooManySteps, match="nested too deep"):
        realpath(str(tmp_path / "n0"))


def _other_pythons() -> list[str]:
    """Interpreters of other minor versions on this machine (pyenv's, or on PATH), 3.11 and later."""
    found: dict[str, str] = {}
    candidates = [shutil.which(f"python3.{minor}") for minor in range(11, 16)]
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    candidates += [str(p) for p in sorted(pyenv.glob("3.*/bin/python3"))] if pyenv.is_dir() else []
    for exe in filter(None, candidates):
        try:
            version = subprocess.run([exe, "-c", "import sys; print(sys.version_info[:2] >= (3, 11), sys.version[:4])"],
                                     capture_output=True, text=True, timeout=30).stdout.split()
        except (OSError, subprocess.SubprocessError):
            continue
        if version and version[0] == "True" and version[1] != sys.version[:4]:
            found.setdefault(version[1], exe)
    return sorted(found.values())


CROSS_CHECK = """
import importlib.util, os, random, shutil, sys, tempfile
spec = importlib.util.spec_from_file_location("rp", sys.argv[1]); rp = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rp)
rng = random.Random(7)
targets = [".", "..", "a", "b", "c", "a/b", "../a", "b/../c", "zz", "ROOT/a", "ROOT/b/c", "ROOT", "a/.."]
for case in range(400):
    root = os.path.realpath(tempfile.mkdtemp())
    for rel in rng.sample(["a", "b", "c", "a/b", "b/c", "c/a"], rng.randint(1, 6)):
        p = os.path.join(root, rel)
        if not os.path.isdir(os.path.dirname(p)) or os.path.lexists(p):
            continue
        kind = rng.choice(["dir", "file", "link", "link"])
        if kind == "dir": os.mkdir(p)
        elif kind == "file": open(p, "w").close()
        else: os.symlink(rng.choice(targets).replace("ROOT", root), p)
    q = os.path.join(root, *rng.choices(["a", "b", "c", ".", "..", "zz"], k=rng.randint(0, 5)))
    want = os.path.realpath(q)
    assert rp.realpath(q) == want, (case, q, rp.realpath(q), want)
    shutil.rmtree(root)
# Bounded before the work: links each adding 4,000 empty parts are paid for as they are pushed.
import tracemalloc
root = os.path.realpath(tempfile.mkdtemp())
for i in range(300):
    os.symlink(f"L{i + 1}" + "/" * 4000, os.path.join(root, f"L{i}"))
tracemalloc.start()
try:
    rp.realpath(os.path.join(root, "L0"), 2048)
    raise AssertionError("not bounded")
except rp.TooManySteps:
    pass
peak = tracemalloc.get_traced_memory()[1]
assert peak < 2_000_000, peak
shutil.rmtree(root)
print("ok", sys.version[:4])
"""


@pytest.mark.timeout(300)
def test_it_answers_what_each_pythons_own_realpath_answers() -> None:
    """3.13 rewrote realpath (it answers otherwise on a path through a loop); the module follows the
    running Python's. Checked on every other interpreter found here (none: skipped)."""
    pythons = _other_pythons()
    if not pythons:
        pytest.skip("no other Python 3.11+ interpreter on this machine")
    module = Path(bounded.__file__)
    for exe in pythons:
        out = subprocess.run([exe, "-c", CROSS_CHECK, str(module)], capture_output=True, text=True, timeout=240)
        assert out.returncode == 0 and out.stdout.startswith("ok"), (exe, out.stderr[-2000:])
