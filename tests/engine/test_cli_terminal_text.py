"""P3, X5: what the CLI prints of others' text — a model's, a tool's, a tool server's, a workspace file's, a
stored thread's — shows a terminal's control characters as escapes instead of handing them to the terminal.

``terminal_safe`` (workbench/terminal_text.py) is property-tested: whatever the input, no control, format
(bidi, zero-width), surrogate or line/paragraph-separator character is left; printable text comes back
unchanged; escaping twice changes nothing more. Then each place of the CLI that prints such text is
driven with an escape sequence that, obeyed, would redraw the line (the review's spoofs: an approval
prompt showing ``command: ls -la`` for ``touch PWNED``, ``mcp check`` showing a tool that asks as one that
does not).
"""

from __future__ import annotations

import io
import logging
import sys
import unicodedata
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from workbench.engine.events import Event
from workbench.engine.middleware import Question
from workbench.terminal_text import HIDING_CATEGORIES, terminal_safe

ESC = "\x1b"
SPOOF = "touch PWNED #" + " \x1b[2K\x1b[G  command: ls -la"
#: characters a hostile text uses: C0, DEL, C1 (CSI U+009B), bidi overrides and isolates, zero-width,
#: BOM, soft hyphen, line/paragraph separators, a lone surrogate, a language tag
HOSTILE = ["\x00", "\x07", "\x08", "\t", "\n", "\r", "\x1b", "\x7f", "\x85", "\x9b", "\u00ad", "\u061c", "\u200b",
           "\u200d", "\u200e", "\u202a", "\u202e", "\u2066", "\u2069", "\u2028", "\u2029", "\ufeff", "\ud800",
           "\udfff", "\U000e0001", "\U000e007f"]

any_text = st.text(st.one_of(st.characters(exclude_categories=()), st.sampled_from(HOSTILE),
                             st.sampled_from(["[", "2", "K", "\\", "x", "1", "b", " "])))
printable_text = st.text(st.characters(exclude_categories=sorted(HIDING_CATEGORIES)))


def hidden(text: str, *, keep: str = "") -> list[str]:
    return [ch for ch in text if ch not in keep and unicodedata.category(ch) in HIDING_CATEGORIES]


# ------------------------------------------------------------------------------------------------------
# the helper


@given(any_text)
@example(SPOOF)
@example("a\r\nb\rc")
def test_P3_property_nothing_a_terminal_acts_on_is_left(text: str) -> None:
    one = terminal_safe(text)
    assert hidden(one) == []
    block = terminal_safe(text, multiline=True)
    assert hidden(block, keep="\n\t") == []  # line breaks and tabs stay in a block, nothing else
    assert "\r" not in block


@given(printable_text)
@example("plain text, accents é, 日本語, emoji 🎉, a backslash \\x1b as typed")
def test_P3_property_printable_text_is_unchanged(text: str) -> None:
    assert terminal_safe(text) == text
    assert terminal_safe(text, multiline=True) == text


@given(st.lists(printable_text, min_size=1), st.sampled_from(["\n", "\t"]))
def test_P3_property_a_block_keeps_its_lines_and_tabs(parts: list[str], sep: str) -> None:
    text = sep.join(parts)
    assert terminal_safe(text, multiline=True) == text
    assert "\n" not in terminal_safe(text) and "\t" not in terminal_safe(text)  # one line: escaped


@given(any_text, st.booleans())
def test_P3_property_escaping_twice_changes_nothing_more(text: str, multiline: bool) -> None:
    once = terminal_safe(text, multiline=multiline)
    assert terminal_safe(once, multiline=multiline) == once


@given(any_text)
def test_P3_property_every_hidden_character_is_named_by_its_escape(text: str) -> None:
    """Each hidden character stands as its escape, in place: the visible text around it is all kept."""
    out = terminal_safe(text)
    expected = "".join(ch if not hidden(ch) else _escape(ch) for ch in text)
    assert out == expected


def _escape(ch: str) -> str:
    code = ord(ch)
    named = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}
    if ch in named:
        return named[ch]
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def test_P3_examples() -> None:
    assert terminal_safe(SPOOF) == "touch PWNED # \\x1b[2K\\x1b[G  command: ls -la"
    assert terminal_safe("a\u202etxt.exe") == "a\\u202etxt.exe"
    assert terminal_safe("x\r\ny\rz", multiline=True) == "x\ny\\rz"
    assert terminal_safe("\x9b31m\U000e0041") == "\\x9b31m\\U000e0041"
    assert terminal_safe(None) == "None" and terminal_safe(12) == "12"


