"""The noise a release actually added: its distribution, variance and exact interval half-widths.

Secure-mode Laplace and Gaussian releases add *discrete* noise on a lattice of step g whose
scale is slightly larger than the continuous calibration (the lattice sensitivity includes the
rounding), so a release reports the noise of the mode that produced it. Every mechanism that
adds noise offers ``noise_for(rng, coordinates)`` returning an :class:`AdditiveNoise`, and
:class:`~dpkit_central.QueryResult` carries it.
"""

from __future__ import annotations

import math
from fractions import Fraction
from statistics import NormalDist
from typing import Any, Literal

import attrs
import numpy as np

from dpkit.plugin import exact

__all__ = [
    "NOISE_INTERVAL",
    "AdditiveNoise",
    "larger_reading",
    "smaller_reading",
    "symmetric_interval",
]

#: How a central result's interval is computed, as its result document says.
NOISE_INTERVAL = "exact quantiles of the privacy noise (data taken as given)"


def smaller_reading(value: float) -> Fraction:
    """The smaller of a float's two readings, its binary value and its shortest decimal
    (:func:`dpkit.plugin.exact`, the ledger's reading): the ε (or δ) an exact sampler may spend
    (the selections' rates, the secure lattices' scales, the partition thresholds).

    The ledger charges a float ε at its shortest decimal, which can lie below the binary value
    (0.1 by 5.5·10⁻¹⁸); a sampler calibrated at the binary value would then realise more than
    it is charged. The rule is the accountants' (``dpkit._enclosure.decimal_low``): a bound
    that must hold under either reading is kept at the less favourable one.
    """
    return min(Fraction(value), exact(value))


def larger_reading(value: float) -> Fraction:
    """The larger of a float's two readings (:func:`smaller_reading`): a sensitivity Δ, which
    answers may reach at either reading."""
    return max(Fraction(value), exact(value))


NoiseKind = Literal["laplace", "gaussian", "geometric", "discrete_laplace", "discrete_gaussian"]


def _two_sided_geometric_steps(alpha: float, log_alpha: float, level: float) -> int:
    """The smallest integer m ≥ 0 with P[|Z| > m] = 2α^(m+1)/(1 + α) ≤ 1 − level.

    Z has P[Z = z] ∝ α^|z| (the discrete Laplace; Canonne, Kamath & Steinke 2020, Definition 4):
    P[|Z| > m] = 2·(1 − α)/(1 + α)·Σ_{z>m} α^z = 2α^(m+1)/(1 + α). ``log_alpha`` = ln α < 0.
    The float solution is corrected by checking the tail at m − 1 and m in logarithms.
    """
    target = math.log((1.0 - level) * (1.0 + alpha) / 2.0)

    def tail_ok(m: int) -> bool:  # ln P[|Z| > m] ≤ ln(1 − level)
        return (m + 1) * log_alpha <= target

    m = max(0, math.ceil(target / log_alpha - 1.0))
    while not tail_ok(m):
        m += 1
    while m > 0 and tail_ok(m - 1):
        m -= 1
    return m


