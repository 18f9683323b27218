"""olh and hr in secure mode lie with a probability at or above the exact one (realised ε ≤ ε).

A float lie probability (g − 1)/(e^ε + g − 1) can land below the exact value; the float
comparison then realises an ε slightly above the claim (found for 724 of 2000 ε values in
0.0025..5 for olh). The check is exact: the threshold used is compared with the lie
probability computed in 60-digit decimal arithmetic from the double ε.
"""

from __future__ import annotations

import decimal
from typing import Any

import numpy as np
import pytest

import dpkit

EPSILONS = [0.0025 * i for i in range(1, 2001, 37)]


def exact_lie(epsilon: float, g: int) -> decimal.Decimal:
    context = decimal.Context(prec=60)
    odds = context.exp(decimal.Decimal(epsilon))
    return context.divide(decimal.Decimal(g - 1), context.add(odds, decimal.Decimal(g - 1)))


class RecordingRandom(dpkit.SecureRandom):
    """A secure generator that records the Bernoulli thresholds it is asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.thresholds: list[int] = []

    def bernoulli_threshold(self, threshold: int, size: Any = None) -> Any:
        self.thresholds.append(threshold)
        return super().bernoulli_threshold(threshold, size)


@pytest.mark.parametrize("epsilon", EPSILONS)
@pytest.mark.parametrize("name", ["olh", "hr"])
def test_secure_lie_probability_is_rounded_up(name: str, epsilon: float) -> None:
    mechanism = dpkit.mechanism(name, epsilon=epsilon, k=8)
    g = mechanism.range if name == "olh" else 2
    rng = RecordingRandom()
    mechanism.randomize(np.arange(8), rng=rng)
    assert rng.thresholds, "the secure path drew no thresholded Bernoulli"
    lie = decimal.Decimal(rng.thresholds[-1]) / decimal.Decimal(2**64)
    assert lie >= exact_lie(epsilon, g)
    assert lie - exact_lie(epsilon, g) < decimal.Decimal(2) / decimal.Decimal(2**64)
