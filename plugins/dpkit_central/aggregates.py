"""The aggregation step of a table query: per-record transformations, then per-group
elementary aggregations collected as small arrays (:class:`Aggregates`).

Everything here is a narwhals expression over a (possibly lazy) frame, total once the public
checks passed: missing values, keys outside the public list and values outside a histogram's
categories are dropped record by record, values are converted record by record, and only
elementary aggregations (count, sum, distinct ids) reach the engine's group-by, so that every
narwhals backend computes them and a distributed engine returns only the small result.
"""

from __future__ import annotations

import decimal
import math
import numbers
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from dpkit import InvalidParameter
from dpkit.tables import narwhals, per_partition, positions
from dpkit_central._validation import total_floats
from dpkit_central.keys import as_text, coerce, matchable
from dpkit_central.queries import Histogram

__all__ = [
    "CELL",
    "VALUE",
    "Aggregates",
    "aligned",
    "cells",
    "collect",
    "key_tuples",
    "missing",
    "numeric_value",
    "only_keys",
    "only_keys_expr",
    "plain_labels",
    "sorted_keys",
    "unsigned_zero",
]

#: The working columns a query adds to the frame.
VALUE = "__dpkit_value"
CELL = "__dpkit_cell"
POSITION = "__dpkit_position"  # + the group column's index: a key's position (only_keys)


@attrs.frozen
class Aggregates:
    """The pre-noise aggregates of a table query: small arrays, one entry per group.

    ``keys`` are the groups (tuples, one value per group column): the declared keys in order
    for public keys, the groups present in the data (sorted) for private keys. ``values``
    holds per-group arrays by name (``count``, ``sum``, ``centred_sum``, ``cells`` of shape
    (groups, cells), ``units`` — distinct ids per group, for partition selection);
    ``lattice`` a quantile's per-group (lattice cells ⌊z/h⌋ in increasing order, records in
    each), what its mechanism reads (:meth:`~dpkit_central.Quantile.cell_log_weights`). Not
    private: for tests and for building on; only :meth:`TableQuery.release` makes them DP.
    """

    keys: tuple[tuple[Any, ...], ...]
    values: dict[str, NDArray[Any]] = attrs.field(eq=False)
    lattice: tuple[tuple[NDArray[np.float64], NDArray[np.int64]], ...] | None = attrs.field(
        default=None, eq=False
    )

    def identical(self, other: Aggregates) -> bool:
        """Whether ``other`` holds exactly the same keys and values (array by array, bit for
        bit): what two engines computing one query on one table must give."""
        if other.keys != self.keys or sorted(other.values) != sorted(self.values):
            return False
        if any(not np.array_equal(other.values[n], a) for n, a in self.values.items()):
            return False
        if (self.lattice is None) != (other.lattice is None):
            return False
        return all(
            np.array_equal(c, d) and np.array_equal(m, k)
            for (c, m), (d, k) in zip(self.lattice or (), other.lattice or (), strict=True)
        )

    def subset(self, keep: NDArray[np.bool_]) -> Aggregates:
        index = np.flatnonzero(keep)
        return Aggregates(
            tuple(self.keys[i] for i in index),
            {name: array[index] for name, array in self.values.items()},
            None if self.lattice is None else tuple(self.lattice[i] for i in index),
        )


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
    return nw.col(column).is_in([k[0] for k in keys if matchable(k[0], dtype)])


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
        frame = positions(frame, names[i], column, compared, -1)
        code = code * width + nw.col(names[i]) + 1
        wanted = [w * width + position[declared[k]] + 1 for k, w in enumerate(wanted)]
    return frame.filter(code.is_in(wanted)).drop(*names)


def _exact(value: Any) -> Fraction:
    """A finite real number as an exact fraction (numpy floats included)."""
    if isinstance(value, (numbers.Rational, float, decimal.Decimal)):
        return Fraction(value)
    return Fraction(*value.as_integer_ratio())


def unsigned_zero(nw: Any, column: str) -> Any:
    """A float column as float64 (exact) with −0.0 read as 0.0, record by record: the two
    compare equal and share a group, which would otherwise be released under the sign of its
    first row. (float64 also groups and compares in every engine; float16 does not.)"""
    value = nw.col(column).cast(nw.Float64)
    return nw.when(value == 0).then(nw.lit(0.0)).otherwise(value).alias(column)


_texts = np.frompyfunc(as_text, 1, 1)


