"""``LiteLLMModel``: any litellm model string, streamed, with usage, cost, retries and clear errors.

litellm is imported lazily (``llm_setup.import_litellm``) on the first call, never at module import:
it takes seconds. In the window the stream runs on a worker loop (see ``threaded.py``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import random
import re
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

from workbench.engine.messages import Message, ModelDelta, ModelRequest, ModelResponse, ToolCall
from workbench.engine.usage import Usage
from workbench.errors import ModelError
from workbench.redact import remember, scrub
from workbench.secrets import env_var_for

log = logging.getLogger(__name__)

_CONNECTION_ERROR_NAMES = {
    "APIConnectionError",
    "ConnectError",
    "ConnectionError",
    "ConnectionResetError",
    "ConnectionAbortedError",
    "BrokenPipeError",
    "RemoteProtocolError",
    "ReadError",
    "WriteError",
    "ClientConnectionError",
    "ClientConnectorError",
    "ClientOSError",
    "ServerDisconnectedError",
    "ClientPayloadError",
}
_TIMEOUT_NAMES = {"Timeout", "APITimeoutError", "TimeoutError", "ReadTimeout", "ConnectTimeout", "PoolTimeout"}


@dataclass(frozen=True)
class _Failure:
    """What went wrong with one attempt, and whether another attempt may help."""

    # auth, unknown_model, refused, bad_usage, connection, timeout, rate_limit, server, context, bad_request, other
    kind: str
    retryable: bool
    status: int | None
    detail: str


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """The exception and its causes/contexts (bounded, cycle-safe)."""
    seen: set[int] = set()
    stack: list[BaseException | None] = [exc]
    while stack and len(seen) < 32:
        item = stack.pop()
        if item is None or id(item) in seen:
            continue
        seen.add(id(item))
        yield item
        stack.extend([item.__context__, item.__cause__])


def _names(exc: BaseException) -> set[str]:
    return {cls.__name__ for e in _chain(exc) for cls in type(e).__mro__}


_PREFIX = re.compile(r"^(?:litellm\.)?\w*(?:Error|Exception|Timeout)\s*[:\-]\s*")


def _short(exc: BaseException) -> str:
    """The provider's message on one line, without litellm's class-name prefixes."""
    text = str(getattr(exc, "message", "") or exc or type(exc).__name__)
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), type(exc).__name__)
    for _ in range(4):
        stripped = _PREFIX.sub("", line, count=1).strip()
        if stripped == line or not stripped:
            break
        line = stripped
    return line if len(line) <= 200 else line[:197] + "..."


def _status(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    try:
        return int(status) if status is not None else None
    except (TypeError, ValueError):
        return None


def _bad_usage(exc: BaseException) -> str | None:
    """What is wrong with the provider's usage figures, when ``exc`` is litellm failing to read them
    (pydantic refusing its ``Usage``: ``"prompt_tokens": 1e400``), else None."""
    for e in _chain(exc):
        if type(e).__name__ != "ValidationError" or getattr(e, "title", None) != "Usage":
            continue
        try:
            errors = e.errors(include_url=False, include_input=False)  # type: ignore[attr-defined]
            parts = [f"{'.'.join(str(p) for p in err.get('loc', ())) or 'usage'}: {err.get('msg', '')}"
                     for err in errors[:3]]
        except Exception:  # noqa: BLE001 - another ValidationError than pydantic's
            parts = []
        text = "; ".join(parts) or _short(e)
        return text if len(text) <= 200 else text[:197] + "..."
    return None


def classify(exc: BaseException) -> _Failure:
    """Sort a litellm/httpx/aiohttp exception into a failure kind (see ``_Failure``)."""
    names = _names(exc)
    status = _status(exc)
    detail = _short(exc)
    if "ConnectionRefusedError" in names:
        return _Failure("refused", False, None, detail)
    usage = _bad_usage(exc)
    if usage is not None:  # litellm wraps it as a lost connection; the network is not at fault (R5)
        return _Failure("bad_usage", False, None, usage)
    if names & _TIMEOUT_NAMES:
        return _Failure("timeout", True, status, detail)
    if names & _CONNECTION_ERROR_NAMES or detail.rstrip(".").lower() == "connection error":
        return _Failure("connection", True, None, detail)
    # The OpenAI client raises "Missing credentials" before any request when no key is set at all
    # (litellm wraps it with a status of 500): a missing key, not a refused one nor a server error.
    text = str(exc).lower()
    if re.search(r"missing (?:\w+ )?(?:credentials|api[ _-]?key)|api_key client option must be set", text):
        return _Failure("no_key", False, None, detail)
    if names & {"AuthenticationError", "PermissionDeniedError"} or status in (401, 403):
        return _Failure("auth", False, status or 401, detail)
    if "ContextWindowExceededError" in names:
        return _Failure("context", False, status, detail)
    if "NotFoundError" in names or status == 404 or "LLM Provider NOT provided" in str(exc):
        return _Failure("unknown_model", False, status, detail)
    if "RateLimitError" in names or status == 429:
        return _Failure("rate_limit", True, status or 429, detail)
    if names & {"InternalServerError", "ServiceUnavailableError", "BadGatewayError"} or (status or 0) >= 500:
        return _Failure("server", True, status, detail)
    if "BadRequestError" in names or status == 400:
        return _Failure("bad_request", False, status or 400, detail)
    return _Failure("other", False, status, detail)


def _get(obj: Any, name: str) -> Any:
    """Attribute or key ``name`` of a litellm object or dict (None when absent)."""
    if obj is None:
        return None
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


#: Usage figures the kept counts already price (``_cost``): anything else non-zero in a usage object is
#: priced as reported as well. ``text_tokens`` is the plain part of a count (litellm fills it in), which can
#: only lower a price.
_COUNTED = frozenset({"prompt_tokens", "completion_tokens", "total_tokens", "cached_tokens", "reasoning_tokens",
                      "text_tokens"})


def _says_more(raw: Any) -> bool:
    """Whether a provider's usage object holds a non-zero figure besides the counts kept (cache writes,
    audio or image tokens, a provider's own fields), in itself or its two ``*_details``."""
    def fields(obj: Any) -> dict[str, Any]:
        if isinstance(obj, dict):
            return obj
        dump = getattr(obj, "model_dump", None)
        try:
            return dump() if callable(dump) else dict(vars(obj))
        except Exception:  # noqa: BLE001 - an object we cannot read says nothing more
            return {}

    top = fields(raw)
    for name, value in top.items():
        if name in ("prompt_tokens_details", "completion_tokens_details"):
            if any(k not in _COUNTED and isinstance(v, (int, float)) and not isinstance(v, bool) and v
                   for k, v in fields(value).items()):
                return True
        elif name not in _COUNTED and isinstance(value, (int, float)) and not isinstance(value, bool) and value:
            return True
    return False


