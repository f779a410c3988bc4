"""What each workbench.yaml key and user setting means, for the generated docs/configuration.md (issue 16).

The key names, types and defaults come from the schema's dataclasses (``workbench.docs`` walks them);
this module gives the words. A test fails when the schema has a key this module does not describe, or
describes one the schema does not have — so a new key cannot ship undocumented.

``KeyDoc.leaf``: the key is documented as one entry and its dataclass's fields are not listed apart
(its YAML form differs from the fields: a permission rule is ``{allow: read, path: GLOB}``).
``KeyDoc.trust``: setting it (to a value that widens what the agent may do) needs workspace trust (W1).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class KeyDoc:
    meaning: str
    default: str | None = None  # shown instead of the computed default (e.g. "the provider's own")
    trust: bool = False
    leaf: bool = False


#: The sections of the file, in the file's order: (heading, first-level keys, introduction).
GROUPS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("Model", ("model", "api_base", "instructions", "max_prompt_section_tokens"),
     "Which model the agent runs on and what it is told first."),
    ("Mounts", ("mounts",),
     "The virtual folders the agent's file tools see (F1). A key is a mount point such as `/project`."),
    ("Memory (AGENTS.md)", ("memory",),
     "Instruction files read into every run's prompt (I1–I4); the Instructions panel shows and edits them."),
    ("Skills", ("skills",),
     "Folders of `<name>/SKILL.md` skills (S1–S4); the Skills panel lists what was found and why any was "
     "skipped."),
    ("Plan (todos)", ("todos",), "Bounds on the agent's plan, written with `write_todos` (T1–T5)."),
    ("Permissions", ("permissions",),
     "Which tool calls run without asking, which ask you and which are refused (P1–P5). Worked examples: "
     "[security.md](security.md#permission-rules)."),
    ("Budget", ("budget",),
     "Limits on tokens, cost and steps, per run or per session (B1–B5); the Budget panel shows the meters."),
    ("Artifacts", ("artifacts",), "Files the agent hands you (A1–A3), in the Artifacts panel."),
    ("Sub-agents", ("subagents",),
     "Sub-agents the agent can delegate to, and background tasks (D1–D11): "
     "[subagents.md](subagents.md)."),
    ("Context compression", ("compression",),
     "When and how a long thread's history is compressed for the model (C1–C7). Nothing is deleted from "
     "the stored thread: see [Context compression](#context-compression) below."),
    ("Commands (execute)", ("execute",),
     "The shell tool `execute` (E1–E6): what a command's result keeps, its limits, its environment and "
     "its sandbox. Which commands run without asking is a permission rule (`allow: execute`, "
     "`command: \"pytest *\"`): see [security.md](security.md#commands)."),
    ("MCP tool servers", ("mcp_servers",),
     "Model Context Protocol servers whose tools the agent can call (X1–X5), named `mcp__<server>__<tool>`; "
     "the Servers panel shows each server's state and why one won't start. How they start, how their tools "
     "are named, asked about and answered: [MCP tool servers](#mcp-tool-servers) below."),
)

KEYS: dict[str, KeyDoc] = {
    # -- model -------------------------------------------------------------------------------------------
    "model": KeyDoc("the model: any [litellm model string](https://docs.litellm.ai/docs/providers) "
                    "(`openai/gpt-4.1-mini`, `anthropic/claude-sonnet-4-5`, `ollama/llama3` …), or `demo`, "
                    "the offline scripted model. A model string that names its own endpoint **needs trust**",
                    trust=True),
    "api_base": KeyDoc("send model calls to this OpenAI-compatible endpoint (a local server, a proxy). "
                       "**Needs trust**: your prompts and your API key go there", default="the provider's own",
                       trust=True),
    "instructions": KeyDoc("the agent's instructions, first in the system prompt"),
    "max_prompt_section_tokens": KeyDoc("the bound on all prompt sections together (plan, skills, AGENTS.md, "
                                        "sub-agents …); going over fails the run naming the biggest sections"),
    # -- mounts --------------------------------------------------------------------------------------------
    "mounts": KeyDoc("virtual path → backend. The defaults: `/project: {host: .}` (the workspace folder), "
                     "`/user: {host: ~/.config/workbench}`, `/scratch: {state: true}` (files kept in the "
                     "thread's state), `/memories: {store: true}` (files shared by every thread of the "
                     "workspace). Naming any mount replaces the whole default set",
                     default="`/project`, `/user`, `/scratch`, `/memories`"),
    "mounts.<point>.kind": KeyDoc("written as the mount's one key: `host: DIR` (a folder on disk), "
                                  "`state: true` or `store: true`"),
    "mounts.<point>.host": KeyDoc("the folder: relative to the workspace, `~` expanded. Any host mount but "
                                  "the defaults **needs trust**: outside the workspace it reaches another "
                                  "folder, inside it is a second name for the workspace's files that rules "
                                  "written for `/project/…` do not cover", trust=True),
    "mounts.<point>.readonly": KeyDoc("the agent may read but never write here"),
    # -- memory ----------------------------------------------------------------------------------------------
    "memory.paths": KeyDoc("the AGENTS.md files read into the prompt, in order (later ones refine earlier "
                           "ones); a missing file is skipped"),
    "memory.max_file_tokens": KeyDoc("the bound per file; a file over is shown cut and marked. At most "
                                     "`4 × max_file_tokens` bytes of a file are ever read. A file that is not "
                                     "UTF-8 text, a folder, a FIFO or a symlink loop is skipped and named with "
                                     "the reason in the Instructions panel and `workbench show`; it never "
                                     "fails a run"),
    "memory.max_total_tokens": KeyDoc("the bound on the whole instructions section"),
    "memory.max_cached_runs": KeyDoc("how many runs' reads of the files are cached"),
    # -- skills ------------------------------------------------------------------------------------------------
    "skills.sources": KeyDoc("folders whose `<name>/SKILL.md` are skills; a later source's skill replaces an "
                             "earlier one of the same name"),
    "skills.max_skills": KeyDoc("the most skills listed in the prompt"),
    "skills.max_description_chars": KeyDoc("a skill's description is cut to this"),
    "skills.max_section_tokens": KeyDoc("the bound on the skills section of the prompt"),
    "skills.max_scanned": KeyDoc("the most folders looked at per source. Of each SKILL.md only the "
                                 "frontmatter is read, from its first 4,096 characters; one that does not "
                                 "close (`---`) within them is skipped as malformed"),
    # -- todos -----------------------------------------------------------------------------------------------
    "todos.max_todos": KeyDoc("the most items in the plan"),
    "todos.max_todo_chars": KeyDoc("an item's text is cut to this"),
    # -- permissions ---------------------------------------------------------------------------------------------
    "permissions.default": KeyDoc("`allow`, `ask` or `deny` for calls no rule matches. `allow` **needs trust**",
                                  trust=True),
    "permissions.rules": KeyDoc("a list of `{EFFECT: ACTION, PATTERN-KEY: GLOB}`: EFFECT is `allow`, `ask` or "
                                "`deny`; ACTION is `read` or `write` (with `path: GLOB`), `invoke` (with "
                                "`tool: GLOB`, e.g. `mcp__git__*`) or `execute` (with `command: GLOB`, judged "
                                "part by part for compound commands). `deny` wins over `ask`, `ask` over "
                                "`allow`. An `allow` on `write`, `invoke` or `execute` **needs trust** (except "
                                "writes only under a `state` mount with no host mount inside it, e.g. `/scratch/**`)",
                                default="`allow: read, path: \"/**\"`", trust=True, leaf=True),
    # -- budget ----------------------------------------------------------------------------------------------------
    "budget": KeyDoc("a list of budgets. Every run also has the step limit `{scope: run, limit: {steps: "
                     "200}, interrupt: true}` (at 200 steps it asks you to allow 200 more or stop) unless one of "
                     "your budgets limits `steps` itself", default="the step limit"),
    "budget[].scope": KeyDoc("`run` (each run counts from zero) or `session` (the whole thread)"),
    "budget[].limit": KeyDoc("field → cap: `input_tokens`, `output_tokens`, `thoughts_tokens`, "
                             "`total_tokens`, `cost_usd`, `steps` (model calls in the run), or a custom "
                             "counter a tool reports"),
    "budget[].interrupt": KeyDoc("run scope only: at the limit, hold the run and ask you (Allow more / Stop; "
                                 "`--budget-approve` at the command line) instead of stopping it"),
    # -- artifacts ---------------------------------------------------------------------------------------------------
    "artifacts.readonly": KeyDoc("drop the `write_artifact` tool"),
    # -- subagents -----------------------------------------------------------------------------------------------------
    "subagents.agents": KeyDoc("the sub-agents. The agent gets one tool per sub-agent, "
                               "`delegate_to_<name>{task, background}`, and the list in its prompt. A sub-agent "
                               "runs the same `workbench.yaml` stack (permissions, mounts, skills, memory) on its "
                               "own thread of the workspace's store. Its approvals and budget holds are asked of "
                               "you: through the run for a foreground task, in the Decisions inbox for a "
                               "background one"),
    "subagents.agents[].name": KeyDoc("letters, digits, `_`, `-`; required"),
    "subagents.agents[].description": KeyDoc("what it is for, shown to the agent; required"),
    "subagents.agents[].model": KeyDoc("its model (on the workspace's `api_base`); one that names its own "
                                       "endpoint **needs trust**", default="the agent's model", trust=True),
    "subagents.agents[].instructions": KeyDoc("its instructions", default="a short prompt naming it"),
    "subagents.agents[].budget": KeyDoc("its own run budget, as a budget's `limit:`; at the limit its task "
                                        "stops `aborted`. Without it, what is left of the run's budgets. A launch "
                                        "whose budget exceeds what is left asks you first. Its usage counts toward "
                                        "the run's budgets either way", default="what is left"),
    "subagents.prefix": KeyDoc("the delegation tools' prefix: `<prefix>_<name>` (empty: the bare name)"),
    "subagents.max_delegations": KeyDoc("launches per run (0 = no limit); more are refused to the model"),
    "subagents.history_length": KeyDoc("how many recent messages of the conversation go with the task "
                                       "(0 = the task alone)"),
    "subagents.artifact_strategy": KeyDoc("a sub-agent's artifacts are merged into the thread as "
                                          "`<name>_<n>/<artifact>`; `inline` also puts their content in the tool "
                                          "result, `session` only names them"),
    "subagents.async": KeyDoc("background tasks: `delegate_to_<name>{task, background: true}` returns a task id "
                              "at once, and the agent gets `check_background_tasks`, `wait_for_background_tasks`, "
                              "`abort_background_tasks` and `continue_task`. Each settled task's outcome reaches "
                              "the agent once, as a notice at its next model call"),
    "subagents.max_wait_seconds": KeyDoc("the most one `wait_for_background_tasks` call waits (you can cut it "
                                         "short)"),
    "subagents.max_concurrent": KeyDoc("background tasks running at once (at least 1); the others wait `queued`"),
    "subagents.max_depth": KeyDoc("levels of delegation (at least 1): 1 = only your agent delegates, 2 = its "
                                  "sub-agents may delegate too, …"),
    "subagents.timeout_seconds": KeyDoc("a task's wall-clock limit (above 0): then its run is stopped and it "
                                        "ends `expired` (its siblings go on)"),
    # -- compression ------------------------------------------------------------------------------------------------------
    "compression.max_input_tokens": KeyDoc(
        "the trigger: the request's input tokens above which the history is compressed before the call. "
        "`null` (or 0): 85% of the model's context window as litellm's model information gives it, else "
        "100,000. A compression aims a tenth of the trigger under it"),
    "compression.max_messages": KeyDoc("also compress when the model would be sent more than this many messages "
                                       "(0 = no such trigger)"),
    "compression.preserve_recent": KeyDoc("how many of the newest messages a **drop** keeps when `summarize` is "
                                          "off"),
    "compression.max_tool_response_chars": KeyDoc("every tool result the model is sent is cut to this many "
                                                  "characters, in every request, compressed or not (0 = no cap)"),
    "compression.dedupe.match_by": KeyDoc("what makes two calls the same: `name-and-input` (the tool's name and "
                                          "its arguments, in a canonical form) is the only choice"),
    "compression.dedupe.keep_recent": KeyDoc("how many of the newest results of the same call stay (at least 1)"),
    "compression.dedupe.enabled": KeyDoc("**dedupe**: an older result of a tool call made again later with the "
                                         "same input is replaced by a one-line note"),
    "compression.truncate.max_chars": KeyDoc("what is kept of each older tool result"),
    "compression.truncate.preserve_recent": KeyDoc("how many of the newest tool results stay whole"),
    "compression.truncate.enabled": KeyDoc("**truncate**: older tool results are cut, marked with how much was "
                                           "cut — only while the request is still over the aim after dedupe"),
    "compression.summarize.model": KeyDoc("the summariser: a litellm model string, run on the workspace's "
                                          "`api_base`; `null` = the workspace's own model. One that names its own "
                                          "endpoint **needs trust**", trust=True),
    "compression.summarize.preserve_recent": KeyDoc("how many of the newest messages are never summarised"),
    "compression.summarize.enabled": KeyDoc("**summarize**: the older messages are replaced by one summary written "
                                            "by `summarize.model`, followed by the paths, commands, URLs and "
                                            "numbers they named. Its tokens count toward the run's budgets"),
    "compression.drop.enabled": KeyDoc("**drop**, the last resort: with `summarize` off or failed, the older "
                                       "messages are replaced by a notice that they were dropped"),
    "compression.skip_summarization_threshold": KeyDoc(
        "an automatic compression summarises only when dedupe and truncate did not get the request under its "
        "aim, or saved less than this share of it (0.0–1.0). **Compact now** always summarises"),
    # -- execute ------------------------------------------------------------------------------------------------------------
    "execute.max_output_chars": KeyDoc("a command's result keeps this many characters of its output: the head "
                                       "and the tail, with a note of what was cut between them"),
    "execute.max_timeout_seconds": KeyDoc("the longest timeout a call may ask for; at its timeout a command's "
                                          "whole process group is killed"),
    "execute.network": KeyDoc("sandboxed commands may open network connections (without a sandbox, commands "
                              "always can). `true` **needs trust**", trust=True),
    "execute.env_allow": KeyDoc("environment variables (names or `*` globs) passed to commands besides the "
                                "minimal set (`PATH`, `HOME`, `LANG`, `TERM` …); a name holding KEY, TOKEN, SECRET "
                                "or PASSWORD passes only when listed by its exact name, never through a glob. "
                                "**Needs trust**", trust=True),
    # -- mcp servers -------------------------------------------------------------------------------------------------------
    "mcp_servers": KeyDoc("server name → server. A name is letters and digits with single `-`/`_` between them, "
                          "at most 32 characters", default="none"),
    "mcp_servers.<name>.command": KeyDoc("a stdio server: the program to start (looked up on `PATH`, then on "
                                         "your login shell's `PATH`). Starting a command **needs trust** (its "
                                         "`args`, `env` and `cwd` are part of what you trust)", trust=True),
    "mcp_servers.<name>.args": KeyDoc("its arguments"),
    "mcp_servers.<name>.env": KeyDoc("extra environment for it; `${VAR}` in a value is taken from your "
                                     "environment or the keyring when the server starts, never stored"),
    "mcp_servers.<name>.cwd": KeyDoc("its working folder (relative to the workspace)", default="the workspace"),
    "mcp_servers.<name>.url": KeyDoc("a streamable-HTTP server instead of a command. **Needs trust**: the "
                                     "agent's calls to its tools, and the `headers`, go there", trust=True),
    "mcp_servers.<name>.headers": KeyDoc("HTTP headers for a `url` server; `${VAR}` as in `env`"),
    "mcp_servers.<name>.enabled": KeyDoc("`false` keeps the server configured but never started"),
    "mcp_servers.<name>.startup_timeout": KeyDoc("seconds to start and list its tools (a first `uvx` or `npx` "
                                                 "run downloads: give it time)"),
    "mcp_servers.<name>.tool_timeout": KeyDoc("seconds one tool call may take; then it is a tool error"),
}

#: Per-user settings (settings.json in the per-user config folder), documented the same way.
USER_KEYS: dict[str, KeyDoc] = {
    "model": KeyDoc("your default model for workspaces that name none"),
    "api_base": KeyDoc("your default API base, used together with your default model"),
    "default_permission": KeyDoc("`allow`, `ask` or `deny` for calls no rule matches, unless the workspace "
                                 "sets `permissions.default`"),
    "recent_workspaces": KeyDoc("File → Recent, newest first (at most 10)"),
    "last_workspace": KeyDoc("the workspace opened at start when none is given"),
    "window": KeyDoc("the window's size, position and panel layout (Qt's own encoding)"),
    "theme": KeyDoc("View → Theme: `system` (follows the desktop), `light` or `dark`"),
}
