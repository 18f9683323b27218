"""Adversarial tables for property tests: one logical table, its form on every engine, its
neighbours.

A :class:`LogicalTable` holds each column's cells as Python values together with how the column
is *stored* — an Arrow type named in :data:`STORAGES`, or ``"object"``, a pandas object column
mixing Python types (which Arrow cannot hold) — and how its rows are split into chunks (Arrow
record batches, Parquet row groups, Polars chunks, Dask partitions; a chunk may be empty).
:meth:`LogicalTable.native` builds the same table on each engine of :data:`ENGINES`, so that a
property can demand the same answer from all of them; an engine that cannot hold a table
(an object column in Arrow, a run-end encoded column in Polars) raises :class:`Unrepresentable`.

**Identity is Python's equality.** Two cells are one value — one person of an id column, one
group of a key column — when they compare equal: ``1``, ``1.0``, ``True`` and ``Fraction(1)``
are one, ``0.0`` and ``-0.0`` are one; ``"1"`` and ``1`` are two, the NFC and NFD spellings of
one text are two, ``2**53 + 1`` and ``2.0**53`` are two. ``None`` and NaN are *missing*: no
person, no group. This is the meaning dpkit gives an object column's ids and keys
(``dpkit_central.aggregates``), and a typed column's values compare the same way.

**Neighbours.** :meth:`LogicalTable.without_value` removes every row of one id (the neighbour
under an id privacy unit), :meth:`LogicalTable.without_row` one row (under the record unit).
Rows keep their order and chunks their places, so a chunk may become empty.

The engines need the ``tables`` and ``cluster`` extras (pandas, Polars, PyArrow, Dask); each is
imported only when a table is built on it.
"""

from __future__ import annotations

import datetime
import math
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from decimal import Decimal
from fractions import Fraction
from typing import Any

import attrs
import numpy as np

__all__ = [
    "ENGINES",
    "GROUPS",
    "ID",
    "INTEGER_STORAGES",
    "LABEL_STORAGES",
    "NUMBER_STORAGES",
    "STORAGES",
    "TEXT_STORAGES",
    "VALUE",
    "Column",
    "LogicalTable",
    "Unrepresentable",
    "is_missing",
    "key_spellings",
    "pool",
    "same_value",
]

#: The column names the strategies use: an id column, group columns, a value column.
ID = "id"
GROUPS = ("g0", "g1")
VALUE = "v"

INTEGER_STORAGES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
FLOAT_STORAGES = ("float16", "float32", "float64")
TEXT_STORAGES = ("string", "large_string", "string_view", "dictionary<string>", "run_end<string>")
BINARY_STORAGES = ("binary", "large_binary", "binary_view")
TIME_STORAGES = ("timestamp[us]", "date32")
#: Every storage a column can have: the Arrow types, and ``"object"``.
STORAGES = (
    "object",
    *INTEGER_STORAGES,
    *FLOAT_STORAGES,
    "decimal128",
    "bool",
    *TEXT_STORAGES,
    *BINARY_STORAGES,
    "dictionary<int64>",
    "run_end<int64>",
    *TIME_STORAGES,
)
#: Storages of numbers (what a sum, a mean or a quantile reads).
NUMBER_STORAGES = (
    "object",
    *INTEGER_STORAGES,
    *FLOAT_STORAGES,
    "decimal128",
    "bool",
    "dictionary<int64>",
    "run_end<int64>",
)
#: Storages of labels (group keys, histogram categories).
LABEL_STORAGES = (*NUMBER_STORAGES, *TEXT_STORAGES)

#: The engines :meth:`LogicalTable.native` builds on: ``pandas`` with NumPy dtypes (nullable
#: ones where a column has missing values, so that no value changes), ``pandas[arrow]`` with
#: Arrow dtypes, ``pyarrow[parquet]`` written one row group per chunk and read back with the
#: text columns as dictionaries, and Dask with ``dataframe.convert-string`` off and on.
ENGINES = (
    "pyarrow",
    "pyarrow[parquet]",
    "pandas",
    "pandas[arrow]",
    "polars",
    "dask",
    "dask[convert-string]",
)

