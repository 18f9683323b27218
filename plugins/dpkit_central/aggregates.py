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
from dpkit_central.keys import PublicKeys, coerce, coerce_all
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


def only_keys_expr(nw: Any, column: str, keys: PublicKeys, kinds: Mapping[str, str]) -> Any:
    """True for the rows whose key (one group column) is among the public keys."""
    return nw.col(column).is_in(coerce_all([k[0] for k in keys.values], kinds[column], column))


def only_keys(
    nw: Any, frame: Any, by: tuple[str, ...], keys: PublicKeys, kinds: Mapping[str, str]
) -> Any:
    """Rows whose key (several group columns) is among the public keys: a per-record filter.

    Each key column's value is mapped to its position among that column's declared values
    (−1 if none), the positions are combined into one integer, and the row is kept when that
    integer is one of the declared keys' — per-record expressions only (no join), so every
    engine runs it partition by partition and the row order of an eager frame is kept.
    """
    code = nw.lit(0, dtype=nw.Int64)
    wanted = [0] * len(keys.values)
    names = [f"{POSITION}{i}" for i in range(len(by))]
    for i, column in enumerate(by):
        declared = coerce_all([k[i] for k in keys.values], kinds[column], column)
        position = {value: j for j, value in enumerate(dict.fromkeys(declared))}
        width = len(position) + 1
        frame = positions(frame, names[i], column, position, -1)
        code = code * width + nw.col(names[i]) + 1
        wanted = [w * width + position[declared[k]] + 1 for k, w in enumerate(wanted)]
    return frame.filter(code.is_in(wanted)).drop(*names)


def _plain_label(value: Any) -> Any:
    """A key, id or label of an object column as text or a canonical number (NaN and anything
    else — a list, a dict, an object whose comparison raises — is missing).

    Values that compare equal fall into one group (``True``, ``1``, ``1.0``, ``np.int64(1)``;
    ``-0.0`` and ``0.0``), which an engine then names after whichever of its rows comes first;
    a released private key would name one record's type. So each number becomes one canonical
    value of its equality class, record by record: an integer value up to 2⁵³ as ``int``
    (booleans too), any other as ``float`` if a float holds it exactly, else as an ``int`` or
    an exact :class:`Fraction`.
    """
    if isinstance(value, str):
        return str(value)
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, numbers.Real):
        number: Any = value  # numbers.Real declares no int() or comparisons
        try:
            if number != number:
                return None
            if math.isinf(number):
                return float(number)
            integral = number == int(number)
            if integral and abs(number) <= 2**53:
                return int(number)
            as_float = float(number)
            if as_float == number:
                return as_float
            return int(number) if integral else _exact(number)
        except Exception:  # a number-like whose comparison or conversion raises
            return None
    return None


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


def _id_value(value: Any) -> Any:
    """An id of an object column in one canonical form per value (per record): equal values
    become identical objects — booleans and integral numbers ints, other reals the float that
    is exactly them or else their exact fraction, text itself — so that an engine's shuffle,
    which hashes an object column by its text, sends all of one person's rows to one
    partition (1, 1.0 and True are one id, as Python's equality says; 0.1 and the decimal
    1/10 are two)."""
    value = _plain_label(value)
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    try:
        exact = Fraction(value)
    except Exception:  # ±inf, or a number-like that Fraction cannot read
        try:
            return float(value)
        except Exception:
            return None
    if exact.denominator == 1:
        return int(exact)
    try:
        near = float(exact)
    except OverflowError:
        return exact
    return near if Fraction(near) == exact else exact


_plain_labels = np.frompyfunc(_plain_label, 1, 1)
_id_values = np.frompyfunc(_id_value, 1, 1)


@attrs.frozen
class _ObjectColumn:
    """A per-record conversion of one ``object`` column of an eager frame: ``labels`` (text
    and real numbers, :func:`_plain_label`), ``ids`` (the same in canonical form,
    :func:`_id_value`) or ``numbers`` (float64 into ``VALUE``). A picklable value, so that an
    engine can run it on every partition."""

    column: str
    convert: str

    def __call__(self, eager: Any) -> Any:
        nw = narwhals()
        values = eager.get_column(self.column).to_numpy()
        backend = eager.implementation
        if self.convert == "numbers":
            floats = total_floats(values)
            return eager.with_columns(nw.new_series(VALUE, floats, nw.Float64, backend=backend))
        clean = _id_values if self.convert == "ids" else _plain_labels
        with np.errstate(all="ignore"):  # per-record conversions: never a warning
            cleaned = np.asarray(clean(values), dtype=object) if values.size else values
        return eager.with_columns(nw.new_series(self.column, cleaned, nw.Object, backend=backend))


def plain_labels(nw: Any, frame: Any, column: str, *, ids: bool = False) -> Any:
    """An object column's values made total for grouping and matching (per record:
    :func:`_plain_label`, or :func:`_id_value` for an id column), so no unhashable or
    uncomparable value can make a group-by, a shuffle or a hash raise."""
    return per_partition(frame, _ObjectColumn(column, "ids" if ids else "labels"), {})


def numeric_value(nw: Any, frame: Any, column: str | None, kind: str) -> Any:
    """``VALUE``: the value column as float64, NaN where missing (total per record)."""
    assert column is not None
    if kind == "object":  # e.g. a pandas object column: converted element by element
        return per_partition(frame, _ObjectColumn(column, "numbers"), {VALUE: "float64"})
    return frame.with_columns(nw.col(column).cast(nw.Float64).fill_null(math.nan).alias(VALUE))


def cells(nw: Any, frame: Any, column: str | None, stat: Histogram, kind: str) -> Any:
    """``CELL``: each record's category index (k for "other"; outside the categories dropped
    unless ``other``); missing values dropped (a histogram's ``nan="drop"``)."""
    assert column is not None
    k = len(stat.categories)
    mapping: dict[Any, int] = {}
    for i, category in enumerate(stat.categories):
        try:
            mapping.setdefault(coerce(category, kind, column), i)
        except InvalidParameter:
            continue  # a category of another type can never match: its count is 0
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


def aligned(found: Aggregates, keys: tuple[tuple[Any, ...], ...]) -> Aggregates:
    """The aggregates of the declared keys, in their order; an absent key gets zeros."""
    position = {k: i for i, k in enumerate(found.keys)}
    values: dict[str, NDArray[Any]] = {}
    for name, array in found.values.items():
        out = np.zeros((len(keys), *array.shape[1:]), dtype=array.dtype)
        for i, key in enumerate(keys):
            j = _position(position, key)
            if j is not None:
                out[i] = array[j]
        values[name] = out
    lattice = None
    if found.lattice is not None:
        empty = (np.zeros(0, dtype=np.float64), np.zeros(0, dtype=np.int64))
        lattice = tuple(
            found.lattice[j] if (j := _position(position, k)) is not None else empty for k in keys
        )
    return Aggregates(keys, values, lattice)


def _position(position: dict[tuple[Any, ...], int], key: tuple[Any, ...]) -> int | None:
    """Where ``key`` is among the found keys, matching a number key to its text when the
    found keys are text (keys were coerced to the column's type the same way)."""
    if key in position:
        return position[key]
    text = tuple(k if isinstance(k, (str, bool)) else str(k) for k in key)
    return position.get(text)
