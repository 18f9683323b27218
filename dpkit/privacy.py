"""Privacy costs as accounting events.

A mechanism states its cost as one of these frozen values, keeping the structure an accountant
needs to compose it tightly: a Gaussian is a :class:`GaussianDP` (composed through its noise
multiplier under zCDP/RDP/PLD), randomized response is a :class:`RandomizedResponseDP` (whose
privacy-loss distribution is known exactly), not merely a generic (ε, δ) pair.

Every event exposes the ``epsilon`` and ``delta`` of one use of the mechanism.

Events that say more than (ε, δ): :class:`BoundedRangeDP` (the exponential mechanism and its
relatives: ε-bounded range, which zCDP and RDP charge ε²/8, not ε²/2) and :class:`CompositeDP`
(a query that releases several noisy parts, e.g. a mean as a noisy sum and a noisy count: each
part is composed as what it is).

Every guarantee is stated for a neighbour relation (:func:`neighbours`): adding or removing one
record, or — for sampling without replacement, where the dataset size is public — replacing
one. Guarantees under the two relations do not add up to a bound under either, so events of
both are never composed (:func:`common_neighbours`).
"""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction
from functools import lru_cache
from typing import Any, ClassVar

import attrs

from dpkit._enclosure import Arithmetic, decimal_low, settle
from dpkit.errors import InvalidParameter
from dpkit.params import Choice, Integer, Real, parameter

__all__ = [
    "ApproximateDP",
    "BoundedRangeDP",
    "CompositeDP",
    "GaussianDP",
    "LaplaceDP",
    "PrivacyEvent",
    "PureDP",
    "RandomizedResponseDP",
    "SubsampledDP",
    "common_neighbours",
    "flatten",
    "gaussian_delta",
    "gaussian_epsilon",
    "gaussian_meets",
    "gaussian_mu_epsilon",
    "neighbours",
    "share_epsilon",
]

_POSITIVE = Real(low=0.0, low_open=True)
_NON_NEGATIVE = Real(low=0.0)
_DELTA = Real(low=0.0, high=1.0, high_open=True)
_OPEN_DELTA = Real(low=0.0, high=1.0, low_open=True, high_open=True)


class PrivacyEvent:
    """Base of the accounting events; ``epsilon`` and ``delta`` describe a single use."""

    name: ClassVar[str]

    @property
    def epsilon(self) -> float:
        raise NotImplementedError

    @property
    def delta(self) -> float:
        raise NotImplementedError


@attrs.frozen
class PureDP(PrivacyEvent):
    """ε-differential privacy (δ = 0): Dwork, McSherry, Nissim & Smith 2006, Definition 1."""

    name: ClassVar[str] = "pure"
    epsilon: float = parameter(_NON_NEGATIVE, doc="privacy loss ε")

    @property
    def delta(self) -> float:
        return 0.0


@attrs.frozen
class ApproximateDP(PrivacyEvent):
    """(ε, δ)-differential privacy: Dwork & Roth 2014, Definition 2.4."""

    name: ClassVar[str] = "approx"
    epsilon: float = parameter(_NON_NEGATIVE, doc="privacy loss ε")
    delta: float = parameter(_DELTA, doc="failure probability δ")


@attrs.frozen
class RandomizedResponseDP(PrivacyEvent):
    """k-ary randomized response at level ε: pure ε-DP with a known two-point loss distribution.

    The privacy-loss random variable of k-RR takes the values ±ε (and 0 when k > 2), which a
    privacy-loss-distribution accountant composes exactly (Kairouz, Oh & Viswanath 2015).
    """

    name: ClassVar[str] = "rr"
    epsilon: float = parameter(_POSITIVE, doc="privacy loss ε")
    k: int = parameter(Integer(low=2), doc="number of categories", default=2)

    @property
    def delta(self) -> float:
        return 0.0


def _phi(x: float) -> float:
    """Standard normal CDF, accurate in both tails."""
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def _log_phi(x: float) -> float:
    """ln Φ(x) without underflow: erfc down to x = −30, then the asymptotic series
    Φ(x) = φ(x)/|x| · (1 − 1/x² + 3/x⁴ − 15/x⁶ + ...) (Abramowitz & Stegun 26.2.12)."""
    if x > -30.0:
        return math.log(0.5 * math.erfc(-x / math.sqrt(2.0)))
    inv = 1.0 / (x * x)
    series, term = 1.0, 1.0
    for n in range(1, 12):
        term *= -(2 * n - 1) * inv
        series += term
    return -0.5 * x * x - math.log(-x) - 0.5 * math.log(2 * math.pi) + math.log(series)