_NFC = unicodedata.normalize("NFC", "\u00e9")
_NFD = unicodedata.normalize("NFD", "\u00e9")
_BIG = 2**53


class Unrepresentable(Exception):
    """The engine cannot hold this table (not a finding about dpkit); the message says why."""


def is_missing(value: Any) -> bool:
    """``None`` or a NaN: a cell that names no person and no group."""
    if value is None:
        return True
    try:
        return bool(value != value)
    except Exception:  # a value whose comparison raises: not a NaN
        return False


def same_value(a: Any, b: Any) -> bool:
    """Whether two cells are one value (Python's equality; missing cells are never equal)."""
    if is_missing(a) or is_missing(b):
        return False
    try:
        return bool(a == b)
    except Exception:
        return False


def _classes(*groups: tuple[Any, ...]) -> tuple[tuple[Any, ...], ...]:
    return groups


#: Text: numbers spelled as text (which a key list may name as numbers) first, then the empty
#: text, one letter in NFC and in NFD, a boolean's name and a padded number.
_TEXT = _classes(
    ("1",), ("1.0",), ("0",), ("-0.0",), ("nan",), ("",), (_NFC,), (_NFD,), ("True",), (" 1",)
)
_SIGNED = _classes((0,), (1,), (2,), (-1,))
_POOLS: dict[str, tuple[tuple[Any, ...], ...]] = {
    "object": _classes(
        (1, 1.0, True, np.int64(1), np.float64(1.0), Fraction(1)),
        (0, 0.0, -0.0, False, np.float64(-0.0)),
        (2, 2.0),
        (1.5, Fraction(3, 2), Decimal("1.5")),
        (-1, -1.0),
        ("1",),
        ("1.0",),
        ("",),
        (_NFC,),
        (_NFD,),
        ("True",),
        (_BIG + 1,),
        (_BIG, float(_BIG)),
        (b"1",),
        (math.inf,),
    ),
    "int8": (*_SIGNED, (127,), (-128,)),
    "int16": (*_SIGNED, (32767,), (-32768,)),
    "int32": (*_SIGNED, (2**31 - 1,), (-(2**31),)),
    "int64": (*_SIGNED, (_BIG - 1,), (_BIG,), (_BIG + 1,), (2**63 - 1,), (-(2**63),)),
    "uint8": _classes((0,), (1,), (2,), (255,)),
    "uint16": _classes((0,), (1,), (2,), (65535,)),
    "uint32": _classes((0,), (1,), (2,), (2**32 - 1,)),
    "uint64": _classes((0,), (1,), (2,), (_BIG + 1,), (2**64 - 1,)),
    "float16": _classes(
        (0.0, -0.0), (1.0,), (1.5,), (2.5,), (-1.0,), (65504.0,), (math.inf,), (-math.inf,)
    ),
    "float32": _classes(
        (0.0, -0.0), (1.0,), (1.5,), (2.5,), (-1.0,), (16777216.0,), (16777218.0,), (math.inf,)
    ),
    "float64": _classes(
        (0.0, -0.0),
        (1.0,),
        (1.5,),
        (2.5,),
        (-1.0,),
        (float(_BIG),),
        (float(_BIG) + 2.0,),
        (float(_BIG - 1),),
        (1e308,),
        (-1e308,),
        (5e-324,),
        (math.inf,),
        (-math.inf,),
    ),
    "decimal128": _classes(
        (Decimal("0"), Decimal("-0.00")),
        (Decimal("1"), Decimal("1.00")),
        (Decimal("1.5"),),
        (Decimal("2.5"),),
        (Decimal("-1"),),
        (Decimal("123456789012345678.91"),),
    ),
    "bool": _classes((True,), (False,)),
    "binary": _classes((b"1",), (b"",), (b"\xff",), (b"a",)),
    "timestamp[us]": _classes(
        (datetime.datetime(2020, 1, 1),),
        (datetime.datetime(2020, 1, 1, 0, 0, 0, 1),),
        (datetime.datetime(1970, 1, 1),),
    ),
    "date32": _classes(
        (datetime.date(2020, 1, 1),), (datetime.date(1970, 1, 1),), (datetime.date(1, 1, 1),)
    ),
}
for _name in TEXT_STORAGES:
    _POOLS[_name] = _TEXT
