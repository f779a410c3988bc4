"""E2/P1: commands bash runs that the parser's tree once hid from the rules (a review found them) — in
here-documents tree-sitter-bash reads differently from bash, in words bash evaluates as arithmetic or a
variable name even when quoted, in ``[[ … ]]``, and in command lines given as strings with options
(``bash -c --``, ``bash --rcfile F -c``, ``eval --``, ``env -S``). What bash will run is judged; what
cannot be read exactly is unjudged (it asks, and a deny rule still sees its rough text and refuses); a
deny never becomes a question or an allow (harness/command_rules.py, command_words.py, command_literals.py).
Each form is also run by the real bash, which must run the hidden command, so the tests pin real bypasses."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from workbench.harness.command_rules import parse, rough_segments

from .test_command_rules import Judge, parts

BASH = shutil.which("bash")
DENY_RM = "    - {deny: execute, command: 'rm *'}\n"


def rules(*allowed: str) -> str:
    return "permissions:\n  rules:\n" + "".join(f"    - {{allow: execute, command: '{a}'}}\n" for a in allowed)


def bash_runs_it(tmp_path: Path, line: str) -> bool:
    """Whether bash, running ``line`` (``VICTIM`` is the file it must not remove), removes it."""
    if BASH is None:
        pytest.skip("needs bash")
    work = tmp_path / "bash"
    work.mkdir(exist_ok=True)
    (work / "victim").write_text("x")
    subprocess.run([BASH, "-c", line], cwd=work, env={"PATH": os.environ["PATH"]}, stdin=subprocess.DEVNULL,
                   capture_output=True, timeout=20)
    return not (work / "victim").exists()


def assert_never_runs_unasked(tmp_path: Path, line: str, *visible: str) -> None:
    """E2, P1: bash removes the file; with ``deny rm *`` the line is refused, and with only an allow for the
    commands a reader sees (``cat *``, ``echo *`` …) it is not allowed."""
    assert bash_runs_it(tmp_path, line), f"bash does not run the hidden command in {line!r}"
    everything = rules("*", *visible) + DENY_RM
    assert Judge(tmp_path, everything)(line) == "deny", parts(line)
    assert Judge(tmp_path, rules(*visible))(line) != "allow", parts(line)
    assert Judge(tmp_path, rules(*visible) + DENY_RM)(line) == "deny", parts(line)


# -- 1. here-documents -------------------------------------------------------------------------------------

HIDDEN_IN_HEREDOCS = [
    # (a) a partly quoted end marker: bash removes the quotes and ends at EOF, the parser waits for E"O"F
    'cat <<E"O"F\nEOF\nrm -f victim\nE"O"F\n',
    "cat <<E'O'F\nEOF\nrm -f victim\nE'O'F\n",
    'cat <<EO"F"\nEOF\nrm -f victim\nEO"F"\n',
    "cat <<$'EOF'\nEOF\nrm -f victim\n$'EOF'\n",
    "cat <<\\EOF\nEOF\nrm -f victim\n\\EOF\n",
    # (b) a backtick in an unquoted body: bash runs it, the tree has no node for it
    "cat <<EOF\n`rm -f victim`\nEOF\n",
    "cat <<EOF\nx `rm -f victim` y\nEOF\n",
    "cat <<EOF\n$(echo a)`rm -f victim`\nEOF\n",
    # (c) a backslash-newline in an unquoted body: bash joins EO\<newline>F into EOF and ends there
    "cat <<EOF\nEO\\\nF\nrm -f victim\nEOF\n",
    "cat <<-EOF\n\tEO\\\nF\nrm -f victim\nEOF\n",
    # a line that begins with the marker inside a `$( … )` the parser reads across it
    "cat <<EOF\n$(cat <<'X'\nEOF\nrm -f victim\nX\n)\nEOF\n",
    # the parser ends it on a line bash does not (a tab before the marker of a plain <<, a blank after
    # it), and a quoted here-document the parser starts next swallows the command
    "cat <<EOF\n\tEOF\ncat <<'X'\nEOF\nrm -f victim\nX\n",
    "cat <<EOF\nEOF \ncat <<'X'\nEOF\nrm -f victim\nX\n",
    "cat <<-EOF\n \tEOF\ncat <<'X'\nEOF\nrm -f victim\nX\n",
    # what follows the marker on its line: the grammar nests it in the here-document's node
    "cat <<EOF && rm -f victim\nx\nEOF\n",
    "cat <<EOF && { rm -f victim; }\nx\nEOF\n",
    "cat <<EOF | rm -f victim\nx\nEOF\n",
    "cat <<EOF > /dev/null && rm -f victim\nx\nEOF\n",
]


@pytest.mark.parametrize("line", HIDDEN_IN_HEREDOCS)
def test_E2_P1_a_command_hidden_by_a_here_document_is_refused_by_a_deny_and_never_allowed(tmp_path, line):
    """E2, P1: with ``allow cat *`` and ``deny rm *``, ``rm -f victim`` hidden by a here-document bash reads
    differently from the grammar (or nested after its marker) is refused, never run."""
    assert_never_runs_unasked(tmp_path, line, "cat *")


@pytest.mark.parametrize("line, why", [
    ('cat <<E"O"F\nx\nE"O"F\n', "end marker"),
    ("cat <<EOF\n`date`\nEOF\n", "backtick"),
    ("cat <<EOF\nEO\\\nF\nEOF\n", "backslash"),
    ("cat <<EOF\n\\$(date)\nEOF\n", ""),  # no part judged as it is written
    ("cat <<EOF\n$(cat <<'X'\nEOF\nX\n)\nEOF\n", "begins with its end marker"),
    ("cat <<EOF\n\tEOF\nEOF\n", "stand alone"),
])
def test_E2_a_here_document_bash_may_read_differently_is_unjudged_and_says_why(line, why):
    unjudged = [p for p in parse(line).parts if not p.judged]
    assert unjudged and why in unjudged[0].why, parts(line)


@pytest.mark.parametrize("line", [
    "cat <<'EOF'\n$(rm -f victim)\n`rm -f victim`\nEO\\\nF\nEOF\n",  # quoted: bash reads it as written
    'cat <<"EOF"\nhello $(rm x) `y`\nEOF\n',
    "cat <<EOF\nhello $HOME ${USER} $1\nEOF\n",  # expansions the tree reads: no command
    "cat <<-EOF\n\thello\n\tEOF\n",
    "cat << EOF > /dev/null\nhello\nEOF\n",
])
def test_E2_a_here_document_bash_reads_as_the_parser_does_is_still_judged(tmp_path, line):
    """E2: the here-documents people write — a quoted or plain marker, a body bash reads as written — stay
    judged: ``allow cat *`` lets them run without asking."""
    assert all(p.judged for p in parse(line).parts), parts(line)
    assert Judge(tmp_path, rules("cat *"))(line) == "allow", parts(line)


def test_E2_P1_words_after_a_here_documents_marker_are_the_commands_arguments(tmp_path):
    """E2, P1: bash reads ``git <<EOF push --force`` as ``git push --force``; the grammar put ``push --force``
    in the here-document's node, so ``allow git *`` with ``deny git push *`` let it through."""
    line = "git <<EOF push --force\nx\nEOF\n"
    assert ("command", "git push --force", True) in parts(line)
    judge = Judge(tmp_path, rules("git *") + "    - {deny: execute, command: 'git push *'}\n")
    assert judge(line) == "deny"
    assert judge("git <<EOF push $(echo --force)\nx\nEOF\n") == "deny"  # unjudged: a deny reads it roughly
    assert judge("git <<'EOF' status\nx\nEOF\n") == "allow"


