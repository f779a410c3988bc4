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

#: What each exit code means, for the generated docs/cli.md.
EXIT_MEANINGS: dict[int, str] = {
    EXIT_DONE: "the run finished (`done`); for `threads`, `show`, `tasks`, `compact` and `mcp`: done (a "
               "`compact` with nothing to compact too)",
    EXIT_FAILED: "the run failed (the error is printed; the thread stays usable); `mcp check`: the server did "
                 "not start or list its tools",
    EXIT_USAGE: "usage or configuration error (a bad flag, a bad `workbench.yaml`: file, line and key named), "
                "or the thread is held by a run in another process (the holder is named)",
    EXIT_ABORTED: "aborted (a budget or the step limit was reached and not extended, or stopped); the partial "
                  "answer is kept",
    EXIT_INTERRUPTED: "interrupted: decisions are pending (continue with `workbench resume`) — the run's own, or "
                      "a background task's left waiting",
}

#: Thread statuses that mean the last run was cut off (failed, or in flight when the process died).
CUT_OFF = ("failed", "running")


class UsageError(Exception):
    """A command-line mistake the user can fix: one line on stderr, exit 2."""