_POOLS["large_binary"] = _POOLS["binary_view"] = _POOLS["binary"]
_POOLS["dictionary<int64>"] = _POOLS["run_end<int64>"] = _POOLS["int64"]
_FLOATING = ("object", *FLOAT_STORAGES)


def pool(storage: str) -> tuple[tuple[tuple[Any, ...], ...], tuple[Any, ...]]:
    """(classes, missing) of a storage: the values its cells are drawn from, as classes of
    equal spellings (:func:`same_value`), and its missing cells (``None``; NaN too where the
    storage holds floats)."""
    if storage not in _POOLS:
        raise ValueError(f"unknown storage {storage!r}: one of {', '.join(STORAGES)}")
    missing: tuple[Any, ...] = (None, math.nan) if storage in _FLOATING else (None,)
    return _POOLS[storage], missing


def key_spellings(value: Any, storage: str) -> tuple[Any, ...]:
    """The public keys that name ``value``'s group on a column of ``storage``, spelled every
    way a key list may spell them: ``value`` itself, keys that are other Python values but
    equal once coerced to the column's type (a number and its text on a text column; ``1``,
    ``1.0`` and ``True`` on an object column), and numbers that differ from ``value`` but not
    once rounded to the column's floats (``2**53 + 1`` on a float column holding ``2.0**53``;
    ``2.0**53`` on an int64 column holding ``2**53 + 1``)."""
    if is_missing(value):
        return (value,)
    found: list[Any] = [value]
    if storage in TEXT_STORAGES:
        for convert in (int, float):
            try:
                number = convert(value)
            except (TypeError, ValueError, OverflowError):
                continue
            if str(number) == value:
                found.append(number)
    elif storage == "object":
        for spellings in _POOLS["object"]:
            if any(same_value(value, s) for s in spellings):
                found.extend(spellings)
    elif storage != "bool" and isinstance(value, (int, float, Decimal)):
        candidates: list[Any] = [float(value)]
        if math.isfinite(value):
            exact = Fraction(value)
            if exact.denominator == 1:
                whole = int(exact)
                candidates += [whole, whole + 1, whole - 1]
        rounded = _rounded(value, storage)
        found = [value] if not isinstance(value, Decimal) else []
        found += [k for k in candidates if same_value(k, value) or _rounded(k, storage) == rounded]
    distinct: list[Any] = []
    for key in found:
        if not any(type(key) is type(d) and key == d for d in distinct):
            distinct.append(key)
    return tuple(distinct)


def _rounded(number: Any, storage: str) -> float:
    """``number`` as the column's floats hold it (float16, float32; float64 otherwise)."""
    dtype = {"float16": np.float16, "float32": np.float32}.get(storage, np.float64)
    with np.errstate(all="ignore"):
        return float(np.asarray(float(number), dtype=np.float64).astype(dtype))


@attrs.frozen
class Column:
    """One column: its storage (``"object"`` or an Arrow type in :data:`STORAGES`) and its
    cells as Python values."""

    storage: str
    values: tuple[Any, ...]


