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

**Rounded up, never down.** The optimal bound is tight, so a float evaluation of it can fall on
either side of the truth: 1 − (1 − δ)/(1 − δ₀)^k cancels when δ is close to the events' own δ,
and the float sum of δ_RR carries rounding errors of its own. Every ε reported here is
therefore checked in outward-rounded decimal arithmetic (:mod:`dpkit._enclosure`): the slack
1 − (1 − δ)/Π(1 − δ_i)^{k_i} is enclosed (and its lower end used), the optimal ε found by
float bisection is moved up until an enclosure of δ_RR at it is within that slack, and the
closed forms (DRV, KOV Theorem 3.5) are evaluated on enclosures and rounded up. δ is read at
its smaller reading (binary or shortest decimal), each δ_i and ε_i exactly as declared.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np

from dpkit._enclosure import (
    Arithmetic,
    Enclosure,
    decimal_low,
    float_above,
    float_below,
    settle,
)
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


#: The precisions (significant digits) tried in turn to decide a comparison on enclosures.
_PRECISIONS = (30, 60, 120, 240, 480)


def _decide(compare: Callable[[Arithmetic], bool | None]) -> bool | None:
    """``compare`` at increasing precision until it decides (True/False); None if it never does."""
    for precision in _PRECISIONS:
        found = compare(Arithmetic(precision))
        if found is not None:
            return found
    return None


def _epsilon_enclosure(arithmetic: Arithmetic, epsilon: float | Fraction) -> Enclosure:
    if isinstance(epsilon, Fraction):
        return arithmetic.fraction(epsilon)
    return arithmetic.point(Decimal(epsilon))


def _drv(arithmetic: Arithmetic, epsilon: Enclosure, k: int, delta_prime: Fraction) -> Enclosure:
    """sqrt(2k ln(1/δ'))·ε + k·ε·(e^ε − 1), enclosed."""
    log_inverse = arithmetic.neg(arithmetic.ln(arithmetic.fraction(delta_prime)))
    root = arithmetic.sqrt(arithmetic.scale(log_inverse, Decimal(2 * k)))
    growth = arithmetic.sub(arithmetic.exp(epsilon), arithmetic.point(Decimal(1)))
    return arithmetic.add(
        arithmetic.mul(root, epsilon), arithmetic.scale(arithmetic.mul(epsilon, growth), Decimal(k))
    )


def drv_epsilon(epsilon: float, k: int, delta_prime: float) -> float:
    """ε' = sqrt(2k ln(1/δ'))·ε + k·ε·(e^ε − 1)  (Dwork & Roth 2014, Theorem 3.20), rounded
    up (an enclosure's upper end; δ' at its smaller reading)."""
    arithmetic = Arithmetic(30)
    found = _drv(
        arithmetic,
        _epsilon_enclosure(arithmetic, epsilon),
        k,
        Fraction(decimal_low(delta_prime)),
    )
    return float_above(found[1])


def _kov_closed(
    arithmetic: Arithmetic, epsilons: list[tuple[float | Fraction, int]], delta_tilde: Fraction
) -> Decimal:
    """The upper end of min{T + sqrt(2 S₂ ln(e + sqrt(S₂)/δ̃)), T + sqrt(2 S₂ ln(1/δ̃))}."""
    one = arithmetic.point(Decimal(1))
    zero = arithmetic.point(Decimal(0))
    s2, t = zero, zero
    for epsilon, count in epsilons:
        eps = _epsilon_enclosure(arithmetic, epsilon)
        s2 = arithmetic.add(s2, arithmetic.scale(arithmetic.mul(eps, eps), Decimal(count)))
        shrunk = arithmetic.exp(arithmetic.neg(eps))  # tanh(ε/2) = (1 − e^−ε)/(1 + e^−ε)
        ratio = arithmetic.div(arithmetic.sub(one, shrunk), arithmetic.add(one, shrunk))
        t = arithmetic.add(t, arithmetic.scale(arithmetic.mul(eps, ratio), Decimal(count)))
    slack = arithmetic.fraction(delta_tilde)
    e = arithmetic.exp(one)
    first = arithmetic.ln(arithmetic.add(e, arithmetic.div(arithmetic.sqrt(s2), slack)))
    second = arithmetic.neg(arithmetic.ln(slack))
    ends = [
        arithmetic.add(t, arithmetic.sqrt(arithmetic.mul(arithmetic.scale(s2, Decimal(2)), log)))
        for log in (first, second)
    ]
    return min(end[1] for end in ends)