def gaussian_delta(epsilon: float, noise_multiplier: float) -> float:
    """Exact δ(ε) of the Gaussian mechanism with σ = noise_multiplier · Δ₂.

    Balle & Wang 2018 ("Improving the Gaussian Mechanism for Differential Privacy", Theorem 8):
    δ(ε) = Φ(Δ/(2σ) − εσ/Δ) − e^ε Φ(−Δ/(2σ) − εσ/Δ), written with μ = Δ/σ = 1/noise_multiplier,
    and evaluated in log space, δ = Φ(a)·(1 − e^{ε + ln Φ(b) − ln Φ(a)}), so that it stays
    accurate when both terms are tiny (ε in the thousands).
    """
    mu = 1.0 / noise_multiplier
    log_a = _log_phi(mu / 2.0 - epsilon / mu)
    log_b = epsilon + _log_phi(-mu / 2.0 - epsilon / mu)
    if log_b >= log_a:
        return 0.0
    return max(0.0, math.exp(log_a) * -math.expm1(log_b - log_a))


#: The precisions (significant digits) tried in turn to decide δ(ε) ≤ δ on an enclosure.
_PRECISIONS = (30, 60, 120, 240, 480)


def _profile(arithmetic: Arithmetic, epsilon: Decimal, mu_squared: Fraction) -> tuple[Any, Any]:
    """An enclosure of δ_μ(ε) = Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ) (:func:`gaussian_delta`)."""
    mu = arithmetic.sqrt(arithmetic.fraction(mu_squared))
    eps = arithmetic.point(epsilon)
    half_mu = arithmetic.scale(mu, Decimal("0.5"))
    ratio = arithmetic.div(eps, mu)
    upper = arithmetic.normal_cdf(arithmetic.sub(half_mu, ratio))
    lower = arithmetic.normal_cdf(arithmetic.sub(arithmetic.neg(half_mu), ratio))
    return arithmetic.sub(upper, arithmetic.mul(arithmetic.exp(eps), lower))


@lru_cache(maxsize=4096)
def _meets(epsilon: float, delta: float, mu_squared: Fraction) -> bool:
    """δ_μ(ε) ≤ δ, decided on an enclosure (ε and δ at their smaller readings)."""
    if mu_squared == 0:
        return True
    eps, target = decimal_low(epsilon), decimal_low(delta)
    for precision in _PRECISIONS:
        try:
            low, high = _profile(Arithmetic(precision), eps, mu_squared)
        except ArithmeticError:  # e^ε beyond even decimal's range (ε > 10^18): not shown
            return False
        if high <= target:
            return True
        if low > target:
            return False
    return False  # undecided at 480 digits: not shown to hold


def gaussian_meets(
    epsilon: float,
    delta: float,
    *,
    noise_multiplier: float | Fraction | None = None,
    mu_squared: Fraction | None = None,
) -> bool:
    """Whether the Gaussian mechanism with noise multiplier σ/Δ₂ (or μ-GDP, given μ² exactly)
    is certainly (ε, δ)-DP.

    Balle & Wang's δ(ε) (:func:`gaussian_delta`) is enclosed in outward-rounded decimal
    arithmetic (:mod:`dpkit._enclosure`), at as many digits as it takes to compare it with δ,
    so the answer is True only if the real δ(ε) is at most δ. Floats are read at their less
    favourable readings (binary or shortest decimal: the smaller ε, δ and σ/Δ₂); a
    :class:`~fractions.Fraction` noise multiplier is taken exactly.
    """
    if (noise_multiplier is None) == (mu_squared is None):
        raise TypeError("give exactly one of noise_multiplier and mu_squared")
    if isinstance(noise_multiplier, Fraction):
        mu_squared = 1 / noise_multiplier**2
    elif noise_multiplier is not None:
        mu_squared = 1 / Fraction(decimal_low(noise_multiplier)) ** 2
    assert mu_squared is not None
    return _meets(epsilon, delta, mu_squared)


