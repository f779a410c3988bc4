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


class ThreadBusyError(RunError):
    """R7: another run (this process or another) holds the thread. Refused before anything runs: exit 2."""


class StoreError(WorkbenchError):
    """The thread store is unreadable or a thread/run is missing."""


class StoreLostError(StoreError):
    """R1: the thread store's file was deleted or replaced while the store had it open (``rm -rf
    .workbench`` by a command the agent ran, or by a person). Nothing is written into a file no one can
    open again: the write that noticed fails (a run ends failed; the CLI exits 1) and the database the
    store still had open is saved. ``saved`` is where (the store's own path when it was put back there,
    ``restored``), None when it could not be saved anywhere."""

    def __init__(self, message: str, *, path: str = "", saved: str | None = None, restored: bool = False) -> None:
        super().__init__(message)
        self.path = path
        self.saved = saved
        self.restored = restored

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (str(self),), dict(self.__dict__))

    def again(self) -> StoreLostError:
        """The same error, a fresh instance (raised again for each later write it refuses)."""
        return StoreLostError(str(self), path=self.path, saved=self.saved, restored=self.restored)


# -- file backends (F2): a refusal is not an I/O failure; callers treat them differently ----------


class PathError(WorkbenchError):
    """Common base of the backend errors: each names the virtual path it is about.

    Catch the subclasses, not this: a refusal and an I/O failure must be handled differently.
    """

    def __init__(self, path: str, detail: str = "") -> None:
        super().__init__(path, detail)
        self.path = path
        self.detail = detail

    def with_path(self, path: str) -> PathError:
        """The same error about another path (a composite re-prefixes its mounts' errors)."""
        return type(self)(path, self.detail)


class BackendRefusal(PathError):
    """The backend refuses the operation: read-only, path leaves the root, no mount for the path."""

    @property
    def reason(self) -> str:
        return self.detail

    def __str__(self) -> str:
        return f"Refused: {self.path}: {self.detail}"


class LinksTooDeep(BackendRefusal):
    """The path leads through more symlinks (or longer link targets) than a caller that must not stall
    follows: the window's Save verdict refuses rather than freeze the window (or let the save through)."""


class BackendIOError(PathError):
    """A real failure underneath: OS error, undecodable text, database error."""

    def __str__(self) -> str:
        return f"I/O error on {self.path}: {self.detail}"


class AccessDenied(BackendIOError):
    """The OS refuses to open or list the path (EACCES, EPERM: mode 000, another user's file or folder).

    Still a ``BackendIOError`` (every tool reports it as before, F2: the workbench's rules did not
    refuse it), but it is the file's own condition, not a failure underneath that a retry could
    mend: the instruction and skill readers report the file and go on (I5, S6), as for ``NotTextFile``.
    """


class NotTextFile(BackendIOError):
    """The path holds something that is not a UTF-8 text file: a directory, a FIFO or device, a
    symlink loop, or bytes that are not UTF-8. Not a failure of the backend: instruction and skill
    readers skip and report it (I5, S6) where a real I/O error fails the step."""


class FileNotFound(PathError):
    """The file does not exist (callers may skip it rather than fail)."""

    def __init__(self, path: str, detail: str = "") -> None:
        super().__init__(path, detail)

    def __str__(self) -> str:
        return f"File not found: {self.path}"


class EditMismatch(PathError):
    """``edit`` could not apply: the old text is missing, or ambiguous without ``replace_all``."""

    @property
    def message(self) -> str:
        return self.detail

    def __str__(self) -> str:
        return f"Cannot edit {self.path}: {self.detail}"
