"""``DemoModel``: an offline, scripted, deterministic model, so a newcomer sees a whole session with no key.

It plays one short session per user turn, chosen by how far the current turn has got (the number of
assistant messages since the last user message): write a plan, read the README, load a skill, ask to
write notes (an approval appears), keep a summary artifact, propose an AGENTS.md edit, tick the plan
off and answer. Steps whose tool is not offered are skipped, so it works with any stack. Labelled
"demo" everywhere; its usage counts estimated tokens and no cost.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Callable
from typing import Any

from workbench.engine.messages import Message, ModelDelta, ModelRequest, ModelResponse, ToolCall
from workbench.engine.usage import Usage

PLAN = [
    "Read the project README",
    "Load the summarize skill",
    "Write notes for the team",
    "Suggest an improvement to AGENTS.md",
]

NOTES = """# Notes

- The workbench runs agents you can watch: plan, skills, instructions, budget and artifacts.
- Risky tool calls wait for your approval.
- This file was written by the offline demo model after you approved it.
"""

SUMMARY = """# Demo summary

The demo read `README.md`, loaded the `summarize` skill and wrote `notes.md`.
Try your own model in Settings, or keep exploring the panels.
"""

ANSWER = (
    "Here is what I did:\n\n"
    "1. **Planned** the work (see the Plan panel).\n"
    "2. **Read** `/project/README.md` and loaded the `summarize` skill.\n"
    "3. **Asked** to write `/project/notes.md` — you decided in the approval dialog.\n"
    "4. Kept a short **artifact**, `summary.md`.\n"
    "5. **Proposed** a line for `AGENTS.md`.\n\n"
    "This was the offline *demo* model. Set a real model and key in Settings to run your own agent."
)


def _todos(done: int) -> dict[str, Any]:
    items = []
    for i, text in enumerate(PLAN):
        status = "done" if i < done else ("in_progress" if i == done else "pending")
        # No ids: an item keeps the id of the todo with the same content (T2), in any thread.
        items.append({"content": text, "status": status})
    return {"todos": items}


Step = tuple[str, Callable[[list[Message]], dict[str, Any]]]

SCRIPT: list[Step] = [
    ("write_todos", lambda _m: _todos(0)),
    ("read_file", lambda _m: {"path": "/project/README.md"}),
    ("read_file", lambda _m: {"path": "/project/skills/summarize/SKILL.md"}),
    ("write_todos", lambda _m: _todos(2)),
    ("write_file", lambda _m: {"path": "/project/notes.md", "content": NOTES}),
    ("write_artifact", lambda _m: {"name": "summary.md", "content": SUMMARY, "mime": "text/markdown"}),
    ("edit_file", lambda _m: {
        "path": "/project/AGENTS.md",
        "old_string": "## Conventions",
        "new_string": "## Conventions\n\n- Keep notes.md short and current.",
    }),
    ("write_todos", lambda _m: _todos(len(PLAN))),
]


class DemoModel:
    """The offline demo model (``model: demo``)."""

    name = "demo"

    def __init__(self, *, chunk_delay: float = 0.02, chunk_chars: int = 12) -> None:
        self.chunk_delay = chunk_delay
        self.chunk_chars = chunk_chars
        self._ids = itertools.count(1)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelDelta | ModelResponse]:
        messages = list(request.messages)
        offered = {t.name for t in request.tools}
        position = _turn_position(messages)
        steps = [s for s in SCRIPT if s[0] in offered]
        usage_in = (len(request.system) + sum(len(m.content) for m in messages)) // 4 + 1
        await asyncio.sleep(0)
        if position < len(steps):
            name, make_args = steps[position]
            call = ToolCall.parse(f"demo_{next(self._ids)}", name, make_args(messages))
            text = ""
            yield ModelResponse(
                message=Message.assistant(text, (call,)),
                usage=Usage(input_tokens=usage_in, output_tokens=len(call.raw_arguments) // 4 + 1, calls=1,
                            unpriced_calls=1),
                model=self.name,
                finish_reason="tool_calls",
            )
            return
        for i in range(0, len(ANSWER), self.chunk_chars):
            if self.chunk_delay:
                await asyncio.sleep(self.chunk_delay)
            yield ModelDelta(text=ANSWER[i : i + self.chunk_chars])
        yield ModelResponse(
            message=Message.assistant(ANSWER),
            usage=Usage(input_tokens=usage_in, output_tokens=len(ANSWER) // 4 + 1, calls=1, unpriced_calls=1),
            model=self.name,
            finish_reason="stop",
        )


def _turn_position(messages: list[Message]) -> int:
    """How many assistant messages the current turn (since the last user message) already has."""
    count = 0
    for m in reversed(messages):
        if m.role == "user":
            break
        if m.role == "assistant":
            count += 1
    return count
