"""Queries over a dataset whose sensitivity is derived from the query, never taken from the caller.

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
from fractions import Fraction
from statistics import NormalDist
from typing import TYPE_CHECKING, Any, ClassVar

import attrs
import numpy as np
from numpy.typing import NDArray

import dpkit
from dpkit import (
    Boolean,
    BoundedRangeDP,
    Choice,
    CompositeDP,
    GaussianDP,
    InvalidData,
    InvalidParameter,
    LaplaceDP,
    PrivacyEvent,
    Real,
    Sequence_,
    parameter,
)
from dpkit.arrays import lookup_index
from dpkit.params import BOUND, CENTRAL_EPSILON, DELTA, SENSITIVITY
from dpkit_central._noise import AdditiveNoise, symmetric_interval
from dpkit_central._validation import (
    MAX_FINITE,
    as_array,
    check_kind,
    finite_answers,
    total_floats,
)
from dpkit_central.accuracy import Accuracy, check_alpha, mode_of
from dpkit_central.exponential import sample_by_weight, utility_guarantee
from dpkit_central.gaussian import (
    Gaussian,
    analytic_gaussian_sigma,
    gaussian_noise_for,
    lattice_gaussian_release,
)
from dpkit_central.geometric import Geometric
from dpkit_central.laplace import Laplace

if TYPE_CHECKING:
    from dpkit_central.tables import TableQuery

__all__ = ["OTHER", "Count", "Histogram", "Mean", "Quantile", "QueryResult", "Sum"]

POSITIVE = Real(low=0.0, low_open=True)
FINITE = Real()
OPEN_UNIT = Real(low=0.0, high=1.0, low_open=True, high_open=True)
#: Missing values (NaN, None) are dropped; Count may also keep them. There is no "error":
#: it would be raised after the spend, because of what the data contain.
NAN_POLICY = Choice(("drop",))
COUNT_NAN_POLICY = Choice(("drop", "keep"))
#: The label of a histogram's trailing cell for records outside the declared categories
#: (``other=True``); a declared category may not equal it.
OTHER = "<other>"
#: Secure-mode quantiles lie on multiples of 2^(⌈log₂(upper − lower)⌉ − QUANTILE_LATTICE_BITS).
QUANTILE_LATTICE_BITS = 30


def _power_of_two(exponent: int) -> Fraction:
    return Fraction(2) ** exponent


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

        It accounts for the privacy noise only (the data are taken as given); None where the
        release is not answer + noise (mean, quantile).
        """
        return symmetric_interval(self.value, self.noise_half_width(level))


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


def _check_records(data: Any, owner: str, *, numeric: bool) -> NDArray[Any]:
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


def _records(data: Any, owner: str, *, drop_missing: bool = True) -> NDArray[Any]:
    """The records of ``data`` with the missing ones dropped (total once the structure is ok)."""
    array = _check_records(data, owner, numeric=False)
    return array[~_missing(array)] if drop_missing else array


def _numeric_records(data: Any, owner: str) -> NDArray[np.float64]:
    """The records as float64 with the missing ones dropped; total once the structure is ok.

    Booleans count as 0/1; in an object array an element that is not a real number (text,
    None, ...) becomes NaN (:func:`~dpkit_central._validation.total_floats`) and is dropped
    with the other missing values. ±inf stays, to be clamped to the bounds.
    """
    values = total_floats(_check_records(data, owner, numeric=True))
    return values[~np.isnan(values)]


def _clamped(records: NDArray[np.float64], lower: float, upper: float) -> NDArray[np.float64]:
    return np.clip(records, lower, upper)


def _bounds_check(query: Any) -> None:
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


def _noise_check(query: Any) -> None:
    if query.noise == "gaussian" and query.delta is None:
        raise InvalidParameter(
            "delta", None, "a real number in (0, 1) when noise='gaussian'", owner=query.name
        )
    if query.noise != "gaussian" and query.delta is not None:
        raise InvalidParameter(
            "delta", query.delta, "omitted (None) unless noise='gaussian'", owner=query.name
        )