@attrs.frozen
class _ObjectColumn:
    """A per-record conversion of one ``object`` column of an eager frame: ``text`` (keys, ids
    and labels as their text, :func:`as_text`) or ``numbers`` (float64 into ``VALUE``). A
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
        return eager.with_columns(nw.new_series(self.column, texts, nw.Object, backend=backend))


def plain_labels(nw: Any, frame: Any, column: str) -> Any:
    """An object column's keys, ids or labels as text (per record: :func:`as_text`), so that
    the table is the same rows on every engine and no unhashable or uncomparable value can
    make a group-by, a shuffle or a hash raise."""
    return per_partition(frame, _ObjectColumn(column, "text"), {})


def numeric_value(nw: Any, frame: Any, column: str | None, kind: str) -> Any:
    """``VALUE``: the value column as float64, NaN where missing (total per record)."""
    assert column is not None
    if kind == "object":  # e.g. a pandas object column: converted element by element
        return per_partition(frame, _ObjectColumn(column, "numbers"), {VALUE: "float64"})
    return frame.with_columns(nw.col(column).cast(nw.Float64).fill_null(math.nan).alias(VALUE))


def cells(
    nw: Any, frame: Any, column: str | None, stat: Histogram, kind: str, dtype: Any = None
) -> Any:
    """``CELL``: each record's category index (k for "other"; outside the categories dropped
    unless ``other``); missing values dropped (a histogram's ``nan="drop"``)."""
    assert column is not None
    k = len(stat.categories)
    mapping: dict[Any, int] = {}
    for i, category in enumerate(stat.categories):
        try:
            cell = coerce(category, kind, column, dtype)
        except InvalidParameter:
            continue  # a category of another type can never match: its count is 0
        if matchable(cell, dtype):
            mapping.setdefault(cell, i)
    frame = positions(frame, CELL, column, mapping, k if stat.other else -1).drop(column)
    return frame.filter(nw.col(CELL) >= 0)


def collect(frame: Any) -> Any:
    nw = narwhals()
    return frame.collect() if isinstance(frame, nw.LazyFrame) else frame


def key_tuples(frame: Any, by: tuple[str, ...]) -> list[tuple[Any, ...]]:
    if not by:
        return [()] * frame.shape[0]
    return list(zip(*(frame.get_column(c).to_list() for c in by), strict=True))


def sorted_keys(keys: Any) -> list[tuple[Any, ...]]:
    """Group keys in one fixed total order (:func:`_rank`): numbers (and booleans) by value,
    then text, then anything else by type and ``repr``. The order of two keys never depends on
    which other keys were found — with private keys, on keys the selection then drops."""
    distinct = list(dict.fromkeys(keys))
    return sorted(distinct, key=lambda key: tuple(_rank(v) for v in key))


def _rank(value: Any) -> tuple[int, int, Any]:
    """The position of one key value in the fixed order: (kind, sign of an infinity, exact
    value or text); comparisons never mix kinds, so this never raises."""
    number: Any = value
    try:
        if isinstance(value, (bool, np.bool_, numbers.Real, decimal.Decimal)):
            if math.isinf(number):
                return 0, 1 if number > 0 else -1, Fraction(0)
            return 0, 0, _exact(int(number) if isinstance(number, (bool, np.bool_)) else number)
        if isinstance(value, str):
            return 1, 0, value
    except Exception:  # a number-like that cannot be converted: ordered as an object
        pass
    return 2, 0, f"{type(value).__name__}:{value!r}"


def aligned(
    found: Aggregates, declared: tuple[tuple[Any, ...], ...], keys: tuple[tuple[Any, ...], ...]
) -> Aggregates:
    """The aggregates of the declared keys, in their order (released under their declared
    spelling); ``keys`` are the same keys as the columns hold them
    (:func:`~dpkit_central.keys.canonical_keys`: distinct), which the found groups are looked
    up by; an absent key gets zeros."""
    position = {k: i for i, k in enumerate(found.keys)}
    at = [position.get(key) for key in keys]
    values: dict[str, NDArray[Any]] = {}
    for name, array in found.values.items():
        out = np.zeros((len(keys), *array.shape[1:]), dtype=array.dtype)
        for i, j in enumerate(at):
            if j is not None:
                out[i] = array[j]
        values[name] = out
    lattice = None
    if found.lattice is not None:
        empty = (np.zeros(0, dtype=np.float64), np.zeros(0, dtype=np.int64))
        lattice = tuple(found.lattice[j] if j is not None else empty for j in at)
    return Aggregates(declared, values, lattice)
