"""The bundle's entry point: the ``workbench`` console script (``workbench.cli:main``).

PyInstaller needs a script to start from; this is the same entry ``[project.scripts]`` names, so
``dist/workbench/workbench`` takes every command and flag the installed ``workbench`` does, and with no
arguments opens the window.
"""

import sys

from workbench.cli import main

if __name__ == "__main__":
    sys.exit(main())