def _additive(
    noise: str, epsilon: float, delta: float | None, sensitivity: float
) -> Laplace | Geometric | Gaussian:
    if noise == "laplace":
        return Laplace(epsilon=epsilon, sensitivity=sensitivity)
    if noise == "geometric":
        return Geometric(epsilon=epsilon, sensitivity=sensitivity)
    assert delta is not None  # checked at construction (_noise_check)
    return Gaussian(epsilon=epsilon, delta=delta, sensitivity=sensitivity)


def _release(
    query: str, mech: Laplace | Geometric | Gaussian, answer: Any, rng: np.random.Generator
) -> QueryResult:
    # coerce: a sum beyond the float range is clamped (a 1-Lipschitz map of the answer).
    value = mech.randomize(mech.coerce(answer, rng=rng), rng=rng)
    noise = _noise_for(mech, rng, value.size)
    return QueryResult(
        query=query,
        value=value.item() if value.ndim == 0 else value,
        mechanism=mech.name,
        privacy=mech.privacy,
        noise_scale=noise.scale,
        variance=noise.variance,
        noise=noise,
    )


def _noise_for(
    mech: Laplace | Geometric | Gaussian | _FixedGaussian, rng: Any, coordinates: int
) -> AdditiveNoise:
    """The noise ``mech`` adds in the mode of ``rng`` (geometric: the same in both modes)."""
    if isinstance(mech, Geometric):
        return AdditiveNoise.geometric(mech.sensitivity / mech.epsilon)
    return mech.noise_for(rng, coordinates)


def _finite_sum(values: NDArray[np.float64]) -> float:
    """Σ values, clamped to ± the largest double if it overflows (a 1-Lipschitz map)."""
    with np.errstate(over="ignore", invalid="ignore"):
        total = values.sum()
    return float(finite_answers(np.asarray(total)))


class _PublicPhase:
    """``check_input`` and ``releases`` of the queries (the public phase of a session)."""

    name: ClassVar[str]
    numeric: ClassVar[bool] = True

    def check_input(self, data: Any, /) -> None:
        """Refuse data by structure only: not a 1-D array of records, or (numeric queries) an
        array of text, bytes, dates or complex numbers. Never looks at a value."""
        _check_records(data, self.name, numeric=self.numeric)

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


class _AdditiveNoise(_PublicPhase):
    """Shared by the queries released as answer + noise of their derived sensitivity."""

    noise: str
    epsilon: float
    delta: float | None

    @property
    def sensitivity(self) -> float:
        raise NotImplementedError

    @property
    def mechanism(self) -> Laplace | Geometric | Gaussian:
        """The noise mechanism, calibrated to the derived sensitivity."""
        return _additive(self.noise, self.epsilon, self.delta, self.sensitivity)

    @property
    def privacy(self) -> PrivacyEvent:
        return self.mechanism.privacy

    def accuracy(self, alpha: float = 0.05, *, rng: Any = None) -> Accuracy:
        """The cost, the noise and the half-width of the (1 − α) interval of each released
        value, in the randomness mode of ``rng`` (None: secure), before any data is read
        (:mod:`dpkit_central.accuracy`)."""
        alpha = check_alpha(alpha, self.name)
        cells = len(getattr(self, "cells", ())) or 1
        noise = _noise_for(self.mechanism, mode_of(rng), cells)
        return Accuracy(
            self.name, self.privacy, 1.0 - alpha, noise, noise.half_width(1.0 - alpha), cells=cells
        )


