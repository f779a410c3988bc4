"""House rule (CONVENTIONS 1): engine, backends and harness never import Qt or qasync, even indirectly."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import workbench

ROOT = Path(workbench.__file__).parent
FORBIDDEN = ("PySide6", "qasync", "shiboken6", "PyQt5", "PyQt6")


def test_no_qt_import_statements_below_the_ui():
    offenders = []
    for layer in ("engine", "backends", "harness"):
        for path in (ROOT / layer).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = []
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module:
                    names = [node.module]
                offenders += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] in FORBIDDEN]
    assert offenders == []


def test_importing_the_engine_and_the_session_loads_neither_qt_nor_litellm():
    code = (
        "import sys, workbench.session, workbench.harness.stack, workbench.engine.agent\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('PySide6', 'qasync', 'litellm')]\n"
        "print(bad)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