def test_E2_P1_a_redirection_after_a_here_documents_marker_is_a_write(tmp_path):
    """E2, P1: ``cat <<EOF > .git/config`` writes .git/config; the grammar nests ``> .git/config`` in the
    here-document's node, so the write was not judged at all."""
    line = "cat <<EOF > .git/config\n[core]\nEOF\n"
    assert ("write", ".git/config", True) in parts(line)
    judge = Judge(tmp_path, rules("cat *") + "    - {allow: write, path: '/project/**'}\n"
                  "    - {deny: write, path: '/project/.git/**'}\n")
    assert judge(line) == "deny"
    assert judge("cat <<EOF > notes.txt\nhello\nEOF\n") == "allow"


# -- 2. arithmetic and variable names: bash runs a $( … ) in a subscript, even quoted ---------------------

EVALUATED = [
    "[[ 'a[$(rm -f victim)]' -eq 1 ]] || echo ok",
    "[[ -v 'a[$(rm -f victim)]' ]] || echo ok",
    "[ -v 'a[$(rm -f victim)]' ] || echo ok",
    "test -v 'a[$(rm -f victim)]' || echo ok",
    "builtin test -v 'a[$(rm -f victim)]' || echo ok",
    "printf -v 'a[$(rm -f victim)]' %s hi",
    "command printf -v 'a[$(rm -f victim)]' %s hi",
    "let 'a[$(rm -f victim)]'",
    "declare -i x='a[$(rm -f victim)]'",
    "declare 'a[$(rm -f victim)]=1'",
    "typeset 'a[$(rm -f victim)]=1'",
    "f() { local 'a[$(rm -f victim)]=1'; }; f",
    "f() { local -i x='a[$(rm -f victim)]'; }; f",
    "read 'a[$(rm -f victim)]' <<< x",
    "declare -A h; read 'h[$(rm -f victim)]' <<< x",
    "compgen -W '$(rm -f victim)' x",
    "(( a[\"$(rm -f victim)\"] ))",
    "declare -i x; x='a[$(rm -f victim)]'",
    "x='a[$(rm -f victim)]'; (( x ))",
    "x='a[$(rm -f victim)]'; [[ x -eq 1 ]] || echo ok",
    "x='a[$(rm -f victim)]' bash -c '(( x ))'",
    "a=(['$(rm -f victim)']=1)",
    "echo \"${a['$(rm -f victim)']}\"",
]