@attrs.frozen
class Count(_AdditiveNoise):
    """The number of records, plus noise of sensitivity 1 (add/remove one record).

    ``noise="geometric"`` (default) releases an integer (Ghosh et al. 2009), ``"laplace"`` a
    real (Dwork et al. 2006), ``"gaussian"`` a real with (ε, δ) (Balle & Wang 2018).
    With ``nan="drop"`` (default) only the non-missing records (not NaN, not None) are counted;
    with ``nan="keep"`` every record is. Records of any type are counted.
    """

    name: ClassVar[str] = "count"
    numeric: ClassVar[bool] = False
    epsilon: float = parameter(CENTRAL_EPSILON, doc="privacy loss ε", typical=(0.05, 6.0))
    noise: str = parameter(
        Choice(("geometric", "laplace", "gaussian")), doc="noise distribution", default="geometric"
    )
    delta: float | None = parameter(
        DELTA,
        doc="δ, only for noise='gaussian'",
        default=None,
        optional=True,
        given_when=("noise", "gaussian"),
    )
    nan: str = parameter(
        COUNT_NAN_POLICY,
        doc="missing values (NaN, None): 'drop' (not counted) or 'keep' (counted)",
        default="drop",
    )

    def __attrs_post_init__(self) -> None:
        _noise_check(self)

    @property
    def sensitivity(self) -> float:
        return 1.0

    def run(self, data: Any, /, *, rng: Any = None) -> QueryResult:
        rng = dpkit.resolve_rng(rng, owner=self.name)[0]
        records = _records(data, self.name, drop_missing=self.nan == "drop")
        return _release(self.name, self.mechanism, records.shape[0], rng)


@attrs.frozen
class Sum(_AdditiveNoise):
    """Σ clamp(x, lower, upper) plus noise; Δ = max(|lower|, |upper|) under add/remove.

    ``noise="laplace"`` (default) or ``"gaussian"`` (with ``delta``).
    """

    name: ClassVar[str] = "sum"
    lower: float = parameter(BOUND, doc="lower clamping bound")
    upper: float = parameter(BOUND, doc="upper clamping bound (> lower)")
    epsilon: float = parameter(CENTRAL_EPSILON, doc="privacy loss ε", typical=(0.05, 6.0))
    noise: str = parameter(Choice(("laplace", "gaussian")), doc="noise", default="laplace")
    delta: float | None = parameter(
        DELTA,
        doc="δ, only for noise='gaussian'",
        default=None,
        optional=True,
        given_when=("noise", "gaussian"),
    )
    nan: str = parameter(NAN_POLICY, doc="missing values (NaN, None, text): 'drop'", default="drop")

    def __attrs_post_init__(self) -> None:
        _bounds_check(self)
        _noise_check(self)

    @property
    def sensitivity(self) -> float:
        """max(|L|, |U|): adding or removing one record moves the sum by its clamped value."""
        return max(abs(self.lower), abs(self.upper))

    def run(self, data: Any, /, *, rng: Any = None) -> QueryResult:
        rng = dpkit.resolve_rng(rng, owner=self.name)[0]
        records = _numeric_records(data, self.name)
        total = _finite_sum(_clamped(records, self.lower, self.upper))
        return _release(self.name, self.mechanism, total, rng)


