"""The per-record steps of a table query that do not depend on its statistic: which rows a
missing key or id drops, which rows the public keys keep, and how an ``object`` column's values
are read.

Everything here is a narwhals expression over a (possibly lazy) frame, or a Python function of
one partition's rows, applied record by record: total once the public checks passed, so nothing
that happens to one row depends on another's value.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import attrs
import numpy as np

from dpkit.plugin import narwhals, object_text, per_partition, positions
from dpkit_central._validation import total_floats
from dpkit_central.keys import matchable

__all__ = [
    "CELL",
    "VALUE",
    "by_text",
    "looked_up",
    "missing",
    "numeric_value",
    "only_keys",
    "only_keys_expr",
    "plain_labels",
    "unsigned_zero",
]

#: The working columns a statistic adds to the frame: a numeric value (float64, NaN where
#: missing; then its fixed point or lattice cell) and a category index.
VALUE = "__dpkit_value"
CELL = "__dpkit_cell"
POSITION = "__dpkit_position"  # + the group column's index: a key's position (only_keys)
_TEXT = "__dpkit_text"  # a 128-bit unsigned column's text, while it is looked up (by_text)


def missing(nw: Any, column: str, dtype: Any) -> Any:
    missing = nw.col(column).is_null()
    if dtype.is_float():
        missing = missing | nw.col(column).is_nan()
    return missing


def only_keys_expr(
    nw: Any, column: str, keys: tuple[tuple[Any, ...], ...], schema: Mapping[str, Any]
) -> Any:
    """True for the rows whose key (one group column) is among the public keys (``keys`` as
    the column holds them: :func:`~dpkit_central.keys.canonical_keys`)."""
    dtype = schema.get(column)
    declared = [k[0] for k in keys if matchable(k[0], dtype)]
    if by_text(dtype):
        return nw.col(column).cast(nw.String).is_in([str(k) for k in declared])
    return nw.col(column).is_in(declared)


def by_text(dtype: Any) -> bool:
    """Whether declared values are compared with a column of ``dtype`` by their text: a
    128-bit unsigned integer column. DuckDB compares a ``UHUGEINT`` column with a list of
    integer literals (``BIGINT[]``) by casting each value to ``BIGINT``, which fails on a value
    beyond 2⁶³ − 1 — after the spend, as one person's value decides. An integer's text is
    exact (one text per integer, and a matchable key is an integer of the column's range)."""
    return dtype is not None and dtype == narwhals().UInt128


def looked_up(
    frame: Any, name: str, column: str, dtype: Any, mapping: Mapping[Any, int], default: int
) -> Any:
    """:func:`~dpkit.plugin.positions` of ``column``'s values among ``mapping``'s keys, by
    their text where :func:`by_text` says so."""
    if not by_text(dtype):
        return positions(frame, name, column, mapping, default)
    nw = narwhals()
    frame = frame.with_columns(nw.col(column).cast(nw.String).alias(_TEXT))
    texts = {str(value): j for value, j in mapping.items()}
    return positions(frame, name, _TEXT, texts, default).drop(_TEXT)


def only_keys(
    nw: Any,
    frame: Any,
    by: tuple[str, ...],
    keys: tuple[tuple[Any, ...], ...],
    schema: Mapping[str, Any],
) -> Any:
    """Rows whose key (several group columns) is among the public keys: a per-record filter.

    Each key column's value is mapped to its position among that column's declared values
    (−1 if none), the positions are combined into one integer, and the row is kept when that
    integer is one of the declared keys' — per-record expressions only (no join), so every
    engine runs it partition by partition and the row order of an eager frame is kept.
    ``keys`` are as the columns hold them (:func:`~dpkit_central.keys.canonical_keys`).
    """
    code = nw.lit(0, dtype=nw.Int64)
    wanted = [0] * len(keys)
    names = [f"{POSITION}{i}" for i in range(len(by))]
    for i, column in enumerate(by):
        declared = [k[i] for k in keys]
        dtype = schema.get(column)
        position = {value: j for j, value in enumerate(dict.fromkeys(declared))}
        width = len(position) + 1
        compared = {value: j for value, j in position.items() if matchable(value, dtype)}
        frame = looked_up(frame, names[i], column, dtype, compared, -1)
        code = code * width + nw.col(names[i]) + 1
        wanted = [w * width + position[declared[k]] + 1 for k, w in enumerate(wanted)]
    return frame.filter(code.is_in(wanted)).drop(*names)


def unsigned_zero(nw: Any, column: str) -> Any:
    """A float column as float64 (exact) with −0.0 read as 0.0, record by record: the two
    compare equal and share a group, which would otherwise be released under the sign of its
    first row. (float64 also groups and compares in every engine; float16 does not.)"""
    value = nw.col(column).cast(nw.Float64)
    return nw.when(value == 0).then(nw.lit(0.0)).otherwise(value).alias(column)


_texts = np.frompyfunc(object_text, 1, 1)


@attrs.frozen
class _ObjectColumn:
    """A per-record conversion of one ``object`` column of an eager frame: ``text`` (keys, ids
    and labels as their text, :func:`~dpkit.plugin.object_text`) or ``numbers`` (float64 into ``VALUE``). A
    picklable value, so that an engine can run it on every partition."""

    column: str
    convert: str

    def __call__(self, eager: Any) -> Any:
        nw = narwhals()
        values = eager.get_column(self.column).to_numpy()
        backend = eager.implementation
        if self.convert == "numbers":
            floats = total_floats(values)
            return eager.with_columns(nw.new_series(VALUE, floats, nw.Float64, backend=backend))
        with np.errstate(all="ignore"):  # per-record conversions: never a warning
            texts = np.asarray(_texts(values), dtype=object) if values.size else values
        # pandas-like frames keep an object column (a Dask partition, its meta's dtype); a
        # Polars Object column cannot be built from text: the texts are a String column.
        kind = nw.Object if backend.is_pandas_like() else nw.String
        return eager.with_columns(nw.new_series(self.column, texts, kind, backend=backend))


def plain_labels(nw: Any, frame: Any, column: str) -> Any:
    """An object column's keys, ids or labels as text (per record: :func:`~dpkit.plugin.object_text`), so that
    the table is the same rows on every engine and no unhashable or uncomparable value can
    make a group-by, a shuffle or a hash raise."""
    return per_partition(frame, _ObjectColumn(column, "text"), {})


def numeric_value(nw: Any, frame: Any, column: str | None, kind: str) -> Any:
    """``VALUE``: the value column as float64, NaN where missing (total per record)."""
    assert column is not None
    if kind == "object":  # e.g. a pandas object column: converted element by element
        return per_partition(frame, _ObjectColumn(column, "numbers"), {VALUE: "float64"})
    dtype = frame.collect_schema()[column]
    if dtype in (nw.Int64, nw.UInt64):
        # 2³² as a column of the value's type (an engine may read a literal as int64 first).
        frame = frame.with_columns(nw.lit(_HALF, dtype=dtype).alias(VALUE))
        value = _rounded(nw.col(column), nw.col(VALUE))
    else:
        value = nw.col(column).cast(nw.Float64)
    return frame.with_columns(value.fill_null(math.nan).alias(VALUE))


#: 2³²: a 64-bit integer's high and low halves are each exact in a double.
_HALF = 1 << 32


def _rounded(value: Any, base: Any) -> Any:
    """A 64-bit integer column ``value`` as float64, each value rounded to the nearest double
    (ties to even) — what a C cast does, on every engine and for every value: split as
    x = h·2³² + l (``base`` = 2³²; floor division: |h| ≤ 2³¹ or h < 2³², 0 ≤ l < 2³²), each half
    is exact in a double, h·2³² too, and their sum is rounded once. Arrow's cast refuses an
    integer beyond 2⁵³ instead, which would make a release fail after the spend as one
    person's value decides."""
    nw = narwhals()
    high = value // base
    low = value - high * base
    return high.cast(nw.Float64) * float(_HALF) + low.cast(nw.Float64)
