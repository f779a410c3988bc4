"""``ProcessModel``: a litellm model whose calls run in the model host process (``model_host.py``).

The window's models use it (``Session.open(threaded_model=True)``): the parent's and every sub-agent's.
One host per process serves them all (``ModelHost.shared``), started at the first warm-up or call and
ended with the process (its stdin closes). What crosses back are the items ``ThreadedModel`` would
yield — text batched every ~30 ms, then one ``ModelResponse`` — delivered by one reader thread with
``call_soon_threadsafe`` to the loop that asked, so this process does no per-chunk work at all.

Failures keep the ``Model`` contract: the provider's errors come back as ``ModelError`` with the same
message, retryable flag and status; a host that dies mid-call gives a retryable ``ModelError`` naming
it, and the next call starts a new host. ``WORKBENCH_MODEL_PROCESS=0`` makes the window keep its calls
in-process on a worker thread (``ThreadedModel``) instead.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import itertools
import logging
import os
import socket
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Callable
from queue import SimpleQueue
from typing import Any, BinaryIO

from workbench.engine.messages import ModelDelta, ModelRequest, ModelResponse
from workbench.engine.models.litellm_model import LiteLLMModel
from workbench.engine.models.model_host import read_frame, switched_on, write_frame
from workbench.engine.models.threaded import with_queued_deltas
from workbench.engine.usage import Usage
from workbench.errors import ModelError

log = logging.getLogger(__name__)


def enabled() -> bool:
    """Whether the window's model calls go to the model host (``WORKBENCH_MODEL_PROCESS``, default on)."""
    return switched_on("WORKBENCH_MODEL_PROCESS")


def host_command() -> list[str]:
    """How to start the host: this interpreter, or the bundle's own executable (PyInstaller)."""
    if getattr(sys, "frozen", False):
        return [sys.executable, "__model-host"]
    return [sys.executable, "-m", "workbench.engine.models.model_host"]


_CLOSE = object()  # the writer thread's last item: close the pipe to the host