@attrs.frozen
class Mean(_PublicPhase):
    """The mean of values clamped to [lower, upper], as a noisy centred sum over a noisy count.

    With m = (L + U)/2: S = Σ(clamp(x) − m) has Δ = (U − L)/2 and C = n has Δ = 1 under
    add/remove, so the release is mean = clamp(m + S̃ / max(C̃, 1), L, U) (see the module
    docstring for the sources).

    Budget: with Laplace noise S and C each get ε/2 (basic composition, Dwork & Roth 2014,
    Theorem 3.14), and the event says so: CompositeDP((LaplaceDP(ε/2), LaplaceDP(ε/2))), two
    Laplace releases that accountants compose as such (ε in total under basic composition,
    less under zCDP or a privacy-loss distribution). With Gaussian noise both parts get noise
    multiplier √2·z, where z = σ/Δ is the analytic calibration at (ε, δ): releasing
    (S, C) is one Gaussian mechanism whose normalised L2 sensitivity is
    √((1/(√2 z))² + (1/(√2 z))²) = 1/z, so the event is exactly GaussianDP(z, δ).
    The ratio is biased for small n; its variance has no closed form, so ``variance`` is None,
    while ``parts`` carries the two noisy components with their exact noise variances.
    """

    name: ClassVar[str] = "mean"
    lower: float = parameter(BOUND, doc="lower clamping bound")
    upper: float = parameter(BOUND, doc="upper clamping bound (> lower)")
    epsilon: float = parameter(CENTRAL_EPSILON, doc="privacy loss ε", typical=(0.05, 6.0))
    noise: str = parameter(Choice(("laplace", "gaussian")), doc="noise", default="laplace")
    delta: float | None = parameter(
        DELTA,
        doc="δ, only for noise='gaussian'",
        default=None,
        optional=True,
        given_when=("noise", "gaussian"),
    )
    nan: str = parameter(NAN_POLICY, doc="missing values (NaN, None, text): 'drop'", default="drop")

    def __attrs_post_init__(self) -> None:
        _bounds_check(self)
        _noise_check(self)

    @property
    def midpoint(self) -> float:
        return 0.5 * (self.lower + self.upper)

    def parts(
        self, l1: float = 1.0, l2: float = 1.0, grid: float = 0.0
    ) -> tuple[Laplace | _FixedGaussian, Laplace | _FixedGaussian]:
        """The noise mechanisms of the centred sum and of the count.

        ``l1`` and ``l2`` scale both sensitivities: one record moves the centred sum by at
        most (U − L)/2 and the count by 1; under contribution bounds (G groups, R rows per
        group) the vectors of per-group sums and counts move by G·R times that in L1 and
        √G·R times that in L2 (:mod:`dpkit_central.tables`). ``grid``: a centred value is
        rounded to a multiple of it before summing (fixed point), which adds up to grid/2.
        """
        half_width = 0.5 * (self.upper - self.lower) + 0.5 * grid
        if self.noise == "laplace":
            return (
                Laplace(epsilon=self.epsilon / 2.0, sensitivity=l1 * half_width),
                Laplace(epsilon=self.epsilon / 2.0, sensitivity=l1),
            )
        assert self.delta is not None
        z = math.sqrt(2.0) * analytic_gaussian_sigma(self.epsilon, self.delta)
        return (
            _FixedGaussian(z * l2 * half_width, l2 * half_width, self.delta),
            _FixedGaussian(z * l2, l2, self.delta),
        )

    @property
    def privacy(self) -> PrivacyEvent:
        if self.noise == "laplace":
            half = LaplaceDP(epsilon=self.epsilon / 2.0)
            return CompositeDP((half, half))
        assert self.delta is not None
        return GaussianDP(
            noise_multiplier=analytic_gaussian_sigma(self.epsilon, self.delta), delta=self.delta
        )

    def accuracy(self, alpha: float = 0.05, *, rng: Any = None) -> Accuracy:
        """The cost and the half-widths of the centred sum and of the count, each at level
        1 − α/2 (so both hold with probability ≥ 1 − α; :meth:`Accuracy.mean_error` turns
        them into a bound on the mean for n records). See :mod:`dpkit_central.accuracy`."""
        return mean_accuracy(self, self.parts(), check_alpha(alpha, self.name), rng)

    def run(self, data: Any, /, *, rng: Any = None) -> QueryResult:
        rng = dpkit.resolve_rng(rng, owner=self.name)[0]
        records = _numeric_records(data, self.name)
        centred = _clamped(records, self.lower, self.upper)
        with np.errstate(over="ignore"):  # only for bounds near ±1.8e308; clamped just below
            centred -= self.midpoint
        sum_mech, count_mech = self.parts()
        noisy_sum = sum_mech.randomize(_finite_sum(centred), rng=rng).item()
        noisy_count = count_mech.randomize(float(records.shape[0]), rng=rng).item()
        mean = self.midpoint + noisy_sum / max(noisy_count, 1.0)
        value = min(max(mean, self.lower), self.upper)
        parts = tuple(
            QueryResult(
                query=part,
                value=value,
                mechanism=mech.name,
                privacy=mech.privacy,
                noise_scale=noise.scale,
                variance=noise.variance,
                noise=noise,
            )
            for part, value, mech in (
                ("centred_sum", noisy_sum, sum_mech),
                ("count", noisy_count, count_mech),
            )
            for noise in (_noise_for(mech, rng, 1),)
        )
        return QueryResult(
            self.name, value, f"{self.noise} (sum and count)", self.privacy, parts=parts
        )


