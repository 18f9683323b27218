"""The adversarial tables of dpkit.testing: one logical table, the same values on every engine.

The table properties (``tests/property/test_table_*.py``) compare engines and neighbours; they
are only as good as these forms: every cell of every storage's pool must read back as itself
(or as missing where it is missing) from PyArrow, Parquet, pandas (NumPy and Arrow dtypes),
Polars, DuckDB (in the type DuckDB reads it as) and Dask — where Dask's ``convert-string`` rewrites an object column, as the text dpkit
reads each of its cells as — and a neighbour must remove exactly one person's rows, keeping
the chunks in place. The model of how dpkit reads a column (:func:`text_of`,
:func:`key_group`) is held to dpkit_central's own rule and to pandas' string conversion.

Deterministic (fixed tables; derandomized Hypothesis for the strategies): no false positives.
"""

from __future__ import annotations

import datetime
import math
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit import InvalidParameter
from dpkit.testing.strategies import layouts, logical_tables, public_keys
from dpkit.testing.tables import (
    ENGINES,
    ID,
    LABEL_STORAGES,
    STORAGES,
    Column,
    LogicalTable,
    Unrepresentable,
    identity,
    is_missing,
    key_group,
    key_spellings,
    pool,
    reading,
    refused_keys,
    same_value,
    text_of,
)

_NFC, _NFD = "\u00e9", "e\u0301"


def _pool_table(storage: str) -> LogicalTable:
    classes, missing = pool(storage)
    cells = tuple(s for spellings in classes for s in spellings) + missing
    return LogicalTable(
        (("c", Column(storage, cells)), ("n", Column("int64", tuple(range(len(cells)))))),
        (0, 2, len(cells) - 2, 0),
    )


def _read(frame: Any, engine: str) -> list[Any]:
    if engine.startswith("duckdb"):
        frame = frame.to_arrow_table()
    if engine.startswith(("pyarrow", "duckdb")):
        return list(frame.column("c").to_pylist())
    if engine.startswith("dask"):
        frame = frame.compute()
    if engine == "polars":
        return list(frame["c"].to_list())
    return [None if _pandas_missing(v) else v for v in frame["c"].tolist()]


def _pandas_missing(value: Any) -> bool:
    import pandas as pd

    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def _equal(logical: Any, read: Any, storage: str) -> bool:
    """``read`` is the cell ``logical`` itself: an equal value (of the same type in an object
    column, where the type is part of the value's text), or missing where it is missing."""
    if is_missing(logical):
        return is_missing(read) or _pandas_missing(read)
    try:
        equal = bool(logical == read)
    except Exception:
        return False
    return equal and (storage != "object" or type(read) is type(logical))


@pytest.mark.parametrize("engine", [e for e in ENGINES if not e.startswith("dask")])
@pytest.mark.parametrize("storage", STORAGES)
def test_every_cell_reads_back_as_itself(storage: str, engine: str) -> None:
    table = _pool_table(storage)
    try:
        frame = table.native(engine)
    except Unrepresentable:
        return
    read = _read(frame, engine)
    logical = table.column("c").values
    assert len(read) == len(logical)
    wrong = [(a, b) for a, b in zip(logical, read, strict=True) if not _equal(a, b, storage)]
    assert not wrong, f"{storage} on {engine}: {wrong}"


@pytest.mark.parametrize("engine", ["duckdb", "duckdb[bounded]"])
@pytest.mark.parametrize("storage", STORAGES)
def test_duckdb_reads_each_storage_as_the_model_says(storage: str, engine: str) -> None:
    """DuckDB's type rules (:func:`~dpkit.testing.tables.reading`): a column of ``storage``
    comes back from the relation as the Arrow type of the storage it is read as (text as
    ``VARCHAR``, bytes as ``BLOB``, an encoded column as its values' type); ``float16`` and
    object columns are unrepresentable."""
    table = _pool_table(storage)
    try:
        frame = table.native(engine)
    except Unrepresentable:
        assert storage in ("object", "float16")
        return
    read = reading(storage, engine)
    expected = LogicalTable((("c", Column(read, ())),), chunks=()).arrow().schema.field("c")
    found = frame.to_arrow_table().schema.field("c")
    assert found.type == expected.type, (storage, read, found.type)


