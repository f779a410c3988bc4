"""This project against its peers, per step, side by side in one run (issue 9, item 2).

The same scripted session for every side: each step the model asks for one ``ls`` tool call (listing
a small workspace folder), the tool runs, and the next request carries the whole history; after
``--steps`` (100) calls the model answers, so the last request holds ~202 messages on one
thread/conversation. The model is the loopback stub (``tests/stub_server.py --auto-ls``, streamed
chat completions) in its own process. The sides:

- this project: ``Session`` with ``model: openai/test-model`` and ``api_base`` at the stub (the
  standard middleware stack, ``LiteLLMModel``, streamed), in the project's venv;
- deepagents (LangGraph, ``ChatOpenAI(streaming=True)``, its own ``ls`` over a filesystem backend),
  pydantic-ai (``OpenAIChatModel``, streamed through ``event_stream_handler``), openai-agents
  (``OpenAIChatCompletionsModel``, ``Runner.run_streamed``, tracing off) — each in a throw-away venv
  under the temp folder (``benchmarks/peer_envs.py``; ``--fresh`` rebuilds, ``--latest`` takes the
  newest releases instead of the pinned ones), SKIPPED with the reason when it cannot be installed or run;
- references: a bare loop over the openai SDK, and the floor — a bare ``http.client`` loop (server +
  JSON, nothing else).

Each side runs in its own process (``benchmarks/peer_sides.py``): imports, agent set-up and a 2-step
warm-up session happen before its clock starts. ``--rounds`` (2) rounds are interleaved (project,
peers…, references; again), and the figure is each side's best wall time per model call (ms/step);
the client process's CPU time per call is printed beside it as a cross-check (the server's is not in it).
The machine is shared and noisy: compare the ratios of one run, not figures across runs.

**Target: this project's ms/step ≤ 0.40 × the fastest peer's.**

    python benchmarks/peers.py [--steps 100] [--rounds 2] [--sides workbench,deepagents,…] [--fresh] [--latest] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from peer_envs import (  # noqa: E402 - the benchmarks folder is not a package
    PEERS,
    REFERENCES,
    SIDES_SCRIPT,
    Stub,
    child_env,
    envs_root,
    make_workspace,
    prepare,
    project_python,
    run_side,
)

TARGET_RATIO = 0.40
PROJECT = "workbench"
LABELS = {
    PROJECT: "this project (Session, litellm)",
    "deepagents": "deepagents (LangGraph + langchain-openai)",
    "pydantic-ai": "pydantic-ai (openai provider, streamed)",
    "openai-agents": "openai-agents (chat completions, streamed, tracing off)",
    "openai-sdk": "reference: bare loop over the openai SDK",
    "http.client": "floor: bare loop over http.client",
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=100, help="ls calls in the session (default 100)")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds (default 2)")
    parser.add_argument("--sides", default=",".join([PROJECT, *PEERS, *REFERENCES]),
                        help="comma-separated subset of the sides (default: all)")
    parser.add_argument("--fresh", action="store_true", help="rebuild the peers' venvs")
    parser.add_argument("--latest", action="store_true", help="install the newest peer releases, not the pinned ones")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds allowed for one side's session")
    parser.add_argument("--json", action="store_true", help="also print every result as one JSON line")
    args = parser.parse_args(argv)

    sides = [s.strip() for s in args.sides.split(",") if s.strip()]
    unknown = set(sides) - {PROJECT, *PEERS, *REFERENCES}
    if unknown:
        parser.error(f"unknown sides {sorted(unknown)}; known: {', '.join([PROJECT, *PEERS, *REFERENCES])}")
    pythons, skipped = prepare([s for s in sides if s in PEERS], latest=args.latest, fresh=args.fresh)
    for s in sides:
        if s not in PEERS:
            pythons[s] = project_python()

    results: dict[str, list[dict[str, Any]]] = {s: [] for s in sides}
    failures: dict[str, list[str]] = {s: [] for s in sides}
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"peers: {args.steps} ls steps + 1 answer per session ({args.steps + 1} streamed model calls, "
          f"~{2 * args.steps + 2} messages at the end) against the loopback stub (own process); "
          f"{args.rounds} interleaved rounds; {os.cpu_count()} CPUs, load average {load:.1f}")
    print(f"peer venvs: {envs_root(args.latest)} ({'newest releases' if args.latest else 'pinned versions'})")
    with tempfile.TemporaryDirectory(prefix="wb-peers-") as tmp:
        base = Path(tmp)
        stub = Stub.start()
        try:
            for rnd in range(1, args.rounds + 1):
                for side in sides:
                    if side in skipped:
                        continue
                    ws = make_workspace(base / f"{side}-{rnd}")
                    cmd = [str(pythons[side]), str(SIDES_SCRIPT), "session", side, "--url", stub.url,
                           "--ws", str(ws), "--steps", str(args.steps)]
                    try:
                        out = run_side(cmd, child_env(base / "user"), args.timeout)
                    except RuntimeError as exc:
                        failures[side].append(f"round {rnd}: {exc}")
                        print(f"round {rnd}  {side:<14} FAILED: {exc}", flush=True)
                        continue
                    results[side].append(out)
                    print(f"round {rnd}  {side:<14} {out['ms_per_step']:7.2f} ms/step  "
                          f"(CPU {out['cpu_ms_per_step']:6.2f}; {out['wall_s']:.2f} s for {out['model_calls']} calls)",
                          flush=True)
                    if args.json:
                        print(json.dumps(out))
                    time.sleep(0.5)  # let the stub settle between sides
        finally:
            stub.stop()

    best = {s: min(r["ms_per_step"] for r in rs) for s, rs in results.items() if rs}
    cpu = {s: min(r["cpu_ms_per_step"] for r in rs) for s, rs in results.items() if rs}
    print()
    print(f"{'side':<58} {'best ms/step':>12} {'CPU':>6}  {'rounds':<18} versions")
    for side in sides:
        label = LABELS.get(side, side)
        if side in skipped:
            print(f"{label:<58} {'SKIPPED':>19}  {skipped[side]}")
            continue
        if side not in best:
            print(f"{label:<58} {'SKIPPED':>19}  could not run: {'; '.join(failures[side])}")
            continue
        rounds = ", ".join(f"{r['ms_per_step']:.1f}" for r in results[side])
        vers = results[side][0]["versions"]
        shown = ", ".join(f"{k} {v}" for k, v in vers.items() if k != "python")
        print(f"{label:<58} {best[side]:>12.2f} {cpu[side]:>6.2f}  {rounds:<18} {shown or '(standard library)'}")
        if failures[side]:
            print(f"{'':<58} {'':>19}  also failed: {'; '.join(failures[side])}")
    print()
    peers_run = {s: v for s, v in best.items() if s in PEERS}
    if PROJECT in best and peers_run:
        fastest = min(peers_run, key=peers_run.get)
        ratio = best[PROJECT] / peers_run[fastest]
        verdict = "OK" if ratio <= TARGET_RATIO else "OVER"
        print(f"ratio this project / fastest peer ({fastest}): {best[PROJECT]:.2f} / {peers_run[fastest]:.2f} = "
              f"{ratio:.2f}  (target <= {TARGET_RATIO:.2f}: {verdict})")
        cpu_fastest = min((s for s in peers_run), key=cpu.get)
        print(f"cross-check on the clients' process CPU (less sensitive to a loaded machine): "
              f"{cpu[PROJECT]:.2f} / {cpu[cpu_fastest]:.2f} ({cpu_fastest}) = {cpu[PROJECT] / cpu[cpu_fastest]:.2f}")
        if "http.client" in best:
            print(f"this project spends {best[PROJECT] / best['http.client']:.1f}x the floor (http.client "
                  f"{best['http.client']:.2f} ms/step)")
    else:
        print("no ratio: this project or every peer was skipped or failed (see above)")
    return 1 if PROJECT in sides and PROJECT not in best else 0  # a skipped peer is reported, not an error


if __name__ == "__main__":
    sys.exit(main())
