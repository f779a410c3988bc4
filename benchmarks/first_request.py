"""The first request: from starting a process to its first request reaching the server (issue 9, item 4).

For this project that is the CLI, ``workbench run --workspace W --model openai/test-model --api-base
URL "hi"`` (the project venv's ``workbench`` script; ``--module`` runs ``python -m workbench``
instead), three ways: as it runs once the shared model host is up (the untimed first start starts it;
it keeps litellm imported between commands); as the first command after a login or after the host's
idle time runs, starting the host (each run with a runtime folder of its own, its host ended after);
and with ``WORKBENCH_MODEL_DAEMON=0`` (litellm imported in the command itself, as on a system without
the shared host); for each peer its shortest script that builds its agent and sends "hi" as one streamed
request (``benchmarks/peer_sides.py first <peer>``, in the peer's throw-away venv — see
``benchmarks/peers.py``); and, for reference, the same with a bare openai SDK client and with
``http.client`` (interpreter start-up plus the least a request needs).

The stub (``tests/stub_server.py --auto-ls --log-arrivals``, its own process) prints the
``time.time()`` at which each request arrives; the figure is that minus the time taken just before
the spawn, so it covers interpreter start, imports, configuration and set-up up to the request. Each
side first runs once untimed (page cache, bytecode), then ``--runs`` (3) times, the sides interleaved;
the best and the median are printed, and the ratio of this project to the fastest peer.
The machine is shared and noisy: compare the ratios of one run.

**Target: this project's first request no slower than the fastest peer's (ratio ≤ 1.0).**

    python benchmarks/first_request.py [--runs 3] [--sides workbench,deepagents,…] [--module] [--fresh] [--latest]
"""

from __future__ import annotations

import argparse
import os
import queue
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from peer_envs import (  # noqa: E402 - the benchmarks folder is not a package
    PEERS,
    REFERENCES,
    SIDES_SCRIPT,
    Stub,
    child_env,
    envs_root,
    prepare,
    project_python,
)

TARGET_RATIO = 1.0
PROJECT = "workbench"
#: The same command with no shared model host running (WORKBENCH_MODEL_DAEMON=0: litellm imported in the
#: command itself) — what the first `workbench run` after a login, or after the host's idle time, costs.
COLD = "workbench-cold"
#: The first command after a login (or the host's idle time): no host runs yet, so the command starts it.
FIRST = "workbench-first"
OURS = (PROJECT, FIRST, COLD)
LABELS = {
    PROJECT: "this project: workbench run (shared host up)",
    FIRST: "this project: first command, starts the host",
    COLD: "this project: workbench run, no shared host",
    "deepagents": "deepagents",
    "pydantic-ai": "pydantic-ai",
    "openai-agents": "openai-agents",
    "openai-sdk": "reference: openai SDK, one streamed call",
    "http.client": "reference: http.client, one streamed call",
}


def project_command(url: str, ws: Path, as_module: bool) -> list[str]:
    python = project_python()
    script = python.parent / "workbench"
    head = [str(python), "-m", "workbench"] if as_module or not script.exists() else [str(script)]
    return [*head, "run", "--workspace", str(ws), "--model", "openai/test-model", "--api-base", url, "hi"]


def one_run(stub: Stub, cmd: list[str], env: dict[str, str], cwd: Path, timeout: float) -> tuple[float, float]:
    """(seconds from spawn to the first request at the stub, seconds to exit) for one start."""
    stub.drain()
    started = time.time()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise RuntimeError(f"no exit within {timeout:g} s; stderr: {_tail(err)}") from None
    exited = time.time() - started
    arrived = 0.0
    while arrived < started:  # a late line from an earlier start is not this one's
        try:
            arrived = stub.arrivals.get(timeout=2.0)
        except queue.Empty:
            raise RuntimeError(f"exit {proc.returncode} and no request reached the stub; "
                               f"stderr: {_tail(err)}; stdout: {_tail(out)}") from None
    if proc.returncode != 0:
        raise RuntimeError(f"exit {proc.returncode} after its request; stderr: {_tail(err)}")
    return arrived - started, exited


def stop_shared_hosts(runtime: Path) -> None:
    """End the shared model hosts this run started (their sockets are under ``runtime``)."""
    import signal
    import socket

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from workbench.engine.models.shared_host import peer

    for path in (runtime / "workbench").glob("*.sock"):
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.connect(str(path))
                os.kill(peer(sock)[0], signal.SIGTERM)
        except OSError:
            pass


