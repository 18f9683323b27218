"""Adversarial tables for property tests: one logical table, its form on every engine, its
neighbours.

A :class:`LogicalTable` holds each column's cells as Python values together with how the column
is *stored* — an Arrow type named in :data:`STORAGES`, or ``"object"``, a pandas object column
mixing Python types (which Arrow cannot hold) — and how its rows are split into chunks (Arrow
record batches, Parquet row groups, Polars chunks, Dask partitions; a chunk may be empty).
:meth:`LogicalTable.native` builds the same table on each engine of :data:`ENGINES`, so that a
property can demand the same answer from all of them; an engine that cannot hold a table
(an object column in Arrow, a run-end encoded column in Polars) raises :class:`Unrepresentable`.

**Identity is dpkit's reading of the column.** Two cells are one value — one person of an id
column, one group of a key column — when dpkit reads them as one (:func:`identity`). An
``"object"`` column is read as *text*, value by value, by pandas' rule for converting to its
string dtype (:func:`text_of`): text is itself, bytes their UTF-8 text, a float ``str(x)``,
anything else ``f"{x}"`` — so ``1``, ``1.0`` and ``True`` are three values (``"1"``, ``"1.0"``,
``"True"``) and ``1``, ``"1"``, ``b"1"`` and ``Fraction(1)`` are one. A typed column holds its
type's values: floats and decimals as float64 with ``-0.0`` as ``0.0`` — except that a
decimal *id* is its exact value (:func:`person`: two persons one double apart stay two) —,
integers exactly (``2**53 + 1`` is not ``2**53``), booleans, text exactly (the NFC and NFD
spellings of one text are two), bytes, dates; an encoding (a dictionary, run-end encoding, a view type) is
storage, not value. A missing cell — ``None``, NaN, a NaN decimal, ``NaT``, ``pd.NA``, and
in an object column bytes that are not UTF-8 or a value whose text cannot be made — names no
person and no group.

**Keys** are compared with the column's values after the same coercion
(:func:`key_group`): on a text column a number key names its text (``1`` names ``"1"``), on
an object column any key names its text, on a number column a number names its value (in
float64 on a float or decimal column), on a boolean column a boolean. A key of a type the
column cannot hold, or a missing key, is refused; so is a key list in which two keys name one
group (``[1, "1"]`` on a text column; :func:`refused_keys`) — in the public phase, before any
value is read. :func:`key_spellings` gives the keys that name one value. This is the rule of
``dpkit_central.keys`` (``as_text``, ``coerce``, ``canonical_keys``), restated here on its own
(the core does not depend on a plugin) and held to it by dpkit's unit tests.

**Neighbours.** :meth:`LogicalTable.without_value` removes every row of one id (the neighbour
under an id privacy unit), :meth:`LogicalTable.without_row` one row (under the record unit).
Rows keep their order and chunks their places, so a chunk may become empty.

**DuckDB.** A table on DuckDB is a relation of its own connection over the Arrow table, which
DuckDB reads by its type rules (:func:`reading`): every text type as ``VARCHAR``, every binary
type as ``BLOB``, a dictionary or run-end encoded column as its values' type; it has no
``float16`` (a table with one is unrepresentable there). ``"duckdb"`` is the relation as a user
hands it to a table query (dpkit's per-record steps and group-by run in DuckDB, the bounding on
the collected rows, spilled by id: :func:`held`); ``"duckdb[bounded]"`` is run within :func:`held`, which gives dpkit the
relation's connection, so that the bounding runs in DuckDB too (as ``dpkit.sql(...,
bounding="duckdb")`` runs it).

The engines need the ``tables``, ``sql`` and ``cluster`` extras (pandas, Polars, PyArrow,
DuckDB, Dask); each is imported only when a table is built on it.
"""

from __future__ import annotations

