"""Advanced composition of (ε, δ)-DP mechanisms: Dwork–Rothblum–Vadhan and Kairouz–Oh–Viswanath.

All three bounds hold for adaptive composition of arbitrary (ε_i, δ_i)-DP mechanisms.

* :func:`drv_epsilon` — Dwork, Rothblum & Vadhan 2010, Theorem III.3 (Dwork & Roth 2014,
  Theorem 3.20): k-fold (ε, δ)-DP is (ε', kδ + δ')-DP with
  ε' = sqrt(2k ln(1/δ'))·ε + k·ε·(e^ε − 1).
* :func:`kov_epsilon` — Kairouz, Oh & Viswanath 2015 ("The Composition Theorem for Differential
  Privacy"), Theorem 3.5 (heterogeneous closed form): with S₁ = Σ ε_i, S₂ = Σ ε_i²,
  T = Σ ε_i(e^{ε_i} − 1)/(e^{ε_i} + 1), the composition is (ε̃, 1 − (1 − δ̃) Π(1 − δ_i))-DP for
  ε̃ = min{S₁, T + sqrt(2 S₂ ln(e + sqrt(S₂)/δ̃)), T + sqrt(2 S₂ ln(1/δ̃))}.
* :func:`kov_optimal_delta` / :func:`kov_optimal_epsilon` — KOV 2015, Theorem 3.3 (optimal,
  homogeneous): k-fold (ε, δ)-DP is exactly as private as k-fold binary randomized response
  with an extra δ, so it is (ε', 1 − (1 − δ)^k (1 − δ_RR(ε')))-DP with, for p = e^ε/(1 + e^ε),
  δ_RR(ε') = Σ_{l=0}^{k} C(k, l) p^{k−l} (1 − p)^l (1 − e^{ε' − (k − 2l)ε})₊,
  which at ε' = (k − 2i)ε is KOV's δ_i. No composition bound is smaller.
"""

from __future__ import annotations

import math
from collections import defaultdict
from fractions import Fraction
from typing import Any

import numpy as np

from dpkit.accounting._common import Bound, Events, NotApplicable, check_delta, normalise
from dpkit.accounting.basic import event_cost
from dpkit.errors import InvalidParameter
from dpkit.privacy import GaussianDP, SubsampledDP, flatten

__all__ = [
    "compose_advanced",
    "drv_epsilon",
    "kov_epsilon",
    "kov_optimal_delta",
    "kov_optimal_epsilon",
]


def drv_epsilon(epsilon: float, k: int, delta_prime: float) -> float:
    """ε' = sqrt(2k ln(1/δ'))·ε + k·ε·(e^ε − 1)  (Dwork & Roth 2014, Theorem 3.20)."""
    return math.sqrt(2 * k * math.log(1 / delta_prime)) * epsilon + k * epsilon * math.expm1(
        epsilon
    )


def kov_epsilon(epsilons: list[tuple[float, int]], delta_tilde: float) -> float:
    """KOV 2015 Theorem 3.5 for ε_i repeated k_i times, at slack δ̃ (see the module docstring)."""
    s1 = math.fsum(e * k for e, k in epsilons)
    s2 = math.fsum(e * e * k for e, k in epsilons)
    t = math.fsum(e * math.tanh(e / 2) * k for e, k in epsilons)  # (e^ε−1)/(e^ε+1) = tanh(ε/2)
    return min(
        s1,
        t + math.sqrt(2 * s2 * math.log(math.e + math.sqrt(s2) / delta_tilde)),
        t + math.sqrt(2 * s2 * math.log(1 / delta_tilde)),
    )


def _log_binomials(k: int) -> np.ndarray:
    log_factorial = np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, k + 1, dtype=float)))])
    row: np.ndarray = log_factorial[k] - log_factorial - log_factorial[::-1]
    return row


