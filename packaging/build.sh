#!/usr/bin/env bash
# Build the one-folder bundle dist/workbench/ with PyInstaller (DESIGN §7, K1) and print its size.
#
#   python3 -m venv .venv && .venv/bin/pip install -e . && PATH="$PWD/.venv/bin:$PATH" packaging/build.sh
#
# Uses the `python` on PATH (the project's venv, with the project installed); installs PyInstaller into it
# when it is missing. Then `dist/workbench/workbench run --model demo "hello"` runs headless and
# `dist/workbench/workbench` opens the window, on a machine with no Python.
#
# Environment: PYTHON (default: python on PATH), WORKBENCH_DIST (default: <repo>/dist),
# WORKBENCH_BUILD (PyInstaller's work folder, default: <repo>/build/pyinstaller). Extra arguments go to
# PyInstaller (e.g. --clean). The work folder is kept: a rebuild after a small change is faster.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python}"
DIST="${WORKBENCH_DIST:-$ROOT/dist}"
WORK="${WORKBENCH_BUILD:-$ROOT/build/pyinstaller}"
PYINSTALLER_REQ="pyinstaller>=6.10,<7"

if ! command -v "$PYTHON" >/dev/null 2>&1; then
    echo "build.sh: no '$PYTHON' on PATH — put the project's venv first on PATH (PATH=\"\$PWD/.venv/bin:\$PATH\")" >&2
    exit 2
fi
if ! "$PYTHON" -c 'import workbench, PySide6, litellm' 2>/dev/null; then
    echo "build.sh: '$(command -v "$PYTHON")' cannot import the project and its dependencies;" \
         "install it first: $PYTHON -m pip install -e '$ROOT'" >&2
    exit 2
fi
if ! "$PYTHON" -c 'import PyInstaller' 2>/dev/null; then
    echo "build.sh: installing $PYINSTALLER_REQ into $("$PYTHON" -c 'import sys; print(sys.prefix)')"
    "$PYTHON" -m pip install --quiet "$PYINSTALLER_REQ"
fi

started=$(date +%s)
"$PYTHON" -m PyInstaller --noconfirm --log-level WARN --distpath "$DIST" --workpath "$WORK" "$@" \
    "$ROOT/packaging/workbench.spec"
elapsed=$(( $(date +%s) - started ))

bundle="$DIST/workbench"
if [ ! -x "$bundle/workbench" ]; then
    echo "build.sh: PyInstaller finished but $bundle/workbench is missing" >&2
    exit 1
fi
size_mb=$(du -sm "$bundle" | cut -f1)
echo "bundle: $bundle"
echo "size: ${size_mb} MB"
echo "build time: ${elapsed} s"
