"""End to end: ``workbench compact`` and the compressions in ``workbench show`` (issue 12, C5, C7): the real
``python -m workbench`` as a subprocess against the loopback stub, which answers the agent's model
(``openai/test-model``) and the summariser's (``openai/cheap``) from their own queues.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tests.e2e.test_cli import _wait_for_model_call, cli, env, json_lines, no_traceback, running  # noqa: F401
from tests.stub_server import StubReply, StubServer

SUMMARY = "The user had big.txt and other.txt read; other.txt holds the figures."
CHARS = r"[\d,]+ characters"


def workspace(tmp_path: Path, stub: StubServer) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    (ws / "big.txt").write_text("".join(f"big line {i:03}\n" for i in range(160)))  # ~2,700 characters read
    (ws / "other.txt").write_text("".join(f"other line {i:03} {'o' * 90}\n" for i in range(120)))  # ~13,000
    (ws / "workbench.yaml").write_text(
        f"model: openai/test-model\napi_base: {stub.url}\npermissions: {{default: allow}}\n"
        "compression:\n  max_input_tokens: 6000\n  preserve_recent: 2\n"
        "  truncate: {max_chars: 500, preserve_recent: 1}\n"
        "  summarize: {model: openai/cheap, preserve_recent: 2}\n", encoding="utf-8")
    return ws


def _read(path: str, call_id: str) -> tuple[str, dict[str, Any], str]:
    return ("read_file", {"path": path}, call_id)


def first_run(ws: Path, env: dict[str, str], stub: StubServer) -> str:
    """One run that reads big.txt twice, other.txt once and lists the folder: a history to compact."""
    stub.script_for("test-model",
                    StubReply(tool_calls=[_read("/project/big.txt", "c1")], usage=(100, 5)),
                    StubReply(tool_calls=[_read("/project/big.txt", "c2")], usage=(100, 5)),
                    StubReply(tool_calls=[_read("/project/other.txt", "c3")], usage=(100, 5)),
                    StubReply(tool_calls=[("ls", {"path": "/project"}, "c4")], usage=(100, 5)),
                    StubReply(text="Read them all.", usage=(100, 5)))
    proc = cli(["run", "--json", "Read big.txt twice, then other.txt, then list the folder"], ws, env)
    assert proc.returncode == 0, proc.stderr
    return json_lines(proc.stdout)[-1]["thread"]


def test_compact_prints_figures_and_the_next_run_sends_the_compressed_view(tmp_path, env, stub_server):
    ws = workspace(tmp_path, stub_server)
    thread = first_run(ws, env, stub_server)
    stub_server.script_for("cheap", StubReply(text=SUMMARY, usage=(300, 20)))

    proc = cli(["compact", "--thread", thread], ws, env)
    no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    head = re.search(rf"compacted thread {thread}: ~([\d,]+) → ~([\d,]+) tokens \(−\d+%\), manual \(compression 1\)",
                     out)
    assert head, out
    before, after = (int(g.replace(",", "")) for g in head.groups())
    assert after < before
    assert re.search(rf"dedupe\s+1 tool result\s+−[\d,]+ tokens\s+\({CHARS} replaced by a note", out), out
    assert re.search(rf"truncate\s+2 tool results\s+−[\d,]+ tokens\s+\({CHARS} cut to 500 each\)", out), out
    assert re.search(rf"summarize\s+9 messages\s+−[\d,]+ tokens\s+\({CHARS} replaced by a summary\)", out), out
    assert re.search(r"the model now sees \d+ messages; the thread keeps all 10", out), out
    [summary_request] = [r for r in stub_server.requests if r["model"] == "cheap"]
    seen = json.dumps(summary_request["messages"])
    assert "big line 000" in seen and "other line 000" in seen  # the summariser saw what it summarises…
    assert "other line 100" not in seen  # …through the cheap strategies (other.txt cut to 500 characters)

    stub_server.script_for("test-model", StubReply(text="Next answer.", usage=(100, 5)))
    proc = cli(["run", "--thread", thread, "What next?"], ws, env)
    assert proc.returncode == 0, proc.stderr
    sent = json.dumps([r for r in stub_server.requests if r["model"] == "test-model"][-1]["messages"])
    assert SUMMARY in sent and "[Summary of" in sent  # the compressed view went out…
    assert "other line" not in sent and "big line" not in sent  # …without the tool results it replaced
    assert "/project/big.txt" in sent  # C8: the paths named in them, verbatim
    assert "What next?" in sent

    shown = cli(["show", thread], ws, env)
    assert shown.returncode == 0, shown.stderr
    assert "compressions (1):" in shown.stdout
    assert re.search(r"#1 .* manual\s+~[\d,]+ → ~[\d,]+ tokens\s+"
                     r"dedupe 1 tool result, truncate 2 tool results, summarize 9 messages", shown.stdout), shown.stdout
    assert re.search(r"prompt log: 7 model calls stored", shown.stdout), shown.stdout
    assert shown.stdout.count("tool read_file [ok]: ") == 3  # the stored thread keeps every message


def test_show_json_has_the_compression_records_and_the_prompt_calls(tmp_path, env, stub_server):
    ws = workspace(tmp_path, stub_server)
    thread = first_run(ws, env, stub_server)
    data = json.loads(cli(["show", thread, "--json"], ws, env).stdout)
    assert data["compressions"] == [] and data["prompt_calls"] == 5

    stub_server.script_for("cheap", StubReply(text=SUMMARY))
    proc = cli(["compact", "--thread", thread, "--json"], ws, env)
    assert proc.returncode == 0, proc.stderr
    [line] = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    compacted = json.loads(line)
    assert compacted["compacted"] is True and compacted["thread"] == thread and compacted["compression"] == 1
    assert compacted["trigger"] == "manual" and compacted["tokens_after"] < compacted["tokens_before"]
    assert set(compacted["strategies"]) == {"dedupe", "truncate", "summarize"}
    stored = [m for m in json.loads(cli(["show", thread, "--json"], ws, env).stdout)["messages"]]
    sizes = [len(m["content"]) for m in stored]
    assert compacted["lost"]["dedupe"] == {"messages": 1, "chars": sizes[2]}  # the first read of big.txt
    assert compacted["lost"]["truncate"] == {"messages": 2, "chars": sizes[4] + sizes[6], "kept_chars": 500}
    assert compacted["lost"]["summarize"] == {"messages": 9, "chars": sum(sizes[:9])}
    assert compacted["summary"] == SUMMARY and compacted["facts"] > 0
    assert compacted["stored_messages"] == 10 and compacted["view_messages"] < 10

    data = json.loads(cli(["show", thread, "--json"], ws, env).stdout)
    [record] = data["compressions"]
    assert record["id"] == 1 and record["trigger"] == "manual"
    assert record["tokens_before"] == compacted["tokens_before"] and record["tokens_after"] == compacted["tokens_after"]
    assert {op["op"] for op in record["lost"]} == {"dedupe", "truncate", "summarize"}
    assert len(data["messages"]) == 10  # C5: nothing deleted from the stored thread
    assert data["prompt_calls"] == 6  # the summariser's call is one of them (V1: every model call)
    assert any(e["type"] == "compression_applied" and e["compression"] == 1 for e in data["events"])


def test_compact_on_an_unknown_thread_exits_2(tmp_path, env, stub_server):
    ws = workspace(tmp_path, stub_server)
    proc = cli(["compact", "--thread", "nosuchthread"], ws, env)
    no_traceback(proc)
    assert proc.returncode == 2 and "nosuchthread" in proc.stderr
    assert cli(["compact"], ws, env).returncode == 2  # --thread is required
    assert stub_server.requests == []


def test_compact_refuses_a_thread_running_in_another_process(tmp_path, env, stub_server):
    ws = workspace(tmp_path, stub_server)
    stub_server.script_for("test-model", StubReply(text="slow", delay=8))
    with running(["run", "--json", "Slow question"], ws, env) as proc:
        thread = _wait_for_model_call(proc, stub_server)["thread"]
        refused = cli(["compact", "--thread", thread], ws, env)
        no_traceback(refused)
        assert refused.returncode == 2
        assert f"thread {thread} is running in another process (process {proc.pid}" in refused.stderr
        assert "once that run has ended" in refused.stderr
    assert not [r for r in stub_server.requests if r["model"] == "cheap"]  # nothing summarised


def test_compact_with_nothing_to_compact_says_so(tmp_path, env, stub_server):
    ws = workspace(tmp_path, stub_server)
    stub_server.script_for("test-model", StubReply(text="Hi.", usage=(10, 2)))
    proc = cli(["run", "--json", "Hello"], ws, env)
    thread = json_lines(proc.stdout)[-1]["thread"]
    proc = cli(["compact", "--thread", thread], ws, env)
    assert proc.returncode == 0, proc.stderr
    assert "nothing to compact" in proc.stderr and proc.stdout == ""
    proc = cli(["compact", "--thread", thread, "--json"], ws, env)
    assert json.loads(proc.stdout) == {"thread": thread, "compacted": False, "stored_messages": 2, "view_messages": 2}
