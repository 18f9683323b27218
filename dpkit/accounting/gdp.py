"""Gaussian differential privacy (Dong, Roth & Su 2022) as a composition currency.

A mechanism is μ-GDP if, for neighbours x, x′, distinguishing M(x) from M(x′) is at least as
hard as distinguishing N(0, 1) from N(μ, 1): its trade-off function is at least
G_μ(α) = Φ(Φ⁻¹(1 − α) − μ) (Dong, Roth & Su 2022, "Gaussian Differential Privacy",
Section 2.1). μ-GDP is exactly the privacy profile δ_μ(ε) = Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ)
at every ε ≥ 0 (ibid., Corollary 2.13; Balle & Wang 2018's curve with μ = Δ/σ). Composition
adds μ²: μ_i-GDP mechanisms compose to sqrt(Σμ_i²)-GDP (ibid., Corollary 3.3), and this holds
for fully adaptive compositions too — the analyst may choose each μ_i, and when to stop, from
the earlier outputs, as long as Σμ_i² ≤ μ² (Smith & Thakurta 2022, "Fully Adaptive
Composition for Gaussian Differential Privacy"). That makes μ² a currency for a privacy filter.

Costs (:func:`event_mu2`), each rounded up to an exact rational:

* the Gaussian mechanism with noise multiplier σ/Δ₂: μ = Δ₂/σ exactly, μ² = 1/(σ/Δ₂)²;
* any pure ε-DP event: μ = 2Φ⁻¹(e^ε/(1 + e^ε)), the smallest μ with G_μ below the trade-off
  function f_ε of ε-DP, f_ε(α) = max(0, 1 − e^ε α, e^{−ε}(1 − α)) (Dong, Roth & Su 2022,
  Section 2.2, after Wasserman & Zhou 2010). Proof: f_ε is the maximum of two lines meeting
  at α* = 1/(1 + e^ε), where f_ε(α*) = α*; G_μ is convex with G_μ(0) = 1 = f_ε(0) and
  G_μ(1) = 0 = f_ε(1), so G_μ ≤ f_ε on [0, α*] and on [α*, 1] as soon as G_μ(α*) ≤ α* (a
  convex function lies below its chords, and each chord lies below the line of f_ε through
  the same end points). G_μ(α*) ≤ α* ⟺ Φ⁻¹(1 − α*) − μ ≤ Φ⁻¹(α*) ⟺ μ ≥ 2Φ⁻¹(1 − α*), and at
  equality G_μ touches f_ε at α*, so no smaller μ works. For small ε, μ ≈ 1.2533·ε;
* the Laplace mechanism at ε: μ = 2Φ⁻¹(1 − e^{−ε/2}/2), below the generic pure-ε μ (μ² is
  1.05× smaller at ε = 0.1, 1.71× at ε = 2). Its trade-off function is
  f(α) = 1 − e^ε α for α < e^{−ε}/2, e^{−ε}/(4α) up to α = 1/2, and e^{−ε}(1 − α) beyond
  (the Laplace example of Dong, Roth & Su 2022; the tests check it against Neyman–Pearson tests).
  G_μ ≤ f ⟺ μ ≥ g(α) = Φ⁻¹(1 − α) − Φ⁻¹(f(α)) for every α. On the two linear pieces G_μ
  (convex, equal to f at α = 0 and α = 1) lies below f once it does at their inner ends,
  which belong to the middle piece. There, with s = ln α and ψ(s) = −Φ⁻¹(e^s),
  g = ψ(s) + ψ(ln c − s), c = e^{−ε}/4: ψ is concave (with y = Φ⁻¹(e^s),
  ψ″ = −(1 + yΦ(y)/φ(y))·Φ(y)/φ(y) ≤ 0 by the Mills-ratio bound Φ(y) ≤ φ(y)/|y| for y < 0),
  so g is concave and symmetric about s = ln c/2 and its maximum is at α* = e^{−ε/2}/2,
  where f(α*) = α*: μ = Φ⁻¹(1 − α*) − Φ⁻¹(α*) = 2Φ⁻¹(1 − α*), and G_μ touches f there, so
  no smaller μ works;
* a composite event: the sum of its parts' μ².

Events with δ > 0 other than the Gaussian (an (ε, δ) event, a subsampled event) have no μ:
their trade-off function is 1 − δ at α = 0, which no G_μ is below; they are refused.
"""

from __future__ import annotations

import math
import statistics
from fractions import Fraction
from typing import Any

from dpkit._enclosure import decimal_high, settle
from dpkit.accounting._common import (
    Bound,
    Events,
    NotApplicable,
    ceil_decimal,
    check_delta,
    exact,
    floor_decimal,
    normalise,
)
from dpkit.errors import InvalidParameter
from dpkit.privacy import (
    BoundedRangeDP,
    CompositeDP,
    GaussianDP,
    LaplaceDP,
    PrivacyEvent,
    PureDP,
    RandomizedResponseDP,
    gaussian_delta,
    gaussian_meets,
    gaussian_mu_epsilon,
)

