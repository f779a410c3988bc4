"""The ``Session`` facade (DESIGN §6): what the window, the CLI and scripts use, and nothing else.

A session is one workspace (its ``workbench.yaml``, its store in ``.workbench/``) and one current
thread. It builds the agent from the config, runs turns, resumes suspended runs with decisions, and
publishes the engine's events: durable ones replayed first, then live ones.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.config import WorkbenchConfig, load_config
from workbench.decisions import ABANDON_MESSAGE, Drafts, PendingDecision, abandon, collect_pending, thread_questions
from workbench.engine.agent import Agent, Engine
from workbench.engine.events import Event
from workbench.engine.messages import Message
from workbench.engine.middleware import Question, RunResult
from workbench.engine.models.base import Model
from workbench.engine.store import RunRecord, Store, ThreadInfo
from workbench.engine.task_store import TaskRecord
from workbench.engine.usage import Usage
from workbench.errors import ConfigError, RunError
from workbench.session_connection import check_connection
from workbench.session_context import ContextCalls
from workbench.session_documents import DocumentCalls
from workbench.session_history import HistoryCalls, HistoryPage
from workbench.session_mcp import McpCalls, McpServerInfo, McpToolInfo
from workbench.session_rules import RuleCalls
from workbench.session_tasks import TaskCalls

if TYPE_CHECKING:
    from workbench.harness.skills import SkillScan

EventListener = Callable[[Event], None]


def make_model(config: WorkbenchConfig, *, api_key: str | None = None, threaded: bool = False,
               host: bool = False, shared: bool = False, key_looked_up: bool = False) -> Model:
    """The model the config names: ``demo`` is the offline scripted one, anything else goes to litellm.

    ``threaded`` (the window's own model) or ``host`` (its sub-agents'): the calls run in the model host
    process (``ProcessModel``), off the GUI's interpreter; with ``WORKBENCH_MODEL_PROCESS=0`` a threaded
    model runs on a worker thread here instead (``ThreadedModel``) and a host one in-process.
    ``shared`` (``workbench run``): calls with a key go to this user's shared model host, which keeps
    litellm imported between commands (``models/shared_host.py``); started connecting now, in the
    background, so it overlaps the rest of the set-up. Without a key, or with ``WORKBENCH_MODEL_DAEMON=0``,
    in-process. ``key_looked_up``: a None ``api_key`` is the answer of a look-up already made (no key),
    not a request to look one up here."""
    if config.model == "demo":
        from workbench.engine.models.demo import DemoModel

        return DemoModel()
    from workbench.engine.models.litellm_model import LiteLLMModel

    if api_key is None and not key_looked_up:
        from workbench.secrets import lookup_api_key

        api_key = lookup_api_key(config.model)
    model: Model = LiteLLMModel(config.model, api_base=config.api_base, api_key=api_key)
    if threaded or host:
        from workbench.engine.models import process_model

        if process_model.enabled():
            return process_model.ProcessModel(model)  # type: ignore[arg-type]
    if shared and api_key:
        from workbench.engine.models import shared_host
        from workbench.engine.models.process_model import ModelHost, ProcessModel

        if shared_host.enabled():
            remote = ProcessModel(model, host=ModelHost.shared_daemon, fallback=True)  # type: ignore[arg-type]
            remote.warm_up_in_background()
            return remote
    from workbench.engine.llm_setup import import_in_background

    import_in_background()  # issue 9: the import overlaps the rest of the set-up and the first sections
    if threaded:
        from workbench.engine.models.threaded import ThreadedModel

        model = ThreadedModel(model)
    return model


def _bind_delegation(stack: list[Any], engine: Engine, cfg: WorkbenchConfig, threaded: bool,
                     api_key: str | None = None, shared: bool = False) -> Any:
    """Wire the delegation middleware (if the workspace has sub-agents) to this engine: its runner, its
    store, and the model each sub-agent uses — its own ``model`` (on the workspace's ``api_base``) or
    the workspace's model itself (D5)."""
    from workbench.harness.delegation import DelegationMiddleware

    for mw in stack:
        if isinstance(mw, DelegationMiddleware):
            # The window (threaded) keeps the sub-agents' steps off its GUI loop: their own loop and thread.
            # A sub-agent's own model calls run in the model host process (no per-chunk work in this
            # interpreter), or, with the host switched off, on that loop directly.
            mw.bind(engine, _model_factory(engine, cfg, False, api_key, host=threaded, shared=shared),
                    own_loop=threaded)
            return mw
    return None


def _model_factory(engine: Engine, cfg: WorkbenchConfig, threaded: bool, api_key: str | None,
                   *, host: bool = False, shared: bool = False) -> Callable[[str | None], Model]:
    """The model for a name a workspace gives a helper (a sub-agent's, the summariser's): None = the
    workspace's own model; another name runs on the workspace's ``api_base``, with the key passed in only
    when it is the same provider's (another provider looks up its own)."""
    made: dict[str, Model] = {}

    def model_for(name: str | None) -> Model:
        if not name:
            return engine.agent.model
        if name not in made:
            same = name.split("/", 1)[0] == cfg.model.split("/", 1)[0]
            made[name] = make_model(cfg.with_overrides(model=name), api_key=api_key if same else None,
                                    threaded=threaded, host=host, shared=shared)
        return made[name]

    return model_for


class Session(ContextCalls, TaskCalls, McpCalls, HistoryCalls, RuleCalls, DocumentCalls):
    """One workspace and its current thread. Create with ``await Session.open(...)``."""

    _config_stamp: tuple[Any, ...] | None = None
    """G9: workbench.yaml as ``open`` read it (``config_stamp``); None when the config was passed in."""

    def __init__(self, workspace: Path, config: WorkbenchConfig, store: Store, engine: Engine, thread_id: str,
                 *, ignored: tuple[Any, ...] = (), notices: tuple[str, ...] = ()) -> None:
        self.workspace = workspace
        self.config = config
        self.store = store
        self.engine = engine
        self.thread_id = thread_id
        #: W1: the workspace settings left out because the workspace is not trusted (``trust.TrustRequest``s).
        self.ignored: tuple[Any, ...] = tuple(ignored)
        #: Session-level notices the window and the CLI show (e.g. which untrusted settings were ignored).
        self.notices: tuple[str, ...] = tuple(notices)
        self._task: asyncio.Task[RunResult] | None = None
        self._drafts = Drafts()  # Q2: per-item decisions of a batch left part-way

    @classmethod
    async def open(
        cls,
        workspace: Path | str,
        thread_id: str | None = None,
        *,
        config: WorkbenchConfig | None = None,
        model: Model | str | None = None,
        api_base: str | None = None,
        api_key: str | None = None,
        threaded_model: bool = False,
        shared_model_host: bool = False,
        store: Store | None = None,
        default_permission: str | None = None,
        trust: bool | str | None = None,
        default_model: str | None = None,
        default_api_base: str | None = None,
    ) -> Session:
        """Load ``workbench.yaml`` (ConfigError names file, key and line), build the agent, open the store.

        ``trust`` (W1) decides whether the workspace's widening settings (``workbench.trust.requests``)
        count: True uses them, False leaves them out, None asks the per-user trust record (or
        ``WORKBENCH_TRUST=1``). A str is the ``trust.settings_hash`` of the requests the person was
        shown and trusted: they count only while the file still asks for exactly those (a file changed
        since is opened untrusted, with a notice saying so). Left out, they are listed in
        ``session.ignored`` and ``session.notices``.
        A ``config`` passed in is the caller's own and is trusted unless ``trust`` is False.
        ``model`` / ``api_base`` passed in are the person's own choice for this session (a flag), never the
        workspace's (W2); they win over workbench.yaml. ``default_model`` / ``default_api_base`` are the
        user's defaults (Settings, G8): they apply only where workbench.yaml names no model (the API base
        only together with the default model), so one workspace's model or endpoint never reaches another.
        ``threaded_model`` (the window): the model calls run in this process's own model host (a child
        process). ``shared_model_host`` (``workbench run``): calls with a key run in this user's shared model
        host, which keeps litellm imported between commands (``WORKBENCH_MODEL_DAEMON=0``: in-process).
        """
        from workbench import trust as trust_mod
        from workbench.harness.stack import build_backend, build_middleware

        ws = Path(workspace).expanduser().resolve()
        if not ws.is_dir():
            raise ConfigError(f"workspace {ws} is not a folder")
        stamp = None if config is not None else config_stamp(ws)  # before reading: a later change shows
        cfg = config or load_config(ws)
        ignored: tuple[Any, ...] = ()
        notices: tuple[str, ...] = ()
        changed = False
        if trust is None:
            trusted = config is not None or trust_mod.env_trusted() or trust_mod.is_trusted(ws, cfg)
        elif isinstance(trust, str):  # W1: what was shown is trusted, not what the file holds by now
            trusted = trust_mod.settings_hash(trust_mod.requests(cfg, ws)) == trust
            changed = not trusted
        else:
            trusted = trust
        if not trusted:
            ignored = tuple(trust_mod.requests(cfg, ws))
            if ignored:
                cfg = trust_mod.safe_config(cfg, ws)
                notices = (trust_mod.ignored_notice(ws, list(ignored), changed=changed),)
        ignored_default = any(r.key == "permissions.default" for r in ignored)
        if default_permission is not None and (ignored_default or not _sets_default_permission(ws)):
            # The user's default (Settings) applies where the workspace does not choose one itself.
            from dataclasses import replace

            cfg = replace(cfg, permissions=replace(cfg.permissions, default=default_permission))
        if config is None and (default_model or default_api_base):  # G8: the workspace's file wins
            from workbench.settings_scope import apply_user_defaults

            cfg = apply_user_defaults(cfg, ws, model=default_model, api_base=default_api_base,
                                      ignored={r.key for r in ignored})
        if isinstance(model, str) or api_base is not None:
            cfg = cfg.with_overrides(model=model if isinstance(model, str) else None, api_base=api_base)
        store = store or Store.for_workspace(ws)
        backend = build_backend(cfg, ws, store.path)
        stack = build_middleware(cfg, ws, backend)
        from workbench.harness.rule_proposal import apply_session_rules

        apply_session_rules(stack, ws)  # Q3: rules saved "for this session" outlive a reopen (G9)
        looked_up = False
        if api_key is None and (model is None or isinstance(model, str)) and cfg.model != "demo":
            from workbench.secrets import lookup_api_key

            # off the loop: the OS keyring may take a while (D-Bus, or a prompt to unlock it), and in the
            # window this loop is the GUI's
            api_key, looked_up = await asyncio.to_thread(lookup_api_key, cfg.model), True
        the_model = model if model is not None and not isinstance(model, str) else make_model(
            cfg, api_key=api_key, threaded=threaded_model, shared=shared_model_host, key_looked_up=looked_up
        )
        agent = Agent(
            the_model,
            instructions=cfg.instructions,
            middleware=stack,
            backend=backend,
            max_prompt_section_tokens=cfg.max_prompt_section_tokens,
            max_steps=None,  # B5: the stack's step budget holds the run at its step limit instead
        )
        engine = Engine(agent, store)
        delegation = _bind_delegation(stack, engine, cfg, threaded_model, api_key, shared_model_host)
        from workbench.harness.compression import bind_compression

        bind_compression(stack, store, _model_factory(engine, cfg, threaded_model, api_key, shared=shared_model_host),
                         engine.agent.model.name, engine.prompt_log)
        if thread_id is None:
            thread_id = store.create_thread()
        elif store.thread(thread_id) is None:
            raise ConfigError(f"no thread {thread_id!r} in {store.path}")
        session = cls(ws, cfg, store, engine, thread_id, ignored=ignored, notices=notices)
        session._config_stamp = stamp
        session._overrides = (model if isinstance(model, str) else None, api_base)
        session._delegation = delegation
        session._attach_mcp()  # X5: the servers' changes reach the Servers panel as events
        session._recover_tasks()
        return session

    def _recover_tasks(self) -> None:
        """D5: the background tasks of this thread that a closed (or killed) process left unfinished go
        on here; settled ones wait by id. Only this thread's: a run of another thread (the CLI's) must
        not start tasks it would cut again when it exits."""
        d = self._delegation
        if d is not None and d.runner is not None:
            d.runner.recover([self.thread_id])

    def setting_sources(self, user: Any = None) -> dict[str, Any]:
        """G8: where this session's model, API base and default permission come from, given the user
        settings ``user`` (``settings_scope.Sourced`` by key: ``model``, ``api_base``, ``permissions.default``)."""
        from workbench.settings_scope import resolve

        model, api_base = getattr(self, "_overrides", (None, None))
        return resolve(self.workspace, user, override_model=model, override_api_base=api_base,
                       ignored={r.key for r in self.ignored})

    @staticmethod
    def save_workspace_settings(workspace: Path | str, changes: Mapping[str, str | None]) -> Any:
        """G8: write the person's Settings changes into the workspace's workbench.yaml, one targeted edit
        per key (comments and other keys kept), renewing its trust when it was trusted before
        (``settings_scope.save_workspace_values``; ConfigError when the result would not load)."""
        from workbench.settings_scope import save_workspace_values

        return save_workspace_values(workspace, changes)

    def config_changed(self) -> bool:
        """G9: whether the workspace's workbench.yaml changed since ``open`` read it (the window reopens
        the workspace before the next run). False for a session opened with a ``config`` of its own."""
        return self._config_stamp is not None and config_stamp(self.workspace) != self._config_stamp

    # -- runs ----------------------------------------------------------------------------------------------
    @property
    def model_name(self) -> str:
        return self.engine.agent.model.name

    @property
    def running(self) -> bool:
        return self.engine.is_running(self.thread_id)

    async def run(self, prompt: str) -> RunResult:
        """One user turn: ``RunResult(status, answer, usage, pending)``."""
        return await self._track(self.engine.run(self.thread_id, prompt))

    async def resume(self, decisions: Mapping[str, Any]) -> RunResult:
        """Answer every pending question (tool approvals, budget holds) and continue the run."""
        result = await self._track(self.engine.resume(self.thread_id, decisions))
        self._drafts.clear(self.thread_id)  # Q2: the batch was answered
        return result

    async def recover(self) -> RunResult:
        """Re-run the step that failed or was cut off by a crash, from the last checkpoint."""
        return await self._track(self.engine.recover(self.thread_id))

    async def stop(self) -> None:
        """The run in flight ends ``aborted``; its partial answer is kept."""
        self.engine.stop(self.thread_id)
        task = self._task
        if task is not None and not task.done():
            try:
                await asyncio.shield(task)
            except Exception:
                pass

    async def _track(self, coro: Any) -> RunResult:
        task = asyncio.ensure_future(coro)
        self._task = task
        try:
            return await task
        finally:
            if self._task is task:
                self._task = None

    # -- events ----------------------------------------------------------------------------------------------
    def subscribe(self, listener: EventListener, *, replay: bool = True,
                  recent: int | None = None) -> Callable[[], None]:
        """Call ``listener`` with this thread's durable events so far (if ``replay``), then every new one.

        Mid-run, "so far" includes the run's durable events not stored yet (they are written with the
        step's checkpoint); each durable event reaches the listener once, in order. ``recent`` (G13): of
        the stored ones only the newest ``recent`` in full and, before them, all but the per-call events
        (``replay_events``) — what the window needs of a long thread.
        """
        replayed: set[tuple[str, int]] = set()  # in-flight events replayed here: never delivered again
        if replay:
            events = self.store.events(self.thread_id) if recent is None else self.replay_events(recent)
            stored = events[-1].seq if events else 0
            unsaved = [e for e in self.engine.unsaved_events(self.thread_id) if e.seq > stored]
            replayed = {(e.thread_id, e.seq) for e in unsaved}
            for event in events + unsaved:
                listener(event)

        def on_event(event: Event) -> None:
            if event.thread_id != self.thread_id or (event.thread_id, event.seq) in replayed:
                return
            listener(event)

        return self.engine.subscribe(on_event)

    async def events(self, *, replay: bool = True) -> AsyncIterator[Event]:
        """Durable events replayed first, then live ones as they happen (until the caller stops)."""
        queue: asyncio.Queue[Event] = asyncio.Queue()
        unsubscribe = self.subscribe(queue.put_nowait, replay=replay)
        try:
            while True:
                yield await queue.get()
        finally:
            unsubscribe()

    # -- committed state ------------------------------------------------------------------------------------
    def _state(self, *, messages: bool = False) -> dict[str, Any]:
        cp = self.store.latest_checkpoint(self.thread_id, messages=messages)
        return cp.state if cp else {}

    @property
    def status(self) -> str:
        """new | running | done | failed | aborted | interrupted (the last run's end).

        R9: ``running`` while a run lives, here or in another process; a run whose process died
        reads ``failed`` (recover() finishes it, R2)."""
        if self.running:
            return "running"
        info = self.store.thread(self.thread_id)  # the store says running only for a live claim
        return info.status if info else "new"

    @property
    def holder(self) -> str | None:
        """R7: who runs this thread right now ("process 123 on host, since …"), or None."""
        claim = self.store.holder(self.thread_id)
        return claim.describe() if claim is not None else None

    @property
    def messages(self) -> list[Message]:
        return [Message.from_dict(m) for m in self._state(messages=True).get("messages", [])]

    @property
    def todos(self) -> list[dict[str, Any]]:
        return list((self._state().get("todos") or {}).get("items", []))

    @property
    def artifacts(self) -> dict[str, dict[str, Any]]:
        return dict(self._state().get("artifacts") or {})

    @property
    def usage(self) -> Usage:
        return self.store.thread_usage(self.thread_id)

    def budget_figures(self) -> list[dict[str, Any]]:
        """G11: each budget's committed spent/limit per field for the thread's newest run (the same
        computation the budget enforces; live updates come as ``budget_updated`` events)."""
        from workbench.harness.budget import measure_budgets

        budgets = self.config.effective_budget  # B5: with the default step hold
        if not budgets:
            return []
        run = self.last_run
        run_id = run.id if run is not None else ""
        run_usage = Usage.total(u for _, u in self.store.usage_calls(self.thread_id, run_id)) if run_id else Usage()
        cp = self.store.latest_checkpoint(self.thread_id, messages=False)
        steps = cp.step if cp is not None and run_id and cp.run_id == run_id else 0
        return measure_budgets(budgets, run_usage=run_usage, thread_usage=self.usage,
                               state=cp.state if cp is not None else {}, run_id=run_id, run_steps=steps)

    @property
    def documents(self) -> list[dict[str, Any]]:
        """The newest ``documents_reported`` entries per source (instructions, skills)."""
        latest: dict[str, list[dict[str, Any]]] = {}
        for e in self.store.events(self.thread_id, types={"documents_reported"}):
            latest[e.data.get("source", "")] = list(e.data.get("documents", []))
        return [d for docs in latest.values() for d in docs]

    @property
    def pending(self) -> tuple[Question, ...]:
        """Questions a suspended run waits on; they survive a restart (R3)."""
        cp = self.store.latest_checkpoint(self.thread_id, messages=False)  # G13: not the whole history
        if cp is None or cp.status != "interrupted":
            return ()
        return tuple(Question.from_dict(q) for q in cp.pending.get("questions", []))

    # -- decisions (Q1, Q2) ---------------------------------------------------------------------------------
    def pending_decisions(self) -> list[PendingDecision]:
        """Q1: every pending decision in the workspace (this thread's first, then other threads'), with
        its source, age and any decision already made for it (Q2)."""
        store = self._task_store()
        tasks = {t.child_thread: t for t in store.tasks(None)} if store is not None else None
        return collect_pending(self.store, self.thread_id, self._drafts.all(), tasks)

    def record_decision(self, question_id: str, decision: Mapping[str, Any], *, thread_id: str | None = None) -> None:
        """Q2: keep one question's decision (Session.resume format) until the whole batch is decided;
        leaving part-way keeps it. RunError when the question is not pending (any more)."""
        tid = thread_id or self.thread_id
        self._drafts.record(tid, thread_questions(self.store, tid)[0], question_id, decision)

    def decided(self, thread_id: str | None = None) -> dict[str, dict[str, Any]]:
        """Q2: the decisions recorded so far for a thread's pending questions."""
        tid = thread_id or self.thread_id
        return self._drafts.for_thread(tid, thread_questions(self.store, tid)[0])

    async def abandon(self, message: str = ABANDON_MESSAGE) -> RunResult:
        """"Stop this run" on a run waiting for decisions: it ends ``aborted`` without running a call."""
        self._drafts.clear(self.thread_id)
        return await abandon(self.engine, self.thread_id, self.pending, self.resume, message)

    # -- threads ---------------------------------------------------------------------------------------------
    def threads(self) -> list[ThreadInfo]:
        """The person's threads (a sub-agent's thread belongs to its task: see ``tasks``)."""
        children = self._task_store().child_threads() if self._task_store() is not None else set()
        return [t for t in self.store.threads() if t.id not in children]

    @staticmethod
    def trust_requests(workspace: Path | str) -> list[Any]:
        """W1: what the workspace's workbench.yaml asks for that the person has not trusted yet
        (``trust.TrustRequest``s; empty when it asks for nothing, is trusted, or WORKBENCH_TRUST=1).
        A bad file raises ConfigError, as ``open`` would."""
        from workbench import trust

        ws = Path(workspace).expanduser().resolve()
        if trust.env_trusted():
            return []
        cfg = load_config(ws)
        return [] if trust.is_trusted(ws, cfg) else trust.requests(cfg, ws)

    @staticmethod
    def trust_workspace(workspace: Path | str, expected_hash: str | None = None) -> None:
        """W1: remember that the person trusts what the workspace asks for (until it changes).

        ``expected_hash``: the ``trust.settings_hash`` of the requests the person was shown; when the
        file asks for anything else by now, nothing is recorded and ``trust.SettingsChanged`` (a
        ConfigError) is raised, so the caller asks again. Without it, whatever the file asks for now
        is trusted."""
        from workbench import trust

        ws = Path(workspace).expanduser().resolve()
        trust.trust(ws, load_config(ws), expected=expected_hash)

    @staticmethod
    def list_threads(workspace: Path | str) -> list[ThreadInfo]:
        """A workspace's threads, newest first, without loading its config or creating anything."""
        path = Path(workspace).expanduser().resolve() / ".workbench" / "threads.sqlite3"
        if not path.exists():
            return []
        store = Store(path)
        try:
            return store.threads()
        finally:
            store.close()

    def last_error(self) -> str | None:
        """The newest run's error message, if it failed or was stopped."""
        run = self.last_run
        if run is not None and run.status == "running" and not self.running:
            if self.store.holder(self.thread_id) is not None:
                return None  # R9: live in another process, not cut off
            return "The run was cut off (the app closed or the process died). Recover it to go on from its last step."
        return run.error if run else None

    @property
    def last_run(self) -> RunRecord | None:
        """The thread's newest run (its id, status, usage across resumes, error), or None."""
        runs = self.store.runs(self.thread_id)
        return runs[-1] if runs else None

    def new_thread(self) -> str:
        self._ensure_idle()
        self.thread_id = self.store.create_thread()
        return self.thread_id

    def switch_thread(self, thread_id: str) -> None:
        self._ensure_idle()
        if self.store.thread(thread_id) is None:
            raise RunError(f"no thread {thread_id!r} in this workspace")
        self.thread_id = thread_id
        self._recover_tasks()

    def rename_thread(self, thread_id: str, title: str) -> None:
        self.store.rename_thread(thread_id, title.strip() or "Untitled")

    def delete_thread(self, thread_id: str) -> None:
        """Delete a thread, its tasks' threads and everything stored for them.

        R7, R9: refused while a run holds the thread — in this window, or in another process (its claim;
        the error names the holder, as Compact now does): deleting it would cut that run off mid-step."""
        if self.engine.is_running(thread_id):
            raise RunError("stop the run before deleting its thread")
        self._refuse_if_held(thread_id)
        from workbench.engine.task_store import ACTIVE, SqliteTaskStore

        tasks = self._task_store() or SqliteTaskStore(self.store)
        active = [t.id for t in tasks.tasks(thread_id) if t.status in ACTIVE]
        if active:
            raise RunError(f"abort the thread's {len(active)} unfinished task(s) first ({', '.join(active)}): "
                           "they would go on without a thread to report to")
        from workbench.errors import ThreadBusyError
        from workbench.harness.compression import CompressionStore

        # Hold the thread's claim while deleting, so no run can start on it meanwhile (the claim is taken
        # only when free or when its holder is gone); deleting the thread's rows removes the claim too.
        try:
            claim = self.store.claim(thread_id)
        except ThreadBusyError:
            self._refuse_if_held(thread_id)  # the holder, in the words above
            raise
        try:
            self._delete_thread_rows(thread_id, tasks, CompressionStore(self.store))
        except BaseException:
            self.store.release(claim)
            raise

    def _refuse_if_held(self, thread_id: str) -> None:
        """R7: a thread whose run lives in another process is refused with its holder named (the words of
        ``compact``'s refusal)."""
        holder = self.store.holder(thread_id)
        if holder is None:
            return
        import os
        import socket

        if holder.pid == os.getpid() and holder.host == socket.gethostname():
            raise RunError(f"thread {thread_id} has a run in flight in this process ({holder.describe()}): "
                           "stop it before deleting the thread")
        raise RunError(f"thread {thread_id} is running in another process ({holder.describe()}): "
                       "wait for that run to end, or stop it there, before deleting the thread")

    def _delete_thread_rows(self, thread_id: str, tasks: Any, records: Any) -> None:
        for child in tasks.delete_for_thread(thread_id):  # its tasks' threads go with it
            records.delete_thread(child)
            self.store.delete_thread(child)
        records.delete_thread(thread_id)
        if self.engine.prompt_log is not None:
            self.engine.prompt_log.delete_thread(thread_id)
        self.store.delete_thread(thread_id)

    def _ensure_idle(self) -> None:
        if self.running:
            raise RunError("a run is in flight on this thread: stop it first")

    # -- workspace files (the Instructions panel edits AGENTS.md through these) ----------------------------
    @property
    def backend(self) -> Any:
        return self.engine.agent.backend

    def middleware(self, kind: type) -> Any:
        """The stack's middleware of a type, or None (panels read their limits from it)."""
        return next((m for m in self.engine.agent.middleware if isinstance(m, kind)), None)

    @property
    def sandbox(self) -> dict[str, Any]:
        """E5: whether the agent's commands run in a sandbox, for the status bar: ``{"active": bool,
        "text": "bubblewrap — …" or "none — why; …"}``; {} when the agent has no shell tool."""
        from workbench.harness.execute import ExecuteMiddleware

        mw = self.middleware(ExecuteMiddleware)
        if mw is None or not mw.tools():
            return {}
        return {"active": mw.sandbox.active, "text": mw.sandbox.describe()}

    async def survey_skills(self) -> Any:
        """The Skills panel's Reload: every skill in source order, skipped ones with reasons (S1-S6)."""
        from workbench.harness.skills import survey_skills

        c = self.config.skills
        return await survey_skills(self.backend, c.sources, max_skills=c.max_skills,
                                   max_description_chars=c.max_description_chars,
                                   max_section_tokens=c.max_section_tokens, max_scanned=c.max_scanned)

    async def close(self) -> None:
        if self.running:
            await self.stop()
        if self._delegation is not None and self._delegation.runner is not None:
            await self._delegation.close()  # D5: its tasks stay pending in the store, recovered later
        await self._close_mcp()  # X3: every MCP server process stops with the session
        if self.engine.prompt_log is not None:
            try:
                self.engine.prompt_log.flush()
            except Exception:  # the store may be gone (a deleted workspace): nothing else to keep
                pass
        model = self.engine.agent.model
        close = getattr(model, "close", None)
        if callable(close):
            close()
        self.store.close()


def config_stamp(workspace: Path) -> tuple[Any, ...]:
    """G9: what the workspace's workbench.yaml holds now: its size and a hash of its bytes (not the
    mtime alone: an editor's save without a change reloads nothing); ("absent",) without one."""
    import hashlib
    import stat

    from workbench.config import config_path
    from workbench.config.reader import MAX_CONFIG_BYTES

    path = config_path(workspace)
    try:
        st = path.stat()
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_CONFIG_BYTES:
            # never read here (a FIFO would block the window): load_config refuses such a file anyway
            return ("not read", st.st_mode, st.st_size, st.st_mtime_ns)
        with path.open("rb") as f:
            return (st.st_size, hashlib.sha256(f.read(MAX_CONFIG_BYTES + 1)).hexdigest())
    except FileNotFoundError:
        return ("absent",)
    except OSError as e:
        return ("unreadable", str(e))


def _sets_default_permission(workspace: Path) -> bool:
    """Whether the workspace's workbench.yaml (already validated) says ``permissions.default``."""
    import yaml

    from workbench.config import YAML_VALUE_ERRORS, config_path, read_config_text

    try:
        text = read_config_text(workspace, config_path(workspace))  # only the workspace's own file
        data = yaml.safe_load(text or "") or {}
    except (ConfigError, yaml.YAMLError, RecursionError, *YAML_VALUE_ERRORS):
        return False
    permissions = data.get("permissions") if isinstance(data, dict) else None
    return isinstance(permissions, dict) and "default" in permissions


def __getattr__(name: str) -> Any:
    """``SkillScan``, the skills panel's value type, is imported on first use: a session that never
    scans skills does not load the SKILL.md parser."""
    if name == "SkillScan":
        from workbench.harness.skills import SkillScan

        return SkillScan
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    # the facade
    "Session", "check_connection", "config_stamp", "make_model",
    # the value types the window and the CLI may take from it (AGENTS.md, layering rules)
    "Event", "HistoryPage", "McpServerInfo", "McpToolInfo", "Message", "PendingDecision", "Question", "RunRecord",
    "RunResult", "SkillScan", "TaskRecord", "ThreadInfo", "Usage",
]
