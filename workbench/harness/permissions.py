"""Permissions (P1–P4, M6): allow / ask / deny rules checked around every tool call.

Every validated call is turned into resources (P2): ``("invoke", tool)`` plus ``("read"|"write",
path)`` for file tools. Each resource is judged by the rules; the call runs only if every resource
is allowed. Order of evaluation, per resource:

"Configured" rules are the workspace's ``workbench.yaml`` plus the user's rules file
(``user_config_dir()/permissions.yaml``, same ``permissions.rules`` format, loaded into every
workspace): they are judged together, so a user allow never beats a workspace deny or ask.

1. a configured ``deny`` rule → the call is refused with ``Denied: …`` (an approval never lifts it);
2. a *session* allow rule (an "always" approval, kept in state key ``permission_rules``) → allowed —
   an "always" must stop the asking, so session rules beat configured ``ask`` rules, never ``deny``;
3. a configured ``ask`` rule → ``NeedsApproval`` (unless the call was approved);
4. a configured ``allow`` rule → allowed;
5. otherwise the ``default`` — except where it would only be noise (P1: "ask out of the box for
   writes and for tools that change the outside world"): invoking a tool whose call names a path is
   allowed, leaving the decision to the path's read/write resource; invoking one of the workbench's own
   read-only tools (``changes_outside=False``) is allowed; an MCP tool its *server* labels read-only
   (``Tool.server_labelled``) is allowed only instead of the ``ask`` default (X2), never under ``deny`` —
   the server's label is its own claim; and under the ``ask`` default, reads are allowed.

Patterns: paths are globs over normalized virtual paths (``**`` any depth, ``*`` and ``?`` within one
segment, ``[abc]`` classes; a pattern without a leading ``/`` matches at any depth); tool patterns are
``fnmatch`` globs on the tool name.

"Always" (P3): when an approval says ``always: "session"`` the resources that asked become exact allow
rules in the thread's state; ``always: "project"`` also appends them to the workspace's
``workbench.yaml`` (``permissions.rules``), keeping the rest of the file as it is; ``always: "user"``
appends them to the user's rules file instead, so they apply in every workspace.

Commands (E2): the ``execute`` tool's resources are the parts of its command line
(``command_rules.parse``): ``("execute", part)`` for each command it runs, judged by ``execute`` rules
(``command:`` patterns), and ``("write", path)`` for each file a redirection writes. A part that cannot
be judged asks whatever the allow rules say; a deny rule matching its text still denies.

Paths a rule judges are the ones the backend really opens (P5): the middleware also judges where a
symlink leads, and installs a ``PathGuard`` so the backend judges the resolved path at open time and
leaves out of searches what is not allowed outright (P6).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import functools
import logging
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from workbench.backends.base import (
    BackendRefusal,
    PathError,
    check_pattern_length,
    is_under,
    normalize,
    path_rule_regex,
    shown_pattern,
)
from workbench.backends.guard import PathGuard, guarding
from workbench.config import CONFIG_FILENAME, EFFECTS, YAML_VALUE_ERRORS, PermissionRule, parse_config
from workbench.engine.frozen import FrozenList
from workbench.engine.messages import ToolCall
from workbench.engine.middleware import AgentMiddleware, CallTool, HookContext, Question, ToolContext
from workbench.engine.tools import NeedsApproval, Tool, ToolOutcome
from workbench.errors import ConfigError
from workbench.harness.command_rules import UnjudgedPart, match_command
# the rules file's edit (P3); with_rules_added stays importable from here, as it was
from workbench.harness.permission_rules_file import append_rules_to_config, with_rules_added  # noqa: F401
from workbench.keystore import key_folder
from workbench.seal import SealError, seal, sealed

__all__ = [
    "PermissionsMiddleware",
    "Verdict",
    "always_rules",
    "append_rules_to_config",
    "exact_pattern",
    "with_rules_added",
    "match_path",
    "match_tool",
    "rule_matches",
]

log = logging.getLogger(__name__)

SESSION_KEY = "permission_rules"
USER_RULES_FILENAME = "permissions.yaml"


def user_rules_path() -> Path:
    """The user's permission rules, loaded into every workspace (P3 ``always: "user"``)."""
    from workbench.config import user_config_dir

    return user_config_dir() / USER_RULES_FILENAME


