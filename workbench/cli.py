"""The headless command line (DESIGN §6): ``workbench run | resume | threads | show``.

``workbench`` with no arguments opens the window. Everything else talks to the ``Session`` facade
only. Exit codes are a public interface:

    0 done · 1 failed · 2 usage or configuration error · 3 aborted (budget, stop) · 4 interrupted

``--json`` prints every event of the run (``Event.to_dict()``, one object per line, live ones too, each
with type/thread/run/step/time) and ends with exactly one ``{"type": "run_finished", "status", "thread",
"usage", ...}`` line: the engine's own ``run_finished`` events are not printed (a run that is resumed
in the same invocation would otherwise end several times), the summary line replaces them.

``resume`` continues a suspended run with decisions, or, when nothing is pending but the thread's last
run was cut off (failed, or in flight when the process died), recovers it from its last checkpoint.

Nothing heavy is imported at module level: ``workbench --help`` must stay instant.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import shlex
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from workbench.engine.events import Event
    from workbench.engine.middleware import Question, RunResult
    from workbench.session import Session

EXIT_DONE = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_ABORTED = 3
EXIT_INTERRUPTED = 4

STATUS_EXIT: dict[str, int] = {
    "done": EXIT_DONE,
    "failed": EXIT_FAILED,
    "aborted": EXIT_ABORTED,
    "interrupted": EXIT_INTERRUPTED,
}

#: Thread statuses that mean the last run was cut off (failed, or in flight when the process died).
CUT_OFF = ("failed", "running")

_EPILOG = """\
exit codes: 0 done, 1 failed, 2 usage or configuration error, 3 aborted (budget, stop),
            4 interrupted (decisions pending: continue with `workbench resume`)
Ctrl-C stops a run in flight (it ends aborted, exit 3); at an approval prompt it leaves the run
suspended (exit 4)."""

_RESUME_HELP = """\
Continue a thread. If its run is suspended (tool approvals, budget holds), answer the pending
questions with --approve / --budget-approve (or at the terminal) and carry on. If nothing is pending
but the thread's last run was cut off (it failed, or the process died mid-run), re-run the step in
flight from the last checkpoint (recover). A thread with nothing to continue exits 2."""


class UsageError(Exception):
    """A command-line mistake the user can fix: one line on stderr, exit 2."""


class _Suspended(Exception):
    """Ctrl-C at an approval prompt: the run stays suspended, nothing was decided."""


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

    resume = sub.add_parser(
        "resume",
        parents=[common, decide],
        help="continue a suspended or cut-off run",
        description=_RESUME_HELP,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    resume.add_argument("--thread", metavar="ID", required=True, help="the thread to continue")

    threads = sub.add_parser("threads", parents=[common], help="list the workspace's threads")
    threads.add_argument("--json", action="store_true", help="one JSON object per thread")

    show = sub.add_parser(
        "show",
        parents=[common],
        help="print a thread: messages, todos, artifacts, usage, durable events",
    )
    show.add_argument("thread", metavar="THREAD", help="the thread id")
    show.add_argument("--json", action="store_true", help="print one JSON object")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The ``workbench`` console script. Returns the exit code."""
    args_list = list(sys.argv[1:] if argv is None else argv)
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

        traceback.print_exception(e, file=sys.stderr)
    if isinstance(e, (UsageError, ConfigError, BuildError)):
        _err(f"workbench: {e}")
        return EXIT_USAGE
    if isinstance(e, RunError):  # refused by the engine before a run started (e.g. a run is pending)
        _err(f"workbench: {e}")
        return EXIT_USAGE
    if isinstance(e, (ModelError, WorkbenchError)):
        _err(f"workbench: {e}")
        return EXIT_FAILED
    hint = "" if verbose else " (run with --verbose for the traceback)"
    _err(f"workbench: internal error: {type(e).__name__}: {_one_line(str(e))}{hint}")
    return EXIT_FAILED


# ------------------------------------------------------------------------------------------------------
# Output plumbing


