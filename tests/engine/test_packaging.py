"""The wheel carries every package of the source tree (K3): a package missing from pyproject's list
works in an editable install and breaks the installed app."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_package_folder_is_listed_in_pyproject() -> None:
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {
        ".".join(p.parent.relative_to(ROOT).parts)
        for p in (ROOT / "workbench").rglob("__init__.py")
        if "__pycache__" not in p.parts
    }
    assert found - listed == set(), f"add to [tool.setuptools] packages: {sorted(found - listed)}"
