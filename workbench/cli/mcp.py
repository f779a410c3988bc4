"""``workbench mcp list`` and ``workbench mcp check NAME`` (X1, X5): a workspace's MCP servers at the
command line — the "doctor" for a server that will not start.

``list`` reads workbench.yaml and starts nothing. ``check`` starts one server on its own (no agent, no
model call), lists its tools, and stops it: exit 0 when it got ready, 1 when it failed (the error says
why: the command not found and the PATH searched, the startup timeout and its last output, a variable
not set), 2 for a name not in workbench.yaml or a server the workspace is not trusted to run (W1: the
terminal asks; else ``--trust`` or ``WORKBENCH_TRUST=1``).

X5, P3: everything a server says of itself — its name and version, its tools' names, descriptions and
problems, its errors and log — and what workbench.yaml says of it is printed through ``terminal_safe``:
an escape sequence in a description cannot redraw the line above it ("asks before it runs" into "read-only,
runs without asking"). ``--json`` prints JSON, ASCII only.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from workbench.cli.codes import EXIT_DONE, EXIT_FAILED
from workbench.cli.output import _err
from workbench.terminal_text import terminal_safe as _safe

GLYPHS = {"starting": "◐", "ready": "✓", "failed": "✗", "stopped": "○"}


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """The ``mcp`` command and its ``list`` / ``check`` subcommands."""
    mcp = sub.add_parser(
        "mcp",
        parents=[common],
        help="the workspace's MCP tool servers: list them, check one",
        description="The MCP tool servers of the workspace's workbench.yaml (mcp_servers). `list` shows them "
        "without starting any; `check NAME` starts one, lists its tools and stops it (exit 0 ready, 1 failed, "
        "2 unknown or not trusted).",
    )
    actions = mcp.add_subparsers(dest="mcp_command", metavar="ACTION", required=True)
    listing = actions.add_parser("list", parents=[common], help="list the servers (nothing is started)")
    listing.add_argument("--json", action="store_true", help="one JSON object per server")
    check = actions.add_parser("check", parents=[common], help="start a server, list its tools, stop it")
    check.add_argument("name", metavar="NAME", help="the server's name in mcp_servers")
    check.add_argument("--json", action="store_true", help="print one JSON object")
    check.add_argument("--trust", action="store_true",
                       help="trust the workspace's workbench.yaml for this check (it runs the server's command); "
                       "same as WORKBENCH_TRUST=1")


async def _mcp(workspace: Path, args: argparse.Namespace) -> int:
    from workbench.session import Session

    if args.mcp_command == "list":
        trust = True if _env_trusted() else None
        servers = Session.list_mcp_servers(workspace, trust=trust)
        if args.json:
            for info in servers:
                print(json.dumps(_info_dict(info)), flush=True)
            return EXIT_DONE
        if not servers:
            _err(f"no MCP servers in {workspace / 'workbench.yaml'} (add them under mcp_servers:)")
            return EXIT_DONE
        for info in servers:
            flags = [] if info.enabled else ["disabled"]
            print(f"{_safe(info.name)}\t{_safe(info.transport)}\t{_safe(info.target)}"
                  + (f"\t({', '.join(flags)})" if flags else ""))
            if info.note and info.enabled:
                print(f"\t{_safe(info.note)}")
        return EXIT_DONE

    from workbench.cli.decide import _trust_decision

    interactive = bool(sys.stdin is not None and sys.stdin.isatty())
    trusted = _trust_decision(workspace, args, interactive=interactive)
    info = await Session.check_mcp_server_in(workspace, args.name, trust=trusted)
    if args.json:
        print(json.dumps(_info_dict(info, tools=True)), flush=True)
    else:
        _print_check(info)
    return EXIT_DONE if info.status == "ready" else EXIT_FAILED


def _env_trusted() -> bool:
    from workbench import trust

    return trust.env_trusted()


def _print_check(info: Any) -> None:
    head = f"{GLYPHS.get(info.status, '·')} {_safe(info.name)}: {_safe(info.status)}"
    if info.server_info:
        head += f" ({_safe(info.server_info)})"
    print(head)
    print(f"  {_safe(info.transport)}: {_safe(info.target)}")
    if info.status == "ready":
        print(f"  {len(info.tools)} tool{'s' if len(info.tools) != 1 else ''}:")
        for t in info.tools:
            how = "read-only, runs without asking" if t.read_only else "asks before it runs"
            state = "" if t.enabled else ", switched off"
            problem = f" — not offered: {_safe(t.problem)}" if t.problem else ""
            print(f"    {_safe(t.name)}  ({how}{state}){problem}")
            if t.description:  # its first line (splitlines: also at \x1c-\x1e, \x85, U+2028, U+2029)
                lines = str(t.description).splitlines() or [""]
                print(f"        {_safe(lines[0])[:100]}")
        return
    if info.error:
        _err(f"workbench: MCP server {info.name!r} failed: {_safe(info.error, multiline=True)}")
    lines = [ln for ln in info.log if not ln.startswith("[workbench]")][-10:]
    if lines:  # each line of the server's output stays one line under the heading
        _err("its last output:\n" + "\n".join(f"  {_safe(ln)}" for ln in lines))


def _info_dict(info: Any, *, tools: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"name": info.name, "transport": info.transport, "target": info.target,
                           "enabled": info.enabled, "status": info.status}
    if info.note:
        out["note"] = info.note
    if tools:
        out.update(error=info.error, server_info=info.server_info, log=list(info.log),
                   tools=[{"name": t.name, "tool": t.tool, "read_only": t.read_only, "enabled": t.enabled,
                           "problem": t.problem, "description": t.description} for t in info.tools])
    return out
