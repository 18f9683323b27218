"""The private phase is total over values: a number whose conversion raises is missing, never an
error.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from dpkit_central import Sum

import dpkit


class _RaisingFloat(float):
    def __float__(self) -> float:
        raise RuntimeError("SECRET")


@pytest.mark.parametrize("rng", [None, np.random.default_rng(1)], ids=["secure", "fast"])
def test_numbers_whose_conversion_raises_are_missing(rng: Any) -> None:
    session = dpkit.Session(budget=(10.0, 0.0), ledger=":memory:")
    data = np.array([1.0, _RaisingFloat(2.0), 3.0], dtype=object)
    session.release(Sum(lower=0, upper=10, epsilon=1.0), data, rng=rng)
    session.release(dpkit.mechanism("krr", epsilon=1.0, k=3), data, rng=rng)
