"""The exception hierarchy: each class says whose fault an error is.

Every user-facing message names the file, key, tool or provider involved and says what to do.
"""

from __future__ import annotations


class WorkbenchError(Exception):
    """Root of every error the workbench raises on purpose."""


class ConfigError(WorkbenchError):
    """A bad workbench.yaml, user setting or command-line value (the user's to fix). Exit code 2."""


class ModelError(WorkbenchError):
    """The model provider failed: bad key, unknown model, refused connection, rate limit, 5xx."""

    def __init__(self, message: str, *, retryable: bool = False, status: int | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.status = status


class ToolError(WorkbenchError):
    """A tool failed in a way the model should be told about (not a crash of the run)."""


class BuildError(WorkbenchError):
    """The agent could not be built: placement broken (M7), tool name clash (M10), bad stack."""


class RunError(WorkbenchError):
    """The run failed: a middleware wrote a key it does not own (M3), sections over budget (M2), Fatal."""


class StoreError(WorkbenchError):
    """The thread store is unreadable or a thread/run is missing."""
