"""Intervals for the two central statistics that are not answer + noise: the mean and the
quantile, computed after the release from public quantities and the released values only
(post-processing: they cost nothing and read no data).

**Mean** (:class:`MeanInterval`). The release is m + S̃/max(C̃, 1) clamped to [L, U], with
S̃ = S + Z_S the noisy centred sum and C̃ = C + Z_C the noisy count (both released). Each
noise has exact quantiles (:class:`~dpkit_central._noise.AdditiveNoise`): at level 1 − α/2,
P[|Z_S| ≤ h_S] ≥ 1 − α/2 and P[|Z_C| ≤ h_C] ≥ 1 − α/2, so both hold together with probability
≥ 1 − α (Bonferroni's inequality, P[A ∩ B] ≥ 1 − P[Aᶜ] − P[Bᶜ]). On that event the exact
(S, C) lies in the box [S̃ − h_S, S̃ + h_S] × [max(C̃ − h_C, 1), C̃ + h_C] (a group with a
mean has C ≥ 1), and S/C, monotone in each coordinate on c > 0, lies between the box's corner
ratios. The exact mean of the clamped values is m + S/C up to the fixed-point rounding of the
centred values (at most g/2 each, so g/2 on the mean), and lies in [L, U]; the interval is
therefore

    [max(L, m + min corner − g/2), min(U, m + max corner + g/2)],

and covers the exact mean with probability ≥ 1 − α whatever the data (for a group with at
least one record; where the box holds no count ≥ 1 the interval is all of [L, U]). It is a
frequentist bound on the mean of the data as they are (the privacy noise only), like the
other central intervals.

**Quantile** (:class:`RankInterval`). The exponential mechanism's guarantee is in ranks: with
probability ≥ 1 − α the released lattice point's rank utility is within
t = (2/ε)(ln m + ln(1/α)) of the best a lattice point reaches (Dwork & Roth 2014, Theorem
3.11, Δu = 1, m lattice points; Smith 2011's utility −|rank − q·n|). Turning ranks into values
needs the data's distribution around the quantile, which is private, so no interval in the
value's units follows from public quantities: the interval given is this rank interval, and
the value bounds are None (and NaN in tables).
"""

from __future__ import annotations

import math
from typing import Any, Protocol

import attrs
import numpy as np
from numpy.typing import NDArray

from dpkit.plugin import interval
from dpkit_central._noise import AdditiveNoise
from dpkit_central.exponential import utility_guarantee

__all__ = ["MEAN_INTERVAL", "MeanInterval", "RankInterval", "interval_document"]

#: How a mean's interval is computed, as its result document says.
MEAN_INTERVAL = (
    "noisy centred sum over noisy count: the ratio's range over both noises' exact "
    "intervals at level 1 − α/2 each (union bound), clamped to the bounds"
)


@attrs.frozen
class MeanInterval:
    """A mean's interval from its released noisy centred sums and counts (module docstring).

    Attributes:
        lower: L, the lower clamping bound.
        upper: U, the upper clamping bound.
        step: g, the fixed point the centred values were rounded to before summing (0: none).
        sum_noise: the noise added to each centred sum.
        count_noise: the noise added to each count.
    """

    lower: float
    upper: float
    step: float
    sum_noise: AdditiveNoise
    count_noise: AdditiveNoise
    unit: str = "value"

    def method(self, level: float) -> str:
        return MEAN_INTERVAL

    def bounds(
        self, noisy_sum: Any, noisy_count: Any, level: float
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """(lower, upper) per group at ``level`` from the released S̃ and C̃ (any shape)."""
        part = 1.0 - (1.0 - level) / 2.0
        h_sum = self.sum_noise.half_width(part)
        h_count = self.count_noise.half_width(part)
        s = np.asarray(noisy_sum, dtype=np.float64)
        c = np.asarray(noisy_count, dtype=np.float64)
        s_lo, s_hi = s - h_sum, s + h_sum
        c_lo, c_hi = np.maximum(c - h_count, 1.0), c + h_count
        empty = c_hi < c_lo  # no count ≥ 1 in the box
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            low_ratio = np.where(s_lo < 0.0, s_lo / c_lo, s_lo / c_hi)
            high_ratio = np.where(s_hi < 0.0, s_hi / c_hi, s_hi / c_lo)
        middle = 0.5 * (self.lower + self.upper)
        low = np.clip(middle + low_ratio - self.step / 2.0, self.lower, self.upper)
        high = np.clip(middle + high_ratio + self.step / 2.0, self.lower, self.upper)
        low = np.where(empty | np.isnan(low), self.lower, low)
        high = np.where(empty | np.isnan(high), self.upper, high)
        return low, high


@attrs.frozen
class RankInterval:
    """A quantile's rank interval: ± :meth:`half_width` ranks around the best rank, at a level.

    Attributes:
        epsilon: the ε of each group's exponential mechanism.
        candidates: m, the number of lattice points it chooses among.
        q: the quantile level.
    """

    epsilon: float
    candidates: int
    q: float
    unit: str = "ranks"

    def half_width(self, level: float) -> float:
        """t = (2/ε)(ln m + ln(1/(1 − level))) (Dwork & Roth 2014, Theorem 3.11, Δu = 1)."""
        return utility_guarantee(
            epsilon=self.epsilon,
            sensitivity=1.0,
            candidates=self.candidates,
            t=math.log(1.0 / (1.0 - level)),
        )

    def method(self, level: float) -> str:
        """What the interval says, in words, at ``level``."""
        return (
            f"exponential mechanism's rank guarantee: the released value's rank is within "
            f"±{self.half_width(level):.4g} of the best rank a lattice point reaches (q·n at "
            "best) with the stated probability; no interval in the value's units follows from "
            "public quantities"
        )


class _Interval(Protocol):
    def confidence_interval(self, level: float = 0.95) -> tuple[Any, Any] | None: ...
    def rank_half_width(self, level: float = 0.95) -> float | None: ...
    def interval_method(self, level: float = 0.95) -> str: ...


def interval_document(result: _Interval, level: float) -> dict[str, Any] | None:
    """A release's interval in its result document at ``level``, with its method; a
    quantile's gives its rank half-width (``unit: "ranks"``) and no value bounds."""
    ranks = result.rank_half_width(level)
    if ranks is not None:
        return {
            "level": level,
            "lower": None,
            "upper": None,
            "unit": "ranks",
            "half_width": ranks,
            "method": result.interval_method(level),
        }
    return interval(result.confidence_interval(level), level, result.interval_method(level))