__all__ = ["compose_gdp", "event_mu2", "gdp_mu_for", "laplace_mu", "pure_mu"]

_NORMAL = statistics.NormalDist()


def pure_mu(epsilon: float) -> float:
    """μ = 2Φ⁻¹(e^ε/(1 + e^ε)) of a pure ε-DP event (module docstring), rounded up.

    Φ⁻¹ is evaluated in the lower tail, Φ⁻¹(e^ε/(1 + e^ε)) = −Φ⁻¹(1/(1 + e^ε)), where its
    argument is accurate for every ε; the result is moved up by 1e-12 relative and 1e-14.
    """
    if not epsilon > 0:
        return 0.0
    if epsilon > 700:
        raise NotApplicable("gdp", PureDP(epsilon), "1/(1 + e^ε) underflows beyond ε = 700")
    lower = math.exp(-epsilon) / (1.0 + math.exp(-epsilon))  # 1/(1 + e^ε)
    mu = -2.0 * _NORMAL.inv_cdf(lower)
    return mu * (1 + 1e-12) + 1e-14


def laplace_mu(epsilon: float) -> float:
    """μ = 2Φ⁻¹(1 − e^{−ε/2}/2), the smallest μ with G_μ below the Laplace mechanism's
    trade-off function at ε (module docstring), rounded up as :func:`pure_mu` is."""
    if not epsilon > 0:
        return 0.0
    if epsilon > 1400:
        raise NotApplicable("gdp", LaplaceDP(epsilon), "e^{−ε/2}/2 underflows beyond ε = 1400")
    mu = -2.0 * _NORMAL.inv_cdf(0.5 * math.exp(-epsilon / 2))
    return mu * (1 + 1e-12) + 1e-14


def event_mu2(event: PrivacyEvent) -> Fraction:
    """The exact μ² of one use of ``event``, rounded up (module docstring)."""
    if isinstance(event, CompositeDP):
        return sum((event_mu2(part) for part in event.parts), Fraction(0))
    if isinstance(event, GaussianDP):
        return 1 / exact(event.noise_multiplier) ** 2
    if isinstance(event, LaplaceDP):
        mu = laplace_mu(event.epsilon)
        return ceil_decimal(mu * mu)
    if isinstance(event, (PureDP, RandomizedResponseDP, BoundedRangeDP)):
        mu = pure_mu(event.epsilon)
        return ceil_decimal(mu * mu)
    raise NotApplicable(
        "gdp", event, "Gaussian-DP covers Gaussian and pure-DP events (an (ε, δ) event has no μ)"
    )


def gdp_mu_for(epsilon: float, delta: float) -> float:
    """The largest μ whose profile meets (ε, δ): δ_μ(ε) ≤ δ, rounded down.

    δ_μ(ε) increases with μ, so bisection on Balle & Wang's curve (:func:`gaussian_delta`,
    accurate in log space) finds it to 1e-14; the lower end is then checked on an enclosure of
    the curve (:func:`gaussian_meets`, μ at its larger reading) and moved down until it passes.
    """
    if not epsilon >= 0 or not math.isfinite(epsilon):
        raise InvalidParameter("epsilon", epsilon, "a finite real number >= 0", owner="gdp")
    check_delta(delta, owner="gdp")
    lo, hi = 0.0, 1.0
    while gaussian_delta(epsilon, 1 / hi) <= delta:
        lo, hi = hi, 2 * hi
        if hi > 1e12:
            break
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid > 0 and gaussian_delta(epsilon, 1 / mid) <= delta:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-14 * hi:
            break

    def holds(mu: float) -> bool:
        return mu == 0 or gaussian_meets(epsilon, delta, mu_squared=Fraction(decimal_high(mu)) ** 2)

    return settle(lo, holds, up=False)


def gdp_budget(epsilon: Fraction, delta: Fraction) -> Fraction:
    """μ_B² for an (ε, δ) budget: the largest μ² whose profile meets it, rounded down."""
    mu = gdp_mu_for(float(epsilon), float(delta))
    return floor_decimal(mu * mu)


def compose_gdp(events: Events | Any, *, delta: float) -> Bound:
    """μ = sqrt(Σ count·μ_i²) and its exact ε at ``delta`` (Balle & Wang's curve)."""
    target = check_delta(delta, owner="compose_gdp")
    mu2 = sum((event_mu2(e) * c for e, c in normalise(events)), Fraction(0))
    if mu2 == 0:
        return Bound(epsilon=0.0, delta=target, method="gdp", detail={"mu": 0.0})
    if mu2 > Fraction(1e300):
        return Bound(epsilon=math.inf, delta=target, method="gdp", detail={"mu": math.inf})
    return Bound(
        epsilon=gaussian_mu_epsilon(target, mu2),
        delta=target,
        method="gdp",
        detail={"mu": math.sqrt(float(mu2))},
    )
