"""Context compression and the prompt log (issue 12): tokens saved, time to compute the view, store overhead.

1. A recorded-style history of ``--steps`` steps (default 2,000: 4,000 messages), each a user turn or a
   tool call with a result of a realistic size (``ls`` ~600 characters, ``read_file`` 1–20 KB,
   ``grep`` ~3 KB; every fifth call repeats an earlier one), is compressed by each strategy alone and
   by all in order (summaries stubbed: a fixed 1,500-character text, so the figure is the strategy's
   own). Printed per strategy: tokens before and after (estimates), and the time to compute the view
   (``compressed_view`` over all 4,000 messages) — **target < 50 ms at 4,000 messages** — and the
   request size at the last step with and without compression.
2. The prompt log's store overhead: a scripted session (``ScriptedModel``, the standard stack) of
   ``--log-steps`` steps; bytes added to ``prompt_texts`` + ``prompt_calls`` per step once the sections
   repeat — **target < 2 KB a step**.

    python benchmarks/compression.py [--steps 2000] [--log-steps 200] [--quick]

``--quick`` (400 steps, 20 logged steps: a second) is what ``tests/engine/test_benchmarks_run.py`` runs;
the targets are for the defaults. Each view time is the median of 5; the verdict is on the slowest.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workbench.config import CompressionConfig, DedupeConfig, DropConfig, SummarizeConfig, TruncateConfig  # noqa: E402
from workbench.engine.messages import Message, ToolCall  # noqa: E402
from workbench.harness.compression import compressed_view, estimate, plan, span_to_replace  # noqa: E402


def recorded_history(steps: int, seed: int = 7) -> list[Message]:
    rng = random.Random(seed)
    out: list[Message] = []
    earlier: list[tuple[str, dict[str, str], int]] = []
    for n in range(steps):
        if n % 10 == 0:
            out.append(Message.user(f"Step {n}: now look at module {n // 10} and fix what fails."))
            out.append(Message.assistant(f"Looking at module {n // 10}."))
            continue
        if earlier and rng.random() < 0.2:
            name, args, size = rng.choice(earlier)
        else:
            name = rng.choice(["ls", "read_file", "read_file", "grep"])
            args = {"path": f"/project/src/mod{rng.randrange(5000)}.py"}
            size = {"ls": 600, "grep": 3000}.get(name, rng.randrange(1000, 20000))
            earlier.append((name, args, size))
        call = ToolCall.parse(f"c{n}", name, args)
        out.append(Message.assistant("", (call,)))
        out.append(Message.tool(call, ("line of output\n" * (size // 15 + 1))[:size]))
    return out


def strategies(steps: int) -> None:
    history = recorded_history(steps)
    full = estimate(history)
    print(f"history: {len(history):,} messages, ~{full:,} tokens (estimate)")
    off = dict(dedupe=DedupeConfig(enabled=False), truncate=TruncateConfig(enabled=False),
               summarize=SummarizeConfig(enabled=False), drop=DropConfig(enabled=False))
    cases = {
        "dedupe": CompressionConfig(**{**off, "dedupe": DedupeConfig()}),
        "truncate": CompressionConfig(**{**off, "truncate": TruncateConfig()}),
        "dedupe+truncate": CompressionConfig(**{**off, "dedupe": DedupeConfig(), "truncate": TruncateConfig()}),
    }
    slowest = 0.0
    for name, cfg in cases.items():
        p, view = plan(history, [], cfg, target=1)
        ms = _view_ms(history, [{"ops": p.ops}], cfg.max_tool_response_chars)
        slowest = max(slowest, ms)
        after = estimate(view)
        print(f"  {name:<16} tokens {full:>10,} -> {after:>10,} (saved {100 * (full - after) / full:5.1f}%)  "
              f"view {ms:6.1f} ms")
    # all in order, the summary (stubbed) over everything but the newest messages
    cfg = CompressionConfig()
    p, view = plan(history, [], cfg, target=1)
    span = span_to_replace(history, cfg.summarize.preserve_recent)
    assert span is not None
    summary = {"op": "summarize", "start": span[0], "end": span[1], "text": "s" * 1500, "facts": []}
    records = [{"ops": [*p.ops, summary]}]
    view = compressed_view(history, records, cfg.max_tool_response_chars)
    ms = _view_ms(history, records, cfg.max_tool_response_chars)
    slowest = max(slowest, ms)
    after = estimate(view)
    print(f"  {'all (+summary)':<16} tokens {full:>10,} -> {after:>10,} (saved {100 * (full - after) / full:5.1f}%)  "
          f"view {ms:6.1f} ms")
    print(f"request at step {steps:,}: {full:,} tokens without compression, {after:,} with "
          f"(all strategies); with dedupe+truncate only: "
          f"{estimate(plan(history, [], cases['dedupe+truncate'], target=1)[1]):,}")
    print(f"view with no record (the common step): {_view_ms(history, [], 400000):.2f} ms at {len(history):,} messages")
    verdict = "OK" if slowest < 50 else "OVER"
    print(f"target view < 50 ms at 4,000 messages: slowest {slowest:.1f} ms at {len(history):,} messages  {verdict}")


def _view_ms(history: list[Message], records: list[dict[str, object]], cap: int) -> float:
    """The median of 5 computations of the view, in ms."""
    times = []
    for _ in range(5):
        t = time.perf_counter()
        compressed_view(history, records, cap)
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


async def log_overhead(steps: int) -> None:
    from workbench.engine.models.scripted import ScriptedModel, reply, tool_reply
    from workbench.session import Session

    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        (ws / "AGENTS.md").write_text("Be brief.\n" * 20)
        (ws / "workbench.yaml").write_text("permissions: {default: allow}\n")
        script = [tool_reply(("ls", {"path": "/project"})) for _ in range(steps)] + [reply("done")]
        session = await Session.open(ws, model=ScriptedModel(script), trust=True)
        try:
            log = session.engine.prompt_log
            assert log is not None
            before = log.size()
            await session.run("Look around")
            calls = session.prompt_calls()
            size = log.size()
            print(f"prompt log: {len(calls)} calls, {size - before:,} bytes in all, "
                  f"{(size - before) / max(1, len(calls)):,.0f} bytes a call on average")
        finally:
            await session.close()
        # the growth per step once the sections repeat: a second run of the same length
        session = await Session.open(ws, session.thread_id, model=ScriptedModel(script), trust=True)
        try:
            log = session.engine.prompt_log
            assert log is not None
            start = log.size()
            await session.run("Again")
            n = len(session.prompt_calls()) - len(calls)
            per = (log.size() - start) / max(1, n)
            print(f"prompt log once sections repeat: {per:,.0f} bytes a step over {n} steps "
                  f"(target < 2,048)  {'OK' if per < 2048 else 'OVER'}")
        finally:
            await session.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--log-steps", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="400 steps, 20 logged steps (the test's mode)")
    args = parser.parse_args(argv)
    if args.quick:
        args.steps, args.log_steps = 400, 20
    strategies(args.steps)
    asyncio.run(log_overhead(args.log_steps))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