def _setup_output(*, verbose: bool) -> None:
    """Never crash on an odd terminal encoding; log warnings as one line each (tracebacks with -v)."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            try:
                reconfigure(errors="replace")
            except (ValueError, OSError):
                pass
    root = logging.getLogger()
    if any(getattr(h, "_workbench_cli", False) for h in root.handlers):
        return
    handler = logging.StreamHandler(sys.stderr)
    handler._workbench_cli = True  # type: ignore[attr-defined]
    if verbose:
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        root.setLevel(logging.INFO)
    else:
        handler.setFormatter(_OneLineFormatter())
        root.setLevel(logging.WARNING)
    root.addHandler(handler)


class _OneLineFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        msg = _one_line(record.getMessage())
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            msg += f": {type(exc).__name__}: {_one_line(str(exc))}"
        return f"workbench: {record.levelname.lower()}: {msg}"


def _one_line(text: str, limit: int = 400) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _err(text: str) -> None:
    from workbench.redact import scrub  # R10: an error may quote a provider body that echoes a key

    try:
        print(scrub(text), file=sys.stderr, flush=True)
    except (BrokenPipeError, ValueError):
        pass


def _short(value: Any, limit: int = 80) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _args_summary(arguments: Mapping[str, Any] | None) -> str:
    """The gist of a tool call's arguments: its path (or pattern, name…), else compact JSON."""
    if not arguments:
        return ""
    for key in ("path", "file_path", "pattern", "name", "query", "command"):
        value = arguments.get(key)
        if isinstance(value, str) and value:
            return _short(value, 80)
    parts = []
    for key, value in arguments.items():
        if isinstance(value, (list, tuple)):
            parts.append(f"{key}=[{len(value)} item{'s' if len(value) != 1 else ''}]")
        elif isinstance(value, Mapping):
            parts.append(f"{key}={{{len(value)} key{'s' if len(value) != 1 else ''}}}")
        else:
            parts.append(f"{key}={_short(value, 40)}")
    return _short(" ".join(parts), 80)


def format_usage(usage: Any) -> str:
    """``3 model calls · 1,234 tokens (1,200 in, 34 out) · $0.0012`` (or ``no price`` for unpriced models)."""
    u = usage.to_dict() if hasattr(usage, "to_dict") else dict(usage or {})
    calls = int(u.get("calls") or 0)
    total = int(u.get("total_tokens") or 0)
    parts = [f"{calls} model call{'s' if calls != 1 else ''}"]
    detail = f"{int(u.get('input_tokens') or 0):,} in, {int(u.get('output_tokens') or 0):,} out"
    if u.get("thoughts_tokens"):
        detail += f", {int(u['thoughts_tokens']):,} thoughts"
    if u.get("cached_tokens"):
        detail += f", {int(u['cached_tokens']):,} cached"
    parts.append(f"{total:,} tokens ({detail})")
    cost = u.get("cost_usd")
    if cost is not None:
        parts.append(f"${cost:.4f}" + (" + unpriced calls" if u.get("unpriced_calls") else ""))
    elif calls:
        parts.append("no price for this model")
    return " · ".join(parts)


def event_dict(event: Event) -> dict[str, Any]:
    """One ``--json`` line: the event's type, thread, run, step and time, then its fields."""
    return event.to_dict()