import contextlib
import datetime
import math
import sys
import unicodedata
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
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
    "held",
    "identity",
    "is_missing",
    "key_group",
    "key_spellings",
    "person",
    "pool",
    "reading",
    "refused_keys",
    "same_value",
    "text_of",
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
#: How dpkit reads a typed column's values (:func:`identity`): as float64, as integers.
_FLOAT64 = (*FLOAT_STORAGES, "decimal128")
_WHOLE = (*INTEGER_STORAGES, "dictionary<int64>", "run_end<int64>")
#: Storages that pandas with NumPy dtypes holds as Python objects (:func:`reading`).
_AS_OBJECTS = ("decimal128", *BINARY_STORAGES, "date32")
#: The storages DuckDB reads as another (:func:`reading`): text as ``VARCHAR``, bytes as
#: ``BLOB``, an encoded column as its values' type.
_ON_DUCKDB = {
    **{name: "string" for name in TEXT_STORAGES},
    **{name: "binary" for name in BINARY_STORAGES},
    "dictionary<int64>": "int64",
    "run_end<int64>": "int64",
}
#: The places of the decimal128 columns (``decimal128(38, 2)``).
_CENT = Decimal("0.01")

#: The engines :meth:`LogicalTable.native` builds on: ``pandas`` with NumPy dtypes (nullable
#: ones where a column has missing values, so that no value changes), ``pandas[arrow]`` with
#: Arrow dtypes, ``pyarrow[parquet]`` written one row group per chunk and read back with the
#: text columns as dictionaries, a DuckDB relation over the Arrow table (bounded on the
#: collected rows, and ``duckdb[bounded]``: in DuckDB; module docstring), and Dask with
#: ``dataframe.convert-string`` off and on.
ENGINES = (
    "pyarrow",
    "pyarrow[parquet]",
    "pandas",
    "pandas[arrow]",
    "polars",
    "duckdb",
    "duckdb[bounded]",
    "dask",
    "dask[convert-string]",
)

_NFC = unicodedata.normalize("NFC", "\u00e9")
_NFD = unicodedata.normalize("NFD", "\u00e9")
_BIG = 2**53


def reading(storage: str, engine: str) -> str:
    """The storage a column of ``storage`` has in the table's form on ``engine``, as dpkit
    reads it: pandas with NumPy dtypes (and Dask, made from it) holds decimals, bytes and dates
    as Python objects, an ``"object"`` column, which dpkit reads as text; Dask's
    ``dataframe.convert-string`` rewrites an object column as text (``"string"``: each cell by
    the rule dpkit reads it by); DuckDB reads every text type as ``"string"``, every binary type
    as ``"binary"`` and an encoded column as its values' type. Every other storage is read as
    itself."""
    if engine.startswith("duckdb"):
        return _ON_DUCKDB.get(storage, storage)
    if engine in ("pandas", "dask") and storage in _AS_OBJECTS:
        return "object"
    if engine == "dask[convert-string]" and storage in ("object", *_AS_OBJECTS):
        return "string"
    return storage


class Unrepresentable(Exception):
    """The engine cannot hold this table (not a finding about dpkit); the message says why."""


def is_missing(value: Any) -> bool:
    """Whether a cell is missing in a typed column: ``None`` or a NaN (a float's, a decimal's,
    ``NaT``, ``pd.NA``)."""
    if value is None or type(value).__name__ in ("NAType", "NaTType"):
        return True
    if isinstance(value, (float, np.floating)):
        return math.isnan(value)
    if isinstance(value, Decimal):
        return value.is_nan()
    if isinstance(value, (np.datetime64, np.timedelta64)):
        return bool(np.isnat(value))
    return False


def text_of(value: Any) -> str | None:
    """A cell of an ``"object"`` column as the text dpkit reads it (None: missing), by pandas'
    rule for ``Series.astype("string")``: text is itself; a missing value (:func:`is_missing`)
    stays missing; bytes are decoded as UTF-8; a float (Python's or numpy's) is ``str(x)``;
    anything else is ``format(x)``. Bytes that are not UTF-8, text that UTF-8 cannot encode (a
    lone surrogate), and a value whose text raises, are missing."""
    if not isinstance(value, str) and is_missing(value):
        return None
    try:
        if isinstance(value, str):
            text = str(value)
        elif isinstance(value, bytes):
            text = value.decode("utf-8")
        else:
            text = str(value) if isinstance(value, (float, np.floating)) else format(value)
        text.encode("utf-8")  # a lone surrogate: text UTF-8 cannot hold
    except Exception:  # undecodable bytes, a __str__ or __format__ that raises
        return None
    return text


