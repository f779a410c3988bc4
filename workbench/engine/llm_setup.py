"""Import and configure litellm once, lazily, the way DESIGN §2 measured it must be.

litellm takes seconds to import, so nothing imports it at module level: callers use
``import_litellm()`` (thread-safe, cached), and the window calls ``warm_up()`` from its model worker
thread at start so the first real call is fast.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from types import ModuleType
from typing import Any

log = logging.getLogger(__name__)

_lock = threading.RLock()
_litellm: ModuleType | None = None
_warmed = False

# Modules a first streamed ``acompletion`` imports; importing them up front moves that cost into
# the warm-up. Missing ones (another litellm version) are skipped.
_STREAMING_MODULES = (
    "litellm.litellm_core_utils.streaming_handler",
    "litellm.litellm_core_utils.logging_callback_manager",
    "litellm.litellm_core_utils.default_encoding",
    "litellm.llms.openai.openai",
    "litellm.llms.openai.chat.gpt_transformation",
    "litellm.llms.openai_like.dynamic_config",
    "litellm.types.litellm_core_utils.streaming_chunk_builder_utils",
    "litellm.cost_calculator",
)


def prepare_litellm_env() -> None:
    """Set the environment litellm reads at import time.

    Both values are forced, not ``setdefault``: with ``LITELLM_MODE`` unset (or ``DEV``) the import runs
    ``load_dotenv()`` on the *current folder's* ``.env`` — a workspace could then supply (or replace) API
    keys behind the user's back. A workspace ``.env`` must never supply a key, so no inherited value may
    turn that back on. ``LITELLM_LOCAL_MODEL_COST_MAP`` stops the price-list fetch that adds ~5 s to the
    import when the network does not answer.
    """
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    os.environ["LITELLM_MODE"] = "PRODUCTION"


def _configure(litellm: ModuleType) -> None:
    """Quiet, offline-friendly defaults: no banners, unsupported params dropped, no network callbacks."""
    litellm.suppress_debug_info = True
    litellm.drop_params = True
    litellm.set_verbose = False
    # Older litellm versions had an opt-out telemetry flag; newer ones ship it off. Either way, off.
    if hasattr(litellm, "telemetry"):
        try:
            litellm.telemetry = False
        except Exception:  # noqa: BLE001 - a read-only attribute is fine: nothing to turn off
            pass
    # Callbacks ship empty; clear them anyway so nothing (an env-configured logger) reports calls out.
    for name in (
        "callbacks",
        "input_callback",
        "success_callback",
        "failure_callback",
        "service_callback",
        "_async_success_callback",
        "_async_failure_callback",
        "_async_input_callback",
    ):
        value = getattr(litellm, name, None)
        if isinstance(value, list):
            value.clear()
    # With no callbacks there is nobody to log to, yet litellm's per-stream success logging still
    # recomputes cost and tokens over the whole history (~3 ms a call at 200 messages, measured in
    # benchmarks/harness_overhead.py). The workbench prices calls itself (litellm_model.py).
    litellm.disable_streaming_logging = True
    _skip_idle_success_logging(litellm)
    _skip_idle_cost_calculation(litellm)
    _build_final_response_inline(litellm)
    # litellm logs a WARNING per unpriced model and per retry; the workbench reports those itself.
    for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "litellm"):
        logging.getLogger(name).setLevel(logging.ERROR)


def _has_callbacks(litellm: ModuleType) -> bool:
    names = ("callbacks", "success_callback", "_async_success_callback")
    return any(getattr(litellm, name, None) for name in names)


def _skip_idle_success_logging(litellm: ModuleType) -> None:
    """Skip litellm's end-of-stream success dispatch while no callback would receive it.

    litellm (1.110) schedules ``Logging.dispatch_success_handlers`` as a task on the caller's loop at
    the end of every async stream even with no callback configured: it recomputes the cost and counts
    the whole history's tokens (~3 ms a call at 200 messages), stealing the engine's loop. The
    workbench prices calls itself. If anyone registers a callback, the original runs as before.
    """
    try:
        from litellm.litellm_core_utils.litellm_logging import Logging
    except ImportError:  # a litellm without this hook: nothing to skip
        return
    original = getattr(Logging, "dispatch_success_handlers", None)
    if original is None or getattr(original, "_workbench_skips_idle", False):
        return

    async def dispatch(self: Any, *args: Any, **kwargs: Any) -> Any:
        if _has_callbacks(litellm):
            return await original(self, *args, **kwargs)
        return None

    dispatch._workbench_skips_idle = True  # type: ignore[attr-defined]
    Logging.dispatch_success_handlers = dispatch  # type: ignore[method-assign]


def _skip_idle_cost_calculation(litellm: ModuleType) -> None:
    """Skip litellm's own pricing of each response while no callback would receive the figure.

    litellm (1.110) prices every call twice for its logging payload and ``_hidden_params``: once on the
    stream wrapper before a byte is read (there is no usage yet, so it looks the model up for nothing)
    and once on the rebuilt response at the end. The workbench reads neither; it prices the call once
    from the final usage (``LiteLLMModel._cost``, ``litellm.cost_per_token``). Measured with callgrind
    (instructions are repeatable on a shared machine): 2.5 % of a streamed call's work. With a
    callback registered, the original runs as before.
    """
    try:
        from litellm.litellm_core_utils.litellm_logging import Logging
    except ImportError:
        return
    original = getattr(Logging, "response_cost_calculator", None)
    if original is None or getattr(original, "_workbench_skips_idle", False):
        return

    def response_cost_calculator(self: Any, *args: Any, **kwargs: Any) -> Any:
        if _has_callbacks(litellm):
            return original(self, *args, **kwargs)
        return None

    response_cost_calculator._workbench_skips_idle = True  # type: ignore[attr-defined]
    Logging.response_cost_calculator = response_cost_calculator  # type: ignore[method-assign]


def _build_final_response_inline(litellm: ModuleType) -> None:
    """Rebuild a finished stream's response on the calling loop, not on a worker thread.

    litellm (1.110) hands ``stream_chunk_builder`` (a few hundred microseconds for a reply's chunks) to
    anyio's thread pool at the end of every stream, and looks up ``run_sync``'s signature each time; the
    two thread hand-offs cost more than the work. In the window the stream already runs on the model's
    own worker loop (``ThreadedModel``), so nothing waits on it. Measured on the 200-message call of
    ``benchmarks/harness_overhead.py``'s session: 12.3 -> 11.7 ms a call (wall), 10.9 -> 10.2 ms CPU.
    Patched only when litellm's method is the one this was written against (its code names
    ``asyncify`` and ``stream_chunk_builder``); any other version keeps its own.
    """
    try:
        from litellm.litellm_core_utils.streaming_handler import CustomStreamWrapper
    except ImportError:
        return
    original = getattr(CustomStreamWrapper, "_async_build_complete_streaming_response", None)
    code = getattr(original, "__code__", None)
    if original is None or getattr(original, "_workbench_inline", False) or code is None:
        return
    if not {"asyncify", "stream_chunk_builder", "_builder_failure_response"} <= set(code.co_names):
        return

    async def build(self: Any) -> Any:
        try:
            return litellm.stream_chunk_builder(chunks=self.chunks, messages=self.messages,
                                                logging_obj=self.logging_obj,
                                                count_prompt_tokens=self.count_prompt_tokens)
        except Exception as e:  # noqa: BLE001 - as litellm's own: a failed rebuild is reported, not raised
            return self._builder_failure_response(e)

    build._workbench_inline = True  # type: ignore[attr-defined]
    CustomStreamWrapper._async_build_complete_streaming_response = build  # type: ignore[method-assign]


def _freeze_import_heap() -> None:
    """Move everything alive after litellm's import out of the garbage collector's sight (``gc.freeze``).

    litellm and the openai SDK leave ~200 MB of long-lived objects (pydantic classes, price tables).
    Every full collection walked all of them, and a model call at 1,000 messages of history allocates
    enough to trigger collections often: 27.0 -> 20.5 ms a call (wall) at 1,000 messages, no change at
    200. Frozen objects are still freed by reference counting; only cycles among them are never
    collected, and module-level objects live for the whole process anyway.
    """
    import gc

    gc.collect()
    gc.freeze()


def import_litellm() -> ModuleType:
    """Import litellm once (thread-safe), with the environment and settings above."""
    global _litellm
    if _litellm is not None:
        return _litellm
    with _lock:
        if _litellm is None:
            prepare_litellm_env()
            started = time.perf_counter()
            import litellm

            _configure(litellm)
            _freeze_import_heap()
            _litellm = litellm
            log.debug("litellm imported in %.2f s", time.perf_counter() - started)
    return _litellm


_background: threading.Thread | None = None
# Set while no warm-up's mock call is in flight. litellm imports modules lazily inside ``acompletion``
# (on its executor threads); a real call made while the warm-up's own call is importing them can see
# a partially initialised module ("cannot import name ... partially initialized module"). A first
# call therefore waits for a running warm-up to end (``wait_for_warm_up``).
_warm_idle = threading.Event()
_warm_idle.set()


def import_in_background() -> None:
    """Start importing litellm on a daemon thread, so the seconds it takes overlap the caller's set-up.

    ``workbench run`` calls this as soon as it knows the model is not the demo one: the import then runs
    while the config, the store, the middleware, the AGENTS.md files and the token encoder are read
    (much of that is file and SQLite I/O, which lets the import thread run), instead of after all of
    it at the first model call. Idempotent; ``import_litellm`` waits for the thread through its lock.
    """
    global _background
    if _litellm is not None or _background is not None:
        return
    with _lock:
        if _litellm is not None or _background is not None:
            return

        def run() -> None:
            try:
                import_litellm()
            except Exception:  # noqa: BLE001 - the first real call imports again and reports the error
                log.debug("background litellm import failed", exc_info=True)

        _background = threading.Thread(target=run, name="workbench-import-litellm", daemon=True)
        _background.start()


def warm_up() -> float:
    """Import litellm and the modules its streaming path needs; returns the seconds it took.

    Safe from any thread; inside a running event loop use ``warm_up_async`` instead.
    """
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(warm_up_async())
    raise RuntimeError("warm_up() called inside a running event loop; await warm_up_async() instead")


async def warm_up_async() -> float:
    """Like ``warm_up``, on the current loop (the import blocks it: run it on a worker loop).

    Streams one ``mock_response`` call (no network) so the lazy imports inside ``acompletion`` and
    the stream wrapper happen now rather than on the user's first message.
    """
    started = time.perf_counter()
    litellm = import_litellm()
    if _warmed:
        return time.perf_counter() - started
    _warm_idle.clear()
    try:
        await _warm(litellm)
    finally:
        _warm_idle.set()
    return time.perf_counter() - started


async def wait_for_warm_up(timeout: float = 60.0) -> None:
    """Wait (without blocking the loop) until no warm-up call is in flight; see ``_warm_idle``."""
    import asyncio

    deadline = time.monotonic() + timeout
    while not _warm_idle.is_set() and time.monotonic() < deadline:
        await asyncio.sleep(0.01)


async def _warm(litellm: ModuleType) -> None:
    """The warm-up itself: the streaming modules, then one mock call (``warm_up_async``)."""
    global _warmed
    import importlib

    with _lock:
        for module in _STREAMING_MODULES:
            try:
                importlib.import_module(module)
            except Exception:  # noqa: BLE001 - best effort: a renamed module only costs speed
                log.debug("warm-up: could not import %s", module)
    try:
        response = await litellm.acompletion(
            model="openai/gpt-4o-mini",
            messages=[{"role": "user", "content": "warm up"}],
            mock_response="ok",
            stream=True,
            stream_options={"include_usage": True},
        )
        async for _ in response:
            pass
        litellm.cost_per_token(model="openai/gpt-4o-mini", prompt_tokens=1, completion_tokens=1)
    except Exception as exc:  # noqa: BLE001 - warm-up must never break start-up
        log.debug("warm-up: mock stream failed: %s", exc)
    _freeze_import_heap()  # the modules the first call imported lazily, too
    _warmed = True