@pytest.mark.parametrize("line", EVALUATED)
def test_E2_P1_a_command_in_a_word_bash_evaluates_is_refused_by_a_deny_and_never_allowed(tmp_path, line):
    """E2, P1: bash evaluates array subscripts in arithmetic and variable names (``[[ … -eq … ]]``, ``-v``,
    ``printf -v``, ``let``, ``declare``/``local``, ``read``, ``(( ))``, an integer variable's assignment)
    and runs the ``$( … )`` inside even when the word was single-quoted: such a part is unjudged, so a deny
    on ``rm *`` refuses it and ``allow echo *``/``printf *`` … does not allow it."""
    assert_never_runs_unasked(tmp_path, line, "echo *", "printf *", "test *", "let *", "read *", "compgen *",
                              "bash *", "[[ *", "[ *", "x=*")


@pytest.mark.parametrize("line", [
    "unset 'a[$(rm -f victim)]'", "unset -v 'a[$(rm -f victim)]'", "mapfile 'a[$(rm -f victim)]' < /dev/null",
    "readarray -n 'a[$(rm -f victim)]' x < /dev/null", "getopts a 'a[$(rm -f victim)]'",
    "wait -p 'a[$(rm -f victim)]'", "export 'a[$(rm -f victim)]=1'", "readonly 'a[$(rm -f victim)]=1'",
    "complete -W '$(rm -f victim)' x",
])
def test_E2_P1_other_builtins_that_evaluate_names_are_unjudged_too(tmp_path, line):
    """E2, P1: the same builtins in other bash versions or settings (bash 5.2 runs none of these here, but
    which ones evaluate a subscript changed between versions): unjudged, and a deny sees the command."""
    assert [p for p in parse(line).parts if not p.judged], parts(line)
    assert Judge(tmp_path, rules("*") + DENY_RM)(line) == "deny", parts(line)