def kov_epsilon(epsilons: list[tuple[float, int]], delta_tilde: float) -> float:
    """KOV 2015 Theorem 3.5 for ε_i repeated k_i times, at slack δ̃ (see the module docstring),
    rounded up: S₁ = Σ k_i ε_i exactly (the ε_i as their shortest decimals), the other two
    terms as an enclosure's upper end (δ̃ at its smaller reading)."""
    s1 = float_above(sum((Fraction(repr(float(e))) * k for e, k in epsilons), Fraction(0)))
    closed = _kov_closed(Arithmetic(30), list(epsilons), Fraction(decimal_low(delta_tilde)))
    return min(s1, float_above(closed))


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


def _slack(arithmetic: Arithmetic, delta: Decimal, spent: list[tuple[Fraction, int]]) -> Enclosure:
    """1 − (1 − δ)/Π(1 − δ_i)^{k_i}: what δ leaves to the randomized-response part."""
    one = arithmetic.point(Decimal(1))
    kept = one
    for d, count in spent:
        kept = arithmetic.mul(kept, arithmetic.power(arithmetic.fraction(1 - d), count))
    return arithmetic.sub(one, arithmetic.div(arithmetic.sub(one, arithmetic.point(delta)), kept))


def _slack_below(delta: float, spent: list[tuple[Fraction, int]]) -> Fraction | None:
    """A positive lower bound on the slack (:func:`_slack`, δ at its smaller reading), tight to
    about 1e-25 of itself; None when the slack is not shown to be positive."""
    target = decimal_low(delta)
    found: Fraction | None = None

    def compare(arithmetic: Arithmetic) -> bool | None:
        nonlocal found
        low, high = _slack(arithmetic, target, spent)
        if high <= 0:
            return False
        if low <= 0 or high - low > low * Decimal("1e-25"):
            return None
        found = Fraction(low)
        return True

    _decide(compare)
    return found


def _rr_delta(
    arithmetic: Arithmetic, epsilon_prime: Decimal, epsilon: Fraction, k: int
) -> Enclosure:
    """δ_RR(ε') of k-fold ε-randomized response, enclosed.

    The terms w_l (1 − e^{ε' − (k − 2l)ε}) with w_l = C(k, l) p^{k−l} q^l are summed from the
    largest l with (k − 2l)ε > ε' downwards: w_L from ln C(k, L) (:meth:`Arithmetic.
    log_factorial`), then w_{l−1} = w_l·ρ_l with ρ_l = l·e^ε/(k − l + 1), which falls as l
    does. Once ρ < 1 the terms left sum to at most w_{l−1}/(1 − ρ) (1 − e^x ≤ 1); when that is
    below 10^−(precision+2) of the sum it is added to the upper end and the sum stops.
    """
    last = math.ceil((k - Fraction(epsilon_prime) / epsilon) / 2) - 1
    last = min(last, k)
    if last < 0:
        return Decimal(0), Decimal(0)
    one = arithmetic.point(Decimal(1))
    eps = arithmetic.fraction(epsilon)
    grown = arithmetic.exp(eps)
    log_p = arithmetic.neg(arithmetic.ln(arithmetic.add(one, arithmetic.div(one, grown))))
    log_binomial = arithmetic.sub(
        arithmetic.log_factorial(k),
        arithmetic.add(arithmetic.log_factorial(last), arithmetic.log_factorial(k - last)),
    )
    log_weight = arithmetic.sub(
        arithmetic.add(log_binomial, arithmetic.scale(log_p, Decimal(k))),
        arithmetic.scale(eps, Decimal(last)),
    )  # ln w_L = ln C(k, L) + k ln p − L ε, as q = p·e^{−ε}
    weight = arithmetic.exp(log_weight)
    exponent = arithmetic.sub(
        arithmetic.point(epsilon_prime), arithmetic.scale(eps, Decimal(k - 2 * last))
    )  # ε' − (k − 2l)ε < 0
    shrink = arithmetic.exp(arithmetic.scale(eps, Decimal(-2)))
    power = arithmetic.exp(exponent)  # e^{ε' − (k − 2l)ε}
    tiny = Decimal(10) ** -(arithmetic.precision + 2)
    low, high = Decimal(0), Decimal(0)
    for flips in range(last, -1, -1):
        keep = arithmetic.sub(one, power)
        keep_low = max(keep[0], Decimal(0))
        keep_high = min(keep[1], -exponent[0])  # 1 − e^x ≤ −x
        low = arithmetic.down.add(low, arithmetic.down.multiply(weight[0], keep_low))
        high = arithmetic.up.add(high, arithmetic.up.multiply(weight[1], keep_high))
        if flips == 0:
            break
        ratio = arithmetic.div(
            arithmetic.scale(grown, Decimal(flips)), arithmetic.point(Decimal(k - flips + 1))
        )
        weight = arithmetic.mul(weight, ratio)
        if ratio[1] < 1:
            # the terms left are at most w_{l−1}·(1 + ρ + ρ² + ...) (ratios fall with l)
            rest = arithmetic.up.divide(weight[1], arithmetic.down.subtract(1, ratio[1]))
            if rest <= tiny * low:
                return low, arithmetic.up.add(high, rest)
        power = arithmetic.mul(power, shrink)
        exponent = arithmetic.sub(exponent, arithmetic.scale(eps, Decimal(2)))
    return low, high


