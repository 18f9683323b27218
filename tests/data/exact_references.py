"""Exact reference values computed with numpy and scipy only (no dpkit), shared by the vector
generator (which runs in the peers' virtual environment) and the tests.

* :func:`exact_gaussian`: the ε at δ of μ-GDP, i.e. of k Gaussians with μ = sqrt(Σ k_i/σ_i²)
  (Dong, Roth & Su 2022, Corollary 3.3), solving Balle & Wang's δ(ε) = Φ(μ/2 − ε/μ) −
  e^ε Φ(−μ/2 − ε/μ) with brentq, the second term in log space;
* :func:`exact_rr`: the ε at δ of k-fold binary randomized response at ε₀, the exact value of
  k-fold pure ε₀-DP (Kairouz, Oh & Viswanath 2015, Theorem 3.3), summed over the binomial.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize, special, stats


def exact_gaussian(mu: float, delta: float) -> float:
    def excess(eps: float) -> float:
        log_b = eps + stats.norm.logcdf(-mu / 2 - eps / mu)
        return float(stats.norm.cdf(mu / 2 - eps / mu) - math.exp(log_b) - delta)

    if excess(0.0) <= 0:
        return 0.0
    hi = 1.0
    while excess(hi) > 0:
        hi *= 2
    return float(optimize.brentq(excess, 0.0, hi, xtol=1e-13, rtol=1e-14))


def exact_rr(eps0: float, k: int, delta: float) -> float:
    """The smallest ε with Σ_j C(k,j) p^{k−j}(1−p)^j (1 − e^{ε−(k−2j)ε₀})₊ ≤ δ."""
    j = np.arange(k + 1)
    log_w = special.gammaln(k + 1) - special.gammaln(j + 1) - special.gammaln(k - j + 1)
    log_w = log_w + (k - j) * -math.log1p(math.exp(-eps0)) + j * -math.log1p(math.exp(eps0))
    loss = (k - 2 * j) * eps0

    def excess(e: float) -> float:
        above = loss > e
        return float(np.sum(np.exp(log_w[above]) * -np.expm1(e - loss[above]))) - delta

    if excess(0.0) <= 0:
        return 0.0
    return float(optimize.brentq(excess, 0.0, k * eps0, xtol=1e-13, rtol=1e-14))
