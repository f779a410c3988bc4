"""Answering a run's questions: --approve / --budget-approve, or prompts at the terminal (incl. trust, W1)."""

from __future__ import annotations

import argparse
import os
import select
import signal
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.budget_words import format_amount, hold_fields, more_words, until_words
from workbench.cli.output import _err, _one_line, _Output, _question_summary, _safe, _short
from workbench.terminal_text import terminal_safe

if TYPE_CHECKING:
    from workbench.engine.middleware import Question


class _Suspended(Exception):
    """Ctrl-C at an approval prompt: the run stays suspended, nothing was decided."""


@contextmanager
def _sigint_raises() -> Iterator[None]:
    """Ctrl-C raises KeyboardInterrupt inside the block; the previous SIGINT handler is back after it.

    asyncio.run's own SIGINT handler only cancels the main task, which a blocking terminal read never
    notices. Off the main thread no handler can be set, and the block runs unchanged.
    """
    previous = None
    try:
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    except ValueError:  # not the main thread
        pass
    try:
        yield
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


# How long the terminal read waits at a time before Python looks for a signal that arrived on another
# thread (``read_answer``): a Ctrl-C takes at most this long to act.
SIGNAL_SLICE = 0.1


def read_answer() -> str:
    """One line typed at the terminal ('' at end of input), which Ctrl-C interrupts whichever thread the
    kernel hands the SIGINT to.

    A signal sent to a process may be delivered to any of its threads (the store's claim heartbeat, the
    model import, ...). Python runs the handler on the main thread, but only when that thread next runs
    Python code: a main thread blocked in ``read()`` gets no EINTR and would wait for a line nobody types,
    a Ctrl-C that does nothing. So on POSIX the read waits in ``select()`` slices and returns to Python
    between them. The terminal stays in its canonical mode (nothing here changes it), where one read
    returns one line at most, so no typed line sits unseen in ``sys.stdin``'s buffer while select waits.
    """
    stdin = sys.stdin
    try:
        fd = stdin.fileno() if os.name == "posix" else -1
    except (AttributeError, OSError, ValueError):  # a stream with no descriptor (tests, embedding)
        fd = -1
    while fd >= 0:
        ready, _, _ = select.select([fd], [], [], SIGNAL_SLICE)
        if ready:
            break
    return stdin.readline()


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

    def decide_all(self, pending: Sequence[Question], source: str = "") -> dict[str, dict[str, Any]] | None:
        """``source`` names who asks when it is not this run: ``sub-agent writer, task writer:ab12cd34``
        (a background task's questions, D9); the terminal prompts say it."""
        decisions: dict[str, dict[str, Any]] = {}
        for q in pending:
            d = self.decide(q, source)
            if d is None:
                return None
            decisions[q.id] = d
        return decisions

    def decide(self, q: Question, source: str = "") -> dict[str, Any] | None:
        self._source = source or _asker(q.payload)
        if q.kind == "tool_approval" and q.payload.get("exceeds_budget"):
            # D8: launching (or continuing) a sub-agent whose own budget is more than what is left of the
            # run's is a decision about spending: --budget-approve answers it, not --approve all
            if self.budget == "yes":
                self.output.line(f"approved by --budget-approve yes: {_one_line(str(q.payload.get('reason') or ''), 300)}")
                return {"decision": "approve"}
            if self.budget == "no":
                return {"decision": "reject", "message": "refused by --budget-approve no: the launch would exceed "
                                                         "what is left of the budget"}
            return self._ask_tool(q) if self.interactive else None
        if q.kind == "tool_approval":
            if self.approve == "all":
                return {"decision": "approve"}
            if self.approve == "none":
                return {"decision": "reject", "message": "rejected by --approve none"}
            return self._ask_tool(q) if self.interactive else None
        if q.kind == "budget_hold":
            if self.budget == "yes":  # B3: the full limit again, said in amounts (G11)
                amounts = {f: cap for f, _s, _l, cap in hold_fields(q.payload) if cap > 0}
                if amounts:
                    spent = {f: s for f, s, _l, _c in hold_fields(q.payload)}
                    self.output.line(f"budget hold: allowed {', '.join(more_words(f, v) for f, v in amounts.items())} "
                                     f"by --budget-approve yes: the run may go on until {until_words(spent, amounts)}")
                    return {"decision": "approve", "allow_more": amounts}
                return {"decision": "approve"}
            if self.budget == "no":
                return {"decision": "reject", "message": "refused by --budget-approve no"}
            return self._ask_budget(q) if self.interactive else None
        return self._ask_other(q) if self.interactive else None

    # -- the terminal --------------------------------------------------------------------------------
    def _input(self, prompt: str) -> str:
        """One answer from the terminal; Ctrl-C or end of input leaves the run suspended."""
        try:
            with _sigint_raises():  # from before the prompt shows until it is answered
                self.output.line("")
                sys.stderr.write(prompt)
                sys.stderr.flush()
                line = read_answer()
        except KeyboardInterrupt:
            raise _Suspended() from None
        if not line:  # EOF: nobody to ask
            raise _Suspended()
        return line.strip()

    _source = ""

    def _from(self) -> str:
        return f" ({_safe(self._source)})" if self._source else ""

    def _ask_tool(self, q: Question) -> dict[str, Any]:
        """P3: the call as it will run. Every name and value is the model's: each is shown on its own line
        with its control, bidi and zero-width characters as escapes (``terminal_safe``), its line breaks as
        ``\\n``, and what is cut said in figures — an escape sequence cannot redraw the prompt, a long value
        cannot hide its end."""
        p = q.payload
        self.output.line(f"approval needed: {_safe(p.get('tool'))}{self._from()}")
        for key, value in (p.get("arguments") or {}).items():
            self.output.line(f"  {_shown(key, 80)}: {_shown(value, ARGUMENT_LIMIT)}")
        if p.get("reason"):
            self.output.line(f"  reason: {_one_line(str(p['reason']), 200)}")
        # Q3: "always" saves exactly these rules for the session (the engine's own words for them); a later
        # call they do not cover — or one an ask rule names — is asked again, here as in the window
        saves = [str(r) for r in p.get("always") or []]
        if saves:
            self.output.line(f"  always saves: {'; '.join(_shown(r, 200) for r in saves)}")
        while True:
            answer = self._input("approve? [y]es / [n]o / [a]lways (as saved above): " if saves
                                 else "approve? [y]es / [n]o: ").lower()
            if answer in ("y", "yes"):
                return {"decision": "approve"}
            if answer in ("a", "always") and saves:
                return {"decision": "approve", "always": "session"}
            if answer in ("n", "no"):
                reason = self._input("reason for the model (optional): ")
                return {"decision": "reject", "message": reason or "rejected by the user"}

    def _ask_budget(self, q: Question) -> dict[str, Any]:
        """G11: the prompt speaks in amounts, as the window's dialog: "allow 300 more tokens (the run
        may go on until 600 tokens)?"; y allows the configured limit again, a number that amount."""
        self.output.line(f"budget hold{self._from()}: " + _question_summary(q.kind, q.payload))
        fields = [(f, s, cap) for f, s, _lim, cap in hold_fields(q.payload) if cap > 0]
        spent = {f: s for f, s, _c in fields}
        default = {f: cap for f, _s, cap in fields}
        for f, s, lim, _cap in hold_fields(q.payload):
            self.output.line(f"  {f}: spent {format_amount(f, s)} of {format_amount(f, lim)}")
        if not default:
            prompt = "continue with the full limit again? [y]es / [n]o: "
        else:
            words = ", ".join(more_words(f, v) for f, v in default.items())
            one = len(default) == 1
            prompt = (f"allow {words} (the run may go on until {until_words(spent, default)})? [y]es / [n]o"
                      + (" / or type another amount: " if one else ": "))
        while True:
            answer = self._input(prompt).strip()
            low = answer.lower()
            if low in ("y", "yes"):
                return {"decision": "approve", "allow_more": default} if default else {"decision": "approve"}
            if low in ("n", "no"):
                reason = self._input("reason (optional): ")
                return {"decision": "reject", "message": reason or "stopped by the user"}
            amount = _amount(answer)
            if len(default) == 1 and amount is not None:
                [field] = default
                self.output.line(f"allowing {more_words(field, amount)}: the run may go on until "
                                 f"{until_words(spent, {field: amount})}")
                return {"decision": "approve", "allow_more": {field: amount}}
            if answer:
                self.output.line("  answer y, n" + (", or an amount over 0 (e.g. 500 or 0.25)" if len(default) == 1 else ""))

    def _ask_other(self, q: Question) -> dict[str, Any]:
        self.output.line(f"{_safe(q.kind)}{self._from()}: {_short(q.payload, 300)}")
        while True:
            answer = self._input("[y]es / [n]o, or type an answer: ")
            if answer.lower() in ("y", "yes"):
                return {"decision": "approve"}
            if answer.lower() in ("n", "no"):
                return {"decision": "reject", "message": "rejected by the user"}
            if answer:
                return {"decision": "respond", "message": answer}



