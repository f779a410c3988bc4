"""Refresh every picture in docs/ with one command (issue 16): the window tour's panels and dialogs.

    QT_QPA_PLATFORM=offscreen python benchmarks/docs_screenshots.py [--only tour,screenshot,…]

Each picture is rendered by the real window, offscreen, from a session on a temporary copy of the demo
workspace (or the stub server, for what the demo model cannot show), each in its own process:

- ``tour``: the demo session played to its end with every approval given, then each dock panel raised
  and rendered (docs/panels/<panel>.png), the whole window (docs/panels/window.png) and the Settings
  dialog (docs/panels/settings.png) — this script;
- ``screenshot``: docs/screenshot.png, the window at the demo's AGENTS.md approval (screenshot.py);
- ``rule-builder``: docs/rule-builder.png (rule_builder_shot.py);
- ``tasks``, ``context``, ``inbox``: docs/tasks.png, docs/context.png + docs/inspector.png and
  docs/inbox.png, made by their render tests (which assert what the picture must show) with the
  ``*_PNG`` variables pointing into docs/.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PANELS = DOCS / "panels"

#: The dock panels the tour renders, by title, and the file each goes to.
TOUR_PANELS = ("Threads", "Plan", "Skills", "Instructions", "Budget", "Artifacts", "Context", "Tasks", "Decisions",
               "Servers", "Events")

TESTS = {
    "tasks": (["tests/ui/test_tasks_panel.py::test_d10_render_the_board"], {"TASKS_PNG": DOCS / "tasks.png"}),
    "context": (["tests/ui/test_context_panel.py", "-k", "render"],
                {"CONTEXT_PNG": DOCS / "context.png", "INSPECTOR_PNG": DOCS / "inspector.png"}),
    "inbox": (["tests/ui/test_decisions_inbox.py::test_q1_render_the_inbox"], {"INBOX_PNG": DOCS / "inbox.png"}),
}
SCRIPTS = {"screenshot": ("screenshot.py", DOCS / "screenshot.png"),
           "rule-builder": ("rule_builder_shot.py", DOCS / "rule-builder.png")}


def _env(base: Path) -> dict[str, str]:
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", WORKBENCH_CONFIG_DIR=str(base / "config"),
               WORKBENCH_DATA_DIR=str(base / "data"), HOME=str(base / "home"))
    for key in ("OPENAI_API_KEY", "OPENAI_API_BASE", "OPENAI_BASE_URL"):
        env.pop(key, None)
    return env


async def _tour(base: Path) -> list[Path]:
    from tests.ui.helpers import button, find_dialog, render_window, visible_dialog, wait_for
    from workbench.app import ensure_demo_workspace, plug_panels
    from workbench.config import UserSettings
    from workbench.ui.main_window import MainWindow
    from workbench.ui.qt_async import application
    from workbench.ui.style import apply_app_style

    app = application()
    app.setQuitOnLastWindowClosed(False)
    apply_app_style(app)
    ws = ensure_demo_workspace(base / "demo-project")
    window = MainWindow(UserSettings(), persist=False)
    plug_panels(window)
    window.resize(1500, 900)
    window.show()
    await window.open_workspace(ws)
    window.input.setPlainText("Show me around this project and write notes for the team.")
    window.send_button.click()
    while True:  # approve each of the demo's writes until its run ends
        done = asyncio.ensure_future(window.wait_settled())
        while not done.done():
            dialog = visible_dialog("approval_dialog")
            if dialog is not None and dialog.current is not None:
                button(dialog, "approve_once").click()
            await asyncio.sleep(0.1)
        if done.result() != "interrupted":
            break
    await asyncio.sleep(0.5)
    out = []
    PANELS.mkdir(exist_ok=True)
    for title in TOUR_PANELS:
        dock = window.dock(title)
        if dock is None:
            print(f"{title}: no such panel in this build, skipped", file=sys.stderr)
            continue
        dock.show()
        dock.raise_()
        await asyncio.sleep(0.3)
        path = PANELS / f"{title.lower()}.png"
        dock.grab().save(str(path), "PNG")
        out.append(path)
    path = PANELS / "window.png"
    render_window(window, str(path))
    out.append(path)
    # Settings, as File → Settings… opens it
    task = asyncio.ensure_future(window.open_settings())
    dialog = await find_dialog("settingsDialog", 10)
    await asyncio.sleep(0.3)
    path = PANELS / "settings.png"
    dialog.grab().save(str(path), "PNG")
    out.append(path)
    dialog.reject()
    await wait_for(lambda: task.done(), 10, "the Settings dialog to close")
    await window.wait_closed()
    return out


def _run_tour() -> int:
    from workbench.ui.qt_async import run

    base = Path(tempfile.mkdtemp(prefix="workbench-docs-shots-"))
    os.environ.update(_env(base))
    for path in run(_tour(base)):
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated: tour, screenshot, rule-builder, " +
                        ", ".join(TESTS))
    parser.add_argument("--tour-here", action="store_true", help=argparse.SUPPRESS)  # the tour's own process
    args = parser.parse_args()
    if args.tour_here:
        return _run_tour()
    wanted = [w for w in args.only.split(",") if w] or ["tour", *SCRIPTS, *TESTS]
    failed = []
    for name in wanted:
        base = Path(tempfile.mkdtemp(prefix=f"workbench-docs-{name}-"))
        if name == "tour":
            cmd = [sys.executable, __file__, "--tour-here"]
            env = _env(base)
        elif name in SCRIPTS:
            script, target = SCRIPTS[name]
            cmd = [sys.executable, str(ROOT / "benchmarks" / script), str(target)]
            env = _env(base)
        elif name in TESTS:
            tests, outputs = TESTS[name]
            cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests]
            env = {**_env(base), **{k: str(v) for k, v in outputs.items()}}
        else:
            parser.error(f"unknown picture set {name!r}")
        print(f"== {name}", flush=True)
        if subprocess.run(cmd, cwd=ROOT, env=env).returncode != 0:
            failed.append(name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
