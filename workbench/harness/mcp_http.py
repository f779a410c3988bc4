"""The HTTP client of a ``url:`` MCP server (X1, X3, F3): the SDK's, with a size limit on its answers.

Everything a server sends is untrusted input, and a stdio server's messages are capped at
``MAX_MESSAGE_BYTES`` (``mcp_stdio.py``). Over streamable HTTP the SDK caps each event of an event
stream (``max_sse_event_size``), but it reads an ``application/json`` answer — and an error status's
body — whole, with no limit: a server answering with an endless body would grow the app's memory
until the read timeout (five minutes), and a small gzip body can expand a thousandfold. Here the
client's transport counts the bytes of every answer that is not an event stream, after decoding:

- an answer over ``limit`` bytes — or one whose ``Content-Length`` says it would be — ends with an error
  naming the server, the size and the limit: the SDK fails that call with it at once, the server stays
  connected, and the workbench's note says so in the server's log (the Servers panel);
- a compressed answer is decompressed here, never past the limit (gzip and deflate, the encodings this
  client asks for); an encoding it did not ask for is refused, naming it.

An event stream (``text/event-stream``) is left to the SDK's per-event limit, given the same value: it
is the server's stream of messages for as long as the session lasts, so its total is no message's size.
(httpx2 decodes a compressed one in steps of at most 1 MB, so no small chunk expands at once.)
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx2

__all__ = ["AnswerTooLong", "capped_client"]


class AnswerTooLong(httpx2.StreamError):
    """An answer over the limit (a ``StreamError``: the SDK turns it into its call's error)."""


def capped_client(name: str, headers: dict[str, str], limit: int, note: Callable[[str], None]) -> httpx2.AsyncClient:
    """The SDK's client for server ``name`` (its timeouts), whose answers stop at ``limit`` bytes."""
    from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT

    asked = {k.lower() for k in headers}
    sent = dict(headers) if "accept-encoding" in asked else {**headers, "Accept-Encoding": "gzip, deflate"}
    return httpx2.AsyncClient(headers=sent, timeout=httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT),
                              transport=_CappedTransport(httpx2.AsyncHTTPTransport(), name, limit, note))


class _CappedTransport(httpx2.AsyncBaseTransport):
    def __init__(self, inner: httpx2.AsyncBaseTransport, name: str, limit: int, note: Callable[[str], None]) -> None:
        self._inner = inner
        self._name = name
        self._limit = limit
        self._note = note

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        if response.headers.get("content-type", "").lower().startswith("text/event-stream"):
            return response  # capped per event by the SDK (max_sse_event_size), decoded by httpx2 in 1 MB steps
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        declared = response.headers.get("content-length", "")
        refusal = None
        if encoding in ("", "identity") and declared.isdigit() and int(declared) > self._limit:
            refusal = self._too_long(int(declared), "says it is")
        elif encoding not in ("", "identity", "gzip", "x-gzip", "deflate"):
            refusal = self._refused(f"in the {encoding!r} encoding, which this client did not ask for (gzip or deflate)")
        if encoding not in ("", "identity"):
            del response.headers["content-encoding"]  # decoded here, within the limit; not again by httpx
            response.headers.pop("content-length", None)
        if refusal is not None:
            # Raised as the body is read, where the SDK turns it into the call's error (raised here, it
            # would end the connection instead); nothing of the body is read.
            await response.stream.aclose()  # the connection's body (the response itself stays readable)
            response.stream = _Refused(refusal)  # type: ignore[assignment]
        else:
            response.stream = _CappedStream(response.stream, encoding, self)  # type: ignore[assignment]
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()

    def _too_long(self, size: int, how: str = "reached") -> AnswerTooLong:
        return self._refused(f"of {size:,} bytes or more ({how}), over the limit of {self._limit:,} bytes "
                             f"({self._limit / 2**20:g} MB) for one message")

    def _refused(self, what: str) -> AnswerTooLong:
        text = f"MCP server {self._name!r} sent an answer {what}: it was dropped and this call failed"
        self._note(f"[workbench] {text}; the server stays connected")
        return AnswerTooLong(text)


class _Refused(httpx2.AsyncByteStream):
    def __init__(self, error: AnswerTooLong) -> None:
        self._error = error

    async def __aiter__(self) -> AsyncIterator[bytes]:
        raise self._error
        yield b""  # an async generator  # pragma: no cover


class _CappedStream(httpx2.AsyncByteStream):
    """The body, decoded (gzip, deflate) here, and at most the transport's limit of it."""

    def __init__(self, inner: Any, encoding: str, transport: _CappedTransport) -> None:
        self._inner = inner
        self._transport = transport
        self._limit = transport._limit
        if encoding in ("gzip", "x-gzip"):
            self._decoder: Any = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif encoding == "deflate":
            self._decoder = _Deflate()
        else:
            self._decoder = None

    async def __aiter__(self) -> AsyncIterator[bytes]:
        limit = self._limit
        total = 0
        async for chunk in self._inner:
            if self._decoder is None:
                total += len(chunk)
                if total > limit:
                    raise self._transport._too_long(total)
                yield chunk
                continue
            data = chunk
            while data:  # never more than the limit's worth decompressed: a bomb stops here
                try:
                    piece = self._decoder.decompress(data, limit + 1 - total)
                except zlib.error as exc:
                    raise self._transport._refused(f"that does not decompress ({exc})") from None
                total += len(piece)
                if total > limit:
                    raise self._transport._too_long(total)
                if not piece:
                    break  # all of it taken in: more input is needed
                yield piece
                data = self._decoder.unconsumed_tail
        if self._decoder is not None:
            rest = self._decoder.flush()
            if total + len(rest) > limit:
                raise self._transport._too_long(total + len(rest))
            if rest:
                yield rest

    async def aclose(self) -> None:
        await self._inner.aclose()


class _Deflate:
    """``Content-Encoding: deflate``: zlib-wrapped as the standard says, or raw as some servers send it."""

    def __init__(self) -> None:
        self._obj: Any = zlib.decompressobj()
        self._started = False

    def decompress(self, data: bytes, max_length: int) -> bytes:
        if not self._started:
            self._started = True
            try:
                return self._obj.decompress(data, max_length)
            except zlib.error:
                self._obj = zlib.decompressobj(-zlib.MAX_WBITS)
        return self._obj.decompress(data, max_length)

    @property
    def unconsumed_tail(self) -> bytes:
        return self._obj.unconsumed_tail

    def flush(self) -> bytes:
        return self._obj.flush()
