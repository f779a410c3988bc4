"""Scrub secrets from text that is stored or shown (R10, M8): provider error bodies echo keys.

``scrub(text, *extra)`` replaces with ``[redacted]``: every key the workbench knows in this process
(``remember``ed when a key is looked up or a model is built, plus the provider variables of
``workbench.secrets.ENV_VARS`` set in the environment), the ``extra`` values given, and anything shaped
like a key (``sk-…``, ``Bearer …``, ``api_key=…``, Google ``AIza…``). Cheap when nothing matches; only
called on error paths.
"""

from __future__ import annotations

import os
import re

REDACTED = "[redacted]"
_MIN_LEN = 8  # shorter values would redact ordinary words
_known: set[str] = set()

_SHAPES = re.compile(
    r"\b(?:sk|pk|rk|sess)-[A-Za-z0-9_\-]{8,}"  # OpenAI / Anthropic style (sk-proj-…, sk-ant-…)
    r"|\bAIza[0-9A-Za-z_\-]{20,}"  # Google API keys
    r"|\bgh[pousr]_[A-Za-z0-9]{20,}"  # GitHub tokens
    r"|(?<=Bearer )\s*[A-Za-z0-9._~+/=\-]{8,}"
    r"|(?i:(?<=api[_-]key)|(?<=api-key:)|(?<=apikey))[\"'\s:=]*[A-Za-z0-9._\-]{12,}",
)


def remember(secret: str | None) -> None:
    """Note a key this process uses, so every later ``scrub`` removes it."""
    if secret and len(secret) >= _MIN_LEN:
        _known.add(secret)


def known_secrets() -> set[str]:
    """Keys remembered in this process and those the provider environment variables hold."""
    from workbench.secrets import ENV_VARS

    found = {v for name in ENV_VARS.values() if (v := os.environ.get(name)) and len(v) >= _MIN_LEN}
    return found | _known


def scrub(text: str, *extra: str | None) -> str:
    """``text`` without any secret (see the module docstring)."""
    if not text:
        return text
    for secret in sorted({*known_secrets(), *(e for e in extra if e and len(e) >= _MIN_LEN)}, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, REDACTED)
    return _SHAPES.sub(_shape, text)


def scrub_known(text: str) -> str:
    """``text`` without the keys this process knows (``known_secrets``), compared exactly: for what a
    tool returns, where a key-like shape (a test fixture's ``sk-…``) is the file's real text and must
    stay as it is, but a real key a command printed must not reach the prompt or the store (F4, R10).
    A substring test per key: cheap enough for every tool result."""
    if not text:
        return text
    for secret in sorted(known_secrets(), key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


def _shape(match: re.Match[str]) -> str:
    # Keep the separator a look-behind form matched ("api_key=" stays readable), drop the value.
    value = match.group(0)
    lead = len(value) - len(value.lstrip("\"' :="))
    return value[:lead] + REDACTED