@given(st.one_of(any_text, st.dictionaries(any_text, any_text, max_size=3), st.lists(any_text, max_size=3)))
def test_P3_property_the_clis_one_line_helpers_leave_nothing_hidden(value: Any) -> None:
    from workbench.cli.output import _args_summary, _one_line, _short

    assert hidden(_short(value, 80)) == [] and hidden(_one_line(str(value))) == []
    if isinstance(value, dict):
        assert hidden(_args_summary(value)) == []


# ------------------------------------------------------------------------------------------------------
# the approval prompt (P3), the event lines, the answer


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _decider(monkeypatch: pytest.MonkeyPatch, answers: str) -> tuple[Any, io.StringIO]:
    from workbench.cli.decide import _Decider
    from workbench.cli.output import _Output

    err = io.StringIO()
    monkeypatch.setattr(sys, "stdin", io.StringIO(answers))
    monkeypatch.setattr(sys, "stderr", err)
    return _Decider("ask", "ask", interactive=True, output=_Output(False, io.StringIO(), err)), err


def test_P3_the_approval_prompt_shows_the_command_that_runs_not_what_its_escapes_draw(
        monkeypatch: pytest.MonkeyPatch) -> None:
    decider, err = _decider(monkeypatch, "n\n\n")
    q = Question("q1", "tool_approval", {
        "tool": "execute\x1b[8m", "arguments": {"command": SPOOF, "cwd\x1b[2K": "/project\n  command: ls"},
        "reason": "the command `touch PWNED`\x1b[2K\x1b[G: ask"})
    assert decider.decide(q)["decision"] == "reject"
    text = err.getvalue()
    assert ESC not in text
    lines = text.splitlines()
    assert "approval needed: execute\\x1b[8m" in lines
    assert "  command: touch PWNED # \\x1b[2K\\x1b[G  command: ls -la" in lines
    assert "  cwd\\x1b[2K: /project\\n  command: ls" in lines  # a line break in a value starts no line
    assert "  reason: the command `touch PWNED`\\x1b[2K\\x1b[G: ask" in lines
    assert not any(ln.startswith("  command: ls") for ln in lines)


def test_P3_a_long_argument_is_cut_with_what_is_left_out_said(monkeypatch: pytest.MonkeyPatch) -> None:
    from workbench.cli.decide import ARGUMENT_LIMIT

    decider, err = _decider(monkeypatch, "y\n")
    command = "echo " + "a" * ARGUMENT_LIMIT + "; rm -rf ~"
    assert decider.decide(Question("q1", "tool_approval", {"tool": "execute", "arguments": {"command": command}}))
    assert f"… ({len(command) - ARGUMENT_LIMIT:,} more characters not shown)" in err.getvalue()


def test_P3_other_questions_and_who_asks_are_shown_safe(monkeypatch: pytest.MonkeyPatch) -> None:
    decider, err = _decider(monkeypatch, "n\n")
    q = Question("q1", "ask\x1b[2K", {"agent": "w\x1b[1A", "task_id": "w:1", "text": "ok?\u202e"})
    assert decider.decide(q) == {"decision": "reject", "message": "rejected by the user"}
    assert ESC not in err.getvalue() and "\u202e" not in err.getvalue()
    assert "ask\\x1b[2K (sub-agent w\\x1b[1A, task w:1): " in err.getvalue()


def _event(type_: str, **data: Any) -> Event:
    return Event(type_, "t", "r", 1, data)


def test_P3_event_lines_and_pending_questions_on_stderr_are_escaped() -> None:
    from workbench.cli.output import _Output

    out, err = io.StringIO(), io.StringIO()
    output = _Output(False, out, err)
    output.on_event(_event("tool_call_started", call_id="c1", name="ex\x1b[2Kec", arguments={"command": SPOOF}))
    output.on_event(_event("interrupt_raised", kind="tool_approval", call_id="c1", tool="execute",
                           reason="because\x1b[G\u2028x"))
    output.on_event(_event("tool_call_started", call_id="c2", name="grep", arguments={"k\x1b": 1, "v": "\x9b2J"}))
    output.on_event(_event("tool_call_finished", call_id="c2", status="ok\x1b[0m"))
    output.on_event(_event("interrupt_raised", kind="other\x1b[2K", reason="why\x1b[A"))
    output._print_pending([Question("q\x1b", "tool_approval", {"tool": "t\x1b[1A", "arguments": {"a": "\x1b[2K"}}),
                           Question("q2", "budget_hold", {"reason": "r\x1b", "tool": "t\x1b"})], None)
    text = err.getvalue()
    assert ESC not in text and "\x9b" not in text and "\u2028" not in text, repr(text)
    assert "→ ex\\x1b[2Kec touch PWNED # \\x1b[2K\\x1b[G command: ls -la … needs approval (because\\x1b[G x)" in text
    assert "→ grep k\\x1b=1 v=\\x9b2J … ok\\x1b[0m" in text
    assert "  q\\x1b  tool_approval  t\\x1b[1A {\"a\": \"\\u001b[2K\"}" in text  # JSON's own escape
    assert out.getvalue() == ""