def _fmt_time(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


class _Output:
    """Renders events: JSON lines (``--json``), or answer text on stdout and tool lines on stderr."""

    def __init__(self, as_json: bool, out: TextIO | None = None, err: TextIO | None = None) -> None:
        self.as_json = as_json
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.run_id = ""
        self.step = 0
        self.streamed = False  # some answer text reached stdout
        self._mid_line = False  # stdout's last character was not a newline
        self._calls: dict[str, tuple[str, Any]] = {}
        self._broken = False

    # -- low level -----------------------------------------------------------------------------------
    def _write(self, stream: TextIO, text: str) -> None:
        if self._broken:
            return
        try:
            stream.write(text)
            stream.flush()
        except BrokenPipeError:  # `workbench run --json | head`: stop writing, keep running
            self._broken = True
            try:
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, stream.fileno())
            except (OSError, ValueError):
                pass

    def line(self, text: str) -> None:
        """A status line on stderr, after ending a half-written answer line on stdout."""
        if self._mid_line:
            self._write(self.out, "\n")
            self._mid_line = False
        self._write(self.err, text + "\n")

    def json_line(self, obj: Mapping[str, Any]) -> None:
        self._write(self.out, json.dumps(obj, default=str) + "\n")

    # -- events --------------------------------------------------------------------------------------
    def on_event(self, event: Event) -> None:
        if event.run_id:
            self.run_id = event.run_id
        self.step = event.step
        if self.as_json:
            if event.type != "run_finished":  # the summary line replaces the engine's (see the module doc)
                self.json_line(event_dict(event))
            return
        d = event.data
        if event.type == "model_delta":
            text = d.get("text") or ""
            if text:
                self._write(self.out, text)
                self.streamed = True
                self._mid_line = not text.endswith("\n")
        elif event.type == "tool_call_started":
            self._calls[str(d.get("call_id"))] = (str(d.get("name")), d.get("arguments"))
        elif event.type == "tool_call_finished":
            name, arguments = self._calls.pop(str(d.get("call_id")), (str(d.get("name")), None))
            summary = _args_summary(arguments)
            edited = " (arguments edited by the person)" if d.get("edited") else ""  # P6
            self.line(f"→ {name}{' ' + summary if summary else ''} … {d.get('status')}{edited}")
        elif event.type == "interrupt_raised":
            if d.get("kind") == "tool_approval":
                name, arguments = self._calls.pop(str(d.get("call_id")), (str(d.get("tool")), None))
                summary = _args_summary(arguments)
                reason = f" ({_short(d.get('reason'), 120)})" if d.get("reason") else ""
                self.line(f"→ {name}{' ' + summary if summary else ''} … needs approval{reason}")
            else:
                self.line(f"⏸ {d.get('kind')}: {_short(d.get('reason') or d.get('id') or '', 120)}")
        elif event.type == "budget_exceeded":
            self.line(f"budget exceeded: {d.get('field')} {d.get('spent')} of {d.get('limit')}")
        elif event.type == "budget_hold":
            self.line(f"budget hold: {d.get('field')} {d.get('spent')} of {d.get('limit')}")

    # -- the end -------------------------------------------------------------------------------------
    def finish(self, result: RunResult, session: Session, hint: str | None) -> None:
        usage = result.usage
        usage_dict = usage.to_dict() if hasattr(usage, "to_dict") else dict(usage or {})
        thread = result.thread_id or session.thread_id
        if result.status == "failed" and result.error:
            self.line(f"workbench: {_one_line(result.error)}")
        if self.as_json:
            final: dict[str, Any] = {
                "type": "run_finished",
                "thread": thread,
                "run": result.run_id or self.run_id,
                "step": self.step,
                "time": round(time.time(), 3),
                "status": result.status,
                "usage": usage_dict,
                "answer": result.answer,
            }
            if result.error:
                final["error"] = result.error
            if result.pending:
                final["pending"] = [q.to_dict() for q in result.pending]
            if hint:
                final["resume"] = hint
            if result.status == "interrupted":
                self._print_pending(result.pending, hint)
            self.json_line(final)
            return
        if result.status in ("done", "aborted") and result.answer and not self.streamed:
            self._write(self.out, result.answer)
            self._mid_line = not result.answer.endswith("\n")
        if self._mid_line:
            self._write(self.out, "\n")
            self._mid_line = False
        if result.status == "interrupted":
            self._print_pending(result.pending, hint)
        reason = ""
        if result.status == "aborted" and result.error:
            reason = f" ({_one_line(result.error, 160)})"
        self.line(f"[{result.status}{reason}] thread {thread} · {format_usage(usage_dict)}")

    def _print_pending(self, pending: Sequence[Question], hint: str | None) -> None:
        if pending:
            self.line(f"waiting for {len(pending)} decision{'s' if len(pending) != 1 else ''}:")
        for q in pending:
            p = q.payload
            self.line(f"  {q.id}  {q.kind}  {_question_summary(q.kind, p)}")
        if hint:
            self.line(f"to continue: {hint}")


# ------------------------------------------------------------------------------------------------------
# Decisions


