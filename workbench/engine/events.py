"""Engine events (M8): a type, the thread, run, step and time, and a payload.

*Durable* events are stored with the thread and replayed to late subscribers; they carry no content
(ids, statuses, paths, counts). *Live* events go only to current subscribers (streamed text, whole todo
lists). The type names are a public interface (DESIGN §2, `--json` output): never rename them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

DURABLE_TYPES: frozenset[str] = frozenset(
    {
        "run_started",
        "run_finished",
        "model_call_finished",
        "tool_call_finished",
        "interrupt_raised",
        "interrupt_answered",
        "todos_updated",
        "documents_reported",
        "artifact_written",
        "budget_exceeded",
        "budget_hold",
        "compression_applied",
        "task_started",
        "task_settled",
        "run_error",
    }
)
LIVE_TYPES: frozenset[str] = frozenset(
    {"model_delta", "tool_call_started", "todos_progress", "usage_updated", "step_started", "budget_updated",
     "task_progress", "context_measured", "context_warning", "mcp_server_status",
     "command_output"}  # E6: a running command's output, batched every ~30 ms (harness/execute.py)
)


ENVELOPE: frozenset[str] = frozenset({"type", "thread", "run", "step", "time"})


@dataclass(frozen=True)
class Event:
    """One engine event. ``data`` holds the type's fields (see the builder functions' callers)."""

    type: str
    thread_id: str
    run_id: str
    step: int
    data: dict[str, Any] = field(default_factory=dict)
    time: float = field(default_factory=time.time)
    seq: int = 0  # position in the thread's durable log; 0 for live events

    @property
    def durable(self) -> bool:
        return self.type in DURABLE_TYPES

    def to_dict(self) -> dict[str, Any]:
        # The envelope comes last so no data field can hide it (data never uses these names).
        return {
            **self.data,
            "type": self.type,
            "thread": self.thread_id,
            "run": self.run_id,
            "step": self.step,
            "time": round(self.time, 3),
        }

    @classmethod
    def from_row(cls, type: str, thread_id: str, run_id: str, step: int, data: dict[str, Any], time: float, seq: int) -> Event:
        return cls(type=type, thread_id=thread_id, run_id=run_id, step=step, data=data, time=time, seq=seq)
