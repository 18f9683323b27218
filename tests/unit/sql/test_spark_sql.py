"""A SQL statement on a Spark DataFrame runs in Spark (:mod:`dpkit.sql_statements.spark`):
the same pre-noise aggregates as on DuckDB, total after the spend though Spark 4 raises on
bad values in ANSI mode, and refused before the spend where DuckDB refuses.

Deterministic (fixed tables and seeds): no false positives.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import dpkit

pd = pytest.importorskip("pandas")
pytest.importorskip("duckdb")
pytest.importorskip("sqlglot")
pytest.importorskip("pyspark")

pytestmark = [pytest.mark.cluster, pytest.mark.spark]

OPTIONS = {
    "epsilon": 1.0,
    "delta": 1e-6,
    "privacy_unit_column": "user",
    "max_groups_contributed": 2,
    "max_rows_contributed": 3,
}


def _visits() -> Any:
    """200 rows of 40 people (5 rows each on average: bounding drops some), a few missing."""
    rng = np.random.default_rng(3)
    minutes = rng.uniform(-20, 140, 200).round(2)
    minutes[rng.random(200) < 0.05] = np.nan
    return pd.DataFrame(
        {
            "user": rng.integers(0, 40, 200),
            "city": rng.choice(["Lyon", "Paris", "Nice", "Brest"], 200),
            "minutes": minutes,
        }
    )


def _both(statement: str, frame: Any, spark: Any, **beside: Any) -> tuple[Any, Any]:
    """The statement on the pandas frame (DuckDB) and on the same rows as a Spark DataFrame."""
    here = dpkit.sql(statement, tables={"t": frame}, options=OPTIONS, **beside)
    there = dpkit.sql(
        statement, tables={"t": spark.createDataFrame(frame)}, options=OPTIONS, **beside
    )
    return here, there


def test_the_aggregates_on_spark_are_those_on_duckdb(spark: Any) -> None:
    """COUNT(*), a bounded SUM and an AVG by city with public keys: with one seed (so one
    bounding key) every aggregate is identical, bit for bit, on both engines."""
    frame = _visits()
    duck, on_spark = _both(
        "SELECT city, COUNT(*) AS n, SUM(minutes, contribution_bounds_per_group => (0, 100)) AS s,"
        " AVG(minutes, contribution_bounds_per_group => (10, 90)) AS m FROM t "
        "WHERE minutes > 0 GROUP BY city",
        frame,
        spark,
        keys=["Lyon", "Paris", "Nice", "Rome"],
    )
    expected = duck.aggregates(rng=np.random.default_rng(5))
    found = on_spark.aggregates(rng=np.random.default_rng(5))
    assert len(found) == len(expected) == 3
    for a, b in zip(found, expected, strict=True):
        assert a.identical(b), (a.values, b.values)
    kept = frame[(frame.minutes > 0) & frame.city.isin(["Lyon", "Paris", "Nice"])]
    assert 0 < expected[0].values["count"].sum() < len(kept)  # the bounding dropped rows


@pytest.mark.parametrize("engine", ["spark", "spark_connect"])
def test_values_ansi_spark_raises_on_are_null_as_in_duckdb(
    request: pytest.FixtureRequest, engine: str
) -> None:
    """A text column cast to an integer (a value 'x'), a division by a zero value and an
    integer overflow each raise in Spark's ANSI mode, and a LIKE pattern ending in a backslash
    raises in any mode (shown first); released on Spark, the
    statement completes after its spend, with the aggregates DuckDB's TRY gives, and the
    session's ANSI setting is as it was. On Spark Connect too, where the plan is analysed on
    the server only when it runs (so the setting must cover the aggregation, not only the
    statement's construction)."""
    spark = request.getfixturevalue(engine)
    rng = np.random.default_rng(4)
    frame = pd.DataFrame(
        {
            "user": rng.integers(0, 30, 120),
            "code": rng.choice(["12", "x", "7", "-3", ""], 120),
            "divisor": rng.integers(0, 3, 120),
            "big": rng.choice(np.array([1, 2**62], dtype=np.int64), 120),
            "pattern": rng.choice(["1%", "\\", "%\\x", "_", "%"], 120),
        }
    )
    table = spark.createDataFrame(frame)
    assert spark.conf.get("spark.sql.ansi.enabled") == "true"
    failing = ("CAST(code AS INT)", "divisor DIV divisor", "big * 4", "code LIKE pattern")
    for expression in failing:
        with pytest.raises(Exception, match=r"CAST_INVALID_INPUT|DIVIDE_BY_ZERO|OVERFLOW|ESC_"):
            table.selectExpr(expression).collect()
    statement = (
        "SELECT COUNT(CAST(code AS INT)) AS n, "
        "SUM(CAST(code AS INT) / divisor, contribution_bounds_per_group => (-10, 10)) AS s, "
        "SUM(CAST(code AS INT) // divisor, contribution_bounds_per_group => (-10, 10)) AS d, "
        "COUNT(big * 4) AS b, COUNT(CASE WHEN (code || pattern) LIKE pattern THEN 1 END) AS l "
        "FROM t WHERE CAST(code AS INT) % divisor >= 0"
    )
    options = {"epsilon": 1.0, "privacy_unit_column": "user", "max_rows_contributed": 2}
    duck = dpkit.sql(statement, tables={"t": frame}, options=options)
    on_spark = dpkit.sql(statement, tables={"t": table}, options=options)
    with dpkit.Session(budget=(1.0, 0.0)) as session:
        release = session.release(on_spark, None, rng=np.random.default_rng(0))
        assert session.spent.epsilon == pytest.approx(1.0)
    assert len(release.values.rows) == 1
    expected = duck.aggregates(rng=np.random.default_rng(6))
    found = on_spark.aggregates(rng=np.random.default_rng(6))
    for a, b in zip(found, expected, strict=True):
        assert a.identical(b), (a.values, b.values)
    # The overflowing products are NULL, not counted, and a pattern's backslash matches
    # itself (deterministic: fixed seeds).
    assert 0 < expected[3].values["count"][0] < expected[0].values["count"][0]
    assert expected[4].values["count"][0] > 0
    assert spark.conf.get("spark.sql.ansi.enabled") == "true"


def test_overlapping_statements_keep_ansi_mode_off_until_the_last_one_ends(spark: Any) -> None:
    """Two statements' blocks on one session, the first ending while the second still runs
    (two threads releasing at once): ANSI mode stays off until the second ends — switched on
    under it, its bad values would raise after its spend — and is then as it was, also when
    a block ends by an exception."""
    from dpkit.sql_statements.spark import ANSI, ansi_off

    first, second = ansi_off(spark), ansi_off(spark)
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    assert spark.conf.get(ANSI) == "false"
    second.__exit__(None, None, None)
    assert spark.conf.get(ANSI) == "true"
    with pytest.raises(KeyError), ansi_off(spark):
        raise KeyError
    assert spark.conf.get(ANSI) == "true"


@pytest.mark.parametrize(
    ("statement", "clause"),
    [
        (
            "SELECT city, SUM(hours, contribution_bounds_per_group => (0, 1)) FROM t GROUP BY city",
            "column",
        ),
        ("SELECT city, COUNT(minutes + DATE '2020-01-01') FROM t GROUP BY city", "expression"),
        (
            "SELECT COUNT(*) FROM t WHERE strftime(DATE '2020-01-01' + CAST(user AS INTEGER), 'qqqqqq') <> ''",
            "expression",
        ),
    ],
)
def test_a_statement_is_refused_on_spark_before_the_spend(
    spark: Any, statement: str, clause: str
) -> None:
    """A missing column and a type error are refused before anything is spent, with DuckDB's
    error type, clause and position; a date format Spark cannot read (DuckDB writes the
    letters as they are) is refused on Spark before the spend."""
    frame = _visits()
    beside = {"keys": ["Lyon", "Paris"]} if "GROUP BY" in statement else {}
    duck, on_spark = _both(statement, frame, spark, **beside)
    with dpkit.Session(budget=(5.0, 1e-5)) as session:
        with pytest.raises(dpkit.SqlError) as raised:
            session.release(on_spark, None, rng=np.random.default_rng(0))
        assert session.spent.epsilon == 0 and not session.history()
    assert raised.value.clause == clause, str(raised.value)
    if clause in ("column", "expression") and "strftime" not in statement:
        with pytest.raises(dpkit.SqlError) as on_duckdb:
            duck.check_input(None)
        assert (on_duckdb.value.clause, on_duckdb.value.line, on_duckdb.value.column) == (
            raised.value.clause,
            raised.value.line,
            raised.value.column,
        )


#: Brest is in no region (the LEFT join keeps its rows, region NULL); Nice has no rate for
#: 2024 (the INNER join drops those rows). Each key is unique in its table.
REGIONS = pd.DataFrame(
    {"city": ["Lyon", "Paris", "Nice", "Rome"], "region": ["ARA", "IDF", "PACA", "LAZ"],
     "weight": [1.5, 0.5, 2.0, 9.0]}
)  # fmt: skip
RATES = pd.DataFrame(
    {"city": ["Lyon", "Lyon", "Paris", "Paris", "Nice", "Brest", "Brest"],
     "year": [2023, 2024, 2023, 2024, 2023, 2023, 2024],
     "rate": [1.0, 1.1, 2.0, 2.2, 3.0, 0.5, 0.7]}
)  # fmt: skip


@pytest.mark.parametrize("engine", ["spark", "spark_connect"])
def test_a_join_with_public_tables_on_spark_gives_duckdbs_aggregates(
    request: pytest.FixtureRequest, engine: str
) -> None:
    """A LEFT join USING a column, with a public table given as a Spark DataFrame of the
    session, then an INNER join ON a two-column key, with a pandas public table, filtered on
    a public column: with one seed, every aggregate is identical, bit for bit, to DuckDB's
    on the same rows (the public tables given to DuckDB as pandas frames)."""
    spark = request.getfixturevalue(engine)
    rng = np.random.default_rng(8)
    frame = _visits().assign(year=rng.choice([2023, 2024], 200))
    statement = (
        "SELECT v.city, COUNT(*) AS n, SUM(v.minutes * r.weight, "
        "contribution_bounds_per_group => (0, 150)) AS s "
        "FROM t AS v LEFT JOIN regions AS r USING (city) "
        "JOIN rates AS x ON v.city = x.city AND x.year = v.year WHERE x.rate > 0.6 GROUP BY v.city"
    )
    keys = ["Lyon", "Paris", "Nice", "Brest"]
    duck = dpkit.sql(
        statement,
        tables={"t": frame},
        public={"regions": REGIONS, "rates": RATES},
        options=OPTIONS,
        keys=keys,
    )
    on_spark = dpkit.sql(
        statement,
        tables={"t": spark.createDataFrame(frame)},
        public={"regions": spark.createDataFrame(REGIONS), "rates": RATES},
        options=OPTIONS,
        keys=keys,
    )
    on_spark.check_input(None)
    expected = duck.aggregates(rng=np.random.default_rng(2))
    found = on_spark.aggregates(rng=np.random.default_rng(2))
    assert len(found) == len(expected) == 2
    for a, b in zip(found, expected, strict=True):
        assert a.identical(b), (a.values, b.values)
    count, weighted = expected[0].values["count"], expected[1].values["sum"]
    assert count[3] > 0 and weighted[3] == 0  # Brest: kept by the LEFT join, with no weight
    assert np.all(weighted[:3] > 0)


@pytest.mark.parametrize(
    ("public", "words"),
    [
        ("pandas", "repeats a value of its join key"),
        ("spark", "repeats a value of its join key"),
        ("another session", "another session"),
        ("map key", "does not apply to the tables' column types on Spark"),
    ],
)
def test_a_join_spark_cannot_release_is_refused_before_the_spend(
    request: pytest.FixtureRequest, spark: Any, public: str, words: str
) -> None:
    """A public key that repeats a value (given as pandas or as a Spark DataFrame), a public
    Spark DataFrame of another session (Spark Connect's, for a classic private frame), and a
    key of a type Spark cannot compare (a map, which DuckDB's check lets through) are
    refused in the public phase, before anything is spent, naming the JOIN where it is
    written. The private phase joins only the public rows whose key is unique."""
    pa = pytest.importorskip("pyarrow")
    repeated = pd.concat([REGIONS, REGIONS.iloc[:1]], ignore_index=True)
    frame = spark.createDataFrame(_visits())
    statement = "SELECT COUNT(*) FROM t JOIN regions USING (city)"
    if public == "pandas":
        table: Any = repeated
    elif public == "spark":
        table = spark.createDataFrame(repeated)
    elif public == "another session":
        table = request.getfixturevalue("spark_connect").createDataFrame(REGIONS)
    else:
        from pyspark.sql import types

        key = types.MapType(types.StringType(), types.LongType())
        frame = spark.createDataFrame(
            [(1, {"a": 1})],
            types.StructType([types.StructField("user", types.LongType()),
                              types.StructField("city", key)]),
        )  # fmt: skip
        table = pa.table({"city": pa.array([[("a", 1)]], pa.map_(pa.string(), pa.int64()))})
    query = dpkit.sql(statement, tables={"t": frame}, public={"regions": table}, options=OPTIONS)
    with dpkit.Session(budget=(5.0, 1e-5)) as session:
        with pytest.raises(dpkit.SqlError) as raised:
            session.release(query, None, rng=np.random.default_rng(0))
        assert session.spent.epsilon == 0 and not session.history()
    assert raised.value.clause == "JOIN" and words in str(raised.value), str(raised.value)
    assert (raised.value.line, raised.value.column) == (1, statement.index("regions") + 1)
    if public == "spark":  # were it to change after the check, a repeated key joins nothing
        from dpkit.sql_statements.spark import unique_rows

        kept = unique_rows(table, ["city"]).toArrow()
        assert sorted(kept.column("city").to_pylist()) == ["Nice", "Paris", "Rome"]
        assert kept.column_names == list(REGIONS.columns)


def test_missing_and_large_values_are_released_on_spark_as_on_duckdb(spark: Any) -> None:
    """Rows bounded once for a statement carry each aggregate's value through Spark's
    bounding: integers that mix nulls and 2⁶³ − 1, NaN floats, products that overflow (NULL
    on both engines) give DuckDB's aggregates, and the release completes. (The bounding runs
    on Arrow batches: through pandas, a 64-bit integer column with nulls can become float64,
    2⁶³ − 1 rounded to 2⁶³ and refused on the way back after the spend — what
    ``tests/property/test_sql_spark.py`` found; with all values NULL, a NaN came back as a
    null in a column declared without nulls.)"""
    big = pd.array([2**63 - 1, None, 3, 2**63 - 1, None, 5], dtype="Int64")
    frame = pd.DataFrame(
        {
            "user": [1, 1, 2, 3, 3, 3],
            "city": ["Lyon", "Lyon", "Paris", "Lyon", "Nice", "Paris"],
            "big": big,
            "minutes": [np.nan, 3.0, np.nan, 7.5, 1.0, np.nan],
        }
    )
    duck, on_spark = _both(
        "SELECT city, SUM(big * big, contribution_bounds_per_group => (-10, 50)) AS s, "
        "SUM(big, contribution_bounds_per_group => (-10, 50)) AS b, "
        "AVG(minutes, contribution_bounds_per_group => (0, 10)) AS m FROM t GROUP BY city",
        frame,
        spark,
        keys=["Lyon", "Paris", "Nice"],
    )
    expected = duck.aggregates(rng=np.random.default_rng(2))
    found = on_spark.aggregates(rng=np.random.default_rng(2))
    for a, b in zip(found, expected, strict=True):
        assert a.identical(b), (a.values, b.values)
    assert expected[0].values["count"].sum() < expected[1].values["count"].sum()  # overflows
    on_spark.run(rng=np.random.default_rng(2))  # completes
