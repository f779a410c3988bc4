"""The middleware contract (M1–M10). Every hook is optional; a middleware overrides what it needs.

Hooks get a context bound to the middleware, so every state write names its owner and is checked
against ``writes`` (M3); asking the user is reserved to middleware with ``asks = True`` (M4).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from workbench.engine.frozen import ACTIVE_HOOK
from workbench.engine.messages import ModelRequest, ModelResponse, ToolCall
from workbench.engine.tools import Fatal, NeedsApproval, Tool, ToolOutcome
from workbench.errors import RunError

if TYPE_CHECKING:
    from workbench.backends.base import FileBackend
    from workbench.engine.events import Event


@dataclass(frozen=True)
class Section:
    """A piece of the system prompt (M2). Cacheable sections come first so providers can cache them."""

    name: str
    text: str
    cacheable: bool = False


@dataclass(frozen=True)
class Block:
    """Returned by ``before_agent`` or ``after_agent`` to block the input or the output (M1, M9)."""

    reason: str


@dataclass(frozen=True)
class Question:
    """A pending decision (R3): a tool approval, a budget hold, or another asking middleware's question."""

    id: str
    kind: str
    payload: dict[str, Any]
    call_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "payload": self.payload, "call_id": self.call_id}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Question:
        return cls(id=d["id"], kind=d["kind"], payload=dict(d.get("payload") or {}), call_id=d.get("call_id"))


class Suspend(Exception):
    """Raised inside a hook by ``ctx.ask`` when the user's answer is not in yet."""

    def __init__(self, question: Question) -> None:
        super().__init__(question.kind)
        self.question = question


@dataclass(frozen=True)
class RunResult:
    """What a run (or a resume) ended with (R6)."""

    status: str  # done | failed | aborted | interrupted
    answer: str
    usage: Any
    pending: tuple[Question, ...] = ()
    error: str | None = None
    thread_id: str = ""
    run_id: str = ""


class Invocation:
    """An opaque token for one run/resume/recover invocation (what ``ctx.invocation`` returns).

    Caches key on it (I2: a resumed run gets a new one); it has no attributes, so it is no route to
    the runtime's state (M3). Weak-referenceable: a cache entry may die with its invocation."""

    __slots__ = ("__weakref__",)

    def __repr__(self) -> str:
        return f"<invocation {id(self):#x}>"

    def __getattr__(self, name: str) -> Any:  # only for names it lacks: says what to use instead
        raise AttributeError(
            f"ctx.invocation is an opaque token naming this run (a cache key), not the runtime: it has no "
            f"{name!r}. Read state with ctx.get / ctx.state; write your middleware's own keys with ctx.write (M3)"
        )


class HookContext:
    """What a hook sees: the run's ids, the committed state, the backend, events, writes and asks."""

    def __init__(self, runtime: Any, owner: AgentMiddleware | None) -> None:
        self._rt = runtime
        self.owner = owner

    @property
    def thread_id(self) -> str:
        return self._rt.thread_id

    @property
    def run_id(self) -> str:
        return self._rt.run_id

    @property
    def stopping(self) -> bool:
        """Whether the person asked the run to stop (R6): a hook waiting on something gives up."""
        return bool(self._rt.stop_requested)

    @property
    def step(self) -> int:
        return self._rt.step

    @property
    def backend(self) -> FileBackend | None:
        return self._rt.backend

    @property
    def state(self) -> Mapping[str, Any]:
        return self._rt.state_view()

    @property
    def usage(self) -> Any:
        """Usage of the run so far (all of its resumes) and of the thread."""
        return self._rt.usage_view()

    @property
    def invocation(self) -> Invocation:
        """Identifies this run/resume/recover invocation: a resumed run gets a new one (I2 re-reads).
        An opaque token, never the runtime itself (M3: it would hand out ``write_state``)."""
        return self._rt.invocation

    def context_for(self, kind: type) -> HookContext | None:
        """A context for the stack's middleware of ``kind``, or None: this one when it is that middleware's
        own; else one it lends to helpers writing on its behalf (budget counters, merged artifacts),
        which writes only the keys it declares in ``lends`` and never asks (M3, M4)."""
        if isinstance(self.owner, kind):
            return self
        for mw in self._rt.agent.middleware:
            if isinstance(mw, kind):
                return _LentContext(self._rt, mw)
        return None

    def get(self, key: str, default: Any = None) -> Any:
        return self._rt.state_view().get(key, default)

    def write(self, key: str, value: Any) -> None:
        """Write a state key this middleware owns (M3); any other key fails the run."""
        owner = self.owner
        if owner is None or key not in owner.writes:
            who = owner.name if owner is not None else "a tool without a middleware"
            raise RunError(f"{who} wrote state key '{key}', which it does not declare in `writes`")
        self._rt.write_state(key, value)

    def emit(self, type: str, **data: Any) -> Event:
        return self._rt.emit(type, **data)

    def count_model_call(self, model: str, usage: Any) -> None:
        """R5: a model call a middleware makes itself (the compression's summary) is counted as the
        engine's own are — in the run's and the thread's usage, stored with the step's checkpoint, seen
        by every budget, with its ``model_call_finished`` and ``usage_updated`` events."""
        self._rt.engine._count_usage(self._rt, model, usage)

    def ask(self, kind: str, payload: dict[str, Any], key: str) -> Any:
        """Ask the user (R3). Returns the answer once given; until then suspends the run."""
        owner = self.owner
        if owner is None or not owner.asks:
            who = owner.name if owner is not None else "the engine"
            raise RunError(f"{who} tried to suspend the run, but only an asking middleware may (M4)")
        return self._rt.ask(kind, payload, key)