def load_user_rules(path: Path) -> list[PermissionRule]:
    """The rules in the user's rules file (``permissions.rules`` only); none when it is missing.

    A broken file is a ConfigError naming file, line and key, like workbench.yaml.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: cannot read the user permission rules: {e}") from e
    try:
        data = yaml.safe_load(text) if text.strip() else None
    except (yaml.YAMLError, RecursionError, *YAML_VALUE_ERRORS):
        parse_config(text, source=str(path))  # says what is wrong, with file and line
        raise ConfigError(f"{path}: cannot read the user permission rules") from None
    perms = data.get("permissions") if isinstance(data, dict) else None
    if not isinstance(perms, dict) or "rules" not in perms:
        return []  # no list: no rules (not the workspace defaults)
    return list(parse_config(text, source=str(path)).permissions.rules)


# ------------------------------------------------------------------------------------------ matching


# RE2 (linear time): a pattern with many ``**`` costs microseconds, not seconds, a path (F3); a pattern
# too long or refused by RE2 is a ValueError (the config reader reports it with file and line).
_path_regex = path_rule_regex


def check_rule_pattern(rule: PermissionRule) -> None:
    """ValueError if ``rule``'s pattern cannot be matched in bounded time (too long, refused by RE2)."""
    if rule.action in ("invoke", "execute"):
        check_pattern_length(rule.pattern, "rule pattern")
    else:
        _path_regex(rule.pattern)


def _canonical(path: str) -> str:
    """The normalized virtual path (``/a/../b`` → ``/b``, NFC), or the text as given if it isn't one.

    One spelling per path, so no rule is passed by writing a path differently (P5): ``.``/``..``,
    doubled or trailing slashes, and Unicode normal forms (NFC, as macOS disks treat them alike).
    """
    if type(path) is str:  # a plain string: remembered (a pure function; every step asks again)
        return _canonical_str(path)
    return _spell(path)


def _spell(path: str) -> str:
    try:
        return unicodedata.normalize("NFC", normalize(path))
    except BackendRefusal:
        return path


# Judging a call's paths asks the same few paths many times: each path once when judged, again for
# each rule it is matched against, again when the backend opens or lists it, and again by the search
# tool that shows it (issue 9: eleven judgements of a step's ``ls``). Both functions are pure, so
# remembering them changes no answer; the sizes bound the memory whatever paths a model names.
_canonical_str = functools.lru_cache(maxsize=4096)(_spell)


def match_path(pattern: str, path: str) -> bool:
    """True if virtual ``path`` (normalized first) matches the path glob ``pattern``."""
    if type(pattern) is str and type(path) is str:
        return _match_path_str(pattern, path)
    return _match_path(pattern, path)


def _match_path(pattern: str, path: str) -> bool:
    p = _canonical(path)
    return _path_regex(pattern).fullmatch("" if p == "/" else p.rstrip("/")) is not None


_match_path_str = functools.lru_cache(maxsize=8192)(_match_path)


def match_tool(pattern: str, name: str) -> bool:
    """True if a tool name matches an ``fnmatch`` pattern (case-sensitive)."""
    return fnmatch.fnmatchcase(name, pattern)


def exact_pattern(text: str) -> str:
    """A glob that matches exactly ``text`` (``*``, ``?``, ``[`` and ``{`` escaped as classes).

    ``{`` too: ``{a,b}`` is an alternative in path rules, so an "Always" on a file named
    ``x{a,b}.py`` saved a rule that allowed ``xa.py`` and ``xb.py`` and not the file itself (Q3).
    """
    return re.sub(r"([*?\[{])", r"[\1]", text)


def always_note(scope: str) -> str:
    """The comment an "Always" rule is saved with: which button, when, and that it covers exactly
    what asked (the person can see the scope in the file, Q3)."""
    import time

    where = {"project": "this project", "user": "all my workspaces"}.get(scope, scope)
    return f"Always ({where}) on {time.strftime('%Y-%m-%d')}: exactly this path or tool"


def rule_matches(rule: PermissionRule, action: str, target: str) -> bool:
    """Whether ``rule`` covers the resource ``(action, target)``: the one matcher the engine, the
    rule builder's preview and its tests all use (Q3)."""
    if rule.action != action:
        return False
    if action == "invoke":
        return match_tool(rule.pattern, target)
    if action == "execute":
        return match_command(rule.pattern, target)
    return match_path(rule.pattern, target)


