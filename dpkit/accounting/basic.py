"""Basic (sequential) composition in exact rational arithmetic.

Dwork, McSherry, Nissim & Smith 2006; Dwork & Roth 2014, Theorem 3.16 (and Theorem B.1 for the
adaptive case): running (ε_i, δ_i)-DP mechanisms adaptively is (Σ ε_i, Σ δ_i)-DP.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

from dpkit._enclosure import Arithmetic, decimal_high, decimal_low, float_above, float_below
from dpkit.accounting._common import Bound, Events, NotApplicable, check_delta, exact, normalise
from dpkit.errors import InvalidParameter
from dpkit.privacy import (
    ApproximateDP,
    BoundedRangeDP,
    CompositeDP,
    GaussianDP,
    LaplaceDP,
    PrivacyEvent,
    PureDP,
    RandomizedResponseDP,
    SubsampledDP,
    flatten,
    gaussian_epsilon,
)

__all__ = ["compose_basic", "event_cost"]


def _needs_delta_share(event: PrivacyEvent) -> bool:
    inner = event.event if isinstance(event, SubsampledDP) else event
    return isinstance(inner, GaussianDP)


def event_cost(event: PrivacyEvent, *, delta: float | None = None) -> tuple[Fraction, Fraction]:
    """The exact (ε, δ) of one use of ``event``.

    A Gaussian is reported at ``delta`` (its exact ε there, Balle & Wang 2018, Theorem 8) or,
    without ``delta``, at its own declared δ. A Poisson-subsampled event at rate q is amplified
    to (ln(1 + q(e^ε − 1)), qδ) (Balle, Barthe & Gaboardi 2018, Theorem 8; Theorem 9 gives the
    same for sampling without replacement under replacement neighbours). A composite event
    costs the sum of its parts; an ε-bounded-range event costs ε (it is ε-DP).
    """
    if isinstance(event, CompositeDP):
        costs = [event_cost(part, delta=delta) for part in event.parts]
        return sum((c[0] for c in costs), Fraction(0)), sum((c[1] for c in costs), Fraction(0))
    if isinstance(event, (PureDP, LaplaceDP, RandomizedResponseDP, BoundedRangeDP)):
        return exact(event.epsilon), Fraction(0)
    if isinstance(event, ApproximateDP):
        return exact(event.epsilon), exact(event.delta)
    if isinstance(event, GaussianDP):
        if delta is None:  # at its own δ: its ε (a calibrated ε is checked against the curve)
            return exact(event.epsilon), exact(event.delta)
        return exact(gaussian_epsilon(delta, event.noise_multiplier)), exact(delta)
    if isinstance(event, SubsampledDP):
        q = event.sampling_rate
        inner_delta = None
        if delta is not None:  # q·δ_inner ≤ δ: the inner δ is rounded down
            inner_delta = float_below(Fraction(decimal_low(delta)) / Fraction(decimal_high(q)))
        if inner_delta is not None and inner_delta >= 1:
            inner_delta = None if not isinstance(event.event, GaussianDP) else 0.5
        eps, d = event_cost(event.event, delta=inner_delta)
        if q == 1:
            return eps, d
        return exact(_amplified(eps, q)), exact(q) * d
    raise NotApplicable("basic", event)


def _amplified(epsilon: Fraction, rate: float) -> float:
    """ln(1 + q(e^ε − 1)), rounded up (an enclosure's upper end, q at its larger reading);
    beyond ε = 700 as ε + ln(q + (1 − q)e^−ε), which never overflows."""
    arithmetic = Arithmetic(30)
    eps, q, one = (
        arithmetic.fraction(epsilon),
        arithmetic.point(decimal_high(rate)),
        arithmetic.point(1),
    )
    if epsilon <= 700:
        scaled = arithmetic.mul(q, arithmetic.sub(arithmetic.exp(eps), one))
        return float_above(arithmetic.ln(arithmetic.add(one, scaled))[1])
    rest = arithmetic.mul(arithmetic.sub(one, q), arithmetic.exp(arithmetic.neg(eps)))
    return float_above(arithmetic.add(eps, arithmetic.ln(arithmetic.add(q, rest)))[1])


def _as_float(value: Fraction) -> float:
    """A non-negative rational as a float whose shortest decimal is ≥ it, +inf beyond the
    float range (not OverflowError): a reported ε or δ is never below the exact sum."""
    return float_above(value, binary=False) if value < Fraction(1e308) else math.inf


def compose_basic(events: Events | Any, *, delta: float | None = None) -> Bound:
    """Σ ε_i and Σ δ_i, exactly (ten costs of ε = 0.1 sum to exactly 1).

    With a target ``delta``, what is left of it after the fixed δ_i of approximate events is
    shared equally among the Gaussian releases, each reported at its share.
    """
    items = [(part, count) for event, count in normalise(events) for part in flatten(event)]
    share: float | None = None
    if delta is not None:
        target = check_delta(delta, owner="compose_basic")
        fixed = sum(
            (event_cost(e)[1] * c for e, c in items if not _needs_delta_share(e)), Fraction(0)
        )
        gaussians = sum(c for e, c in items if _needs_delta_share(e))
        if gaussians:
            left = Fraction(decimal_low(target)) - fixed
            if left <= 0:
                raise InvalidParameter(
                    "delta",
                    delta,
                    f"greater than the δ already spent by the events ({float(fixed)})",
                )
            share = float_below(left / gaussians)  # the shares never add up to more
    total_eps, total_delta = Fraction(0), Fraction(0)
    for event, count in items:
        eps, d = event_cost(event, delta=share if _needs_delta_share(event) else None)
        total_eps += eps * count
        total_delta += d * count
    return Bound(
        epsilon=_as_float(total_eps),
        delta=_as_float(total_delta),
        method="basic",
        exact_epsilon=total_eps,
        exact_delta=total_delta,
    )
