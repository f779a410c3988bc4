"""The rule builder's engine side (Q3, P1, P3, W1). No Qt.

From one approval the person proposes a rule — an effect (allow / ask / deny) on either a path the
call touches, at file / folder / tree level, a command it runs (E2: exactly it, its program and
sub-command with any arguments, ``git commit *``, or its program, ``git *``), or the tool (its name,
or a glob) — sees which earlier
calls in this workspace's threads it matches and what each would now do, and saves it:

- ``session``: in memory until the app quits, for every thread of the workspace
  (``PermissionsMiddleware.session_added``; kept per workspace here, so reopening the workspace —
  a changed workbench.yaml is read again between runs, G9 — keeps them);
- ``project``: appended to the workspace's ``workbench.yaml`` (``permissions.rules``);
- ``user``: appended to the user's ``permissions.yaml`` (every workspace).

Files are changed by inserting the rule's line only: every other byte (comments, key order, quoting,
alignment) stays as it was (``permissions.with_rules_added``). A round-trip YAML library (ruamel.yaml)
re-indents sequences and re-flows flow mappings (8 of 16 lines of DESIGN §6's example changed when
tried), so it is not used.

Matching is the engine's own (``permissions.rule_matches``, ``PermissionsMiddleware.judge``): the
preview cannot disagree with what the run will do. Patterns are built from the canonical path with
every glob character escaped, so a rule never covers more than the level the person chose.
"""

from __future__ import annotations

import copy
import logging
import posixpath
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.atomic import write_text_atomic
from workbench.config import ACTIONS, CONFIG_FILENAME, EFFECTS, PermissionRule, parse_config
from workbench.errors import ConfigError
from workbench.harness.permissions import (
    SESSION_KEY,
    PermissionsMiddleware,
    _canonical,
    check_rule_pattern,
    exact_pattern,
    rule_matches,
    state_session_rules,
)
from workbench.harness.permission_rules_file import with_rules_added

__all__ = [
    "COMMAND_LEVELS",
    "LEVELS",
    "SCOPES",
    "PastCall",
    "PreviewEntry",
    "SavedRule",
    "apply_session_rules",
    "build_rule",
    "call_outcome",
    "command_pattern",
    "past_calls",
    "path_pattern",
    "preview",
    "rule_yaml",
    "save_rule",
    "subjects",
]

log = logging.getLogger(__name__)

#: Path levels: the file itself, the files directly in its folder, everything under its folder.
LEVELS: tuple[str, ...] = ("file", "folder", "tree")
#: Command levels (E2): exactly this command, the program and its sub-command with any arguments
#: (``git commit *``), the program with any arguments (``git *``), or a glob the person typed.
COMMAND_LEVELS: tuple[str, ...] = ("command", "subcommand", "program", "glob")
#: A builder that only knows path levels still gets sensible command rules: file → the command,
#: folder → its sub-command, tree → the program.
_PATH_TO_COMMAND_LEVEL = {"file": "command", "folder": "subcommand", "tree": "program"}
#: Where a rule is kept.
SCOPES: tuple[str, ...] = ("session", "project", "user")
#: The newest calls a preview looks at (a long history stays quick to preview).
MAX_PAST_CALLS = 5000
#: Rules saved "for this session only", per workspace folder, for as long as this process runs.
_SESSION_RULES: dict[str, list[PermissionRule]] = {}


def _ws_key(workspace: Path | str) -> str:
    return str(Path(workspace).expanduser().resolve())


def apply_session_rules(stack: Sequence[Any], workspace: Path | str) -> None:
    """Give a freshly built stack's permissions the rules saved for this session in ``workspace``."""
    kept = _SESSION_RULES.get(_ws_key(workspace))
    if not kept:
        return
    for m in stack:
        if isinstance(m, PermissionsMiddleware):
            m.session_added.extend(r for r in kept if r not in m.session_added)


# ------------------------------------------------------------------------------------------ building


def path_pattern(path: str, level: str) -> str:
    """The path glob for ``path`` at ``level`` (see LEVELS), from its canonical form, every glob
    character of the path escaped: ``/project/src/a.py`` → ``/project/src/a.py``,
    ``/project/src/*`` or ``/project/src/**``. ValueError for a path that is not absolute."""
    if level not in LEVELS:
        raise ValueError(f"level must be one of {', '.join(LEVELS)}, not {level!r}")
    if not isinstance(path, str) or not path.startswith("/"):
        raise ValueError(f"{path!r} is not an absolute virtual path")
    canonical = _canonical(path)
    if level == "file":
        return exact_pattern(canonical)
    folder = posixpath.dirname(canonical) if canonical != "/" else "/"
    base = "" if folder == "/" else exact_pattern(folder)
    return base + ("/*" if level == "folder" else "/**")


