"""Seals: a mark that says "made on this account" on what a thread's state grants (W1). No Qt.

A thread store is a file in the workspace (``.workbench/threads.sqlite3``), so it can arrive with the
folder — a repository that commits it, an archive someone sends — and its threads' state with it. Trust
(W1) covers ``workbench.yaml``, not that file. What a thread's state *grants* — the "always" approvals
kept as session rules — must therefore be the person's own: each is stored with a seal, an HMAC-SHA256
under a secret that never leaves this account, and a grant without a valid seal is left out (the
person is asked again). The secret lives in the key folder (``keystore.key_folder()``, mode 0700), which
no tool, mount or sandboxed command can read (F4): a workspace cannot forge a seal, nor read the secret
to make one.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import secrets
import threading
from pathlib import Path

from workbench.errors import WorkbenchError
from workbench.keystore import FILE_MODE, FOLDER_MODE, key_folder

log = logging.getLogger(__name__)

SEAL_FILENAME = "seal.key"
_SECRET_HEX = 64  # 32 random bytes, as hex

_lock = threading.Lock()
_secrets: dict[Path, bytes] = {}  # per key folder (tests and scripts may point it elsewhere)


class SealError(WorkbenchError):
    """The seal secret could not be read or made (the key folder is unwritable, or its file damaged)."""


def _secret() -> bytes:
    path = key_folder() / SEAL_FILENAME
    with _lock:
        known = _secrets.get(path)
        if known is not None:
            return known
        try:
            path.parent.mkdir(parents=True, exist_ok=True, mode=FOLDER_MODE)
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), FILE_MODE)
            except FileExistsError:
                text = _read(path)
            else:
                text = secrets.token_hex(_SECRET_HEX // 2)
                with os.fdopen(fd, "w", encoding="ascii") as fh:
                    fh.write(text + "\n")
        except OSError as e:
            raise SealError(f"cannot read or make the seal secret {path}: {e.strerror or e}") from None
        secret = bytes.fromhex(text)
        _secrets[path] = secret
        return secret


def _read(path: Path) -> str:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, encoding="ascii", errors="replace") as fh:
        text = fh.read().strip()
    if len(text) != _SECRET_HEX or any(c not in "0123456789abcdef" for c in text):
        raise SealError(f"the seal secret {path} is damaged; remove it (grants sealed with it are then asked "
                        "again)")
    return text


def seal(*parts: str) -> str:
    """The seal of ``parts`` (joined unambiguously): store it beside what it seals."""
    message = "\x00".join(p.replace("\\", "\\\\").replace("\x00", "\\0") for p in parts).encode("utf-8", "surrogatepass")
    return hmac.new(_secret(), message, hashlib.sha256).hexdigest()[:32]


def sealed(mark: object, *parts: str) -> bool:
    """True when ``mark`` is the seal of ``parts`` made on this account. Never raises: a seal that cannot
    be checked (no secret yet, a damaged secret file) seals nothing."""
    if not isinstance(mark, str) or len(mark) != 32:
        return False
    try:
        expected = seal(*parts)
    except SealError as e:
        log.warning("%s", e)
        return False
    return hmac.compare_digest(mark, expected)