def test_P3_the_answer_is_escaped_at_a_terminal_and_kept_byte_for_byte_elsewhere() -> None:
    from workbench.cli.output import _Output

    answer = ["colour \x1b[31m", "red\x1b[0m\n", "\u202etxt.exe\r\nend"]
    for stream, expected in ((io.StringIO(), "".join(answer)),
                             (_Terminal(), "colour \\x1b[31mred\\x1b[0m\n\\u202etxt.exe\nend")):
        output = _Output(False, stream, io.StringIO())
        for piece in answer:
            output.on_event(_event("model_delta", text=piece))
        assert stream.getvalue() == expected


def test_P3_json_lines_are_ascii_whatever_the_model_wrote() -> None:
    from workbench.cli.output import _Output

    out = io.StringIO()
    _Output(True, out, io.StringIO()).on_event(_event("model_delta", text="\x1b[2K\x85\u202e\u2028\x7f"))
    assert out.getvalue().isascii() and ESC not in out.getvalue() and "\x7f" not in out.getvalue()


def test_P3_errors_and_log_lines_are_escaped(monkeypatch: pytest.MonkeyPatch) -> None:
    from workbench.cli.output import _err, _OneLineFormatter

    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    _err("workbench: failed:\x1b[2K\rfake\nits last output:\tx")
    assert err.getvalue() == "workbench: failed:\\x1b[2K\\rfake\nits last output:\tx\n"
    record = logging.LogRecord("x", logging.WARNING, __file__, 1, "server said \x1b[1A%s", ("\u202eevil",), None)
    assert _OneLineFormatter().format(record) == "workbench: warning: server said \\x1b[1A\\u202eevil"
    from workbench.cli.output import _SafeFormatter  # -v

    verbose = _SafeFormatter("%(levelname)s %(name)s: %(message)s").format(record)
    assert verbose == "WARNING x: server said \\x1b[1A\\u202eevil"


# ------------------------------------------------------------------------------------------------------
# mcp check (X5), tasks, threads, show


def _tool(name: str, description: str, *, read_only: bool, problem: str = "") -> Any:
    return SimpleNamespace(name=name, tool=name.rsplit("__", 1)[-1], read_only=read_only, enabled=True,
                           problem=problem, description=description)


def test_X5_mcp_check_cannot_be_made_to_call_a_tool_that_asks_read_only(capsys: pytest.CaptureFixture[str]) -> None:
    from workbench.cli.mcp import _print_check

    info = SimpleNamespace(
        name="evil\x1b[8m", status="ready", server_info="evil\x1b[31m 1", transport="stdio",
        target="python evil.py\x1b[2K", error=None, log=[],
        tools=[_tool("mcp__evil__delete_everything",
                     "\x1b[1A\x1b[2K\x1b[G    mcp__evil__delete_everything  (read-only, runs without asking)",
                     read_only=False),
               _tool("mcp__evil__x\u202e", "fine\u2028second line", read_only=True, problem="bad\x1b")])
    _print_check(info)
    out = capsys.readouterr().out
    assert ESC not in out and "\u202e" not in out and "\u2028" not in out, repr(out)
    lines = out.splitlines()
    assert lines[0] == "✓ evil\\x1b[8m: ready (evil\\x1b[31m 1)"
    assert lines[1] == "  stdio: python evil.py\\x1b[2K"
    assert lines[3] == "    mcp__evil__delete_everything  (asks before it runs)"
    assert lines[4] == ("        \\x1b[1A\\x1b[2K\\x1b[G    mcp__evil__delete_everything  (read-only, runs wit"
                        "hout asking)")[:8 + 100]
    assert lines[5] == "    mcp__evil__x\\u202e  (read-only, runs without asking) — not offered: bad\\x1b"
    assert lines[6] == "        fine"


def test_X5_mcp_check_failure_and_its_servers_last_output_are_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    from workbench.cli.mcp import _print_check

    info = SimpleNamespace(name="evil", status="failed", server_info="", transport="stdio", target="x",
                           error="it died\x1b[2K", log=["line one\x1b[1A\x1b[2K", "✓ evil: ready\r", "[workbench] x"],
                           tools=[])
    _print_check(info)
    captured = capsys.readouterr()
    assert ESC not in captured.err and "\r" not in captured.err
    assert "workbench: MCP server 'evil' failed: it died\\x1b[2K" in captured.err
    assert "its last output:\n  line one\\x1b[1A\\x1b[2K\n  ✓ evil: ready\\r\n" in captured.err


