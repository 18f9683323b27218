"""Thin engine adapters: the two steps of a table query that narwhals cannot express lazily.

A table query runs as narwhals expressions on every backend (:mod:`dpkit_central.tables`):
its per-record transformations and its per-group aggregations are the engine's own, partition
by partition, and only the small aggregates are collected. Some steps need more than narwhals'
lazy API offers on Dask and Spark, and this module does them with each engine's own
partition-wise primitive, calling the *same* pandas function that bounds an eager table:

* **contribution bounding** (:func:`by_id`): each id's rows are brought together by the
  engine's shuffle on the id column — Dask ``DataFrame.shuffle(on=id)``, Spark
  ``repartition(id)`` — and :meth:`~dpkit.tables.bounding.Bounding.apply` runs on every
  resulting partition (``map_partitions``; ``mapInPandas``). A shuffle puts all the rows of one
  id in one partition however many partitions they started in, and the priorities are keyed
  hashes of each row's content, so each partition keeps exactly the rows the whole table
  would keep (narwhals on Dask has no ranking window, and no engine can draw a per-row random
  number that a retried task would draw again);
* **per-record steps on Dask** (:func:`per_record`): a query's per-record transformations
  run on each pandas partition as one task (``map_partitions``), the same narwhals code as
  on an eager table, rather than through narwhals' expression-by-expression translation;
  and per-record conversions of pandas ``object`` columns (:func:`per_partition`), which are
  Python functions of one value.

And one expression narwhals lacks on one engine: a value's position among declared values
(:func:`positions`; narwhals' ``replace_strict``, which it does not implement on Spark
Connect).

Other lazy frames (Polars LazyFrame, DuckDB, Ibis: one-machine engines) are collected first
and handled as an eager table. Nothing here reads a value before the caller's spend: these
build the engine's plan, which runs when the aggregates are collected.

narwhals 2.29 warns (``FutureWarning``) that its Dask support is moving into a separate
``narwhals-dask`` package, and PySpark 4 warns that it does not fully support pandas 3; both
warnings are about library versions, not about the data, and :func:`quiet` silences exactly
those two messages.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import attrs

from dpkit.tables.bounding import FIRST, Bounding
from dpkit.tables.frame import implementation, narwhals

__all__ = ["DISTRIBUTED", "by_id", "per_partition", "per_record", "positions", "quiet"]

#: The engines whose frames are bounded where their data are (the others are collected).
DISTRIBUTED = ("dask", "pyspark", "pyspark_connect")

_VERSION_WARNINGS = (
    "Dask support is moving out of Narwhals",
    "PySpark does not yet fully support pandas",
)


def quiet() -> None:
    """Ignore the two version warnings named in the module docstring (and nothing else)."""
    for message in _VERSION_WARNINGS:
        warnings.filterwarnings("ignore", message=message, category=FutureWarning)


def by_id(frame: Any, bounding: Bounding) -> Any:
    """``frame`` (a narwhals LazyFrame) bounded by ``bounding``, each id's rows together."""
    nw = narwhals()
    engine = implementation(frame)
    quiet()
    if engine == "dask":
        return nw.from_native(_dask_by_id(frame.to_native(), bounding))
    if engine.startswith("pyspark"):
        return nw.from_native(_spark_by_id(frame.to_native(), bounding))
    from dpkit.tables.bounding import bound_contributions

    return bound_contributions(frame.collect(), bounding)


def _dask_by_id(native: Any, bounding: Bounding) -> Any:
    meta = {**dict(native.dtypes), FIRST: "int64"}
    # Dask's default shuffle on a cluster (P2P) moves partitions as Arrow tables, which cannot
    # hold every Python object a pandas ``object`` column may; the task-based shuffle pickles
    # them, and hashes such a column by each value's text (the ids' canonical form makes equal
    # ids one text, dpkit_central.aggregates).
    method = "tasks" if any(str(t) == "object" for t in native.dtypes) else None
    shuffled = native.shuffle(on=bounding.id_column, shuffle_method=method)
    return shuffled.map_partitions(bounding.apply, meta=meta)


