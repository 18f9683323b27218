"""The Dask engine: the bounding after a shuffle by id, and per-record steps as one task per
pandas partition (:mod:`dpkit.tables.engines`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from dpkit.tables._eager import Eager
from dpkit.tables._quiet import quiet
from dpkit.tables.bounding import FIRST, Bounding
from dpkit.tables.frame import narwhals

__all__ = ["Dask"]


@attrs.frozen
class Dask(Eager):
    """The :class:`~dpkit.tables.engines.Engine` of a Dask DataFrame (a narwhals LazyFrame)."""

    def by_id(self, frame: Any, bounding: Bounding) -> Any:
        """Each id's rows brought into one partition (``shuffle(on=id)``), then
        :meth:`~dpkit.tables.bounding.Bounding.apply` on every partition."""
        bounded = _by_id(frame.to_native(), bounding)
        with quiet():
            return narwhals().from_native(bounded)

    def per_record(self, frame: Any, function: Callable[[Any], Any]) -> Any:
        """``function`` on each pandas partition as one task, its result's columns and dtypes
        from ``function`` on the frame's empty ``_meta`` (no value is read to plan it)."""
        native = frame.to_native()
        on_pandas = _OnPandas(function)
        planned = native.map_partitions(on_pandas, meta=on_pandas(native._meta))
        with quiet():
            return narwhals().from_native(planned)

    def per_partition(
        self, frame: Any, function: Callable[[Any], Any], added: dict[str, str]
    ) -> Any:
        """``function`` on each pandas partition; the result has the input's columns plus
        ``added`` (name → pandas dtype)."""
        native = frame.to_native()
        meta = {**dict(native.dtypes), **added}
        planned = native.map_partitions(_OnPandas(function), meta=meta)
        with quiet():
            return narwhals().from_native(planned)


def _by_id(native: Any, bounding: Bounding) -> Any:
    meta = {**dict(native.dtypes), FIRST: "int64"}
    # Dask's default shuffle on a cluster (P2P) moves partitions as Arrow tables, which cannot
    # hold every Python object a pandas ``object`` column may; the task-based shuffle pickles
    # them, and hashes such a column by each value's text (the ids' canonical form makes equal
    # ids one text, dpkit_central.aggregates).
    method = "tasks" if any(str(t) == "object" for t in native.dtypes) else None
    shuffled = native.shuffle(on=bounding.id_column, shuffle_method=method)
    return shuffled.map_partitions(bounding.apply, meta=meta)


@attrs.frozen
class _OnPandas:
    """A function of an eager narwhals frame, called on a pandas partition (picklable, so
    that Dask can name its tasks deterministically and ship them to its workers)."""

    function: Callable[[Any], Any]

    def __call__(self, part: Any) -> Any:
        nw = narwhals()
        return self.function(nw.from_native(part, eager_only=True)).to_native()
