"""Exact discrete Laplace noise for the per-node graph counts (degrees, k-stars, wedges).

A count c with sensitivity Δ under edge LDP (one bit of a neighbour list changes it by at most
Δ) is released as c + Z, Z ~ DLap(t): P[Z = z] = (1 − α)/(1 + α)·α^|z|, α = e^{−1/t}
(Canonne, Kamath & Steinke 2020, Definition 4; the two-sided geometric mechanism of Ghosh,
Roughgarden & Sundararajan 2012). For two lists that neighbour, the released laws differ by
at most the factor e^{Δ/t}, so t = Δ/ε gives ε-edge LDP; t is rounded *up* to a multiple of
2⁻¹⁶ (more noise, never less privacy) so that the exact sampler
(:func:`dpkit.plugin.discrete_laplace`) takes it as a small rational. The same exact sampler serves
both randomness modes, so fast mode (a numpy ``Generator``) has the same law as secure mode.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpkit.plugin import discrete_laplace
from dpkit.plugin import exact as as_exact

__all__ = ["laplace_scale", "log_norm", "log_pmf", "noise", "noise_variance"]


def laplace_scale(sensitivity: int | Fraction, epsilon: float) -> Fraction:
    """t = Δ/ε, rounded up to a multiple of 2⁻¹⁶, with ε at the smaller of its two readings
    (binary value, shortest decimal): the ledger charges the decimal (:func:`dpkit.plugin.exact`),
    which can lie below the binary value, and the realised Δ/t must not exceed it."""
    exact = Fraction(sensitivity) / min(Fraction(epsilon), as_exact(epsilon))
    return Fraction(math.ceil(exact * (1 << 16)), 1 << 16)


def _alpha(scale: Fraction) -> float:
    return math.exp(-1.0 / float(scale))


def noise_variance(scale: Fraction) -> float:
    """Var Z = 2α/(1 − α)² (ibid.)."""
    a = _alpha(scale)
    return 2.0 * a / (1.0 - a) ** 2


def noise(scale: Fraction, size: int, generator: Any) -> NDArray[np.int64]:
    """``size`` draws of Z, exactly."""
    return np.asarray(discrete_laplace(scale, size=size, rng=generator), dtype=np.int64)


def log_norm(scale: Fraction) -> float:
    """ln((1 − α)/(1 + α)), as log1p(−α) − log1p(α) (math's logarithms, on the host)."""
    a = _alpha(scale)
    return math.log1p(-a) - math.log1p(a)


def log_pmf(z: Any, scale: Fraction) -> NDArray[np.float64]:
    """ln P[Z = z] = ln((1 − α)/(1 + α)) − |z|/t."""
    offsets = np.abs(np.asarray(z, dtype=np.float64))
    return np.asarray(log_norm(scale) - offsets / float(scale), np.float64)
