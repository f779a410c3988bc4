"""The docs keep up with the code: every ``workbench`` command and flag is in docs/cli.md, every
``workbench.yaml`` key in docs/configuration.md's table (issue 11 added ``subagents`` keys, ``--detach``
and ``workbench tasks``; issue 12 the ``compression`` keys, nested ones too, and ``workbench compact``)."""

from __future__ import annotations

import argparse
import dataclasses
import typing
from pathlib import Path

import pytest

from workbench.cli import _parser
from workbench.config import WorkbenchConfig

DOCS = Path(__file__).resolve().parents[2] / "docs"

#: Sections whose dataclass fields are not the YAML's keys (a mount is {host|state|store, readonly}, a
#: rule {EFFECT: ACTION, path|tool}: both explained in their rows).
_NOT_FIELDS = {"mounts"}


def _yaml_name(field: dataclasses.Field[typing.Any]) -> str:
    return field.name.rstrip("_")  # ``async_`` is YAML's ``async``


def _rows(text: str) -> list[tuple[str, str]]:
    """(first cell, whole row) of every table row."""
    out = []
    for line in text.splitlines():
        if line.startswith("| `"):
            out.append((line.split("|")[1], line))
    return out


def _documented(rows: list[tuple[str, str]], section: str, leaf: str) -> bool:
    """A row names ``section.leaf``, or a row about ``section`` mentions ``leaf`` in backticks or as ``leaf:``."""
    for first, row in rows:
        if f"`{section}.{leaf}`" in row:
            return True
        if f"`{section}" in first and (f"`{leaf}`" in row or f"{leaf}:" in row or f"{leaf}," in row
                                       or f"`{section}.{leaf}" in first):
            return True
    return False


def _dataclass_of(tp: typing.Any) -> typing.Any:
    """The dataclass a field holds (itself, or the items of a tuple), else None."""
    if dataclasses.is_dataclass(tp):
        return tp
    for arg in typing.get_args(tp):
        if dataclasses.is_dataclass(arg):
            return arg
    return None


def _keys() -> list[tuple[str, str]]:
    """(section, leaf) for every documented-in-a-table key: top-level ones as ("", name)."""
    hints = typing.get_type_hints(WorkbenchConfig)
    out: list[tuple[str, str]] = []
    for f in dataclasses.fields(WorkbenchConfig):
        out.append(("", f.name))
        cls = _dataclass_of(hints[f.name])
        if cls is None or f.name in _NOT_FIELDS or f.name == "permissions":
            continue
        sub_hints = typing.get_type_hints(cls)
        for sub in dataclasses.fields(cls):
            out.append((f.name, _yaml_name(sub)))
            inner = _dataclass_of(sub_hints[sub.name])
            if inner is not None:  # subagents.agents[]: name, description, model, instructions, budget
                out += [(f"{f.name}.{_yaml_name(sub)}", _yaml_name(x)) for x in dataclasses.fields(inner)]
    out += [("permissions", "default"), ("permissions", "rules")]
    return out


@pytest.mark.parametrize("section,leaf", _keys(), ids=lambda v: v or "-")
def test_every_workbench_yaml_key_is_in_the_configuration_table(section: str, leaf: str) -> None:
    text = (DOCS / "configuration.md").read_text(encoding="utf-8")
    rows = _rows(text)
    if not section:
        assert any(f"`{leaf}`" in first or f"`{leaf}." in first for first, _ in rows), f"no row for `{leaf}`"
        return
    assert _documented(rows, section, leaf), f"docs/configuration.md: no row documents {section}.{leaf}"


def _commands() -> list[tuple[str, argparse.ArgumentParser]]:
    parser = _parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sorted(sub.choices.items())


@pytest.mark.parametrize("name,command", _commands(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_command_and_flag_is_in_the_cli_docs(name: str, command: argparse.ArgumentParser) -> None:
    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    assert f"workbench {name}" in text, f"docs/cli.md does not show `workbench {name}`"
    for action in command._actions:
        flags = [o for o in action.option_strings if o.startswith("--") and o != "--help"]
        for flag in flags:
            assert flag in text, f"docs/cli.md does not mention `workbench {name} {flag}`"


def test_subagent_keys_added_by_issue_11_are_documented() -> None:
    text = (DOCS / "configuration.md").read_text(encoding="utf-8")
    for key in ("subagents.max_concurrent", "subagents.max_depth", "subagents.timeout_seconds",
                "subagents.agents[].budget"):
        assert f"`{key}`" in text
    cli = (DOCS / "cli.md").read_text(encoding="utf-8")
    assert "--detach" in cli and "workbench tasks" in cli and "## Sub-agent tasks" in cli


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    import re

    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_links_between_the_docs_reach_a_file_and_heading() -> None:
    import re

    root = DOCS.parent
    files = [root / "README.md", *sorted(DOCS.glob("*.md"))]
    broken = []
    for f in files:
        for target in re.findall(r"\]\(([^)\s]+\.md(?:#[^)\s]*)?)\)", f.read_text(encoding="utf-8")):
            if "://" in target:
                continue
            path, _, anchor = target.partition("#")
            dest = (f.parent / path).resolve()
            if not dest.is_file():
                broken.append(f"{f.name}: {target} (no such file)")
                continue
            if anchor:
                heads = {_slug(h) for h in re.findall(r"^#+\s+(.*)$", dest.read_text(encoding="utf-8"), re.M)}
                if anchor not in heads:
                    broken.append(f"{f.name}: {target} (no such heading)")
    assert not broken, broken