@pytest.mark.cluster
@pytest.mark.parametrize("engine", ["dask", "dask[convert-string]"])
@pytest.mark.parametrize("storage", STORAGES)
def test_dask_frames_read_back_as_their_pandas_frame(
    dask_client: Any, storage: str, engine: str
) -> None:
    table = _pool_table(storage)
    try:
        frame = table.native(engine)
    except Unrepresentable:
        return
    assert frame.npartitions == len(table.chunks)
    read = _read(frame, engine)
    logical = table.column("c").values
    if engine == "dask[convert-string]" and table.pandas()["c"].dtype == object:
        # Dask rewrites a pandas object column as text, by the rule dpkit reads it by
        column = table.read_on(engine).column("c")
        logical, storage = column.values, column.storage
    wrong = [(a, b) for a, b in zip(logical, read, strict=True) if not _equal(a, b, storage)]
    assert not wrong, f"{storage} on {engine}: {wrong}"


def test_the_arrow_form_has_one_dictionary_per_chunk() -> None:
    table = LogicalTable(
        (("c", Column("dictionary<string>", ("a", "b", "c", "a"))),), chunks=(2, 0, 2)
    )
    chunks = table.arrow().column("c").chunks
    assert [c.dictionary.to_pylist() for c in chunks] == [["a", "b"], [], ["c", "a"]]


def test_a_neighbour_removes_one_person_whatever_its_spelling() -> None:
    ids = (1, "1", 1.0, None, True, -0.0, b"1", Decimal("NaN"), np.int64(1))
    table = LogicalTable(
        ((ID, Column("object", ids)), ("v", Column("int64", tuple(range(len(ids)))))),
        chunks=(2, 3, 4),
    )
    # an object column's persons are its texts: "1" (1, "1", b"1", np.int64(1)), "1.0",
    # "True", "-0.0"; None and a NaN decimal are nobody
    assert table.distinct(ID) == [1, 1.0, True, -0.0]
    less = table.without_value(ID, "1")
    assert less.column("v").values == (2, 3, 4, 5, 7)
    assert less.chunks == (0, 3, 2)
    assert table.without_value(ID, True).column("v").values == (0, 1, 2, 3, 5, 6, 7, 8)
    assert table.without_row(8).chunks == (2, 3, 3)


def test_a_typed_column_is_read_in_its_type() -> None:
    assert same_value(-0.0, 0.0, "float32") and same_value(Decimal("-0.00"), 0, "decimal128")
    assert not same_value(2**53, 2**53 + 1, "int64")
    assert not same_value(_NFC, _NFD, "string") and same_value("a", "a", "dictionary<string>")
    assert not same_value(math.nan, math.nan, "float64") and not same_value(None, None, "int8")
    assert identity(1, "object") == "1" and identity(np.float64(-0.0), "object") == "-0.0"


def test_key_spellings_name_one_value_several_ways() -> None:
    assert key_spellings("1", "string") == ("1", 1)
    assert key_spellings("1.0", "large_string") == ("1.0", 1.0)
    assert key_spellings("nan", "string") == ("nan",)  # the key NaN is missing: refused
    assert key_spellings(2.0**53, "float64") == (2.0**53, 2**53, 2**53 + 1)
    assert key_spellings(2**53 + 1, "int64") == (2**53 + 1,)  # 2.0**53 is the integer 2**53
    assert key_spellings(True, "bool") == (True,)
    assert key_spellings(1, "object") == (1, np.int64(1), Fraction(1), Decimal(1), b"1", "1")
    # 1.0 and True equal 1 as Python values, but their texts are "1.0" and "True"
    assert {type(k) for k in key_spellings(1, "object")}.isdisjoint({float, bool, np.bool_})
    assert key_spellings(None, "object") == ()


def test_refused_keys_follow_the_columns_types() -> None:
    assert refused_keys([(1,), ("1",)], ["string"]) == ((1,), ("1",))
    assert refused_keys([(1,), (1.0,)], ["object"]) is None  # "1" and "1.0"
    assert refused_keys([(1,), (b"1",)], ["object"]) == ((1,), (b"1",))
    assert refused_keys([(2**53,), (2**53 + 1,)], ["float64"]) == ((2**53,), (2**53 + 1,))
    assert refused_keys([(2**53,), (2**53 + 1,)], ["int64"]) is None
    assert refused_keys([(1, "a"), (1.0, "b"), (1.0, "a")], ["int8", "string"]) == (
        (1, "a"),
        (1.0, "a"),
    )
    assert refused_keys([("a",), (True,)], ["string"]) == ((True,), None)
    assert refused_keys([(1,)], ["bool"]) == ((1,), None)
    assert refused_keys([(math.nan,)], ["float64"]) == ((math.nan,), None)


#: Cells an object column may hold beyond the pools: the missing values of pandas, undecodable
#: bytes, a value whose text raises, numpy scalars of every kind, fractions, dates.
class _Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no text")

    __format__ = None  # type: ignore[assignment]