def identity(value: Any, storage: str) -> Any:
    """What a cell of a column of ``storage`` is to dpkit — which person of an id column, which
    group of a key column — as a hashable value; None if the cell is missing. An object
    column's cells are their text (:func:`text_of`); floats and decimals are float64 (``-0.0``
    as ``0.0``); integers, booleans, text, bytes and dates are themselves."""
    if storage == "object":
        return text_of(value)
    if is_missing(value):
        return None
    if storage in _FLOAT64:
        return float(value) + 0.0  # −0.0 + 0.0 is 0.0
    if storage in _WHOLE:
        return int(value)
    return value


def person(value: Any, storage: str) -> Any:
    """Which person a cell of an *id* column of ``storage`` is (None if missing): its
    :func:`identity`, except that a decimal is its exact value — the ids 2⁵³ and 2⁵³ + 1 are
    two persons, though as group keys (read as float64) they are one group."""
    if storage == "decimal128" and not is_missing(value):
        return _decimal_cell(value)
    return identity(value, storage)


def same_value(a: Any, b: Any, storage: str) -> bool:
    """Whether two cells of a column of ``storage`` are one value (:func:`identity`); a missing
    cell is no value, equal to none."""
    found = identity(a, storage)
    return found is not None and found == identity(b, storage)


def key_group(key: Any, storage: str) -> Any:
    """The group a public key (or a histogram's category) names on a column of ``storage``,
    comparable with the cells' :func:`identity`; None if the key is refused: a missing key, or
    one of a type the column cannot hold (a number column takes ints and floats, not booleans;
    a text column text, ints and floats; a boolean column booleans; an object column anything).
    An integer column's key is exact (an integral float is that integer; a fraction or an
    integer beyond the column's range names a group no cell is in)."""
    if storage == "object":
        return text_of(key)
    if storage in TEXT_STORAGES:
        if isinstance(key, bool) or not isinstance(key, (str, int, float)):
            return None
        return text_of(key)
    if storage == "bool":
        return key if isinstance(key, bool) else None
    if isinstance(key, bool) or not isinstance(key, (int, float)) or is_missing(key):
        return None
    if storage in _FLOAT64:
        try:
            return float(key) + 0.0
        except OverflowError:  # an integer beyond the floats: refused
            return None
    return int(key) if isinstance(key, float) and key.is_integer() else key


def refused_keys(keys: Sequence[Any], storages: Sequence[str]) -> tuple[Any, Any] | None:
    """Why a public phase refuses ``keys`` (one tuple per key, one value per column of
    ``storages``): the first key it cannot coerce, as ``(key, None)``; else the first two keys
    that name one group, as ``(first, second)``; None if it accepts them."""
    found: dict[tuple[Any, ...], Any] = {}
    groups = []
    for key in keys:
        group = tuple(key_group(k, s) for k, s in zip(key, storages, strict=True))
        if any(g is None for g in group):
            return key, None
        groups.append((key, group))
    for key, group in groups:
        if group in found:
            return found[group], key
        found[group] = key
    return None


def _classes(*groups: tuple[Any, ...]) -> tuple[tuple[Any, ...], ...]:
    return groups