def test_E2_a_test_is_a_part_judged_like_a_command(tmp_path):
    """E2, P1: ``[[ … ]]`` / ``[ … ]`` yield a part (``[[ … ]] || echo ok`` was judged as ``echo ok`` alone);
    a plain one is judged with its words as bash reads them and needs an allow like any command."""
    assert parts("[[ -f 'x' && ! -d \"y\" ]] || echo ok") == [("command", "[[ -f x && ! -d y ]]", True),
                                                              ("command", "echo ok", True)]
    assert parts("[[ '&&' == x ]]")[0][1] == "[[ '&&' == x ]]"  # a word, not the operator
    assert parts("[ \"$x\" = y ]")[0][2] is False
    assert Judge(tmp_path, rules("echo *"))("[[ -f x ]] && echo ok") == "ask"
    assert Judge(tmp_path, rules("echo *", "[[ *"))("[[ -f x ]] && echo ok") == "allow"
    assert Judge(tmp_path, rules("printf *"))("printf -v x %s '$(y)'") == "ask"
    assert Judge(tmp_path, rules("printf *"))("printf '%s\\n' '$(not run)'") == "allow"  # no -v: text only


# -- 3. command lines given as strings, with options -------------------------------------------------------

STRINGS = [
    "bash -c -- 'rm -f victim'", "sh -c -- 'rm -f victim'", "bash -c - 'rm -f victim'", "dash -c -- 'rm -f victim'",
    "bash --rcfile /dev/null -c 'rm -f victim'", "bash --init-file /dev/null -c 'rm -f victim'",
    "bash -rcfile /dev/null -c 'rm -f victim'", "bash -norc --noprofile -c 'rm -f victim'",
    "bash --login --posix -c 'rm -f victim'", "bash -eo pipefail -c 'rm -f victim'",
    "bash -co pipefail 'rm -f victim'", "bash -oc pipefail 'rm -f victim'", "bash -O extglob -c 'rm -f victim'",
    "bash -c -x -- 'rm -f victim'", "bash +c 'rm -f victim'",
    "eval -- 'rm -f victim'", "eval -- rm -f victim",
    "env -S 'rm -f victim'", "env --split-string='rm -f victim'", "env --split-string 'rm -f victim'",
    "env -S'rm -f victim'", "env --split-str='rm -f victim'", "env -u X -S 'rm -f victim'",
    "env -S '-i rm -f victim'", "env -S 'A=1 rm' -f victim", "env -S 'rm  -f\tvictim'",
    "env -S 'rm \"-f\" victim'", "env -S \"rm -f victim #\"", "env -S 'bash -c' 'rm -f victim'",
    "sudo --weird bash -c 'rm -f victim' || true", "echo x | xargs sh -c -- 'rm -f victim'",
]


@pytest.mark.parametrize("line", STRINGS)
def test_E2_P1_a_command_line_given_as_a_string_is_judged_whatever_the_options(tmp_path, line):
    """E2, P1: the command line ``bash``/``sh -c`` runs after ``--`` or ``-``, after long options taking a
    value (``--rcfile F``, ``--init-file F``, also spelt ``-rcfile``) or grouped ones (``-eo pipefail``),
    ``eval --``'s words and ``env -S``'s split value are judged as the parts they run: ``deny rm *``
    refuses them (it used to become a question), and ``allow bash *`` / ``env *`` does not allow them."""
    if "sudo" not in line:
        assert bash_runs_it(tmp_path, line), line
    for judge_rules in (rules("*") + DENY_RM, rules("bash *", "sh *", "dash *", "eval *", "env *") + DENY_RM):
        assert Judge(tmp_path, judge_rules)(line) == "deny", parts(line)
    assert Judge(tmp_path, rules("bash *", "sh *", "dash *", "eval *", "env *", "true", "xargs *"))(line) != "allow"


@pytest.mark.parametrize("line", ["bash --weird -c 'rm -f victim'", "zsh --no-rcs -c 'rm -f victim'",
                                  "bash -e --norc -c 'rm -f victim'"])
def test_E2_P1_an_unknown_long_option_of_a_shell_is_unjudged_and_a_deny_still_refuses(tmp_path, line):
    """E2, P1: with a long option this module does not know, which word is the command line is not known:
    the part asks even under ``allow *``, and ``deny rm *`` still sees the string (its rough reading)."""
    assert [p for p in parse(line).parts if not p.judged], parts(line)
    assert Judge(tmp_path, rules("*"))(line) == "ask"
    assert Judge(tmp_path, rules("*") + DENY_RM)(line) == "deny"


