"""The ``Session`` facade's permission-rule calls (Q3: the rule builder; the logic is in
``harness/rule_proposal.py``): what a call touches, a rule for the person's choices, its preview over
every earlier call, and saving it for the session, the workspace or the person. A mixin of ``Session``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.errors import ConfigError

if TYPE_CHECKING:
    from workbench.engine.agent import Engine
    from workbench.engine.store import Store


class RuleCalls:
    """Permission rules from the window's rule builder (see the module)."""

    if TYPE_CHECKING:
        engine: Engine
        store: Store
        workspace: Path

        def middleware(self, kind: type) -> Any: ...

    def _permissions(self) -> Any:
        from workbench.harness.permissions import PermissionsMiddleware

        perms = self.middleware(PermissionsMiddleware)
        if perms is None:
            raise ConfigError("this session has no permission rules to add to")
        return perms

    def rule_subjects(self, tool: str, arguments: Mapping[str, Any]) -> list[tuple[str, str, str]]:
        """What a call touches, ``(action, target, effect now)``: its paths, then the tool."""
        from workbench.harness.permissions import PermissionsMiddleware
        from workbench.harness.rule_proposal import subjects

        return subjects(self.middleware(PermissionsMiddleware), self.engine.agent.tool_map.get(tool), tool, arguments)

    @staticmethod
    def build_rule(effect: str, action: str, target: str, level: str) -> Any:
        """The ``PermissionRule`` for these choices (ValueError names a bad one); see rule_proposal."""
        from workbench.harness.rule_proposal import build_rule

        return build_rule(effect, action, target, level)

    @staticmethod
    def rule_line(rule: Any) -> str:
        """The line a rule is saved as in ``permissions.rules`` (``{allow: write, path: "/project/*"}``)."""
        from workbench.harness.rule_proposal import rule_yaml

        return rule_yaml(rule)

    def rule_files(self) -> dict[str, Path | None]:
        """Where ``save_rule`` writes: ``project`` (workbench.yaml) and ``user`` (permissions.yaml)."""
        perms = self._permissions()
        return {"project": perms.project_config, "user": perms.user_config}

    async def rule_history(self) -> list[Any]:
        """Every tool call in this workspace's threads (``rule_proposal.PastCall``), read off the loop."""
        from workbench.harness.rule_proposal import past_calls

        return await asyncio.to_thread(past_calls, self.store)

    async def preview_rule(self, rule: Any, scope: str = "session", history: list[Any] | None = None) -> list[Any]:
        """The earlier calls ``rule`` matches, each with what the engine does now and would do once the
        rule is saved to ``scope`` (``rule_proposal.PreviewEntry``); judged off the loop."""
        from workbench.harness.rule_proposal import preview

        calls = history if history is not None else await self.rule_history()
        return await asyncio.to_thread(preview, self._permissions(), rule, scope, calls,
                                       dict(self.engine.agent.tool_map))

    async def save_rule(self, rule: Any, scope: str) -> Any:
        """Keep ``rule`` for this session, in the project's workbench.yaml or the user's permissions.yaml
        (comments kept; the person's trust kept, W1); it counts from the next call. ConfigError names a
        file that can't be changed."""
        from workbench.harness.rule_proposal import save_rule

        perms = self._permissions()
        if scope == "session":
            return save_rule(perms, rule, scope, workspace=self.workspace)
        return await asyncio.to_thread(save_rule, perms, rule, scope, workspace=self.workspace)