@attrs.frozen
class AdditiveNoise:
    """The distribution of the noise added to each released answer.

    ``kind`` and its parameters:

    * ``"laplace"`` (fast mode): Lap(b), ``scale`` = b, variance 2b²; P[|Z| > h] = e^(−h/b).
    * ``"gaussian"`` (fast mode): N(0, σ²), ``scale`` = σ.
    * ``"geometric"``: the two-sided geometric on ℤ with α = e^(−1/``scale``) (in answer units,
      ``step`` = 1), variance 2α/(1 − α)².
    * ``"discrete_laplace"`` (secure Laplace): g·Z + r, Z discrete Laplace with
      P[Z = z] ∝ e^(−|z|/t) on ℤ (t = ``steps``, in lattice steps, g = ``step``) and r the
      rounding of the answer to the lattice, |r| ≤ g/2. ``scale`` = g·t, variance
      Var[g·Z] = 2α/(1 − α)²·g² with α = e^(−1/t) (CKS20; the variance of the difference of two
      iid geometrics). The interval half-width is g·(m + 1/2), m the exact tail quantile of Z.
    * ``"discrete_gaussian"`` (secure Gaussian): g·Z + r, Z ~ N_ℤ(0, σ_L²) with σ_L² = ``steps``
      (an integer, lattice units). ``scale`` = g·σ_L; ``variance`` = g²σ_L², an upper bound
      (the variance of N_ℤ(0, σ²) is at most σ², CKS20 Section 2; for σ_L ≥ 16 the two agree
      far below float precision). Half-width g·(σ_L·z + 3/2), z = Φ⁻¹((1 + level)/2): for x ≥ 1,
      e^(−x²/(2σ²)) ≤ ∫_{x−1}^{x} e^(−y²/(2σ²)) dy and the normaliser of N_ℤ is ≥ σ√(2π)(1 − η)
      (Poisson summation, η < 10⁻²¹⁹⁴ at σ ≥ 16), so P[Z ≥ m] ≤ P[Y ≥ m − 1]/(1 − η) for
      Y ~ N(0, σ²) (cf. CKS20's tail bounds); one step covers that shift and half a step the
      rounding r. The result is conservative by about 1.5 steps out of 2²⁷ or more.

    Cite: Canonne, Kamath & Steinke 2020 (CKS20), "The Discrete Gaussian for Differential
    Privacy", NeurIPS.
    """

    kind: NoiseKind
    scale: float
    variance: float
    step: float = 0.0
    steps: float = 0.0

    def describe(self) -> dict[str, Any]:
        """The noise in a result document: its distribution, scale and variance."""
        return {"distribution": self.kind, "scale": self.scale, "variance": self.variance}

    @classmethod
    def laplace(cls, b: float) -> AdditiveNoise:
        return cls("laplace", b, 2.0 * b * b)

    @classmethod
    def gaussian(cls, sigma: float) -> AdditiveNoise:
        return cls("gaussian", sigma, sigma * sigma)

    @classmethod
    def geometric(cls, scale: float) -> AdditiveNoise:
        """Two-sided geometric with α = e^(−1/scale) on the integers."""
        one_minus_alpha = -math.expm1(-1.0 / scale)
        alpha = 1.0 - one_minus_alpha
        return cls("geometric", scale, 2.0 * alpha / one_minus_alpha**2, 1.0, scale)

    @classmethod
    def discrete_laplace(cls, t: float, step: float) -> AdditiveNoise:
        """g·Z with P[Z = z] ∝ e^(−|z|/t): t in lattice steps, g = ``step``."""
        one_minus_alpha = -math.expm1(-1.0 / t)
        alpha = 1.0 - one_minus_alpha
        variance = 2.0 * alpha / one_minus_alpha**2 * step * step
        return cls("discrete_laplace", t * step, variance, step, t)

    @classmethod
    def discrete_gaussian(cls, sigma2_steps: int, step: float) -> AdditiveNoise:
        """g·Z with Z ~ N_ℤ(0, σ_L²), σ_L² = ``sigma2_steps`` (lattice units)."""
        return cls(
            "discrete_gaussian",
            step * math.sqrt(sigma2_steps),
            step * step * float(sigma2_steps),
            step,
            float(sigma2_steps),
        )

    def half_width(self, level: float = 0.95) -> float:
        """h with P[|released − exact answer| ≤ h] ≥ ``level`` (the noise and the lattice rounding)."""
        z = NormalDist().inv_cdf(0.5 + level / 2.0)
        if self.kind == "laplace":
            return self.scale * math.log(1.0 / (1.0 - level))
        if self.kind == "gaussian":
            return self.scale * z
        if self.kind == "discrete_gaussian":
            return self.step * (math.sqrt(self.steps) * z + 1.5)
        alpha = math.exp(-1.0 / self.steps)
        m = _two_sided_geometric_steps(alpha, -1.0 / self.steps, level)
        if self.kind == "geometric":
            return float(m)
        return self.step * (m + 0.5)  # discrete_laplace: plus the rounding to the lattice


def symmetric_interval(value: Any, half: float | None) -> tuple[Any, Any] | None:
    """(value − half, value + half), elementwise (floats for a scalar value); None if no half."""
    if half is None:
        return None
    center = np.asarray(value, dtype=np.float64)
    low, high = center - half, center + half
    return (low.item(), high.item()) if low.ndim == 0 else (low, high)
