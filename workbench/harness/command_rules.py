"""Shell commands judged part by part (E2): parsing a command line into the commands it runs and the
files it writes, and matching command rules. No Qt, no I/O.

A rule that allows ``pytest *`` must not allow ``pytest; rm -rf x``, ``pytest && touch y``,
``pytest $(touch z)`` or ``pytest > ~/.bashrc``: peers that judge a compound command as one string let
exactly those through. Here the command is parsed with a real bash grammar (tree-sitter-bash, the
grammar GitHub's code view and Codex's command checks use; bashlex, the pure-Python alternative, raises
on ``case``, ``[[ ]]``, ``$(( ))`` and ``time``, so every such command would have to ask) and split into
*parts*:

- every simple command, wherever it sits — in a list (``;``, ``&&``, ``||``, ``&``, newlines), a
  pipeline, a subshell, a group, an ``if``/``for``/``while``/``case`` body, a function body, a command
  substitution (``$(…)``, backticks), a process substitution, an unquoted here-document or the rest of
  the line after a here-document's marker; and every ``[[ … ]]`` / ``[ … ]`` test, a part like ``test``;
- every assignment or ``export``/``declare``/``unset`` standing as a statement (``PATH=/x; pytest``
  changes what ``pytest`` means);
- every redirection that writes a file (``>``, ``>>``, ``&>``, ``>|``, ``<>``): a *write* part, judged
  as a ``write`` on the file's path by the path rules.

A part's words are evaluated as bash would pass them (quotes removed, escapes applied), so ``"rm" -rf x``
and ``r\\m -rf x`` are both ``rm -rf x`` to a deny rule. A part that cannot be known before it runs —
a word with an expansion (``$X``, ``$(…)``, ``$((…))``), a brace expansion, ANSI-C quoting, a command
name with a glob, a here-document bash may read differently from the grammar (``heredoc_problem``), a
``$``/backtick in a word bash evaluates as arithmetic or a name even quoted (``[[ 'a[$(x)]' -eq 1 ]]``,
``printf -v``: ``_evaluated_text``) — or a construct this module does not know, or a command that does
not parse, is *unjudged*: it asks, whatever the allow rules say (a deny rule matching its text still denies). Every
part must be allowed for the command to run without asking; any denied part denies the whole.

A command part is judged on the command it *runs* (P1: a rule cannot be passed by spelling the same
command differently):

- leading assignments (``X=1 rm x``) are parts of their own, judged like ``X=1; rm x`` — so ``rm *``
  judges the ``rm``, and an assignment such as ``LD_PRELOAD=…`` still needs its own allow;
- wrappers that only run the rest of their words as a command in the same folder (``_WRAPPERS``:
  ``command``, ``builtin``, ``exec``, ``env``, ``nice``, ``nohup``, ``time``, ``timeout``, ``stdbuf``,
  ``setsid``) are stripped, their options read exactly: ``command rm x`` is the part ``rm x``. A
  wrapper that runs the command as another user (``sudo``, ``doas``) or is named by a path
  (``/usr/bin/env rm x``) is stripped too, but its own text stays a part as well, so both must be
  allowed. An option this module does not know makes the part unjudged (it asks), and a deny rule then
  sees every way the words could be read (``rough_segments``);
- a command given as a string to ``eval`` (after ``--``), ``trap``, ``alias`` or ``bash``/``sh -c`` (its
  options read as bash reads them: ``-c --``, ``--rcfile F``; one not known makes it unjudged) is parsed
  too, and its parts judged besides the part itself; ``env -S 'cmd'`` runs the words it splits into;
- a backslash-newline outside quotes is removed before parsing, as bash removes it (``r\\<newline>m``
  is ``rm``; the grammar would read two words).

A redirection's file is judged as bash opens it, or not at all: a target holding an unquoted glob
(``> .gi?/confi?``: bash writes the one file it matches) or a tilde prefix naming a folder of the
shell (``~+``, ``~-``) is unjudged; so is every target that is not an absolute path when anything in the
line may change the folder (``cd``, ``pushd``, ``popd``, ``source``, ``eval``, a command only known when
it runs) or ``HOME`` (for ``~/…``) — the judge would read it from the starting folder.

Command patterns are ``fnmatch`` globs over a part's text (``*`` matches anything, spaces included),
and a pattern ending in `` *`` also matches the command with no arguments (``pytest *`` covers
``pytest``), as Claude Code's ``pytest:*`` does.
"""