def build_rule(effect: str, action: str, target: str, level: str) -> PermissionRule:
    """The rule the builder proposes. ``action`` ``read``/``write``: ``target`` is a path, ``level``
    one of LEVELS. ``invoke``: ``target`` is the tool's name (``level`` ``tool``: exactly that tool)
    or a glob the person typed (``level`` ``glob``). ValueError names what is wrong."""
    if effect not in EFFECTS:
        raise ValueError(f"effect must be one of {', '.join(EFFECTS)}, not {effect!r}")
    if action not in ACTIONS:
        raise ValueError(f"action must be one of {', '.join(ACTIONS)}, not {action!r}")
    if action == "invoke":
        if level not in ("tool", "glob"):
            raise ValueError(f"a tool rule's level is 'tool' or 'glob', not {level!r}")
        pattern = target.strip() if level == "glob" else exact_pattern(target)
        if not pattern:
            raise ValueError("the tool glob is empty: type a tool name or a pattern such as mcp_*")
    elif action == "execute":
        pattern = command_pattern(target, _PATH_TO_COMMAND_LEVEL.get(level, level))
    else:
        pattern = path_pattern(target, level)
    rule = PermissionRule(effect=effect, action=action, pattern=pattern)  # type: ignore[arg-type]
    check_rule_pattern(rule)
    return rule


def command_pattern(command: str, level: str) -> str:
    """The command glob for one command ``command`` (a part's text, as the approval shows it) at
    ``level`` (see COMMAND_LEVELS): ``git commit -m x`` → ``git commit -m x``, ``git commit *`` or
    ``git *``; ``glob`` takes ``command`` as the pattern itself. ValueError names what is wrong."""
    import shlex

    from workbench.harness.command_rules import Part, prefix_patterns

    if level not in COMMAND_LEVELS:
        raise ValueError(f"a command rule's level is one of {', '.join(COMMAND_LEVELS)}, not {level!r}")
    text = command.strip()
    if not text:
        raise ValueError("the command is empty: type a command or a pattern such as pytest *")
    if level == "glob":
        return text
    if level == "command":
        return exact_pattern(text)
    try:
        words = tuple(shlex.split(text))
    except ValueError as e:
        raise ValueError(f"{text!r} is not one command: {e}") from None
    wider = prefix_patterns(Part("command", text, words))[1:]  # the exact command first, then wider
    if not wider:
        return exact_pattern(text)
    return wider[0] if level == "subcommand" or len(wider) == 1 else wider[-1]


def rule_yaml(rule: PermissionRule) -> str:
    """The line the rule is saved as in ``permissions.rules`` (without the ``- ``)."""
    from workbench.harness.permission_rules_file import _rule_yaml

    return _rule_yaml(rule)


