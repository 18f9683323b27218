"""The aggregation step of a table query: the engine's per-group elementary aggregations,
collected as small arrays (:class:`Aggregates`), their groups in one fixed order, and public
keys aligned with the groups found.
"""

from __future__ import annotations

import decimal
import math
import numbers
from fractions import Fraction
from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from dpkit.tables import narwhals

__all__ = ["Aggregates", "aligned", "collect", "key_tuples", "sorted_keys"]


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


def _exact(value: Any) -> Fraction:
    """A finite real number as an exact fraction (numpy floats included)."""
    if isinstance(value, (numbers.Rational, float, decimal.Decimal)):
        return Fraction(value)
    return Fraction(*value.as_integer_ratio())


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