from __future__ import annotations

import fnmatch
import re
import shlex
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from workbench.harness.command_literals import (
    _GLOB_CHARS,
    _SOURCE,
    _TO_ASCII,
    HEREDOC_PIECES,
    _assignment,
    _is_arithmetic,
    _join_continuations,
    _literal,
    _skipped,
    _text,
    _unquoted_glob,
    fed_text,
    heredoc_arguments,
    heredoc_problem,
    test_words,
)
from workbench.harness.command_words import (
    _FOLDER_CHANGERS,
    _RUNS_WHEN_EVALUATED,
    _WRAPPERS,
    _argument_commands,
    _evaluated_text,
    _possible_commands,
    _reads_input,
    _rough_strings,
    _runs,
    _string_commands,
)

__all__ = [
    "MAX_COMMAND_CHARS",
    "rough_segments",
    "Parsed",
    "Part",
    "UnjudgedPart",
    "match_command",
    "parse",
    "prefix_patterns",
    "shown_words",
]

#: Longer command lines are not parsed (bounded work, F3); they ask.
MAX_COMMAND_CHARS = 100_000
#: Deeper nesting than this (``$($($(…)))``) is not walked; the command asks.
MAX_DEPTH = 200


class UnjudgedPart(str):
    """A part's text that no allow rule may pass (it asks): ``why`` says what could not be judged;
    ``segments`` are the command-like stretches of its text (``rough_segments``), which a deny rule
    is matched against too, so an unreadable line still cannot smuggle a denied command past it."""

    why: str
    segments: tuple[str, ...]

    def __new__(cls, text: str, why: str) -> UnjudgedPart:
        obj = super().__new__(cls, text)
        obj.why = why
        obj.segments = rough_segments(text)
        return obj


@dataclass(frozen=True)
class Part:
    """One thing a command line does. ``kind`` ``command``: a simple command (``text`` is its words as
    bash passes them, shell-quoted where needed); ``write``: a redirection writing the file ``text``
    (as written, relative to the command's folder). ``why`` is set when the part cannot be judged."""

    kind: Literal["command", "write"]
    text: str
    words: tuple[str, ...] = ()
    why: str = ""

    @property
    def judged(self) -> bool:
        return not self.why


@dataclass(frozen=True)
class Parsed:
    """A command line split into its parts, in source order."""

    command: str
    parts: tuple[Part, ...]

    @property
    def commands(self) -> list[Part]:
        return [p for p in self.parts if p.kind == "command"]

    @property
    def writes(self) -> list[Part]:
        return [p for p in self.parts if p.kind == "write"]


# ----------------------------------------------------------------------------------------- matching


def match_command(pattern: str, text: str) -> bool:
    """Whether a command ``pattern`` (an ``fnmatch`` glob, case-sensitive) covers a part's ``text``;
    ``X *`` also covers ``X`` alone."""
    if fnmatch.fnmatchcase(text, pattern):
        return True
    return pattern.endswith(" *") and fnmatch.fnmatchcase(text, pattern[:-2])


_PLAIN_WORD = re.compile(r"[\w@%+=:,./~^*?\[\]{}-]+")


_OPERATORS = re.compile(r"\$\(\(|\$\(|\$\{|<\(|>\(|\)\)|[;&|(){}`\n]")
_KEYWORDS = frozenset({"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "for", "case", "esac",
                       "in", "!", "time", "function", "select", "coproc", "{", "}", "[[", "]]"})


def rough_segments(text: str, _depth: int = 0) -> tuple[str, ...]:
    """The stretches of ``text`` between shell operators, each as shown words without leading keywords,
    and read the same way, the strings a shell, ``eval`` or ``env -S`` among them may run
    (``_rough_strings``, a few levels deep): a rough reading, used only to let a deny rule refuse a part
    the parser could not read (it can only add a refusal, never allow anything)."""
    out: list[str] = []
    text = text[:MAX_COMMAND_CHARS]
    # bash joins a backslash-newline outside single quotes; read the text both ways
    for reading in dict.fromkeys([text, text.replace("\\\n", "")]):
        for stretch in _OPERATORS.split(reading):
            try:
                words = shlex.split(stretch)
            except ValueError:  # a quote the operators split off: read the words without it
                words = [w.strip("'\"") for w in stretch.split() if w.strip("'\"")]
            while words and words[0] in _KEYWORDS:
                words = words[2:] if words[:2] == ["time", "-p"] else words[1:]
            if words:
                readings = [words, *_possible_commands(words)]
                out.extend(shown_words(w) for w in readings)
                for line in (s for r in readings for s in _rough_strings(r)) if _depth < 3 else ():
                    out.extend(rough_segments(line, _depth + 1))
    if _depth == 0:
        out.extend(_flat_segments(text))
    return tuple(dict.fromkeys(out))