def package_path() -> str:
    """The folder this very ``workbench`` package was imported from (a checkout on sys.path too): a
    host process imports the same code."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def with_package_path(env: dict[str, str]) -> dict[str, str]:
    """``env`` for a host process: ``package_path()`` first on its PYTHONPATH, so it imports the same code."""
    return {**env, "PYTHONPATH": os.pathsep.join([package_path(), *filter(None, [env.get("PYTHONPATH")])])}


class ModelHost:
    """The client end of one model host: the window's child process (``shared()``: its stdin and
    stdout), or this user's shared host of ``workbench run`` commands (``shared_daemon()``: a socket)."""

    _shared: ModelHost | None = None
    _daemon: ModelHost | None = None
    _shared_lock = threading.Lock()

    @classmethod
    def shared(cls) -> ModelHost:
        """This process's own host, started now if none runs (or the last one died)."""
        with cls._shared_lock:
            if cls._shared is None or not cls._shared.alive:
                try:
                    cls._shared = cls.spawn()
                except OSError as exc:  # no interpreter or bundle to start: say so, as a model error
                    raise ModelError(f"the model process could not be started ({' '.join(host_command())}): "
                                     f"{exc}", retryable=True) from exc
            return cls._shared

    @classmethod
    def shared_daemon(cls) -> ModelHost:
        """A connection to this user's shared host (``shared_host.py``), started now if none runs;
        ModelError when it cannot be had."""
        with cls._shared_lock:
            if cls._daemon is None or not cls._daemon.alive:
                from workbench.engine.models import shared_host

                try:
                    connected = shared_host.connect()
                except OSError as exc:  # its folder, its lock: report, and the caller goes in-process
                    raise ModelError(f"the shared model host could not be reached: {exc}", retryable=True) from exc
                if connected is None:
                    raise ModelError("the shared model host could not be started", retryable=True)
                sock, pid = connected
                host = cls(sock.makefile("rb"), sock.makefile("wb"), pid, closer=functools.partial(_hang_up, sock))
                if not host.ping(PING_SECONDS):  # it accepts connections but answers nothing: wedged, stopped
                    host.abandon(f"did not answer within {PING_SECONDS:g} s")
                    raise ModelError(f"the shared model host (pid {pid}) did not answer within {PING_SECONDS:g} s",
                                     retryable=True)
                cls._daemon = host
            return cls._daemon

    @classmethod
    def spawn(cls) -> ModelHost:
        """Start a host as this process's child: it ends when this process does (its stdin closes)."""
        home = os.path.expanduser("~")
        process = subprocess.Popen(host_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None,
                                   env=with_package_path(dict(os.environ)), cwd=home if os.path.isdir(home) else "/",
                                   close_fds=True)
        assert process.stdout is not None and process.stdin is not None
        return cls(process.stdout, process.stdin, process.pid, process=process)

    def __init__(self, replies: BinaryIO, commands: BinaryIO, pid: int, *,
                 process: subprocess.Popen[bytes] | None = None, closer: Callable[[], None] | None = None) -> None:
        self._ids = itertools.count(1)
        # Frames go out on a writer thread: pickling a long history (~1.5 ms at 1,000 messages) and a pipe
        # that is full while the host is busy (importing litellm) never hold up the caller — the GUI thread.
        self._outbox: SimpleQueue[Any] = SimpleQueue()
        self._lock = threading.Lock()
        # call id -> (the loop that waits, its queue) for streams; call id -> future for warm-ups
        self._streams: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Queue[tuple[str, Any]]]] = {}
        self._warms: dict[int, tuple[concurrent.futures.Future[float], str]] = {}
        self._dead = False
        self._pings: dict[int, threading.Event] = {}
        self._replies, self._commands, self.pid = replies, commands, pid
        self.process = process
        self._closer = closer
        self._reader = threading.Thread(target=self._read, name="workbench-model-host", daemon=True)
        self._reader.start()
        self._writer = threading.Thread(target=self._write, name="workbench-model-host-writer", daemon=True)
        self._writer.start()

    @property
    def alive(self) -> bool:
        return not self._dead and (self.process is None or self.process.poll() is None)

    def send(self, message: Any) -> None:
        """Queue a frame for the host (never waits); OSError once the host is known to be gone."""
        if not self.alive:
            raise OSError("the model process has stopped")
        self._outbox.put(message)

    def _write(self) -> None:
        while True:
            message = self._outbox.get()
            if message is _CLOSE:
                break
            try:
                write_frame(self._commands, message)
            except (OSError, ValueError):  # the host is gone: the reader sees its end and fails the calls
                break
        with contextlib.suppress(OSError, ValueError):
            self._commands.close()

    # --- calls ------------------------------------------------------------------------------------------
    def open_stream(self, spec: dict[str, Any], request: ModelRequest) -> tuple[int, asyncio.Queue[tuple[str, Any]]]:
        call_id = next(self._ids)
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        with self._lock:
            if self._dead:
                raise ModelError(f"{spec.get('model')}: the model process has stopped", retryable=True)
            self._streams[call_id] = (asyncio.get_running_loop(), queue)
        try:
            self.send(("stream", call_id, spec, request))
        except (OSError, ValueError) as exc:
            self.close_stream(call_id)
            raise ModelError(f"{spec.get('model')}: the model process cannot be reached ({exc})",
                             retryable=True) from exc
        return call_id, queue

    def close_stream(self, call_id: int, *, cancel: bool = False) -> None:
        with self._lock:
            known = self._streams.pop(call_id, None) is not None
        if cancel and known and not self._dead:
            try:
                self.send(("cancel", call_id))
            except (OSError, ValueError):
                pass

    def ping(self, timeout: float) -> bool:
        """Whether the host answers within ``timeout`` seconds."""
        answered = threading.Event()
        call_id = next(self._ids)
        with self._lock:
            self._pings[call_id] = answered
        try:
            self.send(("ping", call_id))
        except (OSError, ValueError):
            return False
        return answered.wait(timeout)

    def warm(self, model_name: str) -> concurrent.futures.Future[float]:
        future: concurrent.futures.Future[float] = concurrent.futures.Future()
        call_id = next(self._ids)
        with self._lock:
            self._warms[call_id] = (future, model_name)
        try:
            self.send(("warm", call_id, model_name))
        except (OSError, ValueError) as exc:
            with self._lock:
                self._warms.pop(call_id, None)
            future.set_exception(ModelError(f"the model process cannot be reached ({exc})", retryable=True))
        return future

    def stop(self, timeout: float = 5.0) -> None:
        """Close the connection: the window's host exits at once; a shared host cancels this process's
        calls and goes on serving others."""
        self._outbox.put(_CLOSE)  # what is queued goes first, then the pipe closes
        self._writer.join(timeout)
        if self._closer is not None:
            with contextlib.suppress(OSError):
                self._closer()
        if self.process is not None:
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout)

    # --- the reader thread ------------------------------------------------------------------------------
    def _read(self) -> None:
        out = self._replies
        while True:
            try:
                message = read_frame(out)
            except Exception:  # noqa: BLE001 - a torn frame: treat as the host's end
                log.debug("model host: unreadable reply", exc_info=True)
                message = None
            if message is None:
                break
            kind, call_id = message[0], message[1]
            if kind == "pong":
                with self._lock:
                    answered = self._pings.pop(call_id, None)
                if answered is not None:
                    answered.set()
                continue
            if kind == "warmed":
                with self._lock:
                    future, model_name = self._warms.pop(call_id, (None, ""))
                if future is not None and not future.done():
                    from workbench.engine import model_info

                    seconds, window, prices = message[2]
                    model_info.remember(model_name, window, prices)  # first: a waiter may ask at once
                    future.set_result(seconds)
                continue
            with self._lock:
                target = self._streams.get(call_id)
            if target is not None:
                self._post(target, (kind, message[2] if len(message) > 2 else None))
        self._ended()

    @staticmethod
    def _post(target: tuple[asyncio.AbstractEventLoop, asyncio.Queue[tuple[str, Any]]], item: tuple[str, Any]) -> None:
        loop, queue = target
        try:
            loop.call_soon_threadsafe(queue.put_nowait, item)
        except RuntimeError:  # that loop has closed: nobody waits
            pass

    def _ended(self) -> None:
        """The host's stdout closed: it exited or died. Every open call fails (retryable), once."""
        code = self.process.poll() if self.process is not None else None
        self._fail_all(f"the model process ended (exit code {code})" if code is not None else
                       "the model process ended")

    def abandon(self, why: str) -> None:
        """The host stopped answering (wedged, or stopped with SIGSTOP): this connection ends as if it had
        died — its calls fail, retryably — and a host process of this app's own is killed, so the next
        call starts another."""
        if self.process is not None:
            with contextlib.suppress(OSError):
                self.process.kill()
        self._fail_all(f"the model process {why}")

    def _fail_all(self, why: str) -> None:
        if self._closer is not None:
            with contextlib.suppress(OSError):
                self._closer()
        with self._lock:
            self._dead = True
            streams, self._streams = dict(self._streams), {}
            warms, self._warms = dict(self._warms), {}
            self._pings.clear()
        for target in streams.values():
            self._post(target, ("ended", why))
        for future, _ in warms.values():
            if not future.done():
                future.set_exception(ModelError(why, retryable=True))


