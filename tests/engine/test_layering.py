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


# The UI's imports from inside the engine: only pure helpers AGENTS.md names (token estimates,
# virtual-path normalising). Value types come from the facade (``workbench.session``'s ``__all__``),
# errors from ``workbench.errors``; nothing in engine/, harness/ or backends/ is built or called.
UI_MAY_TAKE = {
    ("workbench.engine.tokens", "estimate_tokens"),
    ("workbench.backends.base", "normalize"),
    ("workbench.backends.base", "is_under"),
}
INSIDE = ("workbench.engine", "workbench.harness", "workbench.backends")


def _inside(module: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in INSIDE)


def test_the_ui_takes_value_types_from_the_facade_and_reaches_no_engine_object():
    """House rule: ``ui/`` talks only to the Session facade; every import of it from inside the engine,
    the harness or the backends, at any depth of a module (lazy imports too), is one of the pure
    helpers listed above."""
    offenders = []
    for path in sorted((ROOT / "ui").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            where = f"ui/{path.relative_to(ROOT / 'ui')}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Import):
                offenders += [f"{where}: import {a.name}" for a in node.names if _inside(a.name)]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module == "workbench":
                    offenders += [f"{where}: from workbench import {a.name}" for a in node.names
                                  if _inside(f"workbench.{a.name}")]
                elif _inside(node.module):
                    offenders += [f"{where}: from {node.module} import {a.name}" for a in node.names
                                  if (node.module, a.name) not in UI_MAY_TAKE]
    assert offenders == []


def test_the_facade_exports_every_value_type_it_lists():
    import workbench.session as facade

    missing = [name for name in facade.__all__ if not hasattr(facade, name)]
    assert missing == []
