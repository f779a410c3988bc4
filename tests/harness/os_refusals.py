"""The OS refusing a file or folder (EACCES), for the tests of I5 and S6.

Tests run as root here, and root reads a mode-000 file: ``refuse`` makes one ``os`` call raise the
``PermissionError`` the OS would give a normal user, at the place the host backend meets it;
``modes_refuse`` says whether real file modes refuse this process (the real-EACCES tests skip if not).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest


def refuse(monkeypatch: pytest.MonkeyPatch, call: str, suffix: str) -> None:
    """``os.<call>`` (``open``, ``stat``, ``scandir``) raises EACCES for any path ending with ``suffix``."""
    real = getattr(os, call)

    def refusing(path: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(path, (str, os.PathLike)) and os.fspath(path).endswith(suffix):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, call, refusing)


def modes_refuse(tmp_path: Path) -> bool:
    """True when a mode-000 file refuses this process (not root, or root without CAP_DAC_OVERRIDE)."""
    probe = tmp_path / "mode-probe"
    probe.write_text("x")
    probe.chmod(0)
    try:
        probe.read_text()
        return False
    except PermissionError:
        return True
    finally:
        probe.chmod(0o600)
        probe.unlink()
