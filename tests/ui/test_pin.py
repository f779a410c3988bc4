"""The PySide6 pin (DESIGN §2): 6.12.0 on Python 3.11 loses a reference to None/True/False on every
call that returns one and aborts after a few thousand (``Fatal Python error: none_dealloc``)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

CALLS = 50_000

SCRIPT = textwrap.dedent(
    f"""
    import sys
    from PySide6 import __version__
    from PySide6.QtWidgets import QApplication, QLabel, QWidget

    app = QApplication([])
    label = QLabel()
    widget = QWidget()
    before = (sys.getrefcount(None), sys.getrefcount(True), sys.getrefcount(False))
    for i in range({CALLS} // 4):
        label.setText("x")            # returns None
        widget.isVisible()            # returns False
        label.wordWrap()              # returns False
        widget.setEnabled(i % 2 == 0) # returns None
    after = (sys.getrefcount(None), sys.getrefcount(True), sys.getrefcount(False))
    print("ok", __version__, before, after)
    """
)


def test_fifty_thousand_none_and_bool_calls_survive(tmp_path: Path) -> None:
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, f"the interpreter died ({proc.returncode}): {proc.stderr[-2000:]}"
    assert proc.stdout.startswith("ok"), proc.stdout + proc.stderr


def test_the_pin_is_declared() -> None:
    pyproject = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text(encoding="utf-8")
    assert "PySide6-Essentials>=6.7,<6.12; python_version < '3.12'" in pyproject
    if sys.version_info < (3, 12):
        from PySide6 import __version_info__

        assert tuple(__version_info__[:2]) < (6, 12)
