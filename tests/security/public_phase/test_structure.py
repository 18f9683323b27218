"""The public phase judges Python inputs by their structure, never by their values."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from dpkit_central import Histogram, Sum

import dpkit


@pytest.mark.parametrize(
    "make, pairs",
    [
        (lambda: Sum(lower=0, upper=10, epsilon=0.25), ([1, 2, 3], [1, "x", 3], [1, [2, 3], 3])),
        (lambda: dpkit.mechanism("krr", epsilon=0.25, k=3), ([True, False], [True, 2], [0, "z"])),
        (
            lambda: Histogram(categories=("a", "b"), epsilon=0.25),
            (["a", "b"], ["a", 7], ["a", None]),
        ),
    ],
)
def test_python_lists_are_judged_by_structure_not_values(make: Any, pairs: Any) -> None:
    """Whether a Python list holds a text, a bool or a nested list is a value: neighbouring
    lists must all be released and charged alike (a refusal would be a free answer)."""
    session = dpkit.Session(budget=(10.0, 0.0), ledger=":memory:")
    for data in pairs:
        session.release(make(), data, rng=np.random.default_rng(0))
    assert session.spent.epsilon == Fraction(len(pairs), 4)
