"""The PyInstaller bundle (issue 14, K1/K2): its size, its build time, and its start-to-window time.

    python benchmarks/bundle.py                 # build with packaging/build.sh into a temp folder, then time starts
    python benchmarks/bundle.py --bundle dist/workbench   # time an existing bundle (no build)

Build time is packaging/build.sh end to end (PyInstaller installed beforehand, its work folder new, so
every module is analysed). Start-to-window is spawn to the main window's first show event, offscreen, in a
minimal environment (PATH=/usr/bin:/bin, a new HOME): the app prints ``WINDOW_SHOWN <time.time()>`` under
``WORKBENCH_EXIT_AFTER_SHOWN=1`` (the contract benchmarks/startup.py uses). The same is timed for
``python -m workbench`` from the project's venv beside it. One untimed first start each (it copies the
demo workspace), then ``--runs`` starts, interleaved; min and median printed. Target: the bundle's
median start-to-window under 1.5 s (the window target of benchmarks/startup.py).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARKER = re.compile(r"^WINDOW_SHOWN\s+([0-9]+(?:\.[0-9]+)?)\b", re.MULTILINE)
TARGET_SECONDS = 1.5


def build(dest: Path) -> tuple[Path, float]:
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": os.environ.get("HOME", str(dest)),
           "WORKBENCH_DIST": str(dest / "dist"), "WORKBENCH_BUILD": str(dest / "build")}
    subprocess.run([sys.executable, "-c", "import PyInstaller"], check=True)  # installed: not part of the time
    started = time.perf_counter()
    done = subprocess.run(["bash", str(ROOT / "packaging" / "build.sh")], cwd=ROOT, env=env, capture_output=True,
                          text=True)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"build.sh exited {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    return dest / "dist" / "workbench", elapsed


def size_mb(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink()) / 1e6


def start_to_window(cmd: list[str], home: Path) -> float:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "QT_QPA_PLATFORM": "offscreen",
           "WORKBENCH_EXIT_AFTER_SHOWN": "1", "PYTHONUNBUFFERED": "1"}
    started = time.time()
    done = subprocess.run(cmd, cwd=home, env=env, capture_output=True, text=True, timeout=120)
    match = MARKER.search(done.stdout)
    if done.returncode != 0 or match is None:
        raise SystemExit(f"{cmd[0]} exited {done.returncode} without WINDOW_SHOWN\n{done.stderr[-3000:]}")
    return float(match.group(1)) - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bundle", type=Path, help="an existing bundle folder (skips the build)")
    parser.add_argument("--runs", type=int, default=5, help="timed starts of each (default 5)")
    args = parser.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="workbench-bundle-"))
    try:
        if args.bundle:
            bundle = args.bundle.resolve()
            print(f"bundle: {bundle} (not rebuilt)")
        else:
            bundle, seconds = build(tmp)
            print(f"build time (packaging/build.sh, new work folder): {seconds:.0f} s")
        print(f"bundle size: {size_mb(bundle):.0f} MB ({bundle})")
        sides = {"bundle": [str(bundle / "workbench")], "venv": [sys.executable, "-m", "workbench"]}
        homes = {name: tmp / f"home-{name}" for name in sides}
        for name, cmd in sides.items():
            homes[name].mkdir()
            start_to_window(cmd, homes[name])  # first start: copies the demo workspace; untimed
        times: dict[str, list[float]] = {name: [] for name in sides}
        for i in range(args.runs):
            for name, cmd in sides.items():
                times[name].append(start_to_window(cmd, homes[name]))
            print(f"run {i + 1}: " + ", ".join(f"{n} {times[n][-1]:.3f} s" for n in sides))
        for name in sides:
            print(f"start -> window shown, {name} (offscreen): min {min(times[name]):.3f} s, "
                  f"median {statistics.median(times[name]):.3f} s over {args.runs} runs")
        print(f"target: the bundle's median < {TARGET_SECONDS} s")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
