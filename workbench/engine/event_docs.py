"""What each event type means and which fields it carries (the ``--json`` lines; docs/cli.md is generated
from this, issue 16). A test fails when an event type has no entry here, and when an event seen in a
real session carries a field not listed (unless the entry says ``open``: a tool's own details)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class EventDoc:
    meaning: str
    fields: dict[str, str] = field(default_factory=dict)
    open: bool = False  # may carry further fields (a tool's own details)


_USAGE = "token and cost figures: `input_tokens`, `output_tokens`, `thoughts_tokens`, `total_tokens`, `cost_usd`, `calls`"
_BUDGET = {"budget": "index of the budget in `budget:`", "scope": "`run` or `session`", "field": "the field at its limit",
           "spent": "spent so far", "limit": "the cap", "priced": "false when the model has no known price",
           "fields": "every field's spent and limit", "configured": "the budget's `limit:` as written",
           "budgets": "every budget over its limit"}

EVENTS: dict[str, EventDoc] = {
    "run_started": EventDoc("a run began", {"input_chars": "length of the person's message"}),
    "run_finished": EventDoc("a run ended", {"status": "`done`, `failed`, `aborted` or `interrupted`",
                                             "usage": f"the run's usage ({_USAGE})", "error": "why it failed "
                                             "(failed/aborted only)", "pending": "questions waiting (interrupted)"}),
    "run_error": EventDoc("a run failed", {"error": "the message (at most 500 characters)"}),
    "step_started": EventDoc("a model step began"),
    "model_delta": EventDoc("streamed answer text", {"text": "the new text"}),
    "model_call_finished": EventDoc("one model call ended", {"model": "the model string", "usage": _USAGE,
                                                             "estimated": "true when the call was cut mid-stream "
                                                             "and its usage estimated"}),
    "usage_updated": EventDoc("the running totals after a model call",
                              {"run_usage": "this run's usage", "thread_usage": "the thread's usage",
                               "model": "the model string", "call": "this call's usage"}),
    "tool_call_started": EventDoc("a tool call began", {"call_id": "the call's id", "name": "the tool",
                                                        "arguments": "its arguments"}),
    "tool_call_finished": EventDoc("a tool call ended; besides the fields below, the tool's own figures (for "
                                   "`execute`: `exit_code` — negative: killed by that signal —, "
                                   "`duration_seconds`, `timed_out`, `output_chars`, `sandboxed`)",
                                   {"call_id": "the call's id", "name": "the tool",
                                    "status": "`ok`, `error`, `denied`, `rejected` or `stopped`",
                                    "edited": "true when the person edited the arguments before approving"},
                                   open=True),
    "command_output": EventDoc("a running command's output, batched", {"call_id": "the `execute` call",
                                                                       "text": "the new output",
                                                                       "skipped": "characters left out of the "
                                                                                  "live view (a very fast command)"}),
    "interrupt_raised": EventDoc("the run waits for the person", {"id": "the question's id",
                                                                  "kind": "`approval`, `budget_hold`, …",
                                                                  "call_id": "the tool call it is about",
                                                                  "tool": "the tool", "reason": "why it asks"}),
    "interrupt_answered": EventDoc("a question was answered", {"id": "the question's id", "kind": "its kind",
                                                               "decision": "`approve`, `reject`, `edit`, …"}),
    "todos_updated": EventDoc("the plan changed (ids and statuses only)", {"items": "`[{id, status}]`"}),
    "todos_progress": EventDoc("the plan with its text, for the Plan panel", {"items": "the whole list"}),
    "documents_reported": EventDoc("which instruction files or skills were read, cut or skipped",
                                   {"source": "`instructions` or `skills`", "documents": "one entry per file"}),
    "artifact_written": EventDoc("an artifact was written", {"name": "its name", "size": "bytes",
                                                             "mime": "its type", "source": "which tool wrote it"}),
    "budget_updated": EventDoc("the budget meters", {"budgets": "per budget: spent and limit of each field",
                                                     "waiting": "while the run waits for background tasks "
                                                     "before a model call, as what they hold could pass a hard "
                                                     "limit: `tasks`, the limit (`budget`, `scope`, `field`, "
                                                     "`spent`, `held`, `limit`) and `reason` in words; `null` "
                                                     "when the wait is over"}),
    "budget_exceeded": EventDoc("a budget stopped the run", {**_BUDGET, "refused": "true when the person "
                                                             "refused to continue at a hold"}),
    "budget_hold": EventDoc("the run holds at a budget and asks the person",
                            {**_BUDGET, "reason": "what was reached, in words", "question": "the question's id"}),
    "compression_applied": EventDoc("the model's view of the thread was compressed (figures only)",
                                    {"compression": "the record's id", "trigger": "`auto` or `manual`",
                                     "tokens_before": "before", "tokens_after": "after",
                                     "strategies": "per strategy: what it did and saved",
                                     "note": "why a strategy fell back"}),
    "context_measured": EventDoc("the next request's size by source", {
        "tokens": "its size", "trigger": "the compression trigger", "window": "the model's context window",
        "messages": "messages it holds", "parts": "tokens of system prompt, messages, tool results, tool schemas"}),
    "context_warning": EventDoc("the request came within 90% of the trigger, or went past it before the "
                                "thread's first compression (once a thread)",
                                {"tokens": "its size", "trigger": "the trigger", "text": "the notice"}),
    "task_started": EventDoc("a sub-agent task was launched", {"task_id": "its id", "agent": "the sub-agent",
                                                               "background": "true for a background task",
                                                               "child_thread": "the task's own thread"}),
    "task_settled": EventDoc("a sub-agent task ended", {"task_id": "its id", "agent": "the sub-agent",
                                                        "status": "`completed`, `failed`, `aborted` or `expired`",
                                                        "usage": "its usage"}),
    "task_progress": EventDoc("a task's live state, for the Tasks board", {
        "task_id": "its id", "agent": "the sub-agent", "status": "its status", "description": "its task, short",
        "last_tool": "the tool it ran last", "tokens": "tokens so far", "cost_usd": "cost so far",
        "elapsed": "seconds since it started", "child_thread": "its thread"}),
    "mcp_server_status": EventDoc("an MCP server's state changed", {
        "server": "its name", "status": "`starting`, `ready`, `failed` or `stopped`",
        "tools": "tools offered", "error": "the last error, if any"}),
}