class ToolContext(HookContext):
    """Context of one tool call: adds the call, whether it was approved, and the run's answers."""

    def __init__(self, runtime: Any, owner: AgentMiddleware | None, call: ToolCall, tool: Tool | None, approved: bool) -> None:
        super().__init__(runtime, owner)
        self.call = call
        self.tool = tool
        self.approved = approved

    def _bound(self, owner: AgentMiddleware | None) -> ToolContext:
        """The engine's: the same call's context for the next wrapper or the tool (private: M3)."""
        return ToolContext(self._rt, owner, self.call, self.tool, self.approved)


class _LentContext(HookContext):
    """What ``context_for`` hands to code that is not the middleware's own (M3): writes only its
    ``lends`` keys, asks nothing (M4)."""

    def write(self, key: str, value: Any) -> None:
        owner = self.owner
        if owner is None or key not in owner.lends or key not in owner.writes:
            name = owner.name if owner is not None else "the engine"
            who = ACTIVE_HOOK.get() or "a helper"
            raise RunError(
                f"{who} wrote state key '{key}' on behalf of {name} (ctx.context_for), but {name} does not "
                f"lend it: only keys in its `lends` may be written that way; write your own keys with ctx.write"
            )
        self._rt.write_state(key, value)

    def ask(self, kind: str, payload: dict[str, Any], key: str) -> Any:
        name = self.owner.name if self.owner is not None else "the engine"
        raise RunError(f"{ACTIVE_HOOK.get() or 'a helper'} tried to ask on behalf of {name} (ctx.context_for); "
                       "only a middleware's own hooks may ask (M4)")


CallModel = Callable[[ModelRequest], Awaitable[ModelResponse]]
CallTool = Callable[[ToolCall, ToolContext], Awaitable["ToolOutcome | NeedsApproval"]]


class AgentMiddleware:
    """Base class. Subclasses set ``writes``, ``state_defaults`` and override hooks they need."""

    writes: frozenset[str] = frozenset()
    state_defaults: Mapping[str, Any] = {}
    restore_on_block: frozenset[str] = frozenset()  # keys put back when the output is blocked (M9)
    runs_outside: tuple[type, ...] = ()  # M7: must sit outside (earlier in the stack than) these types
    asks: bool = False  # M4: only an asking middleware may suspend the run
    lends: frozenset[str] = frozenset()  # M3: keys of `writes` helpers may write via ctx.context_for(type)

    @property
    def name(self) -> str:
        return type(self).__name__

    def tools(self) -> Sequence[Tool]:
        return ()

    async def before_agent(self, input: str, ctx: HookContext) -> str | Block | None:
        return None

    async def sections(self, ctx: HookContext) -> Sequence[Section]:
        """Prompt sections for the next model call (M2); bound them yourself. May read the backend."""
        return ()

    async def wrap_model_call(self, request: ModelRequest, call_next: CallModel, ctx: HookContext) -> ModelResponse:
        return await call_next(request)

    async def wrap_tool_call(self, call: ToolCall, ctx: ToolContext, call_next: CallTool) -> ToolOutcome | NeedsApproval:
        return await call_next(call, ctx)

    async def after_agent(self, answer: str, ctx: HookContext) -> Block | None:
        return None

    def on_restore(self, key: str, before: Any, current: Any) -> Any:
        """The value a ``restore_on_block`` key takes when the output is blocked (M9): by default its
        value before the turn. Override to keep what must outlive the turn (todos keep ``next_id``:
        an id already announced is never handed out again, T2). Pure: no context, no writes."""
        return before

    async def on_decision(self, question: Question, decision: dict[str, Any], ctx: HookContext) -> None:
        """Told of every answered question (e.g. "always" approvals become allow rules, P3)."""

    async def on_run_end(self, status: str, ctx: HookContext) -> None:
        """Called once when a run ends (any status except interrupted); for caches and cleanup."""


def overrides(mw: AgentMiddleware, hook: str) -> bool:
    """True when a middleware implements a hook (the engine skips the others on hot paths)."""
    return getattr(type(mw), hook) is not getattr(AgentMiddleware, hook)


__all__ = [
    "AgentMiddleware",
    "Block",
    "CallModel",
    "CallTool",
    "Fatal",
    "HookContext",
    "Invocation",
    "NeedsApproval",
    "Question",
    "RunResult",
    "Section",
    "Suspend",
    "ToolContext",
    "overrides",
]