def _tail(text: str, lines: int = 6) -> str:
    return " | ".join(ln.strip() for ln in (text or "").strip().splitlines()[-lines:]) or "(empty)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="timed runs per side (default 3)")
    parser.add_argument("--sides", default=",".join([PROJECT, *PEERS, *REFERENCES]),
                        help="comma-separated subset of the sides (default: all)")
    parser.add_argument("--module", action="store_true", help="start the project as `python -m workbench run …`")
    parser.add_argument("--fresh", action="store_true", help="rebuild the peers' venvs")
    parser.add_argument("--latest", action="store_true", help="install the newest peer releases, not the pinned ones")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds allowed per start")
    args = parser.parse_args(argv)

    sides = [s.strip() for s in args.sides.split(",") if s.strip()]
    if PROJECT in sides:
        for extra in (COLD, FIRST):
            if extra not in sides:
                sides.insert(sides.index(PROJECT) + 1, extra)
    unknown = set(sides) - {*OURS, *PEERS, *REFERENCES}
    if unknown:
        parser.error(f"unknown sides {sorted(unknown)}; known: {', '.join([PROJECT, *PEERS, *REFERENCES])}")
    pythons, skipped = prepare([s for s in sides if s in PEERS], latest=args.latest, fresh=args.fresh)

    times: dict[str, list[float]] = {s: [] for s in sides}
    failures: dict[str, list[str]] = {s: [] for s in sides}
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"first request: spawn -> first request at the loopback stub; 1 untimed start then {args.runs} timed "
          f"per side, interleaved; {os.cpu_count()} CPUs, load average {load:.1f}")
    print(f"peer venvs: {envs_root(args.latest)} ({'newest releases' if args.latest else 'pinned versions'})")
    with tempfile.TemporaryDirectory(prefix="wb-first-") as tmp:
        base = Path(tmp)
        ws = base / "ws"  # no workbench.yaml: the flags choose the model and the server (nothing to trust)
        ws.mkdir()
        (ws / "README.md").write_text("# First request\n", encoding="utf-8")
        env = child_env(base / "user", OPENAI_API_KEY="sk-bench")
        runtime = base / "rt"  # the shared model host's socket folder (private, short), ended below
        runtime.mkdir(mode=0o700)
        env.update(XDG_RUNTIME_DIR=str(runtime), WORKBENCH_MODEL_DAEMON="1", WORKBENCH_MODEL_DAEMON_IDLE="120")
        envs = {COLD: {**env, "WORKBENCH_MODEL_DAEMON": "0"}}
        stub = Stub.start(log_arrivals=True)
        try:
            commands = {}
            for side in sides:
                if side in OURS:
                    commands[side] = project_command(stub.url, ws, args.module)
                elif side not in skipped:
                    python = pythons.get(side, project_python())
                    commands[side] = [str(python), str(SIDES_SCRIPT), "first", side, "--url", stub.url,
                                      "--ws", str(ws)]
            for rnd in range(args.runs + 1):
                for side, cmd in commands.items():
                    if rnd > 0 and not times[side] and failures[side]:
                        continue  # it failed every time so far, the warm-up included
                    side_env = envs.get(side, env)
                    if side == FIRST:  # a runtime folder no host serves yet; the host this run starts is ended
                        own = base / f"rt-first-{rnd}"
                        own.mkdir(mode=0o700)
                        side_env = {**env, "XDG_RUNTIME_DIR": str(own)}
                    try:
                        first, exited = one_run(stub, cmd, side_env, base, args.timeout)
                    except RuntimeError as exc:
                        failures[side].append(f"{'warm-up' if rnd == 0 else f'run {rnd}'}: {exc}")
                        print(f"{'warm-up' if rnd == 0 else f'run {rnd}':<8} {side:<14} FAILED: {exc}", flush=True)
                        continue
                    finally:
                        if side == FIRST:
                            stop_shared_hosts(Path(side_env["XDG_RUNTIME_DIR"]))
                    if rnd > 0:
                        times[side].append(first)
                    print(f"{'warm-up' if rnd == 0 else f'run {rnd}':<8} {side:<14} first request after "
                          f"{first:.3f} s (exited after {exited:.3f} s)", flush=True)
        finally:
            stub.stop()
            stop_shared_hosts(runtime)

    print()
    print(f"{'side':<44} {'best s':>8} {'median s':>9}")
    best: dict[str, float] = {}
    median: dict[str, float] = {}
    for side in sides:
        label = LABELS.get(side, side)
        if side in skipped:
            print(f"{label:<44} {'SKIPPED':>8}  {skipped[side]}")
            continue
        if not times[side]:
            print(f"{label:<44} {'SKIPPED':>8}  could not run: {'; '.join(failures[side])}")
            continue
        best[side], median[side] = min(times[side]), statistics.median(times[side])
        print(f"{label:<44} {best[side]:>8.3f} {median[side]:>9.3f}")
    print()
    peers_run = [s for s in best if s in PEERS]
    if PROJECT in best and peers_run:
        fastest = min(peers_run, key=best.get)
        fastest_med = min(peers_run, key=median.get)
        for side in (s for s in OURS if s in best):
            ratio = best[side] / best[fastest]
            ratio_med = median[side] / median[fastest_med]
            print(f"ratio {LABELS[side].removeprefix('this project: ')} / fastest peer, best: {best[side]:.3f} / "
                  f"{best[fastest]:.3f} ({fastest}) = {ratio:.2f}; median: {median[side]:.3f} / "
                  f"{median[fastest_med]:.3f} ({fastest_med}) = {ratio_med:.2f}  "
                  f"(target <= {TARGET_RATIO:.2f}: {'OK' if ratio_med <= TARGET_RATIO else 'OVER'})")
    else:
        print("no ratio: this project or every peer was skipped or failed (see above)")
    return 1 if PROJECT in sides and PROJECT not in best else 0


if __name__ == "__main__":
    sys.exit(main())
