"""Turning a caller's input into an array, with a typed error for a structure that cannot be one.

A ragged nesting (rows of different lengths) is a property of the container, not of any value,
so refusing it is public: the message never quotes a value.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpkit.errors import InvalidData

__all__ = ["as_array", "readable"]


def as_array(values: Any, *, owner: str, field: str = "values") -> NDArray[Any]:
    """``np.asarray(values)``, or :class:`~dpkit.errors.InvalidData` naming ``field`` if the
    nested sequences have different lengths or cannot be combined into one array."""
    try:
        return np.asarray(values)
    except (ValueError, TypeError):
        raise InvalidData(
            f"{owner}: {field} must be a rectangular array; the nested sequences have "
            "different lengths or cannot be combined",
            field=field,
        ) from None


def readable(values: Any) -> NDArray[Any]:
    """``np.asarray(values)`` that never raises (for the private phase, which must be total):
    a ragged nesting becomes a 1-D object array of its items."""
    try:
        return np.asarray(values)
    except (ValueError, TypeError):
        items = list(values) if isinstance(values, (list, tuple)) else [values]
        out = np.empty(len(items), dtype=object)
        for i, item in enumerate(items):
            out[i] = item
        return out
