"""Agent Workbench: run LLM agents by pointing and clicking, and see what they do and spend."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from workbench.session import Session


def __getattr__(name: str) -> Any:
    # Lazy: `import workbench` must stay cheap (the window appears before heavy imports).
    if name == "Session":
        from workbench.session import Session

        return Session
    raise AttributeError(name)


__all__ = ["Session", "__version__"]
