"""Queries over a dataset whose sensitivity is derived from the query, never taken from the caller.

Each query is a frozen value with a ``privacy`` property (its accounting event, known before
any data is touched) and ``run(data, /, *, rng)``, which returns a frozen :class:`QueryResult`.
That pair is how a budget-tracked session executes a query: check ``privacy`` against the
budget, commit it, then ``run``.

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

**Missing values.** NaN (or ``None`` in object arrays) is an error by default. With
``nan="drop"`` those records are removed before anything else, so they are neither counted nor
summed; dropping is a per-record transformation, so the privacy guarantee is unchanged.
Values outside [L, U], including ±inf, are clamped (Dwork & Roth 2014, Section 3.3's bounded
data; clamping is per record).

**Randomness.** With a numpy Generator (fast mode) the noise samplers are numpy's floating-point
ones. In secure mode (``rng=None`` or a SecureRandom) Laplace and Gaussian noise is added on a
power-of-two lattice with exact discrete noise, geometric noise is exact, and the quantile is a
lattice point (see the mechanisms and :class:`Quantile`).
"""

from __future__ import annotations

import math
from fractions import Fraction
from statistics import NormalDist
from typing import Any, ClassVar

import attrs
import numpy as np
from numpy.typing import NDArray

import dpkit
from dpkit import (
    Choice,
    GaussianDP,
    InvalidData,
    InvalidParameter,
    PrivacyEvent,
    PureDP,
    Real,
    Sequence_,
    parameter,
)
from dpkit_central.exponential import sample_by_weight
from dpkit_central.gaussian import Gaussian, analytic_gaussian_sigma, lattice_gaussian_release
from dpkit_central.geometric import Geometric
from dpkit_central.laplace import Laplace

__all__ = ["Count", "Histogram", "Mean", "Quantile", "QueryResult", "Sum"]

POSITIVE = Real(low=0.0, low_open=True)
FINITE = Real()
OPEN_UNIT = Real(low=0.0, high=1.0, low_open=True, high_open=True)
NAN_POLICY = Choice(("error", "drop"))
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
        noise_scale: the noise scale when the release is answer + noise (Laplace and geometric:
            Δ/ε, Gaussian: σ); None when the release is not additive (mean, quantile).
        variance: the variance of the noise in each released value, where it is known exactly.
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

    def noise_half_width(self, level: float = 0.95) -> float | None:
        """h with P[|noise| ≤ h] ≥ ``level`` for additive noise; None for mean and quantile.

        Exact noise quantiles: Laplace(b) has P[|Z| > h] = e^{−h/b}, so h = b·ln(1/(1 − level));
        N(0, σ²) gives h = σ·Φ⁻¹((1 + level)/2); the two-sided geometric with α = e^{−1/b} has
        P[|Z| > m] = 2α^{m+1}/(1 + α), and h is the smallest integer m making that ≤ 1 − level.
        """
        if not isinstance(level, (int, float)) or not 0.0 < level < 1.0:
            raise InvalidParameter("level", level, "a real number in (0, 1)", owner=self.query)
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
        half = self.noise_half_width(level)
        if half is None:
            return None
        value = np.asarray(self.value, dtype=np.float64)
        low, high = value - half, value + half
        return (low.item(), high.item()) if low.ndim == 0 else (low, high)


def _missing(array: NDArray[Any]) -> NDArray[np.bool_]:
    if np.issubdtype(array.dtype, np.floating) or np.issubdtype(array.dtype, np.complexfloating):
        return np.asarray(np.isnan(array), dtype=np.bool_)
    if array.dtype == object:
        return np.asarray((array == None) | (array != array), dtype=np.bool_)  # noqa: E711
    return np.zeros(array.shape, dtype=np.bool_)


def _records(data: Any, nan: str, owner: str, *, numeric: bool) -> NDArray[Any]:
    """The records of ``data`` (a 1-D array), with missing values refused or dropped."""
    array = np.asarray(data)
    if array.ndim != 1:
        raise InvalidData(
            f"{owner}: data must be a 1-D array of records, got shape {array.shape}", field="data"
        )
    if numeric and (
        array.dtype == np.bool_
        or not (np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating))
    ):
        raise InvalidData(
            f"{owner}: data must be real numbers, got an array of dtype {array.dtype}",
            field="data",
        )
    missing = _missing(array)
    if missing.any():
        if nan == "error":
            raise InvalidData(
                f"{owner}: data contain {int(np.count_nonzero(missing))} missing value(s) (NaN); "
                "clean them, or pass nan='drop' to leave those records out",
                field="data",
            )
        array = array[~missing]
    return array