def test_E2_env_split_string_read_exactly_runs_the_command_it_splits_into(tmp_path):
    """E2: ``env -S 'rm x'`` runs ``rm x`` as ``env rm x`` does, so ``allow rm *`` covers it; a value env
    reads specially (quotes, escapes, ``$``, ``#``) is unjudged, and a deny still finds the command."""
    assert parts("env -S 'rm -f x'") == [("command", "rm -f x", True)]
    assert parts("env -S 'A=1 rm' -f x") == [("command", "A=1", True), ("command", "rm -f x", True)]
    assert Judge(tmp_path, rules("rm *"))("env -S 'rm -f x'") == "allow"
    assert Judge(tmp_path, rules("rm *"))("env -S 'rm \"x\"'") == "ask"
    assert "rm -f x" in rough_segments("env -S 'rm \"-f\" x' && true") or \
        "rm -f x" in rough_segments("env -S 'rm -f x' --weird")


def test_E2_eval_drops_only_a_leading_double_dash():
    assert ("command", "rm x", True) in parts("eval -- rm x")
    assert ("command", "-- rm x", True) in parts("eval -- -- rm x")  # bash runs the command `--`


# -- a shell reading its command line from a here-document or a here-string ----------------------------------

FED_TO_A_SHELL = [
    "bash <<'EOF'\nrm -f victim\nEOF\n", "sh <<'EOF'\necho ok; rm -f victim\nEOF\n", "bash -s <<EOF\nrm -f victim\nEOF\n",
    "bash -e - <<-'EOF'\n\trm -f victim\n\tEOF\n", "sh <<< 'rm -f victim'", "env bash <<< 'rm -f victim'",
    "bash <<EOF\nrm -f vic$(echo tim)\nEOF\n", "bash <<< \"rm -f $(echo victim)\"",
    # the grammar gives the here-document to the statement; bash, to the last command of a pipeline,
    # a list or a negation, or to a whole group whose shell reads it
    "! bash <<'EOF'\nrm -f victim\nEOF\n", "echo x | bash <<'EOF'\nrm -f victim\nEOF\n",
    "true && sh <<'EOF'\nrm -f victim\nEOF\n", "{ cat | bash; } <<'EOF'\nrm -f victim\nEOF\n",
    "if true; then bash; fi <<< 'rm -f victim'", "while read -r l; do bash; done <<'EOF'\nx\nrm -f victim\nEOF\n",
]


@pytest.mark.parametrize("line", FED_TO_A_SHELL)
def test_E2_P1_a_shell_runs_the_here_document_it_reads_and_it_is_judged_like_bash_c(tmp_path, line):
    """E2, P1: ``bash <<'EOF' … EOF`` and ``sh <<< 'cmd'`` run the text as ``bash -c`` runs its string: its
    parts are judged (``deny rm *`` refuses it, ``allow bash *`` does not allow it); text only a run knows
    (an expansion in an unquoted one) is unjudged, and a deny still reads it."""
    assert bash_runs_it(tmp_path, line), line
    for judge_rules in (rules("*") + DENY_RM, rules("bash *", "sh *", "env *") + DENY_RM):
        assert Judge(tmp_path, judge_rules)(line) == "deny", parts(line)
    assert Judge(tmp_path, rules("bash *", "sh *", "env *", "echo *"))(line) != "allow", parts(line)


def test_E2_only_a_shell_reading_its_input_runs_a_here_document():
    assert parts("bash <<'EOF'\nls -l\nEOF\n") == [("command", "bash", True), ("command", "ls -l", True)]
    assert parts("cat <<'EOF'\nls -l\nEOF\n") == [("command", "cat", True)]  # cat prints it
    assert parts("bash -c 'pwd' <<'EOF'\nls -l\nEOF\n") == [("command", "bash -c pwd", True), ("command", "pwd", True)]
    assert parts("bash script.sh <<< 'ls -l'") == [("command", "bash script.sh", True)]
    assert ("command", "rm x", True) not in parts("while read -r l; do echo \"$l\"; done <<'EOF'\nrm x\nEOF\n")
    assert ("command", "git push --force", True) in parts("echo x | git <<EOF push --force\nx\nEOF\n")


