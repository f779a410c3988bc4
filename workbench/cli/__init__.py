"""The headless command line (DESIGN §6): ``workbench run | resume | threads | show | tasks | compact | mcp``.

``workbench`` with no arguments opens the window. Everything else talks to the ``Session`` facade
only. Exit codes are a public interface:

    0 done · 1 failed · 2 usage or configuration error · 3 aborted (budget, stop) · 4 interrupted

``--json`` prints every event of the run (``Event.to_dict()``, one object per line, live ones too, each
with type/thread/run/step/time) and ends with exactly one ``{"type": "run_finished", "status", "thread",
"usage", ...}`` line: the engine's own ``run_finished`` events are not printed (a run that is resumed
in the same invocation would otherwise end several times), the summary line replaces them.

``resume`` continues a suspended run with decisions, or, when nothing is pending but the thread's last
run was cut off (failed, or in flight when the process died), recovers it from its last checkpoint.

``run`` and ``resume`` then wait for the thread's background sub-agent tasks (D7), answering their
questions as ``--approve`` says, unless ``--detach``; a task left waiting for a decision makes a done
run exit 4. ``--json`` prints their ``task_started`` / ``task_settled`` / ``task_progress`` events too.

Nothing heavy is imported at module level: ``workbench --help`` must stay instant.

The package: ``codes`` (exit codes, ``UsageError``), ``output`` (printing), ``decide`` (answers and
terminal prompts), ``run`` (run / resume), ``threads`` (threads / show), ``tasks`` (tasks, and waiting for
a run's background tasks), ``compact`` (compact, and a compression record in words); this module holds the parser
and ``main`` and re-exports the names other code imports from ``workbench.cli``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from pathlib import Path

from workbench.cli.codes import (
    CUT_OFF,
    EXIT_ABORTED,
    EXIT_DONE,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    STATUS_EXIT,
    UsageError,
)
from workbench.cli.decide import _Decider, _Suspended, _trust_decision
from workbench.cli.output import (
    _args_summary,
    _err,
    _fmt_time,
    _one_line,
    _OneLineFormatter,
    _Output,
    _question_summary,
    _setup_output,
    _short,
    event_dict,
    format_usage,
)
from workbench.cli.run import _drive, _open, _resume_hint, _run_async, _run_command, _Stopper, _suspended_result
from workbench.cli.threads import _artifact_entry, _print_thread, _show, _threads

__all__ = [  # the names importable from ``workbench.cli`` before it became a package
    "CUT_OFF", "EXIT_ABORTED", "EXIT_DONE", "EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_USAGE", "STATUS_EXIT",
    "UsageError", "_Decider", "_Suspended", "_trust_decision", "_args_summary", "_err", "_fmt_time",
    "_one_line", "_OneLineFormatter", "_Output", "_question_summary", "_setup_output", "_short", "event_dict",
    "format_usage", "_drive", "_open", "_resume_hint", "_run_async", "_run_command", "_Stopper",
    "_suspended_result", "_artifact_entry", "_print_thread", "_show", "_threads", "main", "_parser",
    "_open_window", "_workspace", "_report", "_OWN_OPTIONS", "_EPILOG", "_RESUME_HELP",
]

_EPILOG = """\
exit codes: 0 done, 1 failed, 2 usage or configuration error, 3 aborted (budget, stop),
            4 interrupted (decisions pending: continue with `workbench resume`)
