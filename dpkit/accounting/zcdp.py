"""Zero-concentrated differential privacy (Bun & Steinke 2016) and its conversion to (ε, δ).

ρ-zCDP means D_α(M(x) ‖ M(x′)) ≤ ρα for every α > 1 and neighbours x, x′. ρ adds up under
adaptive composition (Bun & Steinke 2016, Lemma 2.3). Costs (:func:`event_rho`), each the
smallest ρ known to hold, rounded up to an exact rational:

* the Gaussian mechanism with noise multiplier σ/Δ₂: ρ = 1/(2(σ/Δ₂)²) (Proposition 1.6);
* any pure ε-DP event (randomized response, k-RR, a generic ε-DP mechanism): ρ = ε·tanh(ε/2),
  the KL divergence of binary randomized response. Every ε-DP pair is a post-processing of
  randomized response at ε (Kairouz, Oh & Viswanath 2015, Theorem 2.4), so its Rényi
  divergence is at most RR's, D_α = ln(cosh((α − ½)ε)/cosh(ε/2))/(α − 1) (data processing;
  van Erven & Harremoës 2014, Theorem 9). With t = α − 1, f(t) = ln cosh((t + ½)ε) −
  ln cosh(ε/2) and g(t) = t(t + 1)·ε·tanh(ε/2): f(0) = g(0), f′(0) = ε·tanh(ε/2) = g′(0),
  and f″(t) = ε² sech²((t + ½)ε) ≤ ε² sech²(ε/2) ≤ 2ε·tanh(ε/2) = g″(t) (as x ≤ sinh(2x)/2
  with x = ε/2), so D_α = f/t ≤ g/t = α·ε·tanh(ε/2) for every α > 1, with equality as
  α → 1. This is below Bun & Steinke's ε²/2 (Proposition 3.3) at every ε (tanh x ≤ x);
  Harrison & Manurangsi 2025 ("Exact zCDP Characterizations for Fundamental Differentially
  Private Mechanisms") state the same tight bound for the worst-case ε-DP mechanism;
* the Laplace mechanism at ε: ρ = ε + e^{−ε} − 1, its KL divergence, which Harrison &
  Manurangsi 2025 prove is its exact zCDP parameter (Wang's 2022 conjecture);
* an ε-bounded-range event (exponential mechanism, quantile): ρ = min(ε²/8, ε·tanh(ε/2))
  (Cesar & Rogers 2021, Section 3: ε-BR ⇒ (ε²/8)-zCDP; and it is ε-DP);
* a composite event: the sum of its parts; a subsampled pure event: the pure cost at
  ε′ = ln(1 + q(e^ε − 1)) (Balle, Barthe & Gaboardi 2018, Theorems 8 and 9).

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

from dpkit._enclosure import float_above
from dpkit.accounting._common import (
    Bound,
    Events,
    NotApplicable,
    ceil_decimal,
    check_delta,
    exact,
    normalise,
)
from dpkit.privacy import (
    BoundedRangeDP,
    CompositeDP,
    GaussianDP,
    LaplaceDP,
    PrivacyEvent,
    PureDP,
    RandomizedResponseDP,
    SubsampledDP,
)

__all__ = ["compose_zcdp", "event_rho", "zcdp_epsilon", "zcdp_rho_for"]

_ALPHAS = 1.0 + np.geomspace(1e-7, 1e7, 6001)


def _pure_rho(epsilon: Fraction) -> Fraction:
    """ε·tanh(ε/2), rounded up (module docstring); 0 for ε = 0."""
    if epsilon == 0:
        return Fraction(0)
    eps = float(epsilon)
    return ceil_decimal(eps * math.tanh(eps / 2))


def _laplace_rho(epsilon: Fraction) -> Fraction:
    """ε + e^{−ε} − 1, rounded up. Below ε = 1 the float formula would cancel, so the series
    Σ_{n≥2} (−ε)^n/n! is summed exactly up to a positive term: its terms alternate and
    decrease, so that partial sum is an upper bound."""
    if epsilon >= 1:
        eps = float(epsilon)
        return ceil_decimal(eps + math.expm1(-eps), ulps=16)
    total, term = Fraction(0), Fraction(1)
    for n in range(1, 41):
        term = term * -epsilon / n
        if n >= 2:
            total += term
    return ceil_decimal(total)  # n = 40: the last term added is positive


def event_rho(event: PrivacyEvent) -> Fraction:
    """The exact ρ of one use of ``event`` (module docstring); :class:`NotApplicable` for
    events with δ > 0 and for the subsampled Gaussian (no finite ρ bound is used)."""
    if isinstance(event, CompositeDP):
        return sum((event_rho(part) for part in event.parts), Fraction(0))
    if isinstance(event, GaussianDP):
        return 1 / (2 * exact(event.noise_multiplier) ** 2)
    if isinstance(event, LaplaceDP):
        eps = exact(event.epsilon)
        return min(_laplace_rho(eps), _pure_rho(eps))
    if isinstance(event, BoundedRangeDP):
        eps = exact(event.epsilon)
        return min(eps * eps / 8, _pure_rho(eps))
    if isinstance(event, (PureDP, RandomizedResponseDP)):
        return _pure_rho(exact(event.epsilon))
    if isinstance(event, SubsampledDP) and isinstance(
        event.event, (PureDP, LaplaceDP, RandomizedResponseDP, BoundedRangeDP)
    ):
        return _pure_rho(ceil_decimal(event.epsilon))
    raise NotApplicable("zcdp", event, "zCDP covers pure-DP and Gaussian events")


def _cks_objective(alpha: np.ndarray, rho: float, log_delta: float) -> np.ndarray:
    value: np.ndarray = (
        alpha * rho + np.log1p(-1 / alpha) - (log_delta + np.log(alpha)) / (alpha - 1)
    )
    return value


def zcdp_epsilon(rho: float, delta: float) -> float:
    """The ε at which ρ-zCDP is (ε, δ)-DP (the better of Bun–Steinke and CKS20; module doc),
    moved up by 2⁻⁴⁴ of the magnitudes of the terms it is computed from (about 256 float
    roundings of them), so float rounding never lowers it."""
    if rho <= 0:
        return 0.0
    log_delta = math.log(delta)
    values = _cks_objective(_ALPHAS, rho, log_delta)
    i = int(np.argmin(values))
    lo, hi = _ALPHAS[max(i - 1, 0)], _ALPHAS[min(i + 1, len(_ALPHAS) - 1)]
    refined = np.concatenate([[_ALPHAS[i]], np.linspace(lo, hi, 201)[1:-1]])
    objective = _cks_objective(refined, rho, log_delta)
    j = int(np.argmin(objective))
    alpha = float(refined[j])
    terms = abs(alpha * rho) + abs(math.log1p(-1 / alpha))
    terms += abs((log_delta + math.log(alpha)) / (alpha - 1))
    cks = float(objective[j]) + 2.0**-44 * terms
    classic = rho + 2 * math.sqrt(rho * math.log(1 / delta))
    classic += 2.0**-44 * classic
    return max(0.0, min(cks, classic))


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
        epsilon=zcdp_epsilon(float_above(rho), target),
        delta=target,
        method="zcdp",
        detail={"rho": float(rho)},
    )
