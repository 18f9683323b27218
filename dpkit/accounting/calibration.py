"""Calibration: the noise (or the per-query ε) that makes a composition meet a target (ε, δ).

>>> from dpkit.accounting import calibrate
>>> found = calibrate("gaussian", epsilon=1.0, delta=1e-5, count=100)
>>> round(found.value, 3), found.epsilon <= 1.0
(37.306, True)

The accountant's ε is monotone in the parameter: it falls as the noise multiplier σ grows and
rises with each query's ε. :func:`calibrate` brackets the answer from a central-limit guess
(:func:`_gaussian_guess`, :func:`_pure_guess`) and narrows the bracket with the Illinois variant
of regula falsi on ln(parameter) (Dowell & Jarratt 1971), bisecting when that stalls (ε is flat
at 0 beyond the noise at which δ(0) = δ), keeping one end
that meets the target and one that does not; every value it returns was checked with the
accountant, so the reported ε is what ``account`` says of it. Two cases are solved exactly
instead: the Gaussian without subsampling or other events — k releases of σ are one Gaussian
of σ/√k (Dong, Roth & Su 2022, Corollary 3.3), so σ = √k/μ with μ the largest μ-GDP meeting
(ε, δ) — and k pure events at δ = 0, which compose to kε exactly.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import attrs

from dpkit.accounting._common import Bound, Events, normalise
from dpkit.accounting.accountant import account
from dpkit.accounting.gdp import gdp_mu_for
from dpkit.accounting.training import Schedule, parse_rate
from dpkit.errors import InvalidParameter
from dpkit.privacy import (
    BoundedRangeDP,
    GaussianDP,
    LaplaceDP,
    PrivacyEvent,
    PureDP,
    RandomizedResponseDP,
    SubsampledDP,
)

__all__ = ["CALIBRATED_EVENTS", "Calibration", "calibrate", "gaussian_noise_multiplier"]

#: The events :func:`calibrate` knows by name, and the parameter it solves for in each.
CALIBRATED_EVENTS: dict[str, str] = {
    "gaussian": "noise_multiplier",
    "laplace": "epsilon",
    "pure": "epsilon",
    "rr": "epsilon",
    "bounded_range": "epsilon",
}

_LIMITS = {"noise_multiplier": (1e-6, 1e6), "epsilon": (1e-9, 1e4)}


@attrs.frozen
class Calibration:
    """What :func:`calibrate` found.

    ``value`` is the noise multiplier (the smallest that meets the target) or the per-query ε
    (the largest); ``epsilon`` is the ε the accountant gives the composition with it, at
    ``delta`` — never above ``target_epsilon``; ``bound`` is that accountant's answer.
    """

    parameter: str
    value: float
    epsilon: float
    delta: float
    target_epsilon: float
    method: str
    evaluations: int
    bound: Bound = attrs.field(eq=False, repr=False)
    #: The training schedule the noise was calibrated for (``epochs=``...), if one was given.
    schedule: Schedule | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "parameter": self.parameter,
            self.parameter: self.value,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "target_epsilon": self.target_epsilon,
            "method": self.method,
            "evaluations": self.evaluations,
        }
        if self.schedule is not None:
            s = self.schedule
            out["schedule"] = {
                "epochs": s.epochs,
                "batch_size": s.batch_size,
                "dataset_size": s.dataset_size,
                "batching": s.batching,
                "sampling_rate": float(s.sampling_rate),
                "sampling_rate_exact": str(s.sampling_rate),
                "steps": s.steps,
                "neighbours": s.neighbours,
                "accounting": s.describe(),
            }
        return out


def _maker(
    event: str | Callable[[float], PrivacyEvent], delta: float
) -> tuple[Callable[[float], PrivacyEvent], str | None]:
    if callable(event):
        return event, None
    if event not in CALIBRATED_EVENTS:
        raise InvalidParameter(
            "event", event, "one of " + ", ".join(CALIBRATED_EVENTS) + " or a callable"
        )
    gaussian_delta = delta if 0 < delta < 1 else 0.5  # GaussianDP's own δ only labels it
    makers: dict[str, Callable[[float], PrivacyEvent]] = {
        "gaussian": lambda x: GaussianDP(noise_multiplier=x, delta=gaussian_delta),
        "laplace": lambda x: LaplaceDP(epsilon=x),
        "pure": lambda x: PureDP(epsilon=x),
        "rr": lambda x: RandomizedResponseDP(epsilon=x),
        "bounded_range": lambda x: BoundedRangeDP(epsilon=x),
    }
    return makers[event], CALIBRATED_EVENTS[event]


def calibrate(
    event: str | Callable[[float], PrivacyEvent] = "gaussian",
    *,
    epsilon: float,
    delta: float,
    count: int = 1,
    sampling_rate: float | None = None,
    scheme: str = "poisson",
    others: Events | Any = (),
    method: str = "best",
    parameter: str | None = None,
    rtol: float = 1e-4,
    epochs: int | None = None,
    batch_size: int | None = None,
    dataset_size: int | None = None,
    batching: str = "poisson",
) -> Calibration:
    """The parameter of ``event`` that makes ``count`` uses of it (subsampled at
    ``sampling_rate`` with ``scheme`` if given), composed with ``others``, (epsilon, delta)-DP
    under ``method``. ``sampling_rate`` may be a simple fraction (``"256/60000"`` or a
    :class:`~fractions.Fraction`).

    A noisy-SGD run can be given as its schedule instead of ``count`` and ``sampling_rate``:
    ``epochs``, ``batch_size`` and ``dataset_size``, with ``batching`` ``"poisson"`` (each step
    keeps each record with probability batch_size/dataset_size; epochs·⌈N/B⌉ steps) or
    ``"shuffle"`` (fixed-size batches of a shuffle, accounted without amplification under
    replace-one neighbours); :mod:`dpkit.accounting.training` says why each is sound. The
    result's ``schedule`` has the step count and the rate as accounted.

    ``event`` is a name in :data:`CALIBRATED_EVENTS` ("gaussian": the smallest noise
    multiplier; "laplace", "pure", "rr", "bounded_range": the largest per-query ε) or a
    callable from the parameter to an event, with ``parameter`` saying which kind it is
    ("noise_multiplier": privacy grows with it; "epsilon": privacy falls with it). ``delta``
    may be 0 for pure events. The answer is within ``rtol`` (relative) of the exact root of
    the accountant's ε, or its ε is within ``rtol`` of the target. DP-SGD's question —
    σ for ε = 8, δ = 1e-5 after 10 000 steps at q = 0.01 (Opacus' ``get_noise_multiplier``) —
    is ``calibrate("gaussian", epsilon=8, delta=1e-5, count=10_000, sampling_rate=0.01)``.
    """
    if epochs is not None or batch_size is not None or dataset_size is not None:
        return _for_schedule(
            event,
            Schedule(epochs, batch_size, dataset_size, batching),
            count,
            sampling_rate,
            epsilon=epsilon,
            delta=delta,
            others=others,
            method=method,
            rtol=rtol,
        )
    if sampling_rate is not None:
        sampling_rate = parse_rate(sampling_rate)
    make, kind = _maker(event, delta)
    kind = parameter or kind
    if kind not in _LIMITS:
        raise InvalidParameter("parameter", parameter, "'noise_multiplier' or 'epsilon'")
    if not (isinstance(epsilon, (int, float)) and math.isfinite(epsilon) and epsilon > 0):
        raise InvalidParameter("epsilon", epsilon, "a finite real number > 0", owner="calibrate")
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise InvalidParameter("count", count, "an integer >= 1", owner="calibrate")
    if not 0 < rtol < 0.1:
        raise InvalidParameter("rtol", rtol, "a real number in (0, 0.1)", owner="calibrate")
    fixed = normalise(others)
    if sampling_rate is not None:  # checked once, by the event itself
        SubsampledDP(make(1.0), sampling_rate, scheme)

    def events(x: float) -> list[tuple[PrivacyEvent, int]]:
        one = make(x)
        if sampling_rate is not None:
            one = SubsampledDP(one, sampling_rate, scheme)
        return [*fixed, (one, count)]

    evaluations = 0

    def bound_at(x: float) -> Bound:
        nonlocal evaluations
        evaluations += 1
        return account(events(x), delta=delta, method=method)

    sample = make(1.0)
    exact = (
        isinstance(sample, GaussianDP)
        and kind == "noise_multiplier"
        and sampling_rate is None
        and not fixed
        and method in ("best", "exact-gaussian", "gdp", "pld")
        and 0 < delta < 1
    )
    if exact:
        mu = gdp_mu_for(float(epsilon), float(delta))
        if mu == 0:
            raise InvalidParameter("epsilon", epsilon, "reachable by some noise", owner="calibrate")
        sigma = math.sqrt(count) / mu
        bound = bound_at(sigma)
        # μ meets (ε, δ) exactly, and the accountant rounds its ε up (to a few 1e-13): nudge σ
        # up until the reported ε is within the target too, as the docstring promises.
        nudge = 2.0**-40
        while bound.epsilon > epsilon and nudge < rtol:
            sigma *= 1.0 + nudge
            nudge *= 2.0
            bound = bound_at(sigma)
        if bound.epsilon <= epsilon:
            return Calibration(
                kind, sigma, bound.epsilon, delta, epsilon, bound.method, evaluations, bound
            )
    pure = (PureDP, LaplaceDP, RandomizedResponseDP, BoundedRangeDP)
    if delta == 0 and kind == "epsilon" and sampling_rate is None and not fixed:
        value = epsilon / count  # pure DP at δ = 0 composes by Σε, exactly
        bound = bound_at(value)
        if isinstance(sample, pure) and bound.epsilon <= epsilon:
            return Calibration(kind, value, bound.epsilon, delta, epsilon, bound.method, 1, bound)
    start, step = None, 2.0
    if kind == "epsilon" and isinstance(sample, pure) and count > 1:
        # k pure events at ε/k meet ε by basic composition: a first end of the bracket
        start = float(epsilon) / count
        if start < _LIMITS[kind][0]:
            raise InvalidParameter(
                "epsilon", epsilon, f"reachable with a per-query ε above {_LIMITS[kind][0]:g}"
            )
        if 0 < delta < 1:
            start, step = (
                max(start, _pure_guess(float(epsilon), float(delta), count, sampling_rate)),
                1.05,
            )
    elif kind == "noise_multiplier" and isinstance(sample, GaussianDP) and 0 < delta < 1:
        start, step = _gaussian_guess(float(epsilon), float(delta), count, sampling_rate), 1.05
    value, bound = _solve(bound_at, epsilon, kind, rtol, start, step)
    return Calibration(kind, value, bound.epsilon, delta, epsilon, bound.method, evaluations, bound)


def _for_schedule(
    event: Any,
    schedule: Schedule,
    count: int,
    sampling_rate: Any,
    **target: Any,
) -> Calibration:
    """The noise multiplier of a training schedule (:mod:`dpkit.accounting.training`)."""
    if event != "gaussian":
        raise InvalidParameter(
            "event", event, "'gaussian' with epochs, batch_size and dataset_size", owner="calibrate"
        )
    if count != 1 or sampling_rate is not None:
        raise InvalidParameter(
            "count",
            count if count != 1 else sampling_rate,
            "left out with epochs, batch_size and dataset_size (they give the steps and rate)",
            owner="calibrate",
        )
    if schedule.batching == "shuffle" and normalise(target.get("others", ())):
        raise InvalidParameter(
            "others",
            target["others"],
            "left out with batching='shuffle': its guarantee is for replacing one record (the "
            "dataset size public), and costs under two neighbour relations do not add up to a "
            "bound under either",
            owner="calibrate",
        )
    probe, steps = schedule.events(1.0, 0.5)
    rate = probe.sampling_rate if isinstance(probe, SubsampledDP) else None
    found = calibrate("gaussian", count=steps, sampling_rate=rate, **target)
    if schedule.batching == "shuffle":  # each epoch is a Gaussian at σ/2: σ is twice its noise
        found = attrs.evolve(found, value=2 * found.value)
    return attrs.evolve(found, schedule=schedule)


def _gaussian_guess(epsilon: float, delta: float, count: int, rate: float | None) -> float:
    """A first σ to try (only a guess: every answer is checked with the accountant).

    k uses of σ compose to μ = √k/σ-GDP (Dong, Roth & Su 2022, Corollary 3.3); k uses
    subsampled at rate q tend to μ = q·√(k(e^{1/σ²} − 1))-GDP as k grows (the central limit
    theorem for noisy SGD of Bu, Dong, Long & Su 2020, "Deep Learning with Gaussian
    Differential Privacy", Section 2), so σ = 1/√ln(1 + μ²/(q²k)) with μ the largest μ-GDP
    meeting (ε, δ). The limit under-states ε at large ε, by ~10 % in σ for DP-SGD's ε = 8.
    """
    low, high = _LIMITS["noise_multiplier"]
    mu = gdp_mu_for(epsilon, delta)
    if not mu > 0:
        return high
    if rate is None:
        guess = math.sqrt(count) / mu
    else:
        ratio = mu / rate
        spread = ratio * ratio / count
        guess = 1.0 / math.sqrt(math.log1p(spread)) if spread > 0 else high
    return min(max(guess, low), high)


def _pure_guess(epsilon: float, delta: float, count: int, rate: float | None) -> float:
    """A first per-query ε to try for k pure events (a guess, like :func:`_gaussian_guess`).

    A pure ε₀ event is dominated by μ = 2Φ⁻¹(e^ε₀/(1 + e^ε₀))-GDP
    (:func:`dpkit.accounting.gdp.pure_mu`), about ε₀·√(π/2) for a small ε₀; as in that
    central limit, subsampling at rate q scales a small per-use μ by about q, and k uses
    compose to √k times it, so ε₀ ≈ μ/(q√k·√(π/2)) with μ the largest μ-GDP meeting (ε, δ).
    """
    mu = gdp_mu_for(epsilon, delta)
    guess = mu / ((rate or 1.0) * math.sqrt(count) * math.sqrt(math.pi / 2))
    return min(guess, epsilon) if rate is None else guess


def _solve(
    bound_at: Callable[[float], Bound],
    target: float,
    kind: str,
    rtol: float,
    start: float | None = None,
    step: float = 2.0,
) -> tuple[float, Bound]:
    """Bracket and narrow ln(x) ↦ ε(x) − target from ``start`` (default 1), stepping by
    ``step`` at first and squaring it at every step; return the end that meets the target."""
    decreasing = kind == "noise_multiplier"  # ε falls as σ grows
    low_limit, high_limit = _LIMITS[kind]

    def excess(bound: Bound) -> float:
        return bound.epsilon - target if math.isfinite(bound.epsilon) else math.inf

    x = 1.0 if start is None else start
    first = bound_at(x)
    fits = excess(first) <= 0
    # step towards more privacy if x does not fit, towards less if it does
    factor = step if fits != decreasing else 1.0 / step
    good: tuple[float, Bound] | None = (x, first) if fits else None
    bad: tuple[float, Bound] | None = None if fits else (x, first)
    while good is None or bad is None:
        x *= factor
        factor = min(factor * factor, 2.0) if factor > 1 else max(factor * factor, 0.5)
        if not low_limit <= x <= high_limit:
            raise InvalidParameter(
                "epsilon",
                target,
                f"reachable with a {kind} in [{low_limit:g}, {high_limit:g}]",
                owner="calibrate",
            )
        bound = bound_at(x)
        if excess(bound) <= 0:
            good = (x, bound)
        else:
            bad = (x, bound)
    # Illinois regula falsi on u = ln x; the bracket [good, bad] always keeps its two kinds.
    # Safeguard: bisect when three steps have not halved the bracket, or when the good end's ε
    # is 0 (ε is flat at 0 beyond the σ where δ(0) = δ: interpolation there creeps along the
    # flat end).
    side = 0
    fg, fb = excess(good[1]), excess(bad[1])  # weights; Illinois halves one now and then
    widths: list[float] = []
    for _ in range(100):
        ug, ub = math.log(good[0]), math.log(bad[0])
        width = abs(ug - ub)
        if width <= math.log1p(rtol) or -excess(good[1]) <= rtol * target:
            break
        slow = len(widths) >= 3 and width > 0.5 * widths[-3]
        widths.append(width)
        if slow or good[1].epsilon == 0:
            u = 0.5 * (ug + ub)
        elif math.isfinite(fb) and fb != fg:
            u = ug - fg * (ub - ug) / (fb - fg)
            lo_u, hi_u = sorted((ug, ub))
            margin = 0.02 * (hi_u - lo_u)
            u = min(max(u, lo_u + margin), hi_u - margin)  # never stall at an end
        else:
            u = 0.5 * (ug + ub)
        x = math.exp(u)
        bound = bound_at(x)
        f = excess(bound)
        if f <= 0:
            good, fg = (x, bound), f
            if side == -1:
                fb /= 2  # Illinois: the other end has stayed twice, halve its weight
            side = -1
        else:
            bad, fb = (x, bound), f
            if side == 1:
                fg /= 2
            side = 1
    return good


def gaussian_noise_multiplier(
    target_epsilon: float,
    *,
    delta: float,
    steps: int = 1,
    sampling_rate: float | None = None,
    others: Events | Any = (),
    method: str = "best",
) -> float:
    """The smallest noise multiplier σ for which ``steps`` Gaussian releases (Poisson-subsampled
    at ``sampling_rate`` if given), composed with ``others``, are (target_epsilon, delta)-DP:
    ``calibrate("gaussian", ...).value`` (exact without subsampling or other events)."""
    return calibrate(
        "gaussian",
        epsilon=target_epsilon,
        delta=delta,
        count=steps,
        sampling_rate=sampling_rate,
        others=others,
        method=method,
    ).value
