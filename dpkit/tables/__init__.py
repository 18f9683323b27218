"""Tables: dataframe inputs and contribution bounding, written once against narwhals.

Needs the optional extra ``dpkit[tables]`` (narwhals, pyarrow); imported only when a table is
given. :mod:`dpkit.tables.frame` holds the public-phase view of a table (its columns and their
kinds), :mod:`dpkit.tables.bounding` the per-id contribution bounding that user-level privacy
(:class:`dpkit.units.IdUnit`) relies on, with priorities from :mod:`dpkit.tables.encoding`,
and :mod:`dpkit.tables.engines` the :class:`~dpkit.tables.engines.Engine` that runs a query's
engine-dependent steps (eager, Dask, Spark; one private module each).
"""

from __future__ import annotations

from dpkit.tables.bounding import FIRST, Bounding, BoundingKey
from dpkit.tables.engines import bound_contributions, per_partition, per_record, positions
from dpkit.tables.frame import (
    ColumnKind,
    as_frame,
    column_kinds,
    implementation,
    is_table,
    narwhals,
    require_columns,
)

__all__ = [
    "FIRST",
    "Bounding",
    "BoundingKey",
    "ColumnKind",
    "as_frame",
    "bound_contributions",
    "column_kinds",
    "implementation",
    "is_table",
    "narwhals",
    "per_partition",
    "per_record",
    "positions",
    "require_columns",
]