def _odd_cells() -> list[Any]:
    import pandas as pd

    return [
        pd.NA,
        pd.NaT,
        np.datetime64("NaT"),
        np.timedelta64("NaT"),
        Decimal("NaN"),
        Decimal("sNaN"),
        Decimal("-0"),
        Decimal("1E+3"),
        b"\xff",
        bytearray(b"1"),
        _Unprintable(),
        np.float16(2.5),
        np.float32(0.1),
        np.int8(-1),
        np.uint64(2**64 - 1),
        np.bool_(False),
        np.str_("x"),
        Fraction(-1, 3),
        1e-7,
        1e22,
        -math.inf,
        complex(1, 2),
        datetime.date(2020, 1, 1),
        datetime.datetime(2020, 1, 1, 0, 0, 1),
        pd.Timestamp("2020-01-01"),
        (1, 2),
    ]


def _object_cells() -> list[Any]:
    classes, missing = pool("object")
    return [*(s for spellings in classes for s in spellings), *missing, *_odd_cells()]


def test_text_of_is_dpkits_reading_of_an_object_column() -> None:
    """The helper's restatement of the rule agrees with dpkit_central's own, value by value."""
    from dpkit.plugin import object_text as as_text

    cells = _object_cells()
    wrong = [(v, text_of(v), as_text(v)) for v in cells if text_of(v) != as_text(v)]
    assert not wrong


def test_text_of_is_pandas_string_conversion() -> None:
    """... and pandas' own conversion to its string dtype (``Series.astype("string")``, what
    Dask's convert-string applies), wherever pandas can convert the value."""
    import pandas as pd

    for value in _object_cells():
        try:
            converted = pd.Series([value], dtype=object).astype("string")[0]
        except Exception:  # pandas cannot convert it: text_of calls it missing
            assert text_of(value) is None, value
            continue
        expected = None if converted is pd.NA else str(converted)
        assert text_of(value) == expected, value


@settings(max_examples=200, derandomize=True, database=None, deadline=None)
@given(
    value=st.one_of(
        st.integers(),
        st.floats(),
        st.decimals(),
        st.fractions(),
        st.text(max_size=4),
        st.binary(max_size=4),
        st.booleans(),
        st.none(),
    )
)
def test_text_of_agrees_with_as_text_on_drawn_values(value: Any) -> None:
    from dpkit.plugin import object_text as as_text

    assert text_of(value) == as_text(value)


@settings(max_examples=200, derandomize=True, database=None, deadline=None)
@given(
    key=st.one_of(
        st.integers(-(2**70), 2**70),
        st.floats(),
        st.text(alphabet="01.e+-infa", max_size=5),
        st.booleans(),
        st.decimals(allow_nan=True),
        st.fractions(),
        st.binary(max_size=2),
        st.none(),
    ),
    storage=st.sampled_from(LABEL_STORAGES),
    duckdb=st.booleans(),
)
def test_key_group_agrees_with_coerce(key: Any, storage: str, duckdb: bool) -> None:
    """The group a key names (or its refusal) is what dpkit_central's coerce gives, on the
    column the storage becomes in PyArrow (object: a pandas object column), or in DuckDB (the
    storage it reads it as)."""
    from dpkit_central.keys import coerce

    from dpkit.tables import as_frame, column_kinds

    table = LogicalTable((("c", Column(storage, ())),), chunks=())
    engine = "pandas" if storage == "object" else "duckdb" if duckdb else "pyarrow"
    if storage == "float16" and duckdb:
        return
    frame = as_frame(table.native(engine), owner="t")
    kind, dtype = column_kinds(frame)["c"], frame.collect_schema()["c"]
    try:
        coerced = coerce(key, kind, "c", dtype)
    except InvalidParameter:
        coerced = None
    assert key_group(key, reading(storage, engine)) == coerced, (key, storage, kind, dtype)


@settings(max_examples=30, derandomize=True, database=None, deadline=None)
@given(data=st.data())
def test_drawn_tables_are_consistent(data: Any) -> None:
    table = data.draw(logical_tables(max_rows=8))
    assert sum(table.chunks) == table.rows
    assert all(len(c.values) == table.rows for _, c in table.columns)
    by = [n for n in table.names if n.startswith("g")]
    if by:
        keys = data.draw(public_keys(table, by))
        width = {1 if len(by) == 1 else len(k) for k in keys}
        assert width == {len(by) if len(by) > 1 else 1}
        assert len(set(map(lambda k: k if len(by) > 1 else (k,), keys))) == len(keys)


@settings(max_examples=30, derandomize=True, database=None, deadline=None)
@given(rows=st.integers(0, 6), data=st.data())
def test_layouts_cut_every_row_once(rows: int, data: Any) -> None:
    chunks = data.draw(layouts(rows))
    assert sum(chunks) == rows and all(c >= 0 for c in chunks)
