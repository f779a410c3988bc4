"""Token estimates: tiktoken o200k loaded offline from litellm's bundled files, without importing litellm."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.engine import tokens
from workbench.engine.messages import Message, ToolCall

ROOT = Path(__file__).resolve().parents[2]
SENTENCE = "The quick brown fox jumps over the lazy dog, then checks AGENTS.md for instructions."


def test_estimate_matches_tiktoken_o200k():
    n = tokens.estimate_tokens(SENTENCE)
    import tiktoken

    assert n == len(tiktoken.get_encoding("o200k_base").encode(SENTENCE))
    assert tokens.estimate_tokens("") == 0


def test_loaded_offline_without_importing_litellm():
    code = f"""
import json, os, socket, sys
sys.modules["requests"] = None      # a download attempt would fail to import requests ...
def no_network(*a, **k):
    raise AssertionError("network used")
socket.socket.connect = no_network  # ... or to connect
from workbench.engine.tokens import estimate_tokens, litellm_tokenizers_dir
n = estimate_tokens({SENTENCE!r})
print(json.dumps({{"n": n, "cache": os.environ.get("TIKTOKEN_CACHE_DIR"),
                  "folder": str(litellm_tokenizers_dir()), "litellm": "litellm" in sys.modules}}))
"""
    env = {k: v for k, v in os.environ.items() if k != "TIKTOKEN_CACHE_DIR"}
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["litellm"] is False
    assert result["cache"] == result["folder"]
    assert Path(result["cache"]).parts[-3:] == ("litellm", "litellm_core_utils", "tokenizers")
    assert result["n"] == tokens.estimate_tokens(SENTENCE)
    assert "rough" not in out.stderr  # no fallback warning


def test_fallback_when_the_encoding_is_missing(monkeypatch, tmp_path, caplog):
    monkeypatch.setattr(tokens, "_loaded", False)
    monkeypatch.setattr(tokens, "_encoding", None)
    monkeypatch.setattr(tokens, "litellm_tokenizers_dir", lambda: tmp_path)  # an empty folder
    with caplog.at_level(logging.WARNING, logger="workbench.engine.tokens"):
        assert tokens.estimate_tokens("x" * 40) == 11
        assert tokens.estimate_tokens("y" * 8) == 3
    assert len([r for r in caplog.records if "rough" in r.getMessage()]) == 1  # warned once
    text, cut = tokens.truncate_to_tokens("z" * 100, 5)
    assert cut and tokens.estimate_tokens(text) <= 5


def test_estimate_messages_tokens():
    msgs = [Message.user("hello there"), Message.assistant("", (ToolCall.parse("c1", "read_file", {"path": "/a"}),))]
    total = tokens.estimate_messages_tokens("system prompt", msgs)
    parts = ["system prompt", "hello there", "read_file", '{"path": "/a"}']
    assert total == sum(tokens.estimate_tokens(p) for p in parts) + 3 * tokens.MESSAGE_OVERHEAD_TOKENS
    as_dicts = [{"role": "user", "content": "hello there"}]
    assert tokens.estimate_messages_tokens("", as_dicts) == tokens.estimate_tokens("hello there") + 4


@pytest.mark.parametrize("limit", [1, 3, 7, 15])
def test_truncate_to_tokens_cuts_at_a_token_boundary(limit):
    text, cut = tokens.truncate_to_tokens(SENTENCE, limit)
    assert cut and SENTENCE.startswith(text)
    assert tokens.estimate_tokens(text) <= limit


def test_truncate_to_tokens_edges():
    assert tokens.truncate_to_tokens(SENTENCE, 1000) == (SENTENCE, False)
    assert tokens.truncate_to_tokens("", 3) == ("", False)
    assert tokens.truncate_to_tokens("abc", 0) == ("", True)
    text, cut = tokens.truncate_to_tokens("日本語のテキスト" * 20, 5)
    assert cut and "\ufffd" not in text and ("日本語のテキスト" * 20).startswith(text)


def _count_in_a_process(data_dir: Path, *, parse_forbidden: bool = False) -> dict[str, object]:
    code = f"""
import json, sys
if {parse_forbidden!r}:
    import tiktoken.load
    def refuse(*a, **k):
        raise AssertionError("the rank file was parsed")
    tiktoken.load.load_tiktoken_bpe = refuse
    import tiktoken_ext.openai_public as op
    op.load_tiktoken_bpe = refuse
from workbench.engine.tokens import estimate_tokens, _load
n = estimate_tokens({SENTENCE!r})
import tiktoken
print(json.dumps({{"n": n, "registered": tiktoken.get_encoding("o200k_base") is _load()}}))
"""
    env = {k: v for k, v in os.environ.items() if k != "TIKTOKEN_CACHE_DIR"}
    env.update(PYTHONPATH=str(ROOT), WORKBENCH_DATA_DIR=str(data_dir))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "rough" not in out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_later_process_builds_the_encoding_from_the_kept_table_not_the_rank_file(tmp_path):
    """Issue 9, cold start: tiktoken's parse of the 3.6 MB rank file (0.15-0.3 s) is done once a user."""
    exact = tokens.estimate_tokens(SENTENCE)
    first = _count_in_a_process(tmp_path)
    [kept] = (tmp_path / "cache").glob("o200k_base-tiktoken-*.marshal")
    assert first == {"n": exact, "registered": True}  # litellm's get_encoding gets the same one
    assert _count_in_a_process(tmp_path, parse_forbidden=True) == {"n": exact, "registered": True}
    assert oct((tmp_path / "cache").stat().st_mode & 0o777) == "0o700"
    # A damaged table is never read: the rank file is parsed again and the table written whole again.
    damaged = bytearray(kept.read_bytes())
    damaged[len(damaged) // 2] ^= 0xFF
    kept.write_bytes(bytes(damaged))
    with pytest.raises(AssertionError, match="the rank file was parsed"):
        _count_in_a_process(tmp_path, parse_forbidden=True)
    assert _count_in_a_process(tmp_path) == {"n": exact, "registered": True}
    assert _count_in_a_process(tmp_path, parse_forbidden=True)["n"] == exact


def test_an_unwritable_data_folder_only_costs_the_parse(tmp_path):
    blocked = tmp_path / "data"
    blocked.write_text("a file where the folder would be")
    assert _count_in_a_process(blocked) == {"n": tokens.estimate_tokens(SENTENCE), "registered": True}
