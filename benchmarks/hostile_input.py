"""Hostile input: what huge or pathological files cost the engine (issue 8, DESIGN F3).

Every figure goes through a real ``Session`` (the standard middleware stack from ``workbench.yaml``,
the host backend, the SQLite store) with the in-process ``ScriptedModel``; files are built in a temp
folder, streamed to disk (never one 200 MB string in memory).

1. AGENTS.md of 200 MB: time of the run that reads it (its first model call builds the prompt) and the
   extra memory: the Python heap's peak (tracemalloc, a second pass) and the process's peak RSS
   growth. Target: < 1 s and < 100 MB extra.
2. SKILL.md of 200 MB (a valid frontmatter, then the body): the same figures. Target: < 1 s, < 100 MB.
3. A pathological ``grep`` pattern, ``(a+)+$``, over a 1 MB file of ``aaa…a!`` lines: the time until
   the tool returns (its error or its result), the event loop's longest unserved gap meanwhile, and
   the time from Stop to the run's end while such a grep runs over 16 such files. Target: < 2 s, and Stop honoured. Run in a child process with a deadline, since a
   backtracking regex holds the GIL and only a kill ends it; a child past its deadline is reported
   as such.
4. Store growth: one ``write_file`` of a 2 MB ``/scratch`` file, then 19 more steps (``ls``), against
   the same 20 steps writing a 2-byte file: the growth of ``.workbench/threads.sqlite3`` (with its
   WAL) and the difference. Target: < 3 MB.

    python benchmarks/hostile_input.py [--mb 200] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

MB = 1024 * 1024
TIME_TARGET_S = 1.0
MEMORY_TARGET_MB = 100.0
GREP_TARGET_S = 2.0
GREP_DEADLINE_S = 20.0
STORE_TARGET_MB = 3.0
PATTERN = "(a+)+$"
STOP_FILES = 15


def _rss_peak_mb() -> float:
    """The process's peak RSS so far (Linux reports KiB, macOS bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (MB if sys.platform == "darwin" else 1024)