def mean_accuracy(
    mean: Mean,
    parts: tuple[Laplace | _FixedGaussian, Laplace | _FixedGaussian],
    alpha: float,
    rng: Any,
    changed: int = 1,
) -> Accuracy:
    """The accuracy of a mean released from ``parts`` (centred sum, count), each part at
    level 1 − α/2 (a union bound: both hold together with probability ≥ 1 − α)."""
    level = 1.0 - alpha / 2.0
    named = []
    for part, mech in zip(("centred_sum", "count"), parts, strict=True):
        noise = _noise_for(mech, mode_of(rng), changed)
        named.append((part, Accuracy(part, mech.privacy, level, noise, noise.half_width(level))))
    return Accuracy(
        mean.name,
        mean.privacy,
        1.0 - alpha,
        parts=tuple(named),
        half_range=0.5 * (mean.upper - mean.lower),
    )


@attrs.frozen
class _FixedGaussian:
    """Gaussian noise of a given σ (a component of a jointly calibrated Gaussian release)."""

    sigma: float
    sensitivity: float
    delta: float
    name: ClassVar[str] = "gaussian"

    @property
    def scale(self) -> float:
        return self.sigma

    @property
    def variance(self) -> float:
        return self.sigma * self.sigma  # inf, not OverflowError, for a huge σ

    @property
    def privacy(self) -> GaussianDP:
        """This component alone; the mean's event is the joint one (see Mean.privacy)."""
        return GaussianDP(noise_multiplier=self.sigma / self.sensitivity, delta=self.delta)

    def noise_for(self, rng: Any, coordinates: int = 1) -> AdditiveNoise:
        """The noise :meth:`randomize` adds in the mode of ``rng`` (see ``Gaussian.noise_for``)."""
        return gaussian_noise_for(self.sigma, self.sensitivity, rng, coordinates)

    def randomize(
        self, value: Any, /, *, rng: Any = None, changed: int | None = None
    ) -> NDArray[np.float64]:
        """value + N(0, σ²) (elementwise); in secure mode on the lattice of
        :func:`lattice_gaussian_release` (with the same declared noise multiplier σ/Δ, so the
        joint event is unchanged; ``changed`` as there)."""
        answers = np.asarray(value, dtype=np.float64)
        if isinstance(rng, dpkit.SecureRandom):
            return lattice_gaussian_release(
                answers,
                sigma=self.sigma,
                sensitivity=self.sensitivity,
                rng=rng,
                owner="mean",
                changed=changed,
            )
        with np.errstate(over="ignore"):
            noisy = answers + rng.normal(0.0, self.sigma, size=answers.shape)
        # An overflow to ±inf is clipped back to the doubles (post-processing).
        return np.asarray(np.clip(noisy, -MAX_FINITE, MAX_FINITE), dtype=np.float64)


