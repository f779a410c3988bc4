"""X3, X5, F3: a server's ``tools/list_changed`` and its deeply nested answers, against real server
processes (``mcp_listing_server.py``).

- A server that says its tools changed after every listing drove an endless loop of listings, each one
  telling the listeners (an ``mcp_server_status`` event on the window's loop: 4,159 in 10 s). Now at most
  one listing is pending (a notification meanwhile marks one more), at most one a RELIST_SECONDS, and the
  listeners hear only of a list that really changed; a listing that fails is noted in the log, not left
  as "Future exception was never retrieved".
- A tools list the SDK cannot read (a schema ~150 levels deep) was reported as "the server stopped while
  starting (exit code 0)"; one deeper still (400 levels) was dropped as "not JSON-RPC" and the start
  timed out. Now the start fails at once saying what could not be read, and an answer too deep to parse
  fails the request it answers (the tools list, a call) with that reason."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import server_marker_fixtures, until, with_marker
from workbench.config import McpServerConfig
from workbench.harness import mcp_server
from workbench.harness.mcp_servers import McpServers
from workbench.harness.mcp_stdio import _answer_id
from workbench.harness.mcp_tools import McpCallError

LISTING = Path(__file__).resolve().parent / "mcp_listing_server.py"

pytestmark = pytest.mark.timeout(90)


marker, _no_leftovers = server_marker_fixtures("wbrelist")


def raw(tmp_path: Path, marker: str, mode: str, *extra: str, startup_timeout: float = 20,
        tool_timeout: float = 20) -> tuple[McpServers, Path]:
    listings = tmp_path / f"listings-{mode}"
    cfg = McpServerConfig(command=sys.executable, args=(str(LISTING), mode, marker, *extra),
                          env={"LISTINGS_FILE": str(listings)}, startup_timeout=startup_timeout,
                          tool_timeout=tool_timeout)
    return McpServers({"raw": cfg}, tmp_path), listings


def count(path: Path) -> int:
    try:
        return int(path.read_text() or 0)
    except (OSError, ValueError):
        return 0


# ------------------------------------------------------------------------------------------ X3: relisting


async def test_x3_list_changed_after_every_listing_is_coalesced_and_rate_limited(tmp_path: Path, marker: str):
    """X3, X5: a server saying list_changed after every answer (its list growing by one each time) is
    listed again at most once a RELIST_SECONDS, its new tools do arrive, and the listeners (the session's
    status events) hear a handful of changes, not thousands."""
    servers, listings = raw(tmp_path, marker, "flood")
    told: list[str] = []
    try:
        await servers.ensure_started()
        servers.add_listener(told.append)
        began, before = time.monotonic(), count(listings)
        await asyncio.sleep(3)
        seconds = time.monotonic() - began
        relisted = count(listings) - before
        assert 1 <= relisted <= seconds / mcp_server.RELIST_SECONDS + 2, relisted
        assert len(told) <= 3 * (relisted + 2), len(told)  # a change and a log line or two per listing
        await until(lambda: any(t.tool.startswith("gen") for t in servers.info("raw").tools), timeout=5,
                    what="a tool the relisting found")
    finally:
        await servers.close()


async def test_x3_an_unchanged_list_tells_no_listener(tmp_path: Path, marker: str):
    """X5: a relisting that finds the same tools is not a change (no status event), however often the
    server says they changed."""
    servers, listings = raw(tmp_path, marker, "same")
    told: list[str] = []
    try:
        await servers.ensure_started()
        await until(lambda: count(listings) >= 2, timeout=5, what="a second listing")
        await asyncio.sleep(0.6)  # a log line's deferred publication (LOG_PUBLISH_SECONDS) has passed
        servers.add_listener(told.append)
        before = count(listings)
        await asyncio.sleep(2.5)
        assert 1 <= count(listings) - before <= 4
        assert told == []
        assert servers.info("raw").status == "ready"
    finally:
        await servers.close()


async def test_x3_a_failed_relisting_is_noted_and_never_left_unretrieved(tmp_path: Path, marker: str):
    """X3, X5: a relisting the server asked for that fails keeps the tools listed before and says why in
    the log; its error is consumed (asyncio reports no "Future exception was never retrieved")."""
    servers, listings = raw(tmp_path, marker, "badrelist")
    unretrieved: list[dict[str, Any]] = []
    try:
        await servers.ensure_started()
        loop = servers._loop
        assert loop is not None
        loop.call_soon_threadsafe(loop.set_exception_handler, lambda _loop, context: unretrieved.append(context))
        await until(lambda: any("could not be listed again" in line for line in servers.info("raw").log),
                    timeout=10, what="the failed relisting in the log")
        line = next(line for line in servers.info("raw").log if "could not be listed again" in line)
        assert "MCP server 'raw'" in line and "the list is broken" in line
        info = servers.info("raw")
        assert info.status == "ready" and [t.tool for t in info.tools] == ["echo"]
        assert (await servers.call("raw", "echo", {"text": "still"})).texts == ("echo: still",)
    finally:
        await servers.close()
    assert not [c for c in unretrieved if "never retrieved" in str(c.get("message", ""))], unretrieved


# ------------------------------------------------------------------------------------------ F3: depth


async def test_x5_a_tools_list_the_sdk_cannot_read_says_so_not_that_the_server_stopped(tmp_path: Path, marker: str):
    """X5: a schema 150 levels deep (the SDK's serialiser gives up): the start fails saying its tools list
    could not be read and why, not "the server stopped while starting"."""
    servers, _ = raw(tmp_path, marker, "deep", "150", startup_timeout=10)
    try:
        began = time.monotonic()
        await servers.ensure_started()
        info = servers.info("raw")
        assert time.monotonic() - began < 8
        assert info.status == "failed"
        error = info.error or ""
        assert "could not be read" in error and "depth" in error, error
        assert "stopped while starting" not in error
    finally:
        await servers.close()


async def test_f3_a_tools_list_too_deep_to_parse_fails_the_start_at_once(tmp_path: Path, marker: str):
    """F3: a tools list 1,000 levels deep (Python's reader runs out of recursion) fails the tools/list
    request at once, saying the answer nests too deeply — not a startup_timeout, not "not JSON-RPC"."""
    servers, _ = raw(tmp_path, marker, "deep", "1000", startup_timeout=10)
    try:
        began = time.monotonic()
        await servers.ensure_started()
        info = servers.info("raw")
        assert time.monotonic() - began < 8
        assert info.status == "failed"
        error = info.error or ""
        assert "nests too deeply" in error and "startup_timeout" not in error, error
        assert any("nests too deeply" in line for line in info.log)
    finally:
        await servers.close()


async def test_f3_a_call_answered_too_deep_to_parse_fails_at_once(tmp_path: Path, marker: str):
    """F3: a call whose answer nests 1,000 levels fails at once with the reason (not at tool_timeout);
    the server keeps working."""
    servers, _ = raw(tmp_path, marker, "deepanswer", "1000", tool_timeout=15)
    try:
        await servers.ensure_started()
        began = time.monotonic()
        with pytest.raises(McpCallError) as caught:
            await servers.call("raw", "echo", {"text": "x"})
        assert time.monotonic() - began < 5
        assert "MCP server 'raw'" in str(caught.value) and "nests too deeply" in str(caught.value)
        assert (await servers.call("raw", "echo", {"text": "plain"})).texts == ("echo: plain",)
    finally:
        await servers.close()


def test_f3_the_id_of_an_answer_too_deep_to_parse_is_found_without_recursion():
    """F3: ``_answer_id`` reads the members before the first nested value (which must be ``result`` or
    ``error``) and the last member, never the nesting: the id of an answer; None for a request, a
    notification, an id that is no id, or no JSON object. An 8 MB line takes no time (no walk through it)."""
    deep = '{"a":' * 5000 + "1" + "}" * 5000
    assert _answer_id('{"jsonrpc":"2.0","id":7,"result":{"x":' + deep + "}}") == 7
    assert _answer_id('{"jsonrpc":"2.0","result":{"id":5,"x":' + deep + '},"id" : "a\\"b"}') == 'a"b'
    assert _answer_id('{"jsonrpc":"2.0","error":' + deep + ',"id":3}') == 3
    assert _answer_id('{"jsonrpc":"2.0","method":"x","params":' + deep + ',"id":3}') is None
    assert _answer_id('{"jsonrpc":"2.0","result":' + deep + ',"id":true}') is None
    assert _answer_id("[" * 5000) is None
    huge = '{"jsonrpc":"2.0","id":9,"result":' + "[" * (8 << 20) + "}"
    began = time.monotonic()
    assert _answer_id(huge) == 9
    assert time.monotonic() - began < 1
