"""The CLI's exit codes (a public interface, DESIGN §6) and its usage error.

Kept apart so every command module can use them without importing the parser.
"""

from __future__ import annotations

EXIT_DONE = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_ABORTED = 3
EXIT_INTERRUPTED = 4

STATUS_EXIT: dict[str, int] = {
    "done": EXIT_DONE,
    "failed": EXIT_FAILED,
    "aborted": EXIT_ABORTED,
    "interrupted": EXIT_INTERRUPTED,
}

#: Thread statuses that mean the last run was cut off (failed, or in flight when the process died).
CUT_OFF = ("failed", "running")


class UsageError(Exception):
    """A command-line mistake the user can fix: one line on stderr, exit 2."""
