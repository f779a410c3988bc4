"""What the CLI prints: event lines (``--json`` or text), usage summaries, one-line errors, logging.

Stdout carries the answer (or the JSON lines); stderr carries tool lines, status and errors.

P3, X5: much of what is printed was written by others — a model's tool names, arguments and answers, a
tool server's texts, a stored thread's. Every such text goes through ``terminal_safe`` (its control, bidi
and zero-width characters shown as escapes), so an escape sequence in a command cannot redraw the approval
prompt: each piece on its own line (``_short``, ``_one_line``, ``_safe``), and every status line and error
as a whole (``_Output.line``, ``_err``). The answer on stdout is made safe only when stdout is a terminal
(a person reads it); to a pipe or a file it goes byte for byte as the model wrote it (scripts rely on it).
``--json`` lines are ASCII (``json.dumps`` escapes every control and non-ASCII character).
"""

from __future__ import annotations

import errno
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from workbench.terminal_text import terminal_safe

if TYPE_CHECKING:
    from workbench.engine.events import Event
    from workbench.engine.middleware import Question, RunResult
    from workbench.session import Session


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
        handler.setFormatter(_SafeFormatter("%(levelname)s %(name)s: %(message)s"))
        root.setLevel(logging.INFO)
    else:
        handler.setFormatter(_OneLineFormatter())
        root.setLevel(logging.WARNING)
    root.addHandler(handler)


class _SafeFormatter(logging.Formatter):
    """-v: a record with its traceback, its lines kept and anything a terminal would act on escaped (a log
    message may quote a tool server's words)."""

    def format(self, record: logging.LogRecord) -> str:
        return terminal_safe(super().format(record), multiline=True)


class _OneLineFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        msg = _one_line(record.getMessage())
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            msg += f": {type(exc).__name__}: {_one_line(str(exc))}"
        return f"workbench: {record.levelname.lower()}: {msg}"


def _one_line(text: str, limit: int = 400) -> str:
    line = terminal_safe(" ".join(str(text).split()))
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _safe(value: Any) -> str:
    """A name or id others chose (a tool's, a server's, a question's kind), on one line and shown as it is."""
    return terminal_safe("" if value is None else value)


def _err(text: str) -> None:
    from workbench.redact import scrub  # R10: an error may quote a provider body that echoes a key

    try:
        print(terminal_safe(scrub(text), multiline=True), file=sys.stderr, flush=True)
    except ValueError:
        pass
    except OSError as e:
        if not _gone(e):
            raise


def _gone(error: OSError) -> bool:
    """The reader of this stream is gone: a closed pipe (EPIPE), or a terminal that was closed (EIO)."""
    return isinstance(error, BrokenPipeError) or error.errno in (errno.EPIPE, errno.EIO)


