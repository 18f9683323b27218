"""The same table queries on pandas, Dask and Spark: identical pre-noise aggregates.

Dask runs on the test session's LocalCluster (2 worker processes), Spark in local mode
(``local[2]``), and Spark Connect as a client of a Connect server in a process of its own
(``local[2]``); all are started by ``tests/conftest.py``. The table has people with more rows
and groups than the declared bounds, missing and extreme values, and every person's rows spread
over several partitions of every engine (checked), so the id-level bounding has work to do and
can only be right if each id's rows are brought together. A variant of the Dask adapter that
bounds each input partition on its own is shown to break the bound.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from dpkit_central import Count, Histogram, Mean, PrivateKeys, Quantile, Sum

import dpkit
from dpkit.tables import as_frame, implementation

# On the Spark session: in the Spark run, one Spark session for the run (tests/conftest.py).
pytestmark = [pytest.mark.cluster, pytest.mark.spark]

N = 3000
UNIT = dpkit.IdUnit("user", max_rows=3, max_groups=2)
ENGINES = ["dask", "spark", "spark_connect"]


def _table() -> pd.DataFrame:
    rng = np.random.default_rng(2026)
    users = rng.integers(0, 250, N)
    minutes = rng.gamma(2.0, 12.0, N)
    minutes[rng.random(N) < 0.05] = np.nan
    minutes[:3] = [np.inf, -np.inf, 1e300]
    table = pd.DataFrame(
        {
            "user": pd.array([f"u{u}" for u in users], dtype=object),
            "city": rng.choice(["Lyon", "Paris", "Lille", "Nantes"], N),
            "minutes": minutes,
            "mode": rng.choice(["bus", "car", "walk", "boat"], N),
        }
    )
    table.loc[5, "user"] = None  # a row without a person: dropped
    return table


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    return _table()


@pytest.fixture(scope="module")
def dask_frame(dask_client: Any, table: pd.DataFrame) -> Any:
    import dask.dataframe as dd

    frame = dd.from_pandas(table, npartitions=4, sort=False)
    spread = frame.map_partitions(lambda p: p[["user"]].drop_duplicates()).compute()
    assert (spread["user"].value_counts() >= 2).mean() > 0.9  # ids in several partitions
    return frame


def _spread_on_spark(session: Any, table: pd.DataFrame, functions: Any) -> Any:
    frame = session.createDataFrame(table).repartition(3)  # round robin: ids spread
    located = frame.withColumn("part", functions.spark_partition_id())
    parts = located.groupBy("user").agg(functions.countDistinct("part").alias("n"))
    assert parts.filter("n >= 2").count() > 0.9 * parts.count()
    return frame


@pytest.fixture(scope="module")
def spark_frame(spark: Any, table: pd.DataFrame) -> Any:
    from pyspark.sql import functions

    return _spread_on_spark(spark, table, functions)


@pytest.fixture(scope="module")
def spark_connect_frame(spark_connect: Any, table: pd.DataFrame) -> Any:
    from pyspark.sql.connect import functions

    frame = _spread_on_spark(spark_connect, table, functions)
    assert implementation(as_frame(frame, owner="test")) == "pyspark_connect"  # not classic
    return frame


def _frame(request: pytest.FixtureRequest, engine: str) -> Any:
    return request.getfixturevalue(f"{engine}_frame")


def _same(first: Any, other: Any) -> None:
    assert first.identical(other), (first, other.values, first.values)


QUERIES = {
    "count": (Count(epsilon=1.0), None),
    "sum": (Sum(lower=0, upper=100, epsilon=1.0), "minutes"),
    "mean": (Mean(lower=0, upper=100, epsilon=1.0, noise="gaussian", delta=1e-6), "minutes"),
    "histogram": (Histogram(categories=("bus", "car", "walk"), epsilon=1.0, other=True), "mode"),
    "quantile": (Quantile(q=0.5, lower=0, upper=100, epsilon=1.0), "minutes"),
}
KEYS = {"public": ["Lyon", "Paris", "Nice"], "private": PrivateKeys(epsilon=1.0, delta=1e-6)}


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("keys", sorted(KEYS))
@pytest.mark.parametrize("name", sorted(QUERIES))
def test_identical_pre_noise_aggregates_with_id_level_bounding(
    request: pytest.FixtureRequest, table: pd.DataFrame, engine: str, name: str, keys: str
) -> None:
    statistic, column = QUERIES[name]
    query = statistic.on(column, by="city", keys=KEYS[keys], unit=UNIT)
    expected = query.aggregate(table, rng=np.random.default_rng(7))
    assert int(np.sum(next(iter(expected.values.values()), [0]))) > 0 or name == "quantile"
    _same(expected, query.aggregate(_frame(request, engine), rng=np.random.default_rng(7)))


@pytest.mark.parametrize("engine", ENGINES)
def test_record_unit_ungrouped_and_two_key_columns(
    request: pytest.FixtureRequest, table: pd.DataFrame, engine: str
) -> None:
    frame = _frame(request, engine)
    queries = [
        Sum(lower=0, upper=100, epsilon=1.0).on("minutes"),
        Quantile(q=0.9, lower=0, upper=100, epsilon=1.0).on("minutes", unit=UNIT),
        Count(epsilon=1.0).on(
            by=("city", "mode"),
            keys=[("Lyon", "bus"), ("Paris", "car"), ("Nice", "bus")],
            unit=UNIT,
        ),
    ]
    for query in queries:
        rng = np.random.default_rng(3)
        _same(query.aggregate(table, rng=rng), query.aggregate(frame, rng=np.random.default_rng(3)))


@pytest.mark.parametrize("engine", ENGINES)
def test_a_session_releases_a_query_on_each_engine(
    request: pytest.FixtureRequest, engine: str, tmp_path: Path
) -> None:
    """End to end on the engine, secure randomness: the spend is recorded with the unit, the
    declared keys come back, the result is a pandas table, and the ledger file holds the
    spend and the released values."""
    query = Sum(lower=0, upper=100, epsilon=0.5).on(
        "minutes", by="city", keys=["Lyon", "Paris", "Nice"], unit=UNIT
    )
    ledger = str(tmp_path / "visits.sqlite")
    with dpkit.Session(budget=(1.0, 0.0), ledger=ledger, dataset="visits") as session:
        released = session.release(query, _frame(request, engine))
        assert released.values.keys == (("Lyon",), ("Paris",), ("Nice",))
        assert released.entry.randomness == "secure"
        assert released.entry.parameters["unit"]["max_rows"] == 3
        assert type(released.values.table()).__module__.split(".")[0] == "pandas"
        assert session.spent.epsilon == 0.5
    (entry,) = dpkit.Ledger(ledger).entries()
    assert entry.release_id == released.entry.release_id and entry.cost == released.entry.cost
    assert entry.result is not None and "pending" not in str(entry.result)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_histogram_of_hundreds_of_categories(
    request: pytest.FixtureRequest, table: pd.DataFrame, engine: str
) -> None:
    """A value's category is one lookup on every engine (narwhals' replace_strict, or on Spark
    Connect the same map lookup, dpkit.tables.positions), not a chain of when-expressions,
    which nests once per category and fails for a few hundred."""
    categories = (*(f"m{i}" for i in range(600)), "walk", "bus")
    query = Histogram(categories=categories, epsilon=1.0, other=True).on(
        "mode", by="city", keys=["Lyon", "Paris"], unit=UNIT
    )
    expected = query.aggregate(table, rng=np.random.default_rng(5))
    assert expected.values["cells"][:, -3:].sum() > 0  # walk, bus and other were counted
    _same(expected, query.aggregate(_frame(request, engine), rng=np.random.default_rng(5)))


def test_bounding_each_input_partition_alone_breaks_the_bound(
    dask_frame: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The adapter's shuffle is what makes the bound hold when an id's rows are spread: the
    real adapter keeps ≤ R rows per (id, group) pair; a variant that bounds every input
    partition without the shuffle keeps up to R per partition, so more than R in all."""
    from dpkit.tables import Bounding, BoundingKey, _dask, as_frame, bound_contributions

    bounding = Bounding("user", ("city",), None, 1, 2, BoundingKey.draw(np.random.default_rng(1)))
    frame = as_frame(dask_frame.dropna(subset=["user"])[["user", "city"]], owner="test")

    def most_rows_per_pair() -> int:
        kept = bound_contributions(frame, bounding).collect().to_native()
        return int(kept.groupby(["user", "city"]).size().max())

    assert most_rows_per_pair() == 1
    monkeypatch.setattr(
        _dask,
        "_by_id",
        lambda native, b: native.map_partitions(
            b.apply, meta={**dict(native.dtypes), "__dpkit_first": "int64"}
        ),
    )
    assert most_rows_per_pair() > 1


