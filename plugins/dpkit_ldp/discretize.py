"""Stochastic discretization of bounded values, and the LDP mean estimate it gives with ``rr``.

A value v ∈ [lower, upper] becomes one bit:

    B = 1 (meaning ``upper``) with probability t = (v − lower)/(upper − lower),  else 0 (``lower``),

so E[lower + (upper − lower)·B] = v: the discretization is unbiased (the same rounding as the
seeds' ``discretization``, vectorised, and refusing out-of-range or NaN values instead of
clipping them). It is not a privacy mechanism by itself; it makes a bounded numeric value fit a
binary one.

**LDP mean.** Perturbing B with binary randomized response (``rr``, keep probability
p = e^ε/(e^ε + 1)) gives an ε-LDP report R per user; this is the one-dimensional mechanism of
Duchi, Jordan & Wainwright 2018 ("Minimax Optimal Procedures for Locally Private Estimation",
JASA 113(521); their privatization of a bounded scalar by one randomized bit) written as
discretize-then-RR. The formulas below are derived here from E[R_i] and Bernoulli variances. With s ones
among n reports and r̂ = s/n:

    t̂ = (r̂ − (1 − p))/(2p − 1),        μ̂ = lower + (upper − lower)·t̂,

unbiased for the mean of the n values, since E[R_i] = (1 − p) + (2p − 1) t_i. The R_i are
independent Bernoulli(r_i), so given the data

    Var[μ̂] = (upper − lower)² Σ_i r_i(1 − r_i) / (n² (2p − 1)²)
            ≤ (upper − lower)² r̄(1 − r̄) / (n (2p − 1)²)  ≤ (upper − lower)² (e^ε + 1)²/(4n (e^ε − 1)²),

with r̄ the mean of the r_i (Jensen). The middle expression, which is exact when the values are an
i.i.d. sample (then the R_i are i.i.d. Bernoulli(r̄)), is what :func:`estimate_mean` reports,
with r̄ estimated by r̂. The bound on the right is the Θ(1/(nε²)) rate of Duchi et al. for small ε.

The registered mechanism ``duchi`` (:mod:`dpkit_ldp.duchi`) is this mechanism with the reports
already debiased, and works with ``dpkit.estimate`` (a :class:`dpkit.plugin.MeanEstimate`), specs and
the advisor; the other numeric protocols (pm, hm, their vector versions, sw) are beside it.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from dpkit.plugin import (
    FrequencyCounts,
    InvalidData,
    InvalidParameter,
    SecureRandom,
    describe_dtype,
    plain,
    resolve_rng,
)
from dpkit_ldp._arrays import as_binary
from dpkit_ldp.randomized_response import RandomizedResponse

__all__ = ["MeanEstimate", "estimate_mean", "stochastic_discretize"]


def _check_bounds(lower: Any, upper: Any, owner: str) -> tuple[float, float]:
    for name, value in (("lower", lower), ("upper", upper)):
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise InvalidParameter(name, value, "a finite real number", owner=owner)
        if not math.isfinite(float(value)):
            raise InvalidParameter(name, value, "a finite real number", owner=owner)
    if not float(lower) < float(upper):
        raise InvalidParameter("upper", upper, f"greater than lower={plain(lower)!r}", owner=owner)
    return float(lower), float(upper)


def stochastic_discretize(
    values: Any,
    /,
    *,
    lower: float,
    upper: float,
    rng: np.random.Generator | SecureRandom | None = None,
) -> NDArray[np.bool_]:
    """One bit per value: ``True`` (= upper) with probability (v − lower)/(upper − lower).

    Values of any shape; NaN or values outside [lower, upper] raise :class:`dpkit.InvalidData`.
    The coin is u < t with u uniform on the 2⁻⁵³ grid, so P[True] is t rounded up to that grid.
    ``rng``: None (secure mode, the default), a :class:`dpkit.SecureRandom`, or a numpy
    ``Generator`` (fast mode).
    """
    owner = "stochastic_discretize"
    generator, _ = resolve_rng(rng, owner=owner)
    lo, hi = _check_bounds(lower, upper, owner)
    array = np.asarray(values)
    numeric = np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)
    if array.size and (array.dtype == np.bool_ or not numeric):
        raise InvalidData(
            f"{owner}: values must be real numbers, got an array of {describe_dtype(array)}",
            field="values",
        )
    x = array.astype(np.float64)
    bad = ~((x >= lo) & (x <= hi))  # NaN fails both comparisons
    if bad.any():
        first = plain(x.flat[int(np.flatnonzero(bad.ravel())[0])])
        raise InvalidData(
            f"{owner}: values contain {first!r}, outside [{lo:g}, {hi:g}] "
            f"({int(np.count_nonzero(bad))} value(s) NaN or out of range); clip or rescale them "
            "explicitly before discretizing",
            field="values",
        )
    t = (x - lo) / (hi - lo)
    coins: NDArray[np.bool_] = generator.random(x.shape) < t
    return coins


@attrs.frozen
class MeanEstimate:
    """An LDP estimate of the mean of bounded values, with its variance (see the module docs)."""

    mean: float
    variance: float
    n: int
    lower: float
    upper: float

    def confidence_interval(self, level: float = 0.95) -> tuple[float, float]:
        """Two-sided normal (Wald) interval ``mean ± z·sqrt(variance)``; not clipped."""
        if not isinstance(level, (int, float)) or not (0.0 < level < 1.0):
            raise InvalidParameter("level", level, "a real number in (0, 1)")
        half = NormalDist().inv_cdf(0.5 + level / 2.0) * math.sqrt(self.variance)
        return self.mean - half, self.mean + half


def estimate_mean(
    reports: Any, /, *, mechanism: RandomizedResponse, lower: float, upper: float
) -> MeanEstimate:
    """μ̂ = lower + (upper − lower)·((s/n) − (1 − p))/(2p − 1) from ``rr`` reports of discretized values.

    ``reports`` are the 0/1 outputs of ``mechanism.randomize`` (or its merged
    :class:`dpkit.plugin.FrequencyCounts`); the variance is (upper − lower)² r̂(1 − r̂)/(n (2p − 1)²).
    """
    owner = "estimate_mean"
    if not isinstance(mechanism, RandomizedResponse):
        raise InvalidParameter("mechanism", mechanism, "an rr mechanism", owner=owner)
    lo, hi = _check_bounds(lower, upper, owner)
    if isinstance(reports, FrequencyCounts):
        if reports.mechanism != mechanism.name or reports.counts.shape != (2,):
            raise InvalidData(f"{owner}: counts are not rr counts", field="reports")
        n, ones = reports.n, int(reports.counts[1])
    else:
        bits = as_binary(reports, owner=owner, field="reports")
        n, ones = bits.size, int(np.count_nonzero(bits))
    if n == 0:
        return MeanEstimate(math.nan, math.nan, 0, lo, hi)
    p = mechanism.keep_probability
    r = ones / n
    width = hi - lo
    mean = lo + width * (r - (1.0 - p)) / (2.0 * p - 1.0)
    variance = width**2 * r * (1.0 - r) / (n * (2.0 * p - 1.0) ** 2)
    return MeanEstimate(mean, variance, n, lo, hi)