def _short(value: Any, limit: int = 80) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = terminal_safe(" ".join(text.split()))
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
            parts.append(f"{_short(key, 40)}=[{len(value)} item{'s' if len(value) != 1 else ''}]")
        elif isinstance(value, Mapping):
            parts.append(f"{_short(key, 40)}={{{len(value)} key{'s' if len(value) != 1 else ''}}}")
        else:
            parts.append(f"{_short(key, 40)}={_short(value, 40)}")
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
        #: task id -> its error, for the settling line of a task that failed (set by the run command)
        self.task_error: Callable[[str], str | None] | None = None
        #: E5: "sandbox for commands (execute): …", printed once on stderr at the first `execute` call
        self.sandbox_line: str | None = None
        #: the answer is shown safe (``terminal_safe``) when a person reads stdout at a terminal; to a pipe
        #: or a file it goes as the model wrote it, byte for byte
        self.answer_safe = _is_terminal(self.out)

    # -- low level -----------------------------------------------------------------------------------
    def _write(self, stream: TextIO, text: str) -> None:
        if self._broken:
            return
        try:
            stream.write(text)
            stream.flush()
        except OSError as e:
            if not _gone(e):
                raise
            # `workbench run --json | head`, or the terminal closed (SIGHUP): stop writing, keep running
            # to the end the run is being brought to (its stop, its checkpoint)
            self._broken = True
            try:
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, stream.fileno())
            except (OSError, ValueError):
                pass

    def line(self, text: str) -> None:
        """A status line on stderr, after ending a half-written answer line on stdout. Made terminal-safe
        as a whole (pieces that must stay on one line are made safe where they are put in)."""
        if self._mid_line:
            self._write(self.out, "\n")
            self._mid_line = False
        self._write(self.err, terminal_safe(text, multiline=True) + "\n")

    def answer(self, text: str) -> None:
        """Answer text on stdout: made safe at a terminal, as written elsewhere."""
        self._write(self.out, terminal_safe(text, multiline=True) if self.answer_safe else text)

    def json_line(self, obj: Mapping[str, Any]) -> None:
        self._write(self.out, json.dumps(obj, default=str) + "\n")

    # -- events --------------------------------------------------------------------------------------
    def on_event(self, event: Event) -> None:
        if event.run_id:  # events posted outside a run (a background task settling after it) have none
            self.run_id = event.run_id
            self.step = event.step
        if self.as_json:
            if event.type != "run_finished":  # the summary line replaces the engine's (see the module doc)
                self.json_line(event_dict(event))
            if event.type == "tool_call_started":
                self._say_sandbox(event.data)
            return
        d = event.data
        if event.type == "task_started":
            how = "in the background" if d.get("background") else "in the foreground"
            self.line(f"task {_safe(d.get('task_id'))} started {how}")
            return
        if event.type == "task_settled":
            self.line(task_settled_line(d, self.task_error(str(d.get("task_id"))) if self.task_error else None))
            return
        if event.type == "model_delta":
            text = d.get("text") or ""
            if text:
                self.answer(text)
                self.streamed = True
                self._mid_line = not text.endswith("\n")
        elif event.type == "tool_call_started":
            self._calls[str(d.get("call_id"))] = (_safe(d.get("name")), d.get("arguments"))
            self._say_sandbox(d)
        elif event.type == "tool_call_finished":
            name, arguments = self._calls.pop(str(d.get("call_id")), (_safe(d.get("name")), None))
            summary = _args_summary(arguments)
            edited = " (arguments edited by the person)" if d.get("edited") else ""  # P6
            self.line(f"→ {name}{' ' + summary if summary else ''} … {_safe(d.get('status'))}{_command_end(d)}{edited}")
        elif event.type == "interrupt_raised":
            if d.get("kind") == "tool_approval":
                name, arguments = self._calls.pop(str(d.get("call_id")), (_safe(d.get("tool")), None))
                summary = _args_summary(arguments)
                reason = f" ({_short(d.get('reason'), 120)})" if d.get("reason") else ""
                self.line(f"→ {name}{' ' + summary if summary else ''} … needs approval{reason}")
            else:
                self.line(f"⏸ {_safe(d.get('kind'))}: {_short(d.get('reason') or d.get('id') or '', 120)}")
        elif event.type == "budget_exceeded":
            self.line(f"budget exceeded: {d.get('field')} {d.get('spent')} of {d.get('limit')}")
        elif event.type == "budget_hold":
            self.line(f"budget hold: {d.get('field')} {d.get('spent')} of {d.get('limit')}")
        elif event.type == "budget_updated" and isinstance(d.get("waiting"), dict):  # B2, D8: before a call
            self.line(f"budget: {_safe(d['waiting'].get('reason'))}")

    def _say_sandbox(self, d: Mapping[str, Any]) -> None:
        """E5: at the first command the agent asks to run, whether a sandbox holds it (stderr, once)."""
        if d.get("name") == "execute" and self.sandbox_line:
            line, self.sandbox_line = self.sandbox_line, None
            self.line(f"workbench: {line}")

    # -- the end -------------------------------------------------------------------------------------
    def finish(self, result: RunResult, session: Session, hint: str | None,
               waiting: Sequence[tuple[Any, Sequence[Question]]] = ()) -> None:
        """The run's end; ``waiting``: its background tasks left waiting for a decision, with their questions."""
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
            if waiting:
                final["tasks_waiting"] = [{"task_id": t.id, "agent": t.agent, "thread": t.child_thread,
                                           "pending": [q.to_dict() for q in qs]} for t, qs in waiting]
            if hint:
                final["resume"] = hint
            if result.status == "interrupted":
                self._print_pending(result.pending, None if waiting else hint)
            self._print_waiting(waiting, hint)
            self.json_line(final)
            return
        if result.status in ("done", "aborted") and result.answer and not self.streamed:
            self.answer(result.answer)
            self._mid_line = not result.answer.endswith("\n")
        if self._mid_line:
            self._write(self.out, "\n")
            self._mid_line = False
        if result.status == "interrupted":
            self._print_pending(result.pending, None if waiting else hint)
        self._print_waiting(waiting, hint)
        reason = ""
        if result.status == "aborted" and result.error:
            reason = f" ({_one_line(result.error, 160)})"
        if waiting:
            reason += f", {len(waiting)} background task{'s' if len(waiting) != 1 else ''} waiting for decisions"
        self.line(f"[{result.status}{reason}] thread {thread} · {format_usage(usage_dict)}")

    def _print_waiting(self, waiting: Sequence[tuple[Any, Sequence[Question]]], hint: str | None) -> None:
        if not waiting:
            return
        from workbench.cli.tasks import task_waiting_lines

        for text in task_waiting_lines(waiting):
            self.line(text)
        if hint:
            self.line(f"to continue: {hint}")

    def _print_pending(self, pending: Sequence[Question], hint: str | None) -> None:
        if pending:
            self.line(f"waiting for {len(pending)} decision{'s' if len(pending) != 1 else ''}:")
        for q in pending:
            p = q.payload
            self.line(f"  {_safe(q.id)}  {_safe(q.kind)}  {_question_summary(q.kind, p)}")
        if hint:
            self.line(f"to continue: {hint}")