_FLAT_BREAKS = re.compile(_OPERATORS.pattern + r"|<<<|<<-?|&>|[<>]&?")  # the operators, and redirections
_FLAT_WORDS = 32  # a deny pattern longer than this many words is matched on the parsed reading only
_FLAT_SEGMENTS = 5_000


def _flat_segments(text: str) -> list[str]:
    """The roughest reading, for quoting nested past what ``rough_segments`` peels (a subscript in a
    subscript in a here-string): quotes and backslashes read as blanks, the text split at operators and
    redirections, and every run of words in it that may be a command — each word onwards, at most
    ``_FLAT_WORDS`` of them. It only lets a deny rule refuse a part already asked about."""
    out: list[str] = []
    for stretch in _FLAT_BREAKS.split(re.sub(r"[\"'\\]", " ", text)):
        words = stretch.split()
        for i in range(len(words)):
            out.append(" ".join(words[i:i + _FLAT_WORDS]))
            if len(out) >= _FLAT_SEGMENTS:
                return out
    return out


def shown_words(words: tuple[str, ...] | list[str]) -> str:
    """Words as one line a person reads and a rule matches: plain words as they are, others quoted."""
    return " ".join(w if _PLAIN_WORD.fullmatch(w) else shlex.quote(w) for w in words)


def _escape(text: str) -> str:
    """``text`` as a glob matching exactly itself."""
    return re.sub(r"([*?\[])", r"[\1]", text)


def prefix_patterns(part: Part) -> list[str]:
    """Rule patterns a person may want for a command part, narrowest first: the exact command, then
    the program and its sub-command with any arguments (``git commit *``), then the program with any
    arguments (``git *``). Only for judged command parts."""
    if part.kind != "command" or not part.judged or not part.words:
        return []
    words = part.words
    first = next((i for i, w in enumerate(words) if "=" not in w or w.startswith("=")), 0)
    program = words[: first + 1]  # assignments before the program stay in every proposal
    out = [_escape(part.text)]
    rest = words[first + 1:]
    if rest and not rest[0].startswith("-") and "/" not in rest[0] and "." not in rest[0] and len(words) > first + 2:
        out.append(_escape(shown_words([*program, rest[0]])) + " *")
    if rest:
        out.append(_escape(shown_words(list(program))) + " *")
    return list(dict.fromkeys(out))


@lru_cache(maxsize=1)
def _language() -> Any:
    """The bash grammar, or None when the library is missing (then every command asks)."""
    try:
        import tree_sitter_bash
        from tree_sitter import Language
    except ImportError:
        return None
    return Language(tree_sitter_bash.language())


_PARSERS = threading.local()


def _parser() -> Any:
    """This thread's parser: a tree-sitter parser is not to be shared between threads (the rule
    builder's preview judges past calls on a worker thread while a run judges on the loop's)."""
    parser = getattr(_PARSERS, "parser", None)
    if parser is None:
        language = _language()
        if language is None:
            return None
        from tree_sitter import Parser

        parser = _PARSERS.parser = Parser(language)
    return parser


