"""Render the main window mid-session (the demo model, at its AGENTS.md approval) to a PNG.

    QT_QPA_PLATFORM=offscreen python benchmarks/screenshot.py [docs/screenshot.png]

Runs the real window on a temporary copy of the demo workspace, approves the first write, and
renders the window with the approval dialog for the AGENTS.md edit painted over it.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


async def open_at_agents_approval(base: Path, size: tuple[int, int], *, panels: bool = True) -> tuple[Any, Any]:
    """The real window on a copy of the demo workspace, its first write (notes.md) approved, waiting at
    the AGENTS.md edit's approval: ``(window, dialog)``. Shared with ``rule_builder_shot.py``."""
    from tests.ui.helpers import button, find_dialog, visible_dialog, wait_for
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
    if panels:
        plug_panels(window)
    window.resize(*size)
    window.show()
    await window.open_workspace(ws)
    window.input.setPlainText("Show me around this project and write notes for the team.")
    window.send_button.click()
    dialog = await find_dialog("approval_dialog")
    button(dialog, "approve_once").click()  # notes.md
    await wait_for(lambda: (d := visible_dialog("approval_dialog")) and d.current
                   and d.current.payload.get("tool") == "edit_file", 20, "the AGENTS.md approval")
    return window, visible_dialog("approval_dialog")


async def shoot(out: Path) -> None:
    from tests.ui.helpers import button, distinct_colors, render_window, wait_for

    window, dialog = await open_at_agents_approval(Path(tempfile.mkdtemp(prefix="workbench-shot-")), (1600, 900))
    await wait_for(lambda: "+- Keep notes.md" in dialog.diff_view.toPlainText(), 10, "the diff")
    window.input.setPlainText("Looks good — what else could we improve?")
    await asyncio.sleep(0.3)
    image = render_window(window, str(out))
    print(f"{out}: {image.width()}x{image.height()}, {distinct_colors(image)} colours sampled")
    button(dialog, "reject").click()
    await window.wait_settled()
    await window.wait_closed()


def main() -> int:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "docs" / "screenshot.png").resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="workbench-shot-home-")
    os.environ["WORKBENCH_CONFIG_DIR"] = os.path.join(tmp, "config")
    os.environ["WORKBENCH_DATA_DIR"] = os.path.join(tmp, "data")
    from workbench.ui.qt_async import run

    run(shoot(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
