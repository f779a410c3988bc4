"""What the words of one simple shell command run (E2): leading assignments, wrappers that run the
rest of their words as a command (``command``, ``exec``, ``env``, ``nice``, ``sudo`` …, their options
listed exactly; ``env -S`` splits its value into words as GNU env does), commands given as a string
(``eval``, ``trap``, ``alias``, ``bash -c`` — a shell's options read as bash reads them), commands given
as arguments (``xargs``, ``find -exec``), and builtins that evaluate a word as arithmetic or a variable
name, where bash runs a ``$(…)`` even from quoted text (``[[ 'a[$(rm x)]' -eq 1 ]]``, ``printf -v``).

``command_rules`` judges each simple command on the command it runs, so a deny rule on ``rm *`` is not
passed by ``X=1 rm``, ``command rm`` or ``exec rm`` (found by a review), and an allow rule on ``rm *``
covers ``command rm`` without a second rule. No Qt.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass

def _possible_commands(words: list[str]) -> Iterator[list[str]]:
    """Every command ``words`` may run once leading assignments and wrappers are taken off, for a deny
    rule on a part that is not judged: after a wrapper whose options are not known, every stretch of
    the rest that starts with a word not an option (one of them is the command); and what an ``xargs``
    or a ``find -exec`` among them runs."""
    found = list(_unwrapped_readings(words))
    yield from found
    for reading in [words, *found]:
        for inner, why in _argument_commands(reading):
            starts = [k for k, w in enumerate(inner) if not w.startswith("-")] if why else [0]
            for k in starts:  # with an option not known: every stretch that may be the command
                yield inner[k:]
                yield from _possible_commands(inner[k:])


def _unwrapped_readings(words: list[str]) -> Iterator[list[str]]:
    rest = _without_assignments(words)
    if len(rest) != len(words) and rest:
        yield rest
    while rest and _wrapper(rest[0]) is not None:
        unwrapped = _unwrap_one(rest)
        if unwrapped is _RUNS_NOTHING:
            return
        if unwrapped is _NOT_KNOWN:
            args = _rough_split(rest[1:]) if _wrapper(rest[0]).splits else rest[1:]  # type: ignore[union-attr]
            for i in range(len(args)):
                if not args[i].startswith("-"):
                    yield args[i:]
            return
        assert isinstance(unwrapped, tuple)
        rest = unwrapped[1]
        yield rest


@dataclass(frozen=True)
class _Wrapper:
    """A builtin or program whose job is to run the rest of its words as a command, in the same folder.
    Its options are listed exactly: one not listed makes the command it runs unknown (it asks)."""

    flags: frozenset[str] = frozenset()  # options without a value (short ones may be grouped: -cl)
    valued: frozenset[str] = frozenset()  # options whose value follows: `-n 5`, `-n5`, `--adjustment=5`
    runs_nothing: frozenset[str] = frozenset()  # options with which no command runs (`command -v rm`)
    attached: frozenset[str] = frozenset()  # options whose value, if any, is attached (xargs -i{}, -l5)
    operands: int = 0  # words between the options and the command (timeout's DURATION)
    assigns: bool = False  # NAME=VALUE words before the command set its environment (env)
    #: Runs the command with more rights (as another user): both the wrapper's text and the command are
    #: judged, so an allow for ``rm *`` does not allow ``sudo rm``.
    elevates: bool = False
    #: ``-S VALUE`` / ``--split-string=VALUE`` (GNU env): VALUE is split into words that take the
    #: option's place and are read again as arguments (``env -S 'rm -f x'`` runs ``rm -f x``).
    splits: bool = False


def _set(*names: str) -> frozenset[str]:
    return frozenset(names)


#: Wrappers that simply run their argument as a command. Left out on purpose: those that take a command
#: line as one string (``eval``, ``bash -c``: parsed in place, see ``_string_commands``) and those whose
#: command gets words only a run knows (``xargs``, ``find -exec``: the command is judged as a part of its
#: own besides them, see ``_argument_commands``).
_WRAPPERS: dict[str, _Wrapper] = {
    "command": _Wrapper(flags=_set("-p"), runs_nothing=_set("-v", "-V")),
    "builtin": _Wrapper(),
    "exec": _Wrapper(flags=_set("-c", "-l"), valued=_set("-a")),
    "env": _Wrapper(flags=_set("-i", "--ignore-environment", "-", "-0", "--null"),
                    valued=_set("-u", "--unset"), assigns=True, splits=True),
    "nice": _Wrapper(valued=_set("-n", "--adjustment")),
    "nohup": _Wrapper(),
    # bash's keyword, or the program /usr/bin/time; a command named `time` asks (see _keyword_like), and
    # this entry serves the deny rules' readings and `/usr/bin/time -p cmd`
    "time": _Wrapper(flags=_set("-p")),
    "timeout": _Wrapper(flags=_set("--preserve-status", "--foreground", "-v", "--verbose"),
                        valued=_set("-s", "--signal", "-k", "--kill-after"), operands=1),
    "stdbuf": _Wrapper(valued=_set("-i", "-o", "-e", "--input", "--output", "--error")),
    "setsid": _Wrapper(flags=_set("-c", "-f", "-w", "--ctty", "--fork", "--wait")),
    "sudo": _Wrapper(flags=_set("-A", "-b", "-E", "-H", "-k", "-n", "-P", "-S", "--askpass", "--background",
                                "--preserve-env", "--set-home", "--reset-timestamp", "--non-interactive",
                                "--preserve-groups", "--stdin"),
                     valued=_set("-u", "-g", "-h", "-p", "-r", "-t", "-T", "-U", "-C", "--user", "--group", "--host",
                                 "--prompt", "--role", "--type", "--command-timeout", "--other-user", "--close-from"),
                     runs_nothing=_set("-l", "-v", "-V", "-K", "--list", "--validate", "--version",
                                       "--remove-timestamp"),
                     elevates=True),
    "doas": _Wrapper(flags=_set("-n"), valued=_set("-u", "-a"), runs_nothing=_set("-L"), elevates=True),
}
#: Builtins: a program of that name named by a path (``/tmp/command rm x``) is some other program.
_BUILTIN_WRAPPERS = frozenset({"command", "builtin", "exec"})
_RUNS_NOTHING = "runs nothing"
_NOT_KNOWN = "not known"
_ASSIGNMENT_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=")


def _wrapper(word: str) -> _Wrapper | None:
    name = word.rsplit("/", 1)[-1]
    if name in _BUILTIN_WRAPPERS and name != word:
        return None
    return _WRAPPERS.get(name)


def _without_assignments(words: list[str]) -> list[str]:
    i = 0
    while i < len(words) and _ASSIGNMENT_WORD.match(words[i]):
        i += 1
    return words[i:]


def _command_start(name: str, wrapper: _Wrapper, args: list[str]) -> int | str:
    """Where the command starts in the arguments of wrapper ``name``: the index past its options, or
    ``_RUNS_NOTHING`` / ``_NOT_KNOWN`` (an option not listed, or one whose value is missing)."""
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            i += 1
            break
        split = _split_option(args, i) if wrapper.splits else None
        if split is not None:  # env -S: its words take its place and are read again (``args`` is a copy)
            if isinstance(split, str):
                return split
            args[i:i + split[1]] = split[0]
            continue
        if arg in wrapper.runs_nothing:
            return _RUNS_NOTHING
        if arg in wrapper.flags:
            i += 1
        elif arg in wrapper.valued:
            i += 2
        elif arg.startswith("--") and "=" in arg and arg.split("=", 1)[0] in wrapper.valued:
            i += 1
        elif not arg.startswith("--") and arg[:2] in wrapper.valued | wrapper.attached and len(arg) > 2:
            i += 1  # -n5, xargs -I{}
        elif name == "nice" and re.fullmatch(r"-\d+", arg):
            i += 1  # nice -10 (the old spelling of -n 10)
        elif (arg.startswith("-") and not arg.startswith("--") and len(arg) > 2
              and all(f"-{c}" in wrapper.flags for c in arg[1:])):
            i += 1  # grouped flags: exec -cl
        elif arg.startswith("-") and arg != "-":
            return _NOT_KNOWN
        else:
            break
    if i > len(args):
        return _NOT_KNOWN  # an option's value is missing
    return i


def _split_value(args: list[str], i: int, grouped: bool = False) -> tuple[str, int] | str | None:
    """``args[i]`` as env's ``-S``/``--split-string`` (GNU getopt takes any unambiguous prefix, ``--s``;
    ``grouped``: also after other letters, ``-vS``): (its value, how many arguments it spans), None when
    it is not one, ``_NOT_KNOWN`` when its value is missing."""
    arg = args[i]
    name, eq, value = arg.partition("=")
    short = re.fullmatch(r"-([^-S]*)S(.*)", arg, re.DOTALL)
    if arg.startswith("--") and len(name) > 2 and "--split-string".startswith(name):
        if eq:
            return value, 1
    elif short and (grouped or not short.group(1)):
        if short.group(2):
            return short.group(2), 1
    else:
        return None
    return (args[i + 1], 2) if i + 1 < len(args) else _NOT_KNOWN


def _rough_split(args: list[str]) -> list[str]:
    """env's arguments with every ``-S`` value split roughly (quotes read as the shell reads them), for a
    deny rule's reading of an env whose options are not known."""
    args = list(args)
    i = 0
    while i < len(args):
        split = _split_value(args, i, grouped=True)
        if not isinstance(split, tuple):
            i += 1
            continue
        try:
            words = shlex.split(split[0])
        except ValueError:
            words = split[0].split()
        args[i:i + split[1]] = words  # read again, as env does (each pass takes an option away)
    return args


