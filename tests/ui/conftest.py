"""UI test set-up: a qasync loop per test over the one QApplication (pytest-asyncio loop factories),
offscreen Qt, windows that are closed (and their sessions with them) inside the test's loop, and an
error hook that fails the test when a background task died.

Patterns from shared/reference/qt-async-testing.md: no ``qtbot.waitSignal``/``waitUntil`` inside
coroutines (poll with ``await asyncio.sleep``), dialogs found among the top-level widgets and answered
by clicking their buttons, ``setQuitOnLastWindowClosed(False)``.
"""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("QT_API", "pyside6")

import asyncio  # noqa: E402
from collections.abc import AsyncIterator, Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402

from tests.stub_server import StubServer  # noqa: E402


def _qt_loop() -> asyncio.AbstractEventLoop:
    from workbench.ui.qt_async import application, loop_factory

    app = application()
    app.setQuitOnLastWindowClosed(False)  # else closing a parentless dialog quits the app and the loop
    return loop_factory()


def pytest_asyncio_loop_factories(config: pytest.Config, item: pytest.Item) -> dict[str, Callable[[], Any]]:
    """Tests under tests/ui run on a qasync loop (this conftest only applies to them)."""
    return {"qasync": _qt_loop}


@pytest.fixture(autouse=True)
def fresh_decision_hand() -> None:
    """No test starts under the hand of the previous test's last decision (decision_settle: a dialog that
    opens within the settle time of a decision ignores that gesture's second press)."""
    from workbench.ui import decision_settle

    decision_settle._last_decision = None


@pytest.fixture(autouse=True)
def task_errors() -> Any:
    """Failures routed to the window's error hook; a test fails if any is left unexpected.
    A test that expects some clears the list."""
    from workbench.ui import qt_async

    errors: list[tuple[BaseException, str]] = []
    remove = qt_async.add_error_hook(lambda exc, ctx: errors.append((exc, ctx)))
    yield errors
    remove()
    assert not errors, f"background task failures: {[(repr(e), c) for e, c in errors]}"


@pytest.fixture
def demo_workspace(tmp_path: Path) -> Path:
    """A fresh copy of the shipped demo workspace."""
    from workbench.app import ensure_demo_workspace

    return ensure_demo_workspace(tmp_path / "demo")


@pytest.fixture
def stub_workspace(tmp_path: Path, stub_server: StubServer, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A workspace on ``openai/test-model`` served by the stub, with a (fake) key in the environment."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "workbench.yaml").write_text(
        f"model: openai/test-model\napi_base: {stub_server.url}\n", encoding="utf-8"
    )
    (ws / "README.md").write_text("# Stub project\n", encoding="utf-8")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    return ws


@pytest.fixture
async def windows(qapp: Any) -> AsyncIterator[Callable[..., Any]]:
    """``await windows(workspace)`` opens a shown MainWindow on a workspace; all are closed (sessions
    included) at the end, inside the test's loop."""
    from workbench.config import load_user_settings
    from workbench.ui import qt_async
    from workbench.ui.main_window import MainWindow

    made: list[MainWindow] = []

    async def make(workspace: Path | None = None, **kwargs: Any) -> MainWindow:
        settings = load_user_settings()
        window = MainWindow(settings)
        if not settings.window.get("geometry"):
            window.resize(1100, 760)
        made.append(window)
        window.show()
        if workspace is not None:
            await window.open_workspace(workspace, **kwargs)
        return window

    yield make
    for w in made:
        await w.wait_closed()
        w.deleteLater()
    await qt_async.cancel_all()
    for widget in qapp.topLevelWidgets():  # dialogs a failed test left open
        if widget.isVisible():
            widget.close()


@pytest.fixture
def light_style(qapp: Any) -> Any:
    """The app's light style sheet, as the app applies it; what was there before afterwards."""
    from workbench.ui.style import apply_style

    sheet, palette = qapp.styleSheet(), qapp.palette()
    apply_style(qapp, "light")
    yield qapp
    qapp.setStyleSheet(sheet)
    qapp.setPalette(palette)
    for name in ("_workbench_theme", "_workbench_follows_system"):
        qapp.setProperty(name, None)