def test_E2_words_after_a_here_documents_marker_of_a_compound_statement_are_unjudged():
    """E2: after a group's here-document bash reads no argument (it refuses the line); the grammar's words
    there are not judged as anything, and a redirection after a list is still only a write."""
    assert any(not judged for _, _, judged in parts("{ cat; } <<EOF x\ny\nEOF\n"))
    assert parts("cd sub && echo x > /tmp/out.txt") == [("command", "cd sub", True), ("command", "echo x", True),
                                                        ("write", "/tmp/out.txt", True)]


# -- words after a redirection's target: bash gives them to the command ------------------------------------

HIDDEN_AFTER_REDIRECTIONS = [
    "env 2>&1 rm -f victim", "env >&2 rm -f victim", "env </dev/null rm -f victim", "env 0</dev/null rm -f victim",
    "env 2>&- rm -f victim", "env 3<&- rm -f victim", "exec 2>&1 rm -f victim", "nice 1>/dev/null rm -f victim",
    "true | env 2>&1 rm -f victim", "! env 2>&1 rm -f victim", "env 2>/dev/null rm -f victim > /dev/null",
    "env <<EOF >/dev/null rm -f victim\nx\nEOF\n",  # the grammar nests the redirection in the here-document
]


@pytest.mark.parametrize("line", HIDDEN_AFTER_REDIRECTIONS)
def test_E2_P1_words_after_a_redirections_target_are_the_commands_arguments(tmp_path, line):
    """E2, P1: bash reads ``env 2>&1 rm -f victim`` as ``env rm -f victim`` (arguments may follow a
    redirection); the grammar put ``rm -f victim`` in the redirection's node after its target, so the
    command was judged as a bare ``env`` and ``deny rm *`` never saw the rm (a review found it). The same
    for ``0<``, which the grammar reads as an argument ``0``, and for a close (``2>&-``), whose next word
    was judged as a file it writes."""
    assert_never_runs_unasked(tmp_path, line, "env *", "nice *", "exec *", "true")


def test_E2_P1_git_push_after_a_redirection_is_judged_as_git_push(tmp_path):
    """The design's own example: ``allow git *`` with ``deny git push *``."""
    judge = Judge(tmp_path, rules("git *") + "    - {deny: execute, command: 'git push *'}\n")
    for line in ("git 2>&1 push origin main", "git </dev/null push origin", "git >&2 push --force",
                 "git 0</dev/null push", "git 2>&- push", "2>&1 git push", "git > out.txt push"):
        assert judge(line) == "deny", parts(line)
    assert parts("git 2>&1 push origin main") == [("command", "git push origin main", True)]
    assert parts("echo hi > f.txt extra") == [("command", "echo hi extra", True), ("write", "f.txt", True)]
    assert judge("git 2>&1 status") == "allow" and judge("git status 2>&1 | git log") == "allow"
    # `&>` takes no descriptor: the digits before it are an argument (`echo 777&>f x` prints "777 x")
    assert parts("echo 777&>f x") == [("command", "echo 777 x", True), ("write", "f", True)]
    chmod = Judge(tmp_path, rules("*") + "    - {deny: execute, command: 'chmod -R 777 *'}\n")
    for line in ("chmod -R 777&>/dev/null /", "chmod <<EOF >/dev/null -R 777 /\nx\nEOF\n"):
        assert chmod(line) == "deny", parts(line)


def test_E2_a_descriptor_kept_in_a_variable_or_words_after_a_groups_redirection_are_unjudged(tmp_path):
    """``{fd}>x`` opens a descriptor bash numbers itself; after a group's redirection bash reads no
    argument (it refuses the line): neither is judged as a command bash would run."""
    assert any(not judged for _, _, judged in parts("git {fd}>x push"))
    assert any(not judged for _, _, judged in parts("{ git; } 2>&1 push"))
    assert Judge(tmp_path, rules("git *") + "    - {deny: execute, command: 'git push *'}\n")("git {fd}>x push") != "allow"
