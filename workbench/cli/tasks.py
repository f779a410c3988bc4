"""Sub-agent tasks at the command line (D5, D7, D9): ``workbench tasks``, and ``run``/``resume`` waiting
for the thread's background tasks before they exit (unless ``--detach``).

``workbench tasks`` reads the workspace's task table without opening a ``Session``: opening one builds
the agent and recovers the background tasks a previous process left running (D5) — a listing would
start their sub-agents only to cut them off again when it exits, and needs no config, model or trust.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.cli.codes import EXIT_DONE, UsageError
from workbench.cli.decide import _Decider, _Suspended
from workbench.cli.output import _err, _one_line, _Output, _question_summary, _safe, task_figures

if TYPE_CHECKING:
    from workbench.engine.middleware import Question
    from workbench.engine.task_store import TaskRecord
    from workbench.session import Session

#: A task left waiting for a decision, with its questions.
Waiting = tuple["TaskRecord", "Sequence[Question]"]


# ------------------------------------------------------------------------------------------------------
# workbench tasks


async def _tasks(workspace: Path, args: argparse.Namespace) -> int:
    from workbench.engine.store import Store
    from workbench.engine.task_store import SqliteTaskStore

    path = workspace / ".workbench" / "threads.sqlite3"
    if not path.exists():
        if args.thread:
            raise UsageError(f"no thread {args.thread!r} in {workspace} (it has no threads yet)")
        if not args.json:
            _err(f"no tasks in {workspace}")
        return EXIT_DONE
    store = Store(path)
    try:
        if args.thread and store.thread(args.thread) is None:
            raise UsageError(f"no thread {args.thread!r} in {path}")
        records = SqliteTaskStore(store).tasks(args.thread or None)
        rows = [_row(store, t) for t in records]
    finally:
        store.close()
    if args.json:
        for row in rows:
            print(json.dumps(row, default=str), flush=True)
        return EXIT_DONE
    if not rows:
        _err(f"no tasks {'launched by thread ' + args.thread if args.thread else 'in ' + str(workspace)}")
        return EXIT_DONE
    _print_table(rows)
    if any(r["status"] == "pending" and not r["live"] for r in rows):
        _err("* pending, but no process runs it now (a `--detach`ed or killed run): it goes on when the "
             "workspace is next opened — `workbench resume --thread PARENT` waits for it")
    return EXIT_DONE


def _row(store: Any, t: TaskRecord) -> dict[str, Any]:
    from workbench.engine.task_store import SETTLED

    # A settled task's usage is stored with it; a running one's is its thread's so far (each step's).
    usage = t.usage if t.status in SETTLED else store.thread_usage(t.child_thread)
    holder = store.holder(t.child_thread)
    return {
        **t.to_dict(),
        "usage": usage.to_dict(),
        "parent_thread": t.parent_thread,
        "background": t.background,
        "last_tool": t.last_tool,
        "created": t.created,
        "settled": t.settled,
        "error": t.error,
        # a run of its sub-agent is in flight in a live process (its claim, R7)
        "live": holder is not None,
    }


def _print_table(rows: Sequence[dict[str, Any]]) -> None:
    table = [("ID", "AGENT", "STATUS", "ELAPSED", "TOKENS", "COST", "LAST TOOL", "DESCRIPTION")]
    for r in rows:
        u = r["usage"]
        status = r["status"] + ("*" if r["status"] == "pending" and not r["live"] else "")
        cost = f"${u['cost_usd']:.4f}" if u.get("cost_usd") is not None else "—"
        # X5, P3: the agent's name, the last tool's and the description came from a model or a workspace
        table.append((_safe(r["task_id"]), _safe(r["agent"]), _safe(status), _fmt_elapsed(r["elapsed_seconds"]),
                      f"{int(u.get('total_tokens') or 0):,}", cost, _safe(r["last_tool"] or "—"),
                      _one_line(r["description"], 60)))
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]) - 1)]
    for row in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[-1])
    sys.stdout.flush()


def _fmt_elapsed(seconds: float) -> str:
    s = max(0.0, float(seconds))
    if s < 60:
        return f"{s:.1f} s"
    if s < 3600:
        return f"{int(s // 60)} m {int(s % 60):02d} s"
    return f"{int(s // 3600)} h {int(s % 3600 // 60):02d} m"


# ------------------------------------------------------------------------------------------------------
# run / resume: wait for the thread's background tasks


def _unsettled(session: Session) -> list[TaskRecord]:
    from workbench.engine.task_store import SETTLED

    # a foreground task is one of the run's own tool calls: its questions come through the run
    return [t for t in session.tasks() if t.background and t.status not in SETTLED]


async def wait_for_background(session: Session, output: _Output, decider: _Decider) -> list[Waiting]:
    """Wait until every background task of the session's thread has settled, answering the questions of
    those that go ``awaiting_decision`` as ``decider`` says (``--approve``/``--budget-approve``, or the
    terminal). Returns the tasks left waiting (no terminal to ask, or Ctrl-C at a prompt).

    Ctrl-C while waiting aborts the tasks not settled (each settles ``aborted``); a second one quits at
    once (they are cut as a crash would cut them, and go on when the workspace is next opened, D5).
    Each settling is printed by ``output`` as its ``task_settled`` event arrives.
    """
    from workbench.cli.run import _Stopper

    unsettled = _unsettled(session)
    if not unsettled:
        return []
    n = len(unsettled)
    output.line(f"waiting for {n} background task{'s' if n != 1 else ''} of thread {session.thread_id} "
                "(Ctrl-C aborts them; --detach does not wait)")
    left: dict[str, Waiting] = {}

    async def abort_all() -> None:
        await abort_tasks(session, output)

    stopper = _Stopper(session, stop=abort_all, what="aborting the background tasks")
    while True:
        await stopper.call(session.wait_for_tasks)
        if stopper.stopped:
            return []
        if not answer_task_questions(session, output, decider, left):
            # every task has settled, or waits for a decision nobody here can give
            return [left[t.id] for t in _unsettled(session) if t.id in left]


def answer_task_questions(session: Session, output: _Output, decider: _Decider, left: dict[str, Waiting],
                          only: Sequence[str] | None = None) -> bool:
    """Answer the questions of the background tasks waiting for a decision (those of ``only``, else all),
    as ``decider`` says; a task nobody here can answer goes into ``left`` (and is not asked again). True
    when any answer was given. After the run, and during it when the run waits for such a task before its
    next model call (B2: a hard budget it holds), so a headless run never waits on a question it could
    answer itself."""
    answered = False
    for task in _unsettled(session):
        if task.status != "awaiting_decision" or task.id in left or (only is not None and task.id not in only):
            continue
        questions = [d.question for d in session.pending_decisions()
                     if d.source == "task" and d.task_id == task.id]
        if not questions:  # answered elsewhere (the window) meanwhile
            continue
        try:
            decisions = decider.decide_all(questions, f"sub-agent {task.agent}, task {task.id}")
        except _Suspended:
            decisions = None
        if decisions is None:  # listed with the resume command at the end
            left[task.id] = (task, questions)
            continue
        for q in questions:
            output.line(f"task {_safe(task.id)} asked: {_safe(q.kind)} {_question_summary(q.kind, q.payload)} → "
                        f"{_safe(decisions[q.id].get('decision'))}")
        from workbench.decisions import bind

        # R3/Q: each answer names the question it was given for: a task asking another by then
        # refuses it, runs nothing and waits again (asked again on the next pass here)
        session.answer_task(task.id, bind(decisions, questions))
        answered = True
    return answered


async def abort_tasks(session: Session, output: _Output) -> None:
    """Abort the session thread's background tasks that have not settled (Ctrl-C stops them with the run)."""
    for task in _unsettled(session):
        try:
            await session.abort_task(task.id)
        except Exception as e:  # noqa: BLE001 - one task's abort must not keep the others running
            output.line(f"workbench: could not abort task {_safe(task.id)}: {_one_line(str(e))}")


def detached_note(session: Session, output: _Output) -> None:
    """``--detach``: say what happens to the tasks left behind."""
    unsettled = _unsettled(session)
    if not unsettled:
        return
    ids = ", ".join(_safe(t.id) for t in unsettled)
    one = len(unsettled) == 1
    output.line(f"--detach: {len(unsettled)} background task{'' if one else 's'} not settled ({ids}); "
                f"{'it goes' if one else 'they go'} on the next time the workspace is opened (`workbench resume "
                f"--thread {session.thread_id}` waits for {'it' if one else 'them'}; `workbench tasks` lists "
                f"{'it' if one else 'them'})")


def task_waiting_lines(waiting: Sequence[Waiting]) -> list[str]:
    out = []
    for task, questions in waiting:
        out.append(f"task {_safe(task.id)} ({_safe(task.agent)}, {task_figures(task.usage)}) waits for "
                   f"{len(questions)} decision{'s' if len(questions) != 1 else ''}:")
        out.extend(f"  {_safe(q.id)}  {_safe(q.kind)}  {_question_summary(q.kind, q.payload)}" for q in questions)
    return out
