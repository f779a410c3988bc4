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
# the warm-up. Missing ones (another litellm version) are skipped. Not litellm's token counter
# (``default_encoding`` loads a tokenizer, ~0.1 s): a call whose provider reports usage never counts.
_STREAMING_MODULES = (
    "litellm.litellm_core_utils.streaming_handler",
    "litellm.litellm_core_utils.logging_callback_manager",
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
    _lighten_per_message_passes()
    _one_iterator_per_stream()
    _fast_request_body()
    # litellm logs a WARNING per unpriced model and per retry; the workbench reports those itself.
    for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "litellm"):
        logging.getLogger(name).setLevel(logging.ERROR)
        logging.getLogger(name).addFilter(_QuietIdleRebuild(litellm))


class _QuietIdleRebuild(logging.Filter):
    """Drop litellm's ERROR (and traceback) when its rebuild of a streamed response fails while no
    callback would receive that response: the workbench builds its answer from the stream itself, so the
    run is unaffected, yet ``workbench run`` printed tracebacks and ``error:`` lines for a run that
    succeeded (a provider's tool-call id holding a lone surrogate, which pydantic cannot serialize; R10).
    With a callback registered the record goes through as before."""

    _MARK = "stream_chunk_builder() - Exception occurred"

    def __init__(self, litellm: ModuleType) -> None:
        super().__init__()
        self._litellm = litellm

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            text = str(record.msg)
        except Exception:  # noqa: BLE001 - a record that cannot be read is let through
            return True
        return not (self._MARK in text and not _has_callbacks(self._litellm))


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
        # With ``include_usage`` litellm ends a stream through ``_finalize_completed_stream`` twice (once
        # to yield the usage chunk, once to stop) and rebuilt the whole response each time (~0.9 ms a
        # call). The chunks are the same both times; while no callback would receive the response, the
        # second time is given the first one's (kept on the wrapper: it ends with the stream).
        memo = getattr(self, "_workbench_built", None)
        if memo is not None and memo[0] == len(self.chunks) and not _has_callbacks(litellm):
            return memo[1]
        try:
            built = litellm.stream_chunk_builder(chunks=self.chunks, messages=self.messages,
                                                 logging_obj=self.logging_obj,
                                                 count_prompt_tokens=self.count_prompt_tokens)
        except Exception as e:  # noqa: BLE001 - as litellm's own: a failed rebuild is reported, not raised
            return self._builder_failure_response(e)
        if built is not None and not _has_callbacks(litellm):
            self._workbench_built = (len(self.chunks), built)
        return built

    build._workbench_inline = True  # type: ignore[attr-defined]
    CustomStreamWrapper._async_build_complete_streaming_response = build  # type: ignore[method-assign]


# --- litellm's passes over every message of every request (issue 9) ------------------------------------
#
# Before a request leaves, litellm (1.110) walks the whole history several times, each pass written for
# any input (pydantic messages, content parts, Gemini thought signatures, Anthropic tool search,
# developer messages, PDFs): copying every message to strip thought signatures, copying it again to drop
# None fields, validating each through pydantic models to look for tool-search calls, rebuilding the
# list to hoist developer messages, looking for PDF parts. At 1,000 messages that is ~5 ms a call on the
# executor thread ``acompletion`` waits for. Each pass below keeps litellm's function and gains a fast
# path taken only when the input is plain — dicts with string roles, string contents, dict tool calls —
# and the original would find nothing to do; anything else (a pydantic message, content parts, a
# developer message, a tool id that could be a tool search or carries a thought signature) runs the
# original. Each is patched only where litellm's function is the one this was written against (the
# names its code uses); another litellm version keeps its own.

_PLAIN_ROLES = frozenset({"system", "user", "assistant", "tool"})
#: litellm's Gemini thought-signature separator in tool-call ids (None: the patch is not installed).
_signature_separator: str | None = None


class OwnMessages(list):  # type: ignore[type-arg]
    """One call's messages, built for it alone by ``LiteLLMModel`` (no other code holds these dicts),
    with no tool-call id carrying a thought signature: litellm's copy of every message to strip the
    signatures has nothing to strip, and nobody to protect from its later in-place edits.

    ``clean``: every message is already in the form litellm's validation gives (``_fast_validate``): a
    dict with a plain role, no None field, tool calls a list of dicts, a user's content a string."""

    __slots__ = ("clean",)

    def __init__(self, messages: Any = (), clean: bool = False) -> None:
        super().__init__(messages)
        self.clean = clean


