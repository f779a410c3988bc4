"""``workbench run`` and ``workbench resume``: open the session, drive the run, answer, stop on Ctrl-C, then
wait for the thread's background tasks unless ``--detach`` (``tasks.py``)."""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import signal
import sys
import threading
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.cli.codes import CUT_OFF, EXIT_DONE, EXIT_FAILED, EXIT_INTERRUPTED, STATUS_EXIT, UsageError
from workbench.cli.decide import _Decider, _Suspended, _trust_decision
from workbench.cli.output import _err, _Output

if TYPE_CHECKING:
    from workbench.engine.middleware import Question, RunResult
    from workbench.session import Session


def _run_command(workspace: Path, args: argparse.Namespace) -> int:
    return asyncio.run(_run_async(workspace, args))


async def _open(workspace: Path, thread: str | None, **kw: Any) -> Session:
    from workbench.session import Session

    return await Session.open(workspace, thread, **kw)


def _start_the_model_early(model: str | None) -> None:
    """Issue 9: the first request waits for litellm's import (seconds), so a model named on the command
    line starts it at once, overlapping trust, config and store set-up: with the shared model host on
    and the model's key in the environment (as ``make_model`` will then use the host), a connection to
    this user's host is made on a thread (the host is started if none runs, and imports litellm as it
    starts); with the host off, litellm is imported here, on a thread. A key only in the keyring or the
    key file is left to ``make_model`` (no second keyring look-up, no key-store import racing the main
    thread's), as is everything when the model is named in workbench.yaml. ``make_model`` takes over
    what is under way (``ModelHost.shared_daemon`` keeps the connection; the import is done once)."""
    if not model or model.strip() in ("", "demo"):
        return
    from workbench.engine.llm_setup import import_in_background
    from workbench.engine.models import shared_host

    if not shared_host.enabled():
        import_in_background()
        return
    from workbench.secrets import env_var_for

    if not os.environ.get(env_var_for(model.strip())):
        return
    # Imported here, not on the thread: two threads importing the same package graph can meet a
    # partially initialised module.
    from workbench.engine.models.process_model import ModelHost
    from workbench.errors import ModelError

    def connect() -> None:
        try:
            ModelHost.shared_daemon()
        except (ModelError, OSError):  # the model's own attempt reports it (or falls back in-process)
            pass

    threading.Thread(target=connect, name="workbench-model-early", daemon=True).start()


async def _run_async(workspace: Path, args: argparse.Namespace) -> int:
    _start_the_model_early(getattr(args, "model", None) if args.command == "run" else None)
    output = _Output(args.json)
    interactive = bool(sys.stdin is not None and sys.stdin.isatty())
    decider = _Decider(args.approve, args.budget_approve, interactive=interactive, output=output)
    trusted = _trust_decision(workspace, args, interactive=interactive)
    if args.command == "run":
        if args.model is not None and not args.model.strip():
            raise UsageError("--model: expected a model name such as openai/gpt-4.1-mini")
        session = await _open(workspace, args.thread, model=args.model, api_base=args.api_base, trust=trusted,
                              shared_model_host=True)
    else:
        model, api_base, store = _model_of_the_run(workspace, args.thread)
        if model is not None or api_base is not None:
            _err(f"workbench: continuing with the model the run was started with: {_flags(model, api_base)}")
        try:
            session = await _open(workspace, args.thread, model=model, api_base=api_base, store=store,
                                  trust=trusted, shared_model_host=True)
        except BaseException:
            if store is not None:
                store.close()
            raise
    for notice in session.notices:
        _err(f"workbench: {notice}")
    # E5: whether the agent's commands run in a sandbox, said once, when the agent first asks to run one
    # (before it is approved or runs): a run without commands prints nothing more than before.
    output.sandbox_line = _sandbox_line(session)
    try:
        unsubscribe = session.subscribe(output.on_event, replay=False)
        stop_answering = _answer_tasks_the_run_waits_for(session, output, decider)
        output.task_error = lambda task_id: getattr(session.task(task_id), "error", None)
        try:
            return await _drive(session, workspace, args, output, decider)
        finally:
            stop_answering()
            unsubscribe()
    finally:
        import warnings

        # Closing cuts the model calls of background tasks still running (--detach, another thread's
        # recovered tasks, D5): litellm then drops the stream coroutine its executor hop returned, and
        # Python warns at exit that it was never awaited. Nothing is lost (the task is recovered later).
        warnings.filterwarnings("ignore", message=r"coroutine .* was never awaited", category=RuntimeWarning)
        await session.close()