def _split_option(args: list[str], i: int) -> tuple[list[str], int] | str | None:
    """``args[i]`` as env's ``-S``/``--split-string`` (``_split_value``): (the words its value splits
    into, how many arguments it spans), ``_NOT_KNOWN`` when the value holds what env reads specially
    (quotes, escapes, ``$``, ``#``, other blanks) or is missing, else None."""
    split = _split_value(args, i)
    if not isinstance(split, tuple):
        return split
    value, span = split
    if any(c in "'\"\\$#" or (c < " " and c not in "\t\n") or c == "\x7f" for c in value):
        return _NOT_KNOWN
    return [w for w in re.split(r"[ \t\n]+", value) if w], span


def _unwrap_one(words: list[str]) -> tuple[list[str], list[str]] | str:
    """``words`` start with a wrapper: (the assignments it makes, the command it runs), or
    ``_RUNS_NOTHING`` (``env`` alone prints, ``command -v`` looks up) or ``_NOT_KNOWN`` (an option this
    module does not know: which word is the command is not known)."""
    wrapper = _wrapper(words[0])
    assert wrapper is not None
    args = words[1:]
    i = _command_start(words[0].rsplit("/", 1)[-1], wrapper, args)
    if isinstance(i, str):
        return i
    assignments: list[str] = []
    if wrapper.assigns:
        while i < len(args) and "=" in args[i] and not args[i].startswith("="):
            assignments.append(args[i])
            i += 1
    i += wrapper.operands
    if i >= len(args):
        return _RUNS_NOTHING  # `env X=1` prints, `nice` alone prints the niceness, `exec >f` redirects
    return assignments, args[i:]


