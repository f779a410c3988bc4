"""A small MCP server for the tests, written with the official SDK (``MCPServer``). One script, many
behaviours, chosen by the first argument; a second argument is a marker the tests find the process by.

    python tiny.py normal MARK       tools: echo (read-only), add (structured), note (changes things),
                                     picture (an image), crash (the process dies mid-call), slow, fail
    python tiny.py hang MARK         reads stdin and never answers ``initialize`` (a startup timeout)
    python tiny.py garbage MARK      prints lines that are not JSON-RPC on stdout, before and during calls
    python tiny.py many MARK         60 tools, some with names no provider accepts as they are
    python tiny.py http MARK PORT    the normal tools over streamable HTTP on 127.0.0.1:PORT
    python tiny.py stderr MARK       writes to stderr, then exits before answering (a failed start)
    python tiny.py spawner MARK      starts a long-lived child process of its own, then serves normally
"""

# No ``from __future__ import annotations``: the SDK reads the tools' annotations at run time.
import base64
import os
import sys
import time

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")


def normal_server(name: str = "tiny") -> object:
    from mcp.server.mcpserver import Image, MCPServer
    from mcp.types import ToolAnnotations

    server = MCPServer(name)
    read_only = ToolAnnotations(read_only_hint=True)

    @server.tool(annotations=read_only)
    def echo(text: str) -> str:
        """Echo the text back."""
        return f"echo: {text}"

    @server.tool(annotations=read_only)
    def add(a: int, b: int) -> dict[str, int]:
        """Add two numbers; the sum comes back as structured content."""
        return {"sum": a + b}

    @server.tool()
    def note(path: str, text: str) -> str:
        """Write a note to a file (changes the outside world)."""
        with open(path, "a", encoding="utf-8") as f:
            f.write(text + "\n")
        return f"wrote {len(text)} characters to {path}"

    @server.tool(annotations=read_only)
    def picture() -> Image:
        """A 1x1 PNG picture."""
        return Image(data=PNG, format="png")

    @server.tool(annotations=read_only)
    def crash() -> str:
        """Dies in the middle of the call."""
        sys.stderr.write("tiny: about to crash\n")
        sys.stderr.flush()
        os._exit(3)

    @server.tool(annotations=read_only)
    def slow(seconds: float) -> str:
        """Sleeps, then answers."""
        time.sleep(seconds)
        return "slept"

    @server.tool(annotations=read_only)
    def fail() -> str:
        """Always raises (the result is an error)."""
        raise ValueError("the tool failed on purpose")

    @server.tool(annotations=read_only)
    def getenv(name: str) -> str:
        """The value of one of the server's environment variables ("" when unset)."""
        return os.environ.get(name, "")

    @server.tool(annotations=read_only)
    def big(n: int) -> str:
        """n characters of text."""
        return "x" * n

    return server


def many_server() -> object:
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("many")
    odd = ["dotted.name", "with space", "ünïcödé", "slash/name", "a" * 80, "a" * 81, "dot_x", "dot.x", "tool-7"]
    names = [f"tool_{i:02d}" for i in range(60 - len(odd))] + odd

    def make(i: int):
        def fn(x: int = 0) -> str:
            return f"tool {i} got {x}"
        return fn

    for i, name in enumerate(names):
        server.add_tool(make(i), name=name, description=f"Tool number {i}.")
    return server


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "normal"
    if mode == "hang":
        sys.stderr.write("tiny: hanging\n")
        sys.stderr.flush()
        while sys.stdin.buffer.readline():
            pass
        time.sleep(3600)
        return
    if mode == "stderr":
        sys.stderr.write("tiny: missing configuration file /etc/tiny.conf\n")
        sys.stderr.flush()
        sys.exit(2)
    if mode == "garbage":
        print("Welcome to tiny! (a banner on stdout)", flush=True)
        server = normal_server("garbage")

        @server.tool()
        def noisy() -> str:  # type: ignore[misc]
            """Prints a stray line on stdout during the call."""
            os.write(1, b"stray output during a call\n")
            return "noisy done"

        server.run()
        return
    if mode == "spawner":
        import subprocess

        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", "grandchild", *sys.argv[2:3]])
        normal_server("spawner").run()
        return
    if mode == "many":
        many_server().run()
        return
    if mode == "http":
        port = int(sys.argv[3])
        normal_server("tiny-http").run("streamable-http", host="127.0.0.1", port=port)
        return
    normal_server().run()


if __name__ == "__main__":
    main()