@pytest.mark.parametrize("convert", [True, False], ids=["convert-string", "object"])
def test_object_ids_and_keys_are_the_same_rows_on_dask(dask_client: Any, convert: bool) -> None:
    """Attack: a pandas object id column holding 1, 1.0, True and −0.0. pandas read them by
    Python's equality (1, 1.0 and True one person) while ``dd.from_pandas`` with Dask's default
    ``dataframe.convert-string`` made them the texts "1", "1.0", "True": R = 2 rows of that
    person on pandas, 6 on Dask, and private keys spelled as the rows spelled them. An object
    column is now read as text everywhere, so the aggregates are identical whatever Dask's
    setting (deterministic: false-positive rate 0)."""
    import dask
    import dask.dataframe as dd

    spellings = [1, 1.0, True, -0.0, 0, False, "1", 2**53 + 1, float(2**53)]
    table = pd.DataFrame(
        {
            "user": pd.Series(spellings * 4, dtype=object),
            "city": pd.Series([*spellings[1:], spellings[0]] * 4, dtype=object),
            "minutes": np.arange(4 * len(spellings), dtype=np.float64),
        }
    )
    unit = dpkit.IdUnit("user", max_rows=2, max_groups=1)
    queries = [
        Count(epsilon=1.0).on(by="city", keys=PrivateKeys(epsilon=1.0, delta=1e-6), unit=unit),
        Sum(lower=0, upper=50, epsilon=1.0).on("minutes", by="city", keys=[1, "True"], unit=unit),
    ]
    with dask.config.set({"dataframe.convert-string": convert}):
        frame = dd.from_pandas(table, npartitions=3, sort=False)
    assert (str(frame.dtypes["user"]) == "object") is not convert
    for query in queries:
        expected = query.aggregate(table, rng=np.random.default_rng(4))
        _same(expected, query.aggregate(frame, rng=np.random.default_rng(4)))
    keys = queries[0].aggregate(table, rng=np.random.default_rng(4)).keys
    assert all(isinstance(k[0], str) for k in keys) and ("1.0",) in keys