MAX_REPORTED_TOKENS = 10**12
"""The most tokens one call's usage figure may say (a trillion, far past any context window): a larger
figure is not a count (``_int``)."""


def _int(value: Any, field: str = "usage figure", model: str = "") -> int:
    """A token count from the provider's usage (R5, B1): a whole number from 0 to MAX_REPORTED_TOKENS.
    A negative figure would lower what the run and its budgets count (a ``total_tokens`` budget would
    never hold), so it counts as 0, as do a non-finite, non-numeric or absurdly large one — the same
    rule as stored usage (``Usage.from_dict``); each with a warning naming the field. Absent is 0."""
    if value is None:
        return 0
    number: int | None = None
    if not isinstance(value, bool):
        try:
            if isinstance(value, int):
                number = int(value)
            else:
                real = float(value)  # a float, "12", "1e3", Decimal: what int(value) would take, and more
                number = int(real) if math.isfinite(real) else None
        except (TypeError, ValueError, OverflowError):
            number = None
    if number is not None and 0 <= number <= MAX_REPORTED_TOKENS:
        return number
    shown = repr(value)
    log.warning("%s: the provider's usage says %s = %s, which is not a token count; counted as 0",
                model or "model", field, shown if len(shown) <= 40 else shown[:39] + "…")
    return 0


#: Models litellm's price list does not know (``LiteLLMModel._cost``): asked once a process.
_unpriced: set[str] = set()