def subjects(perms: PermissionsMiddleware | None, tool: Any, name: str,
             arguments: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """What a call touches, as ``(action, target, effect now)``: its paths first (those that ask
    before the rest), then the tool itself. A tool this session does not know is just its name."""
    resources = tool.resources(dict(arguments)) if tool is not None else [("invoke", name)]
    has_paths = any(a != "invoke" for a, _ in resources)
    out: list[tuple[str, str, str]] = []
    for action, target in resources:
        if action not in ("invoke", "execute"):
            target = _canonical(target)
        effect = perms.judge(action, target, tool=tool, has_paths=has_paths).effect if perms else "ask"
        if (action, target, effect) not in out:
            out.append((action, target, effect))
    paths = sorted((s for s in out if s[0] != "invoke"), key=lambda s: s[2] != "ask")  # commands too (E2)
    return paths + [s for s in out if s[0] == "invoke"]


# ------------------------------------------------------------------------------------------- history


@dataclass(frozen=True)
class PastCall:
    """One tool call in a thread's history: the arguments that ran (an edited call's edited ones)."""

    thread_id: str
    thread_title: str
    call_id: str
    tool: str
    arguments: Mapping[str, Any]
    edited: bool = False
    #: The thread's "always" session rules, which judge its calls too.
    session_rules: tuple[PermissionRule, ...] = field(default=(), compare=False)


def past_calls(store: Any, *, limit: int = MAX_PAST_CALLS) -> list[PastCall]:
    """Every tool call in the store's threads (newest threads first, at most ``limit``). Blocking
    (SQLite): the window calls it off the GUI thread."""
    out: list[PastCall] = []
    for info in store.threads():
        cp = store.latest_checkpoint(info.id, messages=True)
        if cp is None:
            continue
        rules = tuple(state_session_rules(cp.state.get(SESSION_KEY)))
        messages = [m for m in cp.state.get("messages") or [] if isinstance(m, Mapping)]
        edited = {m.get("tool_call_id"): (m.get("meta") or {}).get("arguments") for m in messages
                  if m.get("role") == "tool" and (m.get("meta") or {}).get("edited")}
        calls: list[PastCall] = []
        for m in messages:
            if m.get("role") != "assistant":
                continue
            for c in m.get("tool_calls") or []:
                if not isinstance(c, Mapping) or not isinstance(c.get("name"), str):
                    continue
                ran = edited.get(c.get("id"))
                args = ran if isinstance(ran, Mapping) else c.get("arguments")
                calls.append(PastCall(info.id, info.title or "Untitled", str(c.get("id", "")), c["name"],
                                      dict(args) if isinstance(args, Mapping) else {}, isinstance(ran, Mapping),
                                      rules))
        out.extend(reversed(calls))  # newest first within a thread
        if len(out) >= limit:
            return out[:limit]
    return out


# ------------------------------------------------------------------------------------------- preview


@dataclass(frozen=True)
class PreviewEntry:
    """A past call the rule matches: the resources it matches, and the call's outcome today and with
    the rule (``allow`` / ``ask`` / ``deny``), judged by the engine's own rules."""

    call: PastCall
    matched: tuple[tuple[str, str], ...]
    before: str
    after: str

    @property
    def changes(self) -> bool:
        return self.before != self.after


def _resources(call: PastCall, tools: Mapping[str, Any]) -> tuple[Any, list[tuple[str, str]]]:
    tool = tools.get(call.tool)
    if tool is None:
        return None, [("invoke", call.tool)]
    try:
        return tool, [(a, t) for a, t in tool.resources(dict(call.arguments))]
    except Exception:  # noqa: BLE001 - odd stored arguments: judge the tool alone
        return tool, [("invoke", call.tool)]


def call_outcome(perms: PermissionsMiddleware, tool: Any, resources: Sequence[tuple[str, str]],
                 session: Sequence[PermissionRule] = ()) -> str:
    """What the engine would do with a call touching ``resources``: deny if any is denied, else ask
    if any asks, else allow (P1, P2)."""
    has_paths = any(a != "invoke" for a, _ in resources)
    effects = {perms.judge(a, t, tool=tool, has_paths=has_paths, session=session).effect for a, t in resources}
    return "deny" if "deny" in effects else "ask" if "ask" in effects else "allow"


def with_rule(perms: PermissionsMiddleware, rule: PermissionRule, scope: str) -> PermissionsMiddleware:
    """A copy of ``perms`` judging as it would once ``rule`` is saved to ``scope`` (nothing saved)."""
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {', '.join(SCOPES)}, not {scope!r}")
    other = copy.copy(perms)
    other.rules, other.user_rules = list(perms.rules), list(perms.user_rules)
    other.session_added = list(perms.session_added)
    {"session": other.session_added, "project": other.rules, "user": other.user_rules}[scope].append(rule)
    return other


def preview(perms: PermissionsMiddleware, rule: PermissionRule, scope: str, calls: Sequence[PastCall],
            tools: Mapping[str, Any]) -> list[PreviewEntry]:
    """The past calls ``rule`` matches (any of a call's resources), in ``calls`` order, each with its
    outcome now and once the rule is saved to ``scope``."""
    after_perms = with_rule(perms, rule, scope)
    out: list[PreviewEntry] = []
    for call in calls:
        tool, resources = _resources(call, tools)
        matched = tuple((a, _canonical(t) if a not in ("invoke", "execute") else t) for a, t in resources
                        if rule_matches(rule, a, t))
        if not matched:
            continue
        out.append(PreviewEntry(call, matched, call_outcome(perms, tool, resources, call.session_rules),
                                call_outcome(after_perms, tool, resources, call.session_rules)))
    return out


# ---------------------------------------------------------------------------------------------- save


@dataclass(frozen=True)
class SavedRule:
    """Where a rule went: its scope, the file and line (None and 0 for the session), and a notice
    for the person when something needs their attention (trust asked again)."""

    rule: PermissionRule
    scope: str
    file: Path | None = None
    line: int = 0
    notice: str = ""


def _note() -> str:
    return f"rule builder, {time.strftime('%Y-%m-%d')}"


def save_rule(perms: PermissionsMiddleware, rule: PermissionRule, scope: str, *,
              workspace: Path | None = None) -> SavedRule:
    """Keep ``rule`` in ``scope`` and make it count in ``perms`` at once (the current session).

    Blocking file I/O for ``project``/``user``: the window runs it off the GUI thread. A file that
    cannot be changed safely is a ConfigError naming it; nothing is half-written (atomic replace).
    """
    check_rule_pattern(rule)
    if scope == "session":
        if rule not in perms.session_added:
            perms.session_added.append(rule)
        if workspace is not None:
            kept = _SESSION_RULES.setdefault(_ws_key(workspace), [])
            if rule not in kept:
                kept.append(rule)
        return SavedRule(rule, scope)
    if scope == "user":
        target = perms.user_config
        if target is None:
            raise ConfigError("this session has no user permissions.yaml to save the rule to; save it for the "
                              "session or the project instead")
        text = _read(target)
        updated, lines = with_rules_added(text, [rule], seed=False, note=_note(), source=str(target))
        write_text_atomic(target, updated)
        perms.user_rules.append(PermissionRule(rule.effect, rule.action, rule.pattern, lines[0]))
        return SavedRule(rule, scope, target, lines[0])
    if scope != "project":
        raise ValueError(f"scope must be one of {', '.join(SCOPES)}, not {scope!r}")
    target = perms.project_config
    if target is None:
        raise ConfigError(f"this session has no {CONFIG_FILENAME} to save the rule to; save it for the session "
                          "or in your own permissions.yaml instead")
    ws = Path(workspace) if workspace is not None else target.parent
    from workbench.config import read_config_text

    text = read_config_text(ws, target) or ""  # only the workspace's own regular file (no symlink out)
    updated, lines = with_rules_added(text, [rule], seed=True, note=_note(), source=str(target))
    notice = _keep_trust_write(ws, target, text, updated, rule)
    perms.rules.append(PermissionRule(rule.effect, rule.action, rule.pattern, lines[0]))
    return SavedRule(rule, scope, target, lines[0], notice)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: cannot read it to add the rule: {e}") from e


def _keep_trust_write(ws: Path, target: Path, before: str, after: str, rule: PermissionRule) -> str:
    """Write ``after`` over the workspace's workbench.yaml, keeping the person's trust (W1).

    The person's own rule must not leave their trusted workspace untrusted: when the workspace was
    trusted (or asked for nothing) before, and the only new trust request is this rule, the trust
    record is renewed for exactly the text written. A workspace that was not trusted stays so (this
    would trust its other settings too). Returns a notice when trust is asked again, else "".
    """
    from workbench import trust

    source = str(target)
    old_cfg, new_cfg = parse_config(before, source=source), parse_config(after, source=source)
    was_trusted = trust.is_trusted(ws, old_cfg)
    old = [(r.key.split("[")[0], r.value) for r in trust.requests(old_cfg, ws)]
    new = [(r.key.split("[")[0], r.value) for r in trust.requests(new_cfg, ws)]
    for item in old:
        if item in new:
            new.remove(item)
    write_text_atomic(target, after)
    if not new:
        return ""  # the rule asks for nothing (a deny, an ask, a read): the hash is unchanged
    if new != [("permissions.rules", str(rule))]:  # pragma: no cover - the text we built adds one rule
        return f"{target} now asks for more than this rule; trust the workspace again to use it"
    if not was_trusted:
        return ("the workspace is not trusted: the rule is saved, and counts once you trust the workspace "
                "(reopen it and choose Trust)")
    try:
        trust.trust(ws, new_cfg)
    except (OSError, ConfigError) as e:
        log.warning("could not renew the trust of %s after saving a rule: %s", ws, e)
        return f"the workspace's trust could not be renewed ({e}); it will ask to be trusted when reopened"
    return ""
