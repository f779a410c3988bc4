"""E2/P1: a rule on a command or on a file cannot be passed by spelling the same thing differently — the
command judged is the one bash runs (assignments, wrappers and line continuations taken off), and the
file a redirection writes is judged as bash opens it or not at all (harness/command_rules.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench.harness.command_rules import parse

from .test_command_rules import Judge, parts

BASH = shutil.which("bash")
ALLOW_ALL_BUT_RM = ("permissions:\n  rules:\n    - {allow: execute, command: '*'}\n"
                    "    - {deny: execute, command: 'rm *'}\n")
ALLOW_RM = "permissions:\n  rules:\n    - {allow: execute, command: 'rm *'}\n"
NO_RULES = "model: demo\n"
GIT_DENIED = ("permissions:\n  rules:\n    - {allow: execute, command: 'echo *'}\n"
              "    - {allow: execute, command: 'cd *'}\n    - {allow: execute, command: 'pushd *'}\n"
              "    - {allow: write, path: '/project/**'}\n    - {deny: write, path: '/project/.git/**'}\n"
              "    - {deny: write, path: '/project/.env'}\n")

# -- Bug A: the command a command runs ---------------------------------------------------------------------

SPELLINGS_OF_RM = [
    "r\\\nm -f victim", "rm -f vic\\\ntim", "\\\nrm -f victim", "X=1 rm -f victim", "X=1 Y=2 rm -f victim",
    "command rm -f victim", "command -p rm -f victim", "exec rm -f victim", "exec -a name rm -f victim",
    "builtin rm -f victim", "env rm -f victim", "env -i X=1 rm -f victim", "env -u PATH rm -f victim",
    "nice rm -f victim", "nice -n 5 rm -f victim", "nice -10 rm -f victim", "nohup rm -f victim",
    "time rm -f victim", "time -p rm -f victim", "timeout 5 rm -f victim", "timeout -s KILL 5 rm -f victim",
    "stdbuf -o0 rm -f victim", "setsid rm -f victim", "sudo rm -f victim", "sudo -u root rm -f victim",
    "/usr/bin/env rm -f victim", "command exec nice -n 1 env A=b rm -f victim", "c\\\nommand r\\\nm -f victim",
    "eval rm -f victim", "eval 'rm -f victim'", "bash -c 'rm -f victim'", "sh -ec 'rm -f victim'",
    "trap 'rm -f victim' EXIT", "echo ok; X=1 command rm -f victim", "(exec rm -f victim)",
    "echo $(command rm -f victim)",
    # commands given as arguments: what xargs and find -exec run
    "echo victim | xargs rm -f", "echo victim | xargs -0 -n1 rm -f", "echo victim | xargs -I{} rm -f {}",
    "echo victim | xargs --max-args=1 rm -f", "echo victim | xargs --weird rm -f", "xargs -a list rm -f",
    "echo victim | xargs sudo rm -f", "find . -name victim -exec rm -f {} \\;", "find . -execdir rm -f {} +",
    "find . -ok rm -f {} \\;", "find . -name a -print -o -name victim -exec rm -f {} \\;",
    "find . -exec sh -c 'rm -f victim' \\;", "echo victim | xargs bash -c 'rm -f victim'",
]


@pytest.mark.parametrize("command", SPELLINGS_OF_RM)
def test_E2_P1_a_deny_rule_applies_to_the_command_bash_runs_however_it_is_spelled(tmp_path, command):
    """E2, P1: with ``allow *`` and ``deny rm *`` every spelling of ``rm -f victim`` — a backslash-newline
    inside a word, leading assignments, wrappers that run their argument, a command line in a string —
    is denied, as plain ``rm -f victim`` is."""
    judge = Judge(tmp_path, ALLOW_ALL_BUT_RM)
    assert judge("rm -f victim") == "deny"
    assert judge(command) == "deny", parts(command)


@pytest.mark.parametrize("command", SPELLINGS_OF_RM)
def test_E2_P1_under_the_default_ask_a_spelling_of_rm_is_never_allowed(tmp_path, command):
    """E2, P1: with no rule a command asks (the default); a wrapper or an assignment never turns that
    into an allow."""
    assert Judge(tmp_path, NO_RULES)(command) == "ask", parts(command)


@pytest.mark.parametrize("command", ["find . -name '*.tmp' -exec rm -f {} \\;", "ls | xargs rm -f",
                                     "find . -execdir rm {} +", "xargs -n1 rm < list"])
def test_E2_an_allow_rule_for_find_or_xargs_does_not_allow_the_command_they_run(tmp_path, command):
    """E2: a person who allows ``find *`` and ``xargs *`` (to list, to count) has not allowed the command
    a ``-exec`` or an xargs runs: it is judged as a part of its own, and with no rule for it, it asks."""
    rules = ("permissions:\n  rules:\n    - {allow: execute, command: 'find *'}\n"
             "    - {allow: execute, command: 'xargs *'}\n    - {allow: execute, command: 'ls *'}\n"
             "    - {allow: execute, command: 'ls'}\n")
    judge = Judge(tmp_path, rules)
    assert judge("find . -name '*.py' -print") == "allow" and judge("ls | xargs echo") == "ask"  # echo: no rule
    assert judge(command) == "ask", parts(command)
    assert Judge(tmp_path, rules + "    - {allow: execute, command: 'rm *'}\n    - {allow: read, path: '/**'}\n"
                 )(command) == "allow", parts(command)


@pytest.mark.parametrize("command", ["command rm -f x", "exec rm -f x", "nice -n 5 rm -f x", "nohup rm x",
                                     "timeout 5 rm x", "r\\\nm x", "env -u PATH rm x",
                                     "builtin rm x"])
def test_E2_an_allow_rule_judges_the_command_a_neutral_wrapper_runs(tmp_path, command):
    """E2: ``allow rm *`` covers ``rm`` behind a wrapper that only runs it (no other rule is needed)."""
    assert Judge(tmp_path, ALLOW_RM)(command) == "allow", parts(command)


@pytest.mark.parametrize("command", ["X=1 rm x", "LD_PRELOAD=/x.so rm x", "env X=1 rm x", "sudo rm x",
                                     "/usr/bin/env rm x", "/tmp/command rm x", "nice --weird rm x",
                                     "env -S 'rm \"x\"'", "eval rm x", "time rm x"])
def test_E2_what_a_wrapper_or_assignment_adds_still_needs_its_own_allow(tmp_path, command):
    """E2, P1: an assignment (it changes what the command does), a wrapper that runs the command as
    another user or is named by a path, an option of a wrapper this module does not know, ``eval``, the
    keyword ``time`` (the grammar reads it as a program): the command alone being allowed is not enough —
    it asks."""
    assert Judge(tmp_path, ALLOW_RM)(command) == "ask", parts(command)


def test_E2_a_wrapper_with_an_option_not_known_is_unjudged_and_a_deny_still_sees_the_command(tmp_path):
    """E2: ``nice --weird rm x``: which word is the command is not known, so the part asks under allow-all,
    and a deny on any reading of it still denies."""
    [part] = parse("nice --weird rm -f x").parts
    assert not part.judged and "not known" in part.why
    assert Judge(tmp_path, "permissions:\n  rules:\n    - {allow: execute, command: '*'}\n")("nice --weird ls") == "ask"
    assert Judge(tmp_path, ALLOW_ALL_BUT_RM)("nice --weird rm -f x") == "deny"
    assert Judge(tmp_path, ALLOW_ALL_BUT_RM)("X=$(date) command rm -f x") == "deny"


@pytest.mark.parametrize("command, expected", [
    ("command rm x", [("command", "rm x", True)]),
    ("X=1 nice -n 2 rm x", [("command", "X=1", True), ("command", "rm x", True)]),
    ("env -i A=1 make", [("command", "A=1", True), ("command", "make", True)]),
    ("sudo -u bob rm x", [("command", "sudo -u bob rm x", True), ("command", "rm x", True)]),
    ("command -v rm", [("command", "command -v rm", True)]),  # looks rm up, runs nothing
    ("env", [("command", "env", True)]),
    ("env A=1", [("command", "env A=1", True)]),
    ("exec > log", [("command", "exec", True), ("write", "log", True)]),
    ("bash -c 'ls; rm x'", [("command", "bash -c 'ls; rm x'", True), ("command", "ls", True),
                            ("command", "rm x", True)]),
    ("trap '' TERM", [("command", "trap '' TERM", True)]),
    ("r\\\nm x", [("command", "rm x", True)]),
    ("echo a \\\n  b", [("command", "echo a b", True)]),
    ("echo 'a\\\nb'", [("command", "echo 'a\\\nb'", True)]),  # single quotes keep it, as bash does
    ('echo "a\\\nb"', [("command", "echo ab", True)]),
    ("echo a\\\\\nrm x", [("command", "echo 'a\\'", True), ("command", "rm x", True)]),  # an escaped backslash
    ("echo a # c \\\nrm x", [("command", "echo a", True), ("command", "rm x", True)]),  # a comment ends at the line
])
def test_E2_the_parts_of_wrapped_commands_and_line_continuations(command, expected):
    """E2: the parts a line is judged as, where wrappers, assignments and backslash-newlines are involved."""
    assert parts(command) == expected


@pytest.mark.skipif(BASH is None, reason="needs bash")
@pytest.mark.parametrize("line", ["tou\\\nch made1", "touch ma\\\nde2", 'touch "ma\\\nde3"', "touch 'ma\\\nde4'",
                                  "cat <<EOF\n$(tou\\\nch made5)\nEOF", "echo x\\\\\ntouch made6",
                                  "command tou\\\nch made7"])
def test_E2_line_continuations_are_read_as_bash_reads_them(tmp_path, line):
    """E2: every file the real bash creates is named by a judged part (the continuation is joined where
    bash joins it)."""
    subprocess.run([BASH, "-c", line], cwd=tmp_path, env={"PATH": os.environ["PATH"]}, capture_output=True,
                   timeout=20)
    created = {p.name for p in tmp_path.iterdir()}
    parsed = parse(line)
    assert created and all(p.judged for p in parsed.parts), parts(line)
    named = {w for p in parsed.parts for w in p.words}
    assert created <= named, (line, created, parts(line))


_ASSIGNMENTS = st.lists(st.sampled_from(["X=1", "A_B=c", "Y="]), max_size=2)
_PREFIXES = st.sampled_from(["command", "exec", "builtin", "env", "env -i", "env Z=2", "nice",
                             "nice -n 3", "nohup", "time", "time -p", "timeout 5", "timeout -k 1 5", "stdbuf -o0",
                             "setsid", "sudo", "sudo -n -u root", "command -p", "/usr/bin/env", "exec -a x"])


@st.composite
def wrapped_rm(draw: Any) -> str:
    """``rm -f victim`` behind random assignments and wrappers, with backslash-newlines put anywhere
    (inside words too), maybe after other commands or inside a substitution."""
    line = " ".join([*draw(_ASSIGNMENTS), *draw(st.lists(_PREFIXES, max_size=4)), "rm", "-f", "victim"])
    # at places of the line as written (one put inside another would make `\\` an escaped backslash)
    for at in sorted(draw(st.sets(st.integers(0, len(line)), max_size=3)), reverse=True):
        line = line[:at] + "\\\n" + line[at:]
    return draw(st.sampled_from(["{}", "echo a; {}", "true && {}", "echo $({})", "( {} )", "if true; then {}; fi"])) \
        .format(line)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(line=wrapped_rm())
def test_E2_P1_property_assignments_wrappers_and_continuations_never_turn_a_deny_into_an_allow(tmp_path, line):
    """E2, P1: whatever assignments, wrappers and line continuations surround a denied command, it is denied
    under allow-all, and never allowed under the default ask."""
    assert Judge(tmp_path, ALLOW_ALL_BUT_RM)(line) == "deny", (line, parts(line))
    assert Judge(tmp_path, NO_RULES)(line) != "allow", (line, parts(line))


# -- Bug B: the file a redirection writes --------------------------------------------------------------------


def git_workspace(tmp_path: Path) -> Judge:
    (tmp_path / ".git" / "hooks").mkdir(parents=True, exist_ok=True)
    (tmp_path / ".git" / "config").write_text("[core]\n")
    (tmp_path / ".env").write_text("A=1\n")
    return Judge(tmp_path, GIT_DENIED)


@pytest.mark.parametrize("command", ["echo x > .gi?/confi?", "echo x > .en[v]", "echo x > .gi*/config",
                                     "echo x >> ./.g?t/hooks/pre-commit", "echo x > /project/.gi?/config",
                                     "echo x &> .en?", "echo x > ~+/.env", "echo x > ~-/.env",
                                     "cd .git/hooks && echo x > pre-commit2", "cd .git; echo x > config",
                                     "pushd .git && echo x > config", "echo x > config; cd .git",
                                     "for d in . .git; do echo x > config; cd $d; done",
                                     "f() { cd .git; }; f; echo x > config", "cd .git && echo x > ./hooks/a",
                                     "source ./go; echo x > config", "$C .git && echo x > config",
                                     "HOME=/project/.git; echo x > ~/config", "bash -c 'cd .git; echo x > config'"])
def test_E2_P1_a_redirection_bash_may_read_differently_is_never_allowed(tmp_path, command):
    """E2, P1 (P5): a redirection's file holding an unquoted glob (bash writes the one file it matches), a
    shell tilde (``~+`` is $PWD), or a relative file in a line that may change the folder or HOME is not
    judged from the starting folder: it asks (or is denied), never allowed, so `deny write
    /project/.git/**` cannot be passed that way."""
    judge = git_workspace(tmp_path)
    assert judge("echo x > .git/config") == "deny"
    assert judge(command) != "allow", [v.reason for v in judge.verdicts(command)]


@pytest.mark.parametrize("command", ["echo x > notes.txt", "echo x > '.en[v]'", "echo x > \"a*b\"",
                                     "echo x > a\\*b", "cd sub && echo x > {ws}/out.txt", "echo x > ~/../x"])
def test_E2_a_redirection_bash_reads_as_written_is_still_judged(tmp_path, command):
    """E2: a quoted or escaped glob character is literal to bash too, and an absolute file is the same
    whatever the folder: those are judged as before (``~/../x`` is outside every mount: it asks)."""
    (tmp_path / "sub").mkdir()
    judge = git_workspace(tmp_path)
    command = command.format(ws=tmp_path)
    expected = "ask" if "~" in command else "allow"
    assert judge(command) == expected, [v.reason for v in judge.verdicts(command)]


def test_E2_a_write_after_a_cd_says_why_it_asks(tmp_path):
    """E2: the question names the reason: the folder may change first."""
    judge = git_workspace(tmp_path)
    asked = [v for v in judge.verdicts("cd .git/hooks && echo x > pre-commit2") if v.effect == "ask"]
    assert asked and "relative to a folder the line may change" in asked[0].reason
    globbed = [v for v in judge.verdicts("echo x > .gi?/confi?") if v.effect == "ask"]
    assert globbed and "pattern matches" in globbed[0].reason


_GLOB_SPELLINGS = st.lists(st.sampled_from(["?", "*", "[{c}]", "{c}"]), min_size=1, max_size=3)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_E2_P1_property_a_globbed_or_moved_redirection_to_a_denied_file_is_never_allowed(tmp_path, data):
    """E2, P1: ``.git/config`` written through any mix of glob characters in its name, and maybe after a
    ``cd``, is never allowed."""
    judge = git_workspace(tmp_path)
    target = ".git/config"
    chars = list(target)
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(chars) - 1))
        if chars[at] != "/":
            chars[at] = data.draw(st.sampled_from(["?", "[{}]".format(chars[at]), "*"]))
    target = "".join(chars)
    prefix = data.draw(st.sampled_from(["", "cd . && ", "cd .git && cd .. && ", "true; "]))
    command = f"{prefix}echo x > {target}"
    assert judge(command) != "allow", (command, [v.reason for v in judge.verdicts(command)])