def gaussian_mu_epsilon(delta: float, mu_squared: Fraction) -> float:
    """The smallest ε, rounded up, with δ_μ(ε) ≤ δ for μ-GDP — the ε at δ of the Gaussian
    with noise multiplier 1/μ, or of any composition of Gaussians with Σ 1/σ_i² = μ².

    Bisection on the float curve (:func:`gaussian_delta`) finds the root to about 1e-12; the
    answer is then checked on a rigorous enclosure of the curve (:func:`gaussian_meets`) and
    moved up until the check passes, so it is never below the real ε — the float curve can be
    off by far more than its bisection tolerance where its two terms nearly cancel (a large
    noise multiplier at a tiny δ). Within the bracket, the shortest decimal that passes the
    check is returned, so a noise multiplier calibrated for ε = 0.1 reports exactly 0.1 (and
    exact budgets add up).
    """
    if mu_squared == 0:
        return 0.0
    try:
        noise_multiplier = 1.0 / math.sqrt(float(mu_squared))  # for the float search only
    except OverflowError:
        return math.inf
    if noise_multiplier == 0 or not math.isfinite(noise_multiplier):
        return math.inf if noise_multiplier == 0 else 0.0

    def holds(epsilon: float) -> bool:
        return _meets(epsilon, delta, mu_squared)

    if gaussian_delta(0.0, noise_multiplier) <= delta and holds(0.0):
        return 0.0
    lo, hi = 0.0, 1.0
    while gaussian_delta(hi, noise_multiplier) > delta and math.isfinite(hi):
        lo, hi = hi, hi * 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if gaussian_delta(mid, noise_multiplier) > delta:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * hi:
            break
    certified = settle(hi, holds)
    if certified != hi:
        lo = max(lo, hi)  # hi itself failed the check
    for digits in range(1, 17):  # lo < ε ≤ certified: the shortest decimal that passes
        short = float(f"{certified:.{digits}g}")
        if lo < short <= certified and holds(short):
            return short
    return certified


def gaussian_epsilon(delta: float, noise_multiplier: float) -> float:
    """The smallest ε, rounded up, with δ(ε) ≤ δ for the Gaussian mechanism
    (:func:`gaussian_mu_epsilon` at μ = 1/noise_multiplier, the noise multiplier read at
    its smaller reading)."""
    return gaussian_mu_epsilon(delta, 1 / Fraction(decimal_low(noise_multiplier)) ** 2)


@attrs.frozen
class GaussianDP(PrivacyEvent):
    """The Gaussian mechanism with noise multiplier σ/Δ₂, with the δ at which ε is reported.

    Accountants compose it through ``noise_multiplier`` (zCDP ρ = 1/(2·nm²), Bun & Steinke 2016,
    Proposition 1.6). ``epsilon`` is the exact ε at ``delta`` from the analytic curve of Balle &
    Wang 2018, so it is never larger than a classic-calibration ε.
    """

    name: ClassVar[str] = "gaussian"
    noise_multiplier: float = parameter(_POSITIVE, doc="σ / Δ₂")
    delta: float = parameter(_OPEN_DELTA, doc="δ at which ε is reported")

    @property
    def epsilon(self) -> float:
        return gaussian_epsilon(self.delta, self.noise_multiplier)


@attrs.frozen
class LaplaceDP(PrivacyEvent):
    """The Laplace mechanism at level ε (noise scale Δ₁/ε): pure ε-DP with a known loss law.

    Dwork, McSherry, Nissim & Smith 2006, Section 3. Its privacy loss lies in [−ε, ε] with
    atoms P[L = ε] = 1/2, P[L = −ε] = e^{−ε}/2 and a density in between, so RDP and PLD
    accountants compose it more tightly than a generic :class:`PureDP` (Mironov 2017, Table II).
    """

    name: ClassVar[str] = "laplace"
    epsilon: float = parameter(_POSITIVE, doc="privacy loss ε = Δ₁ / scale")

    @property
    def delta(self) -> float:
        return 0.0