class _Decider:
    """Answers pending questions from --approve / --budget-approve, or at the terminal.

    ``decide_all`` returns the decisions for every question, or None when one of them needs a person
    and there is no terminal (the run then stays suspended: exit 4).
    """

    def __init__(self, approve: str, budget: str, *, interactive: bool, output: _Output) -> None:
        self.approve = approve
        self.budget = budget
        self.interactive = interactive
        self.output = output
        self.always: set[str] = set()  # tools the user answered "always" for, in this invocation

    def decide_all(self, pending: Sequence[Question]) -> dict[str, dict[str, Any]] | None:
        decisions: dict[str, dict[str, Any]] = {}
        for q in pending:
            d = self.decide(q)
            if d is None:
                return None
            decisions[q.id] = d
        return decisions

    def decide(self, q: Question) -> dict[str, Any] | None:
        if q.kind == "tool_approval":
            tool = str(q.payload.get("tool") or "")
            if self.approve == "all" or tool in self.always:
                return {"decision": "approve"}
            if self.approve == "none":
                return {"decision": "reject", "message": "rejected by --approve none"}
            return self._ask_tool(q) if self.interactive else None
        if q.kind == "budget_hold":
            if self.budget == "yes":
                return {"decision": "approve"}
            if self.budget == "no":
                return {"decision": "reject", "message": "refused by --budget-approve no"}
            return self._ask_budget(q) if self.interactive else None
        return self._ask_other(q) if self.interactive else None

    # -- the terminal --------------------------------------------------------------------------------
    def _input(self, prompt: str) -> str:
        """One answer from the terminal; Ctrl-C or end of input leaves the run suspended."""
        # asyncio.run's own SIGINT handler only cancels the main task, which a blocking read never
        # notices: make Ctrl-C raise here, from before the prompt shows until it is answered.
        previous = None
        try:
            previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        except ValueError:  # not the main thread
            pass
        try:
            self.output.line("")
            sys.stderr.write(prompt)
            sys.stderr.flush()
            line = sys.stdin.readline()
        except KeyboardInterrupt:
            raise _Suspended() from None
        finally:
            if previous is not None:
                signal.signal(signal.SIGINT, previous)
        if not line:  # EOF: nobody to ask
            raise _Suspended()
        return line.strip()

    def _ask_tool(self, q: Question) -> dict[str, Any]:
        p = q.payload
        self.output.line(f"approval needed: {p.get('tool')}")
        for key, value in (p.get("arguments") or {}).items():
            self.output.line(f"  {key}: {_short(value, 200)}")
        if p.get("reason"):
            self.output.line(f"  reason: {_one_line(str(p['reason']), 200)}")
        while True:
            answer = self._input("approve? [y]es / [n]o / [a]lways for this tool: ").lower()
            if answer in ("y", "yes"):
                return {"decision": "approve"}
            if answer in ("a", "always"):
                self.always.add(str(p.get("tool") or ""))
                return {"decision": "approve", "always": "session"}
            if answer in ("n", "no"):
                reason = self._input("reason for the model (optional): ")
                return {"decision": "reject", "message": reason or "rejected by the user"}

    def _ask_budget(self, q: Question) -> dict[str, Any]:
        self.output.line("budget hold: " + _question_summary(q.kind, q.payload))
        while True:
            answer = self._input("continue with the full limit again? [y]es / [n]o: ").lower()
            if answer in ("y", "yes"):
                return {"decision": "approve"}
            if answer in ("n", "no"):
                reason = self._input("reason (optional): ")
                return {"decision": "reject", "message": reason or "stopped by the user"}

    def _ask_other(self, q: Question) -> dict[str, Any]:
        self.output.line(f"{q.kind}: {_short(q.payload, 300)}")
        while True:
            answer = self._input("[y]es / [n]o, or type an answer: ")
            if answer.lower() in ("y", "yes"):
                return {"decision": "approve"}
            if answer.lower() in ("n", "no"):
                return {"decision": "reject", "message": "rejected by the user"}
            if answer:
                return {"decision": "respond", "message": answer}