@dataclass(frozen=True)
class _Runs:
    """What a simple command with known words runs: ``assignments`` (its own and ``env``'s), the texts
    that must be allowed besides the command (an elevating wrapper or one named by a path, from it on),
    the ``command`` itself, and ``why`` it is not known (a wrapper's option this module does not know)."""

    assignments: list[str]
    also: list[list[str]]
    command: list[str]
    why: str = ""


def _runs(words: list[str], n_assignments: int) -> _Runs:
    assignments = list(words[:n_assignments])
    rest = list(words[n_assignments:])
    also: list[list[str]] = []
    while rest and _wrapper(rest[0]) is not None:
        unwrapped = _unwrap_one(rest)
        if unwrapped is _RUNS_NOTHING:
            break
        if unwrapped is _NOT_KNOWN:
            return _Runs(assignments, also, rest, f"{rest[0]!r} runs a command, and with these options which "
                                                 "one is not known before it runs")
        assert isinstance(unwrapped, tuple)
        if _wrapper(rest[0]).elevates or "/" in rest[0]:  # type: ignore[union-attr]
            also.append(rest)
        assignments += unwrapped[0]
        rest = unwrapped[1]
    return _Runs(assignments, also, rest)


#: xargs (GNU and BSD) runs the rest of its words as a command, with words it reads added to them.
_XARGS = _Wrapper(flags=_set("-0", "-r", "-t", "-p", "-x", "-o", "-i", "-l", "-e", "--null", "--no-run-if-empty",
                             "--verbose", "--interactive", "--exit", "--open-tty"),
                  valued=_set("-I", "-L", "-n", "-P", "-s", "-d", "-E", "-a", "-S", "-R", "-J", "--arg-file",
                              "--delimiter", "--eof", "--max-lines", "--max-args", "--max-procs", "--max-chars",
                              "--replace", "--process-slot-var"),
                  attached=_set("-i", "-l", "-e"))