#: Seconds a model host may stay silent past the inner model's own timeout before it counts as wedged.
SILENCE_MARGIN = 30.0
#: Seconds a shared host has to answer a new connection's ping (it may be importing litellm as it starts).
PING_SECONDS = 10.0


class ProcessModel:
    """A ``Model`` that runs ``inner`` (a ``LiteLLMModel``) in the model host; see the module."""

    def __init__(self, inner: LiteLLMModel, *, host: Callable[[], ModelHost] | None = None,
                 fallback: bool = False) -> None:
        self.inner = inner  # estimate_usage and anything else looked through (models/base.py)
        self.name = inner.name
        self._host = host or ModelHost.shared
        # A host that cannot be had (the shared one would not start): call in-process instead of failing.
        self._fallback = fallback
        self._in_process = False  # a shared host stopped answering: later calls run in this process
        self._warm: concurrent.futures.Future[float] | None = None

    def __repr__(self) -> str:
        return f"ProcessModel({self.inner!r})"

    def _spec(self) -> dict[str, Any]:
        m = self.inner
        return {"model": m.model, "api_base": m.api_base, "api_key": m.api_key, "max_retries": m.max_retries,
                "backoff_base": m.backoff_base, "timeout": m.timeout, "extra": dict(m.extra)}

    def warm_up(self) -> concurrent.futures.Future[float]:
        """Start the host and have it import and warm litellm (and look up this model's window and
        price); one warm-up per model while it lasts."""
        if self._warm is not None and (not self._warm.done() or _succeeded(self._warm)):
            return self._warm
        try:
            self._warm = self._host().warm(self.name)
        except ModelError as exc:
            self._warm = concurrent.futures.Future()
            self._warm.set_exception(exc)
        from workbench.engine import model_info

        model_info.expect(self.name, self._warm)
        return self._warm

    def warm_up_in_background(self) -> None:
        """``warm_up`` on a daemon thread: connecting to a shared host may start it (a few hundred ms).
        What waits for the model's facts (``model_info.settled``) waits for it from now on."""
        from workbench.engine import model_info

        relay: concurrent.futures.Future[None] = concurrent.futures.Future()
        model_info.expect(self.name, relay)

        def run() -> None:
            try:
                self.warm_up().add_done_callback(lambda _: relay.done() or relay.set_result(None))
            except Exception:  # noqa: BLE001 - the first call reports what is wrong
                log.debug("model warm-up failed", exc_info=True)
                relay.set_result(None)

        threading.Thread(target=run, name="workbench-model-warm-up", daemon=True).start()

    def _silence_limit(self, streaming: bool) -> float:
        """How long a call may go without a word from the host before it counts as wedged: the inner
        model's read timeout with a margin, while it streams; before its first item, every try and
        backoff the inner model may make (``LiteLLMModel``'s retries happen in the host)."""
        m = self.inner
        if streaming:
            return m.timeout + SILENCE_MARGIN
        tries = m.max_retries + 1
        return tries * (m.timeout + SILENCE_MARGIN) + sum(m.backoff_base * 2 ** i for i in range(tries)) * 2

    def close(self, timeout: float = 5.0) -> None:
        """Nothing of its own to close: the host is shared by the process's models and ends with it."""

    def estimate_usage(self, request: ModelRequest, text: str) -> Usage:
        """A call cut mid-stream, estimated (``models/base.estimated_usage``) without importing litellm
        here: tiktoken counts, priced with what the host's warm-up found (unpriced before it)."""
        return self.inner._usage(_RememberedPrices(), None, request, text, "", ())  # noqa: SLF001

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelDelta | ModelResponse]:
        """The host's stream of ``request``. A host that dies before the first item is replaced and the
        call made again once (nothing was shown, so nothing is repeated); after that, or mid-answer, the
        call fails with a retryable ``ModelError`` naming it."""
        request = request.replace(meta={})  # bookkeeping for the engine, never sent
        for attempt in (1, 2):
            if not self._in_process:
                try:
                    host = await asyncio.to_thread(self._host) if self._fallback else self._host()
                except ModelError as exc:
                    if not self._fallback:
                        raise
                    log.warning("%s; calling in this process", exc)
                    self._in_process = True  # and after: no later call waits for that host again
            if self._in_process:  # a shared host that could not be had, or went silent: this process calls
                async for item in self.inner.stream(request):
                    yield item
                return
            if self._warm is not None and self._warm.done() and not _succeeded(self._warm):
                # the warm-up died with an earlier host: ask this one, so the model's window (C7) and
                # price (B2, a call cut mid-stream) are known from the next step on
                self.warm_up()
            call_id, queue = host.open_stream(self._spec(), request)
            finished = yielded = False
            try:
                while True:
                    limit = self._silence_limit(yielded)
                    try:
                        kind, payload = await _next(queue, limit)
                    except asyncio.TimeoutError:
                        # nothing for longer than the call itself may take: the host is wedged (or stopped).
                        # A shared one is left for this process's later calls too (R6: no call waits for ever)
                        host.abandon(f"sent nothing for {limit:g} s")
                        self._in_process = self._fallback
                        if attempt == 1 and not yielded:
                            log.warning("%s: the model process sent nothing for %g s; calling again", self.name,
                                        limit)
                            break
                        raise ModelError(f"{self.name}: the model process sent nothing for {limit:g} s",
                                         retryable=True) from None
                    if kind == "alive":  # the host is streaming, with nothing to forward yet
                        continue
                    if kind == "item":
                        yielded = True
                        yield with_queued_deltas(payload, queue) if isinstance(payload, ModelDelta) else payload
                    elif kind == "ended":
                        finished = True
                        if attempt == 1 and not yielded:
                            log.warning("%s: %s before its first item; calling again in a new one", self.name,
                                        payload)
                            break
                        raise ModelError(f"{self.name}: {payload}", retryable=True)
                    elif kind == "error":
                        finished = True
                        message, retryable, status = payload
                        raise ModelError(message, retryable=retryable, status=status)
                    else:
                        finished = True
                        return
            finally:
                host.close_stream(call_id, cancel=not finished)