Ctrl-C stops a run in flight (it ends aborted, exit 3) and its background tasks; at an approval
prompt it leaves the run suspended (exit 4); while waiting for background tasks it aborts them."""

_DETACH_HELP = (
    "exit when the run ends, without waiting for the thread's background sub-agent tasks (they stay pending "
    "in the workspace and go on the next time it is opened: `workbench resume --thread ID` waits for them)"
)

_RESUME_HELP = """\
Continue a thread. If its run is suspended (tool approvals, budget holds), answer the pending
questions with --approve / --budget-approve (or at the terminal) and carry on. If nothing is pending
but the thread's last run was cut off (it failed, or the process died mid-run), re-run the step in
flight from the last checkpoint (recover). If only its background sub-agent tasks are left (unsettled,
or waiting for decisions), wait for them. A thread with nothing to continue exits 2."""


# ------------------------------------------------------------------------------------------------------
# Argument parsing


def _parser() -> argparse.ArgumentParser:
    from workbench import __version__

    parser = argparse.ArgumentParser(
        prog="workbench",
        description="Agent Workbench. With no command, opens the window "
        "(`workbench [--workspace DIR] [--model M]`).",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"workbench {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--workspace", metavar="DIR", default=None, help="the workspace folder (default: the current folder)"
    )
    common.add_argument("--verbose", "-v", action="store_true", help="log details, with tracebacks")

    decide = argparse.ArgumentParser(add_help=False)
    decide.add_argument("--json", action="store_true", help="print every event as one JSON object per line")
    decide.add_argument(
        "--approve",
        choices=("ask", "all", "none"),
        default="ask",
        help="tool approvals: ask at the terminal (without one the run suspends, exit 4), approve all, "
        "or reject all (default: ask)",
    )
    decide.add_argument(
        "--trust",
        action="store_true",
        help="trust the workspace's workbench.yaml for this run (its api_base, allow rules, mounts outside "
        "it, MCP commands, sub-agent models); same as WORKBENCH_TRUST=1. Without it a terminal asks, "
        "else those settings are ignored",
    )
    decide.add_argument(
        "--budget-approve",
        choices=("ask", "yes", "no"),
        default="ask",
        help="budget holds: ask at the terminal (without one the run suspends, exit 4), continue, "
        "or stop (default: ask)",
    )

    run = sub.add_parser(
        "run",
        parents=[common, decide],
        help="run one turn headless",
        description="Run one turn on a thread (a new one unless --thread), headless.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument("--model", metavar="M", help="litellm model string for this run (overrides workbench.yaml)")
    run.add_argument("--api-base", metavar="URL", help="OpenAI-compatible base URL (overrides workbench.yaml)")
    run.add_argument("--thread", metavar="ID", help="continue this thread with a new turn")
    run.add_argument("prompt", metavar="PROMPT", help="the user message")
    run.add_argument("--detach", action="store_true", help=_DETACH_HELP)

    resume = sub.add_parser(
        "resume",
        parents=[common, decide],
        help="continue a suspended or cut-off run",
        description=_RESUME_HELP,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    resume.add_argument("--thread", metavar="ID", required=True, help="the thread to continue")
    resume.add_argument("--detach", action="store_true", help=_DETACH_HELP)

    threads = sub.add_parser("threads", parents=[common], help="list the workspace's threads")
    threads.add_argument("--json", action="store_true", help="one JSON object per thread")

    show = sub.add_parser(
        "show",
        parents=[common],
        help="print a thread: messages, todos, artifacts, usage, durable events",
    )
    show.add_argument("thread", metavar="THREAD", help="the thread id")
    show.add_argument("--json", action="store_true", help="print one JSON object")

    tasks = sub.add_parser(
        "tasks",
        parents=[common],
        help="list the workspace's sub-agent tasks",
        description="List sub-agent tasks (every thread's, or those one thread launched): id, agent, status, "
        "elapsed time, tokens, cost, last tool and a short description. Reads the workspace's store only: "
        "nothing is started or recovered.",
    )
    tasks.add_argument("--thread", metavar="ID", help="only the tasks this thread launched")
    tasks.add_argument("--json", action="store_true", help="one JSON object per task")

    compact = sub.add_parser(
        "compact",
        parents=[common],
        help="compress a thread's history now (what the model sees; nothing is deleted)",
        description="Compress a thread's context now, as the window's Compact now does: older tool results "
        "deduplicated and cut, older messages summarised with compression.summarize.model (a model call). "
        "The stored thread keeps every message; the model's view of it shrinks. Prints the tokens before and "
        "after, each strategy's figures and what left the view. A thread whose run is in flight in another "
        "process is refused (exit 2).",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    compact.add_argument("--thread", metavar="ID", required=True, help="the thread to compact")
    compact.add_argument("--json", action="store_true", help="print one JSON object")
    compact.add_argument(
        "--trust",
        action="store_true",
        help="trust the workspace's workbench.yaml (its api_base and compression.summarize.model, which the "
        "summary is sent to); same as WORKBENCH_TRUST=1",
    )
    from workbench.cli.mcp import add_parser as add_mcp

    add_mcp(sub, common)  # X5: `workbench mcp list | check NAME`
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The ``workbench`` console script. Returns the exit code."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] == ["__model-host"]:  # the bundle's model host process (engine/models/process_model.py)
        from workbench.engine.models.model_host import main as host_main

        return host_main(args_list[1:])
    if not args_list or (args_list[0].startswith("-") and args_list[0] not in _OWN_OPTIONS):
        return _open_window(args_list)  # `workbench [--workspace DIR] [--model M]`: the window's options
    parser = _parser()
    try:
        args = parser.parse_args(args_list)
    except SystemExit as e:  # argparse: --help (0) or a usage error (2)
        return e.code if isinstance(e.code, int) else EXIT_USAGE
    if args.command is None:
        return _open_window([])
    _setup_output(verbose=args.verbose)
    try:
        workspace = _workspace(args.workspace)
        if args.command == "threads":
            return asyncio.run(_threads(workspace, args))
        if args.command == "show":
            return asyncio.run(_show(workspace, args))
        if args.command == "tasks":
            from workbench.cli.tasks import _tasks

            return asyncio.run(_tasks(workspace, args))
        if args.command == "compact":
            from workbench.cli.compact import _compact

            return asyncio.run(_compact(workspace, args))
        if args.command == "mcp":
            from workbench.cli.mcp import _mcp

            return asyncio.run(_mcp(workspace, args))
        return _run_command(workspace, args)
    except KeyboardInterrupt:
        _err("workbench: interrupted")
        return EXIT_ABORTED
    except BaseException as e:  # noqa: BLE001 - every failure is one line and an exit code
        if isinstance(e, SystemExit):
            raise
        return _report(e, verbose=args.verbose)


_OWN_OPTIONS = ("-h", "--help", "--version")


def _open_window(argv: list[str]) -> int:
    """``workbench`` with no command: the window (``workbench.app``, imported only now)."""
    try:
        from workbench.app import main as app_main
    except ImportError as e:
        _err(f"workbench: the window is not available ({e}); run `workbench --help` for the headless commands")
        return EXIT_FAILED
    try:
        code = app_main(argv)
    except SystemExit as e:  # the window's own argument errors (2) or --help (0)
        return e.code if isinstance(e.code, int) else EXIT_USAGE
    return int(code) if isinstance(code, int) else EXIT_DONE


def _workspace(value: str | None) -> Path:
    ws = Path(value).expanduser() if value else Path.cwd()
    if not ws.is_dir():
        raise UsageError(f"workspace {ws} is not a folder")
    return ws.resolve()


def _report(e: BaseException, *, verbose: bool) -> int:
    """One line on stderr (a traceback only with --verbose); the exit code for the error's kind."""
    from workbench.errors import BuildError, ConfigError, ModelError, RunError, WorkbenchError

    if verbose:
        import traceback

        from workbench.redact import scrub  # R10: a traceback quotes messages that may echo a key
        from workbench.terminal_text import terminal_safe  # P3: and what a model or a server wrote

        sys.stderr.write(terminal_safe(scrub("".join(traceback.format_exception(e))), multiline=True))
    if isinstance(e, (UsageError, ConfigError, BuildError)):
        _err(f"workbench: {e}")
        return EXIT_USAGE
    if isinstance(e, RunError):  # refused by the engine before a run started (e.g. a run is pending)
        _err(f"workbench: {e}")
        return EXIT_USAGE
    if isinstance(e, (ModelError, WorkbenchError)):
        _err(f"workbench: {e}")
        return EXIT_FAILED
    import sqlite3

    if isinstance(e, sqlite3.DatabaseError):  # R1: the store itself failed (a damaged file, a full disk)
        where = next(iter(getattr(e, "__notes__", ())), "the thread store (.workbench/threads.sqlite3)")
        _err(f"workbench: {where}: {_one_line(str(e))} — see \"The thread store fails\" in docs/troubleshooting.md")
        return EXIT_FAILED
    hint = "" if verbose else " (run with --verbose for the traceback)"
    _err(f"workbench: internal error: {type(e).__name__}: {_one_line(str(e))}{hint}")
    return EXIT_FAILED
