"""The same table query on pandas, Polars and PyArrow inputs: identical pre-noise aggregates
(counts, exact fixed-point sums, cells, ids per group, quantile lattice cells), results back as a table of the
input's kind, and odd dtypes and missing values handled record by record."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest
from dpkit_central import Count, Histogram, Mean, PrivateKeys, Quantile, Sum

import dpkit

N = 3000


def _data() -> dict[str, Any]:
    rng = np.random.default_rng(2026)
    minutes = rng.gamma(2.0, 12.0, N)
    minutes[rng.random(N) < 0.05] = np.nan
    minutes[:3] = [np.inf, -np.inf, 1e300]
    return {
        "user": rng.integers(0, 400, N),
        "city": rng.choice(["Lyon", "Paris", "Lille", "Nantes"], N),
        "minutes": minutes,
        "mode": rng.choice(["bus", "car", "walk", "boat"], N),
    }


BACKENDS = {
    "pandas": pd.DataFrame,
    "polars": pl.DataFrame,
    "pyarrow": pa.table,
}

QUERIES = {
    "count": (Count(epsilon=1.0), None),
    "count_column": (Count(epsilon=1.0), "minutes"),
    "sum": (Sum(lower=0, upper=100, epsilon=1.0), "minutes"),
    "mean": (Mean(lower=0, upper=100, epsilon=1.0, noise="gaussian", delta=1e-6), "minutes"),
    "histogram": (Histogram(categories=("bus", "car", "walk"), epsilon=1.0, other=True), "mode"),
    "quantile": (Quantile(q=0.5, lower=0, upper=100, epsilon=1.0), "minutes"),
}
KEYS = {
    "public": ["Lyon", "Paris", "Nice"],
    "private": PrivateKeys(epsilon=1.0, delta=1e-6),
    "none": None,
}


def _same(first: Any, other: Any) -> None:
    assert first.identical(other), (first, other.values, first.values)


@pytest.mark.parametrize("keys", sorted(KEYS))
@pytest.mark.parametrize("name", sorted(QUERIES))
@pytest.mark.parametrize("unit", ["record", "id"])
def test_identical_aggregates_on_pandas_polars_and_pyarrow(name: str, keys: str, unit: str) -> None:
    statistic, column = QUERIES[name]
    by = () if keys == "none" else ("city",)
    query = statistic.on(
        column,
        by=by,
        keys=KEYS[keys],
        unit=dpkit.IdUnit("user", max_rows=3, max_groups=2) if unit == "id" else None,
    )
    data = _data()
    found = {
        backend: query.aggregate(make(data), rng=np.random.default_rng(7))
        for backend, make in BACKENDS.items()
    }
    for backend in ("polars", "pyarrow"):
        _same(found["pandas"], found[backend])
    lazy = query.aggregate(pl.LazyFrame(data), rng=np.random.default_rng(7))
    _same(found["pandas"], lazy)


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_results_come_back_as_a_table_of_the_same_kind(backend: str) -> None:
    make = BACKENDS[backend]
    query = Sum(lower=0, upper=100, epsilon=1.0).on(
        "minutes", by="city", keys=["Lyon", "Paris", "Nice"]
    )
    result = query.run(make(_data()), rng=np.random.default_rng(1))
    table = result.table()
    assert type(table).__module__.split(".")[0] == backend
    frame = pl.from_pandas(table) if backend == "pandas" else pl.DataFrame(table)
    assert frame.columns == ["city", "value", "noise_scale", "ci_lower", "ci_upper", "ci_method"]
    assert frame["city"].to_list() == ["Lyon", "Paris", "Nice"]
    half = result.noise_half_width(0.95)
    assert np.allclose(frame["ci_upper"] - frame["value"], half)


def test_odd_dtypes_and_missing_values() -> None:
    """Nullable integers with NA, a categorical key column, an object value column mixing
    numbers, text and None, booleans: each record is converted on its own, never an error."""
    table = pd.DataFrame(
        {
            "user": pd.array([1, 1, 2, None, 3, 4], dtype="Int64"),
            "city": pd.Categorical(["a", "a", "b", "a", None, "b"]),
            "amount": pd.Series([1.5, "x", None, 4.0, 5.0, True], dtype=object),
            "flag": [True, False, True, True, False, True],
        }
    )
    unit = dpkit.IdUnit("user", max_rows=5, max_groups=2)
    aggregates = (
        Sum(lower=0, upper=10, epsilon=1.0)
        .on("amount", by="city", keys=["a", "b"], unit=unit)
        .aggregate(table, rng=np.random.default_rng(0))
    )
    # a: user 1 (1.5; "x" missing), the row without a user dropped; b: user 2 (None) and 4 (True)
    assert aggregates.values["sum"].tolist() == pytest.approx([1.5, 1.0])
    flags = Sum(lower=0, upper=1, epsilon=1.0).on("flag", by="city", keys=["a", "b"])
    assert flags.aggregate(table).values["sum"].tolist() == [2.0, 2.0]  # the missing city dropped
    session = dpkit.Session(budget=(10, 0), ledger=":memory:")
    released = session.release(
        Count(epsilon=1.0).on("amount", by="city", keys=["a", "b"], unit=unit), table
    )
    assert released.values.keys == (("a",), ("b",))


def test_public_keys_of_another_type_are_refused_before_the_spend() -> None:
    table = pd.DataFrame({"age": [30, 40], "x": [1.0, 2.0]})
    session = dpkit.Session(budget=(10, 0), ledger=":memory:")
    with pytest.raises(dpkit.InvalidParameter, match="numbers for the number column 'age'"):
        session.release(Sum(lower=0, upper=5, epsilon=1.0).on("x", by="age", keys=["30"]), table)
    with pytest.raises(dpkit.InvalidData, match="value column 'nope' is not in the table"):
        session.release(Sum(lower=0, upper=5, epsilon=1.0).on("nope"), table)
    with pytest.raises(dpkit.InvalidData, match="must hold number or boolean or object"):
        session.release(
            Sum(lower=0, upper=5, epsilon=1.0).on("x"),
            table.assign(x=["a", "b"]).astype({"x": "string"}),
        )
    assert session.spent.epsilon == 0


def _repeated(engine: str) -> Any:
    """A table whose two columns are both named 'amount'."""
    frame = pd.DataFrame([[1.0, 2.0], [3.0, 4.0]], columns=["amount", "amount"])
    if engine == "pyarrow":
        return pa.table([pa.array([1.0, 3.0]), pa.array([2.0, 4.0])], names=["amount", "amount"])
    if engine == "dask":
        import dask.dataframe as dd

        return dd.from_pandas(frame, npartitions=1)
    return frame


@pytest.mark.parametrize("engine", ["pandas", "pyarrow", "dask"])
def test_a_repeated_column_name_is_refused_before_the_spend(engine: str) -> None:
    """Which 'amount' would be summed? The table is refused in the public phase, naming the
    column (names are public), as dpkit's own error; nothing is spent."""
    table = _repeated(engine)
    session = dpkit.Session(budget=(10, 0), ledger=":memory:")
    with pytest.raises(dpkit.InvalidData, match="2 columns named 'amount'"):
        session.release(Sum(lower=0, upper=5, epsilon=1.0).on("amount"), table)
    assert session.spent.epsilon == 0