def kov_optimal_delta(epsilon_prime: float, epsilon: float, k: int) -> float:
    """δ_RR(ε') of k-fold ε-randomized response (KOV 2015, Theorem 3.3), in log space."""
    flips = np.arange(k + 1, dtype=float)
    loss = (k - 2 * flips) * epsilon
    keep = loss > epsilon_prime
    if not keep.any():
        return 0.0
    log_p = -math.log1p(math.exp(-epsilon))
    log_q = -math.log1p(math.exp(epsilon)) if epsilon < 700 else -epsilon
    log_terms = (
        _log_binomials(k)[keep]
        + (k - flips[keep]) * log_p
        + flips[keep] * log_q
        + np.log(-np.expm1(epsilon_prime - loss[keep]))
    )
    top = log_terms.max()
    return float(math.exp(top) * np.exp(log_terms - top).sum())


def kov_optimal_epsilon(epsilon: float, k: int, delta: float, *, delta0: float = 0.0) -> float:
    """The smallest ε' at which k-fold (ε, δ0)-DP is (ε', delta)-DP (KOV 2015, Theorem 3.3)."""
    # 1 − (1 − δ0)^k (1 − δ_RR) ≤ delta  ⇔  δ_RR ≤ 1 − (1 − delta)/(1 − δ0)^k
    budget = -math.expm1(math.log1p(-delta) - k * math.log1p(-delta0))
    if budget <= 0:
        raise InvalidParameter(
            "delta", delta, f"greater than 1 − (1 − δ)^k = {-math.expm1(k * math.log1p(-delta0))}"
        )
    lo, hi = 0.0, k * epsilon
    if kov_optimal_delta(0.0, epsilon, k) <= budget:
        return 0.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if kov_optimal_delta(mid, epsilon, k) > budget:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-13 * max(hi, 1e-300):
            break
    return hi


def compose_advanced(events: Events | Any, *, delta: float) -> Bound:
    """The smallest of the DRV, KOV closed-form and (homogeneous) KOV optimal bounds at ``delta``.

    Applies to events with a fixed (ε, δ) (pure, Laplace, randomized response, approximate
    and their subsampled versions); basic composition Σε is one of KOV's three terms, so the
    result is never worse than basic.
    """
    target = check_delta(delta, owner="compose_advanced")
    groups: dict[tuple[Fraction, Fraction], int] = defaultdict(int)
    for whole, count in normalise(events):
        for event in flatten(whole):
            inner = event.event if isinstance(event, SubsampledDP) else event
            if isinstance(inner, GaussianDP):
                raise NotApplicable("advanced", event, "compose Gaussians with zcdp, rdp or pld")
            groups[event_cost(event)] += count
    if not groups:
        return Bound(epsilon=0.0, delta=0.0, method="advanced", detail={"bound": "empty"})
    log_keep = math.fsum(k * math.log1p(-float(d)) for (_, d), k in groups.items())
    spent = -math.expm1(log_keep)  # 1 − Π(1 − δ_i)
    if spent >= target:
        raise InvalidParameter(
            "delta", delta, f"greater than the events' own δ (1 − Π(1 − δ_i) = {spent})"
        )
    candidates: dict[str, float] = {}
    delta_tilde = -math.expm1(math.log1p(-target) - log_keep)
    candidates["kov-closed-form"] = kov_epsilon(
        [(float(e), k) for (e, _), k in groups.items()], delta_tilde
    )
    if len(groups) == 1:
        ((eps_f, d_f), k) = next(iter(groups.items()))
        eps, d0 = float(eps_f), float(d_f)
        delta_prime = target - k * d0
        if delta_prime > 0 and eps <= 700:  # e^ε must be a float (ln of the largest ≈ 709.78)
            candidates["drv"] = drv_epsilon(eps, k, delta_prime)
        if 0 < eps <= 700:
            candidates["kov-optimal"] = kov_optimal_epsilon(eps, k, target, delta0=d0)
    best = min(candidates, key=lambda name: candidates[name])
    return Bound(
        epsilon=candidates[best],
        delta=target,
        method="advanced",
        detail={"bound": best, "bounds": candidates},
    )
