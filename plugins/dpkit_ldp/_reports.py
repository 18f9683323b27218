"""What the telemetry protocols' reports and statistics share: report rows of ``uint64`` words,
checked once, and the read-only arrays their mergeable statistics hold.

A report of cms, hcms, rappor, pem or treehist is a row of unsigned 64-bit words (indices,
hash seeds, packed bits); each protocol checks its own shape and ranges, and all of them the
element type here, with one message. A statistic's arrays are copied and made read-only when it
is built, so that adding two statistics can never change either.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpkit.plugin import InvalidData, describe_dtype

__all__ = ["read_only_floats", "read_only_ints", "read_only_words", "report_words"]


def report_words(array: NDArray[Any], owner: str) -> NDArray[np.uint64]:
    """Reports (already of the right shape) as ``uint64`` words, or :class:`~InvalidData` when
    they are not integers (an empty array of any type is no reports)."""
    if array.size and not np.issubdtype(array.dtype, np.integer):
        raise InvalidData(
            f"{owner}: reports must be integers (uint64 words), got an array of "
            f"{describe_dtype(array)}",
            field="reports",
        )
    return array.astype(np.uint64, copy=False)


def read_only_ints(values: Any) -> NDArray[np.int64]:
    """A read-only ``int64`` copy of ``values`` (a statistic's counts)."""
    array = np.array(values, dtype=np.int64)
    array.setflags(write=False)
    return array


def read_only_floats(values: Any) -> NDArray[np.float64]:
    """A read-only ``float64`` copy of ``values`` (estimates, variances)."""
    array = np.array(values, dtype=np.float64)
    array.setflags(write=False)
    return array


def read_only_words(values: Any) -> NDArray[np.uint64]:
    """A read-only ``uint64`` copy of ``values`` (report rows, items)."""
    array = np.array(values, dtype=np.uint64)
    array.setflags(write=False)
    return array
