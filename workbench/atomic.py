"""Atomic text writes: a temp file in the same folder, flushed, then ``os.replace``.

A crash leaves either the old file or the new one, never half of each (settings, workbench.yaml).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_text_atomic(path: Path | str, text: str, *, mode: int | None = None) -> Path:
    """Write ``text`` to ``path`` atomically. ``mode``: the file's permissions (default: keep the
    existing file's, else 0644). The temp file is created 0600, so a secret is never readable."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if mode is None:
        mode = path.stat().st_mode & 0o7777 if path.exists() else 0o644
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path
