"""A loopback OpenAI-compatible server that plays scripted replies (DESIGN §7).

It runs on its own asyncio loop in a daemon thread, so it keeps serving while a test's loop is blocked
in sync code, and while litellm calls it from another thread or a subprocess. Also runnable as a
script for the e2e CLI tests and benchmarks::

    python -m tests.stub_server --port 0 --script script.json   # prints the base URL, serves until killed

``--auto-ls`` answers from the conversation itself when the script is empty, so any client (this
project, the peers in ``benchmarks/peers.py``, a bare loop) can play the same scripted session: the
last user message names the count (its first integer, N) and the folder (its first word starting
with ``/``); while fewer than N tool results follow that message, the reply is one ``ls`` call on that
folder, then a text answer. ``--log-arrivals`` prints ``REQUEST <time.time()>`` on stdout, flushed, as
each chat request arrives (``benchmarks/first_request.py`` times a process's first request with it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

import orjson
from aiohttp import web

__all__ = ["StubReply", "StubServer"]


@dataclass
class StubReply:
    """One scripted answer.

    ``tool_calls`` items are ``(name, args)``; args is a dict (sent as JSON) or a str (sent raw, so a
    test can send invalid JSON). ``usage`` is ``(prompt, completion)`` or a full OpenAI usage dict;
    None makes a rough estimate. ``send_usage=False`` omits usage altogether. ``status`` != 200 answers
    with an OpenAI-style error (``error_body`` replaces it). ``chunks`` is how many pieces the text is
    streamed in; ``delay`` waits before answering, ``chunk_delay`` between streamed chunks.
    ``drop_after=N`` closes the connection abruptly after N streamed events (a mid-stream failure).
    """

    text: str = ""
    tool_calls: list[Any] = field(default_factory=list)
    usage: tuple[int, int] | list[int] | dict[str, Any] | None = None
    status: int = 200
    error_body: Any = None
    chunks: int = 3
    delay: float = 0.0
    chunk_delay: float = 0.0
    reasoning: str = ""
    send_usage: bool = True
    finish_reason: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    drop_after: int | None = None

    @classmethod
    def coerce(cls, item: StubReply | dict[str, Any] | str) -> StubReply:
        """Accept a StubReply, a dict of its fields, or plain text."""
        if isinstance(item, StubReply):
            return item
        if isinstance(item, str):
            return cls(text=item)
        names = {f.name for f in fields(cls)}
        unknown = set(item) - names
        if unknown:
            raise ValueError(f"StubReply: unknown keys {sorted(unknown)}")
        return cls(**item)


_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_exceeded",
}


def _split(text: str, n: int) -> list[str]:
    """Split text into at most n non-empty pieces (n >= 1)."""
    if not text:
        return []
    n = max(1, min(n, len(text)))
    size = -(-len(text) // n)
    return [text[i : i + size] for i in range(0, len(text), size)]


class StubServer:
    """The server: ``url``, ``script(*items)``, ``requests``, ``reset()``, ``start()``, ``stop()``."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self.port = port
        self.requests: list[dict[str, Any]] = []
        #: Keep each request body in ``requests``. The server as its own process (``main``) keeps none:
        #: nobody can read them there, and a 500-step benchmark's bodies (the history, resent each step)
        #: would grow it by hundreds of MB and slow each late request by its garbage collector's walks.
        self.keep_requests = True
        self.auth: list[str] = []  # each request's Authorization header, in order
        self.abandoned = 0  # streams the client went away from before their end
        self._script: deque[StubReply] = deque()
        self._by_model: dict[str, deque[StubReply]] = {}  # script_for: replies for one model name
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._served = 0
        #: ``time.time()`` at which each chat request arrived; ``on_arrival`` (if set) is called with it.
        self.arrivals: list[float] = []
        #: The client's (host, port) for each chat request: one port for many requests = a kept-alive connection.
        self.peers: list[Any] = []
        self.on_arrival: Callable[[float], None] | None = None
        #: Answer from the conversation when the script is empty (see the module doc, ``--auto-ls``).
        self.auto_ls = False

    # --- public API ---------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def script(self, *items: StubReply | dict[str, Any] | str) -> StubServer:
        """Queue replies, consumed in order by chat-completion requests."""
        replies = [StubReply.coerce(i) for i in items]
        with self._lock:
            self._script.extend(replies)
        return self

    def script_for(self, model: str, *items: StubReply | dict[str, Any] | str) -> StubServer:
        """Queue replies for requests naming ``model`` (as the client sends it: ``openai/x`` arrives as
        ``x``); such requests take these before the common script. For concurrent callers (the parent
        and its background sub-agents) whose order is not fixed."""
        replies = [StubReply.coerce(i) for i in items]
        with self._lock:
            self._by_model.setdefault(model, deque()).extend(replies)
        return self

    @property
    def remaining(self) -> int:
        with self._lock:
            return len(self._script)

    def reset(self) -> None:
        """Forget the script and the recorded requests."""
        with self._lock:
            self._script.clear()
            self._by_model.clear()
            self.requests.clear()
            self.auth.clear()
            self.abandoned = 0
            self.arrivals.clear()
            self.peers.clear()
            self._served = 0

    def start(self) -> StubServer:
        self._thread = threading.Thread(target=self._run, name="stub-server", daemon=True)
        self._thread.start()
        self._ready.wait(10)
        if self._error is not None:
            raise RuntimeError(f"stub server failed to start: {self._error}") from self._error
        if not self._ready.is_set():
            raise RuntimeError("stub server did not start within 10 s")
        return self

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        if loop.is_running():
            asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(10)
            loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        self._loop = self._thread = None

    def __enter__(self) -> StubServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- server thread -----------------------------------------------------------------------

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._startup())
        except BaseException as exc:  # noqa: BLE001 - reported to start()
            self._error = exc
            self._ready.set()
            loop.close()
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            loop.close()

    async def _startup(self) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)  # histories with 2 MB answers (R10)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/models", self._models)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        server = site._server  # noqa: SLF001 - the only way to learn the port picked for port 0
        assert server is not None and server.sockets
        self.port = server.sockets[0].getsockname()[1]

    async def _shutdown(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    # --- handlers ----------------------------------------------------------------------------

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response(
            {"object": "list", "data": [{"id": "test-model", "object": "model", "owned_by": "stub"}]}
        )

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        arrived = time.time()
        with self._lock:
            self.arrivals.append(arrived)
            self.peers.append(request.transport.get_extra_info("peername") if request.transport else None)
        if self.on_arrival is not None:
            self.on_arrival(arrived)
        try:
            body = await request.json(loads=_loads)
        except json.JSONDecodeError:
            body = {"_invalid_json": await request.text()}
        with self._lock:
            if self.keep_requests:
                self.requests.append(body)
            self.auth.append(request.headers.get("Authorization", ""))
            self._served += 1
            n = self._served
            own = self._by_model.get(str(body.get("model", "")))
            if own:
                reply = own.popleft()
            else:
                reply = self._script.popleft() if self._script else None
        if reply is None and self.auto_ls:
            reply = _auto_ls_reply(body)
        if reply is None:
            return web.json_response(
                {
                    "error": {
                        "message": f"stub server: the script ran out of replies at request {n}",
                        "type": "stub_script_exhausted",
                        "code": "stub_script_exhausted",
                    }
                },
                status=500,
            )
        if reply.delay:
            await asyncio.sleep(reply.delay)
        if reply.status != 200:
            return self._error_response(reply)
        model = body.get("model", "test-model")
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return await self._stream(request, reply, model, include_usage, body)
        return web.json_response(self._full(reply, model, body), headers=reply.headers)

    def _error_response(self, reply: StubReply) -> web.Response:
        if reply.error_body is not None:
            payload = reply.error_body
        else:
            payload = {
                "error": {
                    "message": f"stub error {reply.status}",
                    "type": _ERROR_TYPES.get(reply.status, "server_error"),
                    "code": reply.status,
                }
            }
        if isinstance(payload, str):
            return web.Response(text=payload, status=reply.status, headers=reply.headers)
        return web.json_response(payload, status=reply.status, headers=reply.headers)

    # --- reply building ----------------------------------------------------------------------

    @staticmethod
    def _usage(reply: StubReply, body: dict[str, Any]) -> dict[str, Any]:
        u = reply.usage
        if isinstance(u, dict):
            out = dict(u)
            out.setdefault("total_tokens", out.get("prompt_tokens", 0) + out.get("completion_tokens", 0))
            return out
        if u is None:
            prompt_chars = sum(len(str(m.get("content") or "")) for m in body.get("messages", []))
            prompt, completion = prompt_chars // 4 + 1, len(reply.text) // 4 + 1
        else:
            prompt, completion = int(u[0]), int(u[1])
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}

    @staticmethod
    def _calls(reply: StubReply) -> list[tuple[str, str, str]]:
        """(id, name, raw arguments) for each scripted tool call."""
        out = []
        for i, item in enumerate(reply.tool_calls):
            if isinstance(item, dict):
                name, args, cid = item["name"], item.get("arguments", {}), item.get("id")
            else:
                name, args = item[0], item[1] if len(item) > 1 else {}
                cid = item[2] if len(item) > 2 else None
            raw = args if isinstance(args, str) else json.dumps(args)
            out.append((cid or f"call_stub_{i}", name, raw))
        return out

    def _finish(self, reply: StubReply) -> str:
        return reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")

    def _full(self, reply: StubReply, model: str, body: dict[str, Any]) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
        if reply.reasoning:
            message["reasoning_content"] = reply.reasoning
        calls = self._calls(reply)
        if calls:
            message["tool_calls"] = [
                {"id": cid, "type": "function", "function": {"name": name, "arguments": raw}}
                for cid, name, raw in calls
            ]
        out = {
            "id": "chatcmpl-stub",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": self._finish(reply)}],
        }
        if reply.send_usage:
            out["usage"] = self._usage(reply, body)
        return out

    async def _stream(
        self, request: web.Request, reply: StubReply, model: str, include_usage: bool, body: dict[str, Any]
    ) -> web.StreamResponse:
        resp = web.StreamResponse(
            status=200, headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache", **reply.headers}
        )
        created = int(time.time())
        sent = 0

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {
                "id": "chatcmpl-stub",
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }

        async def send(payload: dict[str, Any] | str) -> None:
            nonlocal sent
            if reply.drop_after is not None and sent >= reply.drop_after:
                if request.transport is not None:
                    request.transport.abort()
                raise ConnectionResetError("stub server: dropped the connection as scripted")
            sent += 1
            data = payload if isinstance(payload, str) else json.dumps(payload)
            await resp.write(f"data: {data}\n\n".encode())
            if reply.chunk_delay:
                await asyncio.sleep(reply.chunk_delay)

        try:
            await resp.prepare(request)
            await self._send_all(reply, send, chunk, include_usage, body, created, model)
            await resp.write_eof()
        except ConnectionResetError:  # scripted drop, or the client gave up (a timeout test)
            if reply.drop_after is None:
                with self._lock:
                    self.abandoned += 1
        except asyncio.CancelledError:
            with self._lock:
                self.abandoned += 1
            raise
        return resp

    async def _send_all(
        self, reply: StubReply, send: Any, chunk: Any, include_usage: bool, body: dict[str, Any], created: int, model: str
    ) -> None:
        """The SSE events of one streamed reply: role, reasoning, text, tool-call fragments, finish, usage."""
        await send(chunk({"role": "assistant", "content": ""}))
        for piece in _split(reply.reasoning, reply.chunks):
            await send(chunk({"reasoning_content": piece}))
        for piece in _split(reply.text, reply.chunks):
            await send(chunk({"content": piece}))
        for index, (cid, name, raw) in enumerate(self._calls(reply)):
            await send(
                chunk(
                    {
                        "tool_calls": [
                            {"index": index, "id": cid, "type": "function", "function": {"name": name, "arguments": ""}}
                        ]
                    }
                )
            )
            for piece in _split(raw, max(2, reply.chunks)):
                await send(chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
        await send(chunk({}, self._finish(reply)))
        if include_usage and reply.send_usage:
            await send(
                {
                    "id": "chatcmpl-stub",
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": model,
                    "choices": [],
                    "usage": self._usage(reply, body),
                }
            )
        await send("[DONE]")


def _loads(text: str) -> Any:
    """The request body, parsed by orjson where it can (a 1,000-message body, ~200 KB: 0.4 ms instead of
    0.8): the stub stands in for a provider, and its parse is no client's cost. Every side of the
    benchmarks talks to the same stub. What orjson refuses and the standard library reads (a lone
    surrogate's escape, NaN, a number past a double) is read by the standard library, as before."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


def _text_of(content: Any) -> str:
    """A message's text: a str, or the text parts of an OpenAI content list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def _auto_ls_reply(body: dict[str, Any]) -> StubReply:
    """``--auto-ls``: one ``ls`` call per step until the count the last user message names, then an answer."""
    messages = [m for m in body.get("messages", []) if isinstance(m, dict)]
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    prompt = _text_of(messages[last_user].get("content")) if last_user >= 0 else ""
    count = re.search(r"\d+", prompt)
    folder = re.search(r"(?<!\S)/\S*", prompt)
    wanted = int(count.group()) if count else 0
    done = sum(1 for m in messages[last_user + 1 :] if m.get("role") == "tool")
    if done < wanted:
        path = folder.group().rstrip(".,;:") if folder else "/"
        return StubReply(tool_calls=[["ls", {"path": path or "/"}, f"call_ls_{done}"]], usage=[100 + 60 * done, 12])
    return StubReply(text=f"Listed {done} times. Done.", usage=[100 + 60 * done, 9])


def main(argv: list[str] | None = None) -> int:
    """Serve a script file until SIGTERM/SIGINT, printing the base URL on the first stdout line."""
    parser = argparse.ArgumentParser(prog="python -m tests.stub_server", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--script", help="a JSON file holding a list of replies (StubReply fields or text), or "
                        "an object of such lists by model name (as script_for; \"*\": the common script)")
    parser.add_argument("--auto-ls", action="store_true",
                        help="once the script is used up, answer from the conversation (see the module doc)")
    parser.add_argument("--log-arrivals", action="store_true",
                        help="print 'REQUEST <time.time()>' on stdout as each chat request arrives")
    args = parser.parse_args(argv)
    items: list[Any] = []
    by_model: dict[str, list[Any]] = {}
    if args.script:
        with open(args.script, encoding="utf-8") as fh:
            items = json.load(fh)
        if isinstance(items, dict):  # {"*": [...], "<model>": [...]}: replies per model name (script_for)
            by_model = {str(k): v for k, v in items.items() if k != "*"}
            items = items.get("*", [])
        if not isinstance(items, list) or not all(isinstance(v, list) for v in by_model.values()):
            parser.error(f"{args.script}: expected a JSON list of replies, or an object of such lists by model")
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):  # before the URL is printed: a caller may stop us at once
        signal.signal(sig, lambda *_: done.set())
    server = StubServer(args.host, args.port)
    server.keep_requests = False
    server.auto_ls = args.auto_ls
    if args.log_arrivals:
        server.on_arrival = lambda t: print(f"REQUEST {t:.6f}", flush=True)
    server.start()
    server.script(*items)
    for model, replies in by_model.items():
        server.script_for(model, *replies)
    print(server.url, flush=True)
    try:
        while not done.wait(0.5):
            pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
