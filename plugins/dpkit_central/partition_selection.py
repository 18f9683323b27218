"""Differentially private partition selection: which groups found in the data may be released.

A group-by over keys read from the data reveals the keys themselves: a group held by one
person appears in the output only if that person is in the data. Releasing noisy values is
not enough; the *set* of released groups must be DP too (Korolova, Kenthapadi, Mishra &
Ntoulas 2009, "Releasing search queries and clicks privately", WWW, Section 4; Gopi et al.
2020, "Differentially private set union", ICML).

**The mechanism** (Desfontaines, Voss, Gipson & Mandayam 2022, "Differentially private
partition selection", PoPETs 2022(1), Theorem 1). When each privacy unit contributes to one
partition, the partition with n units is kept with probability π(n), where π(0) = 0 and

    π(n) = min( e^ε·π(n−1) + δ,  1 − e^(−ε)·(1 − π(n−1) − δ),  1 ).

Adding a unit moves n by one, and the two constraints of (ε, δ)-DP for the two outputs
(keep: π(n) ≤ e^ε π(n−1) + δ; drop: 1 − π(n−1) ≤ e^ε (1 − π(n)) + δ) are met with equality
until π reaches 1; the other two directions hold because π is non-decreasing. The paper proves
that no (ε, δ)-DP mechanism keeps any partition with higher probability, and that π(n) is the
distribution of thresholding n plus truncated geometric noise ("truncated geometric
thresholding"). In particular a partition held by one unit is released with probability
π(1) = δ.

**Several partitions per unit.** An id may contribute to up to G = ``max_groups`` partitions
(after contribution bounding, :mod:`dpkit.tables.bounding`). Each partition's decision is then
made at (ε/G, δ/G); adding or removing one id changes the unit counts of at most G partitions by
one each, and the decisions are independent, so by basic composition (Dwork & Roth 2014,
Theorem 3.16) the released set is (ε, δ)-DP — the budget split the paper describes for this
case (Section 4.3; it is not optimal there).

**Exactness.** The keep probabilities are integers K_n on the 2⁻⁶⁴ grid computed with
directed rounding, so both constraints hold *exactly* for the true e^ε and δ:
K_n = min(⌊L·K_{n−1}⌋ + D, 2⁶⁴ − ⌈E·(2⁶⁴ − K_{n−1} − D)⌉, 2⁶⁴) with L ≤ e^(ε/G) and
E ≥ e^(−ε/G) rational bounds (60-digit decimal arithmetic, widened by 10⁻⁴⁵) and
D = ⌊2⁶⁴·δ/G⌋. Then K_n/2⁶⁴ ≤ e^(ε/G)·K_{n−1}/2⁶⁴ + δ/G and 2⁶⁴ − K_n ≥ e^(−ε/G)·(2⁶⁴ −
K_{n−1} − 2⁶⁴δ/G), which are the two constraints; K is non-decreasing (L ≥ 1, E ≤ 1). ε and
δ are taken at the smaller of their two readings (binary value, shortest decimal: the ledger
charges the decimal), so the constraints hold for what is charged. A partition is kept when a
uniform 64-bit word is below K_n (exact, in both randomness modes).
"""

from __future__ import annotations

import decimal
import math
from fractions import Fraction
from typing import Any, ClassVar

import attrs
import numpy as np
from numpy.typing import NDArray

from dpkit.plugin import (
    CENTRAL_EPSILON,
    MAX_BOUND,
    ApproximateDP,
    Integer,
    InvalidParameter,
    Real,
    SecureRandom,
    parameter,
    resolve_rng,
)
from dpkit_central._noise import smaller_reading

__all__ = ["MAX_STEPS", "PartitionSelection", "keep_thresholds"]

#: The keep probabilities reach 1 after about 2·ln(1/δ)/ε steps; more than this many is
#: refused (ε/G too small for a table of thresholds).
MAX_STEPS = 1 << 20
_ONE = 1 << 64
_DIGITS = 60
_WIDEN = Fraction(1, 10**45)


#: Beyond this ε per decision the table is the same for every ε: e^50 > 2⁶⁴ · e^5, so one unit
#: already grows past 2⁶⁴ and e^(−ε)·2⁶⁴ < 1 rounds up to 1 unit alike. ε is capped here, which
#: keeps L ≤ e^ε and E ≥ e^(−ε) and spares decimal an e^(10¹²) beyond its exponent range.
_EPSILON_CAP = Fraction(50)


def _exp_bounds(epsilon: Fraction) -> tuple[Fraction, Fraction]:
    """(L, E) with L ≤ e^ε and E ≥ e^(−ε), as rationals (ε ≥ 0 exact; capped at 50)."""
    epsilon = min(epsilon, _EPSILON_CAP)
    with decimal.localcontext() as context:
        context.prec = _DIGITS
        eps = decimal.Decimal(epsilon.numerator) / decimal.Decimal(epsilon.denominator)
        up, down = Fraction(eps.exp()), Fraction((-eps).exp())
    # exp is correctly rounded at 60 digits and the division errs by < 1e-59 in ε; widening
    # by 1e-45 (relative) covers both with a wide margin.
    return up * (1 - _WIDEN), down * (1 + _WIDEN)


