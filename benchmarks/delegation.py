"""Background sub-agent tasks run side by side (issue 11, D5, D7): wall time and memory per task.

A parent agent launches N background tasks (default 8) in one step — each ``delegate_to_subK{task,
background: true}`` for its own sub-agent ``subK`` on its own model name, so the loopback stub answers
each task from its own queue whatever the interleaving — answers "Launched.", and then waits for them as
``workbench run`` does (``Session.wait_for_tasks``). Each task is a 5-step sub-agent: 4 ``ls`` tool calls,
then its answer. Every model call (the parent's and the sub-agents') is a streamed call through the real
``LiteLLMModel`` to the stub (``tests/stub_server.py``, in this process on its own thread and event
loop), which waits ``--latency`` (200 ms) before answering: a task alone takes ≈ 5 × 200 ms.

Printed:
- the parent's wall time, from ``Session.run`` to the last task settled, with N tasks and with one task
  (the same shape), their ratio, and the sum of N one-task runs it would be if tasks ran one after the
  other. **Target: N tasks ≤ 1.5 × one task** (they overlap; not the sum);
- each task's own elapsed time (started → settled; min / median / max) and how many ran at once (from
  the ``task_progress`` events);
- memory per task, two ways, in a separate pass (tracemalloc slows the timed runs): the Python heap
  (``tracemalloc``: the peak during the N-task run above the heap before it, ÷ N — what the child
  engines, their histories, litellm's streams and the store rows cost), and the process's resident set
  (``VmRSS`` from /proc/self/status sampled every 10 ms during the run: its peak above the RSS before,
  ÷ N; ``ru_maxrss`` where /proc is missing). The one-task figures beside them show the fixed part;
- model calls, tokens and the session's store size.

``subagents.max_concurrent`` is set to N (its default, 4, would queue half of 8 tasks behind the others:
``--max-concurrent 4`` shows that). ``--quick`` (50 ms latency, one round) is what
tests/engine/test_benchmarks_run.py runs.

    python benchmarks/delegation.py [--tasks 8] [--latency 0.2] [--rounds 3] [--max-concurrent N] [--quick] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import resource
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness_overhead import isolate  # noqa: E402  (the same isolation as the overhead benchmark)

RATIO_TARGET = 1.5
STEPS = 4  # ls calls per task, then its answer


def make_workspace(base: Path, url: str, tasks: int, max_concurrent: int) -> Path:
    ws = base / "ws"
    (ws / "src").mkdir(parents=True)
    for i in range(8):
        (ws / "src" / f"mod{i}.py").write_text(f"x = {i}\n" * 20, encoding="utf-8")
    (ws / "README.md").write_text("# Bench\n\nA small workspace.\n", encoding="utf-8")
    agents = "".join(f"    - {{name: sub{k}, description: Lists folders., model: openai/sub{k}}}\n"
                     for k in range(1, tasks + 1))
    (ws / "workbench.yaml").write_text(
        f"model: openai/parent\napi_base: {url}\npermissions: {{default: allow}}\n"
        f"subagents:\n  async: true\n  max_concurrent: {max_concurrent}\n  max_delegations: {tasks}\n"
        f"  history_length: 0\n  agents:\n{agents}", encoding="utf-8")
    return ws


def script(stub: Any, tasks: int, latency: float) -> None:
    """The parent: one step launching ``tasks`` background tasks, then its answer; each task: STEPS ls
    calls, then its answer. Every reply waits ``latency`` first."""
    from tests.stub_server import StubReply

    launches = [(f"delegate_to_sub{k}", {"task": f"List /project {STEPS} times, then say done.", "background": True},
                 f"call_sub{k}") for k in range(1, tasks + 1)]
    stub.script_for("parent", StubReply(tool_calls=launches, delay=latency, usage=(400, 20 * tasks)),
                    StubReply(text="Launched.", delay=latency, usage=(500, 3)))
    for k in range(1, tasks + 1):
        steps = [StubReply(tool_calls=[("ls", {"path": "/project"}, f"call_ls_{i}")], delay=latency,
                           usage=(120 + 60 * i, 12)) for i in range(STEPS)]
        stub.script_for(f"sub{k}", *steps, StubReply(text=f"sub{k}: listed {STEPS} times. Done.", delay=latency,
                                                    usage=(120 + 60 * STEPS, 9)))


class RssSampler:
    """The process's resident set, sampled every 10 ms on a thread (VmRSS; ru_maxrss without /proc)."""

    def __init__(self) -> None:
        self.peak = current_rss_mb()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            self.peak = max(self.peak, current_rss_mb())

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, current_rss_mb())