def _stream(path: Path, head: str, total_mb: int) -> None:
    """``head`` then text lines up to ``total_mb`` MB, written a megabyte at a time."""
    path.parent.mkdir(parents=True, exist_ok=True)
    line = "Always follow rule 42 and write tests first.\n"
    chunk = line * (MB // len(line))
    with path.open("w", encoding="utf-8") as f:
        f.write(head)
        for _ in range(total_mb):
            f.write(chunk)


def _workspace(root: Path, name: str, yaml: str = "") -> Path:
    ws = root / name
    ws.mkdir(parents=True, exist_ok=True)
    (ws / "workbench.yaml").write_text("model: demo\n" + yaml, encoding="utf-8")
    return ws


async def _one_run(ws: Path) -> tuple[float, list[dict[str, Any]], str]:
    from workbench.engine.models.scripted import ScriptedModel, reply
    from workbench.session import Session

    model = ScriptedModel([reply("ok")])
    session = await Session.open(ws, model=model, trust=True)
    try:
        started = time.perf_counter()
        result = await session.run("hi")
        elapsed = time.perf_counter() - started
        assert result.status == "done", (result.status, result.error)
        return elapsed, session.documents, model.requests[0].system
    finally:
        await session.close()


async def _measure_prompt_file(ws: Path, label: str) -> dict[str, Any]:
    """Time and memory of a run whose prompt reads the hostile file (timed pass, then traced pass)."""
    gc.collect()
    rss_before = _rss_peak_mb()
    elapsed, docs, system = await _one_run(ws)
    rss_growth = _rss_peak_mb() - rss_before
    gc.collect()
    tracemalloc.start()
    try:
        await _one_run(ws)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    fates = {d.get("path"): (d.get("fate"), d.get("reason")) for d in docs}
    return {"what": label, "seconds": elapsed, "heap_peak_mb": peak / MB, "rss_peak_growth_mb": rss_growth,
            "prompt_chars": len(system), "fates": fates}


async def bench_agents_md(root: Path, size_mb: int) -> dict[str, Any]:
    ws = _workspace(root, "agents")
    _stream(ws / "AGENTS.md", "# Project rules\n", size_mb)
    return await _measure_prompt_file(ws, f"AGENTS.md {size_mb} MB")


async def bench_skill_md(root: Path, size_mb: int) -> dict[str, Any]:
    ws = _workspace(root, "skills")
    head = "---\nname: huge\ndescription: A skill whose SKILL.md is enormous.\n---\n# Steps\n"
    _stream(ws / "skills" / "huge" / "SKILL.md", head, size_mb)
    return await _measure_prompt_file(ws, f"SKILL.md {size_mb} MB")


# -- grep, in a child process ---------------------------------------------------------------------------


async def _grep_child(ws: Path) -> dict[str, Any]:
    from workbench.engine.models.scripted import ScriptedModel, reply, tool_reply
    from workbench.session import Session

    from workbench.engine.tokens import estimate_tokens

    estimate_tokens("warm up")  # not part of the figures
    out: dict[str, Any] = {}
    call = ("grep", {"pattern": PATTERN, "path": "/project/big.txt"})
    model = ScriptedModel([tool_reply(call), reply("done")])
    session = await Session.open(ws, model=model, trust=True, default_permission="allow")
    lag = {"max": 0.0}

    async def ticker() -> None:  # how long the event loop (the window's, in the app) went unserved
        while True:
            before = time.perf_counter()
            await asyncio.sleep(0.01)
            lag["max"] = max(lag["max"], time.perf_counter() - before - 0.01)

    tick = asyncio.ensure_future(ticker())
    try:
        started = time.perf_counter()
        result = await session.run("search")
        out["grep_seconds"] = time.perf_counter() - started
        out["loop_max_lag_s"] = lag["max"]
        tick.cancel()
        out["grep_status"] = result.status
        tools = [m for m in session.messages if m.role == "tool"]
        out["grep_result"] = (tools[-1].content if tools else "")[:160]
    finally:
        await session.close()
    print("GREP " + json.dumps(out), flush=True)  # the first figure survives a hang in the second part

    # Stop while a longer grep (the whole project: 1 MB plus STOP_FILES more) is in flight.
    model = ScriptedModel([tool_reply(("grep", {"pattern": PATTERN, "path": "/project"})), reply("done")])
    session = await Session.open(ws, model=model, trust=True, default_permission="allow")
    in_tool = asyncio.Event()
    session.subscribe(lambda e: in_tool.set() if e.type == "tool_call_started" else None, replay=False)
    try:
        task = asyncio.ensure_future(session.run("search"))
        await asyncio.wait_for(in_tool.wait(), GREP_DEADLINE_S)
        await asyncio.sleep(0.05)
        stopped = time.perf_counter()
        await session.stop()
        result = await task
        out["stop_seconds"] = time.perf_counter() - stopped
        out["stop_status"] = result.status
    finally:
        await session.close()
    return out


def bench_grep(root: Path) -> dict[str, Any]:
    ws = _workspace(root, "grep")
    line = "a" * 31 + "!\n"
    (ws / "big.txt").write_text(line * (MB // len(line)), encoding="utf-8")
    for i in range(STOP_FILES):  # more of the same, for the Stop measurement's longer grep
        (ws / "more" / f"{i:02d}.txt").parent.mkdir(exist_ok=True)
        (ws / "more" / f"{i:02d}.txt").write_text(line * (MB // len(line)), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, __file__, "--grep-child", str(ws)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    started = time.perf_counter()
    try:
        stdout, stderr = proc.communicate(timeout=GREP_DEADLINE_S)
        killed = False
    except subprocess.TimeoutExpired:
        proc.kill()  # SIGKILL: a regex holding the GIL ignores SIGINT and SIGTERM
        stdout, stderr = proc.communicate()
        killed = True
    found: dict[str, Any] = {"killed_after_s": round(time.perf_counter() - started, 1) if killed else None}
    for line_ in stdout.splitlines():
        if line_.startswith(("GREP ", "DONE ")):
            found.update(json.loads(line_.split(" ", 1)[1]))
    if proc.returncode not in (0, None) and not killed:
        found["child_error"] = stderr.strip().splitlines()[-1:] or [f"exit {proc.returncode}"]
    return found


# -- store growth ---------------------------------------------------------------------------------------


def _store_bytes(ws: Path) -> int:
    folder = ws / ".workbench"
    return sum(p.stat().st_size for p in folder.glob("threads.sqlite3*")) if folder.exists() else 0


async def _scratch_session(ws: Path, content: str, steps: int) -> int:
    from workbench.engine.models.scripted import ScriptedModel, reply, tool_reply
    from workbench.session import Session

    script = [tool_reply(("write_file", {"path": "/scratch/big.txt", "content": content}))]
    script += [tool_reply(("ls", {"path": "/scratch"})) for _ in range(steps - 1)]
    model = ScriptedModel([*script, reply("done")])
    session = await Session.open(ws, model=model, trust=True, default_permission="allow")
    before = _store_bytes(ws)
    try:
        result = await session.run("write it and look around")
        assert result.status == "done", (result.status, result.error)
    finally:
        await session.close()
    return _store_bytes(ws) - before


def _prose(size: int) -> str:
    """``size`` characters of seeded pseudo-prose: compresses like real text (a run of one letter
    would compress to nothing and flatter the store)."""
    import random

    rng = random.Random(8)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9))) for _ in range(4000)]
    out: list[str] = []
    n = 0
    while n < size:
        line = " ".join(rng.choice(words) for _ in range(12)) + "\n"
        out.append(line)
        n += len(line)
    return "".join(out)[:size]


async def bench_store(root: Path, steps: int = 20) -> dict[str, Any]:
    big = await _scratch_session(_workspace(root, "store-big"), _prose(2 * MB), steps)
    small = await _scratch_session(_workspace(root, "store-small"), "x\n", steps)
    return {"steps": steps, "growth_mb": big / MB, "control_growth_mb": small / MB, "extra_mb": (big - small) / MB}


# -- main -----------------------------------------------------------------------------------------------


def _verdict(ok: bool) -> str:
    return "ok" if ok else "OVER TARGET"


def report(results: dict[str, Any]) -> None:
    print("Hostile input (issue 8, F3)")
    for key in ("agents", "skill"):
        r = results[key]
        memory = max(r["heap_peak_mb"], r["rss_peak_growth_mb"])
        ok = r["seconds"] < TIME_TARGET_S and memory < MEMORY_TARGET_MB
        print(f"  {r['what']:<18} run {r['seconds']:7.3f} s   heap peak {r['heap_peak_mb']:8.1f} MB   "
              f"RSS peak +{r['rss_peak_growth_mb']:7.1f} MB   (targets < {TIME_TARGET_S:g} s, "
              f"< {MEMORY_TARGET_MB:g} MB)  {_verdict(ok)}")
        for path, (fate, reason) in sorted(r["fates"].items(), key=lambda kv: str(kv[0])):
            print(f"      {path}: {fate}{' — ' + reason if reason else ''}")
    g = results["grep"]
    if "grep_seconds" in g:
        ok = g["grep_seconds"] < GREP_TARGET_S
        print(f"  grep {PATTERN!r} over 1 MB: returned in {g['grep_seconds']:.3f} s (target < {GREP_TARGET_S:g} s) "
              f"{_verdict(ok)}; run {g['grep_status']}; tool said: {g['grep_result']!r}")
    else:
        print(f"  grep {PATTERN!r} over 1 MB: no result within {GREP_DEADLINE_S:g} s — the child was killed "
              f"(SIGKILL){'; ' + str(g.get('child_error')) if g.get('child_error') else ''}  OVER TARGET")
    if "loop_max_lag_s" in g:
        print(f"  event loop during that grep: longest unserved gap {g['loop_max_lag_s'] * 1000:.0f} ms")
    if "stop_seconds" in g:
        print(f"  Stop during a grep of {STOP_FILES + 1} such files: the run ended {g['stop_seconds']:.3f} s after "
              f"Stop, status {g['stop_status']}")
    elif "grep_seconds" in g:
        print(f"  Stop during that grep: not honoured within {GREP_DEADLINE_S:g} s (child killed)")
    s = results["store"]
    print(f"  store growth, 2 MB /scratch file over {s['steps']} steps: {s['growth_mb']:.2f} MB "
          f"(same steps with a 2-byte file: {s['control_growth_mb']:.2f} MB; the file's share "
          f"{s['extra_mb']:.2f} MB; target < {STORE_TARGET_MB:g} MB)  {_verdict(s['growth_mb'] < STORE_TARGET_MB)}")


async def amain(size_mb: int) -> dict[str, Any]:
    from workbench.engine.tokens import estimate_tokens

    estimate_tokens("warm up")  # tiktoken's o200k loads once (~0.6 s); not part of any figure
    with tempfile.TemporaryDirectory(prefix="wb-hostile-") as tmp:
        root = Path(tmp)
        results: dict[str, Any] = {}
        results["agents"] = await bench_agents_md(root, size_mb)
        (root / "agents").joinpath("AGENTS.md").unlink()
        results["skill"] = await bench_skill_md(root, size_mb)
        (root / "skills" / "skills" / "huge" / "SKILL.md").unlink()
        results["grep"] = bench_grep(root)
        results["store"] = await bench_store(root)
    return results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mb", type=int, default=200, help="size of the huge AGENTS.md and SKILL.md (MB)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.add_argument("--grep-child", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    home = Path(tempfile.mkdtemp(prefix="wb-hostile-home-"))
    # A throwaway user folder: /user/AGENTS.md, skills, trust records and settings never touch the real one.
    os.environ["HOME"] = str(home)
    os.environ["XDG_CONFIG_HOME"] = str(home / ".config")
    if args.grep_child:
        print("DONE " + json.dumps(asyncio.run(_grep_child(Path(args.grep_child)))), flush=True)
        return 0
    results = asyncio.run(amain(args.mb))
    if args.json:
        print(json.dumps(results, default=str, indent=2))
    else:
        report(results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