def always_rules(asked: Sequence[Verdict]) -> list[PermissionRule]:
    """The exact allow rules an "Always" answer saves for the resources that asked (P3, Q3):
    one file, one tool — never wider."""
    out: list[PermissionRule] = []
    for v in asked:
        if isinstance(v.target, UnjudgedPart):
            continue  # E2: a part only a run can tell is never allowed by a rule
        rule = PermissionRule(effect="allow", action=v.action, pattern=exact_pattern(v.target))  # type: ignore[arg-type]
        if rule not in out:
            out.append(rule)
    return out


# ------------------------------------------------------------------------------------------ verdicts


@dataclass(frozen=True)
class Verdict:
    """The decision on one resource: ``effect`` and a human reason naming the rule (and its line)."""

    action: str
    target: str
    effect: str  # allow | ask | deny
    reason: str
    rule: str | None = None
    by_default: bool = False


def _rule_seal_parts(rule: PermissionRule) -> tuple[str, ...]:
    return (SESSION_KEY, rule.effect, rule.action, rule.pattern)


_unsealed_warned: set[tuple[str, str, str]] = set()


def state_session_rules(stored: Any) -> list[PermissionRule]:
    """The "always" rules a thread's state holds (``permission_rules``) that this account made.

    W1: the thread store is a file in the workspace, so a folder can arrive with a thread whose state
    says "allow every command". Each rule the person's approval adds is stored with a seal
    (``workbench.seal``: an HMAC under a secret only this account can read); a rule without a valid one
    (forged, copied from another account's store, or kept by a version before seals) is left out, so
    the person is asked again. A malformed rule is left out too, loudly.

    Called three times a tool call (its verdicts, its symlinks' verdicts, its guard) on the same state
    value: a frozen list (M3) cannot change, so the last one's rules are kept, with the key folder they
    were checked against (the seal's secret lives there), instead of one HMAC per rule each time.
    """
    global _last_read
    if not stored:  # none saved (the usual state): nothing to check a seal of
        return []
    frozen = isinstance(stored, FrozenList)
    if frozen and _last_read is not None and _last_read[0] is stored:
        folder = key_folder()
        if _last_read[1] == folder:
            return list(_last_read[2])
    out = _read_session_rules(stored)
    if frozen:
        _last_read = (stored, key_folder(), tuple(out))
    return out


_last_read: tuple[Any, Any, tuple[PermissionRule, ...]] | None = None


def _read_session_rules(stored: Any) -> list[PermissionRule]:
    out = []
    for d in stored or []:
        rule = _rule_from_dict(d) if isinstance(d, Mapping) else None
        if rule is None:
            continue
        if not sealed(d.get("seal"), *_rule_seal_parts(rule)):
            key = (rule.effect, rule.action, rule.pattern)
            if key not in _unsealed_warned:
                _unsealed_warned.add(key)
                log.warning("session permission rule '%s' left out: not made on this account (W1); "
                            "the person is asked again", rule)
            continue
        try:
            check_rule_pattern(rule)
        except ValueError as e:  # state written by hand or by an older version: leave it out, loudly
            log.warning("session permission rule left out: %s", e)
            continue
        out.append(rule)
    return out


def sealed_rule_dict(rule: PermissionRule) -> dict[str, str]:
    """An "always" rule as the state stores it, sealed on this account (see ``state_session_rules``)."""
    return {"effect": rule.effect, "action": rule.action, "pattern": rule.pattern,
            "seal": seal(*_rule_seal_parts(rule))}


def _rule_from_dict(d: Mapping[str, Any]) -> PermissionRule | None:
    try:
        if d["effect"] not in EFFECTS:
            return None
        return PermissionRule(effect=d["effect"], action=d["action"], pattern=str(d["pattern"]), line=0)
    except (KeyError, TypeError):
        return None


