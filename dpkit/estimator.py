"""The Estimator contract: reports → mergeable counts → estimates with variance and intervals.

An estimator first reduces reports to sufficient statistics (:class:`FrequencyCounts`), which
add up, so reports can be aggregated chunk by chunk, in parallel or on a cluster, and then turns
the merged statistics into an :class:`Estimate`.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Any, ClassVar

import attrs
import numpy as np
from numpy.typing import NDArray

from dpkit.errors import InvalidData, InvalidParameter
from dpkit.mechanism import Mechanism

__all__ = ["Estimate", "Estimator", "FrequencyCounts"]


def _frozen_array(values: Any, dtype: Any) -> NDArray[Any]:
    array = np.array(values, dtype=dtype)
    array.setflags(write=False)
    return array


def _int_array(values: Any) -> NDArray[np.int64]:
    return _frozen_array(values, np.int64)


def _float_array(values: Any) -> NDArray[np.float64]:
    return _frozen_array(values, np.float64)


@attrs.frozen(eq=False)
class FrequencyCounts:
    """How many of ``n`` reports support each category: a sufficient statistic that adds up.

    >>> a = FrequencyCounts(mechanism="krr", counts=[3, 1], n=4)
    >>> b = FrequencyCounts(mechanism="krr", counts=[0, 2], n=2)
    >>> (a + b).counts.tolist(), (a + b).n
    ([3, 3], 6)
    """

    mechanism: str
    counts: NDArray[np.int64] = attrs.field(converter=_int_array)
    n: int = attrs.field(converter=int)

    def __add__(self, other: FrequencyCounts) -> FrequencyCounts:
        if not isinstance(other, FrequencyCounts):
            return NotImplemented
        if other.mechanism != self.mechanism or other.counts.shape != self.counts.shape:
            raise InvalidData(
                f"cannot merge counts of {other.mechanism!r} with {other.counts.size} categories "
                f"into counts of {self.mechanism!r} with {self.counts.size} categories",
                field="statistics",
            )
        return FrequencyCounts(self.mechanism, self.counts + other.counts, self.n + other.n)


@attrs.frozen(eq=False)
class Estimate:
    """Estimated counts per category, with their variance and confidence intervals.

    ``estimates[v]`` estimates how many of the ``n`` users hold category ``v``; ``variance[v]``
    is its variance (the estimator's documented formula, with the estimate plugged in where the
    formula depends on the truth). ``frequencies`` and ``frequency_variance`` are the same on the
    scale of proportions. With ``n == 0`` the counts are exactly 0 and the frequencies are NaN.
    """

    mechanism: str
    method: str
    n: int
    estimates: NDArray[np.float64] = attrs.field(converter=_float_array)
    variance: NDArray[np.float64] = attrs.field(converter=_float_array)
    categories: tuple[Any, ...] | None = None

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
        self, level: float = 0.95, *, scale: str = "count"
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Two-sided normal (Wald) interval ``estimate ± z·sqrt(variance)`` at ``level``.

        The estimators are sums of n independent bounded terms, so the interval is asymptotically
        exact (central limit theorem); it is not clipped to [0, n]. ``scale`` is ``"count"`` or
        ``"frequency"``.
        """
        if not isinstance(level, (int, float)) or not (0.0 < level < 1.0) or math.isnan(level):
            raise InvalidParameter("level", level, "a real number in (0, 1)")
        if scale == "count":
            centre, var = self.estimates, self.variance
        elif scale == "frequency":
            centre, var = self.frequencies, self.frequency_variance
        else:
            raise InvalidParameter("scale", scale, "'count' or 'frequency'")
        z = NormalDist().inv_cdf(0.5 + level / 2.0)
        half = z * np.sqrt(var)
        return centre - half, centre + half


class Estimator:
    """Base class of estimators for one mechanism.

    Subclasses implement :meth:`accumulate` (reports → statistics) and :meth:`estimate`
    (statistics → :class:`Estimate`) and list the ``methods`` they offer; ``"unbiased"`` is the
    default, and any post-processing (clipping, projection, maximum likelihood) is a separately
    named method, never applied silently.
    """

    methods: ClassVar[tuple[str, ...]] = ("unbiased",)

    def __init__(self, mechanism: Mechanism):
        self.mechanism = mechanism

    def accumulate(self, reports: Any, /) -> FrequencyCounts:
        raise NotImplementedError

    def estimate(self, statistics: FrequencyCounts, /, *, method: str = "unbiased") -> Estimate:
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
