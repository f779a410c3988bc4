"""Delegation to sub-agents (D1–D10): one tool per configured sub-agent, background tasks and their tools.

- D1 ``delegate_to_<name>{task, background?}`` per agent in ``subagents.agents`` (prefix configurable);
  a cacheable section lists the sub-agents.
- D2 ``max_delegations`` launches per run (0 = no limit); ``history_length`` recent messages of this
  conversation go with the task (0 = the task alone).
- D3 the sub-agent's artifacts merge into this thread as ``<agent>_<n>/<name>`` (A3); ``inline`` also
  puts their content in the tool result, ``session`` only names them.
- D4, D9 a foreground sub-agent's approvals and budget holds are asked of the person through this run
  (the question's payload names the agent and task; its id is ``sub-<call>-<question>``); the model
  sees only the outcome. A background task goes ``awaiting_decision`` and its questions wait on its own
  thread, where the decision inbox shows them while this run goes on.
- D5, D7 with ``async: true``: ``background`` launches return ``<agent>:<id>`` at once, and
  ``check_background_tasks``, ``wait_for_background_tasks`` (capped by ``max_wait_seconds``; the person
  can cut it short), ``abort_background_tasks`` and ``continue_task`` act on tasks. Status comes from the
  engine (the task table), never from text: each settled task's outcome is put before the model once, as
  a notice at this thread's next model call, kept in place in every later call (state key
  ``task_notices``).
- D6 the task tools accept only ids this conversation launched (its rows in the task table); any other
  id gets "no such task in this conversation" and nothing of the task.
- D8 each sub-agent runs under a budget envelope: its ``budget:`` in the config (any field the parent's
  budgets cap and it leaves out: what is left of it), else what is left of this thread's budgets, run and
  session scope (B1). What is left is each limit minus what was spent (counted) minus what the tasks not
  yet counted hold: a task still running (or queued, or waiting for a decision) holds the larger of its
  envelope and what it spent that is not counted yet; a settled task not counted yet holds what it spent.
  So envelopes handed out are reserved: three background launches never get the same remainder each.
  A launch whose envelope exceeds what is left asks first (an approval of the delegation call); a launch
  that would get what is left when nothing is left is refused (its envelope could buy nothing).
  ``continue_task`` is a launch too: the further turn gets a fresh envelope by the same rule (asked
  first when its configured budget exceeds what is left). Its usage counts toward this run's budgets
  (B4) when its outcome comes back; a settled background task's is counted before this model call goes
  out, and the budget's check runs again then (``recheck_budgets``), so no call is made past a hard limit.
  B2, B4: a hard limit holds while background tasks run too. Before each model call, when what was
  counted plus what the unfinished background tasks hold reaches a hard run or session limit, the call
  waits for those tasks to settle (Stop ends the wait; a live ``budget_updated`` carries ``waiting``),
  their spend is counted and the check runs again with the real figures (``_settle_holders``,
  delegation_budget.py). Interrupting budgets and tasks whose own ``budget:`` leaves room never wait.

Durable events: ``task_started`` (task id, agent, background, its thread) and ``task_settled`` (task id,
agent, status, usage); live ``task_progress`` (status, last tool, tokens, elapsed) for the Tasks board.
Tasks run through a ``TaskRunner`` (task_runner.py): this middleware never touches asyncio tasks.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.config import SubagentConfig, SubagentsConfig, WorkbenchConfig
from workbench.engine.messages import Message, ModelRequest, ModelResponse, ToolCall, clean_text
from workbench.engine.middleware import AgentMiddleware, CallModel, CallTool, HookContext, Section, ToolContext
from workbench.engine.task_store import SETTLED, SqliteTaskStore, TaskRecord
from workbench.engine.tools import NeedsApproval, Tool, ToolOutcome, inner_question_id, schema
from workbench.engine.usage import Usage
from workbench.harness.delegation_budget import CHARGED, COUNTED, TaskSpending, _exceeds, _recheck

if TYPE_CHECKING:
    from workbench.engine.agent import Engine
    from workbench.engine.models.base import Model
    from workbench.harness.task_runner import TaskRunner

log = logging.getLogger(__name__)

NOTICES = "task_notices"  # [{"at": message index, "task_id", "status", "text"}]: what the model was told (D7)
ANSWERS = "task_answers"  # {task_id: {question id: decision}}: a foreground batch answered part-way (D9)
MAX_OUTCOME_CHARS = 8000
MAX_CONTEXT_CHARS = 2000

ModelFactory = Callable[[str | None], "Model"]


class DelegationMiddleware(TaskSpending, AgentMiddleware):
    """Sub-agents as tools, background tasks and their notices (see the module)."""

    writes = frozenset({NOTICES, COUNTED, ANSWERS, CHARGED})
    state_defaults = {NOTICES: [], COUNTED: {}, ANSWERS: {}, CHARGED: {}}
    asks = True  # D9: a foreground sub-agent's questions reach the person through this run

    def __init__(self, config: WorkbenchConfig, workspace: Path, *, depth: int = 1) -> None:
        self.config = config
        self.sub = config.subagents
        self.workspace = Path(workspace)
        self.depth = depth
        self._agents = {a.name: a for a in self.sub.agents}
        self._tool_agent = {self.sub.tool_name(a.name): a.name for a in self.sub.agents}
        self.runner: TaskRunner | None = None
        self._engines: dict[str, Engine] = {}
        # A background task's engine is built on the task loop's thread, other ones on the caller's.
        self._engines_lock = threading.Lock()
        self._child_store: Any = None
        #: The stack's permissions: its sub-agents are judged by them, live (D, P1, Q3; set by
        #: ``stack.build_middleware``). None: a sub-agent gets the file's rules and the session's.
        self.permissions: Any = None

    # -- wiring (Session.open) -----------------------------------------------------------------------------
    def bind(self, engine: Engine, model_factory: ModelFactory, *, own_loop: bool = False) -> None:
        """Attach to the engine this stack runs in: the runner, the store, the model for each sub-agent.

        ``own_loop``: the sub-agents run on a private loop in their own OS thread, with their own
        connection to the store, so the caller's loop (the window's GUI loop) carries none of their
        steps (see harness/task_loop.py)."""
        from workbench.harness.task_runner import LocalTaskRunner

        self._parent = engine
        self._model_factory = model_factory
        self.tasks = SqliteTaskStore(engine.store)
        self._child_store = engine.store
        task_loop = None
        if own_loop:
            from workbench.engine.store import Store
            from workbench.harness.task_loop import TaskLoop

            task_loop = TaskLoop()
            self._child_store = Store(engine.store.path)
        self.runner = LocalTaskRunner(self.tasks, self.engine_for_task, max_concurrent=self.sub.max_concurrent,
                                      timeout_seconds=self.sub.timeout_seconds, publish=self._publish,
                                      task_loop=task_loop)

    async def close(self) -> None:
        """Stop driving tasks here (they stay ``pending`` in the store, D5) and let go of what the
        sub-agents ran on."""
        if self.runner is not None:
            await self.runner.close()
        if self._child_store is not self._parent.store:
            self._child_store.close()

    def _publish(self, task: TaskRecord, type: str, data: dict[str, Any]) -> None:
        self._parent.post_event(task.parent_thread, type, **data)

    def engine_for_task(self, task: TaskRecord) -> Engine:
        """The engine a task runs on: a real agent built from the same workbench.yaml, per task (its
        budget envelope is its own), on the workspace's store. Safe from any thread: one engine a task
        (two threads asking at once may both build one; the first stored is the one both get)."""
        with self._engines_lock:
            engine = self._engines.get(task.id)
        if engine is not None:
            return engine
        built = self._engine_for_task(task)
        with self._engines_lock:
            return self._engines.setdefault(task.id, built)

    def _engine_for_task(self, task: TaskRecord) -> Engine:
        """Build the task's engine (no lock held: building takes ~1 ms of file checks)."""
        from workbench.harness.stack import build_child_engine

        cfg = self._agents.get(task.agent)
        if cfg is None:
            raise ValueError(f"sub-agent {task.agent!r} is not configured in workbench.yaml any more")
        return build_child_engine(self.config, self.workspace, self._child_store, cfg,
                                  depth=task.depth, envelope=task.envelope,
                                  model=self._model_factory(cfg.model), model_factory=self._model_factory,
                                  parent_permissions=self.permissions)

    # -- tools and sections -------------------------------------------------------------------------------
    def tools(self) -> Sequence[Tool]:
        out = []
        for agent in self.sub.agents:
            props: dict[str, Any] = {"task": {"type": "string", "description": "What the sub-agent should do: "
                                              "a complete, self-contained instruction."}}
            desc = f"Delegate a task to the sub-agent '{agent.name}': {agent.description}"
            if self.sub.async_:
                props["background"] = {"type": "boolean", "default": False,
                                       "description": "Run it in the background: returns a task id at once."}
                desc += " With background=true it runs while you go on and you are notified when it settles."
            out.append(Tool(self.sub.tool_name(agent.name), desc, schema(props, ["task"]),
                            self._delegate_func(agent.name)))
        if self.sub.async_:
            ids = {"type": "array", "items": {"type": "string"}, "description": "Task ids (all of this "
                   "conversation's tasks when omitted)."}
            out += [
                Tool("check_background_tasks", "The current status of background tasks (and the outcome of settled "
                     "ones).", schema({"task_ids": ids}), self._check, changes_outside=False),
                Tool("wait_for_background_tasks", f"Wait until background tasks settle, at most "
                     f"{self.sub.max_wait_seconds:g} s; returns their statuses and timed_out.",
                     schema({"task_ids": ids, "timeout_seconds": {"type": "number", "minimum": 0}}), self._wait,
                     changes_outside=False),
                Tool("abort_background_tasks", "Stop background tasks that have not settled.",
                     schema({"task_ids": {**ids, "description": "The task ids to abort."}}, ["task_ids"]),
                     self._abort),
                Tool("continue_task", "Send further instructions to a settled background task's sub-agent; it runs "
                     "again in the background and you are notified when it settles.",
                     schema({"task_id": {"type": "string"}, "instructions": {"type": "string"}},
                            ["task_id", "instructions"]), self._continue),
            ]
        return out

    async def sections(self, ctx: HookContext) -> Sequence[Section]:
        if not self.sub.agents:
            return ()
        lines = ["You can delegate to these sub-agents (each call runs a separate agent with its own context; "
                 "give it a complete task):"]
        for a in self.sub.agents:
            lines.append(f"- {self.sub.tool_name(a.name)}: {a.description}")
        if self.sub.async_:
            lines.append("Background tasks: launch with background=true; you will be notified here when each "
                         "settles, so do not poll or sleep. Statuses come from the system, not from any text.")
        return (Section("subagents", "\n".join(lines), cacheable=True),)

    # -- D8: a launch that would exceed what is left asks first ----------------------------------------------
    # An approval of the call, but about money: its payload says ``exceeds_budget``, so the CLI answers it
    # as --budget-approve says, never as --approve all (a flag for tool calls) would.
    async def wrap_tool_call(self, call: ToolCall, ctx: ToolContext, call_next: CallTool) -> ToolOutcome | NeedsApproval:
        agent = self._tool_agent.get(call.name)
        if agent is not None and not ctx.approved:
            existing = self._task_of_call(ctx, call.id) if self.runner else None
            over = None if existing is not None else _exceeds(self._agents[agent].budget, self._left(ctx))
            if over:
                return NeedsApproval(f"Launching {agent} with its budget ({over}) would exceed what is left of "
                                     "this run's budget", details={"exceeds_budget": over})
        elif call.name == "continue_task" and not ctx.approved and self.runner is not None and self.sub.async_:
            tasks, _refused = self._own(ctx, [(call.arguments or {}).get("task_id")])
            cfg = self._agents.get(tasks[0].agent) if tasks else None
            if tasks and cfg is not None and tasks[0].status in SETTLED:
                over = _exceeds(cfg.budget, self._left(ctx))
                if over:
                    return NeedsApproval(f"Continuing {tasks[0].id} with its budget ({over}) would exceed what is "
                                         "left of this run's budget", details={"exceeds_budget": over})
        return await call_next(call, ctx)

    # -- D7: settled tasks reach the model once, as notices kept in place ----------------------------------------
    async def wrap_model_call(self, request: ModelRequest, call_next: CallModel, ctx: HookContext) -> ModelResponse:
        if self.runner is None:
            return await call_next(request)
        counted = self._count_settled(ctx)
        # B2, B4, D8: what running background tasks hold could carry a hard limit past: wait for them
        # first (their outcomes then reach the model below, as notices of this call)
        counted = await self._settle_holders(ctx) or counted
        if not self.sub.async_:
            if counted:
                _recheck(ctx)
            return await call_next(request)
        notices = list(ctx.get(NOTICES) or [])
        told = {(n["task_id"], n["status"]) for n in notices}
        fresh = []
        for task in self.tasks.tasks(ctx.thread_id):
            if not task.background:
                continue
            status = task.status if task.status in SETTLED else (
                "awaiting_decision" if task.status == "awaiting_decision" else None)
            if status is None or (task.id, status) in told:
                continue
            if status in SETTLED and any(n["task_id"] == task.id and n["status"] in SETTLED and
                                         n.get("settled") == task.settled for n in notices):
                continue
            text = self._notice(ctx, task)
            fresh.append({"at": len(ctx.get("messages") or []), "task_id": task.id, "status": status,
                          "settled": task.settled, "text": text})
        if fresh:
            notices += fresh
            ctx.write(NOTICES, notices)
        if counted or any(n["status"] in SETTLED for n in fresh):
            _recheck(ctx)
        if notices:
            request = request.replace(messages=_splice(request.messages, notices))
        return await call_next(request)

    def _notice(self, ctx: HookContext, task: TaskRecord) -> str:
        if task.status == "awaiting_decision":
            return (f"[Task notice] Background task {task.id} ({task.agent}) is waiting for the person's decision "
                    "on one of its tool calls; it goes on once they answer.")
        self._count_usage(ctx, task)
        merged = self._merge_artifacts(ctx, task)
        body = task.outcome or task.error or "(no answer)"
        text = (f"[Task notice] Background task {task.id} ({task.agent}) settled: {task.status}.\n"
                f"{_clip(body, MAX_OUTCOME_CHARS)}")
        if task.error and task.outcome:
            text += f"\n(error: {task.error})"
        if merged:
            text += "\nArtifacts: " + ", ".join(merged)
        return text

    # -- the delegation tool -------------------------------------------------------------------------------
    def _delegate_func(self, agent: str) -> Any:
        async def delegate(args: dict[str, Any], ctx: ToolContext) -> str | ToolOutcome:
            return await self._delegate(agent, args, ctx)

        return delegate

    async def _delegate(self, agent: str, args: dict[str, Any], ctx: ToolContext) -> str | ToolOutcome:
        if self.runner is None:
            return ToolOutcome.error("Error: delegation is not available in this session (no task runner)")
        task = self._task_of_call(ctx, ctx.call.id)
        if task is None:
            background = bool(args.get("background")) and self.sub.async_
            launched = [t for t in self.tasks.tasks(ctx.thread_id) if t.parent_run == ctx.run_id]
            if self.sub.max_delegations and len(launched) >= self.sub.max_delegations:
                return ToolOutcome.error(f"Refused: this run already delegated {len(launched)} task(s), the most "
                                         f"subagents.max_delegations allows ({self.sub.max_delegations}).")
            text = clean_text(str(args.get("task") or "")).strip()  # R10: model text, stored as the task
            if not text:
                return ToolOutcome.error("Error: the task is empty; say what the sub-agent should do.")
            cfg = self._agents[agent]
            envelope, refusal = self._envelope(ctx, cfg, approved=bool(getattr(ctx, "approved", False)))
            if refusal:
                return ToolOutcome.error(f"Refused: {agent} was not launched: {refusal}")
            store = self._parent.store
            child = store.create_thread(title=f"{agent}: {_first_line(text)}")
            task = self.tasks.create_task(
                parent_thread=ctx.thread_id, parent_run=ctx.run_id, parent_step=ctx.step, call_id=ctx.call.id,
                agent=agent,
                child_thread=child, description=_first_line(text), background=background,
                status="queued" if background else "pending", envelope=envelope, depth=self.depth,
                prompt=self._prompt(text, ctx))
            ctx.emit("task_started", task_id=task.id, agent=agent, background=background, child_thread=child)
            if background:
                self.runner.start(task)
                return (f"Launched background task {task.id} ({agent}). It runs while you go on; you will be "
                        "notified here when it settles, so there is no need to poll. Its id works with "
                        "check_background_tasks, wait_for_background_tasks, abort_background_tasks and continue_task.")
        elif task.background:  # the call ran again (a recovered step): the task is already launched
            return f"Background task {task.id} ({task.agent}) was launched; its status is {task.status}."
        return await self._foreground(task, ctx)

    def _task_of_call(self, ctx: HookContext, call_id: str) -> TaskRecord | None:
        """The task this delegation call launched already (a resumed or recovered step runs its calls
        again: D5, R9, never launch twice). The call is this run's call of this step with that id —
        not an earlier step's call that the provider gave the same id (R10: ``call_0`` in every message)."""
        return self.tasks.task_for_call(ctx.thread_id, call_id, run_id=ctx.run_id, step=ctx.step)

    async def _foreground(self, task: TaskRecord, ctx: ToolContext) -> str | ToolOutcome:
        assert self.runner is not None
        if task.status in SETTLED:
            return self._result(ctx, task)
        decisions = None
        if task.status == "awaiting_decision":
            decisions = self._answers(task, ctx)  # asks the person (suspends) until every question has one
        try:
            while True:
                result = await self.runner.run_foreground(task, decisions)
                task = self.tasks.task(task.id) or task
                if result.status != "interrupted":
                    return self._result(ctx, task)
                decisions = self._answers(task, ctx)
        except BaseException:
            # B1, B4: the call ends without its result — the parent was stopped or cancelled, or it waits
            # for the person — so what the sub-agent spent so far counts now; the rest counts at its next
            # ending (the snapshot in COUNTED makes each token count once).
            try:
                self._count_usage(ctx, self.tasks.task(task.id) or task)
            except Exception:  # noqa: BLE001 - counting must not hide how the call ended
                log.warning("task %s: its usage was not counted as its call ended", task.id, exc_info=True)
            raise

    def _answers(self, task: TaskRecord, ctx: ToolContext) -> dict[str, Any]:
        """The person's decisions for the sub-agent's pending questions (D9): each asked through this run."""
        from workbench.decisions import thread_questions

        questions, _ = thread_questions(self._parent.store, task.child_thread)
        saved = {k: dict(v) for k, v in (dict(ctx.get(ANSWERS) or {}).get(task.id) or {}).items()}
        out: dict[str, Any] = {}
        for q in questions:
            if q.id in saved:
                out[q.id] = saved[q.id]
                continue
            payload = {**q.payload, "agent": task.agent, "task_id": task.id}
            try:
                out[q.id] = dict(ctx.ask(q.kind, payload, inner_question_id(ctx.call.id, q.id)))
            except BaseException:
                if out:  # keep what was answered for the next resume (one question is asked at a time)
                    answers = {k: dict(v) for k, v in dict(ctx.get(ANSWERS) or {}).items()}
                    answers[task.id] = {**saved, **out}
                    ctx.write(ANSWERS, answers)
                raise
        answers = {k: dict(v) for k, v in dict(ctx.get(ANSWERS) or {}).items()}
        if answers.pop(task.id, None) is not None:
            ctx.write(ANSWERS, answers)
        return out

    def _result(self, ctx: HookContext, task: TaskRecord) -> str | ToolOutcome:
        self._count_usage(ctx, task)
        merged = self._merge_artifacts(ctx, task)
        body = _clip(task.outcome or "", MAX_OUTCOME_CHARS)
        lines = [f"{task.agent} ({task.id}) {task.status}."]
        if body:
            lines.append(body)
        if task.error:
            lines.append(f"Error: {task.error}")
        if merged:
            lines.append("Artifacts merged into this thread: " + ", ".join(merged))
            if self.sub.artifact_strategy == "inline":
                for name, artifact in merged.items():
                    lines.append(f"--- {name} ---\n{_clip(artifact['content'], MAX_OUTCOME_CHARS)}")
        text = "\n".join(lines)
        return text if task.status == "completed" else ToolOutcome("error", text)

    # -- artifacts (D3, A3) -----------------------------------------------------------------------------------
    def _artifact_contents(self, task: TaskRecord) -> dict[str, dict[str, str]]:
        """The sub-agent's artifacts as name → ``{content, mime}``: the type goes with the content (A3)."""
        from workbench.harness.artifacts import guess_mime

        cp = self._parent.store.latest_checkpoint(task.child_thread, messages=False)
        arts = (cp.state.get("artifacts") if cp else None) or {}
        out: dict[str, dict[str, str]] = {}
        for name, value in arts.items():
            entry = value if isinstance(value, Mapping) else {"content": value}
            out[str(name)] = {"content": str(entry.get("content", "")),
                              "mime": str(entry.get("mime") or guess_mime(str(name)))}
        return out

    def _merge_artifacts(self, ctx: HookContext, task: TaskRecord) -> dict[str, dict[str, str]]:
        """Merge the task's artifacts into this thread (A3); the names used (a taken name is not reused)
        → ``{content, mime}``."""
        from workbench.harness.artifacts import merge_subagent_artifacts

        arts = self._artifact_contents(task)
        if not arts:
            return {}
        n = [t.id for t in self.tasks.tasks(task.parent_thread) if t.agent == task.agent].index(task.id) + 1
        names = merge_subagent_artifacts(ctx, task.agent, n, arts)
        return dict(zip(names, arts.values()))  # one name per artifact, in order; none without artifacts

    def _prompt(self, task: str, ctx: HookContext) -> str:
        """The task, with the last ``history_length`` messages of this conversation as context (D2)."""
        n = self.sub.history_length
        recent = [m for m in (ctx.get("messages") or []) if m.get("role") in ("user", "assistant") and m.get("content")]
        if n <= 0 or not recent:
            return task
        lines = [f"{m['role']}: {_clip(str(m['content']), MAX_CONTEXT_CHARS)}" for m in recent[-n:]]
        return "Context from the conversation that delegated this task:\n" + "\n".join(lines) + f"\n\nYour task:\n{task}"

    # -- the task tools (D5, D6) --------------------------------------------------------------------------------
    def _own(self, ctx: HookContext, ids: Any) -> tuple[list[TaskRecord], list[str]]:
        """D6: the tasks among ``ids`` this conversation launched, and the ids refused."""
        mine = {t.id: t for t in self.tasks.tasks(ctx.thread_id) if t.background}
        if ids is None:
            return list(mine.values()), []
        found, refused = [], []
        for i in ids:
            (found.append(mine[i]) if isinstance(i, str) and i in mine else refused.append(str(i)[:80]))
        return found, refused

    def _report(self, tasks: Sequence[TaskRecord], refused: Sequence[str], **extra: Any) -> str:
        rows = []
        for t in tasks:
            row = t.to_dict()
            if t.status in SETTLED:
                row["outcome"] = _clip(t.outcome or t.error or "", MAX_OUTCOME_CHARS // max(1, len(tasks)))
            rows.append(row)
        out: dict[str, Any] = {"tasks": rows, **extra}
        if refused:
            out["refused"] = [f"{i}: no such task in this conversation" for i in refused]
        return json.dumps(out, ensure_ascii=False)

    async def _check(self, args: dict[str, Any], ctx: ToolContext) -> str:
        tasks, refused = self._own(ctx, args.get("task_ids"))
        return self._report(tasks, refused)

    async def _wait(self, args: dict[str, Any], ctx: ToolContext) -> str:
        assert self.runner is not None
        tasks, refused = self._own(ctx, args.get("task_ids"))
        timeout = min(float(args.get("timeout_seconds", self.sub.max_wait_seconds)), self.sub.max_wait_seconds)
        settled = await self.runner.wait([t.id for t in tasks], timeout) if tasks else True
        fresh = [self.tasks.task(t.id) or t for t in tasks]
        return self._report(fresh, refused, timed_out=not settled)

    async def _abort(self, args: dict[str, Any], ctx: ToolContext) -> str:
        assert self.runner is not None
        tasks, refused = self._own(ctx, args.get("task_ids") or [])
        done = [await self.runner.abort(t.id) or t for t in tasks]
        return self._report(done, refused)

    async def _continue(self, args: dict[str, Any], ctx: ToolContext) -> str | ToolOutcome:
        assert self.runner is not None
        tasks, refused = self._own(ctx, [args.get("task_id")])
        if refused:
            return ToolOutcome.error(f"Error: {refused[0]}: no such task in this conversation")
        task = tasks[0]
        if task.status not in SETTLED:
            return ToolOutcome.error(f"Error: task {task.id} is {task.status}; only a settled task can be continued")
        self._count_usage(ctx, task)
        cfg = self._agents.get(task.agent)
        if cfg is None:
            return ToolOutcome.error(f"Error: sub-agent {task.agent!r} is not configured in workbench.yaml any more")
        # D8: a further turn is a launch: a fresh envelope, bounded by what is left now (asked first in
        # wrap_tool_call when its configured budget exceeds it), never the old one granted again unchecked.
        envelope, refusal = self._envelope(ctx, cfg, approved=bool(getattr(ctx, "approved", False)))
        if refusal:
            return ToolOutcome.error(f"Refused: task {task.id} was not continued: {refusal}")
        if envelope != dict(task.envelope or {}):
            self.tasks.update_task(task.id, envelope=envelope)
            with self._engines_lock:  # its engine was built with the old envelope: the next one gets the new
                self._engines.pop(task.id, None)
        if self._charged_run(ctx, task) != ctx.run_id:  # B4: the further turn is this run's launch
            ctx.write(CHARGED, {**dict(ctx.get(CHARGED) or {}), task.id: ctx.run_id})
        self.runner.continue_task(task.id, clean_text(str(args.get("instructions") or "")))
        return f"Task {task.id} continues in the background; you will be notified here when it settles."

def _splice(messages: Sequence[Message], notices: Sequence[Mapping[str, Any]]) -> tuple[Message, ...]:
    """The request's messages with each notice as a user message where it was first given (by stored
    position: a compressed view marks its messages' stored indices)."""
    from workbench.harness.compression import stored_position

    out = list(messages)
    marked = any("stored" in m.meta for m in out)
    for n in sorted(notices, key=lambda n: n["at"], reverse=True):
        at = stored_position(out, int(n["at"])) if marked else min(int(n["at"]), len(out))
        out.insert(at, Message.user(str(n["text"]), task_notice=n["task_id"]))
    return tuple(out)


def _first_line(text: str, limit: int = 80) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


__all__ = ["ANSWERS", "COUNTED", "DelegationMiddleware", "NOTICES", "SubagentConfig", "SubagentsConfig"]
