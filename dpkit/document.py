"""Result documents: the one way a released result says itself as JSON.

Every result type a release or an estimator returns (a central query's ``QueryResult`` and
``TableResult``, a frequency oracle's :class:`~dpkit.Estimate`, a local mean's
:class:`~dpkit.MeanEstimate`, a local distribution's :class:`~dpkit.plugin.DistributionEstimate`,
a graph's :class:`~dpkit.graph.GraphEstimate`) implements
:class:`Document`: ``to_document(confidence=...)`` returns its fields of the result document
that ``dpkit run`` emits (the estimate, its variance and interval, the noise), as JSON-ready
values. The runner adds what belongs to the query (its id, mechanism and spend).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

__all__ = ["Document", "interval", "json_value"]


@runtime_checkable
class Document(Protocol):
    """A released result that writes its own result document."""

    def to_document(self, *, confidence: float = 0.95) -> dict[str, Any]:
        """The result's fields as JSON-ready values, the interval at level ``confidence``."""
        ...


def json_value(value: Any) -> Any:
    """A numpy array as a (nested) list and a numpy scalar as a Python number, whole; anything
    else as is. (Unlike :func:`dpkit.arrays.plain`, which abridges long arrays for messages.)"""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


def interval(bounds: tuple[Any, Any] | None, level: float, method: str) -> dict[str, Any] | None:
    """An interval's document: its level, bounds and how it was computed (None for none)."""
    if bounds is None:
        return None
    low, high = bounds
    return {"level": level, "lower": json_value(low), "upper": json_value(high), "method": method}
