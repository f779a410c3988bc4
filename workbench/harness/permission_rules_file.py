"""Saving "always" rules into a rules file (P3): a targeted edit of ``workbench.yaml``'s
``permissions.rules`` (or the user's ``permissions.yaml``), the rest of the file — comments, order,
other keys — kept as it was. The new text must still load before it is written (atomically).
Used by the permissions middleware ("Always" for this project or everywhere) and the rule builder (Q3).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from workbench.atomic import write_text_atomic
from workbench.config import CONFIG_FILENAME, PermissionRule, default_permission_rules, loaded_mapping, parse_config
from workbench.errors import ConfigError

__all__ = ["append_rules_to_config", "with_rules_added"]

def _rule_yaml(rule: PermissionRule) -> str:
    key = {"invoke": "tool", "execute": "command"}.get(rule.action, "path")
    return f"{{{rule.effect}: {rule.action}, {key}: {json.dumps(rule.pattern)}}}"


def _last_end(node: Node) -> int:
    """Index just after the last character that belongs to ``node`` (block nodes overreach)."""
    if isinstance(node, ScalarNode) or getattr(node, "flow_style", False):
        return node.end_mark.index
    if isinstance(node, MappingNode) and node.value:
        return _last_end(node.value[-1][1])
    if isinstance(node, SequenceNode) and node.value:
        return _last_end(node.value[-1])
    return node.end_mark.index


def _line_end(text: str, index: int) -> int:
    nl = text.find("\n", index)
    return len(text) if nl < 0 else nl


def _is_null(node: Node) -> bool:
    return isinstance(node, ScalarNode) and node.tag == "tag:yaml.org,2002:null"


def _items(rules: Sequence[PermissionRule], indent: int) -> str:
    return "".join("\n" + " " * indent + "- " + _rule_yaml(r) for r in rules)


def _insert_rules(text: str, new: Sequence[PermissionRule], seed_defaults: bool = True) -> str:
    """``text`` with ``new`` appended to ``permissions.rules``; other lines and comments untouched."""
    # In workbench.yaml an absent rules list means the defaults: keep them. Not in the user file.
    seed = list(default_permission_rules()) if seed_defaults else []
    root = yaml.compose(text) if text.strip() else None
    if root is None or (isinstance(root, ScalarNode) and _is_null(root)):
        head = text if not text or text.endswith("\n") else text + "\n"
        return head + "permissions:\n  rules:" + _items(seed + list(new), 4) + "\n"
    if not isinstance(root, MappingNode) or root.flow_style:
        raise ConfigError(f"{CONFIG_FILENAME}: the top level is not a block mapping; add the rule by hand")
    perm_key = next(((k, v) for k, v in root.value if isinstance(k, ScalarNode) and k.value == "permissions"), None)
    if perm_key is None:
        head = text if text.endswith("\n") else text + "\n"
        return head + "permissions:\n  rules:" + _items(seed + list(new), 4) + "\n"
    key, perm = perm_key
    base = key.start_mark.column
    if _is_null(perm):
        start, stop = perm.start_mark.index, perm.end_mark.index
        return text[:start] + "\n" + " " * (base + 2) + "rules:" + _items(seed + list(new), base + 4) + text[stop:]
    if not isinstance(perm, MappingNode) or perm.flow_style:
        raise ConfigError(f"{CONFIG_FILENAME}: 'permissions' is not a block mapping; add the rule by hand")
    rules_kv = next(((k, v) for k, v in perm.value if isinstance(k, ScalarNode) and k.value == "rules"), None)
    inner = perm.value[0][0].start_mark.column if perm.value else base + 2
    if rules_kv is None:
        end = _line_end(text, _last_end(perm))
        return text[:end] + "\n" + " " * inner + "rules:" + _items(seed + list(new), inner + 2) + text[end:]
    rkey, rules = rules_kv
    if isinstance(rules, SequenceNode) and not rules.flow_style and rules.value:
        first = rules.value[0]
        line_start = text.rfind("\n", 0, first.start_mark.index) + 1
        dash = text.rfind("-", line_start, first.start_mark.index)
        indent = dash - line_start if dash >= 0 else rkey.start_mark.column + 2
        end = _line_end(text, _last_end(rules))
        return text[:end] + _items(new, indent) + text[end:]
    if _is_null(rules):
        existing: list[PermissionRule] = seed
    elif isinstance(rules, SequenceNode):
        existing = list(parse_config(text).permissions.rules)
    else:
        raise ConfigError(f"{CONFIG_FILENAME}: 'permissions.rules' is not a list; add the rule by hand")
    start, stop = rules.start_mark.index, rules.end_mark.index
    indent = rkey.start_mark.column + 2
    return text[:start].rstrip(" ") + _items(existing + list(new), indent) + text[stop:]


def with_rules_added(text: str, rules: Sequence[PermissionRule], *, seed: bool = True, note: str = "",
                     source: str = CONFIG_FILENAME) -> tuple[str, list[int]]:
    """``text`` (a workbench.yaml or the user's permissions.yaml) with ``rules`` appended to
    ``permissions.rules``, and each new rule's line. Every other byte is kept: comments, key order,
    quoting and alignment (Q3). ``note`` becomes a trailing ``# note`` on each new rule's line, so the
    file says where a rule came from. The result must load (ConfigError otherwise)."""
    updated = _insert_rules(text, rules, seed)
    loaded = parse_config(updated, source=source).permissions.rules
    lines: list[int] = []
    for r in rules:
        hits = [x for x in loaded if (x.effect, x.action, x.pattern) == (r.effect, r.action, r.pattern)]
        lines.append(hits[-1].line if hits else 0)
    note = " ".join(note.split())  # one line, whatever it was given
    if note:
        rows = updated.split("\n")
        for line in set(lines):
            if line:
                rows[line - 1] = f"{rows[line - 1]}  # {note}"
        updated = "\n".join(rows)
        parse_config(updated, source=source)  # still loads, with the same rules
    _check_only_rules_added(text, updated, rules, seed, source)
    return updated, lines


def _check_only_rules_added(text: str, updated: str, new: Sequence[PermissionRule], seed: bool, source: str) -> None:
    """ConfigError unless ``updated`` means what ``text`` meant with ``new`` after its rules: the edit is
    made on the file's text, and YAML can give a key its value from elsewhere (a ``<<`` merge), where a
    new ``permissions`` block would override it — dropping the person's rules and default."""
    before, after = loaded_mapping(text), loaded_mapping(updated)
    perms_before = before.get("permissions") if isinstance(before.get("permissions"), dict) else {}
    perms_after = after.get("permissions") if isinstance(after.get("permissions"), dict) else {}
    if seed or perms_before.get("rules") is not None:  # what the rules were: the defaults, when seeded
        had = [_key(r) for r in parse_config(text, source=source).permissions.rules] if text.strip() else (
            [_key(r) for r in default_permission_rules()])
    else:
        had = []
    now = [_key(r) for r in parse_config(updated, source=source).permissions.rules]
    same_rest = ({k: v for k, v in before.items() if k != "permissions"} == {k: v for k, v in after.items()
                                                                            if k != "permissions"}
                 and {k: v for k, v in perms_before.items() if k != "rules"} == {k: v for k, v in perms_after.items()
                                                                                  if k != "rules"})
    if now != had + [_key(r) for r in new] or not same_rest:
        raise ConfigError(f"{source}: adding the rule there would change other settings (the file takes "
                          "them from elsewhere, e.g. a YAML merge key '<<'); add the rule by hand")


def _key(rule: PermissionRule) -> tuple[str, str, str]:
    return rule.effect, rule.action, rule.pattern


def append_rules_to_config(path: Path, rules: Sequence[PermissionRule], *, seed: bool = True,
                           note: str = "") -> list[int]:
    """Append rules to ``permissions.rules`` of a workbench.yaml (created when missing).

    The new text must still load (ConfigError otherwise, and the file is left alone); it is written
    atomically. Returns each new rule's line number in the file.
    """
    path = Path(path)
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    updated, lines = with_rules_added(text, rules, seed=seed, note=note, source=str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, updated)
    return lines
