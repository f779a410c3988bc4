"""MCP tool servers (issue 13, X1–X3): how long until a server's tools are offered, and what a call costs.

Printed:

- **time to tools offered**: from ``Session.open`` on a workspace with one stdio server (the tests' small
  SDK server, ``tests/mcp_servers/tiny.py``, a local Python process) to its tools being in the agent's tool
  list (``Session.start_mcp_servers``: what a first run does before its first model call) — open, spawn,
  ``initialize``, ``tools/list``; min / median / max over ``--rounds`` fresh sessions. The server's own
  start (a Python interpreter importing the SDK) is most of it: the same spawn and handshake with the
  SDK's own client, no workbench, is printed beside it;
- **per-call overhead**: ``--calls`` calls of ``echo`` (the server answers at once), one after the other,
  (a) with the SDK's own client on the caller's loop — the server's own time plus the SDK — and (b)
  through the workbench's ``McpServers.call`` as the MCP tool does: handed to the servers' own thread and
  loop, run in the owning task's group, the result turned into plain values and handed back. (b) − (a) is
  what the workbench adds per call. **Target: < 5 ms a call beyond the server's own time.**

    python benchmarks/mcp.py [--rounds 5] [--calls 200] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
# Run as a script, this file's folder comes first on sys.path, and this file is named like the SDK
# (``import mcp`` would find it): the folder goes, the project root comes first.
sys.path[:] = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() not in (HERE, ROOT)]


def _isolate() -> Any:
    """``harness_overhead.isolate`` (the same isolation as the overhead benchmark), loaded by path."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("harness_overhead", HERE / "harness_overhead.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.isolate

TINY = ROOT / "tests" / "mcp_servers" / "tiny.py"
TARGET_MS = 5.0


def make_workspace(base: Path) -> Path:
    ws = base / "ws"
    ws.mkdir(parents=True, exist_ok=True)
    (ws / "workbench.yaml").write_text(
        f"model: demo\nmcp_servers:\n  tiny: {{command: {json.dumps(sys.executable)}, "
        f"args: [{json.dumps(str(TINY))}, normal, bench]}}\n", encoding="utf-8")
    return ws


async def time_to_tools(ws: Path) -> float:
    from workbench.session import Session

    began = time.perf_counter()
    session = await Session.open(ws, trust=True)
    try:
        await session.start_mcp_servers()
        took = time.perf_counter() - began
        assert "mcp__tiny__echo" in session.engine.agent.tool_map, session.mcp_servers()
        return took
    finally:
        await session.close()


async def sdk_start_and_calls(calls: int) -> tuple[float, list[float]]:
    """The SDK's own stdio client on this loop: spawn + handshake + tools/list, then ``calls`` echoes."""
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=sys.executable, args=[str(TINY), "normal", "bench"])
    began = time.perf_counter()
    async with Client(stdio_client(params), cache=None) as client:
        await client.list_tools(cache_mode="bypass")
        start = time.perf_counter() - began
        for _ in range(20):  # warm both sides
            await client.call_tool("echo", {"text": "hi"})
        times = []
        for _ in range(calls):
            t = time.perf_counter()
            await client.call_tool("echo", {"text": "hi"})
            times.append(time.perf_counter() - t)
    return start, times


async def workbench_calls(ws: Path, calls: int) -> list[float]:
    from workbench.session import Session

    session = await Session.open(ws, trust=True)
    try:
        await session.start_mcp_servers()
        servers = session._mcp()
        assert servers is not None
        for _ in range(20):
            await servers.call("tiny", "echo", {"text": "hi"})
        times = []
        for _ in range(calls):
            t = time.perf_counter()
            result = await servers.call("tiny", "echo", {"text": "hi"})
            times.append(time.perf_counter() - t)
        assert result.texts == ("echo: hi",), result
        return times
    finally:
        await session.close()


def ms(values: list[float]) -> dict[str, float]:
    return {"min": min(values) * 1000, "median": statistics.median(values) * 1000,
            "mean": statistics.fmean(values) * 1000, "max": max(values) * 1000}


async def main_async(rounds: int, calls: int) -> dict[str, Any]:
    base = Path(tempfile.mkdtemp(prefix="wb-mcp-bench-"))
    _isolate()(base)
    ws = make_workspace(base)
    offered = [await time_to_tools(ws) for _ in range(rounds)]
    sdk_starts: list[float] = []
    sdk_times: list[float] = []
    for _ in range(max(1, rounds // 2)):
        start, times = await sdk_start_and_calls(calls)
        sdk_starts.append(start)
        sdk_times += times
    ours: list[float] = []
    for _ in range(max(1, rounds // 2)):
        ours += await workbench_calls(ws, calls)
    overhead = statistics.median(ours) - statistics.median(sdk_times)
    return {"time_to_tools_offered_s": {k: v / 1000 for k, v in ms(offered).items()},
            "sdk_spawn_to_tools_listed_s": {k: v / 1000 for k, v in ms(sdk_starts).items()},
            "sdk_call_ms": ms(sdk_times), "workbench_call_ms": ms(ours),
            "overhead_ms_per_call": overhead * 1000, "target_ms": TARGET_MS,
            "within_target": overhead * 1000 < TARGET_MS, "rounds": rounds, "calls": calls}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    figures = asyncio.run(main_async(max(1, args.rounds), max(10, args.calls)))
    if args.json:
        print(json.dumps(figures, indent=1))
        return 0
    t, s = figures["time_to_tools_offered_s"], figures["sdk_spawn_to_tools_listed_s"]
    print(f"time from Session.open to the server's tools offered (stdio, local SDK server), {args.rounds} rounds:")
    print(f"  min {t['min']:.3f} s   median {t['median']:.3f} s   max {t['max']:.3f} s")
    print(f"  (the SDK's own client, spawn to tools listed: median {s['median']:.3f} s)")
    a, b = figures["sdk_call_ms"], figures["workbench_call_ms"]
    print(f"per call, {figures['calls']} echo calls a round (the server answers at once):")
    print(f"  SDK client on the caller's loop:  median {a['median']:.3f} ms  (min {a['min']:.3f}, max {a['max']:.3f})")
    print(f"  workbench McpServers.call:        median {b['median']:.3f} ms  (min {b['min']:.3f}, max {b['max']:.3f})")
    verdict = "within" if figures["within_target"] else "OVER"
    print(f"  overhead beyond the server's own time: {figures['overhead_ms_per_call']:.3f} ms a call "
          f"({verdict} the {TARGET_MS:g} ms target)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
