"""The adversarial tables of dpkit.testing: one logical table, the same values on every engine.

The table properties (``tests/property/test_table_*.py``) compare engines and neighbours; they
are only as good as these forms: every cell of every storage's pool must read back as itself
(or as missing where it is missing) from PyArrow, Parquet, pandas (NumPy and Arrow dtypes),
Polars and Dask — except where Dask's ``convert-string`` rewrites an object column, which is
what the properties are there to catch — and a neighbour must remove exactly one person's
rows, keeping the chunks in place.

Deterministic (fixed tables; derandomized Hypothesis for the strategies): no false positives.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit.testing.strategies import layouts, logical_tables, public_keys
from dpkit.testing.tables import (
    ENGINES,
    ID,
    STORAGES,
    Column,
    LogicalTable,
    Unrepresentable,
    is_missing,
    key_spellings,
    pool,
    same_value,
)


def _pool_table(storage: str) -> LogicalTable:
    classes, missing = pool(storage)
    cells = tuple(s for spellings in classes for s in spellings) + missing
    return LogicalTable(
        (("c", Column(storage, cells)), ("n", Column("int64", tuple(range(len(cells)))))),
        (0, 2, len(cells) - 2, 0),
    )


def _read(frame: Any, engine: str) -> list[Any]:
    if engine.startswith("pyarrow"):
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
    if is_missing(logical):
        return is_missing(read) or _pandas_missing(read)
    if isinstance(logical, float) and math.copysign(1.0, logical) < 0 and logical == 0:
        return same_value(logical, read)  # −0.0 reads back as a zero
    return same_value(logical, read) and (storage != "object" or type(read) is type(logical))


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
    if engine == "dask[convert-string]" and table.pandas()["c"].dtype == object:
        return  # Dask rewrites a pandas object column as text: what the properties look for
    read = _read(frame, engine)
    logical = table.column("c").values
    wrong = [(a, b) for a, b in zip(logical, read, strict=True) if not _equal(a, b, storage)]
    assert not wrong, f"{storage} on {engine}: {wrong}"


def test_the_arrow_form_has_one_dictionary_per_chunk() -> None:
    table = LogicalTable(
        (("c", Column("dictionary<string>", ("a", "b", "c", "a"))),), chunks=(2, 0, 2)
    )
    chunks = table.arrow().column("c").chunks
    assert [c.dictionary.to_pylist() for c in chunks] == [["a", "b"], [], ["c", "a"]]


def test_a_neighbour_removes_one_person_whatever_its_spelling() -> None:
    table = LogicalTable(
        (
            (ID, Column("object", (1, "1", 1.0, None, True, -0.0, 0))),
            ("v", Column("int64", tuple(range(7)))),
        ),
        chunks=(2, 3, 2),
    )
    assert table.distinct(ID) == [1, "1", -0.0]
    less = table.without_value(ID, True)
    assert less.column("v").values == (1, 3, 5, 6)
    assert less.chunks == (1, 1, 2)
    assert table.without_row(6).chunks == (2, 3, 1)


def test_key_spellings_name_one_value_several_ways() -> None:
    assert key_spellings("1", "string") == ("1", 1)
    assert key_spellings("1.0", "large_string") == ("1.0", 1.0)
    assert key_spellings(2.0**53, "float64") == (2.0**53, 2**53, 2**53 + 1)
    assert 2.0**53 in key_spellings(2**53 + 1, "int64")
    assert key_spellings(True, "bool") == (True,)


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