class PermissionsMiddleware(AgentMiddleware):
    """Checks every tool call against permission rules (P1–P4). See the module docstring for the order.

    ``rules`` and ``default`` come from ``PermissionsConfig``; ``project_config`` is the workspace's
    ``workbench.yaml``, where ``always: "project"`` approvals are saved (None: session only).
    """

    writes = frozenset({SESSION_KEY})
    state_defaults = {SESSION_KEY: []}

    def __init__(self, rules: Sequence[PermissionRule] = (), default: str = "ask", *,
                 project_config: Path | None = None, user_config: Path | None = None) -> None:
        if default not in EFFECTS:
            raise ValueError(f"permissions default must be one of {', '.join(EFFECTS)}, not {default!r}")
        self.rules: list[PermissionRule] = list(rules)
        for rule in self.rules:  # rules built in code; workbench.yaml's were checked when read (F3)
            try:
                check_rule_pattern(rule)
            except ValueError as e:
                where = f" (line {rule.line})" if rule.line else ""
                raise ConfigError(f"permission rule {shown_pattern(str(rule))}{where}: {e}") from None
        self.default = default
        self.project_config = Path(project_config) if project_config is not None else None
        # The user's rules file (None: no user rules); judged with the workspace's rules.
        self.user_config = Path(user_config) if user_config is not None else None
        self.user_rules: list[PermissionRule] = load_user_rules(self.user_config) if self.user_config else []
        # "always" decisions waiting for their approved call: (thread, call id) -> scope.
        self._always: dict[tuple[str, str], str] = {}
        # Q3: rules the rule builder saved "for this session only" (in memory, every thread of this
        # workspace's session): allow ones rank with the "always" session rules, deny and ask ones
        # with the configured rules.
        self.session_added: list[PermissionRule] = []
        self._rule_texts: dict[int, tuple[PermissionRule, tuple[int, int, int], str, str]] = {}  # see _matched

    def follow(self, parent: PermissionsMiddleware) -> None:
        """Judge by ``parent``'s rules from now on, live: a sub-agent's permissions (D, P1, Q3).

        The rule lists are the parent's own list objects, not copies: a rule the person saves later —
        with the rule builder (``rule_proposal.save_rule``: for this session, to workbench.yaml or to the
        user's permissions.yaml) or with an "Always" answer for the project or the user — binds the
        sub-agent at its next call exactly as it binds the parent, and a sub-agent's own "Always" saved to
        a file binds the parent too. So a sub-agent is never judged more permissively than its parent.
        What stays the sub-agent's own: the "always" session rules of its thread's state (sealed, per
        thread: ``state_session_rules``) and its approvals waiting for their call (``_always``).
        """
        self.rules = parent.rules
        self.user_rules = parent.user_rules
        self.session_added = parent.session_added
        self.default = parent.default
        self.project_config = parent.project_config
        self.user_config = parent.user_config
        self._rule_texts = {}

    @classmethod
    def from_config(cls, config: Any, *, project_config: Path | None = None,
                    user_config: Path | None = None) -> PermissionsMiddleware:
        """Build from a ``PermissionsConfig`` (or a ``WorkbenchConfig`` holding one)."""
        perms = getattr(config, "permissions", config)
        return cls(perms.rules, perms.default, project_config=project_config, user_config=user_config)

    # ------------------------------------------------------------------------------------ judging

    def _matched(self, label: str, rule: PermissionRule) -> tuple[str, str]:
        """A verdict's reason and rule text for ``rule`` matching ``label``. The rule's part is made once
        per rule object (every read the default ``allow read /**`` answers asks for it; issue 9)."""
        lists = (len(self.rules), len(self.user_rules), len(self.session_added))  # where a rule is may change
        known = self._rule_texts.get(id(rule))
        if known is None or known[0] is not rule or known[1] != lists:
            known = (rule, lists, f"'{rule}'{self._where(rule)}", str(rule))
            if len(self._rule_texts) > 512:
                self._rule_texts.clear()
            self._rule_texts[id(rule)] = known
        return f"{label} matches {known[2]}", known[3]

    def _where(self, rule: PermissionRule) -> str:
        if any(rule is r for r in self.session_added):
            return " (a rule for this session)"
        if not rule.line:
            return ""
        if self.user_config is not None and any(rule is r for r in self.user_rules):
            return f" ({self.user_config} line {rule.line})"
        name = self.project_config.name if self.project_config is not None else CONFIG_FILENAME
        return f" ({name} line {rule.line})"

    @staticmethod
    def _matches(rule: PermissionRule, action: str, target: str) -> bool:
        return rule_matches(rule, action, target)

    def session_rules(self, state: Mapping[str, Any]) -> list[PermissionRule]:
        """The thread's "always" allow rules, from state: only those sealed on this account (W1)."""
        return state_session_rules(state.get(SESSION_KEY))

    def judge(self, action: str, target: str, *, tool: Tool | None = None, has_paths: bool = False,
              session: Sequence[PermissionRule] = ()) -> Verdict:
        """Decide one resource: deny, then session allow, then ask, then allow, then the default."""
        if action not in ("invoke", "execute"):
            target = _canonical(target)
        label = f"{action} {target}" if action != "execute" else f"the command `{target}`"
        added = [r for r in self.session_added if r.effect != "allow"] if self.session_added else []
        ranked = (*self.rules, *self.user_rules, *added) if self.user_rules or added else self.rules
        matching = [r for r in ranked if self._matches(r, action, target)]
        for r in matching:
            if r.effect == "deny":
                return Verdict(action, target, "deny", *self._matched(label, r))
        if isinstance(target, UnjudgedPart):  # E2: asks, whatever allows it; only a deny beats that
            for r in ranked:  # a deny on a command inside it, read roughly
                hit = next((seg for seg in target.segments if r.effect == "deny" and self._matches(r, action, seg)),
                           None)
                if hit is not None:
                    return Verdict(action, target, "deny", f"the command `{hit}` in {label} matches '{r}'"
                                                           f"{self._where(r)}", str(r))
            return Verdict(action, target, "ask", f"{label} cannot be judged before it runs: {target.why}", None)
        session_allows = (*session, *(r for r in self.session_added if r.effect == "allow")) \
            if session or self.session_added else ()
        for r in session_allows:
            if r.effect == "allow" and self._matches(r, action, target):
                return Verdict(action, target, "allow", f"{label}: allowed for this session ('{r}')", str(r))
        for effect in ("ask", "allow"):
            for r in matching:
                if r.effect == effect:
                    return Verdict(action, target, effect, *self._matched(label, r))
        # A server's read-only label spares its tool the default ask (X2), never a deny default (P1): a
        # server cannot lift its tools past the person's deny-by-default by labelling them.
        if action == "invoke" and tool is not None and (
                has_paths or (not tool.changes_outside and (self.default == "ask" or not tool.server_labelled))):
            why = "its paths decide" if has_paths else "read-only tool"
            return Verdict(action, target, "allow", f"{label}: allow ({why})", None, True)
        effect = self.default
        if effect == "ask" and action == "read":
            return Verdict(action, target, "allow", f"{label}: allow (reads are allowed by default)", None, True)
        what = {"write": "writes", "read": "reads", "invoke": "tools that change the outside world",
                "execute": "commands"}[action]
        if effect == "ask":
            return Verdict(action, target, "ask", f"{label}: ask (default for {what})", "default: ask", True)
        return Verdict(action, target, effect, f"{label}: {effect} (default)", f"default: {effect}", True)

    def readable(self, path: str) -> bool:
        """False where a deny-read rule covers ``path`` (file tools hide such files from searches)."""
        return self.judge("read", path, has_paths=True).effect != "deny"

    def judge_call(self, tool: Tool, arguments: Mapping[str, Any], state: Mapping[str, Any]) -> list[Verdict]:
        """Verdicts for every resource of one call (P2)."""
        resources = tool.resources(dict(arguments))
        has_paths = any(a != "invoke" for a, _ in resources)
        session = self.session_rules(state)
        return [self.judge(a, t, tool=tool, has_paths=has_paths, session=session) for a, t in resources]

    # -------------------------------------------------------------------------------------- hooks

    async def _symlink_verdicts(self, tool: Tool, arguments: Mapping[str, Any], ctx: ToolContext) -> list[Verdict]:
        """Verdicts on the paths a call's paths lead to through symlinks (P5): a deny or ask there applies."""
        backend = ctx.backend
        if backend is None:
            return []
        resources = tool.resources(dict(arguments))
        session = self.session_rules(ctx.state)
        out: list[Verdict] = []
        for action, named in resources:
            if action in ("invoke", "execute"):
                continue
            try:
                target = _canonical(await backend.target(named))
            except (PathError, ValueError, OSError):
                continue  # the backend refuses the path itself when the call runs
            v = self.judge_link_target(action, named, target, tool=tool, session=session)
            if v is not None:
                out.append(v)
        return out

    def judge_link_target(self, action: str, named: str, target: str, *, tool: Tool | None = None,
                          session: Sequence[PermissionRule] = ()) -> Verdict | None:
        """P5: the verdict on ``target``, where ``named`` leads through a symlink, saying so; None when
        it leads to itself (no link). For a tool call's paths and for the window's saves alike."""
        target = _canonical(target)
        if target == _canonical(named):
            return None
        v = self.judge(action, target, tool=tool, has_paths=True, session=session)
        return dataclasses.replace(v, reason=f"{v.reason} ({_canonical(named)} is a symlink to it)")

    def guard(self, verdicts: Sequence[Verdict], state: Mapping[str, Any], approved: bool) -> PathGuard:
        """The rules as the backend applies them while the call runs, on the paths it really opens (P5, P6).

        A path judged before the call (and approved, if it asked) goes ahead; any other path is judged
        again: deny refuses, ask refuses too (it was not asked). Searches leave out what is not allowed
        outright, except below a folder the person just approved reading.
        """
        session = self.session_rules(state)
        cleared = {(v.action, v.target) for v in verdicts if v.effect == "allow" or (approved and v.effect == "ask")}
        approved_reads = [v.target for v in verdicts if approved and v.effect == "ask" and v.action == "read"]

        def refusal(action: str, path: str) -> str | None:
            v = self.judge(action, path, has_paths=True, session=session)
            if v.effect == "allow" or (action, v.target) in cleared:
                return None
            if v.effect == "deny":
                return f"Denied: {v.reason}"
            return (f"not approved: {v.reason}; the call reached this path through a symlink or a change on "
                    "disk after it was checked. Call the tool again with this path to ask the user")

        def hidden_by(path: str) -> str | None:
            v = self.judge("read", path, has_paths=True, session=session)
            if v.effect == "allow":
                return None
            if v.effect == "ask" and any(is_under(v.target, d) for d in approved_reads):
                return None
            return v.rule or v.reason

        return PathGuard(refusal, hidden_by)

    def document_guard(self, named: Sequence[str] = ()) -> PathGuard:
        """The rules for files read into the prompt outside a tool call (AGENTS.md, SKILL.md; P5).

        Nobody can be asked there, so the backend refuses a path it would open where a deny applies,
        as named or where a symlink leads, and where an ask applies, except an ask on a path the
        file the workbench itself lists to be read (``named``: the default AGENTS.md files — never a
        path a workspace chose, which could name anything the person's rules ask about).
        """
        listed = {_canonical(p) for p in named}

        def refusal(action: str, path: str) -> str | None:
            v = self.judge(action, path, has_paths=True)
            if v.effect == "allow" or (v.effect == "ask" and v.target in listed):
                return None
            if v.effect == "deny":
                return f"Denied: {v.reason}"
            return f"not read without asking: {v.reason}"

        def hidden_by(path: str) -> str | None:
            v = self.judge("read", path, has_paths=True)
            return None if v.effect == "allow" else (v.rule or v.reason)

        return PathGuard(refusal, hidden_by)

    async def wrap_tool_call(self, call: ToolCall, ctx: ToolContext, call_next: CallTool) -> ToolOutcome | NeedsApproval:
        tool = ctx.tool
        if tool is None:  # validated calls always have one; nothing to judge otherwise
            return await call_next(call, ctx)
        verdicts = self.judge_call(tool, call.arguments or {}, ctx.state)
        verdicts += await self._symlink_verdicts(tool, call.arguments or {}, ctx)
        denied = [v for v in verdicts if v.effect == "deny"]
        if denied:
            return ToolOutcome.error("Denied: " + "; ".join(v.reason for v in denied)
                                     + ". Do not retry this call; the user's rules refuse it.")
        asked = [v for v in verdicts if v.effect == "ask"]
        if asked:
            if ctx.approved:
                scope = self._always.pop((ctx.thread_id, call.id), None)
                if scope is not None:
                    self._remember(asked, scope, ctx)
            else:
                shown = [v for v in asked if not (v.action == "invoke" and v.by_default)] or asked
                shown.sort(key=lambda v: v.action == "invoke")
                # Q3: the question says exactly which rules an "Always" answer would save.
                describe = getattr(tool, "approval_details", None)  # E2: a command's folder and sandbox
                return NeedsApproval("; ".join(v.reason for v in shown), shown[0].rule,
                                     always=tuple(str(r) for r in always_rules(asked)),
                                     details=describe(dict(call.arguments or {})) if callable(describe) else {})
        # The backend judges again what it really opens, while it opens it (P5: no TOCTOU).
        with guarding(self.guard(verdicts, ctx.state, ctx.approved)):
            return await call_next(call, ctx)

    async def on_decision(self, question: Question, decision: dict[str, Any], ctx: HookContext) -> None:
        """An approval with ``always`` ("session" or "project") becomes allow rules (P3).

        The rules are written when the approved call comes back through ``wrap_tool_call``, where its
        tool and (possibly edited) arguments are known, so they cover exactly what asked.
        """
        if question.kind != "tool_approval" or not question.call_id or "task_id" in question.payload:
            # D9: a sub-agent's question passed up by delegation; the sub-agent's own stack keeps its rule
            return
        if decision.get("decision") not in ("approve", "edit"):
            return
        scope = decision.get("always")
        if scope is True:
            scope = "session"
        if scope in ("session", "project", "user"):
            self._always[(ctx.thread_id, question.call_id)] = str(scope)

    async def on_run_end(self, status: str, ctx: HookContext) -> None:
        for key in [k for k in self._always if k[0] == ctx.thread_id]:
            self._always.pop(key, None)

    # -------------------------------------------------------------------------------------- always

    def _remember(self, asked: Sequence[Verdict], scope: str, ctx: HookContext) -> None:
        new = always_rules(asked)
        # Only the rules this account sealed are kept: a forged one in the state is dropped here too.
        current = [sealed_rule_dict(r) for r in state_session_rules(ctx.get(SESSION_KEY))]
        seen = {(d["action"], d["pattern"]) for d in current}
        try:
            for r in new:
                if (r.action, r.pattern) not in seen:
                    current.append(sealed_rule_dict(PermissionRule("allow", r.action, r.pattern, line=0)))
                    seen.add((r.action, r.pattern))
        except SealError as e:  # the approval stands for this call; the rule cannot be kept
            log.warning("the 'always' rule is not kept: %s", e)
        ctx.write(SESSION_KEY, current)
        if scope not in ("project", "user"):
            return
        target = self.project_config if scope == "project" else self.user_config
        if target is None:
            what = "workbench.yaml" if scope == "project" else "user rules file"
            log.warning("no %s to save the 'always' rule to; it is kept for this session", what)
            return
        was_trusted = scope == "project" and _trusted(target)
        try:
            # The user file gets exactly the new rules, never the workspace defaults as a seed.
            lines = append_rules_to_config(target, new, seed=scope == "project", note=always_note(scope))
        except (OSError, ConfigError, yaml.YAMLError) as e:
            log.warning("could not save the permission rule to %s: %s; it is kept for this session", target, e)
            return
        if was_trusted:
            # The person's own rule must not make their trusted workspace ask for trust again (W1); a
            # workspace with untrusted settings stays untrusted (this would trust those too).
            _retrust(target)
        kept = self.rules if scope == "project" else self.user_rules
        for r, line in zip(new, lines):
            kept.append(PermissionRule(effect=r.effect, action=r.action, pattern=r.pattern, line=line))


def _trusted(config_file: Path) -> bool:
    """Whether the workspace of ``config_file`` is trusted now (or asks for nothing), per the user's record."""
    from workbench import trust
    from workbench.config import load_config

    try:
        return trust.is_trusted(config_file.parent, load_config(config_file.parent))
    except (OSError, ConfigError):
        return False


def _retrust(config_file: Path) -> None:
    from workbench import trust
    from workbench.config import load_config

    try:
        trust.trust(config_file.parent, load_config(config_file.parent))
    except (OSError, ConfigError) as e:
        log.warning("could not renew the trust of %s after saving a rule: %s", config_file.parent, e)
