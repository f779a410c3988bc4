"""Reading a parsed command line's words and here-documents as bash reads them (E2), for
``command_rules``: a word's value once quotes and escapes are removed (or None when only running it
tells), an assignment, whether a glob is unquoted, text the tree skips and line continuations bash
removes, the words of a ``[[ … ]]`` / ``[ … ]`` test, where bash ends a here-document and whether its
text is read exactly, and what a here-document or here-string feeds a command. No Qt, no I/O.

tree-sitter-bash reads here-documents differently from bash in ways that hid commands from the rules (a
review found them): it ends ``<<E"O"F`` (or ``E'O'F``, ``$'EOF'``) at a line ``E"O"F`` where bash removes
the quotes and ends at ``EOF``; it has no node for a backtick in an unquoted body, which bash runs; it
does not join ``EO\\⏎F`` into ``EOF`` as bash does in an unquoted body; and it ends a body at the marker
bash does not (inside a ``$( … )`` spanning lines). So a here-document is read only when its end marker is
a plain word (``EOF``) or one quoted word (``'EOF'``, ``"EOF"``), no line of it begins with that marker
before its end, and an unquoted one holds no backtick, no backslash escape or line join and no ``$``
expansion the grammar did not read as a node of its own; any other is *unjudged* (``heredoc_problem``),
its text — the body too — given to a deny rule's rough reading.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from typing import Any

_TO_ASCII = bytes(b if b < 0x80 else 0x61 for b in range(256))
_SOURCE = threading.local()  # the real bytes of the line being walked (the parser saw an ASCII copy)


def _text(node: Any) -> str:
    source = getattr(_SOURCE, "value", b"")
    return source[node.start_byte:node.end_byte].decode("utf-8", "replace")


_BRACE_EXPANSION = re.compile(r"\{[^{}\s]*(,|\.\.)[^{}\s]*\}")
_GLOB_CHARS = re.compile(r"[*?\[]")


def _is_arithmetic(node: Any) -> bool:
    if node.type == "arithmetic_expansion":
        return True
    first = node.children[0] if node.type == "compound_statement" and node.children else None
    return first is not None and not first.is_named and first.type == "(("


def _assignment(node: Any) -> str | None:
    """``NAME=value`` as bash assigns it, or None when the value (or a subscript) is only known at run time."""
    children = node.named_children
    if not children:
        return None
    name = children[0]
    if name.type != "variable_name":
        return None  # a subscript (a[$(x)]=…) or something else: not judged
    op = next((c for c in node.children if not c.is_named), None)
    sign = _text(op) if op is not None else "="
    values = children[1:]
    if not values:
        return _text(name) + sign
    value = _literal(values[0]) if len(values) == 1 else None
    return None if value is None else _text(name) + sign + value


def _unquoted_glob(node: Any) -> bool:
    """Whether a glob character in ``node`` is outside quotes (so bash expands it)."""
    if node.type == "word":
        return bool(_GLOB_CHARS.search(_text(node).replace("\\*", "").replace("\\?", "").replace("\\[", "")))
    if node.type == "concatenation":
        return any(_unquoted_glob(c) for c in node.named_children)
    return False


def _literal(node: Any) -> str | None:
    """The word as bash passes it to the program, or None when only running it tells (an expansion,
    a substitution, a brace expansion, ANSI-C quoting, anything this module does not know)."""
    kind = node.type
    if kind == "word":
        raw = _text(node)
        if _BRACE_EXPANSION.search(raw) or "$" in raw or "`" in raw:
            return None
        return _unescape(raw)
    if kind == "number":
        raw = _text(node)
        return raw if re.fullmatch(r"[0-9A-Za-z_#]+", raw) else None
    if kind == "raw_string":
        raw = _text(node)
        return raw[1:-1] if len(raw) >= 2 else None
    if kind == "string":
        out = []
        for child in node.children:
            if not child.is_named:
                continue  # the quotes
            if child.type != "string_content":
                return None  # an expansion or a substitution inside the quotes
            out.append(_unescape_double(_text(child)))
        inner = "".join(out)
        raw = _text(node)
        # tree-sitter leaves out content it reads as whitespace-only in some strings; trust the source then
        if not out and len(raw) >= 2 and "$" not in raw and "`" not in raw:
            return _unescape_double(raw[1:-1])
        return inner
    if kind == "concatenation":
        pieces = []
        for child in node.named_children:
            value = _literal(child)
            if value is None:
                return None
            pieces.append(value)
        joined = _text(node)
        if _BRACE_EXPANSION.search(joined) and any(c.type == "word" for c in node.named_children):
            return None  # p{yt,}est: bash expands braces across the pieces
        return "".join(pieces)
    return None


def _unescape(raw: str) -> str:
    """An unquoted word: ``\\x`` is ``x``, a backslash-newline joins lines."""
    return re.sub(r"\\(.)", r"\1", raw.replace("\\\n", ""), flags=re.DOTALL)


def _unescape_double(raw: str) -> str:
    """Inside double quotes only ``\\$``, ``\\```, ``\\"``, ``\\\\`` and backslash-newline are escapes."""
    raw = raw.replace("\\\n", "")
    return re.sub(r"\\([$`\"\\])", r"\1", raw)


