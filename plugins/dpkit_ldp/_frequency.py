"""Debiasing for "pure" frequency oracles, shared by the LDP estimators.

Wang, Blocki, Li & Jha 2017, "Locally Differentially Private Protocols for Frequency
Estimation" (USENIX Security), Section 3, Theorem 2: if a report supports the user's true value
with probability p* and any other given value with probability q*, then with C_v the number of
the n reports that support v,

    ĉ_v = (C_v − n q*) / (p* − q*)

is unbiased for the true count n_v, and, since the supports are independent Bernoullis,

    Var[ĉ_v] = n q*(1 − q*) / (p* − q*)²  +  n_v (1 − p* − q*) / (p* − q*)      (exact).

The variance depends on the unknown n_v; estimates report it with n_v replaced by the estimate
clipped to [0, n] (the plug-in estimator), which is consistent.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray


def debiased_counts(counts: NDArray[np.int64], n: int, p: float, q: float) -> NDArray[np.float64]:
    """ĉ_v = (C_v − n q*) / (p* − q*)."""
    return (counts.astype(np.float64) - n * q) / (p - q)


def count_variance(
    true_counts: NDArray[np.float64], n: int, p: float, q: float
) -> NDArray[np.float64]:
    """Exact Var[ĉ_v] given the true (or plugged-in) counts n_v."""
    base = n * q * (1.0 - q) / (p - q) ** 2
    return base + np.asarray(true_counts, dtype=np.float64) * (1.0 - p - q) / (p - q)


def plug_in_variance(
    estimates: NDArray[np.float64], n: int, p: float, q: float
) -> NDArray[np.float64]:
    """Var[ĉ_v] with n_v replaced by the estimate clipped to [0, n]."""
    return count_variance(np.clip(estimates, 0.0, float(n)), n, p, q)
