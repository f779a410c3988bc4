"""Loading what a run's first step needs before the first message, off the GUI thread.

When a workspace opens, ``start_warm_up(session)`` loads the token encoding and jsonschema on a
daemon thread (once per process) and, unless the model is the demo, asks the model to import and
warm litellm on its own worker thread. ``wait_warm_up`` lets that thread finish before the
interpreter exits (loading modules at shutdown fails noisily).
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from workbench.session import Session

log = logging.getLogger(__name__)

_warm_thread: threading.Thread | None = None


def start_warm_up(session: Session | None) -> None:
    """Load what the first step needs off this thread, now rather than on the first message: the
    token encoding (~0.6 s; the engine counts prompt sections with it on this thread), jsonschema,
    and, unless the model is the demo, litellm on the model's worker thread."""
    global _warm_thread
    if _warm_thread is None:
        _warm_thread = threading.Thread(target=_warm_tokens, name="workbench-warm-up", daemon=True)
        _warm_thread.start()
    if session is None or session.model_name == "demo":
        return
    model = getattr(getattr(session.engine, "agent", None), "model", None)  # facade has no warm_up()
    warm = getattr(model, "warm_up", None)
    if callable(warm):
        try:
            warm()
        except Exception:  # noqa: BLE001 - warm-up is an optimisation
            log.debug("model warm-up failed to start", exc_info=True)


def wait_warm_up(timeout: float = 5.0) -> None:
    """Let the warm-up thread finish (before the interpreter exits: loading at shutdown fails noisily)."""
    if _warm_thread is not None:
        _warm_thread.join(timeout)


def _warm_tokens() -> None:
    """What the engine loads lazily on the GUI thread during the first step: the token encoding and
    the JSON-schema validator of tool arguments (~0.1 s of imports)."""
    try:
        from workbench.engine.tokens import estimate_tokens

        estimate_tokens("warm up")
        import jsonschema  # noqa: F401
    except Exception:  # noqa: BLE001 - an optimisation only
        log.debug("warm-up failed", exc_info=True)


__all__ = ["start_warm_up", "wait_warm_up"]
