"""Result documents: the one way a released result says itself as JSON.

Every result type a release or an estimator returns (a central query's ``QueryResult`` and
``TableResult``, a frequency oracle's :class:`~dpkit.Estimate`, a local mean's
:class:`~dpkit.MeanEstimate`, a graph's :class:`~dpkit.graph.GraphEstimate`) implements
:class:`Document`: ``to_document(confidence=...)`` returns its fields of the result document
that ``dpkit run`` emits (the estimate, its variance and interval, the noise), as JSON-ready
values. The runner adds what belongs to the query (its id, mechanism and spend).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from dpkit.arrays import plain

__all__ = ["Document", "interval"]


@runtime_checkable
class Document(Protocol):
    """A released result that writes its own result document."""

    def to_document(self, *, confidence: float = 0.95) -> dict[str, Any]:
        """The result's fields as JSON-ready values, the interval at level ``confidence``."""
        ...


def interval(bounds: tuple[Any, Any] | None, level: float, method: str) -> dict[str, Any] | None:
    """An interval's document: its level, bounds and how it was computed (None for none)."""
    if bounds is None:
        return None
    low, high = bounds
    return {"level": level, "lower": plain(low), "upper": plain(high), "method": method}