@attrs.frozen
class BoundedRangeDP(PrivacyEvent):
    """ε-bounded range (Durfee & Rogers 2019, "Practical Differentially Private Top-k Selection
    with Pay-what-you-get Composition", Definition 3.1): for neighbours x, x′ the privacy loss
    ln(P(o)/Q(o)) lies in an interval of width ε, over all outputs o.

    An ε-BR mechanism is ε-DP, and it is (ε²/8)-zCDP (Cesar & Rogers 2021, "Bounding,
    Concentrating, and Truncating: Unifying Privacy Loss Composition for Data Analytics",
    Section 3), four times less than the ε²/2 of a generic pure ε-DP mechanism. The
    exponential mechanism at level ε — Pr[o] ∝ exp(ε·u(o)/(2Δu)), or exp(ε·u(o)/Δu) for
    monotone utilities — is ε-BR (Durfee & Rogers 2019, Section 3): its loss is
    ε·(u(o) − u′(o))/(2Δu) minus a constant that does not depend on o, and u − u′ ∈ [−Δu, Δu]
    (∈ [0, Δu] or [−Δu, 0] when monotone). The continuous quantile mechanism of Smith 2011 is
    the exponential mechanism with a fixed base measure, so it is ε-BR too.
    """

    name: ClassVar[str] = "bounded_range"
    epsilon: float = parameter(_POSITIVE, doc="privacy loss ε (the width of the loss range)")

    @property
    def delta(self) -> float:
        return 0.0


def _check_parts(instance: Any, field: attrs.Attribute[Any], value: Any) -> None:
    if (
        not isinstance(value, tuple)
        or not value
        or not all(isinstance(part, PrivacyEvent) for part in value)
    ):
        raise InvalidParameter(
            field.name, value, "a non-empty tuple of PrivacyEvent", owner="composite"
        )
    common_neighbours(value, owner="composite", field=field.name)