@attrs.frozen
class Histogram(_AdditiveNoise):
    """Noisy counts of the records in each declared category (Δ₁ = Δ₂ = 1 under add/remove).

    The categories are declared up front, never read from the data (reading them would leak
    which values occur). A record is matched to a category by a dictionary lookup on its Python
    value (so 3, 3.0 and numpy's int64(3) match the category 3, and True matches 1; text never
    matches an integer), which works for records of mixed types that cannot be sorted.
    A record outside the categories is **dropped** (a per-record transformation; no message
    ever names it), or with ``other=True`` counted in a trailing cell labelled
    :data:`OTHER` (``"<other>"``, which a declared category may then not equal): one record
    still moves one count by 1, so Δ₁ = Δ₂ = 1 either way. Missing values (NaN, None) are
    dropped (``nan="drop"``). ``noise`` as for :class:`Count`; the noise is independent per
    category (Dwork & Roth 2014, Section 3.3, histogram queries).
    """

    name: ClassVar[str] = "histogram"
    numeric: ClassVar[bool] = False
    categories: tuple[Any, ...] = parameter(Sequence_(min_length=1), doc="the declared categories")
    epsilon: float = parameter(CENTRAL_EPSILON, doc="privacy loss ε", typical=(0.05, 6.0))
    noise: str = parameter(
        Choice(("geometric", "laplace", "gaussian")), doc="noise distribution", default="geometric"
    )
    delta: float | None = parameter(
        DELTA,
        doc="δ, only for noise='gaussian'",
        default=None,
        optional=True,
        given_when=("noise", "gaussian"),
    )
    nan: str = parameter(NAN_POLICY, doc="missing values (NaN, None): 'drop'", default="drop")
    other: bool = parameter(
        Boolean(),
        doc=f"count records outside the categories in a trailing {OTHER!r} cell (else drop them)",
        default=False,
    )

    def __attrs_post_init__(self) -> None:
        _noise_check(self)
        if self.other and OTHER in self.categories:
            raise InvalidParameter(
                "categories",
                self.categories,
                f"labels other than {OTHER!r} when other=True (it names the trailing cell)",
                owner=self.name,
            )

    @property
    def sensitivity(self) -> float:
        return 1.0

    @property
    def cells(self) -> tuple[Any, ...]:
        """The labels of the released counts: the categories, then :data:`OTHER` if ``other``."""
        return (*self.categories, OTHER) if self.other else self.categories

    def counts(self, data: Any, /) -> NDArray[np.int64]:
        """The exact counts per cell (not private: for tests and for building on); total."""
        records = _records(data, self.name)
        k = len(self.categories)
        cells = k + 1 if self.other else k
        if records.shape[0] == 0:
            return np.zeros(cells, dtype=np.int64)
        position = {c: i for i, c in enumerate(self.categories)}
        mapped = _category_positions(records, position)  # −1 outside the categories
        if self.other:
            mapped[mapped < 0] = k
        else:
            mapped = mapped[mapped >= 0]
        return np.bincount(mapped, minlength=cells).astype(np.int64)

    def run(self, data: Any, /, *, rng: Any = None) -> QueryResult:
        rng = dpkit.resolve_rng(rng, owner=self.name)[0]
        result = _release(self.name, self.mechanism, self.counts(data), rng)
        return attrs.evolve(result, categories=self.cells)


def _category_positions(records: NDArray[Any], position: dict[Any, int]) -> NDArray[np.int64]:
    """Each record's category index (−1 outside the categories), by :func:`_lookup`.

    One lookup per distinct value when numpy can sort the records; records of mixed types that
    cannot be compared are looked up one by one instead (same result, slower).
    """
    try:
        unique, inverse = np.unique(records, return_inverse=True)
    except Exception:  # mixed types numpy cannot order: the per-record path
        return np.fromiter(
            (lookup_index(position, v) for v in records), dtype=np.int64, count=records.shape[0]
        )
    mapped = np.fromiter(
        (lookup_index(position, u) for u in unique), dtype=np.int64, count=unique.shape[0]
    )
    return np.asarray(mapped[inverse.ravel()], dtype=np.int64)


