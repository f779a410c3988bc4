"""Budget amounts in words (G11), shared by the hold dialog, the Budget panel and the CLI prompt, so a
hold reads the same everywhere: "allow 300 more tokens", "$0.0100 more", "until 600 tokens".

Pure functions over a ``budget_hold`` payload (``harness/budget.py``: absolute ``spent`` and ``limit``
per field, ``configured`` limits); no Qt, no engine objects.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_KINDS = {"input_tokens": "input tokens", "output_tokens": "output tokens", "thoughts_tokens": "reasoning tokens",
          "total_tokens": "tokens"}


def format_amount(field: str, value: float | None) -> str:
    """Tokens as ``12,345``, cost as ``$0.0123`` (``$1.23`` from a dollar), counters as plain numbers."""
    if value is None:
        return "n/a"
    v = float(value)
    if field == "cost_usd":
        return f"${v:,.2f}" if abs(v) >= 1 else f"${v:.4f}"
    if v.is_integer():
        return f"{int(v):,}"
    return f"{v:,.2f}"


def amount_words(field: str, value: float) -> str:
    """``600 tokens``, ``$0.0222``, ``3 searches`` (a custom counter is named as it is)."""
    if field == "cost_usd":
        return format_amount(field, value)
    return f"{format_amount(field, value)} {_KINDS.get(field, field)}"


def more_words(field: str, amount: float) -> str:
    """``300 more tokens`` / ``$0.0100 more`` / ``2 more searches``."""
    if field == "cost_usd":
        return f"{format_amount(field, amount)} more"
    return f"{format_amount(field, amount)} more {_KINDS.get(field, field)}"


def hold_fields(payload: Mapping[str, Any]) -> list[tuple[str, float, float, float]]:
    """``(field, spent, limit, configured limit)`` of each field at its limit in a hold, the most spent
    per field across the held budgets. The configured limit is the default amount to allow more (B3)."""
    out: dict[str, tuple[float, float, float]] = {}
    budgets = [b for b in (payload.get("budgets") or [payload]) if isinstance(b, Mapping)]
    for b in budgets:
        fields = b.get("fields") if isinstance(b.get("fields"), Mapping) else {}
        configured = b.get("configured") if isinstance(b.get("configured"), Mapping) else {}
        for field, v in fields.items():
            if isinstance(v, Mapping) and float(v.get("spent") or 0) >= float(v.get("limit") or 0):
                spent, limit = float(v.get("spent") or 0), float(v.get("limit") or 0)
                cap = float(configured.get(field, limit) or limit)
                old = out.get(str(field))
                out[str(field)] = (max(spent, old[0]), max(limit, old[1]), max(cap, old[2])) if old else (spent, limit, cap)
        field = b.get("field")
        if field and str(field) not in out and b.get("spent") is not None:
            limit = float(b.get("limit") or 0)
            out[str(field)] = (float(b.get("spent") or 0), limit, float(configured.get(field, limit) or limit))
    return [(f, s, lim, cap) for f, (s, lim, cap) in out.items()]


def until_words(spent: Mapping[str, float], amounts: Mapping[str, float]) -> str:
    """``600 tokens (300 spent + 300 more)`` for each field, joined with "; "."""
    return "; ".join(f"{amount_words(f, spent[f] + v)} ({format_amount(f, spent[f])} spent + "
                     f"{format_amount(f, v)} more)" for f, v in amounts.items())
