"""Keeping a run's claim on its thread alive (R7). The claims themselves live in the store (store.py)."""

from __future__ import annotations

import logging

from workbench.engine import store as store_module
from workbench.engine.store import Claim, Store

log = logging.getLogger(__name__)


class _Heartbeat:
    """R7: refreshes a run's claim from a thread of its own, so a long model or tool call (or a busy
    event loop) does not make a live run look dead."""

    def __init__(self, store: Store, claim: Claim) -> None:
        import threading

        self._stop = threading.Event()
        self._store, self._claim = store, claim
        self._thread = threading.Thread(target=self._beat, name=f"claim-{claim.thread_id}", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        while not self._stop.wait(store_module.HEARTBEAT_EVERY):
            try:
                if not self._store.heartbeat(self._claim):
                    return  # taken over: the run's next write is refused
            except Exception:  # a busy or closed store: the next beat tries again
                log.debug("claim heartbeat failed", exc_info=True)

    def stop(self) -> None:
        self._stop.set()
