"""The plan: a ``write_todos`` tool that replaces the thread's todo list, and its sections (T1–T7).

State key ``todos``: ``{"items": [{"id", "content", "status"}], "next_id": int}``. Ids are small
integers handed out from ``next_id``, which only grows, so an id is never reused within a thread
(T2). The plan only guides the model: this middleware never filters tools or decides permissions
(T7); a blocked output puts the items back through ``restore_on_block`` but keeps ``next_id`` (T2).

Token bound (T3, T5): items are counted in code points, but a code point can cost several tokens (a rare
CJK ideograph costs about three), so ``max_todos`` × ``max_todo_chars`` alone does not bound the ``todos``
section. Two guards, for two different readers: ``write_todos`` refuses a plan whose section would take
more than ``max_section_tokens`` estimated tokens, saying which items are the longest, so the model learns
its plan was not kept and can shorten it (a plan only cut in the prompt would look kept to it); and the
section is cut to ``max_section_tokens`` whatever the stored list holds (a thread written before the
bound, or reopened under tighter limits), so no stored plan can push the prompt sections over the
engine's ``max_prompt_section_tokens`` and fail every later step of the thread.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from workbench.engine.middleware import AgentMiddleware, HookContext, Section, ToolContext
from workbench.engine.tokens import estimate_tokens
from workbench.engine.tools import Tool, ToolOutcome, schema

__all__ = [
    "ALIASES",
    "KEY",
    "STATUSES",
    "TodoError",
    "TodosMiddleware",
    "apply_todos",
    "empty_todos",
    "fit_lines_to_tokens",
    "normalize_todos",
    "render_plan",
]

KEY = "todos"
STATUSES = ("pending", "in_progress", "done")
ALIASES = {"completed": "done"}
MAX_PROBLEMS = 10
PLAN_HEADING = "# Current plan"
# Enough for a full plan of code-heavy English (30 items of 400 characters are about 3,500 tokens) while
# leaving most of the engine's max_prompt_section_tokens (24,000) to AGENTS.md and skills.
DEFAULT_MAX_SECTION_TOKENS = 4000
LONGEST_NAMED = 3  # items named in a refusal over max_section_tokens


class TodoError(ValueError):
    """A ``write_todos`` list refused (T3); ``problems`` says what was wrong, item by item."""

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = list(problems)


def empty_todos() -> dict[str, Any]:
    return {"items": [], "next_id": 1}


def normalize_todos(value: Any) -> dict[str, Any]:
    """A well-formed todos value from whatever is stored (bad items dropped, next_id above every id)."""
    if not isinstance(value, Mapping):
        return empty_todos()
    items: list[dict[str, Any]] = []
    for item in value.get("items") or ():
        if not isinstance(item, Mapping):
            continue
        id_, content, status = item.get("id"), item.get("content"), item.get("status")
        if isinstance(id_, int) and not isinstance(id_, bool) and isinstance(content, str):
            status = ALIASES.get(status, status)
            items.append({"id": id_, "content": content, "status": status if status in STATUSES else "pending"})
    next_id = value.get("next_id")
    next_id = next_id if isinstance(next_id, int) and not isinstance(next_id, bool) else 1
    next_id = max([next_id, 1, *(i["id"] + 1 for i in items)])
    return {"items": items, "next_id": next_id}


def _limits(max_todos: int, max_todo_chars: int, max_section_tokens: int) -> str:
    return (f"Limits: at most {max_todos} items, each with non-empty content of at most {max_todo_chars} characters; "
            f"the whole plan at most {max_section_tokens} tokens as shown in your prompt; "
            f"status one of {', '.join(STATUSES)}; an id only to keep an item the current list has, each at most once.")


def fit_lines_to_tokens(head: str, lines: Sequence[str], max_tokens: int, more: Callable[[int], str],
                        *, hidden: int = 0) -> tuple[str, int]:
    """``head`` and as many of ``lines`` as fit in ``max_tokens`` estimated tokens, one a line; then
    ``more(n)`` when ``n`` > 0 lines are not shown (those cut here plus ``hidden``, left out before).
    Returns the text and how many of ``lines`` it shows. A listing section's bound (T5, A2)."""
    whole = "\n".join([head, *lines, *([more(hidden)] if hidden else [])])
    if estimate_tokens(whole) <= max_tokens:
        return whole, len(lines)
    # Counted line by line (a newline is at most one token): tokenizing the growing text once per line
    # would be quadratic, and this runs before every model step.
    room = max_tokens - estimate_tokens(head) - estimate_tokens(more(hidden + len(lines))) - 1
    shown = 0
    for line in lines:
        room -= estimate_tokens(line) + 1
        if room < 0:
            break
        shown += 1
    while True:  # a token can span a line break, so check the text as it will be counted
        left_out = hidden + len(lines) - shown
        text = "\n".join([head, *lines[:shown], *([more(left_out)] if left_out else [])])
        if shown == 0 or estimate_tokens(text) <= max_tokens:
            return text, shown
        shown -= 1