#: find's actions that run a command: the words after them, to ``;`` or ``+``.
_FIND_RUNS = frozenset({"-exec", "-execdir", "-ok", "-okdir"})


def _argument_commands(words: list[str]) -> list[tuple[list[str], str]]:
    """The commands ``words`` run given as their arguments — ``xargs rm -f``, ``find . -exec rm {} ;`` —
    each as (its words as written, with ``{}`` and the words a run adds unknown; why it is not known, or
    ""). E2: each is judged as a part of its own besides the command, so ``deny rm *`` refuses
    ``xargs rm`` and an ``allow find *`` does not allow ``find -exec rm``."""
    if not words:
        return []
    name = words[0].rsplit("/", 1)[-1]
    if name == "xargs":
        args = words[1:]
        i = _command_start(name, _XARGS, args)
        if isinstance(i, str):
            return [(args, "xargs with these options: which command it runs is not known before it runs")]
        return [(args[i:] or ["echo"], "")]  # xargs alone runs echo
    if name == "find":
        out: list[tuple[list[str], str]] = []
        i = 1
        while i < len(words):
            if words[i] in _FIND_RUNS:
                j = i + 1
                while j < len(words) and words[j] not in (";", "+"):
                    j += 1
                if j > i + 1:
                    out.append((words[i + 1:j], ""))
                i = j
            i += 1
        return out
    return []


#: Shells whose ``-c`` takes a command line as one string.
_SHELLS = frozenset({"bash", "sh", "dash", "zsh", "ksh", "ash", "mksh"})
#: bash's long options (``--name`` or ``-name``, read only before its one-letter options): flags, and
#: those whose value is the next word. Another ``--name`` makes the command unjudged.
_BASH_LONG_FLAGS = frozenset({"debug", "debugger", "dump-po-strings", "dump-strings", "help", "login", "noediting",
                              "noprofile", "norc", "posix", "pretty-print", "protected", "restricted", "verbose",
                              "version", "wordexp"})
_BASH_LONG_VALUED = frozenset({"init-file", "rcfile"})
#: Commands that change the folder later relative paths are read from (a redirection's file, E2).
_FOLDER_CHANGERS = frozenset({"cd", "pushd", "popd", "source", ".", "eval"})


def _string_commands(words: list[str]) -> tuple[list[str], str]:
    """The command lines a command runs that are given to it as strings — ``eval`` (its words joined,
    after a leading ``--``), ``trap 'cmd' SIG``, ``alias n='cmd'``, ``bash -c 'cmd'`` — and why which
    string runs is not known (a shell's option this module does not know), or ""."""
    if not words:
        return [], ""
    name = words[0].rsplit("/", 1)[-1]
    if name == "eval":
        args = words[2:] if words[1:2] == ["--"] else words[1:]
        return ([" ".join(args)] if args else []), ""
    if name == "trap":
        args = words[1:]
        if args and args[0] == "--":
            args = args[1:]
        if len(args) >= 2 and not args[0].startswith("-"):
            return [args[0]], ""
        return [], ""
    if name == "alias":
        return [w.split("=", 1)[1] for w in words[1:] if "=" in w], ""
    if name in _SHELLS:
        return _shell_script(name, words)
    return [], ""


