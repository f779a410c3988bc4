"""R5, B1, W1: usage read back from the store is a file in the workspace's ``.workbench`` folder, which
may have come with the folder. Whatever it holds, what is read adds up and never lets a budget see less
than nothing spent (a stored cost of -1000 USD would have let a session budget pass 1000 USD more)."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from workbench.engine.usage import Usage

FIELDS = ("input_tokens", "output_tokens", "thoughts_tokens", "cached_tokens", "cost_usd", "calls",
          "unpriced_calls")
odd = st.one_of(st.none(), st.booleans(), st.integers(-10**12, 10**12), st.floats(allow_nan=True),
                st.text(max_size=5), st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=2),
                                                                                         st.integers(), max_size=2))


@given(st.dictionaries(st.sampled_from(FIELDS + ("total_tokens", "other")), odd))
def test_stored_usage_of_any_shape_reads_as_non_negative_finite_figures(data):
    usage = Usage.from_dict(data)
    for name in FIELDS:
        value = getattr(usage, name)
        if name == "cost_usd" and value is None:
            continue
        assert isinstance(value, (int, float)) and not isinstance(value, bool)
        assert math.isfinite(value) and value >= 0, (name, value)
    assert (usage + usage).total_tokens == 2 * usage.total_tokens  # adds up without raising


@given(st.builds(Usage, st.integers(0, 10**9), st.integers(0, 10**9), st.integers(0, 10**9),
                 st.integers(0, 10**9), st.one_of(st.none(), st.floats(0, 1e6)), st.integers(0, 10**6),
                 st.integers(0, 10**6)))
def test_real_usage_round_trips(usage):
    assert Usage.from_dict(usage.to_dict()) == usage


def test_a_negative_stored_cost_counts_as_unpriced_and_negative_tokens_as_zero():
    usage = Usage.from_dict({"cost_usd": -1000.0, "input_tokens": -5_000_000, "calls": 3})
    assert usage.cost_usd is None and usage.input_tokens == 0 and usage.calls == 3
    assert Usage.from_dict(["not", "a", "mapping"]) == Usage()  # type: ignore[arg-type]
