"""The eager engine: a table in this process's memory (pandas, Polars, PyArrow, ...), and the
lazy frames of one-machine engines (Polars LazyFrame, DuckDB, Ibis), collected first.

Every step is narwhals' own: a per-record step runs as the frame's expressions, the bounding
on the whole (collected) table as one part. The distributed engines (:mod:`dpkit.tables._dask`,
:mod:`dpkit.tables._spark`) replace the steps narwhals cannot express lazily there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from dpkit.tables.bounding import Bounding, bound_eager
from dpkit.tables.frame import narwhals

__all__ = ["Eager"]


@attrs.frozen
class Eager:
    """The :class:`~dpkit.tables.engines.Engine` of a table on one machine."""

    def collect(self, frame: Any) -> Any:
        """``frame`` as an eager narwhals frame (a lazy one is collected)."""
        nw = narwhals()
        return frame.collect() if isinstance(frame, nw.LazyFrame) else frame

    def by_id(self, frame: Any, bounding: Bounding) -> Any:
        """The rows ``bounding`` keeps, the whole table being one part."""
        return bound_eager(self.collect(frame), bounding)

    def per_record(self, frame: Any, function: Callable[[Any], Any]) -> Any:
        """``function`` as the frame's own expressions."""
        return function(frame)

    def per_partition(
        self, frame: Any, function: Callable[[Any], Any], added: dict[str, str]
    ) -> Any:
        """``function`` on the (collected) frame; ``added`` is for engines that plan it."""
        return function(self.collect(frame))

    def positions(
        self, frame: Any, name: str, column: str, mapping: Mapping[Any, int], default: int
    ) -> Any:
        """The position lookup as narwhals' ``replace_strict``."""
        nw = narwhals()
        if not mapping:
            return frame.with_columns(nw.lit(default, dtype=nw.Int64).alias(name))
        looked_up = nw.col(column).replace_strict(mapping, default=default, return_dtype=nw.Int64)
        return frame.with_columns(looked_up.cast(nw.Int64).alias(name))