# ------------------------------------------------------------------------------------ the raw text


def _skipped(source: bytes, root: Any) -> str:
    """Text of ``source`` that no leaf of the tree covers (besides blanks, line continuations and ``;``
    or ``&`` the grammar folds away), or ""."""
    covered = bytearray(len(source))
    stack = [root]
    while stack:
        node = stack.pop()
        children = node.children
        if not children or node.type in ("heredoc_body", "heredoc_content", "comment"):
            covered[node.start_byte:node.end_byte] = b"\x01" * (node.end_byte - node.start_byte)
        else:
            stack.extend(children)
    gaps = bytes(b for b, c in zip(source, covered) if not c)
    rest = gaps.replace(b"\\\n", b"").translate(None, b" \t\r\n")
    return rest.decode("utf-8", "replace")[:40]


def _join_continuations(source: bytes, root: Any) -> bytes | None:
    """``source`` without the line continuations bash removes — a backslash-newline no leaf of the tree
    covers (inside single quotes or a comment a leaf covers it and bash keeps it) — or None when it holds
    none. A here-document's text is covered by a leaf too: bash keeps a quoted one's, and an unquoted one
    holding one is unjudged (``heredoc_problem``: bash joins ``EO\\⏎F`` into its end marker ``EOF``)."""
    covered = bytearray(len(source))
    stack = [root]
    while stack:
        node = stack.pop()
        if node.children:
            stack.extend(node.children)
        else:
            covered[node.start_byte:node.end_byte] = b"\x01" * (node.end_byte - node.start_byte)
    drop: set[int] = set()
    start = source.find(b"\\\n")
    while start != -1:
        newline = start + 1
        if not covered[newline]:
            backslashes = 0  # `\\<newline>` is an escaped backslash, then a newline
            while newline - backslashes - 1 >= 0 and source[newline - backslashes - 1] == 0x5C \
                    and not covered[newline - backslashes - 1]:
                backslashes += 1
            if backslashes % 2:
                drop.update((start, newline))
        start = source.find(b"\\\n", newline)
    if not drop:
        return None
    return bytes(b for i, b in enumerate(source) if i not in drop)


# ------------------------------------------------------------------------------------------------ [[ … ]]

#: Nodes of a test's expression tree: their children are read in turn.
_TEST_NODES = frozenset({"test_command", "binary_expression", "unary_expression", "parenthesized_expression"})


def test_words(node: Any, shown: Callable[[list[str]], str]) -> tuple[list[str], str] | None:
    """The words of a ``[[ … ]]`` or ``[ … ]`` test (``test_command``) as bash reads them, brackets and
    operators included (``[[ -f x ]]``), and the text a rule matches (operators as they are, the other
    words ``shown``); None when one is only known when it runs."""
    words: list[str] = []
    texts: list[str] = []
    stack = [node]
    while stack:
        n = stack.pop()
        if not n.is_named or n.type == "test_operator":
            words.append(_text(n))
            texts.append(_text(n))
        elif n.type in _TEST_NODES:
            stack.extend(reversed(n.children))
        elif n.type in ("regex", "extglob_pattern"):
            raw = _text(n)
            if re.search(r"[$`'\"\\]", raw):
                return None  # quoting inside a pattern: left to a run
            words.append(raw)
            texts.append(raw)
        else:
            value = _literal(n)
            if value is None:
                return None
            words.append(value)
            texts.append(shown([value]))
    return words, " ".join(texts)


# ---------------------------------------------------------------------------------------- here-documents

_MARKER = re.compile(r"[A-Za-z0-9_]+|'[A-Za-z0-9_]+'|\"[A-Za-z0-9_]+\"")
#: What may run a command in an unquoted here-document besides a backtick: ``$(``, ``${``, ``$[`` (a
#: ``$NAME`` or ``$1`` only puts a value in the text).
_EXPANDS = re.compile(rb"\$[({\[]")
_EXPANSION_NODES = frozenset({"simple_expansion", "expansion", "command_substitution", "arithmetic_expansion"})
#: A here-document's own pieces; what else the grammar puts in its node is the rest of the line.
HEREDOC_PIECES = frozenset({"heredoc_start", "heredoc_body", "heredoc_end", "file_descriptor"})
#: Nodes the grammar puts in a here-document's node that bash reads as the command's arguments
#: (``git <<EOF push --force``: bash runs ``git push --force``).
ARGUMENT_NODES = frozenset({"word", "string", "raw_string", "concatenation", "number", "simple_expansion", "expansion",
                            "command_substitution", "process_substitution", "ansi_c_string", "translated_string",
                            "arithmetic_expansion", "brace_expression"})