#: Text: numbers spelled as text (which a key list may name as numbers) first, then the empty
#: text, one letter in NFC and in NFD, a boolean's name and a padded number.
_TEXT = _classes(
    ("1",),
    ("1.0",),
    ("0",),
    ("-0.0",),
    ("inf",),
    ("1e+16",),
    ("9007199254740993",),
    ("nan",),
    ("",),
    (_NFC,),
    (_NFD,),
    ("True",),
    (" 1",),
)
_SIGNED = _classes((0,), (1,), (2,), (-1,))
_POOLS: dict[str, tuple[tuple[Any, ...], ...]] = {
    # An object column's classes are its texts (text_of): each class holds Python and numpy
    # values whose text is one, and that text itself.
    "object": _classes(
        (1, np.int64(1), Fraction(1), Decimal("1"), b"1", "1"),
        (1.0, np.float64(1.0), "1.0"),
        (True, np.True_, "True"),
        (0, np.uint8(0), "0"),
        (0.0, "0.0"),
        (-0.0, np.float64(-0.0), "-0.0"),
        (False, "False"),
        (2, "2"),
        (2.0, "2.0"),
        (1.5, Decimal("1.5"), np.float32(1.5), "1.5"),
        (Fraction(3, 2), "3/2"),
        (Decimal("1.00"), "1.00"),
        (-1, "-1"),
        (-1.0, "-1.0"),
        ("",),
        (_NFC,),
        (_NFD,),
        (" 1",),
        (_BIG + 1, "9007199254740993"),
        (_BIG, "9007199254740992"),
        (float(_BIG), "9007199254740992.0"),
        (math.inf, "inf"),
        (1e16, "1e+16"),
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


#: Missing cells: ``None`` everywhere; NaN where the storage holds floats; in an object column
#: also a NaN decimal and a lone surrogate (the text conversion's missing values).
_MISSING: dict[str, tuple[Any, ...]] = {
    "object": (None, math.nan, Decimal("NaN"), "\ud800"),
    **{name: (None, math.nan) for name in FLOAT_STORAGES},
}


def pool(storage: str) -> tuple[tuple[tuple[Any, ...], ...], tuple[Any, ...]]:
    """(classes, missing) of a storage: the values its cells are drawn from, as classes of
    spellings of one value (:func:`same_value`), and its missing cells."""
    if storage not in _POOLS:
        raise ValueError(f"unknown storage {storage!r}: one of {', '.join(STORAGES)}")
    return _POOLS[storage], _MISSING.get(storage, (None,))


def key_spellings(value: Any, storage: str) -> tuple[Any, ...]:
    """The public keys that name ``value``'s group on a column of ``storage`` (:func:`key_group`),
    each spelling it a different way: ``value`` itself where it is a key the column takes, and
    other Python values equal to it once coerced — a number and its text on a text column; on
    an object column every value of the pool with its text (``1``, ``"1"``, ``b"1"``, but not
    ``1.0`` or ``True``); an integral float and its integer on a number column, and on a float
    column the integers that round to it (``2**53 + 1`` names ``2.0**53``). Some are equal as
    Python values (``1`` and ``Fraction(1)``: a key list holds one of them); a list holding two
    that are not names one group twice, which the public phase refuses. Empty for a missing
    value."""
    group = identity(value, storage)
    if group is None:
        return ()
    candidates: list[Any] = [value]
    if storage == "object":
        candidates += [s for spellings in _POOLS["object"] for s in spellings]
        candidates.append(group)
    elif storage in TEXT_STORAGES:
        for convert in (int, float):
            try:
                candidates.append(convert(value))
            except (TypeError, ValueError, OverflowError):
                continue
    elif storage != "bool" and isinstance(value, (int, float, Decimal)):
        candidates += [float(value), -float(value)]
        if math.isfinite(value):
            exact = Fraction(value)
            if exact.denominator == 1:
                whole = int(exact)
                candidates += [whole, whole + 1, whole - 1]
    distinct: dict[tuple[type, str], Any] = {}
    for key in candidates:
        named = key_group(key, storage)
        if named is not None and named == group:
            distinct.setdefault((type(key), repr(key)), key)
    return tuple(distinct.values())


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
        """One cell (the first) per distinct non-missing value of a column (:func:`identity`)."""
        column = self.column(name)
        found: dict[Any, Any] = {}
        for value in column.values:
            group = identity(value, column.storage)
            if group is not None:
                found.setdefault(group, value)
        return list(found.values())

    def rows_of(self, name: str, value: Any) -> list[int]:
        """The rows whose cell in ``name`` is ``value`` (:func:`same_value`; in the id column
        :data:`ID`, the rows of its :func:`person`)."""
        column = self.column(name)
        if name == ID:
            found = person(value, column.storage)
            return [
                i
                for i, cell in enumerate(column.values)
                if found is not None and person(cell, column.storage) == found
            ]
        return [
            i for i, cell in enumerate(column.values) if same_value(cell, value, column.storage)
        ]

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

    def read_on(self, engine: str) -> LogicalTable:
        """This table as dpkit reads its form on ``engine`` (one of :data:`ENGINES`): each
        column with the storage it has there (:func:`reading`) and its cells as they are held
        there — a decimal at the Arrow type's two places, an object column's cells as their
        text where Dask's convert-string made it text. Rows and chunks are this table's, so a
        row of one is the same row of the other."""
        columns = []
        for name, column in self.columns:
            storage = reading(column.storage, engine)
            values = column.values
            if column.storage == "decimal128":
                values = tuple(_decimal_cell(v) for v in values)
            if storage != column.storage and storage in TEXT_STORAGES:
                values = tuple(text_of(v) for v in values)
            columns.append((name, Column(storage, values)))
        return LogicalTable(tuple(columns), self.chunks, self.nullable)

    # -- engines ------------------------------------------------------------------------------

    def native(self, engine: str) -> Any:
        """This table on ``engine`` (one of :data:`ENGINES`), or :class:`Unrepresentable`."""
        builders: dict[str, Callable[[], Any]] = {
            "pyarrow": self.arrow,
            "pyarrow[parquet]": self.parquet,
            "pandas": lambda: self.pandas(arrow_dtypes=False),
            "pandas[arrow]": lambda: self.pandas(arrow_dtypes=True),
            "polars": self.polars,
            "duckdb": lambda: self.duckdb(bounded=False),
            "duckdb[bounded]": lambda: self.duckdb(bounded=True),
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

    def duckdb(self, *, bounded: bool) -> Any:
        """A DuckDB relation over the Arrow table (its record batches as they are), on a
        connection of its own, which :func:`held` gives dpkit if ``bounded``."""
        import duckdb

        for name, column in self.columns:
            if column.storage == "float16":
                raise Unrepresentable(f"DuckDB has no float16 (the column {name!r})")
        con = duckdb.connect()
        relation = con.from_arrow(self.arrow())
        if bounded:
            _CONNECTIONS[relation] = con
        return relation

    def dask(self, *, convert_string: bool) -> Any:
        """A Dask DataFrame of the pandas frame (NumPy dtypes), one partition per chunk, made
        by ``dd.from_pandas`` with ``dataframe.convert-string`` as given."""
        import dask
        import dask.dataframe as dd

        frame = self.pandas(arrow_dtypes=False)
        if convert_string and any(
            isinstance(v, str) and _unencodable(v)
            for name in frame.columns
            if frame[name].dtype == object
            for v in frame[name]
        ):  # Dask converts lazily, as a partition is computed: its failure would come then
            raise Unrepresentable("Dask's convert-string cannot hold text UTF-8 cannot encode")
        spans = self._spans() or [(0, 0)]
        try:
            with dask.config.set({"dataframe.convert-string": convert_string}):
                parts = [_dask_part(dd, frame.iloc[a:b]) for a, b in spans]
        except Exception as error:  # Dask's own conversion (convert-string) refused a column
            raise Unrepresentable(f"Dask cannot hold this table: {error}") from None
        return parts[0] if len(parts) == 1 else dd.concat(parts)  # type: ignore[no-untyped-call]


def _unencodable(text: str) -> bool:
    """Whether UTF-8 cannot encode ``text`` (a lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


#: The DuckDB relations of ``"duckdb[bounded]"`` (:meth:`LogicalTable.duckdb`), with their
#: connections.
_CONNECTIONS: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


@contextlib.contextmanager
def held(frame: Any) -> Iterator[None]:
    """Within the block, dpkit runs ``frame`` (a table's form on an engine of :data:`ENGINES`)
    as that engine holds it: a relation of ``"duckdb[bounded]"`` with its connection given
    (:func:`dpkit.tables._duckdb.connection`), so that the bounding runs in DuckDB; a
    relation of ``"duckdb"`` bounded in this process as a relation larger than memory is —
    spilled to disk in parts by id (:func:`dpkit.tables._duckdb.bounded_in_parts`), here
    from its fourth row on; any other frame as it is."""
    duckdb = sys.modules.get("duckdb")  # not imported: no relation was made
    relation = duckdb is not None and isinstance(frame, duckdb.DuckDBPyRelation)
    if not relation:
        yield
        return
    from dpkit.tables._duckdb import connection, spilling_after

    con = _CONNECTIONS.get(frame)
    with connection(con) if con is not None else spilling_after(3):
        yield


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


def _decimal_cell(value: Any) -> Any:
    """A decimal as a ``decimal128(38, 2)`` column holds it: at two places, zero unsigned."""
    if is_missing(value):
        return value
    cell = Decimal(value).quantize(_CENT)
    return cell.copy_abs() if cell.is_zero() else cell


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
