"""The square wave server's statistic on an accelerator's reports: how many fell in each bucket.

The square wave mechanism's estimator (Li, Lopuhaä-Zwakenberg, Li, Skoric & Wang 2020,
"Estimating Numerical Distributions under Local Differential Privacy", SIGMOD, §4: EM over a
histogram of the reports) reads the reports only through the counts of their ``bins`` equal
buckets of the report range [−b, 1 + b] (standard units). Computed where the reports are, the
counts are the one transfer.

The bucket of a report is the CPU's, op for op: y = (x − centre)/scale, then
⌊(y + b)/(1 + 2b)·bins⌋ clipped into 0 … bins − 1, each an IEEE 754 operation rounded alike
on any device, so both paths count every report in the same bucket. The CPU's check comes
first: a report outside the range (with the CPU's slack) or NaN is not one of the mechanism's
reports; the count of such reports is the message, never a value. float64 is needed (JAX
without x64 is refused from the library alone).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpkit.errors import InvalidData
from dpkit.tensors.categories import category_counts
from dpkit.tensors.device_random import require_64_bit
from dpkit.tensors.libraries import ArrayLibrary

__all__ = ["report_histogram"]


def report_histogram(
    library: ArrayLibrary,
    reports: Any,
    *,
    centre: float,
    scale: float,
    half_width: float,
    slack: float,
    bins: int,
    describe: str,
    owner: str,
    field: str = "reports",
) -> tuple[NDArray[np.int64], int]:
    """(counts per bucket, n) of square-wave reports on the data's scale; ``describe`` says
    what a report must be, for the refusal."""
    require_64_bit(library, owner=owner, field=field, needs="the buckets need float64")
    xp = library.xp
    if not xp.isdtype(reports.dtype, ("integral", "real floating")):
        raise InvalidData(
            f"{owner}: {field} must be real numbers, got a {library.name} array of {reports.dtype}",
            field=field,
        )
    b = half_width
    y = (xp.reshape(xp.astype(reports, xp.float64), (-1,)) - centre) / scale
    inside = (y >= -b - slack) & (y <= 1.0 + b + slack)
    bad = int(xp.sum(xp.astype(xp.logical_not(inside), xp.int64)))
    if bad:
        raise InvalidData(f"{owner}: {bad} report(s) are not {describe}", field=field)
    position = xp.astype(xp.floor((y + b) / (1.0 + 2.0 * b) * bins), xp.int64)
    bucket = xp.clip(position, min=0, max=bins - 1)
    return category_counts(library, bucket, bins, owner=owner, field=field), int(y.shape[0])