def _question_summary(kind: str, p: Mapping[str, Any]) -> str:
    if kind == "tool_approval":
        return f"{p.get('tool')} {_short(p.get('arguments') or {}, 100)}"
    if kind == "budget_hold":
        held = f" (holds {p.get('tool')} {_args_summary(p.get('arguments'))})" if p.get("tool") else ""
        return _one_line(str(p.get("reason") or ""), 160) + held
    return _short(dict(p), 120)


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


# ------------------------------------------------------------------------------------------------------
# run / resume


def _run_command(workspace: Path, args: argparse.Namespace) -> int:
    return asyncio.run(_run_async(workspace, args))


async def _open(workspace: Path, thread: str | None, **kw: Any) -> Session:
    from workbench.session import Session

    return await Session.open(workspace, thread, **kw)


async def _run_async(workspace: Path, args: argparse.Namespace) -> int:
    output = _Output(args.json)
    interactive = bool(sys.stdin is not None and sys.stdin.isatty())
    decider = _Decider(args.approve, args.budget_approve, interactive=interactive, output=output)
    trusted = _trust_decision(workspace, args, interactive=interactive)
    if args.command == "run":
        if args.model is not None and not args.model.strip():
            raise UsageError("--model: expected a model name such as openai/gpt-4.1-mini")
        session = await _open(workspace, args.thread, model=args.model, api_base=args.api_base, trust=trusted)
    else:
        session = await _open(workspace, args.thread, trust=trusted)
    for notice in session.notices:
        _err(f"workbench: {notice}")
    try:
        unsubscribe = session.subscribe(output.on_event, replay=False)
        try:
            return await _drive(session, workspace, args, output, decider)
        finally:
            unsubscribe()
    finally:
        await session.close()


def _trust_decision(workspace: Path, args: argparse.Namespace, *, interactive: bool) -> bool | None:
    """W1: whether the workspace's widening settings count for this run.

    ``--trust`` or ``WORKBENCH_TRUST=1``: yes. Nothing asked for, or trusted before with the same
    settings: None (``Session.open`` finds that in the record). At a terminal: ask (y/N), listing
    exactly what is asked for; yes is remembered. Otherwise: no (``Session.open`` ignores them and the
    notice goes to stderr).
    """
    from workbench import trust
    from workbench.config import load_config

    if getattr(args, "trust", False) or trust.env_trusted():
        return True
    config = load_config(workspace)  # a bad file: ConfigError, exit 2
    reqs = trust.requests(config, workspace)
    if not reqs or trust.is_trusted(workspace, config):
        return None
    if not interactive:
        return False
    _err(f"The workspace {workspace} asks for settings that need your trust:\n{trust.describe(reqs)}")
    previous = None
    try:
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    except ValueError:  # not the main thread
        pass
    try:
        sys.stderr.write("Trust this workspace? [y/N] ")
        sys.stderr.flush()
        answer = sys.stdin.readline().strip().lower()  # Ctrl-C: KeyboardInterrupt, exit 3, nothing run
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    if answer not in ("y", "yes"):
        return False
    try:
        trust.trust(workspace, config)
    except OSError as e:
        _err(f"workbench: could not remember the trust ({e}); trusted for this run only")
    return True


async def _drive(
    session: Session, workspace: Path, args: argparse.Namespace, output: _Output, decider: _Decider
) -> int:
    from workbench.engine.middleware import RunResult

    first: Callable[[], Awaitable[RunResult]]
    if args.command == "run":
        if session.pending:
            raise UsageError(
                f"thread {session.thread_id} has a run waiting for decisions: continue it with "
                f"{_resume_hint(workspace, session.thread_id, session.pending)}"
            )
        prompt = args.prompt
        first = lambda: session.run(prompt)  # noqa: E731
    else:
        pending = session.pending
        if pending:
            try:
                decisions = decider.decide_all(pending)
            except _Suspended:
                decisions = None
            if decisions is None:
                result = _suspended_result(session, pending)
                output.finish(result, session, _resume_hint(workspace, session.thread_id, pending))
                return EXIT_INTERRUPTED
            first = lambda: session.resume(decisions)  # noqa: E731
        elif session.status in CUT_OFF:
            first = session.recover
        else:
            status = session.status
            ended = "has no run yet" if status == "new" else f"its last run ended {status}"
            raise UsageError(
                f"thread {session.thread_id} has nothing to resume: no decision is pending and {ended}; "
                f"start a new turn with `workbench run --thread {session.thread_id} PROMPT`"
            )

    stopper = _Stopper(session)
    result = await stopper.call(first)
    while result.status == "interrupted" and result.pending and not stopper.stopped:
        try:
            decisions = decider.decide_all(result.pending)
        except _Suspended:
            decisions = None
        if decisions is None:
            break
        result = await stopper.call(lambda: session.resume(decisions))
    hint = _resume_hint(workspace, result.thread_id or session.thread_id, result.pending) \
        if result.status == "interrupted" else None
    output.finish(result, session, hint)
    return STATUS_EXIT.get(result.status, EXIT_FAILED)


