"""X2, M2, F3: what MCP servers offer the model is capped — per server and all of them together, in
tools and in characters of schemas and descriptions. One server listing a thousand tools made every model
request carry them all (19 MB of schemas for 1,000 tools), and a provider that takes at most 128 tools
(OpenAI) failed every run with an error naming no server. Past a cap the tools are left out in the
server's own listing order (first come, first offered), the servers taking turns, and what was left out
— naming the server and how many — is on each tool left out (the Servers panel, ``workbench mcp check``,
X5) and in the server's log. Against real server processes (``mcp_listing_server.py``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.fakes import server_marker_fixtures, until, with_marker
from tests.stub_server import StubReply, StubServer
from workbench.config import McpServerConfig
from workbench.harness import mcp_server, mcp_servers
from workbench.harness.mcp_servers import (
    MAX_TOOL_CHARS,
    MAX_TOOL_CHARS_PER_SERVER,
    MAX_TOOLS,
    MAX_TOOLS_PER_SERVER,
    McpServers,
    offer_caps,
)
from workbench.harness.mcp_tools import McpToolInfo
from workbench.session import Session

LISTING = Path(__file__).resolve().parent / "mcp_listing_server.py"

pytestmark = pytest.mark.timeout(90)


marker, _no_leftovers = server_marker_fixtures("wbcaps")


def config(marker: str, mode: str, *extra: str) -> McpServerConfig:
    return McpServerConfig(command=sys.executable, args=(str(LISTING), mode, marker, *extra), startup_timeout=20)


def tool(server: str, name: str, chars: int = 0) -> McpToolInfo:
    return McpToolInfo(server, f"mcp__{server}__{name}", name, "d" * chars, {}, False)


# ------------------------------------------------------------------------------------------ the rule


def test_x2_the_caps_are_what_a_provider_takes():
    """X2: the MCP tools in all leave the agent's own tools room under OpenAI's 128; characters are bounded."""
    assert MAX_TOOLS_PER_SERVER <= MAX_TOOLS <= 110
    assert MAX_TOOL_CHARS_PER_SERVER <= MAX_TOOL_CHARS <= 250_000


def test_x2_one_server_keeps_the_first_of_its_tools_in_its_order():
    """X2: over the per-server count, the first MAX_TOOLS_PER_SERVER in listing order are kept, the rest
    left out with a problem naming the server and how many; a switched-off tool counts for nothing."""
    tools = [tool("big", f"t{i:03d}") for i in reversed(range(MAX_TOOLS_PER_SERVER + 30))]
    capped = offer_caps([("big", tools)], lambda s, t: 10)
    out, why = capped["big"]
    assert out == {t.tool for t in tools[MAX_TOOLS_PER_SERVER:]}  # the last 30 listed, whatever their names
    assert "MCP server 'big'" in why and "30 are left out" in why and f"first {MAX_TOOLS_PER_SERVER}" in why
    assert "one server may offer at most" in why
    from dataclasses import replace

    off = [replace(t, enabled=False) if i < 5 else t for i, t in enumerate(tools)]
    out2, why2 = offer_caps([("big", off)], lambda s, t: 10)["big"]
    assert len(out2) == 25 and "25 are left out" in why2  # five switched off make room for five more
    assert offer_caps([("big", tools[:MAX_TOOLS_PER_SERVER])], lambda s, t: 10) == {}


def test_x2_f3_characters_are_capped_per_server_and_in_all():
    """F3: schemas and descriptions are counted in characters: one server at most
    MAX_TOOL_CHARS_PER_SERVER, all at most MAX_TOOL_CHARS; a tool that does not fit ends its server's turn
    (what a server keeps is the first of its tools)."""
    each = 19_000
    fat = [tool("fat", f"f{i}") for i in range(10)]
    out, why = offer_caps([("fat", fat)], lambda s, t: each)["fat"]
    kept = MAX_TOOL_CHARS_PER_SERVER // each
    assert out == {t.tool for t in fat[kept:]} and f"{10 - kept} are left out" in why
    assert f"{10 * each:,} characters" in why
    servers = [(f"s{n}", [tool(f"s{n}", f"f{i}") for i in range(5)]) for n in range(4)]
    capped = offer_caps(servers, lambda s, t: each)
    offered = sum(5 - len(capped.get(name, (set(), ""))[0]) for name, _ in servers)
    assert offered == MAX_TOOL_CHARS // each and offered * each <= MAX_TOOL_CHARS
    assert all("all MCP servers together" in why for _, why in capped.values())


def test_x2_servers_take_turns_so_a_small_one_keeps_its_tools():
    """X2: a server with five tools keeps them all beside one with hundreds; the big one gets the rest of
    MAX_TOOLS, its first ones."""
    big = [tool("big", f"b{i:03d}") for i in range(300)]
    small = [tool("small", f"s{i}") for i in range(5)]
    capped = offer_caps([("big", big), ("small", small)], lambda s, t: 50)
    assert "small" not in capped
    out, why = capped["big"]
    assert out == {t.tool for t in big[MAX_TOOLS - 5:]}
    assert f"{300 - (MAX_TOOLS - 5)} are left out" in why and "the servers taking turns" in why


# ------------------------------------------------------------------------------------------ real servers


async def test_x2_x5_a_server_listing_hundreds_of_tools_offers_its_first_and_says_so(tmp_path: Path, marker: str):
    """X2, X5: a server listing 300 tools (``z0299`` first) offers its first MAX_TOOLS_PER_SERVER in its own
    order; every other tool says why it is not offered, naming the server and how many; the server's log
    says it once; switching one offered tool off lets the next one in."""
    n = 300
    servers = McpServers({"many": config(marker, "many", str(n))}, tmp_path)
    try:
        await servers.ensure_started()
        info = servers.info("many")
        assert info.status == "ready" and len(info.tools) == n + 1
        assert [t.tool for t in info.tools[:3]] == ["echo", f"z{n - 1:04d}", f"z{n - 2:04d}"]  # its own order
        offered = servers.offered()
        assert [t.tool for t in offered] == [t.tool for t in info.tools[:MAX_TOOLS_PER_SERVER]]
        left = [t for t in info.tools if not t.offered]
        assert len(left) == n + 1 - MAX_TOOLS_PER_SERVER
        assert all("MCP server 'many'" in (t.problem or "") and f"{len(left):,} are left out" in (t.problem or "")
                   for t in left)
        await until(lambda: any("are left out" in line for line in servers.info("many").log), timeout=5,
                    what="the cap in the server's log")
        assert sum("are left out" in line for line in servers.info("many").log) == 1
        first, next_one = info.tools[1].tool, info.tools[MAX_TOOLS_PER_SERVER].tool
        servers.set_tool_enabled("many", first, False)
        names = [t.tool for t in servers.offered()]
        assert first not in names and next_one in names and len(names) == MAX_TOOLS_PER_SERVER
    finally:
        await servers.close()


async def test_x2_two_servers_share_the_tools_in_turns(tmp_path: Path, marker: str):
    """X2: all servers together offer at most MAX_TOOLS; a small server keeps all its tools."""
    servers = McpServers({"many": config(marker, "many", "300"), "few": config(marker, "many", "4")}, tmp_path)
    try:
        await servers.ensure_started()
        offered = servers.offered()
        assert len(offered) == MAX_TOOLS
        assert sum(t.server == "few" for t in offered) == 5  # echo and its four
        problems = {t.problem for t in servers.info("many").tools if not t.offered}
        assert len(problems) == 1 and "all MCP servers together" in problems.pop()
    finally:
        await servers.close()


async def test_x2_f3_a_servers_fat_tools_are_capped_in_characters(tmp_path: Path, marker: str):
    """F3: ten tools of some 19,000 characters each: only as many as fit MAX_TOOL_CHARS_PER_SERVER."""
    servers = McpServers({"fat": config(marker, "fat", "10")}, tmp_path)
    try:
        await servers.ensure_started()
        offered = servers.offered()
        size = sum(mcp_servers.tool_chars(t) for t in offered)
        assert 0 < size <= MAX_TOOL_CHARS_PER_SERVER and len(offered) < 11
        assert [t.tool for t in offered] == [t.tool for t in servers.info("fat").tools[:len(offered)]]
    finally:
        await servers.close()


async def test_f3_only_so_many_listed_tools_are_read(tmp_path: Path, marker: str, monkeypatch: pytest.MonkeyPatch):
    """F3: a server's listing is read up to MAX_LISTED_TOOLS (each is checked and shown); the log says how
    many were left out unread. (The limit is lowered here so the test stays small.)"""
    monkeypatch.setattr(mcp_server, "MAX_LISTED_TOOLS", 150)
    servers = McpServers({"many": config(marker, "many", "400")}, tmp_path)
    try:
        await servers.ensure_started()
        info = servers.info("many")
        assert len(info.tools) == 150 and info.tools[1].tool == "z0399"
        assert any("it lists 401 tools: only the first 150" in line for line in info.log)
    finally:
        await servers.close()


async def test_x2_every_model_request_stays_under_the_providers_tool_limit(
        tmp_path: Path, stub_server: StubServer, marker: str):
    """X2, M2: with a server listing 1,000 tools, the request the model gets carries at most 128 tools and
    the capped MCP ones; ``workbench mcp check`` (its snapshot) says which were left out and why."""
    ws = tmp_path / "ws"
    ws.mkdir()
    args = f'["{LISTING}", "many", "{marker}", "1000"]'
    (ws / "workbench.yaml").write_text(
        f"model: openai/test-model\napi_base: {stub_server.url}\npermissions: {{default: ask}}\n"
        f"mcp_servers:\n  many: {{command: {sys.executable!r}, args: {args}}}\n", encoding="utf-8")
    stub_server.script(StubReply(text="done"))
    session = await Session.open(ws, api_key="sk-test", trust=True)
    try:
        assert (await session.run("go")).status == "done"
        tools = [t["function"]["name"] for t in stub_server.requests[0].get("tools") or []]
        assert len(tools) <= 128
        assert sum(name.startswith("mcp__many__") for name in tools) == MAX_TOOLS_PER_SERVER
    finally:
        await session.close()
    info = await Session.check_mcp_server_in(ws, "many", trust=True)
    assert info.status == "ready" and len(info.offered) == MAX_TOOLS_PER_SERVER
    assert any("MCP server 'many'" in (t.problem or "") and "are left out" in (t.problem or "") for t in info.tools)
    assert any("are left out" in line for line in info.log)