def _is_terminal(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def _command_end(d: Mapping[str, Any]) -> str:
    """`` (exit 1, 0.42 s)`` for a command's ``tool_call_finished`` (E6); "" for other tools."""
    if "exit_code" not in d:
        return ""
    how = "timed out" if d.get("timed_out") else f"exit {_safe(d.get('exit_code'))}"
    return f" ({how}, {float(d.get('duration_seconds') or 0):.2f} s)"


def task_figures(usage: Any) -> str:
    """``1,234 tokens`` (``, $0.0012`` when the model is priced)."""
    u = usage.to_dict() if hasattr(usage, "to_dict") else dict(usage or {})
    text = f"{int(u.get('total_tokens') or 0):,} tokens"
    if u.get("cost_usd") is not None:
        text += f", ${float(u['cost_usd']):.4f}"
    return text


def task_settled_line(data: Mapping[str, Any], error: str | None = None) -> str:
    """``task researcher:ab12cd34 completed (1,234 tokens)``, and what stopped it when it did not complete."""
    line = f"task {_safe(data.get('task_id'))} {_safe(data.get('status'))} ({task_figures(data.get('usage'))})"
    if error and data.get("status") != "completed":
        line += f": {_one_line(error, 200)}"
    return line


def _question_summary(kind: str, p: Mapping[str, Any]) -> str:
    if kind == "tool_approval":
        return f"{_safe(p.get('tool'))} {_short(p.get('arguments') or {}, 100)}"
    if kind == "budget_hold":
        held = f" (holds {_safe(p.get('tool'))} {_args_summary(p.get('arguments'))})" if p.get("tool") else ""
        return _one_line(str(p.get("reason") or ""), 160) + held
    return _short(dict(p), 120)

