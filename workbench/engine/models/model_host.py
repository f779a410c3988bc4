"""The model host: a child process that makes the window's litellm calls (``process_model.py``).

Why a process (issue 9 and issue 11's latency targets): litellm spends ~100 µs of Python per streamed
chunk (pydantic objects, its stream wrapper) and its import leaves ~200 MB of objects. On a thread of
the window's process that work takes turns at the one GIL with the GUI thread, and the window stalls
for a few ms at every hand-off — 20–40 ms at the 99th percentile with eight sub-agents streaming. Here
it runs on another interpreter; the window receives only finished, batched items.

The protocol (both ends are this package's code; nothing else writes to these pipes): frames of a
4-byte big-endian length and a pickle, on the host's stdin (commands) and stdout (replies).

- ``("stream", id, spec, request)``: build ``LiteLLMModel(**spec)`` and stream ``request``; replies
  ``("item", id, ModelDelta | ModelResponse)``... then ``("done", id)`` or
  ``("error", id, (message, retryable, status))``.
  While a stream runs, ``("alive", id)`` every ``ALIVE_EVERY`` seconds (it may have nothing to forward).
- ``("cancel", id)``: stop that stream (the consumer went away); no reply.
- ``("ping", id)``: replies ``("pong", id)`` (a client checks a shared host answers before it uses it).
- ``("warm", id, model_name)``: import and warm litellm; replies
  ``("warmed", id, (seconds, window, prices))`` with the model's input window and price per token from
  litellm's model info (None where it has none; ``engine/model_info.py`` keeps them in the window).

The host ends when its stdin closes — when the window exits, however it exits (a ``kill -9`` too):
no model call outlives the app. The API key travels inside ``spec`` on the pipe, never in the host's
environment or command line, where another process could read it.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import struct
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, BinaryIO

#: A frame's header: the length of the pickle that follows (the pipes here and the shared host's socket).
FRAME_HEADER = struct.Struct(">I")


def switched_on(variable: str) -> bool:
    """Whether an on-by-default switch such as ``WORKBENCH_MODEL_PROCESS`` is on (0/off/false/no: off)."""
    return os.environ.get(variable, "1").strip().lower() not in ("0", "off", "false", "no")


def encode_frame(message: Any) -> bytes:
    """``message`` as one frame: its header and its pickle."""
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return FRAME_HEADER.pack(len(data)) + data


def write_frame(out: BinaryIO, message: Any) -> None:
    """One framed pickle (the caller serialises writers)."""
    out.write(encode_frame(message))
    out.flush()


def read_frame(stream: BinaryIO) -> Any | None:
    """The next framed message, or None at the end of the stream (or a torn frame)."""
    head = stream.read(FRAME_HEADER.size)
    if len(head) < FRAME_HEADER.size:
        return None
    (size,) = FRAME_HEADER.unpack(head)
    data = stream.read(size)
    if len(data) < size:
        return None
    return pickle.loads(data)  # noqa: S301 - our own parent process writes this pipe


#: Seconds between a streaming call's "alive" frames.
ALIVE_EVERY = 10.0


class Connection:
    """One client of the host — the window's pipe, or one ``workbench run`` on the shared host's socket —
    with its calls, each an asyncio task; ``send`` takes a reply to it."""

    def __init__(self, send: Callable[[Any], None], batch_interval: float = 0.03) -> None:
        self.send = send
        self.batch_interval = batch_interval
        self.calls: dict[int, asyncio.Task[None]] = {}

    def handle(self, message: Any) -> None:
        kind, call_id = message[0], message[1]
        loop = asyncio.get_running_loop()
        if kind == "stream":
            self.calls[call_id] = loop.create_task(self._stream(call_id, message[2], message[3]))
        elif kind == "cancel":
            task = self.calls.pop(call_id, None)
            if task is not None:
                task.cancel()
        elif kind == "warm":
            loop.create_task(self._warm(call_id, message[2]))
        elif kind == "ping":  # a new client asks whether this host still answers (a stopped one does not)
            self.send(("pong", call_id))

    def close(self) -> None:
        """The client is gone: no call of its goes on (it cannot read the answer anyway)."""
        for task in self.calls.values():
            task.cancel()
        self.calls.clear()

    async def _stream(self, call_id: int, spec: dict[str, Any], request: Any) -> None:
        from workbench.engine.models.litellm_model import LiteLLMModel
        from workbench.engine.models.threaded import pump_batched
        from workbench.errors import ModelError

        def post(kind: str, payload: Any = None) -> None:
            if kind == "item":
                self.send(("item", call_id, payload))
            elif kind == "done":
                self.send(("done", call_id))
            elif call_id in self.calls:  # an error nobody cancelled
                exc = payload
                if isinstance(exc, ModelError):
                    self.send(("error", call_id, (str(exc), exc.retryable, exc.status)))
                else:
                    self.send(("error", call_id, (f"{spec.get('model')}: {type(exc).__name__}: {exc}", False, None)))

        async def alive() -> None:  # a call may stream for minutes with nothing to forward (a tool call's
            while True:             # arguments): the client hears it is alive (``process_model``'s silence limit)
                await asyncio.sleep(ALIVE_EVERY)
                self.send(("alive", call_id))

        beat = asyncio.get_running_loop().create_task(alive())
        try:
            await pump_batched(LiteLLMModel(**spec), request, post, self.batch_interval)
        except asyncio.CancelledError:
            pass
        finally:
            beat.cancel()
            self.calls.pop(call_id, None)

    async def _warm(self, call_id: int, model_name: str) -> None:
        from workbench.engine import llm_setup
        from workbench.engine.model_info import look_up

        started = time.perf_counter()
        try:
            await llm_setup.warm_up_async()
        except Exception:  # noqa: BLE001 - a warm-up is an optimisation; the first call reports errors
            pass
        window, prices = None, None
        try:
            if model_name:
                window, prices = look_up(llm_setup.import_litellm(), model_name)
        except Exception:  # noqa: BLE001 - always answer: the client waits; the first call reports a broken litellm
            pass
        self.send(("warmed", call_id, (time.perf_counter() - started, window, prices)))


def main(argv: list[str] | None = None) -> int:
    """Run the window's host until stdin closes; with ``--serve PATH [--idle S]``, the shared host of
    ``workbench run`` commands on that socket (``shared_host.py``) until it has been idle S seconds."""
    os.environ["WORKBENCH_MODEL_HOST"] = "1"
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--serve"] and len(args) >= 2:
        from pathlib import Path

        from workbench.engine.llm_setup import import_in_background
        from workbench.engine.models.shared_host import DEFAULT_IDLE, serve

        # The host exists to make model calls: litellm's import (seconds) starts now, while the command
        # that started it connects and sends its warm-up and its first call, not when they arrive.
        import_in_background()
        idle = float(args[3]) if len(args) >= 4 and args[2] == "--idle" else DEFAULT_IDLE
        asyncio.run(serve(Path(args[1]), idle))
        return 0
    commands, replies = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing but frames may reach the reply pipe
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)

    def send(message: Any) -> None:
        try:
            write_frame(replies, message)
        except (BrokenPipeError, OSError):  # the window is gone: so are we
            os._exit(0)

    connection = Connection(send)

    def read() -> None:
        while True:
            try:
                message = read_frame(commands)
            except Exception:  # noqa: BLE001 - a torn or unreadable frame: the parent is broken or gone
                message = None
            if message is None:
                os._exit(0)  # the window closed (or died): end now, mid-call or not
            loop.call_soon_threadsafe(connection.handle, message)

    threading.Thread(target=read, name="model-host-commands", daemon=True).start()
    loop.run_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