def render_plan(items: Sequence[Mapping[str, Any]], max_todo_chars: int) -> list[str]:
    """The plan's lines as the ``todos`` section and ``write_todos``'s result show them."""
    return [f"[{i['id']}] {i['status']}: {_cut(i['content'], max_todo_chars)}" for i in items]


def _over_section_tokens(items: Sequence[Mapping[str, Any]], max_todo_chars: int, max_section_tokens: int) -> str | None:
    """Why a plan is refused for its size in tokens (T3), naming its longest items; None when it fits."""
    lines = render_plan(items, max_todo_chars)
    total = estimate_tokens("\n".join([PLAN_HEADING, *lines]))
    if total <= max_section_tokens:
        return None
    longest = sorted(((estimate_tokens(line), n) for n, line in enumerate(lines, 1)), reverse=True)[:LONGEST_NAMED]
    named = ", ".join(f"item {n}: {tokens} tokens" for tokens, n in sorted(longest, key=lambda x: x[1]))
    return (f"the plan would take {total} tokens in your prompt, over max_section_tokens ({max_section_tokens}); "
            f"shorten the longest items ({named}) or drop items")


def apply_todos(current: Any, items: Any, *, max_todos: int = 30, max_todo_chars: int = 400,
                max_section_tokens: int = DEFAULT_MAX_SECTION_TOKENS) -> dict[str, Any]:
    """The new todos value after writing ``items`` over ``current`` (T1–T3); TodoError if refused."""
    cur = normalize_todos(current)
    problems: list[str] = []
    if not isinstance(items, list):
        raise TodoError(["'todos' must be a list of items"])
    if len(items) > max_todos:
        problems.append(f"{len(items)} items, over max_todos ({max_todos})")
    current_ids = {i["id"] for i in cur["items"]}
    parsed: list[tuple[str, str, int | None]] = []
    given: dict[int, int] = {}
    for n, item in enumerate(items, 1):
        if not isinstance(item, Mapping):
            problems.append(f"item {n}: not an object with content and status")
            continue
        content, status, id_ = item.get("content"), item.get("status"), item.get("id")
        if not isinstance(content, str):
            problems.append(f"item {n}: content must be a string")
            content = ""
        else:
            content = content.strip()
            if not content:
                problems.append(f"item {n}: content is empty")
            elif len(content) > max_todo_chars:
                problems.append(f"item {n}: content has {len(content)} characters, over max_todo_chars ({max_todo_chars})")
        status = ALIASES.get(status, status) if isinstance(status, str) else status
        if status not in STATUSES:
            problems.append(f"item {n}: status {status!r} is not one of {', '.join(STATUSES)}")
        if id_ is not None:
            if not isinstance(id_, int) or isinstance(id_, bool):
                problems.append(f"item {n}: id {id_!r} is not an integer")
                id_ = None
            elif id_ in given:
                problems.append(f"item {n}: id {id_} given twice (also item {given[id_]})")
            elif id_ not in current_ids:
                have = ", ".join(str(i) for i in sorted(current_ids)) or "none"
                problems.append(f"item {n}: id {id_} is not in the current list (current ids: {have}); "
                                "leave the id out for a new item")
            if id_ is not None:
                given.setdefault(id_, n)
        parsed.append((content, status if isinstance(status, str) else "", id_))
    if problems:
        extra = len(problems) - MAX_PROBLEMS
        shown = problems[:MAX_PROBLEMS] + ([f"and {extra} more problem(s)"] if extra > 0 else [])
        raise TodoError(shown)
    claimed = set(given)
    next_id = cur["next_id"]
    out: list[dict[str, Any]] = []
    for content, status, id_ in parsed:
        if id_ is None:
            match = next((i["id"] for i in cur["items"] if i["id"] not in claimed and i["content"] == content), None)
            if match is None:
                match, next_id = next_id, next_id + 1
            claimed.add(match)
            id_ = match
        out.append({"id": id_, "content": content, "status": status})
    too_long = _over_section_tokens(out, max_todo_chars, max_section_tokens)
    if too_long:
        raise TodoError([too_long])
    return {"items": out, "next_id": next_id}


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + "…"


def _summary(items: Sequence[Mapping[str, Any]]) -> str:
    counts = {s: sum(1 for i in items if i["status"] == s) for s in STATUSES}
    return f"{len(items)} todos ({counts['done']} done, {counts['in_progress']} in progress, {counts['pending']} pending)"


