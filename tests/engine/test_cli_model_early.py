"""Issue 9: ``workbench run --model M`` starts what its first request waits for (litellm's import, in the
shared model host or here) before trust, config and store set-up, and only what ``make_model`` will use."""

from __future__ import annotations

import threading

import pytest

from workbench.cli.run import _start_the_model_early
from workbench.engine import llm_setup
from workbench.engine.models.process_model import ModelHost


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> dict[str, threading.Event]:
    events = {"host": threading.Event(), "import": threading.Event()}
    monkeypatch.setattr(ModelHost, "shared_daemon", classmethod(lambda cls: events["host"].set()))
    monkeypatch.setattr(llm_setup, "import_in_background", lambda: events["import"].set())
    monkeypatch.setattr("sys.platform", "linux")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    return events


def nothing_started(started: dict[str, threading.Event]) -> bool:
    """No early thread: none running now and none that ran (the fakes set their event at once)."""
    early = [t for t in threading.enumerate() if t.name == "workbench-model-early"]
    return not early and not started["host"].is_set() and not started["import"].is_set()


def test_a_model_with_a_key_connects_to_the_shared_host(started, monkeypatch):
    monkeypatch.setenv("WORKBENCH_MODEL_DAEMON", "1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-early")
    _start_the_model_early("openai/gpt-4o-mini")
    assert started["host"].wait(10)
    assert not started["import"].is_set()  # the host imports litellm, not this process


def test_without_the_host_litellm_is_imported_here(started, monkeypatch):
    monkeypatch.setenv("WORKBENCH_MODEL_DAEMON", "0")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-early")
    _start_the_model_early("openai/gpt-4o-mini")
    assert started["import"].wait(10) and not started["host"].is_set()


def test_a_key_not_in_the_environment_is_left_to_make_model(started, monkeypatch):
    # Not looked up here: the keyring would be asked twice (and its modules imported on two threads).
    from workbench import keystore

    monkeypatch.setattr(keystore, "load_key", lambda provider: pytest.fail("the key store was asked"))
    monkeypatch.setenv("WORKBENCH_MODEL_DAEMON", "1")
    _start_the_model_early("openai/gpt-4o-mini")
    assert nothing_started(started)


@pytest.mark.parametrize("model", [None, "", "  ", "demo"])
def test_no_model_or_the_demo_starts_nothing(started, monkeypatch, model):
    monkeypatch.setenv("WORKBENCH_MODEL_DAEMON", "1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-early")
    _start_the_model_early(model)
    assert nothing_started(started)
