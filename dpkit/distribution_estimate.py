"""Distributions of numeric values from local reports: a mergeable histogram and the estimate.

A distribution protocol (the square wave mechanism of Li et al. 2020, ``dpkit_ldp``) reduces
reports to the number of reports in each of a fixed set of output buckets
(:class:`ReportHistogram`, which adds up across chunks), and reconstructs from it the probability
of each of ``bins`` equal-width buckets of the input domain (:class:`DistributionEstimate`), by
expectation maximisation with or without smoothing.

Such reconstructions are biased (smoothing trades variance for bias, and EM's maximum-likelihood
solution is constrained to the simplex) and have no closed-form variance, so the estimate carries
no variance and no confidence interval: it says how it was computed (method, iterations,
log-likelihood, whether the stopping rule was met), not how far it may be off.
"""

from __future__ import annotations

from typing import Any, ClassVar

import attrs
import numpy as np
from numpy.typing import NDArray

from dpkit.document import json_value
from dpkit.errors import InvalidParameter
from dpkit.estimator import FrequencyCounts, _float_array

__all__ = ["DistributionEstimate", "ReportHistogram"]


@attrs.frozen(eq=False)
class ReportHistogram(FrequencyCounts):
    """How many of ``n`` reports fell in each output bucket: a sufficient statistic that adds up.

    >>> a = ReportHistogram(mechanism="sw", counts=[2, 0, 1], n=3)
    >>> (a + a).counts.tolist(), (a + a).n
    ([4, 0, 2], 6)
    """

    unit: ClassVar[str] = "buckets"


@attrs.frozen(eq=False)
class DistributionEstimate:
    """The estimated probability of each bucket ``[edges[i], edges[i + 1])`` of the input domain.

    ``estimates`` (also ``probabilities``) sum to 1; with ``n == 0`` they are uniform (EM's
    starting point). See the module docstring for why there is no variance. ``method`` is the
    reconstruction (``"ems"``: EM with smoothing, ``"em"``: plain EM); ``iterations`` and
    ``converged`` say whether the stopping rule was met before the iteration cap.
    """

    mechanism: str
    method: str
    n: int
    edges: NDArray[np.float64] = attrs.field(converter=_float_array)
    estimates: NDArray[np.float64] = attrs.field(converter=_float_array)
    iterations: int
    converged: bool
    log_likelihood: float

    @property
    def probabilities(self) -> NDArray[np.float64]:
        return self.estimates

    @property
    def centres(self) -> NDArray[np.float64]:
        centres: NDArray[np.float64] = (self.edges[:-1] + self.edges[1:]) / 2.0
        return centres

    @property
    def density(self) -> NDArray[np.float64]:
        """Probability per unit of the input: probabilities / bucket widths."""
        density: NDArray[np.float64] = self.estimates / np.diff(self.edges)
        return density

    def mean(self) -> float:
        """The mean of the estimated distribution (uniform within each bucket).

        A plug-in of a biased reconstruction: not an unbiased mean estimate (use a mean
        protocol — duchi, pm, hm — for that).
        """
        return float(np.dot(self.centres, self.estimates))

    def quantile(self, q: float) -> float:
        """The q-quantile of the estimated distribution (linear within a bucket)."""
        if isinstance(q, bool) or not isinstance(q, (int, float)) or not 0.0 <= q <= 1.0:
            raise InvalidParameter("q", q, "a number in [0, 1]", owner="DistributionEstimate")
        cumulative = np.concatenate(([0.0], np.cumsum(self.estimates)))
        cumulative /= cumulative[-1]
        return float(np.interp(q, cumulative, self.edges))

    def to_document(self, *, confidence: float = 0.95) -> dict[str, Any]:
        """The estimate in a result document (:class:`dpkit.document.Document`): the number of
        reports, the probability of each bucket and the buckets' ``edges``, and how the
        reconstruction ran (``method``, ``iterations``, ``converged``, ``log_likelihood``).
        ``variance`` and ``confidence_interval`` are null at every ``confidence``: the
        reconstruction has neither (module docstring)."""
        return {
            "n": self.n,
            "categories": None,
            "estimate": json_value(self.estimates),
            "variance": None,
            "confidence_interval": None,
            "edges": json_value(self.edges),
            "method": self.method,
            "iterations": self.iterations,
            "converged": self.converged,
            "log_likelihood": self.log_likelihood,
        }
