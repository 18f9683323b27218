"""The Estimator contract: reports → mergeable statistics → estimates with variance and intervals.

An estimator first reduces reports to sufficient statistics (a :class:`Statistics`:
:class:`FrequencyCounts` for the frequency oracles, :class:`~dpkit.plugin.MeanSums` for the numeric
mean protocols, :class:`~dpkit.plugin.ReportHistogram` for distribution estimation), which add up, so
reports can be aggregated chunk by chunk, in parallel or on a cluster, and then turns the merged
statistics into an estimate: an :class:`Estimate` of category counts, a
:class:`~dpkit.plugin.MeanEstimate` or a :class:`~dpkit.plugin.DistributionEstimate`.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import TYPE_CHECKING, Any, ClassVar

import attrs
import numpy as np
from numpy.typing import NDArray

from dpkit.errors import InvalidData, InvalidParameter
from dpkit.mechanism import Mechanism
from dpkit.tensors.methods import wrap_array_methods

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["Estimate", "Estimator", "FrequencyCounts", "Statistics"]


def _frozen_array(values: Any, dtype: Any) -> NDArray[Any]:
    array = np.array(values, dtype=dtype)
    array.setflags(write=False)
    return array


def _int_array(values: Any) -> NDArray[np.int64]:
    return _frozen_array(values, np.int64)


def _float_array(values: Any) -> NDArray[np.float64]:
    return _frozen_array(values, np.float64)


class Statistics:
    """Base of the mergeable sufficient statistics an estimator reduces reports to.

    A subclass names the ``mechanism`` that produced the reports and the number ``n`` of
    reports, and defines ``+`` (merging two chunks of the same mechanism's reports; refusing
    others with :class:`~dpkit.errors.InvalidData`). :func:`dpkit.estimate` accepts one in
    place of reports.
    """

    mechanism: str
    n: int


@attrs.frozen(eq=False)
class FrequencyCounts(Statistics):
    """How many of ``n`` reports support each category: a sufficient statistic that adds up.

    >>> a = FrequencyCounts(mechanism="krr", counts=[3, 1], n=4)
    >>> b = FrequencyCounts(mechanism="krr", counts=[0, 2], n=2)
    >>> (a + b).counts.tolist(), (a + b).n
    ([3, 3], 6)
    """

    mechanism: str
    counts: NDArray[np.int64] = attrs.field(converter=_int_array)
    n: int = attrs.field(converter=int)

    #: What one count is of, in messages.
    unit: ClassVar[str] = "categories"

    def __add__(self, other: Self) -> Self:
        if type(other) is not type(self):
            return NotImplemented
        if other.mechanism != self.mechanism or other.counts.shape != self.counts.shape:
            raise InvalidData(
                f"cannot merge counts of {other.mechanism!r} with {other.counts.size} "
                f"{self.unit} into counts of {self.mechanism!r} with {self.counts.size} "
                f"{self.unit}",
                field="statistics",
            )
        return type(self)(self.mechanism, self.counts + other.counts, self.n + other.n)


def _optional_float_array(values: Any) -> NDArray[np.float64] | None:
    return None if values is None else _float_array(values)


def _variance_model(values: Any) -> tuple[float, float] | None:
    return None if values is None else (float(values[0]), float(values[1]))


_INTERVAL_METHODS = ("auto", "score", "exact", "randomized")
#: The default interval of a pure frequency oracle is the exact one where the smaller end of
#: the support count's variance, n·min(p(1 − p), q(1 − q)), is below this: there the law is too
#: skewed and too coarse for a normal approximation (module docstring of dpkit.support_count,
#: and Estimate.confidence_interval).
EXACT_BELOW = 50.0


@attrs.frozen(eq=False)
class Estimate:
    """Estimated counts per category, with their variance and confidence intervals.

    ``estimates[v]`` estimates how many of the ``n`` users hold category v. ``frequencies`` and
    ``frequency_variance`` are the same on the scale of proportions. With ``n == 0`` the counts
    are exactly 0 and the frequencies are NaN.

    **Variance.** ``variance[v]`` is an estimate of the variance of the *unbiased* estimate of
    category v. When the estimator knows the exact variance as a function of the true count
    x (``variance_model`` = (a, b): Var[ĉ_v] = a + b·x, as for the pure frequency oracles,
    Wang et al. 2017, Theorem 2), ``variance`` is the unbiased estimate a + b·ĉ_v (the unbiased
    ĉ_v plugged in, *not* clipped to [0, n], which would bias it upwards), floored at 0.

    **Post-processed estimates** (``method`` other than ``"unbiased"``: clipping, projection,
    ``"mle"``) are biased and their own variance is not known; ``variance`` and the interval
    still describe the unbiased estimate ``unbiased_estimates`` they were computed from, and
    :meth:`confidence_interval` returns the unbiased estimate's interval intersected with
    [0, n]. That interval covers the true count exactly as often as the unbiased one (the true
    count lies in [0, n]), but it is not centred on ``estimates`` and need not contain them.

    Attributes:
        variance_model: (a, b) with Var[ĉ_v] = a + b·(true count of v), or None.
        unbiased_estimates: the unbiased estimates a post-processed estimate was derived from
            (None when ``estimates`` are themselves the unbiased estimates).
        support_probabilities: (p, q) of a pure frequency oracle whose support counts are
            Binomial(x, p) + Binomial(n − x, q) (:mod:`dpkit.support_count`), or None; it
            enables the ``"exact"`` and ``"randomized"`` intervals from the count's exact law.
    """

    mechanism: str
    method: str
    n: int
    estimates: NDArray[np.float64] = attrs.field(converter=_float_array)
    variance: NDArray[np.float64] = attrs.field(converter=_float_array)
    categories: tuple[Any, ...] | None = None
    variance_model: tuple[float, float] | None = attrs.field(
        default=None, converter=_variance_model
    )
    unbiased_estimates: NDArray[np.float64] | None = attrs.field(
        default=None, converter=_optional_float_array
    )
    support_probabilities: tuple[float, float] | None = attrs.field(
        default=None, converter=_variance_model
    )

    @property
    def frequencies(self) -> NDArray[np.float64]:
        if self.n == 0:
            return np.full_like(self.estimates, np.nan)
        return self.estimates / self.n

    @property
    def frequency_variance(self) -> NDArray[np.float64]:
        if self.n == 0:
            return np.full_like(self.variance, np.nan)
        return self.variance / float(self.n) ** 2

    def confidence_interval(
        self,
        level: float = 0.95,
        *,
        scale: str = "count",
        method: str = "auto",
        rng: Any = None,
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """A two-sided interval for each true count (or frequency) at confidence ``level``.

        ``method`` is ``"auto"`` (the default: :attr:`interval_method` says which of the next
        two it is), ``"score"``, ``"exact"`` or ``"randomized"``. With z = Φ⁻¹((1 + level)/2)
        and ĉ the unbiased estimate:

        * ``"score"`` with a ``variance_model`` (a, b) is the *score* interval (Wilson 1927's
          construction): the set of x with (ĉ − x)² ≤ z²·(a + b·x), i.e.
          ĉ + z²b/2 ± z·√(a + b·ĉ + z²b²/4). It uses the variance at the candidate x instead
          of a plug-in, which keeps its coverage close to ``level`` for small counts, where the
          Wald interval ĉ ± z·√(a + b·ĉ) under-covers and the plug-in clipped at 0 over-covers.
          Without a ``variance_model`` it is the normal (Wald) interval ĉ ± z·√variance (for
          b = 0, e.g. binary randomized response, the two coincide). Both are asymptotic
          (central limit theorem: the estimators are sums of n independent bounded terms).
        * ``"exact"`` (pure frequency oracles, with ``support_probabilities``) inverts the exact
          law of the support count C ~ Bin(x, p) + Bin(n − x, q): coverage ≥ ``level`` for
          every true count, by construction (:func:`dpkit.support_count.exact_interval`). It is
          conservative: on a lattice no deterministic interval can guarantee ``level`` without
          covering more somewhere.
        * ``"randomized"`` (pure frequency oracles) has coverage **exactly** ``level`` for every
          true count, from the exact law and one auxiliary uniform per category drawn from
          ``rng`` (``None``: the secure source; :mod:`dpkit.support_count`). It changes with the
          uniforms: a fuzzy interval, the price of exact coverage on a lattice.

        **The default** is ``"exact"`` where the normal approximation is poor and ``"score"``
        elsewhere. The rule is public (n, p, q only): exact when
        n·min(p(1 − p), q(1 − q)) < :data:`EXACT_BELOW` = 50, the smaller of the support
        count's variances at x = 0 and x = n (Var C = x·p(1 − p) + (n − x)·q(1 − q) is linear in
        x, so this is its least value over the true counts). Computed exactly from the law,
        the score interval covers at least 0.943 for every true count in every tabulated case
        with that variance ≥ 50 (n from 50 to 1000; ε from 0.1 to 8; rr, krr with k up to 1024,
        sue, oue, olh); below it, it falls under 0.94 (0.931 for krr, k = 16, ε = 4, n = 500,
        at x = 14). tests/unit/core/test_interval_coverage.py checks the default exactly in
        every cell of its grid. Estimates without ``support_probabilities`` (e.g. dbitflip, the sketches) have
        no exact law: their default is the score (or Wald) interval, asymptotic only.

        An exact or randomized interval is an integer interval, NaN at both ends when empty
        (rare, when the law is nearly deterministic). For a post-processed estimate the interval
        is that of the unbiased estimate, intersected with [0, n] (see the class docstring); an
        unbiased estimate's score interval is not clipped. ``scale`` is ``"count"`` or
        ``"frequency"`` (the count interval divided by n).
        """
        if not isinstance(level, (int, float)) or not (0.0 < level < 1.0) or math.isnan(level):
            raise InvalidParameter("level", level, "a real number in (0, 1)")
        if scale not in ("count", "frequency"):
            raise InvalidParameter("scale", scale, "'count' or 'frequency'")
        if method not in _INTERVAL_METHODS:
            raise InvalidParameter("method", method, "'auto', 'score', 'exact' or 'randomized'")
        if method == "auto":
            method = self.interval_method
        post_processed = self.unbiased_estimates is not None
        centre = self.unbiased_estimates if self.unbiased_estimates is not None else self.estimates
        if method in ("exact", "randomized"):
            low, high = self._lattice_interval(method, centre, level, rng)
            return (low / self.n, high / self.n) if scale == "frequency" else (low, high)
        z = NormalDist().inv_cdf(0.5 + level / 2.0)
        if self.variance_model is not None:
            a, b = self.variance_model
            mid = centre + z * z * b / 2.0
            half = z * np.sqrt(np.maximum(a + b * centre + (z * b) ** 2 / 4.0, 0.0))
        else:
            mid, half = centre, z * np.sqrt(self.variance)
        low, high = mid - half, mid + half
        if post_processed:
            low, high = np.clip(low, 0.0, float(self.n)), np.clip(high, 0.0, float(self.n))
        if scale == "frequency":
            if self.n == 0:
                return np.full_like(low, np.nan), np.full_like(high, np.nan)
            return low / self.n, high / self.n
        return low, high

    @property
    def interval_method(self) -> str:
        """The interval :meth:`confidence_interval` gives by default: ``"exact"`` for a pure
        frequency oracle whose support count has n·min(p(1 − p), q(1 − q)) < 50, else
        ``"score"`` (see there)."""
        if self.support_probabilities is None or self.n == 0:
            return "score"
        p, q = self.support_probabilities
        least_variance = self.n * min(p * (1.0 - p), q * (1.0 - q))
        return "exact" if least_variance < EXACT_BELOW else "score"

    def _lattice_interval(
        self, method: str, centre: NDArray[np.float64], level: float, rng: Any
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        from dpkit.randomness import resolve_rng
        from dpkit.support_count import exact_interval, randomized_interval

        if self.support_probabilities is None:
            raise InvalidParameter(
                "method",
                method,
                f"'score': the {method} interval needs a pure frequency oracle's support "
                "probabilities, which this estimate does not have",
                owner=f"{self.mechanism} estimate",
            )
        if self.n == 0:
            return np.full_like(centre, np.nan), np.full_like(centre, np.nan)
        p, q = self.support_probabilities
        # The support counts behind the unbiased estimates ĉ = (C − nq)/(p − q), recovered
        # exactly (they are integers; the float round trip is off by far less than 1/2).
        counts = np.rint(centre * (p - q) + self.n * q).astype(np.int64)
        if method == "exact":
            return exact_interval(counts, n=self.n, p=p, q=q, level=level)
        generator, _ = resolve_rng(rng, owner="Estimate.confidence_interval")
        uniforms = generator.random(size=centre.shape)
        return randomized_interval(counts, uniforms, n=self.n, p=p, q=q, level=level)

    @property
    def interval_description(self) -> str:
        """How the default interval (:meth:`confidence_interval`) is computed, in words."""
        if self.interval_method == "exact":
            return (
                "exact interval (Casella & Berger 2002, Theorem 9.2.12) from the support "
                "count's law: coverage at least the level"
            )
        if self.variance_model is not None:
            return "score interval (Wilson 1927) on the exact variance a + b·(true count)"
        return "normal (Wald) interval on the estimated variance"

    def rows(self, level: float = 0.95) -> list[dict[str, Any]]:
        """One dict per category: ``category`` (its index when unnamed), ``estimate`` (the
        count), ``frequency``, the default interval's ``ci_lower`` and ``ci_upper`` (counts)
        at ``level`` and ``ci_method``."""
        low, high = self.confidence_interval(level)
        names = list(self.categories or range(self.estimates.size))
        frequencies = self.frequencies
        return [
            {
                "category": name,
                "estimate": float(self.estimates[i]),
                "frequency": float(frequencies[i]),
                "ci_lower": float(low[i]),
                "ci_upper": float(high[i]),
                "ci_method": self.interval_description,
            }
            for i, name in enumerate(names)
        ]

    def table(self, level: float = 0.95) -> Any:
        """:meth:`rows` as a table: a pandas DataFrame (PyArrow where pandas is missing;
        needs ``dpkit[tables]``), like a central release's ``table()``."""
        from dpkit._summary import as_table

        columns = ("category", "estimate", "frequency", "ci_lower", "ci_upper", "ci_method")
        return as_table(self.rows(level), columns)

    def __str__(self) -> str:
        """A readable summary: the counts with their 95 % intervals, and how those were made."""
        from dpkit._summary import summary

        method = "" if self.method == "unbiased" else f", {self.method}"
        title = (
            f"{self.mechanism} estimate{method}: counts of {self.estimates.size} categories "
            f"from {self.n:,} reports"
        )
        return summary(title, self.rows(0.95), "category", 0.95)

    def to_document(self, *, confidence: float = 0.95) -> dict[str, Any]:
        """The estimate in a result document (:class:`dpkit.document.Document`): the number of
        reports, the categories (their indices when unnamed), the estimated counts, their
        variance and its model, and the default interval (:meth:`confidence_interval`) at
        ``confidence``, named."""
        model = self.variance_model
        method = self.interval_description
        low, high = self.confidence_interval(confidence)
        return {
            "n": self.n,
            "categories": list(self.categories or range(self.estimates.size)),
            "estimate": self.estimates.tolist(),
            "variance": self.variance.tolist(),
            "variance_model": None if model is None else {"a": model[0], "b": model[1]},
            "confidence_interval": {
                "level": confidence,
                "lower": low.tolist(),
                "upper": high.tolist(),
                "method": method,
            },
        }


