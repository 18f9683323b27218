"""Privacy costs as accounting events.

A mechanism states its cost as one of these frozen values, keeping the structure an accountant
needs to compose it tightly: a Gaussian is a :class:`GaussianDP` (composed through its noise
multiplier under zCDP/RDP/PLD), randomized response is a :class:`RandomizedResponseDP` (whose
privacy-loss distribution is known exactly), not merely a generic (ε, δ) pair.

Every event exposes the ``epsilon`` and ``delta`` of one use of the mechanism.
"""

from __future__ import annotations

import math
from typing import ClassVar

import attrs

from dpkit.params import Integer, Real, parameter

__all__ = [
    "ApproximateDP",
    "GaussianDP",
    "PrivacyEvent",
    "PureDP",
    "RandomizedResponseDP",
    "gaussian_delta",
    "gaussian_epsilon",
]

_POSITIVE = Real(low=0.0, low_open=True)
_NON_NEGATIVE = Real(low=0.0)
_DELTA = Real(low=0.0, high=1.0, high_open=True)
_OPEN_DELTA = Real(low=0.0, high=1.0, low_open=True, high_open=True)


class PrivacyEvent:
    """Base of the accounting events; ``epsilon`` and ``delta`` describe a single use."""

    name: ClassVar[str]

    @property
    def epsilon(self) -> float:
        raise NotImplementedError

    @property
    def delta(self) -> float:
        raise NotImplementedError


@attrs.frozen
class PureDP(PrivacyEvent):
    """ε-differential privacy (δ = 0): Dwork, McSherry, Nissim & Smith 2006, Definition 1."""

    name: ClassVar[str] = "pure"
    epsilon: float = parameter(_NON_NEGATIVE, doc="privacy loss ε")  # type: ignore[assignment]

    @property
    def delta(self) -> float:
        return 0.0


@attrs.frozen
class ApproximateDP(PrivacyEvent):
    """(ε, δ)-differential privacy: Dwork & Roth 2014, Definition 2.4."""

    name: ClassVar[str] = "approx"
    epsilon: float = parameter(_NON_NEGATIVE, doc="privacy loss ε")  # type: ignore[assignment]
    delta: float = parameter(_DELTA, doc="failure probability δ")  # type: ignore[assignment]


@attrs.frozen
class RandomizedResponseDP(PrivacyEvent):
    """k-ary randomized response at level ε: pure ε-DP with a known two-point loss distribution.

    The privacy-loss random variable of k-RR takes the values ±ε (and 0 when k > 2), which a
    privacy-loss-distribution accountant composes exactly (Kairouz, Oh & Viswanath 2015).
    """

    name: ClassVar[str] = "rr"
    epsilon: float = parameter(_POSITIVE, doc="privacy loss ε")  # type: ignore[assignment]
    k: int = parameter(Integer(low=2), doc="number of categories", default=2)

    @property
    def delta(self) -> float:
        return 0.0


def _phi(x: float) -> float:
    """Standard normal CDF, accurate in both tails."""
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def gaussian_delta(epsilon: float, noise_multiplier: float) -> float:
    """Exact δ(ε) of the Gaussian mechanism with σ = noise_multiplier · Δ₂.

    Balle & Wang 2018 ("Improving the Gaussian Mechanism for Differential Privacy", Theorem 8):
    δ(ε) = Φ(Δ/(2σ) − εσ/Δ) − e^ε Φ(−Δ/(2σ) − εσ/Δ), written with μ = Δ/σ = 1/noise_multiplier.
    """
    mu = 1.0 / noise_multiplier
    a = _phi(mu / 2.0 - epsilon / mu)
    log_b = epsilon + math.log(max(_phi(-mu / 2.0 - epsilon / mu), 1e-320))
    return max(0.0, a - math.exp(log_b)) if log_b < 700 else 0.0


def gaussian_epsilon(delta: float, noise_multiplier: float) -> float:
    """The smallest ε with δ(ε) ≤ δ for the Gaussian mechanism (bisection on the exact curve)."""
    if gaussian_delta(0.0, noise_multiplier) <= delta:
        return 0.0
    lo, hi = 0.0, 1.0
    while gaussian_delta(hi, noise_multiplier) > delta:
        lo, hi = hi, hi * 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if gaussian_delta(mid, noise_multiplier) > delta:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * hi:
            break
    return hi


@attrs.frozen
class GaussianDP(PrivacyEvent):
    """The Gaussian mechanism with noise multiplier σ/Δ₂, with the δ at which ε is reported.

    Accountants compose it through ``noise_multiplier`` (zCDP ρ = 1/(2·nm²), Bun & Steinke 2016,
    Proposition 1.6). ``epsilon`` is the exact ε at ``delta`` from the analytic curve of Balle &
    Wang 2018, so it is never larger than a classic-calibration ε.
    """

    name: ClassVar[str] = "gaussian"
    noise_multiplier: float = parameter(_POSITIVE, doc="σ / Δ₂")
    delta: float = parameter(_OPEN_DELTA, doc="δ at which ε is reported")  # type: ignore[assignment]

    @property
    def epsilon(self) -> float:
        return gaussian_epsilon(self.delta, self.noise_multiplier)
