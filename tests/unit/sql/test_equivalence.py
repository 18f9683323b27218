"""A SQL statement and the equivalent table queries give the same pre-noise aggregates.

A statement bounds each person's rows once for all its aggregates
(:mod:`dpkit_central.shared_bounding`); its Python equivalent is the ``.on(...)`` queries of
the same statistics bounded together (``query.bound_with(others, frame)``) and each
aggregated over those rows. For every statistic SQL offers, :meth:`SqlQuery.aggregates` on a
pandas, Polars, PyArrow, DuckDB or Parquet input — the contributions bounded in numpy after
DuckDB's per-record steps, or inside DuckDB (``bounding="duckdb"``) — and that Python path
on the pandas frame, with one seed (so one bounding key), must be
:meth:`Aggregates.identical`: the same groups and the same values, bit for bit. The SQL path
adds nothing to a statistic's sensitivity: it is the table query's, on the rows the
statement's WHERE keeps.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dpkit

pd = pytest.importorskip("pandas")
pl = pytest.importorskip("polars")
pa = pytest.importorskip("pyarrow")
duckdb = pytest.importorskip("duckdb")
pytest.importorskip("sqlglot")

OPTIONS = {
    "epsilon": 1.0,
    "delta": 1e-6,
    "privacy_unit_column": "user",
    "max_groups_contributed": 2,
    "max_rows_contributed": 3,
}
UNIT = dpkit.IdUnit("user", max_rows=3, max_groups=2)
#: (SQL aggregate, statistic name, its parameters, the value column, the unit's rows per group)
STATISTICS = [
    ("COUNT(*)", "count", {}, None, 3),
    ("COUNT(minutes)", "count", {}, "minutes", 3),
    ("COUNT(DISTINCT user)", "count", {}, None, 1),
    (
        "SUM(minutes, contribution_bounds_per_group => (0, 100))",
        "sum",
        {"lower": 0, "upper": 100},
        "minutes",
        3,
    ),
    (
        "AVG(minutes, contribution_bounds_per_group => (10, 90))",
        "mean",
        {"lower": 10, "upper": 90},
        "minutes",
        3,
    ),
    (
        "PERCENTILE_CONT(minutes, 0.25, contribution_bounds_per_group => (0, 120))",
        "quantile",
        {"q": 0.25, "lower": 0, "upper": 120},
        "minutes",
        3,
    ),
    (
        "MEDIAN(minutes, contribution_bounds_per_group => (0, 120))",
        "quantile",
        {"q": 0.5, "lower": 0, "upper": 120},
        "minutes",
        3,
    ),
]


def _visits(rows: int = 3000) -> Any:
    rng = np.random.default_rng(11)
    minutes = rng.uniform(-20, 140, rows).round(2)
    minutes[rng.random(rows) < 0.05] = np.nan
    return pd.DataFrame(
        {
            "user": rng.integers(0, 250, rows),
            "city": rng.choice(["Lyon", "Paris", "Nice", "Brest"], rows),
            "minutes": minutes,
        }
    )


def _inputs(frame: Any, tmp_path: Path) -> dict[str, Any]:
    path = tmp_path / "visits.parquet"
    frame.to_parquet(path)
    return {
        "pandas": frame,
        "polars": pl.from_pandas(frame),
        "arrow": pa.Table.from_pandas(frame, preserve_index=False),
        "duckdb": duckdb.connect().from_df(frame),
        "parquet": str(path),
    }


@pytest.mark.parametrize("kind", ["pandas", "polars", "arrow", "duckdb", "parquet"])
@pytest.mark.parametrize(("call", "name", "params", "column", "rows"), STATISTICS)
@pytest.mark.parametrize("keys", ["public", "private"])
@pytest.mark.parametrize("bounding", ["numpy", "duckdb"])
def test_sql_and_the_table_query_aggregate_alike(
    tmp_path: Path,
    bounding: str,
    kind: str,
    call: str,
    name: str,
    params: dict[str, Any],
    column: str | None,
    rows: int,
    keys: str,
) -> None:
    frame = _visits()
    table = _inputs(frame, tmp_path)[kind]
    public = ["Lyon", "Paris", "Rome"] if keys == "public" else None
    query = dpkit.sql(
        f"SELECT city, {call} AS value FROM visits GROUP BY city",
        tables={"visits": table},
        options=OPTIONS,
        keys=public,
        bounding=bounding,
    )
    registry = dpkit.get_registry()
    statistic = registry.query(name, epsilon=0.5, **params)
    unit = dpkit.IdUnit("user", max_rows=rows, max_groups=2)
    key_spec: Any = public if public is not None else {"epsilon": 0.5, "delta": 1e-6}
    reference = statistic.on(column, by="city", keys=key_spec, unit=unit)
    bounded = reference.bound_with([], frame, rng=np.random.default_rng(5))
    expected = bounded.aggregate(reference)
    (found,) = query.aggregates(rng=np.random.default_rng(5))
    assert found.identical(expected), (found.values, expected.values)


def test_a_where_clause_is_the_same_rows_filtered_first(tmp_path: Path) -> None:
    frame = _visits()
    query = dpkit.sql(
        "SELECT city, SUM(minutes, contribution_bounds_per_group => (0, 100)) FROM visits "
        "WHERE minutes > 30 AND city <> 'Nice' GROUP BY city",
        tables={"visits": frame},
        options=OPTIONS,
        keys=["Lyon", "Paris"],
    )
    kept = frame[(frame.minutes > 30) & (frame.city != "Nice")]
    statistic = dpkit.get_registry().query("sum", epsilon=1.0, lower=0, upper=100)
    reference = statistic.on("minutes", by="city", keys=["Lyon", "Paris"], unit=UNIT)
    expected = reference.bound_with([], kept, rng=np.random.default_rng(8)).aggregate(reference)
    (found,) = query.aggregates(rng=np.random.default_rng(8))
    assert found.identical(expected)


@pytest.mark.parametrize("kind", ["pandas", "arrow", "duckdb"])
@pytest.mark.parametrize("bounding", ["numpy", "duckdb"])
def test_a_spread_is_a_count_and_two_centred_sums(tmp_path: Path, kind: str, bounding: str) -> None:
    """VAR_POP (and every variance and standard deviation) releases three table queries' answers:
    with x clamped to [L, U], m = (L + U)/2 and r = (U − L)/2, the count of the values, the
    sum of x − m within (−r, r) and the sum of (x − m)² within (0, r²) — each identical to the
    table query on the same column computed in pandas."""
    frame = _visits()
    lower, upper = -10.0, 110.0
    middle, half = (lower + upper) / 2, (upper - lower) / 2
    query = dpkit.sql(
        "SELECT city, VAR_POP(minutes, contribution_bounds_per_group => (-10, 110)) AS v "
        "FROM visits GROUP BY city",
        tables={"visits": _inputs(frame, tmp_path)[kind]},
        options=OPTIONS,
        keys=["Lyon", "Paris", "Rome"],
        bounding=bounding,
    )
    centred = frame.minutes - middle
    derived = frame.assign(centred=centred, square=centred.clip(-half, half) ** 2)
    registry = dpkit.get_registry()
    references = [
        (registry.query("count", epsilon=0.5), "square"),
        (registry.query("sum", epsilon=0.5, lower=-half, upper=half), "centred"),
        (registry.query("sum", epsilon=0.5, lower=0.0, upper=half * half), "square"),
    ]
    found = query.aggregates(rng=np.random.default_rng(6))
    assert len(found) == 3
    queries = [
        statistic.on(column, by="city", keys=["Lyon", "Paris", "Rome"], unit=UNIT)
        for statistic, column in references
    ]
    bounded = queries[0].bound_with(queries[1:], derived, rng=np.random.default_rng(6))
    for query, aggregates in zip(queries, found, strict=True):
        expected = bounded.aggregate(query)
        assert aggregates.identical(expected), (query.column, aggregates.values, expected.values)


@pytest.mark.parametrize("bounding", ["numpy", "duckdb"])
def test_object_columns_are_the_same_people_and_groups_as_in_the_table_queries(
    bounding: str,
) -> None:
    """A pandas ``object`` column is read as text by the table queries' rule (a missing value
    missing, bytes their UTF-8 text: ``1``, ``"1"`` and ``b"1"`` one person), so that each
    spelling of dpkit's adversarial object pool, and each of its missing values, is the same
    person and the same group in SQL as in Python: one person is never bounded as two."""
    from dpkit.testing.tables import pool

    classes, missing = pool("object")
    spellings = [*(s for spelled in classes for s in spelled), *missing, pd.NA, pd.NaT]
    rng = np.random.default_rng(3)
    rows = 200
    cells = np.empty((2, rows), dtype=object)
    for index in np.ndindex(cells.shape):
        cells[index] = spellings[rng.integers(len(spellings))]
    frame = pd.DataFrame({"user": cells[0], "city": cells[1]})
    options = {**OPTIONS, "max_rows_contributed": 1, "max_groups_contributed": 1}
    query = dpkit.sql(
        "SELECT city, COUNT(*) FROM visits GROUP BY city",
        tables={"visits": frame},
        options=options,
        bounding=bounding,
    )
    counter = dpkit.get_registry().query("count", epsilon=0.5)
    unit = dpkit.IdUnit("user", max_rows=1, max_groups=1)
    reference = counter.on(None, by="city", keys={"epsilon": 0.5, "delta": 1e-6}, unit=unit)
    expected = reference.bound_with([], frame, rng=np.random.default_rng(5)).aggregate(reference)
    (found,) = query.aggregates(rng=np.random.default_rng(5))
    assert found.identical(expected), (found.keys, expected.keys)