def _shell_options(name: str, words: list[str]) -> tuple[int, str, str]:
    """A shell's options read as bash reads them — long ones first (``--rcfile F``, ``-norc``), then
    one-letter ones, grouped or not (``-ec``, ``-o pipefail``: each ``o``/``O`` takes the next word), ``-``
    or ``--`` ending them: where its operands start, the letters given, and why they are not known, or ""."""
    i = 1
    if name == "bash":
        while i < len(words) and words[i].startswith("-") and words[i] not in ("-", "--"):
            long = words[i][2:] if words[i].startswith("--") else words[i][1:]
            if long in _BASH_LONG_FLAGS:
                i += 1
            elif long in _BASH_LONG_VALUED:
                i += 2
            else:
                break  # one-letter options (or a long one not known: below)
    letters = ""
    while i < len(words):
        arg = words[i]
        if arg in ("-", "--"):
            return i + 1, letters, ""
        if arg.startswith("--"):
            return i, letters, f"{name} runs a command line, and with the option {arg!r} which one is not known"
        if arg[:1] in ("-", "+") and len(arg) > 1:
            letters += arg[1:]
            i += 1 + arg.count("o") + arg.count("O")
            continue
        break
    return i, letters, ""


def _shell_script(name: str, words: list[str]) -> tuple[list[str], str]:
    """A shell's ``-c`` string: the first word after its options (``bash -c -- 'cmd'``; ``_shell_options``)."""
    i, letters, why = _shell_options(name, words)
    if why:
        return [], why
    return ([words[i]] if "c" in letters and i < len(words) else []), ""  # else a script file or the input


def _reads_input(words: list[str]) -> bool:
    """Whether ``words`` are a shell running the commands of its input (no ``-c`` and no script file, or
    ``-s``): ``bash <<'EOF'`` runs the here-document as ``bash -c`` runs its string."""
    name = words[0].rsplit("/", 1)[-1] if words else ""
    if name not in _SHELLS:
        return False
    i, letters, why = _shell_options(name, words)
    return not why and "c" not in letters and ("s" in letters or i >= len(words))


def _rough_strings(words: list[str]) -> list[str]:
    """For a deny rule's rough reading of a part that cannot be judged: the words of ``words`` that may be
    command lines it runs — every argument of a shell, ``eval`` (its words joined too), ``trap``, ``alias``
    or ``env`` (an ``-S`` value, or the part after ``=``), and a command name holding a blank (how an
    ``env -S`` value not read exactly stands)."""
    if not words:
        return []
    name = words[0].rsplit("/", 1)[-1]
    out = [words[0]] if any(c.isspace() for c in words[0]) else []
    if name in _SHELLS or name in ("eval", "trap", "alias", "env"):
        for word in words[1:]:
            out += [word, word.split("=", 1)[1]] if "=" in word else [word]
        if name == "eval":
            out.append(" ".join(words[2:] if words[1:2] == ["--"] else words[1:]))
    return [w for w in dict.fromkeys(out) if w.strip()]


#: Builtins (and ``[[``) that evaluate a word as arithmetic or as a variable name with a subscript:
#: bash runs a ``$( … )`` or a backtick there even when the word was quoted (``test -v 'a[$(rm x)]'``,
#: ``printf -v``, ``declare -i x='a[$(…)]'``, ``read``, ``let``; ``compgen -W`` expands its word list).
_EVALUATING = frozenset({"[", "[[", "test", "let", "declare", "typeset", "local", "export", "readonly", "read",
                         "unset", "mapfile", "readarray", "getopts", "wait", "printf", "compgen", "complete"})
#: What bash may run when a value is evaluated as arithmetic later (``x='a[$(rm y)]'; (( x ))``).
_RUNS_WHEN_EVALUATED = re.compile(r"\$[({\[]|`")


def _evaluated_text(words: list[str] | tuple[str, ...]) -> str:
    """Why ``words`` (a builtin and its arguments, as bash passes them) may run a command hidden in a
    word bash evaluates (E2), or "": a ``$`` or a backtick in any argument of a builtin of
    ``_EVALUATING`` (``printf`` only with ``-v``). A program named by a path (``/usr/bin/test``) is no builtin."""
    if not words or words[0] not in _EVALUATING:
        return ""
    args = words[1:]
    if words[0] == "printf" and not any(a == "-v" or (a.startswith("-v") and len(a) > 2) for a in args[:2]):
        return ""
    for word in args:
        if "$" in word or "`" in word:
            return (f"{words[0]!r} evaluates {word!r} as arithmetic or a variable name, where bash runs the "
                    "command inside it even when it was quoted")
    return ""


# ------------------------------------------------------------------------------------------ parsing