async def _drive(
    session: Session, workspace: Path, args: argparse.Namespace, output: _Output, decider: _Decider
) -> int:
    from workbench.cli.tasks import abort_tasks, detached_note, wait_for_background
    from workbench.engine.middleware import RunResult

    first: Callable[[], Awaitable[RunResult]] | None = None
    result: RunResult | None = None
    detach = bool(getattr(args, "detach", False))
    if args.command == "run":
        if session.pending:
            raise UsageError(
                f"thread {session.thread_id} has a run waiting for decisions: continue it with "
                f"{_resume_hint(workspace, session.thread_id, session.pending)}"
            )
        prompt = args.prompt
        _remember_command_line_model(session, args.model, args.api_base)
        first = lambda: session.run(prompt)  # noqa: E731
    else:
        pending = session.pending
        if pending:
            decisions = _decide(decider, pending)
            if decisions is None:
                result = _suspended_result(session, pending)
            else:
                first = lambda: session.resume(decisions)  # noqa: E731
        elif session.status in CUT_OFF:
            first = session.recover
        elif not detach and _has_unsettled_tasks(session):
            result = _last_result(session)  # nothing of the run to continue: its background tasks go on
        else:
            status = session.status
            ended = "has no run yet" if status == "new" else f"its last run ended {status}"
            raise UsageError(
                f"thread {session.thread_id} has nothing to resume: no decision is pending and {ended}; "
                f"start a new turn with `workbench run --thread {session.thread_id} PROMPT`"
            )

    stopper = _Stopper(session)
    if first is not None:
        result, left = await _asking_again(session, stopper, decider, first)
        while not left and result.status == "interrupted" and result.pending and not stopper.stopped:
            decisions = _decide(decider, result.pending)
            if decisions is None:
                break
            answers = decisions
            result, left = await _asking_again(session, stopper, decider, lambda: session.resume(answers))
    assert result is not None
    # D7: the thread's background tasks — aborted with a run stopped by Ctrl-C, else waited for
    # (their questions answered as --approve says) unless --detach.
    waiting: list[Any] = []
    if stopper.stopped:
        await abort_tasks(session, output)
    elif detach:
        detached_note(session, output)
    else:
        waiting = await wait_for_background(session, output, decider)
    questions = [*(result.pending if result.status == "interrupted" else ()), *(q for _t, qs in waiting for q in qs)]
    hint = _resume_hint(workspace, result.thread_id or session.thread_id, questions) \
        if result.status == "interrupted" or waiting else None
    output.finish(result, session, hint, waiting)
    code = STATUS_EXIT.get(result.status, EXIT_FAILED)
    return EXIT_INTERRUPTED if waiting and code == EXIT_DONE else code  # a task's own end never changes it


# -- the model a run was started with (R2) -----------------------------------------------------------------
# `workbench run --model M --api-base URL` chooses for that run only; `workbench resume` takes no such
# flags. A resume (decisions, or recovering a run cut off by kill -9) used to open with whatever
# workbench.yaml or the defaults name — with none, the offline demo model, which went on with the run
# (under --approve all it wrote notes.md). So `run` keeps its flags beside the thread, sealed as this
# account's choice, and `resume` of that same run opens with them. Not a flag on `resume`: the person
# would have to repeat them, and the wrong model is what the bug was.


def _sealed_parts(thread_id: str, model: str | None, api_base: str | None, since: float) -> tuple[str, ...]:
    return ("command-line model", thread_id, model or "", api_base or "", repr(since))


def _remember_command_line_model(session: Session, model: str | None, api_base: str | None) -> None:
    """Keep this run's ``--model`` / ``--api-base`` for a later ``resume`` (none given: forget them)."""
    import time

    from workbench import seal

    since = time.time()  # before the run starts: the run the flags are for is the first one after it
    mark = ""
    if model is not None or api_base is not None:
        try:
            mark = seal.seal(*_sealed_parts(session.thread_id, model, api_base, since))
        except seal.SealError as e:  # kept unsealed: a resume then refuses instead of guessing
            _err(f"workbench: warning: {e}")
    session.store.save_command_line_model(session.thread_id, model, api_base, since, mark)