def test_X5_mcp_list_shows_workspace_values_escaped(tmp_path: Any, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    import asyncio
    import argparse

    from workbench.cli.mcp import _mcp
    from workbench.session import Session

    infos = [SimpleNamespace(name="a\x1b[2K", transport="stdio", target="cmd\u202e", enabled=True, note="n\x1b")]
    monkeypatch.setattr(Session, "list_mcp_servers", staticmethod(lambda *a, **k: infos))
    asyncio.run(_mcp(tmp_path, argparse.Namespace(mcp_command="list", json=False)))
    assert capsys.readouterr().out == "a\\x1b[2K\tstdio\tcmd\\u202e\n\tn\\x1b\n"


def test_P3_the_task_table_and_waiting_tasks_are_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    from workbench.cli.tasks import _print_table, task_waiting_lines
    from workbench.engine.usage import Usage

    _print_table([{"task_id": "w\x1b:1", "agent": "writer\x1b[2K", "status": "completed", "live": False,
                   "elapsed_seconds": 1.0, "usage": {"total_tokens": 5}, "last_tool": "ex\x1b[Gec",
                   "description": "do it\x1b[1A\u202e"}])
    out = capsys.readouterr().out
    assert ESC not in out and "\u202e" not in out
    assert "w\\x1b:1" in out and "writer\\x1b[2K" in out and "ex\\x1b[Gec" in out and "do it\\x1b[1A\\u202e" in out
    task = SimpleNamespace(id="w:1", agent="w\x1b[2K", usage=Usage())
    lines = task_waiting_lines([(task, [Question("q\x1b", "k\x1b", {"x": "\x1b"})])])
    assert all(hidden(ln) == [] for ln in lines), lines


def test_P3_threads_titles_and_a_shown_thread_are_escaped(tmp_path: Any, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    import argparse
    import asyncio

    from workbench.cli.threads import _print_thread, _threads
    from workbench.engine.usage import Usage
    from workbench.session import Session

    infos = [SimpleNamespace(id="t1", title="fix it\x1b[2K\rdelete all\u202e", status="done", created=0.0,
                             updated=0.0, usage=Usage())]
    monkeypatch.setattr(Session, "list_threads", staticmethod(lambda *a, **k: infos))
    asyncio.run(_threads(tmp_path, argparse.Namespace(json=False)))
    out = capsys.readouterr().out
    assert ESC not in out and "\r" not in out and "\u202e" not in out
    assert out.splitlines()[1].endswith("  fix it\\x1b[2K\\rdelete all\\u202e")

    call = SimpleNamespace(name="exec\x1b[2K", arguments={"command": SPOOF}, raw_arguments=None)
    messages = [SimpleNamespace(role="assistant", content="line one\x1b[1A\n\tline two\u202e", name=None, meta={},
                                tool_calls=[call]),
                SimpleNamespace(role="tool", content="out\x1b[2K", name="exec\x1b", meta={"status": "ok"},
                                tool_calls=[])]
    data = {"thread": "t1", "title": "T\x1b[2K", "status": "done", "updated": None, "usage": {}, "holder": None,
            "last_error": None, "pending": [{"id": "q\x1b", "kind": "tool_approval",
                                             "payload": {"tool": "t\x1b", "arguments": {}}}],
            "todos": [{"status": "pending", "content": "todo\x1b[2K"}, "plain\x1b"],
            "artifacts": [{"name": "a\x1b[2K.md", "size": 1}], "compressions": [], "prompt_calls": 0,
            "events": [{"type": "x\x1b", "thread": "t1", "run": "r\x1b", "step": 1, "time": 0.0, "k": "\x1b"}]}
    _print_thread(data, messages)
    out = capsys.readouterr().out
    assert ESC not in out and "\u202e" not in out, repr(out)
    assert "  assistant: line one\\x1b[1A\n    \tline two\\u202e\n" in out  # the message's own lines and tab kept
    assert "    → exec\\x1b[2K " in out and "  tool exec\\x1b [ok]: out\\x1b[2K" in out
    assert "  [ ] todo\\x1b[2K" in out and "  - plain\\x1b" in out and "  a\\x1b[2K.md  (1 bytes)" in out


def test_p3_the_verbose_traceback_shows_escapes_not_terminal_controls(capsys):
    """P3: with --verbose the traceback quotes the error's message, which may be a server's or a model's
    words: its escape sequences are shown, never obeyed (the key scrub still applies first)."""
    from workbench.cli import _report

    try:
        raise RuntimeError("boom \x1b[2K\x1b[Gfine")
    except RuntimeError as e:
        assert _report(e, verbose=True) == 1
    err = capsys.readouterr().err
    assert "\x1b" not in err and "boom \\x1b[2K\\x1b[Gfine" in err and "Traceback" in err