def _spark_by_id(native: Any, bounding: Bounding) -> Any:
    from pyspark.sql import types

    schema = types.StructType(
        [*native.schema.fields, types.StructField(FIRST, types.LongType(), False)]
    )
    apply = bounding.apply

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import pandas as pd

        parts = list(batches)  # every Arrow batch of the partition: all rows of its ids
        if parts:
            yield apply(pd.concat(parts, ignore_index=True))

    return native.repartition(bounding.id_column).mapInPandas(run, schema)


def per_record(frame: Any, function: Callable[[Any], Any]) -> Any:
    """``function`` (a narwhals frame → frame that treats each record on its own, picklable)
    applied where the rows are: on a Dask frame, to each pandas partition as one task (its
    result's columns and dtypes from ``function`` on the frame's empty ``_meta``, so no value
    is read to plan it); on any other frame, lazy or eager, as the engine's own expressions.

    On Dask this replaces narwhals' translation of each expression into Dask's, which turns
    every literal (a clamp's bounds, a key list) into a collection of its own: the resulting
    graph is not fused into one task per partition, and its intermediate columns travel
    between the workers (for 3·10⁷ rows, a third of a grouped id-level sum's wall time)."""
    nw = narwhals()
    if not (isinstance(frame, nw.LazyFrame) and implementation(frame) == "dask"):
        return function(frame)
    quiet()
    native = frame.to_native()
    on_pandas = _OnPandas(function)
    return nw.from_native(native.map_partitions(on_pandas, meta=on_pandas(native._meta)))


def per_partition(frame: Any, function: Callable[[Any], Any], added: dict[str, str]) -> Any:
    """``function`` (a narwhals eager frame → frame, a per-record transformation, picklable)
    applied to
    every partition of a Dask frame, or to the collected frame of another lazy engine; the
    result has the input's columns plus ``added`` (name → pandas dtype) where it replaces
    none. An eager frame is passed through ``function`` as it is."""
    nw = narwhals()
    if not isinstance(frame, nw.LazyFrame):
        return function(frame)
    quiet()
    if implementation(frame) == "dask":
        native = frame.to_native()
        meta = {**dict(native.dtypes), **added}
        return nw.from_native(native.map_partitions(_OnPandas(function), meta=meta))
    return function(frame.collect())


def positions(frame: Any, name: str, column: str, mapping: Mapping[Any, int], default: int) -> Any:
    """``frame`` (narwhals) with the Int64 column ``name``: ``mapping[value]`` where
    ``column``'s value is one of ``mapping``'s keys, ``default`` elsewhere (a missing value
    included) — a per-record lookup.

    narwhals' ``replace_strict`` on every engine but Spark Connect, where narwhals 2.29 raises
    ``NotImplementedError``; there, the very lookup narwhals builds on classic Spark (a literal
    ``create_map`` read where ``array_contains(map_keys(...))``), in Connect's own functions,
    so a value finds the same position on both Spark APIs. A chain of ``when`` expressions,
    narwhals' alternative, nests one level per value and fails (``RecursionError``) for a few
    hundred categories."""
    nw = narwhals()
    if not mapping:
        return frame.with_columns(nw.lit(default, dtype=nw.Int64).alias(name))
    if implementation(frame) != "pyspark_connect":
        looked_up = nw.col(column).replace_strict(mapping, default=default, return_dtype=nw.Int64)
        return frame.with_columns(looked_up.cast(nw.Int64).alias(name))
    from pyspark.sql.connect import functions as spark

    lookup = spark.create_map(*(spark.lit(part) for pair in mapping.items() for part in pair))
    value = spark.col(column)
    found = spark.array_contains(spark.map_keys(lookup), value)
    looked_up = spark.when(found, lookup[value]).otherwise(spark.lit(default))
    return nw.from_native(frame.to_native().withColumn(name, looked_up.cast("bigint")))


@attrs.frozen
class _OnPandas:
    """A function of an eager narwhals frame, called on a pandas partition (picklable, so
    that Dask can name its tasks deterministically and ship them to its workers)."""

    function: Callable[[Any], Any]

    def __call__(self, part: Any) -> Any:
        nw = narwhals()
        return self.function(nw.from_native(part, eager_only=True)).to_native()