@attrs.frozen
class LogicalTable:
    """A table independent of any engine: named columns of equal length, and the rows of each
    chunk in order (``chunks`` sums to the number of rows; zeros are empty chunks).

    ``nullable`` names the integer and boolean columns that pandas holds in its nullable
    dtypes (``Int64``, ``boolean``) even when no cell is missing: a column with a missing
    cell is, and its neighbours keep that schema (a table's schema is not what a neighbour
    changes)."""

    columns: tuple[tuple[str, Column], ...]
    chunks: tuple[int, ...]
    nullable: frozenset[str] = frozenset()

    def __attrs_post_init__(self) -> None:
        lengths = {len(c.values) for _, c in self.columns}
        if len(lengths) > 1 or sum(self.chunks) != (lengths.pop() if lengths else 0):
            raise ValueError(f"columns of unequal lengths or chunks {self.chunks} not the rows")

    @property
    def rows(self) -> int:
        return sum(self.chunks)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.columns)

    def column(self, name: str) -> Column:
        for found, column in self.columns:
            if found == name:
                return column
        raise KeyError(name)

    def row(self, i: int, names: Sequence[str]) -> tuple[Any, ...]:
        return tuple(self.column(n).values[i] for n in names)

    def distinct(self, name: str) -> list[Any]:
        """One cell per distinct non-missing value of a column (:func:`same_value`)."""
        found: list[Any] = []
        for value in self.column(name).values:
            if not is_missing(value) and not any(same_value(value, f) for f in found):
                found.append(value)
        return found

    def rows_of(self, name: str, value: Any) -> list[int]:
        """The rows whose cell in ``name`` is ``value`` (:func:`same_value`)."""
        return [i for i, cell in enumerate(self.column(name).values) if same_value(cell, value)]

    def without_rows(self, rows: Iterable[int]) -> LogicalTable:
        """This table less ``rows``; every chunk keeps its place."""
        drop = set(rows)
        keep = [i for i in range(self.rows) if i not in drop]
        columns = tuple(
            (name, Column(c.storage, tuple(c.values[i] for i in keep))) for name, c in self.columns
        )
        chunks, start = [], 0
        for size in self.chunks:
            chunks.append(sum(1 for i in range(start, start + size) if i not in drop))
            start += size
        nullable = self.nullable | {
            name for name, c in self.columns if any(v is None for v in c.values)
        }
        return LogicalTable(columns, tuple(chunks), frozenset(nullable))

    def without_value(self, name: str, value: Any) -> LogicalTable:
        """The neighbour under an id unit: every row whose ``name`` cell is ``value`` removed."""
        return self.without_rows(self.rows_of(name, value))

    def without_row(self, row: int) -> LogicalTable:
        """The neighbour under the record unit: one row removed."""
        return self.without_rows([row])

    # -- engines ------------------------------------------------------------------------------

    def native(self, engine: str) -> Any:
        """This table on ``engine`` (one of :data:`ENGINES`), or :class:`Unrepresentable`."""
        builders: dict[str, Callable[[], Any]] = {
            "pyarrow": self.arrow,
            "pyarrow[parquet]": self.parquet,
            "pandas": lambda: self.pandas(arrow_dtypes=False),
            "pandas[arrow]": lambda: self.pandas(arrow_dtypes=True),
            "polars": self.polars,
            "dask": lambda: self.dask(convert_string=False),
            "dask[convert-string]": lambda: self.dask(convert_string=True),
        }
        if engine not in builders:
            raise ValueError(f"unknown engine {engine!r}: one of {', '.join(ENGINES)}")
        return builders[engine]()

    def _spans(self) -> list[tuple[int, int]]:
        spans, start = [], 0
        for size in self.chunks:
            spans.append((start, start + size))
            start += size
        return spans

    def arrow(self) -> Any:
        """A PyArrow table, one record batch per chunk; a dictionary column is encoded chunk
        by chunk (so its chunks have different dictionaries)."""
        import pyarrow as pa

        for name, column in self.columns:
            if column.storage == "object":
                raise Unrepresentable(f"Arrow cannot hold the object column {name!r}")
        batches = [
            pa.record_batch(
                [_arrow_array(c.storage, c.values[a:b]) for _, c in self.columns],
                names=list(self.names),
            )
            for a, b in self._spans()
        ]
        schema = pa.schema([(n, _arrow_array(c.storage, ()).type) for n, c in self.columns])
        return pa.Table.from_batches(batches, schema=schema)

    def parquet(self) -> Any:
        """The Arrow table written to Parquet (in memory), one row group per non-empty chunk,
        and read back with its text and binary columns as dictionaries."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = self.arrow()
        sink = pa.BufferOutputStream()
        try:
            with pq.ParquetWriter(sink, table.schema) as writer:
                for batch in table.to_batches():
                    if batch.num_rows:
                        writer.write_table(pa.Table.from_batches([batch], schema=table.schema))
        except (pa.ArrowException, ValueError, TypeError) as error:
            raise Unrepresentable(f"Parquet cannot hold this table: {error}") from None
        words = {*TEXT_STORAGES, *BINARY_STORAGES}
        dictionary = [n for n, c in self.columns if c.storage in words]
        return pq.read_table(pa.BufferReader(sink.getvalue()), read_dictionary=dictionary)

    def pandas(self, *, arrow_dtypes: bool = False) -> Any:
        """A pandas DataFrame: object columns as they are; the others from Arrow, with Arrow
        dtypes or NumPy ones (nullable integers and booleans where a value is missing, or the
        column is ``nullable``, so that no value changes on the way)."""
        import pandas as pd
        import pyarrow as pa

        data: dict[str, Any] = {}
        for name, column in self.columns:
            if column.storage == "object":
                data[name] = pd.Series(list(column.values), dtype=object)
                continue
            storage = column.storage
            if storage.startswith("run_end<") and not arrow_dtypes:  # NumPy holds its values
                storage = storage[len("run_end<") : -1]
            array = pa.chunked_array(
                [_arrow_array(storage, column.values[a:b]) for a, b in self._spans()],
                type=_arrow_array(storage, ()).type,
            )
            try:
                if arrow_dtypes:
                    data[name] = array.to_pandas(types_mapper=pd.ArrowDtype)
                elif array.null_count or name in self.nullable:
                    data[name] = array.to_pandas(types_mapper=_nullable_dtypes())
                else:
                    data[name] = array.to_pandas()
            except (pa.ArrowException, ValueError, TypeError) as error:
                raise Unrepresentable(f"pandas cannot hold {column.storage}: {error}") from None
        return pd.DataFrame(data, index=pd.RangeIndex(self.rows))

    def polars(self) -> Any:
        """A Polars DataFrame from the Arrow table, its chunks kept."""
        import polars as pl

        table = self.arrow()
        try:
            return pl.from_arrow(table, rechunk=False)
        except Exception as error:  # Polars' own errors: a type it does not support
            raise Unrepresentable(f"Polars cannot hold this table: {error}") from None

    def dask(self, *, convert_string: bool) -> Any:
        """A Dask DataFrame of the pandas frame (NumPy dtypes), one partition per chunk, made
        by ``dd.from_pandas`` with ``dataframe.convert-string`` as given."""
        import dask
        import dask.dataframe as dd

        frame = self.pandas(arrow_dtypes=False)
        spans = self._spans() or [(0, 0)]
        try:
            with dask.config.set({"dataframe.convert-string": convert_string}):
                parts = [_dask_part(dd, frame.iloc[a:b]) for a, b in spans]
        except Exception as error:  # Dask's own conversion (convert-string) refused a column
            raise Unrepresentable(f"Dask cannot hold this table: {error}") from None
        return parts[0] if len(parts) == 1 else dd.concat(parts)  # type: ignore[no-untyped-call]


def _dask_part(dd: Any, frame: Any) -> Any:
    return dd.from_pandas(frame, npartitions=1, sort=False)


def _nullable_dtypes() -> Callable[[Any], Any]:
    import pandas as pd
    import pyarrow as pa

    def mapper(arrow_type: Any) -> Any:
        if pa.types.is_integer(arrow_type):
            return pd.api.types.pandas_dtype(str(arrow_type).capitalize().replace("Uint", "UInt"))
        if pa.types.is_boolean(arrow_type):
            return pd.BooleanDtype()
        return None

    return mapper


def _arrow_array(storage: str, values: Sequence[Any]) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    cells = list(values)
    if storage == "dictionary<string>":
        return pa.array(cells, pa.string()).dictionary_encode()
    if storage == "dictionary<int64>":
        return pa.array(cells, pa.int64()).dictionary_encode()
    if storage == "run_end<string>":
        return pc.run_end_encode(pa.array(cells, pa.string()))
    if storage == "run_end<int64>":
        return pc.run_end_encode(pa.array(cells, pa.int64()))
    if storage == "decimal128":
        return pa.array(cells, pa.decimal128(38, 2))
    if storage == "timestamp[us]":
        return pa.array(cells, pa.timestamp("us"))
    if storage == "bool":
        return pa.array(cells, pa.bool_())
    return pa.array(cells, getattr(pa, storage)())
