"""Start-up time: process spawn to the main window shown (issue 3; target under 1.5 s).

Starts ``python -m workbench`` (what the ``workbench`` command runs with no arguments) offscreen, in a
throw-away config/data folder and without provider keys (so it opens the demo workspace on the demo
model), several times, and prints each run, the min and the median.

Contract with ``workbench/app.py``: with ``WORKBENCH_EXIT_AFTER_SHOWN=1`` in the environment, the app
prints ``WINDOW_SHOWN <time.time()>`` on its own stdout line, flushed, when the main window's first
show event fires, then quits (exit code 0). The figure is that timestamp minus the time just before
the spawn, so it includes interpreter start, imports, QApplication, the window and its first show.

    python benchmarks/startup.py [--runs 5] [--module workbench] [--fresh] [--check]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_SECONDS = 1.5
MARKER = re.compile(r"^WINDOW_SHOWN\s+([0-9]+(?:\.[0-9]+)?)\b", re.MULTILINE)


def child_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(
        QT_QPA_PLATFORM="offscreen",
        WORKBENCH_EXIT_AFTER_SHOWN="1",
        WORKBENCH_CONFIG_DIR=str(home / "config"),
        WORKBENCH_DATA_DIR=str(home / "data"),
        PYTHONUNBUFFERED="1",
    )
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def one_run(module: str, home: Path, timeout: float) -> tuple[float, float]:
    """(seconds to window shown, seconds to process exit) for one start."""
    env = child_env(home)
    started = time.time()
    proc = subprocess.Popen(
        [sys.executable, "-m", module],
        cwd=str(home),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise RuntimeError(f"no exit within {timeout:g} s; stderr ends:\n{_tail(err)}") from None
    exited = time.time() - started
    match = MARKER.search(out)
    if match is None:
        raise RuntimeError(
            f"exit code {proc.returncode} and no 'WINDOW_SHOWN <time>' line on stdout — does workbench/app.py "
            f"implement WORKBENCH_EXIT_AFTER_SHOWN=1?\nstdout ends:\n{_tail(out)}\nstderr ends:\n{_tail(err)}"
        )
    if proc.returncode != 0:
        print(f"  (the app exited with code {proc.returncode} after showing the window)", file=sys.stderr)
    return float(match.group(1)) - started, exited


def _tail(text: str, lines: int = 15) -> str:
    return "\n".join(("    " + ln) for ln in (text or "").strip().splitlines()[-lines:]) or "    (empty)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="timed runs (default 5)")
    parser.add_argument("--module", default="workbench", help="module run with -m (default: workbench)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds allowed per run")
    parser.add_argument("--fresh", action="store_true",
                        help="time first starts: a new config/data folder per run (copies the demo workspace "
                             "each time); default: one folder, after an untimed first start")
    parser.add_argument("--check", action="store_true", help=f"exit 1 if the median exceeds {TARGET_SECONDS} s")
    args = parser.parse_args(argv)

    shown: list[float] = []
    exits: list[float] = []
    with tempfile.TemporaryDirectory(prefix="workbench-startup-") as tmp:
        base = Path(tmp)
        shared = base / "home"
        shared.mkdir()
        try:
            if not args.fresh:
                first, _ = one_run(args.module, shared, args.timeout)
                print(f"first start (untimed warm-up; sets up the demo workspace): {first:.3f} s")
            for i in range(args.runs):
                home = shared
                if args.fresh:
                    home = base / f"home-{i}"
                    home.mkdir()
                to_shown, to_exit = one_run(args.module, home, args.timeout)
                shown.append(to_shown)
                exits.append(to_exit)
                print(f"run {i + 1}: window shown after {to_shown:.3f} s (process exited after {to_exit:.3f} s)")
        except RuntimeError as exc:
            print(f"startup benchmark failed: {exc}", file=sys.stderr)
            return 1

    med = statistics.median(shown)
    print(
        f"startup, spawn -> window shown ({'first start' if args.fresh else 'returning user'}, offscreen): "
        f"min {min(shown):.3f} s, median {med:.3f} s over {len(shown)} runs (target < {TARGET_SECONDS} s)"
    )
    print(f"spawn -> process exit: min {min(exits):.3f} s, median {statistics.median(exits):.3f} s")
    if args.check and med > TARGET_SECONDS:
        print(f"median {med:.3f} s is over the {TARGET_SECONDS} s target", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
