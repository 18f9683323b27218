"""Group keys of a table query: public (declared, all released) or private (found in the data
and released by partition selection), and how a declared key matches a column's values.

Keys are matched by value, in the type of the key column (:func:`coerce`): on a text column a
number key matches its text (the key ``1`` matches the cell ``"1"``, as declared categories
do); an ``object`` column is read as text (:func:`~dpkit.plugin.object_text`: the same rows
on every engine); a float column holds float64 values; a number column needs number keys and a boolean column
booleans (a key of another type is refused before anything is read, since the column's type
and the keys are both public). Two declared keys that are one group after this conversion are
refused (:func:`canonical_keys`): each would be released with its own noise while the
sensitivity counts the group once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

import attrs

from dpkit.plugin import (
    CENTRAL_EPSILON,
    DELTA,
    ColumnKind,
    InvalidParameter,
    as_frame,
    narwhals,
    object_text,
    parameter,
    require_columns,
)

__all__ = [
    "KEYS_PATH",
    "LABELS",
    "PrivateKeys",
    "PublicKeys",
    "canonical_keys",
    "coerce",
    "coerce_all",
    "matchable",
]

#: Where the group keys sit in a query's JSON form (an error's path).
KEYS_PATH = ("group_by", "keys")

#: Column kinds that can hold group keys and categories.
LABELS: tuple[ColumnKind, ...] = ("number", "boolean", "text", "object")


def _width_tuple(key: Any, width: int) -> tuple[Any, ...]:
    if width == 1 and not isinstance(key, (tuple, list)):
        return (key,)
    if not isinstance(key, (tuple, list)) or len(key) != width:
        raise InvalidParameter(
            "keys",
            key,
            f"a sequence of {width} values (one per group column)",
            owner="group_by",
            path=KEYS_PATH,
        )
    return tuple(key)


@attrs.frozen
class PublicKeys:
    """Group keys declared without looking at the private data: all are released.

    ``values`` holds one tuple per group (one value per group column). Build it from a list
    (:meth:`of`) or from a *public* table (:meth:`from_table`): a table of keys the analyst may
    publish whatever the private data hold (never the private table itself, whose keys would
    then be released exactly).
    """

    values: tuple[tuple[Any, ...], ...]

    def __attrs_post_init__(self) -> None:
        if not self.values:
            raise InvalidParameter(
                "keys", [], "at least one group key", owner="group_by", path=KEYS_PATH
            )
        if len(set(self.values)) != len(self.values):
            raise InvalidParameter(
                "keys", "(repeated)", "distinct group keys", owner="group_by", path=KEYS_PATH
            )

    @classmethod
    def of(cls, keys: Iterable[Any], width: int = 1) -> PublicKeys:
        """Keys from a list: scalars for one group column, sequences for several."""
        if isinstance(keys, (str, bytes)) or not isinstance(keys, Iterable):
            raise InvalidParameter(
                "keys", keys, "a list of group keys", owner="group_by", path=KEYS_PATH
            )
        return cls(tuple(_width_tuple(k, width) for k in keys))

    @classmethod
    def from_table(cls, table: Any, columns: str | Iterable[str]) -> PublicKeys:
        """The distinct rows of ``columns`` of a *public* table, in order of first appearance."""
        names = (columns,) if isinstance(columns, str) else tuple(columns)
        frame = as_frame(table, owner="group_by")
        require_columns(frame, {c: ("key", LABELS) for c in names}, owner="group_by")
        nw = narwhals()
        if isinstance(frame, nw.LazyFrame):
            frame = frame.collect()
        rows = zip(*(frame.get_column(c).to_list() for c in names), strict=True)
        return cls(tuple(dict.fromkeys(tuple(r) for r in rows)))

    def describe(self) -> list[Any]:
        return [list(k) if len(k) > 1 else k[0] for k in self.values]


@attrs.frozen
class PrivateKeys:
    """Release the keys found in the data that DP partition selection keeps, at cost
    (``epsilon``, ``delta``) on top of the statistic's (see
    :mod:`dpkit_central.partition_selection`)."""

    epsilon: float = parameter(CENTRAL_EPSILON, doc="ε of the partition selection")
    delta: float = parameter(DELTA, doc="δ of the partition selection")
    name: ClassVar[str] = "group_by"
    field_path: ClassVar[tuple[str, ...]] = ("group_by", "selection")  # dpkit.params.parameter

    def describe(self) -> dict[str, Any]:
        return {"keys": "private", "epsilon": self.epsilon, "delta": self.delta}


#: The values of each integer type (narwhals' dtype names).
_INTEGER_RANGES = {
    f"{sign}Int{bits}": (0, (1 << bits) - 1)
    if sign
    else (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    for sign in ("", "U")
    for bits in (8, 16, 32, 64, 128)
}


def _integer_range(dtype: Any) -> tuple[int, int] | None:
    """The values an integer column of ``dtype`` (a narwhals dtype) can hold; None if it is
    not an integer column."""
    name = dtype.__name__ if isinstance(dtype, type) else type(dtype).__name__
    return _INTEGER_RANGES.get(name)


def coerce(key: Any, kind: str, column: str, dtype: Any = None) -> Any:
    """A declared key (or category) as the value a cell of a column of ``kind`` (and narwhals
    ``dtype``) holds when it equals the key — what the query's per-record step compares and
    groups: text columns match a number by its text; ``object`` columns are read as text
    (:func:`~dpkit.plugin.object_text`); float and decimal columns as float64 (−0.0 as 0.0: the cells'
    :func:`~dpkit_central.aggregates.unsigned_zero`); integer columns hold integers (an integral
    float key is that integer); boolean columns booleans. A missing key (None, NaN) is refused:
    a missing cell is dropped, so it could never be matched. A key of another type than the
    column can hold is refused before anything is read (the column's type and the keys are
    both public)."""
    if kind == "text":
        if isinstance(key, bool) or not isinstance(key, (str, int, float)):
            raise InvalidParameter(
                "keys",
                key,
                f"text or numbers for the text column {column!r}",
                owner="group_by",
                path=KEYS_PATH,
            )
        text = object_text(key)
    elif kind == "object":
        text = object_text(key)
    elif kind == "number":
        if isinstance(key, bool) or not isinstance(key, (int, float)):
            raise InvalidParameter(
                "keys",
                key,
                f"numbers for the number column {column!r}",
                owner="group_by",
                path=KEYS_PATH,
            )
        if key != key:
            raise _missing_key(key, column)
        if dtype is not None and (dtype.is_float() or dtype.is_decimal()):
            try:
                return float(key) + 0.0  # −0.0 + 0.0 is 0.0
            except OverflowError:
                raise InvalidParameter(
                    "keys",
                    key,
                    f"numbers within the float range for {column!r}",
                    owner="group_by",
                    path=KEYS_PATH,
                ) from None
        return int(key) if isinstance(key, float) and key.is_integer() else key
    else:
        if kind == "boolean" and not isinstance(key, bool):
            raise InvalidParameter(
                "keys",
                key,
                f"true or false for the boolean column {column!r}",
                owner="group_by",
                path=KEYS_PATH,
            )
        return key
    if text is None:
        raise _missing_key(key, column)
    return text


def _missing_key(key: Any, column: str) -> InvalidParameter:
    return InvalidParameter(
        "keys",
        key,
        f"values that are not missing for {column!r} (missing cells are dropped)",
        owner="group_by",
        path=KEYS_PATH,
    )


def coerce_all(keys: list[Any], kind: str, column: str, dtype: Any = None) -> list[Any]:
    return [coerce(k, kind, column, dtype) for k in keys]


def matchable(key: Any, dtype: Any) -> bool:
    """Whether a coerced key can be the value of a cell of ``dtype`` (an integer column holds no
    fraction and nothing beyond its range): the others are released as absent groups without
    being compared, so no engine is asked to cast them into the column's type."""
    limits = _integer_range(dtype) if dtype is not None else None
    if limits is None:
        return True
    return isinstance(key, int) and limits[0] <= key <= limits[1]


def canonical_keys(
    keys: PublicKeys,
    by: tuple[str, ...],
    kinds: Mapping[str, str],
    dtypes: Mapping[str, Any],
    *,
    owner: str,
) -> tuple[tuple[Any, ...], ...]:
    """The public keys as the group columns hold them (:func:`coerce`, column by column), in the
    declared order; :class:`~dpkit.errors.InvalidParameter` if two declared keys are one group
    of the data (``1`` and ``"1"`` on a text column): each copy would be released with its own
    noise while the sensitivity counts it once. Decided from the keys and the schema only."""
    coerced = tuple(
        tuple(
            coerce(value, kinds[column], column, dtypes.get(column))
            for value, column in zip(key, by, strict=True)
        )
        for key in keys.values
    )
    first: dict[tuple[Any, ...], int] = {}
    for i, key in enumerate(coerced):
        j = first.setdefault(key, i)
        if j != i:
            a, b = keys.describe()[j], keys.describe()[i]
            raise InvalidParameter(
                "keys",
                [a, b],
                f"distinct groups of the data: {a!r} and {b!r} are both the group {list(key)!r} "
                f"in the column type(s) of {list(by)!r}; declare each group once",
                owner=owner,
            )
    return coerced
