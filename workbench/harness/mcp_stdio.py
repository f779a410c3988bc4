"""A stdio MCP server's process, as the workbench's own transport (X3, F3, R10): the mixin of
``mcp_server.Server`` that spawns the server, bridges its pipes to the SDK's streams and stops it. No Qt.

The transport is the workbench's, not the SDK's: it knows the pid, reads stderr into the log tail the
Servers panel shows, skips a line on stdout that is not JSON-RPC (a banner, a stray print) noting it in
the log instead of failing, sees EOF on stdout as the server gone, and stops it by closing stdin, then
SIGTERM and SIGKILL to its whole process group — so no grandchild (``npx`` → ``node``) outlives the
session. Everything a server sends is untrusted input: its lines are split in linear time, one message is
at most MAX_MESSAGE_BYTES (a longer one — or an endless line — is dropped, the calls in flight fail saying
so and the server is restarted), and an answer the SDK's strict parser rejects although it is JSON (a lone
surrogate escape, ``"\ud800"``) is read with the surrogate replaced (R10), or, if it is still no valid
answer, fails its call at once (never a timeout) — as does an answer nested too deeply to parse (its id
found without recursion, ``_answer_id``). The same MAX_MESSAGE_BYTES caps a streamable HTTP
server's answers (``mcp_http.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from workbench.harness.mcp_tools import one_line

if TYPE_CHECKING:
    from workbench.harness.mcp_servers import McpServers

__all__ = ["INVALID_ANSWER", "MAX_MESSAGE_BYTES", "STOP_GRACE", "StdioTransport", "signal_group"]


STOP_GRACE = 2.0
"""Seconds a server gets after its stdin closes, and again after SIGTERM, before SIGKILL."""
MAX_MESSAGE_BYTES = 32 * 1024 * 1024
"""Bytes one message from a stdio server (one line of JSON-RPC) may take. Room for any real answer — a
20 MB image in base64 is 27 MB — while the model gets at most ``compression.max_tool_response_chars`` of
it anyway; a message is held a few times over while it is read (bytes, text, parsed: about five times its
size at the peak), so this bounds the workbench's memory for one answer to some 160 MB and its reading to
a fraction of a second (linear time: 31 MB in 0.2 s here). A longer line
(or one that never ends) is dropped as soon as it passes the limit, noted in the server's log, the calls
in flight fail naming the server and the size, and the server is restarted (its usual backoff)."""
MAX_STDERR_LINE_BYTES = 64 * 1024
"""Bytes of one stderr line kept (the log shows ``mcp_server.MAX_LINE_CHARS`` of it); the rest, to its
newline, is skipped."""
INVALID_ANSWER = -32099
"""The JSON-RPC error code the transport answers a call with when the server's answer to it was JSON but
no valid MCP message (so the call fails at once, with that reason, instead of waiting out tool_timeout)."""


class StdioTransport:
    """The stdio transport of one ``Server`` (see the module): a mixin, run on the MCP loop like the rest."""

    if TYPE_CHECKING:
        m: McpServers
        pid: int | None
        _disconnected: Any
        _too_long: int | None
        _exit_code: int | None

        def note(self, line: str) -> None: ...

        def _publish(self) -> None: ...

    @contextlib.asynccontextmanager
    async def _stdio(self, spec: Any) -> AsyncIterator[Any]:
        """Spawn the server in its own process group and bridge its pipes to the SDK's streams."""
        import anyio
        import mcp_types as types
        from mcp.shared.message import SessionMessage

        process = await anyio.open_process([spec.executable, *spec.args], env=spec.env, cwd=spec.cwd,
                                           start_new_session=os.name == "posix")
        self.pid = process.pid
        self.m._track(process.pid, True)
        self._publish()
        self.note(f"[workbench] started {spec.executable} (pid {process.pid})")
        read_send, read_recv = anyio.create_memory_object_stream[Any](0)
        write_send, write_recv = anyio.create_memory_object_stream[Any](0)
        disconnected = self._disconnected = anyio.Event()

        async def stdout_reader() -> None:
            try:
                async with read_send, contextlib.aclosing(_lines(process.stdout, MAX_MESSAGE_BYTES)) as lines:
                    async for line in lines:
                        if isinstance(line, _TooLong):
                            self._too_long = line.size
                            self.note(f"[workbench] stdout: a message of {line.size:,} bytes or more (over the "
                                      f"{MAX_MESSAGE_BYTES:,}-byte limit) was dropped and the server stopped; it "
                                      f"began: {line.text()}")
                            break  # the connection ends: the calls in flight fail, the server restarts
                        if not line.strip():
                            continue
                        try:
                            message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                        except ValueError:
                            message = self._salvage(line)
                            if message is None:
                                continue
                        await read_send.send(SessionMessage(message))
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                pass
            finally:
                disconnected.set()
            if self._too_long is not None:  # read on (thrown away) until the process is stopped: its pipe
                with contextlib.suppress(Exception):  # then ends at EOF, nothing is left unread
                    while True:
                        await process.stdout.receive()

        async def stdin_writer() -> None:
            try:
                async with write_recv:
                    async for message in write_recv:
                        data = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                        await process.stdin.send(data.encode("utf-8"))
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                disconnected.set()
                await read_send.aclose()

        async def stderr_reader() -> None:
            async with contextlib.aclosing(_lines(process.stderr, MAX_STDERR_LINE_BYTES)) as lines:
                async for line in lines:
                    if isinstance(line, _TooLong):
                        self.note(f"{line.text()} [workbench: a stderr line of {line.size:,} bytes or more, cut]")
                    elif line.strip():
                        self.note(line)

        async with anyio.create_task_group() as tg:
            tg.start_soon(stdout_reader)
            tg.start_soon(stdin_writer)
            tg.start_soon(stderr_reader)
            try:
                yield read_recv, write_send
            finally:
                with anyio.CancelScope(shield=True):
                    await self._stop_process(process)
                    for s in (read_recv, write_send):
                        await s.aclose()
                tg.cancel_scope.cancel()

    def _salvage(self, line: str) -> Any:
        """A stdout line the SDK's parser rejected: the JSON-RPC message it still is, or None (noted).
        Python's JSON reader takes what RFC 8259 allows and pydantic's does not (``"\ud800"``, a lone
        surrogate escape): such a message is read with every lone surrogate replaced by U+FFFD (R10). JSON
        that is no valid message but answers a request becomes an error answer to it (INVALID_ANSWER),
        so that call fails now with the reason, not at tool_timeout."""
        import mcp_types as types
        from pydantic import ValidationError

        from workbench.engine.messages import clean_value

        def no_constant(name: str) -> Any:
            raise ValueError(f"{name} is not JSON")

        try:
            value = clean_value(json.loads(line, parse_constant=no_constant))
        except RecursionError:
            return self._too_deep(line)
        except ValueError:
            self.note(f"[workbench] stdout, not JSON-RPC (ignored): {line.strip()}")
            return None
        try:
            return types.jsonrpc_message_adapter.validate_python(value, by_name=False)
        except RecursionError:
            return self._too_deep(line)
        except (ValidationError, ValueError) as e:
            why = one_line(str(e).splitlines()[0] if str(e) else type(e).__name__, 200)
            if isinstance(value, dict) and isinstance(value.get("id"), (int, str)) and not isinstance(
                    value.get("id"), bool) and ("result" in value or "error" in value):
                self.note(f"[workbench] stdout: the answer to request {one_line(str(value['id']), 40)} is not valid "
                          f"MCP ({why}); its call fails: {line.strip()}")
                return types.JSONRPCError(jsonrpc="2.0", id=value["id"], error=types.ErrorData(
                    code=INVALID_ANSWER, message=f"its answer is not a valid JSON-RPC message ({why})"))
            self.note(f"[workbench] stdout, not JSON-RPC (ignored): {line.strip()}")
            return None

    def _too_deep(self, line: str) -> Any:
        """A line too deeply nested to read (Python's reader ran out of recursion, F3): if it answers a
        request, an error answer to it (INVALID_ANSWER) saying so, so that request fails now — a tools
        list at start, a call — instead of waiting out startup_timeout or tool_timeout; else None (noted)."""
        import mcp_types as types

        ident = _answer_id(line)
        if ident is None:
            self.note(f"[workbench] stdout, not JSON-RPC (nested too deeply to read; ignored): {line.strip()}")
            return None
        self.note(f"[workbench] stdout: the answer to request {one_line(str(ident), 40)} nests too deeply to be "
                  f"read; its request fails: {line.strip()}")
        return types.JSONRPCError(jsonrpc="2.0", id=ident, error=types.ErrorData(
            code=INVALID_ANSWER, message="its answer nests too deeply to be read (hundreds of levels of JSON, "
            "which no real answer has)"))

    async def _stop_process(self, process: Any) -> None:
        """Close stdin, wait; SIGTERM then SIGKILL the whole process group (grandchildren too)."""
        import anyio

        with contextlib.suppress(Exception):
            await process.stdin.aclose()
        if not await _exited(process, STOP_GRACE):
            signal_group(process.pid, signal.SIGTERM)
            if not await _exited(process, STOP_GRACE):
                signal_group(process.pid, getattr(signal, "SIGKILL", signal.SIGTERM))
                await _exited(process, STOP_GRACE)
        signal_group(process.pid, signal.SIGTERM)  # what the server started and left behind
        self._exit_code = process.returncode
        if process.returncode is not None:
            self.m._track(process.pid, False)
        for stream in (process.stdout, process.stderr):
            with contextlib.suppress(Exception):
                await stream.aclose()
        await anyio.lowlevel.checkpoint()


