"""PyInstaller runtime hook (packaging/workbench.spec): Qt's plugin paths for the bundle, set without
importing PySide6.

It stands in for PyInstaller's own ``pyi_rth_pyside6``, which the spec drops: that hook imports
PySide6.QtCore at every start (to embed a qt.conf the PySide6 wheel already provides), so even
``workbench run`` — headless, which never loads Qt from a venv — started with shiboken's import hook
active. That hook inspects the source of modules as they import, and inspecting pydantic's modules
mid-import made litellm's import fail about one run in two ("cannot import name 'import_string' from
partially initialized module 'pydantic._internal._validators'"). Now Qt loads only when the window opens.
"""

import os
import sys

_qt = os.path.join(sys._MEIPASS, "PySide6", "Qt")  # type: ignore[attr-defined] - set in a bundle
os.environ["QT_PLUGIN_PATH"] = os.path.join(_qt, "plugins")
os.environ["QML2_IMPORT_PATH"] = os.path.join(_qt, "qml")
