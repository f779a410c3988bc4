"""The reference pages cannot drift (issue 16): docs/configuration.md and docs/cli.md are what
``python -m workbench.docs`` generates from the schema, the argument parser, the exit codes and the event
definitions; every key, event and trust-gated setting has its words; nothing points users at ../shared."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from workbench import docs
from workbench.config import parse_config, reference
from workbench.engine.event_docs import EVENTS
from workbench.engine.events import DURABLE_TYPES, LIVE_TYPES

ROOT = Path(__file__).resolve().parents[2]


def test_the_committed_pages_are_what_the_generator_makes() -> None:
    for name in docs.PAGES:
        assert (ROOT / "docs" / name).read_text(encoding="utf-8") == docs.render(name), (
            f"docs/{name} is stale: run `python -m workbench.docs` and commit the result")
    assert docs.main(["--check"]) == 0


def test_check_names_a_page_that_differs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "configuration.md").write_text(docs.render("configuration.md") + "a hand edit\n")
    (tmp_path / "cli.md").write_text(docs.render("cli.md"))
    monkeypatch.setattr(docs, "DOCS", tmp_path)
    assert docs.main(["--check"]) == 1
    err = capsys.readouterr().err
    assert "docs/configuration.md differs" in err and "cli.md" not in err


def test_every_schema_key_is_described_and_every_description_is_a_key() -> None:
    keys = {key for key, _, _ in docs.schema_keys()}
    sections = {key for key, tp, _ in docs.schema_keys() if docs.dataclasses.is_dataclass(tp)}
    assert keys - sections - set(reference.KEYS) == set(), "keys without words in reference.KEYS"
    assert set(reference.KEYS) - keys == set(), "reference.KEYS describes keys the schema does not have"
    rows = {r.key for r in docs.key_rows()}
    page = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    for key in rows:
        assert f"| `{key}`" in page


def test_a_key_without_words_stops_the_generator(monkeypatch: pytest.MonkeyPatch) -> None:
    keys = dict(reference.KEYS)
    del keys["subagents.max_depth"]
    monkeypatch.setattr(reference, "KEYS", keys)
    with pytest.raises(KeyError, match="subagents.max_depth"):
        docs.config_keys_block()


def test_every_event_type_is_documented_with_its_kind() -> None:
    assert set(EVENTS) == DURABLE_TYPES | LIVE_TYPES
    page = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    for name in DURABLE_TYPES:
        assert f"| `{name}` | durable |" in page
    for name in LIVE_TYPES:
        assert f"| `{name}` | live |" in page


async def test_events_of_a_real_session_carry_only_documented_fields(tmp_path: Path) -> None:
    """The demo session (tools, approvals, plan, artifacts, documents): every event's fields are in its
    entry, so the --json reference says what a line can hold."""
    from tests.engine.test_demo import demo_workspace, play
    from workbench.engine.models.demo import DemoModel
    from workbench.session import Session

    ws = demo_workspace(tmp_path)
    session = await Session.open(ws, model=DemoModel(chunk_delay=0))
    seen: list[tuple[str, set[str]]] = []
    unsubscribe = session.subscribe(lambda e: seen.append((e.type, set(e.data))), replay=False)
    try:
        await play(session)
    finally:
        unsubscribe()
        await session.close()
    assert len({t for t, _ in seen}) >= 10, seen
    for type_, fields in seen:
        doc = EVENTS[type_]
        if not doc.open:
            assert fields <= set(doc.fields), f"{type_} carries undocumented fields {fields - set(doc.fields)}"


_WIDENING = """
model: openai/gpt-4.1-mini
api_base: http://10.0.0.5:8000/v1
mounts: {/project: {host: .}, /elsewhere: {host: /srv/data}}
permissions:
  default: allow
  rules:
    - {allow: write, path: "/project/**"}
subagents:
  agents:
    - {name: r, description: d, model: "oobabooga/http://10.0.0.6:5000"}
compression: {summarize: {model: "oobabooga/http://10.0.0.7:5000"}}
"""


def test_every_setting_that_asks_for_trust_is_marked_so(tmp_path: Path) -> None:
    """W1: each request trust.requests makes for a widening workbench.yaml names a key the page marks
    *(needs trust)*."""
    from workbench.trust import requests

    config = parse_config(_WIDENING)
    marked = {r.key for r in docs.key_rows() if r.trust}
    asked = [r.key for r in requests(config, tmp_path)]
    assert len(asked) >= 6, asked
    for key in asked:
        generic = re.sub(r"\[\d+\]", "[]", key)
        generic = re.sub(r"^mounts\.[^.]+", "mounts.<point>.host", generic)
        generic = re.sub(r"^mcp_servers\.[^.]+(\.command)?$", "mcp_servers.<name>.command", generic)
        generic = re.sub(r"^permissions\.rules\[\]$", "permissions.rules", generic)
        assert generic in marked, f"trust.requests asks about {key} ({generic}) but the page does not mark it"


def test_nothing_users_get_points_at_the_design_files() -> None:
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        text = path.read_text(encoding="utf-8")
        assert "../shared" not in text and "DESIGN.md" not in text, f"{path.relative_to(ROOT)} points at ../shared"
