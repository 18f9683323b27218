"""The Spark engine, classic and Spark Connect: the bounding after a repartition by id, and
the position lookup that narwhals lacks on Spark Connect (:mod:`dpkit.tables.engines`)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import attrs

from dpkit.tables._eager import Eager
from dpkit.tables._quiet import quiet
from dpkit.tables.bounding import FIRST, Bounding
from dpkit.tables.frame import narwhals

__all__ = ["Spark"]


@attrs.frozen
class Spark(Eager):
    """The :class:`~dpkit.tables.engines.Engine` of a Spark DataFrame; ``connect`` for one of
    Spark Connect. Per-record steps are Spark's own expressions (narwhals'); a per-partition
    conversion runs on the collected frame."""

    connect: bool = False

    def by_id(self, frame: Any, bounding: Bounding) -> Any:
        """Each id's rows brought into one partition (``repartition(id)``), then
        :meth:`~dpkit.tables.bounding.Bounding.apply_arrow` on every partition
        (``mapInArrow``)."""
        with quiet():
            return narwhals().from_native(_by_id(frame.to_native(), bounding))

    def positions(
        self, frame: Any, name: str, column: str, mapping: Mapping[Any, int], default: int
    ) -> Any:
        """On Spark Connect, where narwhals 2.29's ``replace_strict`` raises
        ``NotImplementedError``, the very lookup narwhals builds on classic Spark (a literal
        ``create_map`` read where ``array_contains(map_keys(...))``) in Connect's own
        functions, so a value finds the same position on both Spark APIs."""
        if not (self.connect and mapping):
            return super().positions(frame, name, column, mapping, default)
        from pyspark.sql.connect import functions as spark

        lookup = spark.create_map(*(spark.lit(part) for pair in mapping.items() for part in pair))
        value = spark.col(column)
        found = spark.array_contains(spark.map_keys(lookup), value)
        looked_up = spark.when(found, lookup[value]).otherwise(spark.lit(default))
        return narwhals().from_native(frame.to_native().withColumn(name, looked_up.cast("bigint")))


def _by_id(native: Any, bounding: Bounding) -> Any:
    from pyspark.sql import types

    # Every column may hold nulls (as the rows bounded); FIRST never does.
    fields = [types.StructField(f.name, f.dataType, True) for f in native.schema.fields]
    schema = types.StructType([*fields, types.StructField(FIRST, types.LongType(), False)])
    apply = bounding.apply_arrow

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        parts = list(batches)  # every Arrow batch of the partition: all rows of its ids
        if parts:
            yield from apply(pa.Table.from_batches(parts)).to_batches()

    # Arrow batches, not pandas frames: a 64-bit integer column with nulls would become
    # float64 in pandas (large values rounded, refused on the way back), a NaN a null.
    return native.repartition(bounding.id_column).mapInArrow(run, schema)