class LiteLLMModel:
    """A ``Model`` over ``litellm.acompletion``: streamed deltas, then one response with usage and cost.

    Retries 429, 5xx, timeouts and dropped connections with exponential backoff, but only before
    any delta was yielded, so streamed text is never duplicated.
    """

    def __init__(
        self,
        model: str,
        api_base: str | None = None,
        api_key: str | None = None,
        *,
        max_retries: int = 3,
        backoff_base: float = 0.5,
        timeout: float = 60.0,
        extra: dict[str, Any] | None = None,
    ) -> None:
        self.name = model
        self.model = model
        self.api_base = api_base or None
        self.api_key = api_key or None
        remember(self.api_key)  # scrubbed from every error that might echo it (R10)
        self.max_retries = max(0, int(max_retries))
        self.backoff_base = backoff_base
        self.timeout = timeout
        self.extra = dict(extra or {})

    def __repr__(self) -> str:  # never shows the key
        return f"LiteLLMModel({self.model!r}, api_base={self.api_base!r})"

    @property
    def provider(self) -> str:
        """The provider part of the model string (``openai`` for ``openai/gpt-4o``)."""
        return self.model.split("/", 1)[0] if "/" in self.model else "openai"

    # --- the call --------------------------------------------------------------------------

    @staticmethod
    def _messages(request: ModelRequest) -> list[dict[str, Any]]:
        """The request's messages for one attempt: new dicts each time, marked as this call's own
        (``llm_setup.own_messages``) so litellm need not copy every one of them first (issue 9)."""
        from workbench.engine.llm_setup import own_messages

        return own_messages(request.to_openai_messages())

    def _kwargs(self, request: ModelRequest) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": self._messages(request),
            "tools": [t.to_openai() for t in request.tools] or None,
            "stream": True,
            "stream_options": {"include_usage": True},
            "timeout": self.timeout,
            "num_retries": 0,  # we retry ourselves, and only before the first delta
        }
        if self.api_base:
            kwargs["api_base"] = self.api_base
        if self.api_key:
            kwargs["api_key"] = self.api_key
        kwargs.update(self.extra)
        kwargs.update(request.settings)
        return kwargs

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelDelta | ModelResponse]:
        """Stream one call; see the class docstring. Raises ``ModelError`` with one clear line."""
        from workbench.engine.llm_setup import import_litellm, wait_for_warm_up

        litellm = import_litellm()
        await wait_for_warm_up()  # never import litellm's lazy modules alongside a warm-up's call
        kwargs = self._kwargs(request)
        attempt = 0
        while True:
            attempt += 1
            yielded = False
            if attempt > 1:  # litellm may have edited the last attempt's dicts in place: never resend them
                kwargs["messages"] = self._messages(request)
            attempt_stream = self._attempt(litellm, kwargs, request)
            try:
                try:
                    async for item in attempt_stream:
                        if isinstance(item, ModelDelta):
                            yielded = True
                        yield item
                finally:
                    await attempt_stream.aclose()
                return
            except ModelError:
                raise
            except Exception as exc:  # noqa: BLE001 - every provider failure becomes a ModelError
                failure = classify(exc)
                if failure.retryable and not yielded and attempt <= self.max_retries:
                    delay = self._backoff(attempt)
                    log.info("%s: %s (%s); retry %d in %.2f s", self.model, failure.kind,
                             scrub(failure.detail, self.api_key), attempt, delay)
                    await asyncio.sleep(delay)
                    continue
                log.debug("%s failed after %d attempt(s): %s", self.model, attempt,
                          scrub(f"{type(exc).__name__}: {exc}", self.api_key))  # no traceback: it quotes the body
                err = ModelError(
                    scrub(self._message(failure, attempt, mid_stream=yielded), self.api_key),
                    retryable=failure.retryable,
                    status=failure.status,
                )
                raise err from None

    def _backoff(self, attempt: int) -> float:
        base = self.backoff_base * (2 ** (attempt - 1))
        return min(base, 30.0) + random.uniform(0, self.backoff_base * 0.25)

    async def _attempt(
        self, litellm: Any, kwargs: dict[str, Any], request: ModelRequest
    ) -> AsyncIterator[ModelDelta | ModelResponse]:
        response = await litellm.acompletion(**kwargs)
        text: list[str] = []
        reasoning: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        usage: Any = None
        finish = ""
        model = ""
        try:
            async for chunk in response:
                if _get(chunk, "usage"):
                    usage = _get(chunk, "usage")
                model = model or (_get(chunk, "model") or "")
                for choice in _get(chunk, "choices") or ():
                    if _get(choice, "finish_reason"):
                        finish = str(_get(choice, "finish_reason"))
                    delta = _get(choice, "delta")
                    if delta is None:
                        continue
                    content = _get(delta, "content") or ""
                    thought = _get(delta, "reasoning_content") or ""
                    if content or thought:
                        text.append(content)
                        reasoning.append(thought)
                        yield ModelDelta(text=content, reasoning=thought)
                    for tc in _get(delta, "tool_calls") or ():
                        self._add_call_fragment(calls, tc)
        finally:
            # Release the HTTP stream now (a consumer that stops early, a retry) rather than at GC.
            aclose = getattr(response, "aclose", None)
            if aclose is not None:
                try:
                    await aclose()
                except Exception:  # noqa: BLE001 - closing is best effort
                    log.debug("closing the litellm stream failed", exc_info=True)
        tool_calls = tuple(
            ToolCall.parse(c["id"] or f"call_{uuid.uuid4().hex[:24]}", c["name"], "".join(c["args"]))
            for _, c in sorted(calls.items())
        )
        full_text = "".join(text)
        yield ModelResponse(
            message=Message.assistant(full_text, tool_calls),
            usage=self._usage(litellm, usage, request, full_text, "".join(reasoning), tool_calls),
            model=model or self.model,
            finish_reason=finish or ("tool_calls" if tool_calls else "stop"),
        )

    @staticmethod
    def _add_call_fragment(calls: dict[int, dict[str, Any]], tc: Any) -> None:
        """Merge one streamed tool-call fragment into ``calls`` (keyed by the provider's index)."""
        index = _get(tc, "index")
        call_id = _get(tc, "id")
        if index is None:  # providers that send whole calls without an index
            same = [i for i, c in calls.items() if call_id and c["id"] == call_id]
            index = same[0] if same else (max(calls) + 1 if (call_id or not calls) else max(calls))
        slot = calls.setdefault(int(index), {"id": "", "name": "", "args": []})
        if call_id and not slot["id"]:
            slot["id"] = str(call_id)
        fn = _get(tc, "function")
        name = _get(fn, "name")
        if name and not slot["name"]:
            slot["name"] = str(name)
        args = _get(fn, "arguments")
        if args:
            slot["args"].append(args if isinstance(args, str) else json.dumps(args))

    # --- usage and cost --------------------------------------------------------------------

    def estimate_usage(self, request: ModelRequest, text: str) -> Usage:
        """The usage of a call cut mid-stream: tiktoken estimates of the request and the streamed text,
        priced like a finished call (the engine counts it toward the run and its budgets)."""
        from workbench.engine.llm_setup import import_litellm

        return self._usage(import_litellm(), None, request, text, "", ())

    def _usage(
        self,
        litellm: Any,
        raw: Any,
        request: ModelRequest,
        text: str,
        reasoning: str,
        tool_calls: tuple[ToolCall, ...],
    ) -> Usage:
        """Usage of the call: the provider's numbers, else a tiktoken estimate (the call still counts).

        ``output_tokens`` excludes reasoning tokens (reported as ``thoughts_tokens``) so totals don't
        count them twice; ``cached_tokens`` is the cached part of ``input_tokens``.
        """
        def estimated_prompt() -> int:
            from workbench.engine.tokens import estimate_messages_tokens, estimate_tokens

            return (estimate_messages_tokens(request.system, request.messages)
                    + sum(estimate_tokens(str(t.to_openai())) for t in request.tools))

        def estimated_thoughts() -> int:
            from workbench.engine.tokens import estimate_tokens

            return estimate_tokens(reasoning)

        def estimated_completion(thoughts: int) -> int:
            from workbench.engine.tokens import estimate_tokens

            return (thoughts + estimate_tokens(text)
                    + sum(estimate_tokens(c.name) + estimate_tokens(c.raw_arguments) for c in tool_calls))

        if raw:
            figures = (_get(raw, "prompt_tokens"), _get(raw, "completion_tokens"),
                       _get(_get(raw, "completion_tokens_details"), "reasoning_tokens"),
                       _get(_get(raw, "prompt_tokens_details"), "cached_tokens"))
            prompt, completion, thoughts, cached = (
                _int(value, name, self.model) for value, name in zip(figures, (
                    "prompt_tokens", "completion_tokens", "completion_tokens_details.reasoning_tokens",
                    "prompt_tokens_details.cached_tokens")))
            # R5, B1: a figure the provider left out is estimated, not 0 — a usage of only total_tokens made a
            # run count nothing and a total_tokens budget never held. litellm fills a missing figure with 0,
            # and no call has an empty prompt, or a text or call with no output tokens: 0 is estimated too.
            if not prompt:
                prompt = estimated_prompt()
            if not completion:
                completion = estimated_completion(estimated_thoughts())
            total = _int(_get(raw, "total_tokens"), "total_tokens", self.model)
            prompt += max(0, total - prompt - completion)  # a total that says more is a floor
        else:
            prompt = estimated_prompt()
            thoughts = estimated_thoughts()
            completion = estimated_completion(thoughts)
            cached = 0
        thoughts = min(thoughts, completion)
        cached = min(cached, prompt)
        cost = self._cost(litellm, raw, prompt, completion, cached, thoughts)
        return Usage(
            input_tokens=prompt,
            output_tokens=completion - thoughts,
            thoughts_tokens=thoughts,
            cached_tokens=cached,
            cost_usd=cost,
            calls=1,
            unpriced_calls=0 if cost is not None else 1,
        )

    def _cost(self, litellm: Any, raw: Any, prompt: int, completion: int, cached: int = 0,
              thoughts: int = 0) -> float | None:
        """USD cost where litellm knows the model's price, else None.

        Priced from the counts kept (cached input at its price), never below them (R5, B1): the provider's
        own usage object is priced too only when it says more than those counts — cache writes, audio —
        and the higher of the two counts. Its details alone (``text_tokens: 1``) made a 100k-token call
        cost a millionth (a review found it).
        A model litellm cannot price is remembered (``_unpriced``): its look-up fails the same way on
        every call, through a raised and formatted exception, so it is asked once, not once a call.
        """
        if self.model in _unpriced:
            return None
        try:
            kwargs: dict[str, Any] = {"model": self.model, "prompt_tokens": prompt, "completion_tokens": completion}
            usage_type = getattr(litellm, "Usage", None)
            if (cached or thoughts) and usage_type is not None:
                kwargs["usage_object"] = usage_type(
                    prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion,
                    prompt_tokens_details={"cached_tokens": cached},
                    completion_tokens_details={"reasoning_tokens": thoughts})
            prompt_cost, completion_cost = litellm.cost_per_token(**kwargs)
            if raw is not None and not isinstance(raw, dict) and _says_more(raw):
                kwargs["usage_object"] = raw
                as_reported = litellm.cost_per_token(**kwargs)
                higher = float(as_reported[0]) + float(as_reported[1])
                if math.isfinite(higher) and higher > float(prompt_cost) + float(completion_cost):
                    prompt_cost, completion_cost = as_reported
        except Exception as exc:  # noqa: BLE001 - litellm raises for models it cannot price
            log.debug("no price for %s: %s", self.model, exc)
            if "NotMapped" in type(exc).__name__ or "isn't mapped" in str(exc):  # not a passing failure
                _unpriced.add(self.model)
            return None
        try:
            cost = float(prompt_cost) + float(completion_cost)
        except (TypeError, ValueError):
            return None
        if not math.isfinite(cost) or cost < 0:  # R5, B1: a budget never sees less spent than nothing
            log.warning("%s: the call's price came out as %r; counted as unpriced", self.model, cost)
            return None
        return cost

    # --- errors ----------------------------------------------------------------------------

    def _message(self, f: _Failure, attempts: int, *, mid_stream: bool = False) -> str:
        """One line naming the model/provider and what to do."""
        model, provider = self.model, self.provider
        where = self.api_base or provider
        if mid_stream:
            when = " mid-stream (the answer is incomplete)"
        elif attempts > 1:
            when = f" after {attempts} tries"
        else:
            when = ""
        env = "$" + env_var_for(model)
        if f.kind == "no_key":
            return (f"no API key is set for provider {provider} (model {model}) — set {env} in the environment "
                    "or save a key in Settings (API keys)")
        if f.kind == "auth":
            return f"the API key for {model} was refused ({f.status}) — set it in Settings or {env}"
        if f.kind == "unknown_model":
            return f"unknown model '{model}' — check the model name"
        if f.kind == "refused":
            return f"could not connect to {where}: connection refused — is the server running?"
        if f.kind == "bad_usage":
            return (f"{provider} sent usage figures for {model} that cannot be read{when}: {f.detail} — "
                    "a malformed reply from the provider, not a network fault; try again, or report it to the provider")
        if f.kind == "connection":
            return f"lost the connection to {where}{when}: {f.detail} — check the API base and the network"
        if f.kind == "timeout":
            return f"{model} did not answer within {self.timeout:g} s{when} — try again or raise the timeout"
        if f.kind == "rate_limit":
            return f"rate limited by {provider}{when} — wait a little and try again"
        if f.kind == "server":
            status = f" ({f.status})" if f.status else ""
            return f"{provider} had a server error{status}{when}: {f.detail} — try again later"
        if f.kind == "context":
            return f"the conversation is too long for {model}'s context window — compress it or start a new thread"
        if f.kind == "bad_request":
            return f"{provider} refused the request for {model} ({f.status}): {f.detail}"
        return f"{provider} call to {model} failed{when}: {f.detail}"
