"""Validation of category arrays: one vectorised pass, typed errors naming the problem."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpkit import InvalidData


def as_category_indices(values: Any, k: int, *, owner: str, field: str = "values") -> NDArray[Any]:
    """``values`` as an integer array with every entry in ``0 .. k-1``.

    Boolean arrays are accepted as 0/1 only when ``k == 2``. An empty input of any dtype is an
    empty ``int64`` array. Floats are refused: category indices are not measurements.
    """
    array = np.asarray(values)
    if array.size == 0:
        return np.zeros(array.shape, dtype=np.int64)
    if array.dtype == np.bool_:
        if k == 2:
            return array
        raise InvalidData(
            f"{owner}: {field} are booleans, but the domain has k={k} categories; "
            f"give integer category indices 0..{k - 1}",
            field=field,
        )
    if not np.issubdtype(array.dtype, np.integer):
        raise InvalidData(
            f"{owner}: {field} must be integer category indices 0..{k - 1}, got an array of "
            f"dtype {array.dtype}" + ("; map labels through categories=[...]" if k > 2 else ""),
            field=field,
        )
    # One pass: negative numbers become huge when viewed as unsigned.
    unsigned = array.view(np.dtype(f"u{array.dtype.itemsize}"))
    bad = unsigned >= k
    if bad.any():
        first = array.flat[int(np.flatnonzero(bad.ravel())[0])]
        raise InvalidData(
            f"{owner}: {field} contain {int(first)}, outside the domain 0..{k - 1} "
            f"({int(np.count_nonzero(bad))} value(s) out of range)",
            field=field,
        )
    return array


def as_binary(values: Any, *, owner: str, field: str = "values") -> NDArray[Any]:
    """``values`` as an array of 0/1 (bool, integer, or float exactly 0.0/1.0)."""
    array = np.asarray(values)
    if array.size == 0:
        return np.zeros(array.shape, dtype=np.int64)
    if np.issubdtype(array.dtype, np.floating):
        bad = (array != 0.0) & (array != 1.0)
        if bad.any():
            first = array.flat[int(np.flatnonzero(bad.ravel())[0])]
            raise InvalidData(
                f"{owner}: {field} must be 0 or 1, got {first!r} "
                f"({int(np.count_nonzero(bad))} value(s) not 0/1)",
                field=field,
            )
        return array
    return as_category_indices(array, 2, owner=owner, field=field)