def _model_of_the_run(workspace: Path, thread_id: str) -> tuple[str | None, str | None, Any]:
    """(model, api base, the opened store) for resuming ``thread_id``: the flags ``workbench run`` was given
    when the thread's latest run is the one they were given for, else (None, None) — the workspace's
    model, as before. The store (None: there is none yet) is handed to the session, not opened twice.

    A record this account did not seal is refused, not used: the thread store is a file in the workspace
    and can come with the folder, and an API base from it would receive the conversation and the key."""
    from workbench import seal
    from workbench.engine.store import Store

    path = workspace / ".workbench" / "threads.sqlite3"
    if not path.exists():
        return None, None, None
    store = Store(path)
    try:
        record = store.command_line_model(thread_id)
        if record is None:
            return None, None, store
        model, api_base, since, mark = record
        if len([r for r in store.runs(thread_id) if r.started >= since]) != 1:
            return None, None, store  # a later turn (the window's, say) chose its own model
        if not seal.sealed(mark, *_sealed_parts(thread_id, model, api_base, since)):
            raise UsageError(
                f"thread {thread_id}'s run was started with a model named on the command line, but this "
                f"workspace's record of it was not made by your account, so it is not used; start a new turn "
                f"with the model you choose: `workbench run --thread {thread_id} --model M [--api-base URL] PROMPT`")
        return model, api_base, store
    except BaseException:
        store.close()
        raise


def _flags(model: str | None, api_base: str | None) -> str:
    parts = [*(["--model", model] if model is not None else []), *(["--api-base", api_base] if api_base else [])]
    return " ".join(shlex.quote(p) for p in parts)


def _answer_tasks_the_run_waits_for(session: Session, output: _Output, decider: _Decider) -> Callable[[], None]:
    """B2, D9: when the run waits for background tasks before its next model call (they hold enough of a
    hard budget to carry it past its limit) and one of them waits for a decision, answer it now as
    ``--approve`` / ``--budget-approve`` say (or at the terminal) — not after the run, which would wait on
    it until the task's time limit. A task nobody here can answer (no terminal to ask, ``--approve ask``)
    stops the run, saying why — as the run's own question would suspend it — instead of a wait as long as
    the task's time limit; the task's question is listed with the resume command at the end.
    Returns the unsubscribe."""
    from workbench.cli.tasks import answer_task_questions

    loop = asyncio.get_running_loop()
    left: dict[str, Any] = {}
    stopping: list[bool] = []

    def answer(ids: list[str]) -> None:
        answer_task_questions(session, output, decider, left, only=ids)
        stuck = [i for i in ids if i in left]
        if stuck and not stopping:
            stopping.append(True)
            output.line(f"the run waits for background task {', '.join(stuck)} before its next model call (a hard "
                        "budget it holds), and the task waits for a decision no one here can give: stopping the run")
            loop.create_task(session.stop())

    def on_event(event: Any) -> None:
        waiting = (event.data or {}).get("waiting") if event.type == "budget_updated" else None
        if isinstance(waiting, dict) and waiting.get("tasks"):
            # not inside the engine's own event call: answering resumes the task, and a prompt waits on a person
            loop.call_soon_threadsafe(answer, [str(t) for t in waiting["tasks"]])

    return session.subscribe(on_event, replay=False)


def _decide(decider: _Decider, pending: Sequence[Question]) -> dict[str, dict[str, Any]] | None:
    """The decisions for these questions (None: left pending), each bound to the question it answers
    (R3/Q: its fingerprint), so a resume applies it only if the run still waits on that very question."""
    from workbench.decisions import bind

    try:
        decisions = decider.decide_all(pending)
    except _Suspended:
        return None
    return bind(decisions, pending) if decisions is not None else None


async def _asking_again(session: Session, stopper: _Stopper, decider: _Decider,
                        start: Callable[[], Awaitable[RunResult]]) -> tuple[RunResult, bool]:
    """Run ``start`` (a run or a resume): its result, and whether the person left the questions pending.

    A resume whose questions changed since they were shown — another process answered them and the run
    asked again, maybe under the same id — is refused by the engine with nothing run (R3, R7): say so
    and ask the questions pending now (Ctrl-D or Ctrl-C leaves them pending)."""
    from workbench.decisions import QuestionChanged

    while True:
        try:
            return await stopper.call(start), False
        except QuestionChanged as e:
            _err(f"workbench: {e}")
            pending = session.pending
            if not pending:
                raise
            decisions = _decide(decider, pending)
            if decisions is None:
                return _suspended_result(session, pending), True
            answers = decisions
            start = lambda: session.resume(answers)  # noqa: E731