class TodosMiddleware(AgentMiddleware):
    """The ``write_todos`` tool and the ``todos-guide`` / ``todos`` sections (T1–T7)."""

    writes = frozenset({KEY})
    restore_on_block = frozenset({KEY})
    state_defaults = {KEY: empty_todos()}

    def __init__(self, max_todos: int = 30, max_todo_chars: int = 400,
                 max_section_tokens: int = DEFAULT_MAX_SECTION_TOKENS) -> None:
        if max_todos < 1 or max_todo_chars < 1 or max_section_tokens < 1:
            raise ValueError("max_todos, max_todo_chars and max_section_tokens must be at least 1")
        self.max_todos = max_todos
        self.max_todo_chars = max_todo_chars
        self.max_section_tokens = max_section_tokens
        self._tool = Tool(
            name="write_todos",
            description=(
                "Replace your plan (the whole todo list) for this thread. Send every item you want to keep, "
                "with its id, plus new items without an id; items you leave out are dropped. "
                f"At most {max_todos} items, each at most {max_todo_chars} characters, the whole plan at most "
                f"{max_section_tokens} tokens. Statuses: pending, in_progress, done."
            ),
            parameters=schema({
                "todos": {
                    "type": "array",
                    "description": "The whole new list, in order.",
                    "items": {
                        "type": "object",
                        "properties": {
                            "content": {"type": "string", "description": "What to do, one short sentence."},
                            "status": {"type": "string", "enum": [*STATUSES, *ALIASES]},
                            "id": {"type": "integer", "description": "The item's id, to keep an existing item."},
                        },
                        "required": ["content", "status"],
                        "additionalProperties": False,
                    },
                },
            }, required=["todos"]),
            func=self._write_todos,
            lock="todos",
            changes_outside=False,
            owner=self,
        )

    def on_restore(self, key: str, before: Any, current: Any) -> Any:
        """A blocked output puts the items back (T7) but never ``next_id`` (T2): the turn's ids were
        announced in stored ``todos_updated`` events."""
        restored, now = normalize_todos(before), normalize_todos(current)
        return {**restored, "next_id": max(restored["next_id"], now["next_id"])}

    def tools(self) -> Sequence[Tool]:
        return (self._tool,)

    def _plan_text(self, items: Sequence[Mapping[str, Any]]) -> str:
        """The ``todos`` section: at most ``max_todos`` items, each cut at ``max_todo_chars``, the whole at
        most ``max_section_tokens`` (T5), whatever the stored list holds."""
        lines = render_plan(items[: self.max_todos], self.max_todo_chars)
        text, _shown = fit_lines_to_tokens(PLAN_HEADING, lines, self.max_section_tokens,
                                           lambda n: f"(… {n} more not shown)",
                                           hidden=max(len(items) - self.max_todos, 0))
        return text

    async def _write_todos(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        before = normalize_todos(ctx.get(KEY))
        try:
            after = apply_todos(before, args.get("todos"), max_todos=self.max_todos, max_todo_chars=self.max_todo_chars,
                                max_section_tokens=self.max_section_tokens)
        except TodoError as e:
            return ToolOutcome.error(
                "Error: write_todos refused; the plan was not changed. "
                + "; ".join(e.problems) + ". " + _limits(self.max_todos, self.max_todo_chars, self.max_section_tokens)
            )
        ctx.write(KEY, after)
        if after["items"] != before["items"]:
            ctx.emit("todos_updated", items=[{"id": i["id"], "status": i["status"]} for i in after["items"]])
            ctx.emit("todos_progress", items=[dict(i) for i in after["items"]])
        if not after["items"]:
            return ToolOutcome.ok("Plan cleared: no todos.")
        return ToolOutcome.ok("Plan updated: " + _summary(after["items"]) + ".\n"
                              + self._plan_text(after["items"]).removeprefix(PLAN_HEADING + "\n"))

    async def sections(self, ctx: HookContext) -> Sequence[Section]:
        guide = Section(
            "todos-guide",
            "# Planning with write_todos\n"
            "For a task with several steps, write a plan with write_todos and keep it current: mark an item "
            "in_progress when you start it and done as soon as it is finished; add, reword or drop items as you "
            "learn more. Each call replaces the whole list: resend the items you keep, with their ids. Skip the "
            "plan for a simple one-step request. "
            f"At most {self.max_todos} items of at most {self.max_todo_chars} characters each, the whole plan at most "
            f"{self.max_section_tokens} tokens.",
            cacheable=True,
        )
        items = normalize_todos(ctx.get(KEY))["items"]
        if not items:
            return (guide,)
        return (guide, Section("todos", self._plan_text(items), cacheable=False))