@dataclass(frozen=True)
class _TooLong:
    """A line over its limit, in place of its text: the bytes read of it when it passed the limit (it may
    go on) and its first bytes."""

    size: int
    head: bytes

    def text(self) -> str:
        return one_line(self.head.decode("utf-8", "replace"), 120)


async def _lines(stream: Any, limit: int) -> AsyncIterator[str | _TooLong]:
    """The lines of a byte stream, decoded (undecodable bytes replaced), without their newlines; the
    last one even without its newline. Linear time and memory: each chunk is searched for newlines once,
    from where the last search ended, and a line's pieces are joined once (F3). A line of more than
    ``limit`` bytes is not kept: a ``_TooLong`` stands for it the moment it passes the limit — an endless
    line included — and the rest of it, to its newline, is read and thrown away."""
    import anyio

    pieces: list[bytes] = []
    size = 0
    skipping = False
    while True:
        try:
            chunk = await stream.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            break
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            part = chunk[start:] if end < 0 else chunk[start:end]
            if not skipping and part:
                if size + len(part) > limit:
                    too_long = _TooLong(size + len(part), (pieces[0] if pieces else part)[:400])
                    pieces, size, skipping = [], 0, True
                    yield too_long
                else:
                    pieces.append(part)
                    size += len(part)
            if end < 0:
                break
            if skipping:
                skipping = False
            else:
                yield _joined(pieces)
            pieces, size = [], 0
            start = end + 1
    if pieces and not skipping:
        yield _joined(pieces)