async def _next(queue: asyncio.Queue[tuple[str, Any]], limit: float) -> tuple[str, Any]:
    """The next item from the host, or TimeoutError after ``limit`` seconds. Not ``asyncio.wait_for``: on
    3.11 it returns an item that arrives as the call is cancelled and drops the cancellation, so a Stop
    during a stream was lost and the call ran on (a test saw the run fail instead of stopping)."""
    get = asyncio.ensure_future(queue.get())
    try:
        done, _ = await asyncio.wait({get}, timeout=limit)
    finally:
        if not get.done():
            get.cancel()
    if not done:
        raise asyncio.TimeoutError
    return get.result()


def _hang_up(sock: socket.socket) -> None:
    """End a connection to a shared host for real: its two file objects keep the descriptor open after
    ``close``, so the host would not see the end (it ran an abandoned call on, and never idled out)."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()


def _succeeded(future: concurrent.futures.Future[Any]) -> bool:
    """Whether a finished warm-up answered (not failed, not cancelled: ``exception()`` raises for that)."""
    return not future.cancelled() and future.exception() is None


class _RememberedPrices:
    """Stands in for litellm in ``LiteLLMModel._usage``: ``cost_per_token`` from ``model_info``."""

    @staticmethod
    def cost_per_token(*, model: str, prompt_tokens: int, completion_tokens: int,
                       **_: Any) -> tuple[float, float]:
        from workbench.engine import model_info

        known = model_info.prices(model)
        if known is None:
            raise LookupError(f"no remembered price for {model}")  # priced as unknown, not remembered so
        return prompt_tokens * known[0], completion_tokens * known[1]


__all__ = ["ModelHost", "ProcessModel", "enabled", "host_command", "package_path", "with_package_path"]