def _sandbox_line(session: Session) -> str | None:
    """``sandbox for commands (execute): bubblewrap — …`` or ``…: none — why; …``; None without the tool."""
    from workbench.harness.execute import ExecuteMiddleware

    mw = session.middleware(ExecuteMiddleware)
    return mw.sandbox_line() if mw is not None and mw.tools() else None


def _has_unsettled_tasks(session: Session) -> bool:
    from workbench.cli.tasks import _unsettled

    return bool(_unsettled(session))


def _last_result(session: Session) -> RunResult:
    """The thread's last run as a RunResult (``resume`` on a thread whose only work left is its tasks)."""
    from workbench.engine.middleware import RunResult
    from workbench.engine.usage import Usage

    run = session.last_run
    status = run.status if run is not None and run.status in STATUS_EXIT else "done"
    return RunResult(status, "", run.usage if run is not None else Usage(), (), None, session.thread_id,
                     run.id if run is not None else "")


def _suspended_result(session: Session, pending: Sequence[Question]) -> RunResult:
    """A RunResult for a suspended run we did not continue (resume with nobody to decide)."""
    from workbench.engine.middleware import RunResult
    from workbench.engine.usage import Usage

    run = session.last_run
    usage = run.usage if run is not None else Usage()
    return RunResult("interrupted", "", usage, tuple(pending), None, session.thread_id, run.id if run else "")


class _Stopper:
    """Ctrl-C (or SIGTERM, or SIGHUP: the terminal was closed) while a run is in flight stops it (it ends
    ``aborted``: exit 3) — so its command's process group is ended before the workbench goes (E4), where
    SIGHUP's default would end the workbench at once and leave the command running.

    The handler is installed only around the run itself, so Ctrl-C at an approval prompt still
    interrupts the prompt. A second Ctrl-C gives up waiting for the run to wind down. ``stop`` and
    ``what`` replace what the first Ctrl-C does and says (waiting for background tasks: abort them).
    """

    def __init__(self, session: Session, *, stop: Callable[[], Awaitable[None]] | None = None,
                 what: str = "stopping the run") -> None:
        self.session = session
        self.stopped = False
        self._stop = stop or session.stop
        self._what = what
        self._stop_task: asyncio.Task[None] | None = None
        self._main: asyncio.Task[Any] | None = None

    def _on_signal(self) -> None:
        if self.stopped:
            if self._main is not None:
                self._main.cancel()
            return
        self.stopped = True
        try:
            _err(f"\nworkbench: {self._what} (Ctrl-C again to quit at once)")
        except OSError:  # SIGHUP: the terminal is gone (EIO); the stop matters, not the words
            pass
        self._stop_task = asyncio.ensure_future(self._stop())

    async def call(self, start: Callable[[], Awaitable[Any]]) -> Any:
        loop = asyncio.get_running_loop()
        installed: list[int] = []
        for sig in (signal.SIGINT, getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)):
            if sig is None:
                continue
            try:
                loop.add_signal_handler(sig, self._on_signal)
                installed.append(sig)
            except (NotImplementedError, RuntimeError, ValueError):  # Windows, or not the main thread
                pass
        self._main = asyncio.ensure_future(start())
        try:
            try:
                return await asyncio.shield(self._main)
            except asyncio.CancelledError:
                if self._main.done() and not self._main.cancelled():
                    return self._main.result()
                raise KeyboardInterrupt from None
            except KeyboardInterrupt:  # no signal handler (Windows): stop and wait for the abort
                self.stopped = True
                await self._stop()
                return await self._main
        finally:
            for sig in installed:
                try:
                    loop.remove_signal_handler(sig)
                except (NotImplementedError, RuntimeError, ValueError):
                    pass
            if self._stop_task is not None:
                try:
                    await self._stop_task
                except Exception:  # noqa: BLE001 - the run's own end is what we report
                    pass



def _resume_hint(workspace: Path, thread: str, pending: Sequence[Question]) -> str:
    parts = ["workbench", "resume", "--thread", thread]
    try:
        if workspace != Path.cwd().resolve():
            parts += ["--workspace", str(workspace)]
    except OSError:
        parts += ["--workspace", str(workspace)]
    kinds = {q.kind for q in pending}
    if "tool_approval" in kinds or not kinds:
        parts += ["--approve", "all"]
    if "budget_hold" in kinds:
        parts += ["--budget-approve", "yes"]
    hint = " ".join(shlex.quote(p) for p in parts)
    if kinds - {"tool_approval", "budget_hold"}:
        hint += "  (at a terminal, to answer the other questions)"
    return hint