def parse(command: str) -> Parsed:
    """Split ``command`` into its parts (see the module docstring). Never raises: what cannot be parsed
    is one unjudged part holding the whole command."""
    if not command.strip():
        return Parsed(command, (Part("command", command, (), "the command is empty"),))
    if len(command) > MAX_COMMAND_CHARS:
        return _whole(command, f"the command is longer than {MAX_COMMAND_CHARS:,} characters")
    if "\0" in command:
        return _whole(command, "the command holds a NUL character")
    try:
        # Strict: bytes that are not UTF-8 crash tree-sitter-bash's scanner (a lone surrogate did, here).
        source = command.encode("utf-8")
    except UnicodeEncodeError:
        return _whole(command, "the command holds characters that are not valid text (lone surrogates)")
    parser = _parser()
    if parser is None:
        return _whole(command, "the bash parser (tree-sitter-bash) is not installed")
    # tree-sitter-bash's scanner calls isalpha() on whole code points, which reads out of bounds (and
    # crashed the process here on `{` and U+10BB26). It only ever sees ASCII: every byte of a non-ASCII
    # character becomes `a`, a word character as the character is to bash (no non-ASCII character is a
    # shell metacharacter), so the words and offsets stay; the words' text is read from the real bytes.
    ascii_only = source.translate(_TO_ASCII)
    tree = parser.parse(ascii_only)
    root = tree.root_node
    joined = _join_continuations(source, root)
    if joined is not None:
        # bash removes a backslash-newline before it splits words (`r\<newline>m` runs rm); the grammar
        # splits a word there. Parse the line as bash reads it.
        return Parsed(command, parse(joined.decode("utf-8")).parts)
    outer = getattr(_SOURCE, "value", b"")  # a nested parse (see _Walker.arithmetic) restores it
    _SOURCE.value = source
    try:
        if root.has_error:
            return _whole(command, "it does not parse as a bash command (" + _first_error(root) + ")")
        skipped = _skipped(source, root)
        if skipped:
            # The grammar read the line differently from bash somewhere (it drops the `-` of
            # `python - <<EOF`): a command judged from such a tree could hide what bash runs.
            return _whole(command, f"the parser skipped {skipped!r}, so it may read the line differently from bash")
        walker = _Walker()
        try:
            walker.statements(root, 0)
        except RecursionError:
            return _whole(command, "it is nested too deeply to judge")
        return Parsed(command, _writes_after_folder_changes(walker.parts, command))
    finally:
        _SOURCE.value = outer


def _writes_after_folder_changes(parts: list[Part], command: str) -> tuple[Part, ...]:
    """``parts`` with every write whose file is not an absolute path made unjudged when the line may
    change what that path names before bash opens it: a relative path after a ``cd`` (or ``pushd``,
    ``popd``, ``source``, ``eval``, or a command only a run knows, which may be any of those), a ``~/``
    path when ``HOME`` is named anywhere. Anywhere in the line, not only before the write: a loop or a
    function runs a later ``cd`` before an earlier write."""
    unknown = any(p.kind == "command" and not p.judged for p in parts)
    folder_moves = unknown or any(p.kind == "command" and p.words and p.words[0] in _FOLDER_CHANGERS
                                  for p in parts)
    home_moves = unknown or "HOME" in command
    out: list[Part] = []
    for p in parts:
        if p.kind == "write" and p.judged and not p.text.startswith("/"):
            if p.text.startswith("~") and home_moves:
                p = Part("write", p.text, (), f"it writes {p.text!r} and the line may change HOME first")
            elif not p.text.startswith("~") and folder_moves:
                p = Part("write", p.text, (), f"it writes {p.text!r}, a path relative to a folder the line may "
                                              "change first (cd, pushd, popd, source, eval or a command only a "
                                              "run knows)")
        out.append(p)
    return tuple(out)


def _whole(command: str, why: str) -> Parsed:
    return Parsed(command, (Part("command", command, (), why),))


def _first_error(root: Any) -> str:
    stack = [root]
    while stack:
        node = stack.pop()
        if node.is_error or node.is_missing:
            what = "missing " + node.type if node.is_missing else "unexpected " + repr(_text(node)[:20])
            return f"{what} at character {node.start_byte + 1}"
        stack.extend(reversed(node.children))
    return "a syntax error"


#: Nodes that hold statements: their named children are walked as statements.
_STRUCTURAL = frozenset({
    "program", "list", "pipeline", "subshell", "compound_statement", "if_statement",
    "elif_clause", "else_clause", "while_statement", "do_group", "for_statement", "c_style_for_statement",
    "case_statement", "case_item", "negated_command", "function_definition",
})
#: Nodes that only hold words or expressions: nothing runs there but the substitutions inside them.
_WORDLIKE = frozenset({
    "word", "string", "raw_string", "ansi_c_string", "translated_string", "concatenation", "number",
    "simple_expansion", "expansion", "arithmetic_expansion", "variable_name", "special_variable_name",
    "test_operator", "binary_expression", "unary_expression", "ternary_expression", "postfix_expression",
    "parenthesized_expression", "regex", "extglob_pattern", "string_content", "brace_expression",
    "subscript", "heredoc_start", "heredoc_end", "heredoc_content", "file_descriptor", "command_name", "array",
})
_SUBSTITUTIONS = frozenset({"command_substitution", "process_substitution"})
_REDIRECTS = frozenset({"file_redirect", "heredoc_redirect", "herestring_redirect"})
_WRITE_OPS = frozenset({">", ">>", "&>", "&>>", ">|", "<>"})
#: Redirection targets that write nothing anyone keeps.
_HARMLESS_TARGETS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"})
#: `~+` is $PWD, `~-` $OLDPWD, `~2` a folder of `dirs`: a tilde prefix no home folder explains.
_SHELL_TILDE = re.compile(r"~(?:[+-][0-9]*|[0-9]+)(?:/|$)")
#: Closing a descriptor (`2>&-`): the `-` is part of the operator, so the redirection has no target.
_CLOSE_OPS = frozenset({">&-", "<&-"})
#: `{fd}>file`: bash opens a new descriptor and keeps its number in the variable.
_VARIABLE_DESCRIPTOR = re.compile(r"\{[A-Za-z_][A-Za-z0-9_]*\}")


