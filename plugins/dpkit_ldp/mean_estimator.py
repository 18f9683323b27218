"""The estimator of every mean protocol (duchi, duchi_multi, pm, pm_multi, hm, hm_multi).

Each report is unbiased for its user's value, coordinate by coordinate, so the mean of the
reports is unbiased for the mean of the values. :meth:`MeanEstimator.accumulate` standardises
the reports (T = (Y − centre)/scale, the mechanism's own units) and keeps n, Σ T and Σ T² per
coordinate (:class:`dpkit.plugin.MeanSums`, mergeable; an accelerator's reports are summed on the
device); :meth:`MeanEstimator.estimate` returns a
:class:`dpkit.plugin.MeanEstimate` with the plug-in variance s²/n, the mechanism's worst case over inputs
divided by n, and the normal interval (see :mod:`dpkit.mean_estimate`).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from dpkit.plugin import (
    Estimator,
    InvalidData,
    MeanEstimate,
    MeanSums,
    array_library,
    mean_sums,
)
from dpkit_ldp._numeric import real_reports

__all__ = ["MeanEstimator"]


class MeanEstimator(Estimator):
    """Unbiased mean per coordinate, plug-in variance and normal interval (module docstring)."""

    methods: ClassVar[tuple[str, ...]] = ("unbiased",)
    device_methods: ClassVar[frozenset[str]] = frozenset({"accumulate"})
    mechanism: Any

    @property
    def dimension(self) -> int:
        return int(getattr(self.mechanism, "dimension", 1))

    def _standard_reports(self, reports: Any) -> NDArray[np.float64]:
        mech = self.mechanism
        owner = f"{mech.name} estimator"
        array = real_reports(reports, owner)
        d = self.dimension
        if d > 1 and (array.ndim < 1 or array.shape[-1] != d):
            raise InvalidData(
                f"{owner}: reports must have {d} columns, got shape {array.shape}",
                field="reports",
            )
        t: NDArray[np.float64] = mech.from_data(array.reshape(-1, d))
        bad = ~(np.abs(t) <= self._report_limit())
        if bad.any():
            raise InvalidData(
                f"{owner}: {int(np.count_nonzero(bad))} report value(s) are NaN or outside the "
                f"range of {mech.name} reports",
                field="reports",
            )
        return t

    def _report_limit(self) -> float:
        """The largest |t| of a report: the mechanism's largest magnitude (times d/k when it
        samples attributes); anything beyond, or NaN, cannot be one of its reports."""
        mech = self.mechanism
        return float(np.max(mech.report_bound())) * (1.0 + 1e-12) + float(mech.report_slack)

    def accumulate(self, reports: Any, /) -> MeanSums:
        """n, Σ t and Σ t² of the standardised reports; an accelerator's reports are summed
        there (:mod:`dpkit.tensors.mean_sums`: only the sums come back)."""
        mech = self.mechanism
        owner = f"{mech.name} estimator"
        library = array_library(reports, owner=owner, field="reports")
        if library is not None:  # an accelerator's array (host arrays arrive as numpy views)
            n, sums, squares = mean_sums(
                library,
                reports,
                dimension=self.dimension,
                centre=mech.centre,
                scale=mech.scale,
                limit=self._report_limit(),
                mechanism=mech.name,
                owner=owner,
            )
            return MeanSums(mech.name, n, sums, squares)
        t = self._standard_reports(reports)
        return MeanSums(mech.name, t.shape[0], t.sum(axis=0), np.square(t).sum(axis=0))

    def estimate(self, statistics: Any, /, *, method: str = "unbiased") -> MeanEstimate:
        self.check_method(method)
        mech = self.mechanism
        if (
            not isinstance(statistics, MeanSums)
            or statistics.mechanism != mech.name
            or statistics.dimension != self.dimension
        ):
            raise InvalidData(
                f"expected the MeanSums of {mech.name!r} in {self.dimension} dimension(s)",
                field="statistics",
            )
        return MeanEstimate.from_sums(
            statistics,
            centre=np.full(self.dimension, mech.centre),
            scale=np.full(self.dimension, mech.scale),
            worst_case=mech.worst_case_variance(),
        )
