"""What the words of one simple shell command run (E2): leading assignments, wrappers that run the
rest of their words as a command (``command``, ``exec``, ``env``, ``nice``, ``sudo`` …, their options
listed exactly), commands given as a string (``eval``, ``trap``, ``alias``, ``bash -c``), and commands
given as arguments (``xargs``, ``find -exec``).

``command_rules`` judges each simple command on the command it runs, so a deny rule on ``rm *`` is not
passed by ``X=1 rm``, ``command rm`` or ``exec rm`` (found by a review), and an allow rule on ``rm *``
covers ``command rm`` without a second rule. No Qt.
"""

from __future__ import annotations

import re
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
            for i in range(1, len(rest)):
                if not rest[i].startswith("-"):
                    yield rest[i:]
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
                    valued=_set("-u", "--unset"), assigns=True),
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
#: Commands that change the folder later relative paths are read from (a redirection's file, E2).
_FOLDER_CHANGERS = frozenset({"cd", "pushd", "popd", "source", ".", "eval"})


def _string_commands(words: list[str]) -> list[str]:
    """The command lines a command runs that are given to it as strings: ``eval`` (its words joined),
    ``trap 'cmd' SIG``, ``alias n='cmd'``, ``bash -c 'cmd'``; [] when none."""
    if not words:
        return []
    name = words[0].rsplit("/", 1)[-1]
    if name == "eval":
        return [" ".join(words[1:])] if len(words) > 1 else []
    if name == "trap":
        args = words[1:]
        if args and args[0] == "--":
            args = args[1:]
        if len(args) >= 2 and not args[0].startswith("-"):
            return [args[0]]
        return []
    if name == "alias":
        return [w.split("=", 1)[1] for w in words[1:] if "=" in w]
    if name in _SHELLS:
        i = 1
        script_next = False
        while i < len(words) and words[i][:1] in ("-", "+") and words[i] not in ("-", "--"):
            arg = words[i]
            if arg in ("-o", "+o", "-O", "+O"):
                i += 2
                continue
            if not arg.startswith("--") and "c" in arg[1:]:
                script_next = True
            i += 1
        if script_next:
            return [words[i]] if i < len(words) else []
        return []
    return []


# ------------------------------------------------------------------------------------------ parsing
