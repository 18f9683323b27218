"""Quantile: the q-quantile of values clamped to [lower, upper], by the exponential mechanism
(per group over a table, on its lattice in both modes)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction
from typing import Any, ClassVar

import attrs
import numpy as np
from numpy.typing import NDArray

from dpkit.plugin import (
    BOUND,
    CENTRAL_EPSILON,
    BoundedRangeDP,
    ColumnKind,
    Real,
    SecureRandom,
    parameter,
    resolve_rng,
    share_epsilon,
)
from dpkit_central._noise import smaller_reading
from dpkit_central._query import (
    NAN_POLICY,
    Query,
    QueryResult,
    bounds_check,
    clamped,
    numeric_records,
)
from dpkit_central._selection import nearest_rank_secure
from dpkit_central.accuracy import Accuracy, check_alpha, mode_of
from dpkit_central.exponential import sample_by_weight, utility_guarantee
from dpkit_central.intervals import RankInterval
from dpkit_central.records import VALUE, numeric_value
from dpkit_central.statistic import Contribution, Released, cell_runs

__all__ = ["QUANTILE_LATTICE_BITS", "Quantile"]

#: Secure-mode quantiles lie on multiples of 2^(⌈log₂(upper − lower)⌉ − QUANTILE_LATTICE_BITS).
QUANTILE_LATTICE_BITS = 30


def _power_of_two(exponent: int) -> Fraction:
    return Fraction(2) ** exponent


@attrs.frozen
class Quantile(Query):
    """The q-quantile of values clamped to [lower, upper], by the exponential mechanism.

    Smith 2011 ("Privacy-preserving statistical estimation with optimal convergence rates",
    STOC), Section 3: sort the clamped values z₁ ≤ … ≤ z_n, set z₀ = L and z_{n+1} = U; every
    v in the interval (z_i, z_{i+1}) has i records below it and utility u(v) = −|i − q·n|.
    Adding or removing one record changes i by at most 1 and q·n by q, in the same direction
    when the record lies below v, so Δu = max(q, 1 − q) ≤ 1 and Δu = 1 is used. The output has
    density ∝ exp(ε·u(v)/2) on [L, U] (the exponential mechanism with the Lebesgue base measure,
    McSherry & Talwar 2007), sampled exactly: choose interval i with probability
    ∝ (z_{i+1} − z_i)·exp(ε·u_i/2) (empty intervals never), then a uniform point inside it.
    That is **fast mode** (a numpy Generator): the float point inside the interval is computed
    from the two data values around it, so its low bits depend on the data.

    **Secure mode** (``rng=None`` or a SecureRandom) runs the exponential mechanism on a finite
    output set instead, the lattice Ω = {m·h : m ∈ ℤ, L ≤ m·h ≤ U} with
    h = 2^(⌈log₂(U − L)⌉ − 30) (so Ω has 2²⁹ to 2³⁰ + 1 points, fixed by the bounds alone),
    with the counting measure as base measure: output v ∈ Ω with probability
    ∝ exp(ε·u(v)/2), u(v) = −|#{j : x_j < v} − q·n| as above (McSherry & Talwar 2007, Theorem 6;
    Dwork & Roth 2014, Theorem 3.10: ε-DP over any finite range, since Δu ≤ 1 holds pointwise
    for every v). The data are never rounded: every v ∈ Ω has a well-defined rank. The lattice
    points of rank i are those in (z_i, z_{i+1}] (z₀ = −∞, z_{n+1} = +∞), c_i of them, with
    c_i = ⌊z_{i+1}/h⌋ − ⌊z_i/h⌋ counted exactly in integers (and ⌈L/h⌉ − 1, ⌊U/h⌋ at the ends),
    so the sampler picks rank i with probability ∝ c_i·exp(ε·u_i/2) (an interval holding no
    lattice point has c_i = 0 and is never chosen) and then a uniform lattice point among those
    c_i (an exactly uniform integer). This is Smith 2011's sampler with the interval *length*
    replaced by its number of lattice points. Every output is a multiple of h whatever the data.
    The rank is drawn exactly (:func:`~dpkit_central._selection.nearest_rank_secure`: exact
    coins on the rational gaps ε·(|i − q·n| − d*)/2, q·n exact too); the output is a lattice
    point chosen by integers, so no low bit depends on the data. (Floating-point weights would
    not do: the inverse CDF on a 2⁻⁵³ grid gives a rank whose weight is a positive subnormal
    probability 2⁻⁵³ — or more — however small its true probability, and one whose weight
    underflows none, so two neighbours' probabilities of an output could be 2⁻⁵³ and 0.)

    Records are clamped to [L, U] (±inf included); missing ones (NaN, None, text in an object
    array) are dropped (``nan="drop"``); with no record left the output is uniform on [L, U]
    (on Ω in secure mode).
    """

    name: ClassVar[str] = "quantile"
    q: float = parameter(Real(low=0.0, high=1.0), doc="the quantile level in [0, 1]")
    lower: float = parameter(BOUND, doc="lower clamping bound")
    upper: float = parameter(BOUND, doc="upper clamping bound (> lower)")
    epsilon: float = parameter(CENTRAL_EPSILON, doc="privacy loss ε", typical=(0.05, 6.0))
    nan: str = parameter(NAN_POLICY, doc="missing values (NaN, None, text): 'drop'", default="drop")

    def __attrs_post_init__(self) -> None:
        bounds_check(self)

    @property
    def privacy(self) -> BoundedRangeDP:
        """The exponential mechanism with a fixed base measure: ε-bounded range (Durfee &
        Rogers 2019), which zCDP and RDP charge ε²/8 (Cesar & Rogers 2021)."""
        return BoundedRangeDP(epsilon=self.epsilon)

    def log_weights(self, data: Any, /) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """(interval end points z₀..z_{n+1}, log weight of each of the n + 1 intervals)."""
        records = numeric_records(data, self.name)
        z = np.sort(clamped(records, self.lower, self.upper))
        edges = np.concatenate(([self.lower], z, [self.upper]))
        n = records.shape[0]
        rank = np.arange(n + 1, dtype=np.float64)
        with np.errstate(divide="ignore", over="ignore"):  # over: only for bounds near ±1.8e308
            log_width = np.log(np.diff(edges))
        return edges, log_width - 0.5 * self.epsilon * np.abs(rank - self.q * n)

    def lattice_points(self) -> int:
        """The number m of secure-mode outputs: lattice points m·h in [L, U]."""
        h = self.lattice_step()
        return math.floor(self.upper / h) - math.ceil(self.lower / h) + 1

    def accuracy(self, alpha: float = 0.05, *, rng: Any = None) -> Accuracy:
        """In secure mode the output's rank is within (2/ε)(ln m + ln(1/α)) of the best
        achievable rank with probability ≥ 1 − α (m = :meth:`lattice_points`; Dwork & Roth
        2014, Theorem 3.11, with Δu = 1), reported in ranks. Fast mode has no data-free bound
        (its continuous density depends on the gaps between values): ``half_width`` is None."""
        alpha = check_alpha(alpha, self.name)
        half = None
        if isinstance(mode_of(rng), SecureRandom):
            half = utility_guarantee(
                epsilon=self.epsilon,
                sensitivity=1.0,
                candidates=self.lattice_points(),
                t=math.log(1.0 / alpha),
            )
        return Accuracy(self.name, self.privacy, 1.0 - alpha, half_width=half, unit="ranks")

    def lattice_step(self) -> float:
        """h = 2^(⌈log₂(U − L)⌉ − 30): the spacing of secure-mode outputs (from the bounds only).

        U − L is taken exactly (as a rational: it may not be a double, or may overflow one).
        """
        span = Fraction(self.upper) - Fraction(self.lower)
        exponent = span.numerator.bit_length() - span.denominator.bit_length()
        while _power_of_two(exponent) < span:  # at most two steps either way
            exponent += 1
        while _power_of_two(exponent - 1) >= span:
            exponent -= 1
        return math.ldexp(1.0, max(exponent - QUANTILE_LATTICE_BITS, -1074))

    def lattice_log_weights(
        self, data: Any, /
    ) -> tuple[int, NDArray[np.float64], NDArray[np.float64]]:
        """(base, bounds, log weights) of the secure-mode exponential mechanism.

        Rank i holds the lattice indices m with base + bounds[i] < m ≤ base + bounds[i + 1]
        (m·h is the output), and its log weight is ln c_i − ε·|i − q·n|/2 with
        c_i = bounds[i + 1] − bounds[i] (−inf when c_i = 0). ``base`` = ⌊L/h⌋ is a Python int;
        the bounds are exact small integers held in float64: ⌊z/h⌋ and ⌊L/h⌋ are exact (h is a
        power of two) and their difference is an integer below 2³², so it is exact too.
        """
        base, bounds, ranks = self._lattice_ranks(data)
        return base, bounds, self._log_weights(bounds, ranks)

    def _lattice_ranks(self, data: Any) -> tuple[int, NDArray[np.float64], NDArray[np.int64]]:
        """(base, bounds, ranks) of :meth:`lattice_log_weights`: rank i on interval i."""
        records = numeric_records(data, self.name)
        h = self.lattice_step()
        low = self.lower / h
        base_f = math.floor(low)
        z = np.sort(clamped(records, self.lower, self.upper))
        inner = np.floor(z / h) - float(base_f)
        first = -1.0 if low == base_f else 0.0  # ⌈L/h⌉ − 1 − ⌊L/h⌋
        last = float(math.floor(self.upper / h)) - float(base_f)
        bounds = np.concatenate(([first], inner, [last]))
        return int(base_f), bounds, np.arange(records.shape[0] + 1, dtype=np.int64)

    def _log_weights(self, bounds: NDArray[np.float64], ranks: NDArray[np.int64]) -> Any:
        """ln c_i − ε·|r_i − q·n|/2 (n the last rank), in floating point (fast mode)."""
        n = float(ranks[-1])
        with np.errstate(divide="ignore"):
            log_count = np.log(np.diff(bounds))
        rank = ranks.astype(np.float64)
        return log_count - 0.5 * self.epsilon * np.abs(rank - self.q * n)

    def lattice_cell(self, values: Any) -> NDArray[np.float64]:
        """⌊clamp(x, L, U)/h⌋ of each value, as exact integers held in float64 (h a power of
        two: the division is exact). The cells and how many records lie in each are all that
        the secure-mode mechanism reads of the data (:meth:`cell_log_weights`)."""
        return np.floor(
            clamped(np.asarray(values, dtype=np.float64), self.lower, self.upper)
            / self.lattice_step()
        )

    def cell_log_weights(
        self, cells: Any, counts: Any, /
    ) -> tuple[int, NDArray[np.float64], NDArray[np.float64]]:
        """:meth:`lattice_log_weights` from the distinct cells ⌊z/h⌋ of the clamped records
        (increasing) and the number of records in each, instead of the records.

        With distinct cells d₁ < … < d_K holding m₁, …, m_K records, the ranks of the records'
        intervals (z_i, z_{i+1}] that hold a lattice point are M_k = m₁ + … + m_k: rank 0 on
        (first, d₁], rank M_k on (d_k, d_{k+1}], rank n on (d_K, last]; every other rank's
        interval is empty (c_i = 0, weight 0). So the mechanism is the same distribution over
        Ω, from K + 1 weights — an aggregate an engine computes per group (a count per cell)
        without sending any record to the driver. Returns (base, bounds, log weights) with
        bounds = (first, d₁ − base, …, d_K − base, last) and the interval k's log weight
        ln c_k − ε·|M_k − q·n|/2.
        """
        base, bounds, ranks = self._cell_ranks(cells, counts)
        return base, bounds, self._log_weights(bounds, ranks)

    def _cell_ranks(
        self, cells: Any, counts: Any
    ) -> tuple[int, NDArray[np.float64], NDArray[np.int64]]:
        """(base, bounds, ranks) of :meth:`cell_log_weights`."""
        cell = np.asarray(cells, dtype=np.float64).reshape(-1)
        count = np.asarray(counts, dtype=np.int64).reshape(-1)
        h = self.lattice_step()
        low = self.lower / h
        base_f = math.floor(low)
        first = -1.0 if low == base_f else 0.0
        last = float(math.floor(self.upper / h)) - float(base_f)
        bounds = np.concatenate(([first], cell - float(base_f), [last]))
        return int(base_f), bounds, np.concatenate(([0], np.cumsum(count))).astype(np.int64)

    def run_cells(self, cells: Any, counts: Any, /, *, rng: Any = None) -> QueryResult:
        """The secure-mode mechanism (:meth:`cell_log_weights`) on per-cell counts, with
        either kind of ``rng`` (the output is a lattice point in both modes)."""
        rng = resolve_rng(rng, owner=self.name)[0]
        return self._sample_lattice(*self._cell_ranks(cells, counts), rng)

    def _lattice_run(self, data: Any, rng: Any) -> QueryResult:
        return self._sample_lattice(*self._lattice_ranks(data), rng)

    def _sample_lattice(
        self, base: int, bounds: NDArray[np.float64], ranks: NDArray[np.int64], rng: Any
    ) -> QueryResult:
        """A rank with probability ∝ c_i·exp(−ε·|r_i − q·n|/2), then a uniform lattice point
        of it: on a SecureRandom exactly (:func:`~dpkit_central._selection.nearest_rank_secure`,
        q·n and ε/2 as exact rationals, ε at its smaller reading), with a Generator from the
        float weights."""
        if isinstance(rng, SecureRandom):
            counts = np.diff(bounds).astype(np.int64)  # exact integers below 2³²
            target = Fraction(self.q) * int(ranks[-1])
            rate = smaller_reading(self.epsilon) / 2  # never above the ledger's ε
            i = nearest_rank_secure(ranks, counts, target, rate, rng)
        else:
            i = int(sample_by_weight(self._log_weights(bounds, ranks), rng))
        below, count = int(bounds[i]), int(bounds[i + 1] - bounds[i])
        m = base + below + 1 + int(rng.integers(0, count))
        value = float(m) * self.lattice_step()  # rounding m·h to a double is post-processing
        rule = RankInterval(self.epsilon, self.lattice_points(), self.q)
        return QueryResult(self.name, value, "exponential", self.privacy, interval=rule)

    def run(self, data: Any, /, *, rng: Any = None) -> QueryResult:
        rng = resolve_rng(rng, owner=self.name)[0]
        if isinstance(rng, SecureRandom):
            return self._lattice_run(data, rng)
        edges, log_w = self.log_weights(data)
        i = int(sample_by_weight(log_w, rng))
        left, right = edges[i], edges[i + 1]
        value = float(min(left + rng.random() * (right - left), right))
        return QueryResult(self.name, value, "exponential", self.privacy)

    # -- the table face (TableStatistic) -------------------------------------------------------

    value_kinds: ClassVar[tuple[ColumnKind, ...]] = ("number", "boolean", "object")
    needs_column: ClassVar[bool] = True
    reads_labels: ClassVar[bool] = False
    content: ClassVar[str | None] = VALUE
    cell: ClassVar[str | None] = VALUE

    def file_cells(self) -> tuple[str, tuple[str, ...]]:
        return "numbers", ()

    def table_check(self, column: str, kind: ColumnKind, dtype: Any) -> None:
        return None

    def table_value(
        self, nw: Any, frame: Any, column: str | None, kind: ColumnKind, dtype: Any
    ) -> tuple[Any, list[Any]]:
        """The value as float64 (NaN where missing: dropped)."""
        frame = numeric_value(nw, frame, column, kind)
        return frame, [~nw.col(VALUE).is_nan()]

    def table_cells(
        self, nw: Any, frame: Any, column: str | None, kind: ColumnKind, dtype: Any
    ) -> Any:
        """The lattice cell ⌊z/h⌋ − ⌊L/h⌋ of the clamped value: both exact (h a power of two)
        and their difference an integer below 2³², so an exact Int64 (engines hash integers
        far faster than floats: 0.13 s vs 4 s for 10⁷ rows in PyArrow)."""
        step, base = self.lattice_step(), float(math.floor(self.lower / self.lattice_step()))
        value = nw.col(VALUE).clip(self.lower, self.upper)
        cell = ((value / step).floor() - base).cast(nw.Int64)
        return frame.drop(column).with_columns(cell.alias(VALUE))

    def table_aggregations(self, nw: Any) -> list[Any]:
        return []

    def table_collect(
        self, groups: int, group: NDArray[np.int64], table: Any, found: Mapping[str, NDArray[Any]]
    ) -> tuple[dict[str, NDArray[Any]], Any]:
        """Per group its lattice cells ⌊z/h⌋ (exact integers as doubles), increasing, and the
        rows in each: what :meth:`cell_log_weights` reads."""
        base = float(math.floor(self.lower / self.lattice_step()))
        lattice = table.get_column(VALUE).to_numpy().astype(np.float64) + base
        return {}, cell_runs(groups, group, lattice, found["count"])

    def per_group(self, contribution: Contribution) -> Quantile:
        """Each group's quantile at ε/(G·R): a group's utility moves by at most R·max(q,
        1 − q) ≤ R when R rows come or go, so this is ε/G-DP per group, and an id touches ≤ G
        groups (basic composition, Dwork & Roth 2014, Theorem 3.16). The share is rounded down
        (:func:`~dpkit.plugin.share_epsilon`), so that G·R times it is at most ε exactly: the
        exact sampler realises the double it is given."""
        parts = contribution.groups * contribution.rows
        return attrs.evolve(self, epsilon=share_epsilon(self.epsilon, parts))

    def table_noise(self, contribution: Contribution) -> tuple[Any, ...]:
        return (self.per_group(contribution),)

    def table_release(self, aggregates: Any, contribution: Contribution, rng: Any) -> Released:
        each = self.per_group(contribution)
        runs = aggregates.lattice or ()
        values = np.array([each.run_cells(c, n, rng=rng).value for c, n in runs], np.float64)
        rule = RankInterval(each.epsilon, each.lattice_points(), self.q)
        return Released(values, "exponential", interval=rule)

    def table_accuracy(self, contribution: Contribution, alpha: float, rng: Any) -> Accuracy:
        return self.per_group(contribution).accuracy(alpha)  # the lattice mechanism, both modes