#: how much of one argument the approval prompt shows (the rest is counted, never silently cut)
ARGUMENT_LIMIT = 2000


def _shown(value: Any, limit: int) -> str:
    """One argument (or its name) for the approval prompt: the whole value on one line — nothing folded
    away, line breaks and tabs as ``\\n``/``\\t``, controls as escapes — cut after ``limit`` characters
    with how many more there are."""
    import json

    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = terminal_safe(text)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit:,} more characters not shown)"


def _asker(payload: Any) -> str:
    """Who asks, when a foreground sub-agent's question comes through this run (D4: its payload names
    the agent and the task), else ""."""
    agent = payload.get("agent") if hasattr(payload, "get") else None
    task = payload.get("task_id") if hasattr(payload, "get") else None
    return f"sub-agent {agent}, task {task}" if agent and task else ""


def _amount(text: str) -> float | int | None:
    """A positive amount typed at the budget prompt (``500``, ``1,000``, ``$0.25``), else None."""
    cleaned = text.replace(",", "").replace("$", "").replace("_", "").strip()
    try:
        value = float(cleaned)
    except ValueError:
        return None
    if not (value > 0) or value != value or value == float("inf"):
        return None
    return int(value) if value.is_integer() else value


def _trust_decision(workspace: Path, args: argparse.Namespace, *, interactive: bool) -> bool | str | None:
    """W1: whether the workspace's widening settings count for this run.

    ``--trust`` or ``WORKBENCH_TRUST=1``: yes. Nothing asked for, or trusted before with the same
    settings: None (``Session.open`` finds that in the record). At a terminal: ask (y/N), listing
    exactly what is asked for; yes is remembered and returns the hash of what was shown, so
    ``Session.open`` trusts those settings only — not a file changed while the prompt waited.
    Otherwise: no (``Session.open`` ignores them and the notice goes to stderr).
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
    with _sigint_raises():  # Ctrl-C: KeyboardInterrupt, exit 3, nothing run
        sys.stderr.write("Trust this workspace? [y/N] ")
        sys.stderr.flush()
        answer = read_answer().strip().lower()
    if answer not in ("y", "yes"):
        return False
    shown = trust.settings_hash(reqs)
    try:
        trust.trust(workspace, config, expected=shown)  # ``config`` is what was shown
    except OSError as e:
        _err(f"workbench: could not remember the trust ({e}); trusted for this run only")
    return shown

