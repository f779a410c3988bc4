"""Shared fixtures: an isolated config/data folder for every test, and the loopback model stub."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.stub_server import StubReply, StubServer

__all__ = ["StubReply"]


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test touches the real user config or data, nor sees a real provider key."""
    base: Path = tmp_path_factory.mktemp("workbench-home")
    monkeypatch.setenv("WORKBENCH_CONFIG_DIR", str(base / "config"))
    monkeypatch.setenv("WORKBENCH_DATA_DIR", str(base / "data"))
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    # W1: tests write their own workbench.yaml (stub api_base, allow rules) — the CI case the variable is
    # for. Tests of workspace trust itself remove it (tests/engine/test_trust.py, `untrusted` fixture).
    monkeypatch.setenv("WORKBENCH_TRUST", "1")
    # `workbench run` commands share a model host that outlives them (shared_host.py): tests keep their
    # calls in-process unless they test that host (tests/e2e/test_shared_host.py), so none lingers.
    monkeypatch.setenv("WORKBENCH_MODEL_DAEMON", "0")


@pytest.fixture(scope="session")
def _stub_server_instance() -> Iterator[StubServer]:
    server = StubServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def hostile() -> Iterator[StubServer]:
    """A second loopback server: the endpoint a cloned repository names in its workbench.yaml (W1, W2).
    Trust tests assert it receives nothing."""
    server = StubServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def stub_server(_stub_server_instance: StubServer) -> Iterator[StubServer]:
    """A loopback OpenAI-compatible server (one per session), reset for each test.

    ``stub_server.script(StubReply(text="hi"), ...)``; point models at ``stub_server.url``.
    """
    _stub_server_instance.reset()
    yield _stub_server_instance
    _stub_server_instance.reset()