def _redirect_op(node: Any) -> str:
    return next((c.type for c in node.children if not c.is_named), "")


def redirect_arguments(node: Any) -> list[Any]:
    """The words the grammar puts in a file redirection's node after its target, which bash gives the
    command as arguments: ``git 2>&1 push origin`` runs ``git push origin``, ``cat < in rm x`` runs
    ``cat rm x``; a close (``2>&-``) has no target, so every word after it is an argument."""
    if node.type != "file_redirect":
        return []
    destinations = [c for c in node.named_children if c.type != "file_descriptor"]
    return destinations if _redirect_op(node) in _CLOSE_OPS else destinations[1:]


def _file_redirects(redirects: Sequence[Any]) -> list[Any]:
    """The file redirections among ``redirects``, with those the grammar nests in a here-document's node
    (``chmod <<EOF >/dev/null -R 777 /``: bash gives ``-R 777 /`` to chmod)."""
    out = []
    for r in redirects:
        if r.type == "file_redirect":
            out.append(r)
        elif r.type == "heredoc_redirect":
            out += [c for c in r.named_children if c.type == "file_redirect"]
    return out


def _descriptor_words(words: Sequence[Any], redirects: Sequence[Any]) -> tuple[set[int], str]:
    """Of a command's words, those bash reads as a redirection's descriptor rather than an argument — the
    grammar reads ``0`` in ``cat 0<x`` as an argument — and why the command cannot be judged, if one
    names its descriptor with a variable (``{fd}>x``)."""
    # `&>` and `&>>` take no descriptor: `echo 777&>f x` prints "777 x"
    starts = {r.start_byte for r in redirects if _redirect_op(r) not in ("&>", "&>>")}
    fds: set[int] = set()
    why = ""
    for w in words:
        if w.end_byte not in starts:
            continue
        if w.type == "number" and _text(w).isdigit():
            fds.add(w.id)
        elif _VARIABLE_DESCRIPTOR.fullmatch(_text(w)):
            fds.add(w.id)
            why = why or f"the redirection after {_text(w)!r} keeps a new descriptor in a variable: not judged"
    return fds, why