def _too_small(epsilon: float, per_group: Fraction) -> None:
    raise InvalidParameter(
        "epsilon",
        epsilon,
        f"large enough that the keep probabilities reach 1 within {MAX_STEPS} units "
        f"(about 2·ln(G/δ)/(ε/G) are needed; ε/G = {float(per_group):.3g})",
        owner="partition selection",
        path=("group_by", "selection", "epsilon"),
    )


def keep_thresholds(epsilon: float, delta: float, max_groups: int = 1) -> tuple[int, ...]:
    """K_0 = 0, K_1, … up to the first K_n = 2⁶⁴ (excluded): a partition with n units is kept
    with probability K_n/2⁶⁴ (1 for n beyond the table). See the module docstring."""
    eps = smaller_reading(epsilon) / max_groups  # never above what the ledger charges
    # π grows by e^ε per unit from δ to about 1/2, then 1 − π shrinks likewise: about
    # 2·ln(1/δ)/ε units in all. Refuse at once what the loop below would refuse at the end.
    if 2.0 * math.log(max_groups / delta) / float(eps) > MAX_STEPS:
        _too_small(epsilon, eps)
    low_exp, high_neg_exp = _exp_bounds(eps)
    d = (smaller_reading(delta) * _ONE / max_groups).__floor__()
    if d == 0:  # δ/G below one unit of 2⁻⁶⁴: no key could ever be released
        raise InvalidParameter(
            "delta",
            delta,
            f">= max_groups/2^64 = {max_groups / _ONE:.3g}, so that a key held by a few ids "
            "can be released at all",
            owner="partition selection",
            path=("group_by", "selection", "delta"),
        )
    thresholds = [0]
    k = 0
    while k < _ONE:
        if len(thresholds) > MAX_STEPS:
            _too_small(epsilon, eps)
        grow = (low_exp * k).__floor__() + d
        rest = _ONE - k - d
        shrink = _ONE - (high_neg_exp * rest).__ceil__() if rest > 0 else _ONE
        k = min(grow, shrink, _ONE)
        if k < _ONE:
            thresholds.append(k)
    return tuple(thresholds)


@attrs.frozen
class PartitionSelection:
    """Keep each partition with the optimal probability π(n) of its number n of units.

    ``epsilon`` and ``delta`` are the cost of the whole released set when an id contributes to at
    most ``max_groups`` partitions (each decision uses ε/G, δ/G). See the module docstring
    for the mechanism, its source and the exact arithmetic.
    """

    name: ClassVar[str] = "partition_selection"
    epsilon: float = parameter(CENTRAL_EPSILON, doc="privacy loss ε of the released key set")
    delta: float = parameter(
        Real(low=1e-200, high=1.0, low_open=False, high_open=True),
        doc="δ of the released key set: a key held by one id is released with probability ≤ δ",
    )
    max_groups: int = parameter(
        Integer(low=1, high=MAX_BOUND), doc="partitions one id may contribute to", default=1
    )
    thresholds: tuple[int, ...] = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(
            self, "thresholds", keep_thresholds(self.epsilon, self.delta, self.max_groups)
        )

    @property
    def privacy(self) -> ApproximateDP:
        return ApproximateDP(epsilon=self.epsilon, delta=self.delta)

    def keep_probability(self, units: int) -> Fraction:
        """The exact probability that a partition with ``units`` units is kept."""
        if units < len(self.thresholds):
            return Fraction(self.thresholds[max(units, 0)], _ONE)
        return Fraction(1)

    def units_needed(self, level: float) -> int:
        """The fewest units a partition needs to be kept with probability ≥ ``level``."""
        if not 0.0 < level < 1.0:
            raise InvalidParameter("level", level, "a real number in (0, 1)", owner=self.name)
        target = Fraction(level)
        for n, k in enumerate(self.thresholds):
            if Fraction(k, _ONE) >= target:
                return n
        return len(self.thresholds)

    def select(self, units: Any, /, *, rng: Any = None) -> NDArray[np.bool_]:
        """Which partitions to keep, given each one's number of units (after bounding).

        A partition is kept when a uniform 64-bit word is below K_n: exactly K_n/2⁶⁴ in both
        modes (secure words, or a Generator's exact uniform integers). Total: negative counts
        are read as 0, counts beyond the table as "keep".
        """
        generator = resolve_rng(rng, owner=self.name)[0]
        n = np.clip(np.asarray(units, dtype=np.int64), 0, len(self.thresholds))
        if n.size == 0:
            return np.zeros(0, dtype=np.bool_)
        table = np.array(self.thresholds, dtype=np.uint64)
        inside = n < len(self.thresholds)
        threshold = table[np.minimum(n, len(self.thresholds) - 1)]
        if isinstance(generator, SecureRandom):
            words = generator.words(n.size)
        else:
            words = generator.integers(0, _ONE, size=n.size, dtype=np.uint64)
        return np.asarray(~inside | (words < threshold), dtype=np.bool_)

    def release_probability_bound(self) -> float:
        """π(1): the probability that a key held by a single id is released (≤ δ/G ≤ δ)."""
        return float(self.keep_probability(1))

    def expected_steps(self) -> int:
        """The number of unit counts with a keep probability below 1 (the table's length)."""
        return len(self.thresholds)

    def describe(self) -> str:
        return (
            f"partition selection (ε={self.epsilon:g}, δ={self.delta:g}; keys need "
            f"{self.units_needed(0.95)} ids for a 95% chance)"
        )
