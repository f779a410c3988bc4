"""Token and cost usage that adds up (R5)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Usage:
    """Usage of one model call, or a sum of many.

    ``cost_usd`` is None when no call in the sum was priced; ``unpriced_calls`` counts calls whose
    model litellm could not price, so the UI can say "tokens only".
    """

    input_tokens: int = 0
    output_tokens: int = 0
    thoughts_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float | None = None
    calls: int = 0
    unpriced_calls: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens + self.thoughts_tokens

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        if self.cost_usd is None and other.cost_usd is None:
            cost = None
        else:
            cost = (self.cost_usd or 0.0) + (other.cost_usd or 0.0)
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            thoughts_tokens=self.thoughts_tokens + other.thoughts_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
            cost_usd=cost,
            calls=self.calls + other.calls,
            unpriced_calls=self.unpriced_calls + other.unpriced_calls,
        )

    @classmethod
    def total(cls, usages: Iterable[Usage]) -> Usage:
        """The sum of ``usages`` (nothing: zero). One usage is itself, not a copy: the engine sums a step's
        one call several times a step."""
        out: Usage | None = None
        for usage in usages:
            out = usage if out is None else out + usage
        return out if out is not None else cls()

    def as_call(self) -> Usage:
        """This usage as one model call's (R5): a provider that reported no call count made one."""
        if self.calls:
            return self
        from dataclasses import replace

        return replace(self, calls=1)

    def to_dict(self) -> dict[str, Any]:
        # Spelled out: dataclasses.asdict deep-copies and is ~10x slower on this hot path (per event).
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "thoughts_tokens": self.thoughts_tokens,
            "cached_tokens": self.cached_tokens,
            "cost_usd": self.cost_usd,
            "calls": self.calls,
            "unpriced_calls": self.unpriced_calls,
            "total_tokens": self.total_tokens,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Usage:
        """Usage as stored. Stored usage is read from a file in the workspace (the thread store, which
        may have come with the folder), so each figure must be a finite number at or above zero: a
        negative or odd one counts as 0 (a budget must never see less spent than nothing), and a
        missing or odd ``cost_usd`` as unpriced."""
        if not data or not isinstance(data, Mapping):
            return cls()
        out: dict[str, Any] = {}
        for name in _INT_FIELDS:
            value = data.get(name)
            if value is not None:  # an int at or above 0, the stored case, as it is
                out[name] = value if type(value) is int and value >= 0 else _count(value)
        cost = data.get("cost_usd")
        if cost is not None:
            out["cost_usd"] = float(cost) if _number(cost) and cost >= 0 else None
        return cls(**out)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _count(value: Any) -> int:
    return int(value) if _number(value) and value > 0 else 0


_INT_FIELDS = ("input_tokens", "output_tokens", "thoughts_tokens", "cached_tokens", "calls", "unpriced_calls")