def current_rss_mb() -> float:
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024


async def one_case(session: Any, stub: Any, tasks: int, latency: float) -> dict[str, Any]:
    """One parent run launching ``tasks`` background tasks, waited for; its figures."""
    script(stub, tasks, latency)
    session.new_thread()
    running: set[str] = set()
    most = 0

    def on_event(event: Any) -> None:
        nonlocal most
        if event.type == "task_progress":
            (running.add if event.data.get("status") == "pending" else running.discard)(event.data["task_id"])
            most = max(most, len(running))

    unsubscribe = session.subscribe(on_event, replay=False)
    t0 = time.perf_counter()
    try:
        result = await session.run(f"Launch the {tasks} listings in the background.")
        t_run = time.perf_counter() - t0
        if result.status != "done":
            raise RuntimeError(f"the parent's run ended {result.status}: {result.error}")
        if not await session.wait_for_tasks(600):
            raise RuntimeError("the tasks did not settle within 600 s")
        wall = time.perf_counter() - t0
    finally:
        unsubscribe()
    records = session.tasks()
    bad = [(t.id, t.status, t.error) for t in records if t.status != "completed"]
    if len(records) != tasks or bad:
        raise RuntimeError(f"expected {tasks} completed tasks, got {len(records)}; not completed: {bad}")
    elapsed = [t.elapsed() for t in records]
    return {
        "tasks": tasks,
        "wall_s": wall,
        "parent_run_s": t_run,
        "task_elapsed_s": elapsed,
        "at_once": most,
        "task_tokens": sum(t.usage.total_tokens for t in records),
        "task_calls": sum(t.usage.calls for t in records),
    }


