"""One model call of a step (R5, R6, M2): the system prompt from the middleware's sections, the
``wrap_model_call`` chain around the model's stream, and the count of every call a ``next`` makes.

``ModelCalls`` is a mixin of ``Engine`` (engine/agent.py): its methods use the engine's ``agent``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from workbench.engine.messages import Message, ModelDelta, ModelRequest, ModelResponse, clean_text
from workbench.engine.middleware import AgentMiddleware, HookContext, Section, overrides
from workbench.engine.prompt_log import PromptLog, PromptPart
from workbench.engine.runtime import _active, _Runtime
from workbench.engine.usage import Usage
from workbench.errors import ModelError, RunError

#: The most text one model answer may stream (a runaway or hostile endpoint never ends its answer).
MAX_ANSWER_CHARS = 8_000_000

if TYPE_CHECKING:
    from workbench.engine.agent import Agent


class ModelCalls:
    """The engine's model-call half: prompt, wrapper chain, stream, usage count."""

    agent: Agent
    _token_cache: dict[str, int]
    prompt_log: PromptLog | None

    async def _system_prompt(self, rt: _Runtime) -> str:
        cacheable: list[Section] = []
        others: list[Section] = []
        owners: dict[int, str] = {}
        for mw in self.agent.middleware:
            if overrides(mw, "sections"):
                with _active(mw.name):
                    found = await mw.sections(HookContext(rt, mw))
                for s in found:
                    owners[id(s)] = mw.name
                    (cacheable if s.cacheable else others).append(s)
        sections = cacheable + others
        limit = self.agent.max_prompt_section_tokens
        sizes = [(s.name, self._tokens(s.text)) for s in sections]
        total = sum(n for _, n in sizes)
        if total > limit:
            biggest = ", ".join(f"{n} ({t} tokens)" for n, t in sorted(sizes, key=lambda x: -x[1])[:5])
            raise RunError(
                f"the prompt sections take {total} tokens, over max_prompt_section_tokens={limit}: {biggest}"
            )
        parts = [self.agent.instructions] if self.agent.instructions else []
        parts.extend(s.text for s in sections if s.text)
        # V1: what each part of the system prompt is, for the prompt log
        rt.prompt_parts = [PromptPart("instructions", self.agent.instructions, True)] + [
            PromptPart(f"section {s.name} ({owners.get(id(s), '?')})", s.text, s.cacheable) for s in sections]
        return "\n\n".join(parts)

    def _tokens(self, text: str) -> int:
        n = self._token_cache.get(text)
        if n is None:
            from workbench.engine.tokens import estimate_tokens

            n = estimate_tokens(text)
            if len(self._token_cache) > 256:
                self._token_cache.clear()
            self._token_cache[text] = n
        return n

    async def _model_step(self, rt: _Runtime) -> ModelResponse:
        system = await self._system_prompt(rt)
        if rt.stop_requested:  # R6: stopped while the prompt was built: no call is made (nor billed)
            raise asyncio.CancelledError()
        tools = tuple(t.spec for t in self.agent.tool_map.values())
        request = ModelRequest(system=system, messages=tuple(rt.messages()), tools=tools,
                               settings=dict(self.agent.model_settings))
        chain = self._model_chain(rt)
        return await chain(request)

    def _model_chain(self, rt: _Runtime) -> Callable[[ModelRequest], Any]:
        async def innermost(request: ModelRequest) -> ModelResponse:
            if rt.stop_requested:  # R6: a wrapper calling `next` again after a stop makes no call
                raise asyncio.CancelledError()
            rt.partial = ""  # R6: a cut call's partial answer is its own text, never a discarded retry's
            task = asyncio.ensure_future(self._stream(rt, request))
            rt.model_task = task
            try:
                response = await task
            except BaseException as exc:
                estimate = None
                if rt.partial:  # cut mid-stream (a stop, a dropped connection): the provider bills what it sent
                    estimate = self._estimated_response(request, rt.partial)
                    self._count(rt, estimate, estimated=True)
                self._log_prompt(rt, request, estimate.usage if estimate else None, "cut")
                if rt.stop_requested and not isinstance(exc, asyncio.CancelledError):
                    # R6: the person stopped the run; whatever the call raised after that (a model layer that
                    # dropped the cancellation ran on into an error) the run ends stopped, not failed
                    raise asyncio.CancelledError() from exc
                raise
            finally:
                rt.model_task = None
            self._count(rt, response)
            self._log_prompt(rt, request, response.usage.as_call(), "ok")
            return response

        call = innermost
        for mw in reversed(self.agent._model_wrappers):
            call = _bind_model(mw, call, HookContext(rt, mw))
        return call

    async def _stream(self, rt: _Runtime, request: ModelRequest) -> ModelResponse:
        final: ModelResponse | None = None
        size = 0
        async for item in self.agent.model.stream(request):
            if isinstance(item, ModelDelta):
                if item.text:
                    size += len(item.text)
                    if size > MAX_ANSWER_CHARS:  # cut: counted from its estimate, as any cut call (R6)
                        raise ModelError(f"model {self.agent.model.name!r}: its answer passed "
                                         f"{MAX_ANSWER_CHARS:,} characters; the call was cut there")
                    rt.add_partial(item.text)
                    rt.emit("model_delta", text=clean_text(item.text))  # R10: listeners get storable text
            else:
                final = item
        if final is None:
            raise ModelError(f"model {self.agent.model.name!r} ended its stream without a response")
        return final

    def _log_prompt(self, rt: _Runtime, request: ModelRequest, usage: Usage | None, status: str) -> None:
        """V1: store what this call sent (never fails the run: the call itself counts)."""
        log = self.prompt_log
        if log is None:
            return
        try:
            log.record(rt.thread_id, rt.run_id, rt.step, rt.prompt_parts, request,
                       len(rt.state.get("messages") or ()), int(request.meta.get("compression_records", 0)),
                       self.agent.model.name, usage, status, tool_cap=request.meta.get("compression_cap"))
        except Exception:  # a full disk must not turn a good answer into a failed run
            import logging

            logging.getLogger(__name__).exception("could not store the prompt of run %s", rt.run_id)

    def _estimated_response(self, request: ModelRequest, text: str) -> ModelResponse:
        """A call cut mid-stream, as a response carrying the estimate of what it cost (``estimated_usage``)."""
        from workbench.engine.models.base import estimated_usage

        usage = estimated_usage(self.agent.model, request, text)
        return ModelResponse(Message.assistant(text), usage, self.agent.model.name, "stopped")

    def _count(self, rt: _Runtime, response: ModelResponse, *, estimated: bool = False) -> None:
        """R5: every call a `next` makes is counted, whatever the wrapper returns.

        ``estimated``: the call was cut mid-stream and its usage is an estimate (the event says so).
        """
        self._count_usage(rt, response.model or self.agent.model.name, response.usage, estimated=estimated)

    def _count_usage(self, rt: _Runtime, model: str, usage: Usage, *, estimated: bool = False) -> None:
        """One call's usage into the step's calls (stored with its checkpoint), and its events."""
        usage = usage.as_call()
        rt.calls.append((model, usage))
        extra = {"estimated": True} if estimated else {}
        rt.emit("model_call_finished", model=model, usage=usage.to_dict(), **extra)
        view = rt.usage_view()
        rt.emit("usage_updated", run_usage=view["run"].to_dict(), thread_usage=view["thread"].to_dict(), model=model,
                call=usage.to_dict())


def _bind_model(mw: AgentMiddleware, call_next: Any, ctx: HookContext) -> Any:
    async def call(request: ModelRequest) -> ModelResponse:
        with _active(mw.name):
            return await mw.wrap_model_call(request, call_next, ctx)

    return call
