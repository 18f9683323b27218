"""Zero-concentrated differential privacy (Bun & Steinke 2016) and its conversion to (ε, δ).

ρ-zCDP means D_α(M(x) ‖ M(x')) ≤ ρα for every α > 1 and neighbours x, x'. ρ adds up under
adaptive composition (Bun & Steinke 2016, Lemma 2.3). Costs:

* pure ε-DP ⇒ (ε²/2)-zCDP (Bun & Steinke 2016, Proposition 3.3);
* the Gaussian mechanism with noise multiplier σ/Δ₂ is 1/(2(σ/Δ₂)²)-zCDP (Proposition 1.6).

ρ-zCDP ⇒ (ε, δ)-DP with the smaller of
ε = ρ + 2 sqrt(ρ ln(1/δ))  (Bun & Steinke 2016, Proposition 1.3) and
ε = inf_{α>1} αρ + ln(1 − 1/α) − (ln δ + ln α)/(α − 1)  (Canonne, Kamath & Steinke 2020,
"The Discrete Gaussian for Differential Privacy", Corollary 13). Every α gives a valid bound,
so minimising over a finite grid is still a valid (slightly larger) ε.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from dpkit.accounting._common import Bound, Events, NotApplicable, check_delta, exact, normalise
from dpkit.privacy import (
    GaussianDP,
    LaplaceDP,
    PrivacyEvent,
    PureDP,
    RandomizedResponseDP,
    SubsampledDP,
)

__all__ = ["compose_zcdp", "event_rho", "zcdp_epsilon", "zcdp_rho_for"]

_ALPHAS = 1.0 + np.geomspace(1e-7, 1e7, 6001)


def event_rho(event: PrivacyEvent) -> Fraction:
    """The exact ρ of one use of ``event``; :class:`NotApplicable` for events with δ > 0."""
    if isinstance(event, (PureDP, LaplaceDP, RandomizedResponseDP)):
        eps = exact(event.epsilon)
        return eps * eps / 2
    if isinstance(event, GaussianDP):
        return 1 / (2 * exact(event.noise_multiplier) ** 2)
    if isinstance(event, SubsampledDP) and isinstance(
        event.event, (PureDP, LaplaceDP, RandomizedResponseDP)
    ):
        # the subsample is pure ln(1 + q(e^ε − 1))-DP (Balle, Barthe & Gaboardi 2018, Theorem 8)
        eps = exact(event.epsilon)
        return eps * eps / 2
    raise NotApplicable("zcdp", event, "zCDP covers pure-DP and Gaussian events")


def _cks_objective(alpha: np.ndarray, rho: float, log_delta: float) -> np.ndarray:
    value: np.ndarray = (
        alpha * rho + np.log1p(-1 / alpha) - (log_delta + np.log(alpha)) / (alpha - 1)
    )
    return value


def zcdp_epsilon(rho: float, delta: float) -> float:
    """The ε at which ρ-zCDP is (ε, δ)-DP (the better of Bun–Steinke and CKS20; module doc)."""
    if rho <= 0:
        return 0.0
    log_delta = math.log(delta)
    values = _cks_objective(_ALPHAS, rho, log_delta)
    i = int(np.argmin(values))
    lo, hi = _ALPHAS[max(i - 1, 0)], _ALPHAS[min(i + 1, len(_ALPHAS) - 1)]
    refined = np.linspace(lo, hi, 201)[1:-1]
    best = min(float(values[i]), float(_cks_objective(refined, rho, log_delta).min()))
    return max(0.0, min(best, rho + 2 * math.sqrt(rho * math.log(1 / delta))))


def zcdp_rho_for(epsilon: float, delta: float) -> float:
    """The largest ρ whose conversion (:func:`zcdp_epsilon`) is at most ``epsilon`` at ``delta``."""
    lo, hi = 0.0, max(epsilon, 1.0)
    while zcdp_epsilon(hi, delta) <= epsilon:
        lo, hi = hi, 2 * hi
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if zcdp_epsilon(mid, delta) <= epsilon:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-14 * hi:
            break
    return lo


def compose_zcdp(events: Events | Any, *, delta: float) -> Bound:
    """Sum the ρ of the events exactly and convert to (ε, δ) at ``delta``."""
    target = check_delta(delta, owner="compose_zcdp")
    rho = sum((event_rho(e) * c for e, c in normalise(events)), Fraction(0))
    if rho > Fraction(1e300):  # beyond a float: no privacy at any δ < 1
        return Bound(epsilon=math.inf, delta=target, method="zcdp", detail={"rho": math.inf})
    return Bound(
        epsilon=zcdp_epsilon(float(rho), target),
        delta=target,
        method="zcdp",
        detail={"rho": float(rho)},
    )