def _joined(pieces: list[bytes]) -> str:
    """The pieces as one text; the list is emptied (a long line is not held twice while it is read)."""
    data = b"".join(pieces)
    pieces.clear()
    return data.decode("utf-8", "replace")


_JSON_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[{}\[\]:,]')
"""A JSON text's strings and punctuation (numbers and literals between them are skipped)."""
_LAST_ID = re.compile(r',\s*"id"\s*:\s*(-?\d+|"[^"\\]*(?:\\.[^"\\]*)*")\s*\}\s*$')
"""An ``"id"`` that is the last member of the object the text ends with."""


def _answer_id(line: str) -> int | str | None:
    """The ``id`` of a JSON-RPC answer too deeply nested for ``json.loads``, read without parsing what
    nests (F3: no recursion, and no walk through the nesting): the object's members are read up to its
    first nested value, which must be its ``result`` or ``error``; the ``id`` is among those members or
    the object's last one. None when it is no such answer."""
    text = line.strip()
    if not text.startswith("{"):
        return None
    keys: list[str] = []
    ident: Any = None
    last = ""  # the previous token
    try:
        for m in _JSON_TOKENS.finditer(text, 1):
            tok = m.group()
            if tok in ("{", "["):
                break  # the first nested value: ``keys[-1]`` is its name
            if tok in ("}", "]"):
                return None  # nothing nested (then it was not too deep to read)
            if tok == ":" and last.startswith('"'):
                keys.append(json.loads(last))
                if keys[-1] == "id":
                    start = m.end()
                    while start < len(text) and text[start] in " \t\r\n":
                        start += 1
                    ident = json.JSONDecoder().raw_decode(text, start)[0]
            last = tok
        if not keys or keys[-1] not in ("result", "error"):
            return None
        if ident is None:
            found = _LAST_ID.search(text[-1024:])
            ident = json.loads(found.group(1)) if found else None
    except (ValueError, RecursionError):
        return None
    if isinstance(ident, bool) or not isinstance(ident, (int, str)):
        return None
    return ident


async def _exited(process: Any, timeout: float) -> bool:
    """Whether the process ended within ``timeout`` (polled: ``wait()`` also waits for pipes a grandchild
    may hold open)."""
    deadline = time.monotonic() + timeout
    while process.returncode is None:
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.01)
    return True


def signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
        if hasattr(os, "killpg"):
            os.killpg(pid, sig)
        else:  # pragma: no cover - Windows: the process alone
            os.kill(pid, sig)