class Estimator:
    """Base class of estimators for one mechanism.

    Subclasses implement :meth:`accumulate` (reports → :class:`Statistics`) and :meth:`estimate`
    (statistics → an estimate: :class:`Estimate` for frequency oracles, or the numeric results
    :class:`~dpkit.plugin.MeanEstimate` and :class:`~dpkit.plugin.DistributionEstimate`) and list the
    ``methods`` they offer, the default first; for the frequency oracles ``"unbiased"`` is the
    default, and any post-processing (clipping, projection, maximum likelihood) is a separately
    named method, never applied silently.
    """

    methods: ClassVar[tuple[str, ...]] = ("unbiased",)

    #: ``{"accumulate"}`` where ``accumulate`` counts an accelerator's arrays there itself
    #: (see :attr:`dpkit.mechanism.Mechanism.device_methods`).
    device_methods: ClassVar[frozenset[str]] = frozenset()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        wrap_array_methods(cls)

    def __init__(self, mechanism: Mechanism):
        self.mechanism = mechanism

    @property
    def default_method(self) -> str:
        """The method used when none is named: the first of ``methods``."""
        return self.methods[0]

    def accumulate(self, reports: Any, /) -> Statistics:
        raise NotImplementedError

    def estimate(self, statistics: Any, /, *, method: str = "unbiased") -> Any:
        raise NotImplementedError

    def check_method(self, method: str) -> None:
        if method not in self.methods:
            allowed = "one of " + ", ".join(map(repr, self.methods))
            raise InvalidParameter(
                "method", method, allowed, owner=f"{self.mechanism.name} estimator"
            )

    def check_statistics(self, statistics: FrequencyCounts, size: int) -> None:
        if not isinstance(statistics, FrequencyCounts):
            raise InvalidData(
                f"expected FrequencyCounts, got {type(statistics).__name__}", field="statistics"
            )
        if statistics.mechanism != self.mechanism.name or statistics.counts.shape != (size,):
            raise InvalidData(
                f"counts of {statistics.mechanism!r} with {statistics.counts.size} categories "
                f"do not fit mechanism {self.mechanism.name!r} with {size} categories",
                field="statistics",
            )
