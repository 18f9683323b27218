"""Queries over a dataset whose sensitivity is derived from the query, never taken from the caller:
what the statistics (:mod:`~dpkit_central.count`, :mod:`~dpkit_central.sum`,
:mod:`~dpkit_central.mean`, :mod:`~dpkit_central.histogram`, :mod:`~dpkit_central.quantile`)
share on their array face.

Each query is a frozen value with a ``privacy`` property (its accounting event, known before
any data is touched) and ``run(data, /, *, rng)``, which returns a frozen :class:`QueryResult`.
A budget-tracked session executes a query in two phases (``docs/security.md``, "The privacy
boundary"): in the *public* phase ``check_input(data)`` refuses an input by its structure only
(not a 1-D array of records; text given to a numeric query) and ``releases(data)`` is 1; then
``privacy`` is checked against the budget and committed; in the *private* phase ``run`` is
**total**: no exception, warning or message depends on what the data contain. Every per-value
problem is handled by a documented per-record transformation (below).

**Neighbouring relation.** Every query here protects one *record* under the add/remove-one
relation (unbounded DP: D′ = D ∪ {x} or D \\ {x}; Dwork & Roth 2014, Section 2.3, databases as
histograms with ‖x − y‖₁ ≤ 1). The number of records n is therefore itself private: it is never
used unless noised, and never returned. Under this relation:

* count: Δ = 1;
* sum of values clamped to [L, U]: Δ = max(|L|, |U|) (one record adds or removes one clamped value);
* histogram over declared categories: one count moves by 1, so Δ₁ = Δ₂ = 1;
* mean: n is unknown, so it is released as a noisy, *centred* sum over a noisy count,
  each with half the budget: mean = m + S̃/C̃ with m = (L + U)/2, S = Σ(clamp(x) − m)
  (Δ = (U − L)/2) and C = n (Δ = 1), then clamped to [L, U] (post-processing). This is the
  normalised-sum estimator of Google's differential-privacy library (BoundedMean; Wilson et al.
  2020, "Differentially Private SQL with Bounded User Contribution", PoPETs, Section 4) and of
  Tumult Analytics' AVERAGE. The centring halves the sum's sensitivity compared with Σclamp(x).
* quantile: the exponential mechanism over [L, U] with the rank utility of Smith 2011 (below).

Under the replace-one relation with a public n the mean would need only a noisy sum with
Δ = (U − L)/n; that relation is not offered here, because a session cannot check that n is
public.

**Missing values** (``nan``). A record is missing when it is NaN or ``None``; in the numeric
queries (sum, mean, quantile) an element of an object array that is not a real number (text,
``None``, a complex number) is missing too. ``nan="drop"`` (the default and, except for
:class:`Count`, the only policy) removes those records before anything else, so they are neither
counted nor summed; ``Count(nan="keep")`` counts every record. Dropping a record is a per-record
transformation (the neighbour of a dataset stays a neighbour, or becomes equal), so the
privacy guarantee is unchanged. There is no ``nan="error"``: an error raised after the spend
would reveal that some value is missing; ``nan="error"`` is refused at construction.
Values outside [L, U], including ±inf, are clamped (Dwork & Roth 2014, Section 3.3's bounded
data; clamping is per record). A histogram drops the records outside its declared categories,
or counts them in a trailing ``"<other>"`` cell with ``other=True``.

**Answers beyond the float range.** A clamped sum can exceed the largest double when n·max(|L|,
|U|) does; it is then clamped to ± the largest double, and a secure lattice release clamps its
lattice index to ±(2⁶¹ − 1) steps. Both maps are 1-Lipschitz in the answer, so neighbouring
answers stay within the derived sensitivity and the guarantee is unchanged.

**Randomness.** With a numpy Generator (fast mode) the noise samplers are numpy's floating-point
ones. In secure mode (``rng=None`` or a SecureRandom) Laplace and Gaussian noise is added on a
power-of-two lattice with exact discrete noise, geometric noise is exact, and the quantile is a
lattice point (see the mechanisms and :class:`Quantile`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist
from typing import TYPE_CHECKING, Any, ClassVar

import attrs
import numpy as np
from numpy.typing import NDArray

from dpkit.plugin import (
    SENSITIVITY,
    Choice,
    InvalidData,
    InvalidParameter,
    PrivacyEvent,
    error_text,
    json_value,
    number,
    text_table,
)
from dpkit_central._noise import NOISE_INTERVAL, AdditiveNoise, symmetric_interval
from dpkit_central._validation import as_array, check_kind, finite_answers, total_floats
from dpkit_central.accuracy import Accuracy, check_alpha, mode_of
from dpkit_central.gaussian import Gaussian
from dpkit_central.geometric import Geometric
from dpkit_central.intervals import MeanInterval, RankInterval, interval_document
from dpkit_central.laplace import Laplace

if TYPE_CHECKING:
    from dpkit_central.tables import TableQuery

__all__ = [
    "COUNT_NAN_POLICY",
    "NAN_POLICY",
    "AdditiveQuery",
    "Query",
    "QueryResult",
    "additive",
    "bounds_check",
    "check_records",
    "clamped",
    "finite_sum",
    "noise_check",
    "numeric_records",
    "records",
    "release",
]

#: Missing values (NaN, None) are dropped; Count may also keep them. There is no "error":
#: it would be raised after the spend, because of what the data contain.
NAN_POLICY = Choice(("drop",))
COUNT_NAN_POLICY = Choice(("drop", "keep"))


@attrs.frozen
class QueryResult:
    """One private release.

    Attributes:
        query: the query's name (``"count"``, ``"sum"``, ...).
        value: the released value (a float, or an array for a histogram).
        mechanism: the mechanism that produced it (``"laplace"``, ``"geometric"``, ...).
        privacy: the accounting event spent.
        noise_scale: the scale of the noise actually added when the release is answer + noise
            (``noise.scale``: fast-mode Laplace and geometric Δ/ε, Gaussian σ; secure mode the
            slightly larger lattice scale g·t or g·σ_L); None when the release is not additive
            (mean, quantile).
        variance: the variance of the noise actually added to each released value
            (``noise.variance``; for the secure Gaussian an upper bound within float precision).
        noise: the noise distribution of the mode (fast or secure) that produced the release
            (:class:`~dpkit_central._noise.AdditiveNoise`), from the mechanism's ``noise_for``;
            the half-widths and intervals come from it.
        categories: the histogram's categories, in the order of ``value``.
        parts: the releases a composite query is built from (the mean's centred sum and count);
            they were released anyway, so they cost nothing more.
        interval: how a mean's or a (secure-mode) quantile's interval follows from public
            quantities and the released values (:mod:`dpkit_central.intervals`).
    """

    query: str
    value: Any
    mechanism: str
    privacy: PrivacyEvent
    noise_scale: float | None = None
    variance: float | None = None
    categories: tuple[Any, ...] | None = None
    parts: tuple[QueryResult, ...] = ()
    noise: AdditiveNoise | None = None
    interval: MeanInterval | RankInterval | None = None

    def noise_half_width(self, level: float = 0.95) -> float | None:
        """h with P[|noise| ≤ h] ≥ ``level`` for additive noise; None for mean and quantile.

        From ``noise`` when set (:meth:`AdditiveNoise.half_width`: the exact quantiles of the
        noise actually added, secure-mode discrete noise and lattice rounding included).
        Otherwise (a result built by hand) from ``mechanism`` and ``noise_scale``, exact noise
        quantiles: Laplace(b) has P[|Z| > h] = e^{−h/b}, so h = b·ln(1/(1 − level));
        N(0, σ²) gives h = σ·Φ⁻¹((1 + level)/2); the two-sided geometric with α = e^{−1/b} has
        P[|Z| > m] = 2α^{m+1}/(1 + α), and h is the smallest integer m making that ≤ 1 − level.
        """
        if not isinstance(level, (int, float)) or not 0.0 < level < 1.0:
            raise InvalidParameter("level", level, "a real number in (0, 1)", owner=self.query)
        if self.noise is not None:
            return self.noise.half_width(level)
        scale = self.noise_scale
        if scale is None:
            return None
        if self.mechanism == "laplace":
            return scale * math.log(1.0 / (1.0 - level))
        if self.mechanism == "gaussian":
            return scale * NormalDist().inv_cdf(0.5 + level / 2.0)
        if self.mechanism == "geometric":
            alpha = math.exp(-1.0 / scale)
            m = math.log((1.0 - level) * (1.0 + alpha) / 2.0) / math.log(alpha) - 1.0
            return float(max(0, math.ceil(m)))
        return None

    def confidence_interval(self, level: float = 0.95) -> tuple[Any, Any] | None:
        """An interval that covers the exact (clamped) statistic with probability ≥ ``level``.

        It accounts for the privacy noise only (the data are taken as given): value ± the
        noise's half-width, or a mean's ratio interval
        (:class:`~dpkit_central.intervals.MeanInterval`); None for a quantile, whose
        guarantee is in ranks (:meth:`rank_half_width`).
        """
        half = self.noise_half_width(level)
        if half is not None or not isinstance(self.interval, MeanInterval):
            return symmetric_interval(self.value, half)
        parts = {part.query: part.value for part in self.parts}
        low, high = self.interval.bounds(parts["centred_sum"], parts["count"], level)
        return float(low), float(high)

    def rank_half_width(self, level: float = 0.95) -> float | None:
        """A secure-mode quantile's rank guarantee at ``level`` (None otherwise)."""
        self.noise_half_width(level)  # checks the level
        if isinstance(self.interval, RankInterval):
            return self.interval.half_width(level)
        return None

    def interval_method(self, level: float = 0.95) -> str:
        """How the interval at ``level`` is computed, in words."""
        return NOISE_INTERVAL if self.interval is None else self.interval.method(level)

    def __str__(self) -> str:
        """The release for reading: the value (a histogram's, per category) with its 95%
        interval (± where symmetric, [lower, upper] for a mean, ± ranks for a quantile), then
        how the interval was computed."""
        bounds = self.confidence_interval(0.95)
        ranks = self.rank_half_width(0.95)
        values = np.atleast_1d(np.asarray(self.value, dtype=np.float64))
        low, high = (
            (values * np.nan, values * np.nan)
            if bounds is None
            else (np.broadcast_to(np.asarray(b, dtype=np.float64), values.shape) for b in bounds)
        )
        cells = [
            f"{number(float(v))} {error_text(float(v), float(lo), float(hi), ranks)}".rstrip()
            for v, lo, hi in zip(values, low, high, strict=True)
        ]
        shown = ranks is not None or bool(np.isfinite(low).any())
        method = f"\ninterval: {self.interval_method(0.95)}" if shown else ""
        if self.categories is None:
            level = " (95%)" if shown else ""
            return f"{self.query} ({self.mechanism}): {cells[0]}{level}{method}"
        rows = [[str(c), cell] for c, cell in zip(self.categories, cells, strict=True)]
        table = text_table(rows, ["category", "value (95%)" if shown else "value"])
        return f"{self.query} ({self.mechanism})\n{table}{method}"

    def to_document(self, *, confidence: float = 0.95) -> dict[str, Any]:
        """The release in a result document (:class:`dpkit.document.Document`): the noise
        mechanism, the noise, the value, its noise variance and interval at ``confidence``."""
        out: dict[str, Any] = {"mechanism": {"noise": self.mechanism}}
        if self.noise is not None:
            out["noise"] = self.noise.describe()
        out.update(
            n=None,
            categories=list(self.categories) if self.categories else None,
            estimate=json_value(self.value),
            variance=json_value(self.variance),
            confidence_interval=interval_document(self, confidence),
        )
        return out


def _is_missing(value: Any) -> bool:
    """None, or a value that is not equal to itself (NaN); a value that cannot even be compared
    with itself (e.g. pandas' NA) is missing too. Never raises."""
    if value is None:
        return True
    try:
        return bool(value != value)
    except Exception:  # an uncomparable value is treated as missing
        return True


_is_missing_array = np.frompyfunc(_is_missing, 1, 1)


def _missing(array: NDArray[Any]) -> NDArray[np.bool_]:
    """Which records are missing (NaN, None), elementwise; never raises."""
    if array.dtype.kind in "fc":
        return np.asarray(np.isnan(array), dtype=np.bool_)
    if array.dtype.kind == "O" and array.size:
        return np.asarray(_is_missing_array(array), dtype=np.bool_)
    return np.zeros(array.shape, dtype=np.bool_)


def check_records(data: Any, owner: str, *, numeric: bool) -> NDArray[Any]:
    """Public phase: ``data`` as a 1-D array of records, refused by its structure only.

    Not an array (ragged rows), not 1-D, or — for a numeric query — a dtype kind that cannot
    hold numbers (text, bytes, dates, complex) is an :class:`~dpkit.InvalidData` that names the
    shape or the kind, never a value.
    """
    array = as_array(data, owner=owner, field="data")
    if array.ndim != 1:
        raise InvalidData(
            f"{owner}: data must be a 1-D array of records, got shape {array.shape}", field="data"
        )
    if numeric:
        check_kind(array, "biufO", owner=owner, field="data", allowed="real numbers")
    return array


def records(data: Any, owner: str, *, drop_missing: bool = True) -> NDArray[Any]:
    """The records of ``data`` with the missing ones dropped (total once the structure is ok)."""
    array = check_records(data, owner, numeric=False)
    return array[~_missing(array)] if drop_missing else array


def numeric_records(data: Any, owner: str) -> NDArray[np.float64]:
    """The records as float64 with the missing ones dropped; total once the structure is ok.

    Booleans count as 0/1; in an object array an element that is not a real number (text,
    None, ...) becomes NaN (:func:`~dpkit_central._validation.total_floats`) and is dropped
    with the other missing values. ±inf stays, to be clamped to the bounds.
    """
    values = total_floats(check_records(data, owner, numeric=True))
    return values[~np.isnan(values)]


def clamped(records: NDArray[np.float64], lower: float, upper: float) -> NDArray[np.float64]:
    return np.clip(records, lower, upper)


def bounds_check(query: Any) -> None:
    if not query.lower < query.upper:
        raise InvalidParameter(
            "upper",
            query.upper,
            f"> lower={query.lower!r} (bounds [lower, upper])",
            owner=query.name,
        )
    if not math.isfinite(query.upper - query.lower):  # the sensitivities derive from U − L
        raise InvalidParameter(
            "upper",
            query.upper,
            f"within the float range of lower={query.lower!r} (upper − lower must be finite)",
            owner=query.name,
        )
    if not query.upper - query.lower >= 2 * SENSITIVITY.low:  # half-widths are sensitivities
        raise InvalidParameter(
            "upper",
            query.upper,
            f">= lower + {2 * SENSITIVITY.low:g} (lower={query.lower!r}; the noise sensitivity "
            "derives from upper − lower)",
            owner=query.name,
        )


def noise_check(query: Any) -> None:
    if query.noise == "gaussian" and query.delta is None:
        raise InvalidParameter(
            "delta", None, "a real number in (0, 1) when noise='gaussian'", owner=query.name
        )
    if query.noise != "gaussian" and query.delta is not None:
        raise InvalidParameter(
            "delta", query.delta, "omitted (None) unless noise='gaussian'", owner=query.name
        )


def additive(
    noise: str, epsilon: float, delta: float | None, sensitivity: float
) -> Laplace | Geometric | Gaussian:
    if noise == "laplace":
        return Laplace(epsilon=epsilon, sensitivity=sensitivity)
    if noise == "geometric":
        return Geometric(epsilon=epsilon, sensitivity=sensitivity)
    assert delta is not None  # checked at construction (_noise_check)
    return Gaussian(epsilon=epsilon, delta=delta, sensitivity=sensitivity)


def release(
    query: str,
    mech: Laplace | Geometric | Gaussian,
    answer: Any,
    rng: np.random.Generator,
    changed: int | None = None,
) -> QueryResult:
    """``answer`` plus the mechanism's noise. ``changed``: at most this many coordinates of the
    answer differ between neighbours (default: all of them); secure-mode lattice noise covers
    the rounding of those coordinates only (an unchanged one rounds the same on both sides)."""
    # coerce: a sum beyond the float range is clamped (a 1-Lipschitz map of the answer).
    coerced = mech.coerce(answer, rng=rng)
    value: NDArray[Any]
    if isinstance(mech, Geometric):  # integer answers: no lattice rounding to cover
        value = mech.randomize(coerced, rng=rng)
    else:
        value = mech.randomize(coerced, rng=rng, changed=changed)
    noise = mech.noise_for(rng, changed or value.size)
    return QueryResult(
        query=query,
        value=value.item() if value.ndim == 0 else value,
        mechanism=mech.name,
        privacy=mech.privacy,
        noise_scale=noise.scale,
        variance=noise.variance,
        noise=noise,
    )


def finite_sum(values: NDArray[np.float64]) -> float:
    """Σ values, clamped to ± the largest double if it overflows (a 1-Lipschitz map)."""
    with np.errstate(over="ignore", invalid="ignore"):
        total = values.sum()
    return float(finite_answers(np.asarray(total)))


class Query:
    """``check_input`` and ``releases`` of the queries (the public phase of a session)."""

    name: ClassVar[str]
    numeric: ClassVar[bool] = True

    def check_input(self, data: Any, /) -> None:
        """Refuse data by structure only: not a 1-D array of records, or (numeric queries) an
        array of text, bytes, dates or complex numbers. Never looks at a value."""
        check_records(data, self.name, numeric=self.numeric)

    def releases(self, data: Any, /) -> int:
        """One release per call, whatever the number of records."""
        return 1

    def on(
        self,
        column: str | None = None,
        *,
        by: str | Sequence[str] = (),
        keys: Any = None,
        unit: Any = None,
    ) -> TableQuery:
        """This query over a table column, per group, under a privacy unit: a
        :class:`~dpkit_central.tables.TableQuery` (pandas, Polars, PyArrow inputs).

        >>> from dpkit_central import Count
        >>> Count(epsilon=1.0).on(by="city", keys=["Paris", "Lyon"]).bounds()
        (1, 1)
        """
        from dpkit_central.tables import TableQuery

        return TableQuery(self, column=column, by=by, keys=keys, unit=unit)


class AdditiveQuery(Query):
    """Shared by the queries released as answer + noise of their derived sensitivity."""

    noise: str
    epsilon: float
    delta: float | None
    #: At most this many released coordinates differ between neighbours (None: all of them);
    #: secure-mode lattice noise covers the rounding of those coordinates only.
    changed_cells: ClassVar[int | None] = None

    @property
    def sensitivity(self) -> float:
        raise NotImplementedError

    @property
    def mechanism(self) -> Laplace | Geometric | Gaussian:
        """The noise mechanism, calibrated to the derived sensitivity."""
        return additive(self.noise, self.epsilon, self.delta, self.sensitivity)

    @property
    def privacy(self) -> PrivacyEvent:
        return self.mechanism.privacy

    def accuracy(self, alpha: float = 0.05, *, rng: Any = None) -> Accuracy:
        """The cost, the noise and the half-width of the (1 − α) interval of each released
        value, in the randomness mode of ``rng`` (None: secure), before any data is read
        (:mod:`dpkit_central.accuracy`)."""
        alpha = check_alpha(alpha, self.name)
        cells = len(getattr(self, "cells", ())) or 1
        noise = self.mechanism.noise_for(mode_of(rng), self.changed_cells or cells)
        return Accuracy(
            self.name, self.privacy, 1.0 - alpha, noise, noise.half_width(1.0 - alpha), cells=cells
        )