def _bounds_check(query: Any) -> None:
    if not query.lower < query.upper:
        raise InvalidParameter(
            "upper",
            query.upper,
            f"> lower={query.lower!r} (bounds [lower, upper])",
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
    value = mech.randomize(answer, rng=rng)
    return QueryResult(
        query=query,
        value=value.item() if value.ndim == 0 else value,
        mechanism=mech.name,
        privacy=mech.privacy,
        noise_scale=mech.sigma if isinstance(mech, Gaussian) else mech.sensitivity / mech.epsilon,
        variance=mech.variance,
    )


def _clamped_sum(records: NDArray[Any], lower: float, upper: float) -> float:
    return float(np.clip(records.astype(np.float64, copy=False), lower, upper).sum())


class _AdditiveNoise:
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


@attrs.frozen
class Count(_AdditiveNoise):
    """The number of records, plus noise of sensitivity 1 (add/remove one record).

    ``noise="geometric"`` (default) releases an integer (Ghosh et al. 2009), ``"laplace"`` a
    real (Dwork et al. 2006), ``"gaussian"`` a real with (ε, δ) (Balle & Wang 2018).
    With ``nan="drop"`` only the non-missing records are counted.
    """

    name: ClassVar[str] = "count"
    epsilon: float = parameter(POSITIVE, doc="privacy loss ε", typical=(0.05, 6.0))
    noise: str = parameter(
        Choice(("geometric", "laplace", "gaussian")), doc="noise distribution", default="geometric"
    )
    delta: float | None = parameter(
        OPEN_UNIT, doc="δ, only for noise='gaussian'", default=None, optional=True
    )
    nan: str = parameter(NAN_POLICY, doc="missing values: 'error' or 'drop'", default="error")

    def __attrs_post_init__(self) -> None:
        _noise_check(self)

    @property
    def sensitivity(self) -> float:
        return 1.0

    def run(self, data: Any, /, *, rng: Any = None) -> QueryResult:
        rng = dpkit.resolve_rng(rng, owner=self.name)[0]
        records = _records(data, self.nan, self.name, numeric=False)
        return _release(self.name, self.mechanism, records.shape[0], rng)


@attrs.frozen
class Sum(_AdditiveNoise):
    """Σ clamp(x, lower, upper) plus noise; Δ = max(|lower|, |upper|) under add/remove.

    ``noise="laplace"`` (default) or ``"gaussian"`` (with ``delta``).
    """

    name: ClassVar[str] = "sum"
    lower: float = parameter(FINITE, doc="lower clamping bound")
    upper: float = parameter(FINITE, doc="upper clamping bound (> lower)")
    epsilon: float = parameter(POSITIVE, doc="privacy loss ε", typical=(0.05, 6.0))
    noise: str = parameter(Choice(("laplace", "gaussian")), doc="noise", default="laplace")
    delta: float | None = parameter(
        OPEN_UNIT, doc="δ, only for noise='gaussian'", default=None, optional=True
    )
    nan: str = parameter(NAN_POLICY, doc="missing values: 'error' or 'drop'", default="error")

    def __attrs_post_init__(self) -> None:
        _bounds_check(self)
        _noise_check(self)

    @property
    def sensitivity(self) -> float:
        """max(|L|, |U|): adding or removing one record moves the sum by its clamped value."""
        return max(abs(self.lower), abs(self.upper))

    def run(self, data: Any, /, *, rng: Any = None) -> QueryResult:
        rng = dpkit.resolve_rng(rng, owner=self.name)[0]
        records = _records(data, self.nan, self.name, numeric=True)
        return _release(
            self.name, self.mechanism, _clamped_sum(records, self.lower, self.upper), rng
        )


@attrs.frozen
class Mean:
    """The mean of values clamped to [lower, upper], as a noisy centred sum over a noisy count.

    With m = (L + U)/2: S = Σ(clamp(x) − m) has Δ = (U − L)/2 and C = n has Δ = 1 under
    add/remove, so the release is mean = clamp(m + S̃ / max(C̃, 1), L, U) (see the module
    docstring for the sources).

    Budget: with Laplace noise S and C each get ε/2 (basic composition, Dwork & Roth 2014,
    Theorem 3.14), so the event is PureDP(ε). With Gaussian noise both parts get noise
    multiplier √2·z, where z = σ/Δ is the analytic calibration at (ε, δ): releasing
    (S, C) is one Gaussian mechanism whose normalised L2 sensitivity is
    √((1/(√2 z))² + (1/(√2 z))²) = 1/z, so the event is exactly GaussianDP(z, δ).
    The ratio is biased for small n; its variance has no closed form, so ``variance`` is None,
    while ``parts`` carries the two noisy components with their exact noise variances.
    """

    name: ClassVar[str] = "mean"
    lower: float = parameter(FINITE, doc="lower clamping bound")
    upper: float = parameter(FINITE, doc="upper clamping bound (> lower)")
    epsilon: float = parameter(POSITIVE, doc="privacy loss ε", typical=(0.05, 6.0))
    noise: str = parameter(Choice(("laplace", "gaussian")), doc="noise", default="laplace")
    delta: float | None = parameter(
        OPEN_UNIT, doc="δ, only for noise='gaussian'", default=None, optional=True
    )
    nan: str = parameter(NAN_POLICY, doc="missing values: 'error' or 'drop'", default="error")

    def __attrs_post_init__(self) -> None:
        _bounds_check(self)
        _noise_check(self)

    @property
    def midpoint(self) -> float:
        return 0.5 * (self.lower + self.upper)

    def _parts(self) -> tuple[Laplace | _FixedGaussian, Laplace | _FixedGaussian]:
        half_width = 0.5 * (self.upper - self.lower)
        if self.noise == "laplace":
            return (
                Laplace(epsilon=self.epsilon / 2.0, sensitivity=half_width),
                Laplace(epsilon=self.epsilon / 2.0, sensitivity=1.0),
            )
        assert self.delta is not None
        z = math.sqrt(2.0) * analytic_gaussian_sigma(self.epsilon, self.delta)
        return (
            _FixedGaussian(z * half_width, half_width, self.delta),
            _FixedGaussian(z, 1.0, self.delta),
        )

    @property
    def privacy(self) -> PrivacyEvent:
        if self.noise == "laplace":
            return PureDP(epsilon=self.epsilon)
        assert self.delta is not None
        return GaussianDP(
            noise_multiplier=analytic_gaussian_sigma(self.epsilon, self.delta), delta=self.delta
        )

    def run(self, data: Any, /, *, rng: Any = None) -> QueryResult:
        rng = dpkit.resolve_rng(rng, owner=self.name)[0]
        records = _records(data, self.nan, self.name, numeric=True)
        centred = np.clip(records.astype(np.float64, copy=False), self.lower, self.upper)
        centred -= self.midpoint
        sum_mech, count_mech = self._parts()
        noisy_sum = sum_mech.randomize(float(centred.sum()), rng=rng).item()
        noisy_count = count_mech.randomize(float(records.shape[0]), rng=rng).item()
        mean = self.midpoint + noisy_sum / max(noisy_count, 1.0)
        value = min(max(mean, self.lower), self.upper)
        parts = tuple(
            QueryResult(
                query=part,
                value=value,
                mechanism=mech.name,
                privacy=mech.privacy,
                noise_scale=mech.scale,
                variance=mech.variance,
            )
            for part, value, mech in (
                ("centred_sum", noisy_sum, sum_mech),
                ("count", noisy_count, count_mech),
            )
        )
        return QueryResult(
            self.name, value, f"{self.noise} (sum and count)", self.privacy, parts=parts
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
        return self.sigma**2

    @property
    def privacy(self) -> GaussianDP:
        """This component alone; the mean's event is the joint one (see Mean.privacy)."""
        return GaussianDP(noise_multiplier=self.sigma / self.sensitivity, delta=self.delta)

    def randomize(self, value: float, /, *, rng: Any = None) -> NDArray[np.float64]:
        """value + N(0, σ²); in secure mode on the lattice of :func:`lattice_gaussian_release`
        (with the same declared noise multiplier σ/Δ, so the joint event is unchanged)."""
        if isinstance(rng, dpkit.SecureRandom):
            return lattice_gaussian_release(
                np.asarray(value, dtype=np.float64),
                sigma=self.sigma,
                sensitivity=self.sensitivity,
                rng=rng,
                owner="mean",
            )
        return np.asarray(value + rng.normal(0.0, self.sigma), dtype=np.float64)


@attrs.frozen
class Histogram(_AdditiveNoise):
    """Noisy counts of the records in each declared category (Δ₁ = Δ₂ = 1 under add/remove).

    The categories are declared up front, never read from the data (reading them would leak
    which values occur). A record outside them is an error; missing values follow ``nan``.
    ``noise`` as for :class:`Count`; the noise is independent per category (Dwork & Roth 2014,
    Section 3.3, histogram queries).
    """

    name: ClassVar[str] = "histogram"
    categories: tuple[Any, ...] = parameter(Sequence_(min_length=1), doc="the declared categories")
    epsilon: float = parameter(POSITIVE, doc="privacy loss ε", typical=(0.05, 6.0))
    noise: str = parameter(
        Choice(("geometric", "laplace", "gaussian")), doc="noise distribution", default="geometric"
    )
    delta: float | None = parameter(
        OPEN_UNIT, doc="δ, only for noise='gaussian'", default=None, optional=True
    )
    nan: str = parameter(NAN_POLICY, doc="missing values: 'error' or 'drop'", default="error")

    def __attrs_post_init__(self) -> None:
        _noise_check(self)

    @property
    def sensitivity(self) -> float:
        return 1.0

    def counts(self, data: Any, /) -> NDArray[np.int64]:
        """The exact counts (not private: for tests and for building on)."""
        records = _records(data, self.nan, self.name, numeric=False)
        k = len(self.categories)
        if records.shape[0] == 0:
            return np.zeros(k, dtype=np.int64)
        try:
            unique, inverse = np.unique(records, return_inverse=True)
        except TypeError:
            raise InvalidData(
                f"{self.name}: data mix types that cannot be compared", field="data"
            ) from None
        position = {c: i for i, c in enumerate(self.categories)}
        # One dictionary lookup per distinct value, not per record.
        mapped = np.array(
            [position.get(u.item() if hasattr(u, "item") else u, -1) for u in unique],
            dtype=np.int64,
        )
        if (mapped < 0).any():
            unknown = unique[int(np.flatnonzero(mapped < 0)[0])]
            raise InvalidData(
                f"{self.name}: data contain {unknown!r}, which is not one of the declared "
                f"categories {list(self.categories)!r}",
                field="data",
            )
        return np.bincount(mapped[inverse.ravel()], minlength=k).astype(np.int64)

    def run(self, data: Any, /, *, rng: Any = None) -> QueryResult:
        rng = dpkit.resolve_rng(rng, owner=self.name)[0]
        result = _release(self.name, self.mechanism, self.counts(data), rng)
        return attrs.evolve(result, categories=self.categories)


@attrs.frozen
class Quantile:
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
    """

    name: ClassVar[str] = "quantile"
    q: float = parameter(Real(low=0.0, high=1.0), doc="the quantile level in [0, 1]")
    lower: float = parameter(FINITE, doc="lower clamping bound")
    upper: float = parameter(FINITE, doc="upper clamping bound (> lower)")
    epsilon: float = parameter(POSITIVE, doc="privacy loss ε", typical=(0.05, 6.0))
    nan: str = parameter(NAN_POLICY, doc="missing values: 'error' or 'drop'", default="error")

    def __attrs_post_init__(self) -> None:
        _bounds_check(self)

    @property
    def privacy(self) -> PureDP:
        return PureDP(epsilon=self.epsilon)

    def log_weights(self, data: Any, /) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """(interval end points z₀..z_{n+1}, log weight of each of the n + 1 intervals)."""
        records = _records(data, self.nan, self.name, numeric=True)
        z = np.sort(np.clip(records.astype(np.float64), self.lower, self.upper))
        edges = np.concatenate(([self.lower], z, [self.upper]))
        n = records.shape[0]
        rank = np.arange(n + 1, dtype=np.float64)
        with np.errstate(divide="ignore"):
            log_width = np.log(np.diff(edges))
        return edges, log_width - 0.5 * self.epsilon * np.abs(rank - self.q * n)

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
        records = _records(data, self.nan, self.name, numeric=True)
        h = self.lattice_step()
        low = self.lower / h
        base_f = math.floor(low)
        z = np.sort(np.clip(records.astype(np.float64), self.lower, self.upper))
        inner = np.floor(z / h) - float(base_f)
        first = -1.0 if low == base_f else 0.0  # ⌈L/h⌉ − 1 − ⌊L/h⌋
        last = float(math.floor(self.upper / h)) - float(base_f)
        bounds = np.concatenate(([first], inner, [last]))
        n = records.shape[0]
        rank = np.arange(n + 1, dtype=np.float64)
        with np.errstate(divide="ignore"):
            log_count = np.log(np.diff(bounds))
        return int(base_f), bounds, log_count - 0.5 * self.epsilon * np.abs(rank - self.q * n)

    def _lattice_run(self, data: Any, rng: Any) -> QueryResult:
        base, bounds, log_w = self.lattice_log_weights(data)
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