def _suspended_result(session: Session, pending: Sequence[Question]) -> RunResult:
    """A RunResult for a suspended run we did not continue (resume with nobody to decide)."""
    from workbench.engine.middleware import RunResult
    from workbench.engine.usage import Usage

    run = session.last_run
    usage = run.usage if run is not None else Usage()
    return RunResult("interrupted", "", usage, tuple(pending), None, session.thread_id, run.id if run else "")


class _Stopper:
    """Ctrl-C (or SIGTERM) while a run is in flight stops it (it ends ``aborted``: exit 3).

    The handler is installed only around the run itself, so Ctrl-C at an approval prompt still
    interrupts the prompt. A second Ctrl-C gives up waiting for the run to wind down.
    """

    def __init__(self, session: Session) -> None:
        self.session = session
        self.stopped = False
        self._stop_task: asyncio.Task[None] | None = None
        self._main: asyncio.Task[Any] | None = None

    def _on_signal(self) -> None:
        if self.stopped:
            if self._main is not None:
                self._main.cancel()
            return
        self.stopped = True
        _err("\nworkbench: stopping the run (Ctrl-C again to quit at once)")
        self._stop_task = asyncio.ensure_future(self.session.stop())

    async def call(self, start: Callable[[], Awaitable[RunResult]]) -> RunResult:
        loop = asyncio.get_running_loop()
        installed: list[int] = []
        for sig in (signal.SIGINT, getattr(signal, "SIGTERM", None)):
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
                await self.session.stop()
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


# ------------------------------------------------------------------------------------------------------
# threads / show


async def _threads(workspace: Path, args: argparse.Namespace) -> int:
    from workbench.session import Session

    infos = Session.list_threads(workspace)
    if args.json:
        for t in infos:
            print(json.dumps({"id": t.id, "title": t.title, "status": t.status, "created": t.created,
                              "updated": t.updated, "usage": t.usage.to_dict()}), flush=True)
        return EXIT_DONE
    if not infos:
        _err(f"no threads in {workspace}")
        return EXIT_DONE
    width = max(len("ID"), *(len(t.id) for t in infos))
    status_width = max(len("STATUS"), *(len(t.status) for t in infos))
    print(f"{'ID':<{width}}  {'UPDATED':<19}  {'STATUS':<{status_width}}  TITLE")
    for t in infos:
        print(f"{t.id:<{width}}  {_fmt_time(t.updated):<19}  {t.status:<{status_width}}  {t.title or '(untitled)'}")
    sys.stdout.flush()
    if any(t.status == "failed" for t in infos):  # R9: a crashed run reads failed, with what to do
        _err("failed: the run failed or its process died; `workbench resume --thread ID` recovers it")
    return EXIT_DONE


async def _show(workspace: Path, args: argparse.Namespace) -> int:
    session = await _open(workspace, args.thread)
    try:
        info = next((t for t in session.threads() if t.id == session.thread_id), None)
        events: list[Event] = []
        session.subscribe(events.append, replay=True)()
        messages = session.messages
        artifacts = [_artifact_entry(name, a) for name, a in session.artifacts.items()]
        pending = session.pending
        data: dict[str, Any] = {
            "thread": session.thread_id,
            "title": info.title if info else "",
            "status": session.status,
            "created": info.created if info else None,
            "updated": info.updated if info else None,
            "usage": session.usage.to_dict(),
            "messages": [m.to_dict() for m in messages],
            "todos": session.todos,
            "artifacts": artifacts,
            "pending": [q.to_dict() for q in pending],
            "last_error": session.last_error(),
            "holder": session.holder,  # R7: the live process running it, if any
            "events": [event_dict(e) for e in events],
        }
        if args.json:
            print(json.dumps(data, default=str), flush=True)
            return EXIT_DONE
        _print_thread(data, messages)
        return EXIT_DONE
    finally:
        await session.close()


