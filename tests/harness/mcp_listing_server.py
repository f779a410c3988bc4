"""A raw JSON-RPC MCP server over stdio for the tests of what a server lists (X2, X3, X5; no SDK: it
writes what the SDK never would). Its tools per the mode, the first argument; a second argument is a
marker the tests find the process by; a third is a number some modes read.

    python mcp_listing_server.py many MARK N      N small tools, listed in reverse alphabetical order
                                                  (z0000 … first), besides ``echo``
    python mcp_listing_server.py fat MARK N       N tools of some 19,000 characters each (a 3,900-character
                                                  description, a 15,000-character property description)
    python mcp_listing_server.py flood MARK       says ``tools/list_changed`` after every tools/list answer;
                                                  each listing adds one tool (``gen<n>``)
    python mcp_listing_server.py same MARK        says ``tools/list_changed`` after every tools/list answer;
                                                  its tools never change
    python mcp_listing_server.py badrelist MARK   says ``tools/list_changed`` after the first listing, and
                                                  answers every later tools/list with a JSON-RPC error
    python mcp_listing_server.py deep MARK N      also lists ``deep``, whose input schema nests N levels
    python mcp_listing_server.py deepanswer MARK N   echo answers with structured content N levels deep

The count of tools/list requests it got is in the file named by the environment's ``LISTINGS_FILE``
(when set), rewritten at each one.
"""

import json
import os
import sys

MODE = sys.argv[1]
NUMBER = int(sys.argv[3]) if len(sys.argv) > 3 else 0
out = sys.stdout.buffer
listings = 0


def send(obj: object = None, raw: bytes | None = None) -> None:
    out.write((raw if raw is not None else json.dumps(obj).encode()) + b"\n")
    out.flush()


def nested(levels: int) -> bytes:
    """A JSON schema ``levels`` objects deep, written without recursion."""
    return b'{"type":"object","properties":{"a":' * levels + b'{"type":"string"}' + b"}}" * levels


def tools() -> list[dict]:
    text = {"type": "object", "properties": {"text": {"type": "string"}}}
    listed = [{"name": "echo", "description": "Echo.", "inputSchema": text, "annotations": {"readOnlyHint": True}}]
    if MODE == "many":
        listed += [{"name": f"z{i:04d}", "description": f"Tool {i}.", "inputSchema": {"type": "object"}}
                   for i in reversed(range(NUMBER))]
    if MODE == "fat":
        listed += [{"name": f"fat{i:03d}", "description": "D" * 3900, "inputSchema": {
            "type": "object", "properties": {"x": {"type": "string", "description": "x" * 15000}}}}
            for i in range(NUMBER)]
    if MODE == "flood" and listings > 1:
        listed.append({"name": f"gen{listings}", "description": "Generated.", "inputSchema": {"type": "object"}})
    return listed


for line in sys.stdin.buffer:
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    mid, method = msg.get("id"), msg.get("method")
    if mid is None:
        continue
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": mid, "result": {
            "protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {"listChanged": True}},
            "serverInfo": {"name": "listing", "version": "1"}}})
    elif method == "tools/list":
        listings += 1
        if os.environ.get("LISTINGS_FILE"):  # replaced whole: a reader never sees it half written
            with open(os.environ["LISTINGS_FILE"] + ".new", "w") as f:
                f.write(str(listings))
            os.replace(os.environ["LISTINGS_FILE"] + ".new", os.environ["LISTINGS_FILE"])
        if MODE == "badrelist" and listings > 1:
            send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32603, "message": "the list is broken"}})
            continue
        if MODE == "deep":
            head = json.dumps({"jsonrpc": "2.0", "id": mid, "result": {"tools": tools()}}).encode()
            deep = b'{"name":"deep","description":"d","inputSchema":' + nested(NUMBER) + b"}"
            send(raw=head[: -len("]}}")] + b"," + deep + b"]}}")
        else:
            send({"jsonrpc": "2.0", "id": mid, "result": {"tools": tools()}})
        if MODE in ("flood", "same") or (MODE == "badrelist" and listings == 1):
            send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
    elif method == "tools/call":
        text = (msg["params"].get("arguments") or {}).get("text", "")
        if MODE == "deepanswer" and text != "plain":
            send(raw=b'{"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":"text","text":"deep"}],'
                     b'"structuredContent":{"x":%s}}}' % (mid, nested(NUMBER)))
        else:
            send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": f"echo: {text}"}]}})
    else:
        send({"jsonrpc": "2.0", "id": mid, "result": {}})