def _as_tuple(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


@attrs.frozen
class CompositeDP(PrivacyEvent):
    """One release made of several independent noisy parts, run together on the same data.

    The parts compose like separate releases (Dwork & Roth 2014, Theorem 3.16 for (ε, δ); each
    accountant composes them with its own rule), so a mean released as a Laplace sum and a
    Laplace count at ε/2 each is ``CompositeDP((LaplaceDP(ε/2), LaplaceDP(ε/2)))``: under zCDP
    that costs 2·(ε/2)·tanh(ε/4), about half of a single pure ε event's ε·tanh(ε/2).
    ``epsilon`` and ``delta`` are the basic-composition totals Σε_i and Σδ_i.
    """

    name: ClassVar[str] = "composite"
    parts: tuple[PrivacyEvent, ...] = attrs.field(converter=_as_tuple, validator=_check_parts)

    @property
    def epsilon(self) -> float:
        return math.fsum(part.epsilon for part in self.parts)

    @property
    def delta(self) -> float:
        return math.fsum(part.delta for part in self.parts)


def flatten(event: PrivacyEvent) -> list[PrivacyEvent]:
    """The parts of an event, composites expanded recursively (other events are one part)."""
    if isinstance(event, CompositeDP):
        return [leaf for part in event.parts for leaf in flatten(part)]
    return [event]


def _check_event(instance: Any, field: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, PrivacyEvent) or isinstance(value, (SubsampledDP, CompositeDP)):
        raise InvalidParameter(
            field.name,
            value,
            "a PrivacyEvent that is neither subsampled nor composite",
            owner="subsampled",
        )


def share_epsilon(epsilon: float, parts: int) -> float:
    """The largest double e with parts·e ≤ ε exactly: each of ``parts`` releases' share of ε,
    ε at the smaller of its two readings (its binary value and its shortest decimal, which is
    what a ledger charges: :func:`dpkit._enclosure.decimal_low`), so that the parts never add
    up to more than the charge whichever reading their samplers take.

    The float quotient ε/k is rounded to the nearest double and so lies above ε/k for about
    two in five (ε, k); k releases each realising that quotient then compose (basic
    composition, Dwork & Roth 2014, Theorem 3.16) to more than the declared ε: secure pm_multi
    at ε = 5, k = 3 realised 5 + 2.2·10⁻¹⁶ (its lattice realises the quotient itself), and a
    table quantile's ε/(G·R) per group likewise.
    Stepping down one double where the exact product exceeds ε keeps the sum of the parts at
    or below ε, exactly.
    """
    whole = Fraction(decimal_low(epsilon))
    share = epsilon / parts
    while share > 0 and Fraction(share) * parts > whole:
        share = math.nextafter(share, 0.0)
    return share


#: The neighbour relations a guarantee may be stated under (:func:`neighbours`).
NEIGHBOURS = ("add_remove", "replace_one")
_RELATION_WORDS = {
    "add_remove": "adding or removing one record",
    "replace_one": "replacing one record (sampling without replacement)",
}


def neighbours(event: PrivacyEvent) -> str:
    """The neighbour relation ``event``'s guarantee is stated under: ``"replace_one"`` for a
    :class:`SubsampledDP` without replacement (the dataset size is public, and neighbours
    replace one record), ``"add_remove"`` for every other built-in event; a composite's parts
    share one (:class:`CompositeDP` checks it), and a third-party event may declare its own as
    a ``neighbours`` attribute.

    The two do not compose. An add/remove guarantee implies the replace-one guarantee only
    at twice the cost (a replacement is a removal and an addition: group privacy for two,
    Dwork & Roth 2014, Theorem 2.2), and a replace-one guarantee says nothing about
    neighbours of two sizes; summing costs stated under each bounds neither.
    """
    if isinstance(event, SubsampledDP):
        return "replace_one" if event.scheme == "without_replacement" else "add_remove"
    if isinstance(event, CompositeDP):
        return neighbours(event.parts[0])
    declared = getattr(event, "neighbours", "add_remove")
    return declared if declared in NEIGHBOURS else "add_remove"


def common_neighbours(events: Any, *, owner: str = "account", field: str = "events") -> str | None:
    """The one neighbour relation of ``events`` (events or ``(event, count)`` pairs; None if
    there are none), or :class:`~dpkit.errors.InvalidParameter` if they mix the two: their
    costs would not add up to a bound under either (:func:`neighbours`)."""
    found: dict[str, Any] = {}
    for item in events:
        event = item[0] if isinstance(item, tuple) else item
        found.setdefault(neighbours(event), event)
    if len(found) > 1:
        raise InvalidParameter(
            field,
            found["replace_one"],
            "under one neighbour relation: this one's guarantee is for "
            f"{_RELATION_WORDS['replace_one']}, another's ({found['add_remove']!r}) for "
            f"{_RELATION_WORDS['add_remove']}, and such guarantees do not add up to a bound "
            "under either (state every event under replacement, e.g. subsample each without "
            "replacement, or account them apart)",
            owner=owner,
        )
    return next(iter(found), None)


#: The subsampling schemes of :class:`SubsampledDP`.
SCHEMES = ("poisson", "without_replacement")


@attrs.frozen
class SubsampledDP(PrivacyEvent):
    """``event`` run on a random subsample of the data.

    ``scheme="poisson"`` (the default): each record is kept independently with probability
    q = ``sampling_rate``; neighbouring datasets differ by adding or removing one record, and
    ``event`` states its guarantee under that relation.

    ``scheme="without_replacement"``: a uniformly random subset of m of the n records, with
    q = m/n; the dataset size is public and neighbours differ by *replacing* one record, and
    ``event`` must state its guarantee under replacement (a Gaussian sum of records clipped to
    norm C has L2 sensitivity 2C under replacement, not C: its noise multiplier is σ/(2C)).

    Costs. For a generic (ε, δ) event both schemes give (ln(1 + q(e^ε − 1)), qδ) (Balle,
    Barthe & Gaboardi 2018, "Privacy Amplification by Subsampling", Theorems 8 and 9). The
    privacy-loss-distribution accountant uses the dominating pairs of Zhu, Dong & Wang 2022
    ("Optimal Accounting of Differential Privacy via Characteristic Function", Section 5):
    if (P, Q) dominates ``event``, then (qP + (1 − q)Q, Q) and (P, (1 − q)P + qQ) dominate
    the subsampled event for removal and addition, and its profile is the larger of the two
    (:mod:`dpkit.accounting.pld`).
    """

    name: ClassVar[str] = "subsampled"
    event: PrivacyEvent = attrs.field(validator=_check_event)
    sampling_rate: float = parameter(
        Real(low=0.0, high=1.0, low_open=True), doc="sampling rate q (m/n without replacement)"
    )
    scheme: str = parameter(
        Choice(SCHEMES), doc="'poisson' or 'without_replacement'", default="poisson"
    )

    @property
    def epsilon(self) -> float:
        """ln(1 + q(e^ε − 1)); beyond ε = 700 as ε + ln(q + (1 − q)e^−ε) (no overflow)."""
        epsilon, q = self.event.epsilon, self.sampling_rate
        if epsilon > 700:
            return epsilon + math.log(q + (1 - q) * math.exp(-epsilon))
        return math.log1p(q * math.expm1(epsilon))

    @property
    def delta(self) -> float:
        return self.sampling_rate * self.event.delta