class _Walker:
    """Collects the parts of a parsed command line, in source order."""

    def __init__(self) -> None:
        self.parts: list[Part] = []
        self.outer: dict[int, list[Any]] = {}  # a command's statement's redirections, by the command's node
        self.inherited: list[Any] = []  # what the compound statements around feed (``redirected``)

    def unjudged(self, node: Any, why: str, kind: Literal["command", "write"] = "command") -> None:
        self.parts.append(Part(kind, _text(node), (), why))

    def statements(self, node: Any, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise RecursionError
        kind = node.type
        if kind == "comment":
            return
        if _is_arithmetic(node):
            self.arithmetic(node)
            return
        if kind == "command":
            self.command(node, depth)
        elif kind == "redirected_statement":
            self.redirected(node, depth)
        elif kind == "test_command":
            self.test(node, depth)
        elif kind in ("declaration_command", "unset_command"):
            self.declaration(node, depth)
        elif kind in ("variable_assignment", "variable_assignments"):
            self.assignment(node, depth)
        elif kind in ("file_redirect", "heredoc_redirect", "herestring_redirect"):
            self.redirect(node, depth)
        elif kind in _STRUCTURAL:
            for child in node.named_children:
                if kind == "function_definition" and child.type == "word":
                    continue  # the function's name: defining it runs nothing
                self.statements(child, depth + 1)
        elif kind in _SUBSTITUTIONS:
            for child in node.named_children:
                self.statements(child, depth + 1)
        elif kind in _WORDLIKE:
            self.substitutions(node, depth)
        else:
            self.unjudged(node, f"the construct {kind!r} is not judged")
            self.substitutions(node, depth)

    def substitutions(self, node: Any, depth: int, skip: frozenset[str] = frozenset()) -> None:
        """The commands inside ``$(…)``, backticks and ``<(…)`` anywhere below ``node`` (not below a
        child whose type is in ``skip``)."""
        stack = [c for c in reversed(node.children) if c.type not in skip]
        while stack:
            child = stack.pop()
            if child.type in _SUBSTITUTIONS:
                self.statements(child, depth + 1)
            elif _is_arithmetic(child):
                self.arithmetic(child)
            else:
                stack.extend(reversed(child.children))

    def arithmetic(self, node: Any) -> None:
        """``$(( … ))`` and ``(( … ))``: bash reads what is not arithmetic as ``$( ( … ) )`` / ``( ( … ) )``
        — ``echo $(( touch a ) & wait)`` runs ``touch a`` — so the inside is also judged as commands (the
        property test against bash found that one). Real arithmetic then asks, as its word already did;
        quoted text in it asks too: bash runs a ``$( … )`` in a subscript even there (``a["$(…)"]``)."""
        text = _text(node)
        inner = text[2:-1] if text.startswith("$(") else text[1:-1]
        if re.search(r"[$`]", inner) and re.search(r"['\"\\]", inner):
            self.unjudged(node, "an arithmetic expression with quoted text: bash may run a command in it")
        self.parts.extend(parse(inner).parts)

    def redirected(self, node: Any, depth: int) -> None:
        """A statement with its redirections, which bash gives the last simple command of a pipeline or
        list (``x | bash <<'EOF'``), else the whole compound statement (a shell anywhere in it may read
        what they feed). Words the grammar puts in a here-document's node are, to bash, that command's
        arguments (``git <<EOF push --force`` runs ``git push --force``)."""
        body, inherited = node.child_by_field_name("body"), self.inherited
        outer = [r for r in node.named_children if r.type in _REDIRECTS]
        target = body
        while target is not None and target.type in ("pipeline", "negated_command", "list") and target.named_children:
            target = target.named_children[-1]
        if target is not None and target.type == "command":
            self.outer[target.id] = outer
        else:
            self.inherited = [*inherited, *outer]
            if any(heredoc_arguments(r) for r in outer if r.type == "heredoc_redirect"):
                self.unjudged(node, "words follow a here-document's marker where bash reads no argument")
            if any(redirect_arguments(r) for r in _file_redirects(outer)):
                self.unjudged(node, "words follow a redirection's target where bash reads no argument")
        for child in node.named_children:
            self.statements(child, depth + 1)
        self.inherited = inherited

    def test(self, node: Any, depth: int) -> None:
        """``[[ … ]]`` and ``[ … ]``: a part like a command named ``[[`` / ``[`` (P1: ``[[ … ]] || echo ok``
        is not just ``echo ok``); bash evaluates subscripts in it, even quoted (``_evaluated_text``)."""
        read = test_words(node, shown_words)
        if read is None:
            self.command_part(node, [], f"{_text(node)!r} is only known when it runs")
        elif _evaluated_text(read[0]):
            self.command_part(node, read[0], _evaluated_text(read[0]))
        else:
            self.parts.append(Part("command", read[1], tuple(read[0])))
        self.substitutions(node, depth)

    def command(self, node: Any, depth: int) -> None:
        """A simple command, with its statement's redirections (``redirected``: a here-document's node may
        hold words)."""
        words: list[str] = []
        n_assignments = 0  # the leading NAME=value words
        later = [c for c in node.named_children if c.type in _REDIRECTS]  # judged after the command
        own = [*later, *self.outer.pop(node.id, [])]
        feeds = [*self.inherited, *own]  # in the order bash applies them: the last one to its input wins
        # words the grammar nests in a redirection are, to bash, this command's arguments, in source order
        extra = [a for r in own if r.type == "heredoc_redirect" for a in heredoc_arguments(r)]
        extra += [a for r in _file_redirects(own) for a in redirect_arguments(r)]
        text = " ".join([_text(node), *(_text(a) for a in sorted(extra, key=lambda a: a.start_byte))]) if extra else None
        descriptors, why = _descriptor_words(node.named_children, own)
        for child in sorted([*node.named_children, *extra], key=lambda c: c.start_byte):
            kind = child.type
            if kind in _REDIRECTS or child.id in descriptors:
                continue
            if kind == "comment":
                continue
            if kind == "variable_assignment":
                value = _assignment(child)
                if value is None:
                    why = why or f"the assignment {_text(child)!r} is only known when it runs"
                    words.append(_text(child))
                else:
                    words.append(value)
                n_assignments += 1
                continue
            target = child.named_children[0] if kind == "command_name" and child.named_children else child
            value = _literal(target)
            if value is None:
                why = why or f"{_text(child)!r} is only known when it runs"
                words.append(_text(child))
            elif kind == "command_name" and (_GLOB_CHARS.search(value) and _unquoted_glob(target)):
                why = why or f"the command name {value!r} is a file pattern"
                words.append(value)
            elif kind == "command_name" and _keyword_like(_text(target)):
                # `! ! git push`, `! { git push; }`: after `!` the grammar takes `!` or `{` for a program;
                # bash, for a keyword
                why = why or f"it starts with {_text(target)!r}, which bash may read as a keyword"
                words.append(value)
            else:
                words.append(value)
        if why:
            self.command_part(node, words, why, text)
        else:
            self.runs(node, words, n_assignments, depth, text, feeds)
        self.substitutions(node, depth, skip=_REDIRECTS)  # the redirections' own: with them, below
        for r in later:
            self.redirect(r, depth)

    def runs(self, node: Any, words: list[str], n_assignments: int, depth: int, text: str | None = None,
             feeds: Sequence[Any] = ()) -> None:
        """A simple command whose words are all known, as the parts it runs (``_runs``): its assignments,
        an elevating wrapper's text, the command itself, and the command lines it gets as strings or, a
        shell, as a here-document or here-string for its input (``bash <<'EOF'``; ``feeds``)."""
        runs = _runs(words, n_assignments)
        if not runs.command:  # only assignments, or a wrapper that runs nothing (`env X=1`, `exec >f`)
            self.command_part(node, words, "", text)
            return
        for assignment in runs.assignments:
            self.parts.append(_assignment_part(assignment, shown_words([assignment])))
        for also in runs.also:
            self.command_part(node, also, "")
        why = runs.why or _evaluated_text(runs.command) or _string_commands(runs.command)[1]
        if why:  # as a whole, so a deny rule sees every reading of it (and the strings it may run)
            self.parts.append(Part("command", shown_words(runs.command), tuple(runs.command), why))
            return
        self.command_part(node, runs.command, "")
        fed = fed_text(feeds) if _reads_input(runs.command) else None
        if fed is not None:
            self.parts.extend(parse(fed[0]).parts if fed[0] is not None else [Part(
                "command", _text(fed[1]), (), "a shell runs this input as commands, known only when it runs")])
        for inner, why in _argument_commands(runs.command):  # xargs rm, find -exec rm {} ;
            if depth > MAX_DEPTH:
                raise RecursionError
            if why:  # as a whole, so a deny rule sees every reading of it
                self.parts.append(Part("command", shown_words(runs.command), tuple(runs.command), why))
            else:
                self.runs(node, inner, 0, depth + 1)
        for line in _string_commands(runs.command)[0]:
            if not line.strip():
                continue  # `trap '' TERM` ignores a signal; `eval ''` runs nothing
            if depth > MAX_DEPTH:
                raise RecursionError
            self.parts.extend(parse(line).parts)

    def command_part(self, node: Any, words: list[str], why: str, text: str | None = None) -> None:
        """One judged part: as written when it cannot be judged (``why``), else its words as bash reads them."""
        if why:
            self.parts.append(Part("command", text or _text(node), tuple(words), why))
        else:
            self.parts.append(Part("command", shown_words(words), tuple(words)))

    def declaration(self, node: Any, depth: int) -> None:
        """``export A=1``, ``local x``, ``unset PATH``: a part of its own (it changes later commands)."""
        words = [_text(node.children[0])] if node.children else []
        why = ""
        for child in node.named_children:
            value = _assignment(child) if child.type == "variable_assignment" else _literal(child)
            if value is None:
                why = why or f"{_text(child)!r} is only known when it runs"
                value = _text(child)
            words.append(value)
        self.command_part(node, words, why or _evaluated_text(words))
        self.substitutions(node, depth)

    def assignment(self, node: Any, depth: int) -> None:
        items = [node] if node.type == "variable_assignment" else [c for c in node.named_children
                                                                    if c.type == "variable_assignment"]
        for item in items:
            value = _assignment(item)
            if value is None:
                self.parts.append(Part("command", _text(item), (_text(item),),
                                       f"the assignment {_text(item)!r} is only known when it runs"))
            else:
                self.parts.append(_assignment_part(value, shown_words([value])))
        self.substitutions(node, depth)

    def redirect(self, node: Any, depth: int) -> None:
        if node.type == "heredoc_redirect":
            self.heredoc(node, depth)
            return
        self.substitutions(node, depth)
        if node.type != "file_redirect":
            return  # a here-string feeds input; its substitutions are walked above
        op = _redirect_op(node)
        if op in _CLOSE_OPS:
            return  # closing a descriptor writes no file; the words after it are arguments (``command``)
        # the first word is the target; the grammar puts the command's later arguments after it (``command``)
        targets = [c for c in node.named_children if c.type != "file_descriptor"][:1]
        if op in (">&", "<&"):
            target = _literal(targets[0]) if targets else "-"
            if op == "<&" or target is None or target == "-" or target.isdigit():
                if target is None and op == ">&":
                    self.unjudged(node, f"the redirection {_text(node)!r} writes where only a run knows", "write")
                return  # duplicating or closing a descriptor writes no file
            op = ">"  # `>& file`: stdout and stderr to a file
        if op not in _WRITE_OPS:
            return  # `<`: reads, like an argument naming a file would
        if len(targets) != 1:
            self.unjudged(node, f"the redirection {_text(node)!r} is not judged", "write")
            return
        target = _literal(targets[0])
        if target is None:
            self.unjudged(node, f"the redirection {_text(node)!r} writes to a file only a run knows", "write")
        elif _unquoted_glob(targets[0]):
            # bash expands a pattern in a redirection's file when it matches one file (`> .gi?/confi?`
            # writes .git/config): which file is only known when it runs
            self.unjudged(node, f"the redirection {_text(node)!r} writes to the file a pattern matches, known "
                                "only when it runs", "write")
        elif _SHELL_TILDE.match(target):
            self.unjudged(node, f"the redirection {_text(node)!r} writes in a folder of the shell ({target[:2]}: "
                                "$PWD or $OLDPWD), known only when it runs", "write")
        elif target not in _HARMLESS_TARGETS:
            self.parts.append(Part("write", target, (target,)))

    def heredoc(self, node: Any, depth: int) -> None:
        """A here-document: unjudged when bash may read it differently from the tree (``heredoc_problem``;
        its text, the body too, is then what a deny rule reads roughly), else the commands in its text;
        and what the grammar puts in its node after the marker — the rest of the line (``> f``,
        ``&& rm y``, ``| sh``: redirections and statements of their own; arguments, see ``redirected``)."""
        why = heredoc_problem(node)
        if why:  # where bash ends it is not known: a deny reads the rest of the line roughly
            rest = _SOURCE.value[node.start_byte:].decode("utf-8", "replace")
            self.parts.append(Part("command", rest, (), f"the here-document: {why}"))
        for child in node.named_children:
            if child.type == "heredoc_body":
                self.substitutions(child, depth)
            elif child.type in _REDIRECTS:
                self.redirect(child, depth + 1)
            elif child.type not in HEREDOC_PIECES:
                self.statements(child, depth + 1)


def _assignment_part(value: str, text: str) -> Part:
    """An assignment's part: unjudged when its value holds what bash runs if the variable is later
    evaluated as arithmetic (``x='a[$(rm y)]'; (( x ))``, or ``declare -i x``), so a deny sees it."""
    if _RUNS_WHEN_EVALUATED.search(value.split("=", 1)[-1]):
        return Part("command", text, (value,), f"the value of {text!r} holds a command bash runs if the variable "
                                               "is evaluated as arithmetic")
    return Part("command", text, (value,))


def _keyword_like(raw: str) -> bool:
    """A command name as written that bash may read as a keyword or a group: the grammar and bash
    disagree about those after `!`."""
    return (raw.split()[0] if raw.split() else raw) in _KEYWORDS or any(c in raw for c in "{}") \
        or any(c.isspace() for c in raw)


def iter_words(parsed: Parsed) -> Iterator[str]:
    """Every word of every judged command part (for tests and the rule builder)."""
    for part in parsed.commands:
        yield from part.words
