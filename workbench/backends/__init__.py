"""File backends over virtual paths (DESIGN §3, F1/F2): state, host, store, composite, read-only."""

from __future__ import annotations

from workbench.backends.base import (
    BackendIOError,
    BackendRefusal,
    EditMismatch,
    FileBackend,
    FileInfo,
    FileNotFound,
    GrepMatch,
    PathError,
    normalize,
)
from workbench.backends.composite import CompositeBackend
from workbench.backends.host import HostBackend
from workbench.backends.readonly import ReadOnlyBackend
from workbench.backends.state import StateBackend
from workbench.backends.store import StoreBackend

__all__ = [
    "BackendIOError",
    "BackendRefusal",
    "CompositeBackend",
    "EditMismatch",
    "FileBackend",
    "FileInfo",
    "FileNotFound",
    "GrepMatch",
    "HostBackend",
    "PathError",
    "ReadOnlyBackend",
    "StateBackend",
    "StoreBackend",
    "normalize",
]
