"""Defects of the table layer that the table properties (``tests/property/test_table_*.py``)
found and that are not fixed yet, each pinned by its smallest example.

Each test states what dpkit should do and is a strict xfail: it fails today with the exception
named in ``raises``, and once the defect is fixed it passes — which a strict xfail reports as a
failure, so the fix must delete the pin here *and* the defect's line in
``tests/support/table_cases.py`` (``open_defect``), giving the properties those examples back.

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


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="pandas Arrow dtypes are not decoded as PyArrow tables are (plain_arrow): a run-end "
    "encoded id column is of kind 'other' and its missing ids are not dropped",
)
def test_a_run_end_encoded_id_column_on_pandas_drops_missing_ids() -> None:
    table = pa.table({"id": pc.run_end_encode(pa.array([None, "a"], pa.string()))})
    query = Count(epsilon=1.0).on(unit=dpkit.IdUnit("id", max_rows=1))
    assert _counts(query, table, table.to_pandas(types_mapper=pd.ArrowDtype)) == [[1], [1]]


@pytest.mark.xfail(
    strict=True,
    raises=pa.ArrowNotImplementedError,
    reason="pandas Arrow dtypes are not decoded: Arrow has no take kernel for a view type, so "
    "bounding a binary_view id column fails after the spend once an id has two rows",
)
def test_a_binary_view_id_column_on_pandas_releases() -> None:
    table = pa.table({"id": pa.array([b"a", b"a"], pa.binary_view()), "v": [1.0, 2.0]})
    query = Sum(lower=0, upper=5, epsilon=1.0).on("v", unit=dpkit.IdUnit("id", max_rows=1))
    query.aggregate(table.to_pandas(types_mapper=pd.ArrowDtype), rng=np.random.default_rng(0))


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="pandas Arrow dtypes are not decoded: is_nan of a halffloat[pyarrow] column is true "
    "for every value, so a count that drops missing values drops every row",
)
def test_a_float16_column_on_pandas_keeps_its_values() -> None:
    table = pa.table({"v": pa.array(np.array([1.0, np.nan], np.float16))})
    query = Count(epsilon=1.0).on("v")
    assert _counts(query, table, table.to_pandas(types_mapper=pd.ArrowDtype)) == [[1], [1]]


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="a pandas categorical of numbers (a dictionary of int64 in pandas, with NumPy or "
    "Arrow dtypes) is of kind text: number keys are matched as text and match no row",
)
@pytest.mark.parametrize("arrow_dtypes", [False, True])
def test_a_categorical_of_numbers_matches_number_keys(arrow_dtypes: bool) -> None:
    table = pa.table({"g": pa.array([1, 2, 1], pa.int64()).dictionary_encode()})
    frame = table.to_pandas(types_mapper=pd.ArrowDtype if arrow_dtypes else None)
    query = Count(epsilon=1.0).on(by="g", keys=[1, 2])
    assert _counts(query, table, frame) == [[2, 1], [2, 1]]


@pytest.mark.xfail(
    strict=True,
    raises=pa.ArrowInvalid,
    reason="Arrow's safe cast of an integer beyond 2**53 to float64 raises after the spend "
    "(a release that fails or not as one person's value is beyond 2**53)",
)
@pytest.mark.parametrize("arrow_type", [pa.int64(), pa.uint64()])
def test_integers_beyond_the_floats_release_on_pyarrow(arrow_type: Any) -> None:
    table = pa.table({"v": pa.array([2**53 + 1, 1], arrow_type)})
    query = Sum(lower=0, upper=10, epsilon=1.0).on("v")
    query.check_input(table)
    query.aggregate(table, rng=np.random.default_rng(0))


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="PyArrow matches a float column's -0.0 to no histogram category 0 (pandas and "
    "Polars do; 0.0 and -0.0 are one value)",
)
def test_negative_zero_is_the_category_zero_on_pyarrow() -> None:
    table = pa.table({"v": pa.array([-0.0, 0.0])})
    query = Histogram(categories=[0], epsilon=1.0).on("v")
    found = query.aggregate(table, rng=np.random.default_rng(0)).values["cells"].tolist()
    assert found == [[2]]