async def measure(ws: Path, stub: Any, tasks: int, latency: float, rounds: int) -> dict[str, Any]:
    from workbench.session import Session

    session = await Session.open(ws, api_key="sk-bench", trust=True)
    try:
        await one_case(session, stub, 1, latency)  # warm-up: litellm's lazy imports, the HTTP client, tiktoken
        ones, manys = [], []
        for _ in range(rounds):  # interleaved, so a busy moment of the machine hits both
            ones.append(await one_case(session, stub, 1, latency))
            manys.append(await one_case(session, stub, tasks, latency))

        # memory: a separate pass, the Python heap traced and the RSS sampled
        import tracemalloc

        memory: dict[str, Any] = {}
        for label, n in (("one", 1), ("many", tasks)):
            gc.collect()
            tracemalloc.start()
            heap0 = tracemalloc.get_traced_memory()[0]
            rss0 = current_rss_mb()
            with RssSampler() as rss:
                await one_case(session, stub, n, latency)
            heap_peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            memory[label] = {"heap_mb": (heap_peak - heap0) / 2**20, "rss_mb": max(0.0, rss.peak - rss0)}
        store_mb = session.store.path.stat().st_size / 2**20
    finally:
        await session.close()
    return {"one": ones, "many": manys, "memory": memory, "store_mb": store_mb}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--latency", type=float, default=0.2, help="seconds the stub waits before each reply")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-concurrent", type=int, default=None,
                        help="subagents.max_concurrent (default: --tasks, so none is queued)")
    parser.add_argument("--quick", action="store_true", help="50 ms latency, one round (the test's mode)")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object too")
    args = parser.parse_args(argv)
    if args.quick:
        args.latency, args.rounds = 0.05, 1
    max_concurrent = args.max_concurrent or args.tasks

    from tests.stub_server import StubServer

    with tempfile.TemporaryDirectory(prefix="wb-bench-delegation-") as tmp:
        base = Path(tmp)
        isolate(base)
        stub = StubServer().start()
        try:
            from workbench.engine.llm_setup import import_litellm

            import_litellm()  # the import (seconds) is nobody's wall time here
            ws = make_workspace(base, stub.url, args.tasks, max_concurrent)
            out = asyncio.run(measure(ws, stub, args.tasks, args.latency, args.rounds))
        finally:
            stub.stop()

    one = min(out["one"], key=lambda c: c["wall_s"])
    many = min(out["many"], key=lambda c: c["wall_s"])
    ratio = many["wall_s"] / one["wall_s"]
    task_alone = one["task_elapsed_s"][0]
    els = sorted(e for c in out["many"] for e in c["task_elapsed_s"])
    n = args.tasks
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    ideal_task = (STEPS + 1) * args.latency
    print(f"delegation: 1 parent step launching {n} background tasks of {STEPS} ls steps + 1 answer each, "
          f"{args.latency * 1000:.0f} ms stub latency per model call, max_concurrent {max_concurrent}; "
          f"best of {args.rounds} round{'s' if args.rounds != 1 else ''}")
    print(f"python {sys.version.split()[0]} on {sys.platform}, {os.cpu_count()} CPUs, load average {load:.1f}")
    print()
    rows = [
        ("parent wall, 1 task", f"{one['wall_s']:.2f} s   (run {one['parent_run_s']:.2f} s, the task {task_alone:.2f} s; "
                                f"{STEPS + 1} calls × {args.latency * 1000:.0f} ms = {ideal_task:.2f} s of latency)"),
        (f"parent wall, {n} tasks", f"{many['wall_s']:.2f} s   (run {many['parent_run_s']:.2f} s; "
                                    f"{many['at_once']} ran at once)"),
        (f"{n} tasks one after another", f"{n * task_alone:.2f} s   (the sum, for reference)"),
        (f"tasks' own elapsed, {n} at once", f"min {els[0]:.2f} / median {statistics.median(els):.2f} / "
                                             f"max {els[-1]:.2f} s (all rounds)"),
        (f"rounds, 1 task / {n} tasks", ", ".join(f"{a['wall_s']:.2f}/{b['wall_s']:.2f}"
                                                   for a, b in zip(out["one"], out["many"])) + " s"),
    ]
    mem = out["memory"]
    rows += [
        ("Python heap (tracemalloc)", f"{mem['many']['heap_mb'] / n:.2f} MB per task at peak "
                                      f"({mem['many']['heap_mb']:.1f} MB for {n}; {mem['one']['heap_mb']:.1f} MB for 1)"),
        ("resident set (VmRSS sampled)", f"{mem['many']['rss_mb'] / n:.2f} MB per task at peak "
                                         f"({mem['many']['rss_mb']:.1f} MB above the RSS before, for {n}; "
                                         f"{mem['one']['rss_mb']:.1f} MB for 1)"),
        (f"the {n} tasks", f"{many['task_calls']} model calls, {many['task_tokens']:,} tokens; "
                           f"store {out['store_mb']:.2f} MB after {1 + 2 * args.rounds + 2} parent runs"),
    ]
    width = max(len(label) for label, _ in rows)
    for label, text in rows:
        print(f"  {label:<{width}}  {text}")
    print()
    ok = ratio <= RATIO_TARGET
    print(f"target: parent wall with {n} tasks / with 1 = {many['wall_s']:.2f} / {one['wall_s']:.2f} = {ratio:.2f} "
          f"<= {RATIO_TARGET}  {'OK' if ok else 'OVER'}")
    if args.json:
        print(json.dumps({"ratio": ratio, **out}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