def heredoc_arguments(node: Any) -> list[Any]:
    """The words after a here-document's marker on its line (``heredoc_redirect`` ``node``): arguments."""
    return [c for c in node.named_children if c.type in ARGUMENT_NODES]


def _pieces(node: Any) -> tuple[Any, Any, Any] | None:
    kids = {c.type: c for c in node.children if c.type in HEREDOC_PIECES}
    if "heredoc_start" not in kids or "heredoc_end" not in kids:
        return None
    return kids["heredoc_start"], kids.get("heredoc_body"), kids["heredoc_end"]


def heredoc_problem(node: Any) -> str:
    """Why bash may read the here-document ``node`` (a ``heredoc_redirect``) differently from the tree —
    where it ends, or a command in its text the tree does not hold — or "" when the tree reads it exactly."""
    pieces = _pieces(node)
    if pieces is None:
        return "the parser did not read where it starts and ends"
    start, body, end = pieces
    raw = _text(start)
    if not _MARKER.fullmatch(raw):
        return (f"its end marker {raw!r} is not a plain word or one quoted word, so where bash ends it is "
                "not known")
    marker, quoted = raw.strip("'\""), raw[0] in "'\""
    if _text(end) != marker:
        return f"the parser ends it at {_text(end)!r}, bash at {marker!r}"
    source: bytes = _SOURCE.value
    indent = source[source.rfind(b"\n", 0, end.start_byte) + 1:end.start_byte]
    dash = any(c.type == "<<-" for c in node.children)  # bash takes tabs off each line
    if indent.strip(b"\t" if dash else b"") or source[end.end_byte:end.end_byte + 1] not in (b"", b"\n"):
        return f"the parser ends it on a line {_text(end)!r} does not stand alone on, where bash goes on"
    head = source[start.end_byte:body.start_byte if body is not None else end.start_byte]
    newline = head.find(b"\n")
    if newline == -1 or head[newline + 1:].strip(b"\t"):
        return "the parser reads the line it starts on differently from bash"
    offset = start.end_byte + newline + 1
    text = source[offset:end.start_byte]
    if any(line.lstrip(b"\t").startswith(marker.encode()) for line in text.split(b"\n")):
        return f"a line in it begins with its end marker {marker!r}, where bash may end it"
    if quoted:
        return ""  # bash reads a quoted one as it is written
    if b"`" in text:
        return "it holds a backtick: a command bash runs, which the parser does not read"
    if re.search(rb"\\[\n\\$`]", text):
        return "it holds a backslash escape or line join (bash joins `\\⏎`, and may end it there)"
    starts: set[int] = set()
    inside: list[tuple[int, int]] = []
    stack = list(body.children) if body is not None else []
    while stack:
        n = stack.pop()
        if n.type in _EXPANSION_NODES:
            starts.add(n.start_byte)
            if n.type == "command_substitution":
                inside.append((n.start_byte, n.end_byte))  # its commands are walked as commands
                continue
        stack.extend(n.children)
    for m in _EXPANDS.finditer(text):
        at = offset + m.start()
        if at not in starts and not any(a < at < b for a, b in inside):
            return f"it holds {m.group().decode()!r}, which bash expands and the parser did not read"
    return ""


def heredoc_text(node: Any) -> str | None:
    """The text a here-document feeds its command, or None when only a run knows it (an expansion or an
    escape in an unquoted one, or one bash may read differently: ``heredoc_problem``)."""
    pieces = _pieces(node)
    if pieces is None or heredoc_problem(node):
        return None
    start, _body, end = pieces
    source: bytes = _SOURCE.value
    text = source[source.index(b"\n", start.end_byte) + 1:end.start_byte]
    if _text(start)[0] not in "'\"" and re.search(rb"[$`\\]", text):
        return None
    if any(c.type == "<<-" for c in node.children):
        text = re.sub(rb"(?m)^\t+", b"", text)
    return text.decode("utf-8", "replace")


def fed_text(redirects: Sequence[Any]) -> tuple[str | None, Any] | None:
    """What ``redirects`` (in the order bash applies them) give a command as its input from a
    here-document or a here-string: (the text, or None when only a run knows it; the here-document or
    the here-string's word), or None when neither feeds descriptor 0 last (a file, a pipe, nothing)."""
    fed = None
    for r in redirects:
        fd = next((c for c in r.children if c.type == "file_descriptor"), None)
        if fd is not None and _text(fd) != "0":
            continue
        if r.type == "heredoc_redirect":
            fed = (heredoc_text(r), r)
        elif r.type == "herestring_redirect":
            word = r.named_children[-1] if r.named_children else r
            value = _literal(word) if word is not r else None
            fed = (None if value is None else value + "\n", word)
        elif any(not c.is_named and c.type.startswith("<") for c in r.children):
            fed = None  # `< file`, `<&3`: not text the line holds
    return fed