def own_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` (dicts made for this one call) as ``OwnMessages`` when no tool-call id in them carries
    a thought signature; else unchanged, and litellm strips the signatures as before."""
    sep = _signature_separator
    if sep is None:
        return messages
    clean = True
    for m in messages:
        call_id = m.get("tool_call_id")
        if call_id is not None and sep in call_id:
            return messages
        calls = m.get("tool_calls")
        if calls is not None and type(calls) is not list:
            clean = False
        for call in calls or ():
            if sep in call["id"]:
                return messages
            if type(call) is not dict:
                clean = False
        if clean:
            role = m.get("role")
            if type(m) is not dict or type(role) is not str or role not in _PLAIN_ROLES or None in m.values() \
                    or (role == "user" and type(m.get("content")) is not str):
                clean = False
    return OwnMessages(messages, clean)


def _names(code: Any) -> set[str]:
    """The global and attribute names a function's code uses, its comprehensions' included."""
    names = set(code.co_names)
    for const in code.co_consts:
        if hasattr(const, "co_names"):
            names |= _names(const)
    return names


def _install(module_name: str, attr: str, needs: set[str], make: Any, *also: str) -> bool:
    """``_install_on`` the module ``module_name``; ``also``: other modules that imported the same function."""
    import importlib

    try:
        module = importlib.import_module(module_name)
    except Exception:  # noqa: BLE001 - a litellm without this module keeps its own path
        return False
    others = []
    for other in also:
        try:
            others.append(importlib.import_module(other))
        except Exception:  # noqa: BLE001
            continue
    return _install_on(module, attr, needs, make, *others)


def _install_on(owner: Any, attr: str, needs: set[str], make: Any, *others: Any) -> bool:
    """Replace ``owner.attr`` (a module's function, or a class's own method) with ``make(original)`` when
    the original's code names ``needs`` (the version this was written against); ``others``: modules that
    imported the same function."""
    original = vars(owner).get(attr)
    if getattr(original, "_workbench_fast", False):
        return True  # installed already
    code = getattr(original, "__code__", None)
    if original is None or code is None or not needs <= _names(code):
        return False
    fast = make(original)
    fast._workbench_fast = True
    fast.__wrapped__ = original
    setattr(owner, attr, fast)
    for other in others:
        if getattr(other, attr, None) is original:
            setattr(other, attr, fast)
    return True


def _lighten_per_message_passes() -> None:
    """Install the fast paths described above (idempotent; each one only over the code it knows)."""
    _fast_thought_signatures()
    _install("litellm.utils", "validate_and_fix_openai_messages",
             {"jsonify_tools", "convert_to_dict", "cleanup_none_field_in_message",
              "validate_chat_completion_user_messages"}, _fast_validate, "litellm.main")
    _install("litellm.llms.openai.chat.gpt_transformation", "translate_developer_role_for_openai_compatible_endpoint",
             {"map_developer_role_to_system_role", "hoist_developer_messages_into_leading_system_message"},
             _fast_developer_roles, "litellm.llms.openai.openai")
    _fast_tool_search()
    _install("litellm.main", "messages_have_pdf_file_part", {"_has_pdf_file_part"}, _fast_pdf_parts)
    _fast_openai_transform()
    _install("litellm.litellm_core_utils.prompt_templates.file_id_utils", "update_messages_with_model_file_ids",
             {"convert_b64_uid_to_unified_uid", "is_base64_encoded_unified_file_id"}, _fast_file_ids,
             "litellm.main", "litellm.litellm_core_utils.prompt_templates.common_utils")


def _fast_thought_signatures() -> None:
    """``_remove_thought_signatures_from_messages`` copies every message (and call) of every request to
    strip Gemini signatures from tool-call ids, for any model but Gemini: an ``OwnMessages`` list was
    checked for signatures when it was built, and only this call holds its dicts, so it passes as it is."""
    global _signature_separator
    try:
        from litellm.litellm_core_utils.prompt_templates.factory import THOUGHT_SIGNATURE_SEPARATOR as sep
    except ImportError:
        return
    if not isinstance(sep, str) or not sep:
        return

    def make(original: Any) -> Any:
        def remove(messages: Any, thought_signature_separator: str) -> Any:
            if type(messages) is OwnMessages and thought_signature_separator == _signature_separator:
                return messages
            return original(messages, thought_signature_separator)
        return remove

    if _install("litellm.utils", "_remove_thought_signatures_from_messages",
                {"_process_assistant_message_tool_calls", "_process_tool_message_id"}, make):
        _signature_separator = sep


def _fast_validate(original: Any) -> Any:
    def validate_and_fix_openai_messages(messages: Any) -> Any:
        # The original: a role for each message, tool calls copied, None fields dropped (a new dict
        # each), user contents checked. A clean list of this call's own dicts is in that form already,
        # and its copies would protect nobody (issue 9: ~1 ms a call at 1,000 messages). For other
        # plain dicts it is one comprehension a message.
        if type(messages) is OwnMessages and messages.clean:
            messages.clean = False  # once: litellm may edit its dicts from here on (a retry validates again)
            return messages
        out = []
        for m in messages:
            if type(m) is not dict or not m.get("role"):
                return original(messages=messages)
            clean = {k: v for k, v in m.items() if v is not None}
            calls = clean.get("tool_calls")
            if calls:
                if type(calls) is not list or any(type(c) is not dict for c in calls):
                    return original(messages=messages)
                clean["tool_calls"] = [c.copy() for c in calls]
            if clean["role"] == "user" and type(clean.get("content")) is not str:
                return original(messages=messages)
            out.append(clean)
        return out
    return validate_and_fix_openai_messages


def _fast_file_ids(original: Any) -> Any:
    def update_messages_with_model_file_ids(messages: Any, model_id: Any = None,
                                            model_file_id_mapping: Any = None) -> Any:
        # The original maps the file ids of a user message's "file" content parts, and first imports
        # litellm's proxy server types to do it (0.07 s, on the first request's path: issue 9, cold
        # start). With every message a dict and no user content but text, it changes nothing and returns
        # the same list.
        for m in messages:
            if type(m) is not dict:
                break
            if m.get("role") == "user":
                content = m.get("content")
                if content and type(content) is not str:
                    break
        else:
            return messages
        return original(messages=messages, model_id=model_id, model_file_id_mapping=model_file_id_mapping)
    return update_messages_with_model_file_ids


def _fast_developer_roles(original: Any) -> Any:
    def translate(messages: Any, **kwargs: Any) -> Any:
        # No developer message and at most one system message: nothing to map, hoist or fold, and the
        # original returns the same messages in a new list.
        try:
            roles = [m["role"] for m in messages]
        except Exception:  # noqa: BLE001 - not plain: the original says what is wrong
            return original(messages, **kwargs)
        if not _PLAIN_ROLES.issuperset(roles) or roles.count("system") > 1:
            return original(messages, **kwargs)
        return list(messages)
    return translate


def _fast_tool_search() -> None:
    """A tool-search call's id starts with Anthropic's server-tool prefix (``is_anthropic_tool_search_use``):
    with no such id among the assistant messages' calls there is no unanswered one, and no pydantic
    validation of every message and call to find that out."""
    try:
        from litellm.litellm_core_utils.prompt_templates.mid_conversation_system import is_anthropic_tool_search_use
        from litellm.types.llms.anthropic import ANTHROPIC_SERVER_TOOL_USE_ID_PREFIX as prefix
    except ImportError:
        return
    if not isinstance(prefix, str) or not prefix or \
            "ANTHROPIC_SERVER_TOOL_USE_ID_PREFIX" not in _names(is_anthropic_tool_search_use.__code__):
        return

    def make(original: Any) -> Any:
        def unanswered_tool_search_call_ids(messages: Any) -> Any:
            for m in messages:
                if type(m) is not dict:
                    return original(messages)
                if m.get("role") != "assistant":
                    continue
                for call in m.get("tool_calls") or ():
                    if type(call) is not dict:
                        return original(messages)
                    call_id = call.get("id")
                    if not isinstance(call_id, str) or call_id.startswith(prefix):
                        return original(messages)
            return frozenset()
        return unanswered_tool_search_call_ids

    _install("litellm.responses.litellm_completion_transformation.tool_search", "unanswered_tool_search_call_ids",
             {"tool_search_call_ids", "_tool_result_ids"}, make)


def _fast_pdf_parts(original: Any) -> Any:
    def messages_have_pdf_file_part(messages: Any) -> bool:
        # A PDF is a content part: string contents have none.
        for m in messages:
            if type(m) is not dict or isinstance(m.get("content"), list):
                return bool(original(messages))
        return False
    return messages_have_pdf_file_part


def _fast_openai_transform() -> None:
    """``OpenAIGPTConfig._transform_messages`` rewrites content parts (tool references and media in tool
    results, user image parts): with string contents everywhere — and litellm's own part handlers, not a
    subclass's — it returns the same messages in a new list."""
    try:
        from litellm.llms.openai.chat.gpt_transformation import OpenAIGPTConfig
    except ImportError:
        return
    plain = (OpenAIGPTConfig._user_message_for_openai, OpenAIGPTConfig._async_user_message_for_openai,
             OpenAIGPTConfig._user_content_parts)

    def make(original: Any) -> Any:
        def transform(self: Any, messages: Any, model: str, is_async: bool = False) -> Any:
            cls = type(self)
            if (cls._user_message_for_openai, cls._async_user_message_for_openai, cls._user_content_parts) != plain:
                return original(self, messages, model, is_async)
            for m in messages:
                if type(m) is not dict or isinstance(m.get("content"), list):
                    return original(self, messages, model, is_async)
            out = list(messages)
            if is_async:
                async def done() -> Any:
                    return out
                return done()
            return out
        return transform

    _install_on(OpenAIGPTConfig, "_transform_messages",
                {"drop_tool_reference_parts_from_tool_messages", "hoist_images_from_tool_messages",
                 "_user_message_for_openai"}, make)


def _one_iterator_per_stream() -> None:
    """litellm's ``CustomStreamWrapper.__anext__`` runs ``async for chunk in self.completion_stream`` afresh
    for every chunk it returns. The openai SDK's ``AsyncStream.__aiter__`` is an async generator that only
    forwards ``self._iterator``, so each chunk made a new generator, took one item from it and abandoned
    it; asyncio then scheduled an ``aclose()`` task for each one collected: a task per chunk on the
    caller's loop (issue 9: 6 a step in the benchmark, 1,000 for a 1,000-chunk answer). The stream is its
    own iterator — its ``__anext__`` reads that same ``_iterator`` — so ``__aiter__`` returns it, and every
    ``async for`` over one stream goes on where the last one stopped, as before."""
    try:
        from openai._streaming import AsyncStream
    except ImportError:
        return
    aiter_code = getattr(vars(AsyncStream).get("__aiter__"), "__code__", None)
    anext_code = getattr(vars(AsyncStream).get("__anext__"), "__code__", None)
    if aiter_code is None or aiter_code.co_names != ("_iterator",) or anext_code is None \
            or "_iterator" not in _names(anext_code):
        return  # an SDK whose __aiter__ does more than forward, or whose __anext__ reads something else

    def make(original: Any) -> Any:
        def __aiter__(self: Any) -> Any:  # noqa: N807 - the protocol's name
            return self
        return __aiter__

    _install_on(AsyncStream, "__aiter__", {"_iterator"}, make)


def _fast_request_body() -> None:
    """The openai SDK encodes each request body with ``json.dumps`` (``openapi_dumps``): at 1,000 messages
    of history a 200 KB body, ~1.2 ms a call on the caller's thread. The messages are encoded with orjson
    instead (~10x faster), every other key of the body as the SDK encodes it, in the same order.

    For what the workbench's messages hold — strings, lists, dicts, None, booleans, integers — the bytes
    are the SDK's own (the same escapes, UTF-8, no spaces). A subclass, a pydantic model, a date or time,
    an integer over 64 bits, a lone surrogate or a key that is not a string sends the whole body the
    SDK's way (the same bytes, or the same error). Never in the workbench's messages, and encoded by
    orjson if they were: a float (the same number, maybe spelled otherwise: ``0.00001`` for ``1e-05``),
    a NaN or infinity (null, where the SDK refuses it), an ``enum.Enum`` or a ``UUID`` (their values,
    where the SDK refuses them)."""
    try:
        import orjson
    except ImportError:  # an install without it keeps the SDK's encoding
        return
    options = orjson.OPT_PASSTHROUGH_SUBCLASS | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS

    def refuse(value: Any) -> Any:
        raise TypeError(type(value).__name__)

    def make(original: Any) -> Any:
        def openapi_dumps(obj: Any) -> bytes:
            messages = obj.get("messages") if type(obj) is dict else None
            if not isinstance(messages, list) or not messages:
                return original(obj)
            try:
                encoded = orjson.dumps(messages if type(messages) is list else list(messages),
                                       default=refuse, option=options)
            except TypeError:  # orjson.JSONEncodeError is one: not plain JSON data
                return original(obj)
            parts = []
            for key, value in obj.items():
                if type(key) is not str:
                    return original(obj)
                parts.append(original(key) + b":" + (encoded if key == "messages" else original(value)))
            return b"{" + b",".join(parts) + b"}"
        return openapi_dumps

    _install("openai._utils._json", "openapi_dumps", {"dumps", "_CustomEncoder", "encode"}, make,
             "openai._base_client")


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


def _import_without_collections() -> ModuleType:
    """``import litellm`` with the cyclic garbage collector paused, its heap then frozen (issue 9).

    The import creates ~3,000 modules and ~2,500 pydantic classes, nearly all of which live as long as
    the process; each collection their allocations trigger walks the whole growing heap again, for
    nothing it could free: 2.5-2.75 -> 2.0 s here. What the import leaves is then frozen, as
    ``_freeze_import_heap`` does, but without its collection first: that took 0.13-0.18 s on the first
    request's path to free ~1,900 objects (~0.5 MB, litellm 1.110), which therefore stay, once a process,
    with what other threads left in cycles during the import. Freezing before the collector is back on
    also keeps the allocation count from setting off a full collection at once (another 0.14 s). A
    caller that had the collector off keeps it off. litellm imported before (by a caller of its own):
    collected and frozen as before.
    """
    import gc
    import sys

    if "litellm" in sys.modules:
        import litellm

        _freeze_import_heap()
        return litellm
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        import litellm

        gc.freeze()
    finally:
        if was_enabled:
            gc.enable()
    return litellm


def import_litellm() -> ModuleType:
    """Import litellm once (thread-safe), with the environment and settings above."""
    global _litellm
    if _litellm is not None:
        return _litellm
    with _lock:
        if _litellm is None:
            prepare_litellm_env()
            started = time.perf_counter()
            litellm = _import_without_collections()
            _configure(litellm)
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


def _mock_answer() -> Any:
    """The warm-up's answer: one chunk that carries its usage, as a provider's last chunk does.

    A mock answer given as text has no usage, so litellm counted its tokens, loading two tokenizers
    (0.43 s; the shared host's first request waited for it) that a call whose provider reports usage
    never loads. Text when litellm's chunk types are not where this expects them (another version).
    """
    try:
        from litellm.types.utils import Delta, ModelResponseStream, StreamingChoices, Usage
    except ImportError:
        return "ok"
    chunk = ModelResponseStream(choices=[StreamingChoices(index=0, delta=Delta(role="assistant", content="ok"),
                                                          finish_reason="stop")])
    chunk.usage = Usage(prompt_tokens=2, completion_tokens=1, total_tokens=3)
    return chunk


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
    for answer in (_mock_answer, lambda: "ok"):  # text when another litellm takes no chunk as a mock answer
        try:
            response = await litellm.acompletion(
                model="openai/gpt-4o-mini",
                messages=[{"role": "user", "content": "warm up"}],
                mock_response=answer(),
                stream=True,
                stream_options={"include_usage": True},
            )
            if [chunk async for chunk in response]:
                break
        except Exception as exc:  # noqa: BLE001 - warm-up must never break start-up
            log.debug("warm-up: mock stream failed: %s", exc)
    try:
        litellm.cost_per_token(model="openai/gpt-4o-mini", prompt_tokens=1, completion_tokens=1)
    except Exception as exc:  # noqa: BLE001
        log.debug("warm-up: pricing failed: %s", exc)
    _freeze_import_heap()  # the modules the first call imported lazily, too
    _warmed = True
