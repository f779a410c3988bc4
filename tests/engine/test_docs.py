"""The docs keep up with the code: every ``workbench`` command and flag is in docs/cli.md (issue 11 added
``--detach`` and ``workbench tasks``; issue 12 ``workbench compact``), and links between the pages resolve.
Every ``workbench.yaml`` key is in docs/configuration.md because that page is generated from the schema:
tests/engine/test_generated_docs.py."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from workbench.cli import _parser

DOCS = Path(__file__).resolve().parents[2] / "docs"

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
