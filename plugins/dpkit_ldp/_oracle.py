"""The estimator shared by the "pure" frequency oracles (sue, oue, olh, hr).

A mechanism plugged in here exposes ``size`` (k) and ``support_probabilities`` (p*, q*): the
probability that one report supports the user's true value, and any other given value. Its
estimator turns reports into the support counts C_v (:meth:`support_counts`, mergeable
:class:`dpkit.plugin.FrequencyCounts`) and debiases them with Wang et al. 2017, Theorem 2
(see :mod:`dpkit_ldp._frequency`).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from dpkit.plugin import EPSILON, Estimate, Estimator, FrequencyCounts, Integer, InvalidParameter
from dpkit_ldp import _frequency, postprocess


class PureProtocolEstimator(Estimator):
    """Unbiased counts ĉ_v = (C_v − n q*)/(p* − q*) with their exact variance, plus post-processing.

    Var[ĉ_v] = n q*(1 − q*)/(p* − q*)² + n_v (1 − p* − q*)/(p* − q*) (Wang et al. 2017, Theorem 2),
    exact because the supports of different users are independent; the reported variance is its
    unbiased estimate (the unclipped ĉ_v plugged in, floored at 0) and the intervals are score
    intervals built on the exact a + b·n_v (:class:`dpkit.plugin.Estimate`). ``method`` is
    ``"unbiased"`` or one of the named post-processings of :mod:`dpkit_ldp.postprocess`; for
    those the variance and the interval stay the unbiased estimate's (the interval clipped to
    [0, n]), see :class:`dpkit.plugin.Estimate`.
    """

    methods: ClassVar[tuple[str, ...]] = ("unbiased", *postprocess.METHODS)
    mechanism: Any

    def support_counts(self, reports: Any, /) -> tuple[NDArray[np.int64], int]:
        """C_v for every category v, and the number of reports."""
        raise NotImplementedError

    def accumulate(self, reports: Any, /) -> FrequencyCounts:
        counts, n = self.support_counts(reports)
        return FrequencyCounts(self.mechanism.name, counts, n)

    def estimate(self, statistics: FrequencyCounts, /, *, method: str = "unbiased") -> Estimate:
        self.check_method(method)
        self.check_statistics(statistics, self.mechanism.size)
        return debiased_estimate(self.mechanism, statistics, method)


def debiased_estimate(mechanism: Any, statistics: FrequencyCounts, method: str) -> Estimate:
    """The Theorem 2 estimate of ``statistics`` for a mechanism with ``support_probabilities``."""
    n = statistics.n
    p, q = mechanism.support_probabilities
    counts = _frequency.debiased_counts(statistics.counts, n, p, q)
    variance = _frequency.unbiased_variance(counts, n, p, q)
    processed = postprocess.apply(method, counts, n)
    return Estimate(
        mechanism.name,
        method,
        n,
        processed,
        variance,
        categories=getattr(mechanism, "categories", None),
        variance_model=_frequency.variance_model(n, p, q),
        unbiased_estimates=None if method == "unbiased" else counts,
        support_probabilities=(p, q),
    )


def approximate_variance(p: float, q: float, n: int) -> float:
    """Var* of the frequency estimate f̂_v = ĉ_v/n: q*(1 − q*)/(n (p* − q*)²).

    Wang et al. 2017, Section 3 (the f_v term of Theorem 2 dropped, which is the paper's
    approximation for small f_v).
    """
    return q * (1.0 - q) / (n * (p - q) ** 2)


def check_variance_arguments(k: Any, epsilon: Any, n: Any, *, owner: str) -> tuple[int, float, int]:
    """Validate the arguments of a ``frequency_variance`` classmethod."""
    values = []
    for name, value, domain in (
        ("k", k, Integer(low=2)),
        ("epsilon", epsilon, EPSILON),
        ("n", n, Integer(low=1)),
    ):
        try:
            values.append(domain.convert(value))
        except (ValueError, TypeError, OverflowError):
            raise InvalidParameter(name, value, domain.describe(), owner=owner) from None
    return int(values[0]), float(values[1]), int(values[2])
