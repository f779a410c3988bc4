"""Render the rule builder (Q3) opened from a real approval of the demo workspace to a PNG.

    QT_QPA_PLATFORM=offscreen python benchmarks/rule_builder_shot.py [docs/rule-builder.png]

Runs the real window on a temporary copy of the demo workspace, approves its first write (notes.md),
opens "Make a rule…" on the AGENTS.md edit, chooses the tree level and the project, waits for the
preview, and renders the dialog. Nothing is saved.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


async def shoot(out: Path, base: Path) -> None:
    from screenshot import open_at_agents_approval
    from tests.ui.helpers import button, find_dialog, wait_for

    window, dialog = await open_at_agents_approval(base, (1400, 860), panels=False)
    button(dialog, "make_rule").click()
    builder = await find_dialog("rule_builder")
    button(builder, "level_tree").click()
    button(builder, "scope_project").click()
    await wait_for(lambda: builder.preview_list.topLevelItemCount() >= 2, 10, "the preview")
    await asyncio.sleep(0.3)
    image = builder.grab()
    image.save(str(out))
    print(f"{out}: {image.width()}x{image.height()}; {builder.preview_summary.text()}")
    button(builder, "rule_cancel").click()
    button(dialog, "reject").click()
    await window.wait_settled()
    await window.wait_closed()


def main() -> int:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "docs" / "rule-builder.png").resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    home = Path(tempfile.mkdtemp(prefix="workbench-shot-home-"))
    os.environ["HOME"] = str(home)  # the dialog names the files as ~/…
    os.environ["WORKBENCH_CONFIG_DIR"] = str(home / ".config" / "workbench")
    os.environ["WORKBENCH_DATA_DIR"] = str(home / ".local" / "share" / "workbench")
    from workbench.ui.qt_async import run

    run(shoot(out, home))
    return 0


if __name__ == "__main__":
    sys.exit(main())
