"""Render the hicolor PNGs from the SVG app icon, and copy the SVG to where the wheel carries it.

    QT_QPA_PLATFORM=offscreen python packaging/icons/render_icons.py

The SVG (hicolor/scalable/apps/<id>.svg) is the one source: the PNGs under hicolor/<N>x<N>/apps/ are
drawn from it with Qt's QSvgRenderer, and resources/icons/<id>.svg (the window's icon, shipped in the
wheel as workbench.resources) is a byte-for-byte copy. Run this after changing the SVG.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

APP_ID = "io.github.agentworkbench.Workbench"
SIZES = (16, 24, 32, 48, 64, 128, 256, 512)
HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SVG = HERE / "hicolor" / "scalable" / "apps" / f"{APP_ID}.svg"


def main() -> int:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QGuiApplication, QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer

    app = QGuiApplication.instance() or QGuiApplication(sys.argv[:1])  # noqa: F841 - QPainter needs one
    renderer = QSvgRenderer(str(SVG))
    if not renderer.isValid():
        print(f"{SVG}: not a valid SVG", file=sys.stderr)
        return 1
    for size in SIZES:
        image = QImage(size, size, QImage.Format.Format_ARGB32_Premultiplied)
        image.fill(Qt.GlobalColor.transparent)
        painter = QPainter(image)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        renderer.render(painter)
        painter.end()
        out = HERE / "hicolor" / f"{size}x{size}" / "apps" / f"{APP_ID}.png"
        out.parent.mkdir(parents=True, exist_ok=True)
        if not image.save(str(out), "PNG"):
            print(f"{out}: could not be written", file=sys.stderr)
            return 1
        print(out.relative_to(ROOT))
    runtime = ROOT / "resources" / "icons" / f"{APP_ID}.svg"
    runtime.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(SVG, runtime)
    print(runtime.relative_to(ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