@attrs.frozen
class Quantile(_PublicPhase):
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
    The rank is drawn, as in fast mode, from floating-point weights (relative error about 1e-16
    in the probabilities, on the secure source); the output is a lattice point chosen by
    integers, so no low bit depends on the data.

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
        _bounds_check(self)

    @property
    def privacy(self) -> BoundedRangeDP:
        """The exponential mechanism with a fixed base measure: ε-bounded range (Durfee &
        Rogers 2019), which zCDP and RDP charge ε²/8 (Cesar & Rogers 2021)."""
        return BoundedRangeDP(epsilon=self.epsilon)

    def log_weights(self, data: Any, /) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """(interval end points z₀..z_{n+1}, log weight of each of the n + 1 intervals)."""
        records = _numeric_records(data, self.name)
        z = np.sort(_clamped(records, self.lower, self.upper))
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
        if isinstance(mode_of(rng), dpkit.SecureRandom):
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
        records = _numeric_records(data, self.name)
        h = self.lattice_step()
        low = self.lower / h
        base_f = math.floor(low)
        z = np.sort(_clamped(records, self.lower, self.upper))
        inner = np.floor(z / h) - float(base_f)
        first = -1.0 if low == base_f else 0.0  # ⌈L/h⌉ − 1 − ⌊L/h⌋
        last = float(math.floor(self.upper / h)) - float(base_f)
        bounds = np.concatenate(([first], inner, [last]))
        n = records.shape[0]
        rank = np.arange(n + 1, dtype=np.float64)
        with np.errstate(divide="ignore"):
            log_count = np.log(np.diff(bounds))
        return int(base_f), bounds, log_count - 0.5 * self.epsilon * np.abs(rank - self.q * n)

    def lattice_cell(self, values: Any) -> NDArray[np.float64]:
        """⌊clamp(x, L, U)/h⌋ of each value, as exact integers held in float64 (h a power of
        two: the division is exact). The cells and how many records lie in each are all that
        the secure-mode mechanism reads of the data (:meth:`cell_log_weights`)."""
        return np.floor(
            _clamped(np.asarray(values, dtype=np.float64), self.lower, self.upper)
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
        cell = np.asarray(cells, dtype=np.float64).reshape(-1)
        count = np.asarray(counts, dtype=np.int64).reshape(-1)
        h = self.lattice_step()
        low = self.lower / h
        base_f = math.floor(low)
        first = -1.0 if low == base_f else 0.0
        last = float(math.floor(self.upper / h)) - float(base_f)
        bounds = np.concatenate(([first], cell - float(base_f), [last]))
        ranks = np.concatenate(([0], np.cumsum(count))).astype(np.float64)
        n = float(ranks[-1])
        with np.errstate(divide="ignore"):
            log_count = np.log(np.diff(bounds))
        return int(base_f), bounds, log_count - 0.5 * self.epsilon * np.abs(ranks - self.q * n)

    def run_cells(self, cells: Any, counts: Any, /, *, rng: Any = None) -> QueryResult:
        """The secure-mode mechanism (:meth:`cell_log_weights`) on per-cell counts, with
        either kind of ``rng`` (the output is a lattice point in both modes)."""
        rng = dpkit.resolve_rng(rng, owner=self.name)[0]
        return self._sample_lattice(*self.cell_log_weights(cells, counts), rng)

    def _lattice_run(self, data: Any, rng: Any) -> QueryResult:
        return self._sample_lattice(*self.lattice_log_weights(data), rng)

    def _sample_lattice(
        self, base: int, bounds: NDArray[np.float64], log_w: NDArray[np.float64], rng: Any
    ) -> QueryResult:
        i = int(sample_by_weight(log_w, rng))
        below, count = int(bounds[i]), int(bounds[i + 1] - bounds[i])
        m = base + below + 1 + int(rng.integers(0, count))
        value = float(m) * self.lattice_step()  # rounding m·h to a double is post-processing
        return QueryResult(self.name, value, "exponential", self.privacy)

    def run(self, data: Any, /, *, rng: Any = None) -> QueryResult:
        rng = dpkit.resolve_rng(rng, owner=self.name)[0]
        if isinstance(rng, dpkit.SecureRandom):
            return self._lattice_run(data, rng)
        edges, log_w = self.log_weights(data)
        i = int(sample_by_weight(log_w, rng))
        left, right = edges[i], edges[i + 1]
        value = float(min(left + rng.random() * (right - left), right))
        return QueryResult(self.name, value, "exponential", self.privacy)
