"""Text others wrote, made safe to print on a person's terminal (P3, X5).

What the CLI prints comes partly from others: a model's tool names, arguments and answers, a tool's
output, a tool server's name, tool descriptions and errors, a workspace's files and a stored thread. A
terminal obeys the control characters in that text: an escape sequence (``ESC [2K``, ``ESC [1A``) or a
carriage return can erase or overwrite the line above it, so an approval prompt would show a command
other than the one that runs; bidirectional overrides and isolates show text in another order; zero-width
and other format characters hide text. ``terminal_safe`` shows every such character as a visible escape
(``\\x1b``, ``\\r``, ``\\u202e``) instead.

Replaced: C0 controls (U+0000–U+001F), DEL and the C1 controls (U+0080–U+009F) — Unicode category
``Cc`` —, format characters (``Cf``: bidi overrides and isolates, zero-width characters, the byte-order
mark, soft hyphen …), the line and paragraph separators (U+2028, U+2029), and lone surrogates (``Cs``,
which a terminal cannot show). ``multiline=True`` keeps ``\\n`` and ``\\t`` (a block meant to span lines:
an error, a server's log, an answer) and reads ``\\r\\n`` as ``\\n``; otherwise they are escaped too (one
line: a tool name, an argument, a title), so a value cannot start a line of its own.

Printable text — letters of every script, emoji, punctuation, backslashes — is returned unchanged.
Escaping twice changes nothing more (an escape is printable ASCII). No Qt, no engine imports.
"""

from __future__ import annotations

import unicodedata

__all__ = ["HIDING_CATEGORIES", "escape_code", "terminal_safe"]

#: The Unicode categories a terminal acts on or hides rather than shows: controls (C0, DEL, C1), format
#: characters (bidi, zero-width), surrogates, line and paragraph separators.
HIDING_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})

_NAMED = {0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r"}
_CACHE_LIMIT = 4096  # code points remembered per table; a text of many odd ones is still escaped, just uncached


def escape_code(code: int) -> str:
    """One code point as a visible escape: ``\\t``, ``\\n``, ``\\r``, else ``\\xNN``, ``\\uNNNN`` or ``\\UNNNNNNNN``."""
    if code in _NAMED:
        return _NAMED[code]
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


class _Table(dict):  # type: ignore[type-arg]
    """A ``str.translate`` table worked out per code point as it is met (and remembered, up to a limit)."""

    def __init__(self, keep: str) -> None:
        super().__init__()
        self._keep = frozenset(map(ord, keep))

    def __missing__(self, code: int) -> int | str:
        if code in self._keep or unicodedata.category(chr(code)) not in HIDING_CATEGORIES:
            value: int | str = code
        else:
            value = escape_code(code)
        if len(self) < _CACHE_LIMIT:
            self[code] = value
        return value


_ONE_LINE = _Table("")
_MULTILINE = _Table("\n\t")


def terminal_safe(text: object, *, multiline: bool = False, fold_crlf: bool = True) -> str:
    """``text`` (``str()`` of it when it is not a string) with every character a terminal would act on or
    hide shown as a visible escape. ``multiline``: keep line breaks and tabs (``\\r\\n`` as ``\\n``, unless
    ``fold_crlf`` is False: a command's ``\\r`` is part of the word before it for bash)."""
    if not isinstance(text, str):
        text = str(text)
    if text.isprintable():  # the common case: nothing to do (str.isprintable is stricter than we are)
        return text
    if multiline:
        return (text.replace("\r\n", "\n") if fold_crlf else text).translate(_MULTILINE)
    return text.translate(_ONE_LINE)
