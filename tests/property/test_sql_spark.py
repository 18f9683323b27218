"""A statement on a Spark DataFrame, on hostile rows: Spark completes it after the spend and
gives DuckDB's pre-noise aggregates, bit for bit.

The row-level part of a statement is a function of one row, so a person's contribution is
bounded after it on every engine (``test_sql_neighbours.py`` checks the sensitivities on
DuckDB). What an engine can add is a failure: Spark raises on the row, after the spend, where
DuckDB's ``TRY`` gives NULL (a text that is no number, a zero divisor, an overflow, a ``LIKE``
pattern ending in a backslash). Here the rows are drawn to hit those cases — numbers spelled
as text, zero and negative divisors, int64's extremes, NaN and ±∞, backslashes, ``%`` and
``_`` in the texts matched as patterns, missing values in every column (one statement joins
public lookup tables: a LEFT join USING a text key, an INNER join ON a number) — and each
statement is released on Spark by a session, which must complete; where the statement's
functions mean the same on both engines, its pre-noise aggregates are compared with DuckDB's
on the same rows with the same generator.

False-positive rate: 0 (deterministic engines, one generator seed per example; Hypothesis
derandomized).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.table_cases import SETTINGS

import dpkit

pd = pytest.importorskip("pandas")
pytest.importorskip("duckdb")
pytest.importorskip("sqlglot")
pytest.importorskip("pyspark")

pytestmark = [pytest.mark.cluster, pytest.mark.spark]

B = "contribution_bounds_per_group => (-10, 50)"
CITIES = ["a", "b", "a\\", "%", "_"]
#: Statements whose every function means the same on both engines: the aggregates must be equal.
SHARED = [
    "SELECT city, COUNT(CAST(code AS DOUBLE)) FROM t WHERE minutes / divisor > 0 GROUP BY city",
    f"SELECT SUM(big * divisor, {B}), COUNT(big + big) FROM t WHERE city LIKE code || '%'",
    f"SELECT city, AVG(CAST(code AS DOUBLE) % divisor, {B}) FROM t GROUP BY city",
    f"SELECT city, SUM(minutes * big, {B}), COUNT(*) FROM t WHERE code ILIKE city GROUP BY city",
    f"SELECT SUM(-big, {B}), SUM(ABS(big), {B}), SUM(-minutes, {B}) FROM t",
    f"SELECT city, PERCENTILE_CONT(CAST(code AS DOUBLE) / divisor, 0.5, {B}) FROM t GROUP BY city",
    "SELECT UPPER(city) AS c, COUNT(*) FROM t WHERE LENGTH(code) > 1 GROUP BY c",
    f"SELECT city, SUM(big - 1, {B}), SUM(minutes / big, {B}) FROM t GROUP BY city",
    f"SELECT city, SUM(minutes * p.factor, {B}), COUNT(p.label) FROM t LEFT JOIN codes AS p "
    "USING (city) JOIN sizes AS z ON t.divisor = z.divisor WHERE z.size > 1 GROUP BY city",
]
#: Public lookup tables (each key unique): some cities and every divisor but 2 match.
PUBLIC = {
    "codes": pd.DataFrame(
        {"city": ["a", "a\\", "%", "zz"], "label": ["A", None, "P", "Z"],
         "factor": pd.array([2**62, -1, 3, 7], dtype="int64")}
    ),
    "sizes": pd.DataFrame({"divisor": [-1, 0, 1], "size": [2.0, 5.0, 0.5]}),
}  # fmt: skip
#: Statements that meet a documented difference between the engines (``docs/sql.md``, On
#: Spark): an integer division of the most negative integer by -1, a text cast to an integer,
#: a failed cast seen by COALESCE. Spark must complete them; their answers may differ.
DIFFERENT = [
    f"SELECT city, SUM(big // divisor, {B}) FROM t GROUP BY city",
    f"SELECT city, SUM(CAST(code AS BIGINT) * 1000000000, {B}) FROM t GROUP BY city",
    f"SELECT SUM(COALESCE(CAST(code AS DECIMAL(4, 1)), divisor), {B}) FROM t WHERE big % 3 = 0",
]


@st.composite
def tables(draw: st.DrawFn) -> Any:
    """Up to 16 rows of 5 people, every column hostile and sometimes missing."""
    rows = draw(st.integers(1, 16))

    def column(values: Any) -> list[Any]:
        return draw(st.lists(values, min_size=rows, max_size=rows))

    texts = st.sampled_from(["12", "x", "", " 7", "-3", "1e3", "99999999999", "2.5", "a", "a\\"])
    return pd.DataFrame(
        {
            "user": column(st.integers(0, 4)),
            "city": column(st.sampled_from([*CITIES, None])),
            "code": column(st.one_of(texts, st.none())),
            "minutes": column(
                st.one_of(
                    st.floats(-1e3, 1e3, allow_nan=False),
                    st.sampled_from([float("nan"), float("inf"), -float("inf"), 1e308, -0.0]),
                )
            ),
            "divisor": column(st.integers(-1, 2)),
            "big": pd.array(
                column(st.sampled_from([0, 1, 2**62, -(2**63), 2**63 - 1])), dtype="int64"
            ),
        }
    )


@pytest.mark.slow
@settings(max_examples=20, **SETTINGS)
@given(
    frame=tables(),
    statement=st.sampled_from(SHARED + DIFFERENT),
    public=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_spark_completes_a_statement_with_duckdbs_aggregates(
    spark: Any, frame: Any, statement: str, public: bool, seed: int
) -> None:
    """With public keys, or with the groups chosen by partition selection on the rows."""
    options = {
        "epsilon": 1.0,
        "delta": 1e-6,
        "privacy_unit_column": "user",
        "max_rows_contributed": 2,
        "max_groups_contributed": 2,
    }
    keys: Any = None
    if public and "GROUP BY" in statement:
        keys = [c.upper() for c in CITIES] if "UPPER" in statement else CITIES
    duck = dpkit.sql(statement, tables={"t": frame}, public=PUBLIC, options=options, keys=keys)
    on_spark = dpkit.sql(
        statement,
        tables={"t": spark.createDataFrame(frame)},
        public=PUBLIC,
        options=options,
        keys=keys,
    )
    with dpkit.Session(budget=(1.0, 1e-6)) as session:
        session.release(on_spark, None, rng=np.random.default_rng(seed))
    if statement in DIFFERENT:
        return
    expected = duck.aggregates(rng=np.random.default_rng(seed))
    found = on_spark.aggregates(rng=np.random.default_rng(seed))
    for a, b in zip(found, expected, strict=True):
        assert a.identical(b), (statement, a.values, b.values)
