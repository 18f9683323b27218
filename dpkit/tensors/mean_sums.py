"""The numeric mechanisms' server statistic on an accelerator's reports: n, Σ t and Σ t².

A mean estimator's sufficient statistic (:class:`~dpkit.mean_estimate.MeanSums`) is, per
coordinate, the count of the reports, the sum of their standard values t = (x − centre)/scale
and the sum of the squares. Computed where the reports are, it is the one transfer: 2d floats
and a count come back, not the reports.

The standardisation is the CPU's elementwise arithmetic (a subtraction and a division, each
rounded by IEEE 754 alike on any device), so every t is the CPU's to the bit; the sums are the
device library's reductions, whose order of addition differs from numpy's pairwise one, so they
agree with the CPU's to within a few units of n·2⁻⁵³·max|t| (rounding, not law).

**Checks**, as the CPU's estimator makes them, with messages that quote no value: real numbers
(booleans refused), ``d`` columns for a vector mechanism, and every |t| within the mechanism's
report range (a NaN or a value outside is not one of its reports: counted on the device, the
count reported). float64 is needed (JAX without x64 is refused from the library alone).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpkit.errors import InvalidData
from dpkit.tensors.device_random import require_64_bit
from dpkit.tensors.libraries import ArrayLibrary

__all__ = ["mean_sums"]


def mean_sums(
    library: ArrayLibrary,
    reports: Any,
    *,
    dimension: int,
    centre: float,
    scale: float,
    limit: float,
    mechanism: str,
    owner: str,
    field: str = "reports",
) -> tuple[int, NDArray[np.float64], NDArray[np.float64]]:
    """(n, Σ t, Σ t²) of reports on the data's scale (shape (..., d), or any shape for d = 1),
    t = (x − ``centre``)/``scale``, every |t| ≤ ``limit``; the sums per coordinate, on the host."""
    require_64_bit(library, owner=owner, field=field, needs="the sums need float64")
    xp = library.xp
    if not xp.isdtype(reports.dtype, ("integral", "real floating")):
        raise InvalidData(
            f"{owner}: {field} must be real numbers, got a {library.name} array of {reports.dtype}",
            field=field,
        )
    if dimension > 1 and (reports.ndim < 1 or reports.shape[-1] != dimension):
        raise InvalidData(
            f"{owner}: {field} must have {dimension} columns, got shape {tuple(reports.shape)}",
            field=field,
        )
    t = (xp.reshape(xp.astype(reports, xp.float64), (-1, dimension)) - centre) / scale
    bad = int(xp.sum(xp.astype(xp.logical_not(xp.abs(t) <= limit), xp.int64)))
    if bad:
        raise InvalidData(
            f"{owner}: {bad} report value(s) are NaN or outside the range of {mechanism} reports",
            field=field,
        )
    sums = library.small_to_host(xp.sum(t, axis=0))
    squares = library.small_to_host(xp.sum(t * t, axis=0))
    return int(t.shape[0]), sums, squares
