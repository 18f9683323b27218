"""Tables read alike on every engine, by the smallest examples the table properties
(``tests/property/test_table_*.py``) found where they did not: pandas' Arrow dtypes and
categoricals decoded as a PyArrow table's columns are (``dpkit.tables.frame.plain_pandas``),
integers beyond 2⁵³ read as float64 without Arrow's safe cast failing after the spend, and
−0.0 the histogram category 0 on PyArrow.

Deterministic (fixed tables and seeds): no false positives.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from dpkit_central import Count, Histogram, Sum

import dpkit


def _counts(query: Any, *tables: Any) -> list[list[int]]:
    return [
        query.aggregate(table, rng=np.random.default_rng(0)).values["count"].tolist()
        for table in tables
    ]


def test_a_run_end_encoded_id_column_on_pandas_drops_missing_ids() -> None:
    table = pa.table({"id": pc.run_end_encode(pa.array([None, "a"], pa.string()))})
    query = Count(epsilon=1.0).on(unit=dpkit.IdUnit("id", max_rows=1))
    assert _counts(query, table, table.to_pandas(types_mapper=pd.ArrowDtype)) == [[1], [1]]


def test_a_binary_view_id_column_on_pandas_releases() -> None:
    table = pa.table({"id": pa.array([b"a", b"a"], pa.binary_view()), "v": [1.0, 2.0]})
    query = Sum(lower=0, upper=5, epsilon=1.0).on("v", unit=dpkit.IdUnit("id", max_rows=1))
    query.aggregate(table.to_pandas(types_mapper=pd.ArrowDtype), rng=np.random.default_rng(0))


def test_a_float16_column_on_pandas_keeps_its_values() -> None:
    table = pa.table({"v": pa.array(np.array([1.0, np.nan], np.float16))})
    query = Count(epsilon=1.0).on("v")
    assert _counts(query, table, table.to_pandas(types_mapper=pd.ArrowDtype)) == [[1], [1]]


@pytest.mark.parametrize("arrow_dtypes", [False, True])
def test_a_categorical_of_numbers_matches_number_keys(arrow_dtypes: bool) -> None:
    table = pa.table({"g": pa.array([1, 2, 1], pa.int64()).dictionary_encode()})
    frame = table.to_pandas(types_mapper=pd.ArrowDtype if arrow_dtypes else None)
    query = Count(epsilon=1.0).on(by="g", keys=[1, 2])
    assert _counts(query, table, frame) == [[2, 1], [2, 1]]


@pytest.mark.parametrize("arrow_dtypes", [False, True])
@pytest.mark.parametrize("arrow_type", [pa.int64(), pa.uint64()])
def test_integers_beyond_the_floats_release_on_pyarrow(arrow_type: Any, arrow_dtypes: bool) -> None:
    table = pa.table({"v": pa.array([2**53 + 1, 1], arrow_type)})
    frame = table.to_pandas(types_mapper=pd.ArrowDtype) if arrow_dtypes else table
    query = Sum(lower=0, upper=10, epsilon=1.0).on("v")
    query.check_input(frame)
    query.aggregate(frame, rng=np.random.default_rng(0))


def test_a_64_bit_integer_is_read_as_its_nearest_double_on_every_engine() -> None:
    """x = h·2³² + l, each half exact: the sum rounds once, as a C cast (ties to even)."""
    from dpkit_central.records import VALUE, numeric_value

    from dpkit.tables import as_frame, narwhals

    nw = narwhals()
    values = [2**53 + 1, 2**53 + 3, 2**63 - 1, -(2**63), -(2**53) - 1, 7, -7]
    table = pa.table({"v": pa.array(values, pa.int64())})
    for frame in (table, table.to_pandas(), table.to_pandas(types_mapper=pd.ArrowDtype)):
        read = numeric_value(nw, as_frame(frame, owner="t"), "v", "number")
        assert read.get_column(VALUE).to_list() == [float(v) for v in values]


def test_negative_zero_is_the_category_zero_on_pyarrow() -> None:
    table = pa.table({"v": pa.array([-0.0, 0.0])})
    query = Histogram(categories=[0], epsilon=1.0).on("v")
    found = query.aggregate(table, rng=np.random.default_rng(0)).values["cells"].tolist()
    assert found == [[2]]