def _rr_delta_within(epsilon_prime: float, epsilon: Fraction, k: int, slack: Fraction) -> bool:
    """δ_RR(ε') ≤ slack, decided on enclosures (ε' at its smaller reading); False if undecided."""
    point = decimal_low(epsilon_prime)

    def compare(arithmetic: Arithmetic) -> bool | None:
        low, high = _rr_delta(arithmetic, point, epsilon, k)
        if high <= slack:
            return True
        return False if low > slack else None

    return bool(_decide(compare))


def kov_optimal_epsilon(
    epsilon: float | Fraction, k: int, delta: float, *, delta0: float | Fraction = 0.0
) -> float:
    """The smallest ε' at which k-fold (ε, δ0)-DP is (ε', delta)-DP (KOV 2015, Theorem 3.3),
    rounded up (module docstring: checked on enclosures)."""
    # 1 − (1 − δ0)^k (1 − δ_RR) ≤ delta  ⇔  δ_RR ≤ 1 − (1 − delta)/(1 − δ0)^k
    eps = Fraction(repr(epsilon)) if isinstance(epsilon, float) else Fraction(epsilon)
    d0 = Fraction(repr(delta0)) if isinstance(delta0, float) else Fraction(delta0)
    slack = _slack_below(delta, [(d0, k)])
    if slack is None:
        raise InvalidParameter(
            "delta",
            delta,
            f"greater than 1 − (1 − δ)^k = {-math.expm1(k * math.log1p(-float(d0)))}",
        )
    budget = float_below(slack)
    eps_f = float(eps)

    def holds(epsilon_prime: float) -> bool:
        return _rr_delta_within(epsilon_prime, eps, k, slack)

    lo, hi = 0.0, k * eps_f
    if kov_optimal_delta(0.0, eps_f, k) <= budget and holds(0.0):
        return 0.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if kov_optimal_delta(mid, eps_f, k) > budget:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-13 * max(hi, 1e-300):
            break
    return settle(hi, holds)


def compose_advanced(events: Events | Any, *, delta: float) -> Bound:
    """The smallest of the DRV, KOV closed-form and (homogeneous) KOV optimal bounds at ``delta``.

    Applies to events with a fixed (ε, δ) (pure, Laplace, randomized response, approximate
    and their subsampled versions); basic composition Σε is one of KOV's three terms, so the
    result is never worse than basic. Every bound is rounded up (module docstring).
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
    spent = [(d, k) for (_, d), k in groups.items()]
    delta_tilde = _slack_below(target, spent)
    if delta_tilde is None:
        log_keep = math.fsum(k * math.log1p(-float(d)) for d, k in spent)
        raise InvalidParameter(
            "delta",
            delta,
            f"greater than the events' own δ (1 − Π(1 − δ_i) = {-math.expm1(log_keep)})",
        )
    candidates: dict[str, float] = {}
    candidates["kov-closed-form"] = min(
        float_above(sum((e * k for (e, _), k in groups.items()), Fraction(0))),
        float_above(
            _kov_closed(Arithmetic(30), [(e, k) for (e, _), k in groups.items()], delta_tilde)
        ),
    )
    if len(groups) == 1:
        ((eps_f, d_f), k) = next(iter(groups.items()))
        delta_prime = Fraction(decimal_low(target)) - k * d_f  # basic composition's δ
        if delta_prime > 0 and eps_f <= 700:  # e^ε must be a float (ln of the largest ≈ 709.78)
            arithmetic = Arithmetic(30)
            drv = _drv(arithmetic, arithmetic.fraction(eps_f), k, delta_prime)
            candidates["drv"] = float_above(drv[1])
        if 0 < eps_f <= 700:
            candidates["kov-optimal"] = kov_optimal_epsilon(eps_f, k, target, delta0=d_f)
    best = min(candidates, key=lambda name: candidates[name])
    return Bound(
        epsilon=candidates[best],
        delta=target,
        method="advanced",
        detail={"bound": best, "bounds": candidates},
    )
