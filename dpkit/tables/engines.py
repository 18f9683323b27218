"""Engines: the steps of a table query that depend on where its rows are.

A table query runs as narwhals expressions on every backend (:mod:`dpkit_central.tables`):
its per-record transformations and its per-group aggregations are the engine's own, partition
by partition, and only the small aggregates are collected. A few steps need more than narwhals'
lazy API offers on Dask and Spark; an :class:`Engine` does them with the engine's own
partition-wise primitive, calling the *same* function that bounds an eager table:

* **contribution bounding** (:meth:`Engine.by_id`, :func:`bound_contributions`): each id's rows
  are brought together by the engine's shuffle on the id column — Dask
  ``DataFrame.shuffle(on=id)``, Spark ``repartition(id)`` — and
  :meth:`~dpkit.tables.bounding.Bounding.apply` runs on every resulting pandas partition
  (``map_partitions``), :meth:`~dpkit.tables.bounding.Bounding.apply_arrow` on Spark's
  Arrow batches (``mapInArrow``). A shuffle puts all the rows of one id in one partition
  however many partitions they started in, and the priorities are keyed hashes of each row's
  content, so each partition keeps exactly the rows the whole table would keep (narwhals on
  Dask has no ranking window, and no engine can draw a per-row random number that a retried
  task would draw again);
* **per-record steps on Dask** (:func:`per_record`): a query's per-record transformations
  run on each pandas partition as one task (``map_partitions``), the same narwhals code as
  on an eager table, rather than through narwhals' expression-by-expression translation;
  and per-record conversions of pandas ``object`` columns (:func:`per_partition`), which are
  Python functions of one value.

And one expression narwhals lacks on one engine: a value's position among declared values
(:func:`positions`; narwhals' ``replace_strict``, which it does not implement on Spark
Connect).

Each engine is a private module (:mod:`~dpkit.tables._eager`, :mod:`~dpkit.tables._dask`,
:mod:`~dpkit.tables._spark`, :mod:`~dpkit.tables._duckdb`), chosen by the frame's
implementation in one place (:func:`engine_of`). A DuckDB relation is bounded in DuckDB when
its connection is given (:func:`dpkit.tables._duckdb.connection`: the SQL front end's), and
otherwise collected first, like the other one-machine lazy frames (Polars LazyFrame, Ibis),
which are handled as an eager table. Nothing here reads a value before the
caller's spend: these build the engine's plan, which runs when the aggregates are collected.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from dpkit.tables._dask import Dask
from dpkit.tables._duckdb import DuckDB
from dpkit.tables._eager import Eager
from dpkit.tables._spark import Spark
from dpkit.tables.bounding import Bounding
from dpkit.tables.frame import implementation

__all__ = [
    "DISTRIBUTED",
    "Engine",
    "bound_contributions",
    "engine_of",
    "per_partition",
    "per_record",
    "positions",
]


class Engine(Protocol):
    """What a table query needs from the engine that holds its rows."""

    def collect(self, frame: Any) -> Any:
        """``frame`` as an eager narwhals frame, in this process."""
        ...

    def by_id(self, frame: Any, bounding: Bounding) -> Any:
        """The rows ``bounding`` keeps of ``frame``, with the bounding's ``FIRST`` column."""
        ...

    def per_record(self, frame: Any, function: Callable[[Any], Any]) -> Any:
        """``function`` (frame → frame, each record on its own) applied where the rows are."""
        ...

    def per_partition(
        self, frame: Any, function: Callable[[Any], Any], added: dict[str, str]
    ) -> Any:
        """``function`` (an eager frame → frame, a per-record Python conversion) applied to
        each part of ``frame``; ``added`` names the pandas dtypes of the columns it adds."""
        ...

    def positions(
        self, frame: Any, name: str, column: str, mapping: Mapping[Any, int], default: int
    ) -> Any:
        """``frame`` with the Int64 column ``name``: ``mapping[value]`` for ``column``'s
        value, ``default`` for any other (a missing one included)."""
        ...


#: The engines whose frames are bounded where their data are (the others are collected).
DISTRIBUTED = ("dask", "pyspark", "pyspark_connect")

_EAGER = Eager()
_ENGINES: dict[str, Engine] = {
    "duckdb": DuckDB(),
    "dask": Dask(),
    "pyspark": Spark(),
    "pyspark_connect": Spark(connect=True),
}


def engine_of(frame: Any) -> Engine:
    """The engine of a narwhals frame, by its implementation: Dask, Spark, Spark Connect, or
    the eager engine for every other (a one-machine lazy frame is collected)."""
    return _ENGINES.get(implementation(frame), _EAGER)


def bound_contributions(frame: Any, bounding: Bounding) -> Any:
    """The rows ``bounding`` keeps of a narwhals frame (:mod:`dpkit.tables.bounding`), with
    the :data:`~dpkit.tables.bounding.FIRST` column. An eager frame is bounded in one part; a
    lazy one by its engine, which brings each id's rows together first."""
    return engine_of(frame).by_id(frame, bounding)


def per_record(frame: Any, function: Callable[[Any], Any]) -> Any:
    """``function`` (a narwhals frame → frame that treats each record on its own, picklable)
    applied where the rows are: on a Dask frame, to each pandas partition as one task (its
    result's columns and dtypes from ``function`` on the frame's empty ``_meta``, so no value
    is read to plan it); on any other frame, lazy or eager, as the engine's own expressions.

    On Dask this replaces narwhals' translation of each expression into Dask's, which turns
    every literal (a clamp's bounds, a key list) into a collection of its own: the resulting
    graph is not fused into one task per partition, and its intermediate columns travel
    between the workers (for 3·10⁷ rows, a third of a grouped id-level sum's wall time)."""
    return engine_of(frame).per_record(frame, function)


def per_partition(frame: Any, function: Callable[[Any], Any], added: dict[str, str]) -> Any:
    """``function`` (a narwhals eager frame → frame, a per-record transformation, picklable)
    applied to every partition of a Dask frame, or to the collected frame of another lazy
    engine; the result has the input's columns plus ``added`` (name → pandas dtype) where it
    replaces none. An eager frame is passed through ``function`` as it is."""
    return engine_of(frame).per_partition(frame, function, added)


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
    return engine_of(frame).positions(frame, name, column, mapping, default)