def _artifact_entry(name: str, a: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": name}
    if isinstance(a, Mapping):
        size = a.get("size")
        if size is None and isinstance(a.get("content"), str):
            size = len(a["content"].encode("utf-8"))
        entry["size"] = size
        for key in ("mime", "source"):
            if a.get(key) is not None:
                entry[key] = a[key]
    elif isinstance(a, str):
        entry["size"] = len(a.encode("utf-8"))
    return entry


def _print_thread(data: dict[str, Any], messages: Sequence[Any]) -> None:
    out: list[str] = []
    title = data["title"] or "(untitled)"
    updated = f" · updated {_fmt_time(data['updated'])}" if data.get("updated") else ""
    out.append(f"thread {data['thread']} · {title} · {data['status']}{updated}")
    out.append(f"usage: {format_usage(data['usage'])}")
    if data.get("holder"):  # R9: live in another process: never "cut off, recover it"
        out.append(f"running in {data['holder']}")
    if data.get("last_error") and data["status"] in CUT_OFF:
        out.append(f"last error: {_one_line(data['last_error'], 300)}")
        out.append(f"to go on: workbench resume --thread {data['thread']}")
    if data["pending"]:
        out.append("pending:")
        for q in data["pending"]:
            out.append(f"  {q['id']}  {q['kind']}  {_question_summary(q['kind'], q.get('payload') or {})}")
    out.append("")
    out.append(f"messages ({len(messages)}):")
    for m in messages:
        role = m.role if m.role != "tool" else f"tool {m.name or ''}".rstrip()
        text = (m.content or "").rstrip()
        lines = text.splitlines() or [""]
        edited = m.role == "tool" and (m.meta or {}).get("edited")
        if edited:  # P6: the note is shown as its own line below, with the arguments that ran
            from workbench.engine.messages import split_edit_note

            text = split_edit_note(text)[0].rstrip()
            lines = text.splitlines() or [""]
        if m.role == "tool":  # results can be whole files: one line of them
            status = (m.meta or {}).get("status")
            role += f" [{status}]" if status else ""
            if len(lines) > 1 or len(text) > 200:
                lines = [f"{_one_line(text, 200)} ({len(text):,} chars)"]
        out.append(f"  {role}: {lines[0]}")
        out.extend(f"    {ln}" for ln in lines[1:])
        if edited:
            out.append(f"    ✎ edited by the person; ran with {_short(m.meta.get('arguments') or {}, 200)}")
        for c in m.tool_calls:
            out.append(f"    → {c.name} {_short(c.arguments if c.arguments is not None else c.raw_arguments, 200)}")
    out.append("")
    out.append(f"todos ({len(data['todos'])}):")
    marks = {"completed": "x", "in_progress": "~", "pending": " "}
    for t in data["todos"]:
        if isinstance(t, Mapping):
            out.append(f"  [{marks.get(str(t.get('status')), '?')}] {t.get('content') or t.get('text') or _short(t)}")
        else:
            out.append(f"  - {t}")
    out.append(f"artifacts ({len(data['artifacts'])}):")
    for a in data["artifacts"]:
        size = f"{a['size']:,} bytes" if isinstance(a.get("size"), int) else "size unknown"
        out.append(f"  {a['name']}  ({size})")
    out.append("")
    out.append(f"events ({len(data['events'])}):")
    for e in data["events"]:
        extra = {k: v for k, v in e.items() if k not in ("type", "thread", "run", "step", "time")}
        out.append(f"  {_fmt_time(e['time'])}  run {e['run']}  step {e['step']:>3}  {e['type']}"
                   f"{'  ' + _short(extra, 160) if extra else ''}")
    print("\n".join(out), flush=True)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
