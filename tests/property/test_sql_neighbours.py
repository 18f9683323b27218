"""Brute-force sensitivity of SQL statements on small tables.

For statements of every aggregate SQL offers (with row-level WHERE, expressions inside the
aggregates and in GROUP BY, public and private keys, joins with a public lookup table), on
small adversarial tables (a heavy
person, its id spelled across Python types in an object column, missing values, values far
outside the bounds) given as pandas, Polars, PyArrow or a
DuckDB relation: every person is removed in turn, D and its neighbour D′ are aggregated with
the same generator (so the same bounding key), and each aggregate's every noised answer moves
by at most the sensitivity its noise is calibrated to (``support.table_cases``: L1 for Laplace
and geometric noise, L2 for Gaussian, a quantile's records per lattice cell by at most the G·R
its exponential mechanisms pay for), and at most as many groups move as the noise is told can
change. The statement's row-level part runs in DuckDB: this checks that it adds nothing to a
person's contribution. A join's keys are also drawn of two types (numbers, dates and
timestamps, with values that an implicit cast merges or cannot hold), where a row must still
match one public row at most, and no release fail.

False-positive rate: 0 (exact rational arithmetic; Hypothesis derandomized).
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.table_cases import (
    SETTINGS,
    answers,
    calibration,
    changeable,
    changed_groups,
    distance,
    within,
)

import dpkit
from dpkit.testing.tables import text_of

pd = pytest.importorskip("pandas")
pl = pytest.importorskip("polars")
pa = pytest.importorskip("pyarrow")
duckdb = pytest.importorskip("duckdb")
pytest.importorskip("sqlglot")

B = "contribution_bounds_per_group => (-10, 50)"
STATEMENTS = [
    "SELECT city, COUNT(*) FROM t GROUP BY city",
    "SELECT city, COUNT(minutes) FROM t WHERE minutes > 0 GROUP BY city",
    "SELECT city, COUNT(DISTINCT user) FROM t GROUP BY city",
    f"SELECT city, SUM(minutes * 2, {B}) FROM t GROUP BY city",
    f"SELECT city, AVG(minutes, {B}) FROM t WHERE city <> 'c' GROUP BY city",
    f"SELECT city, PERCENTILE_CONT(minutes, 0.5, {B}) FROM t GROUP BY city",
    f"SELECT UPPER(city) AS c, SUM(COALESCE(minutes, 1), {B}), COUNT(*) FROM t GROUP BY c",
    f"SELECT SUM(minutes, {B}), AVG(minutes, {B}) FROM t",
    "SELECT city, minutes > 5 AS long, COUNT(*) FROM t GROUP BY city, long",
    f"SELECT city, VAR_POP(minutes, {B}), STDDEV(minutes * 2, {B}) FROM t GROUP BY city",
    f"SELECT l.region, COUNT(*), SUM(t.minutes * l.weight, {B}) FROM t JOIN lookup l "
    "ON t.city = l.city GROUP BY l.region",
    f"SELECT region, AVG(weight, {B}) FROM t LEFT JOIN lookup USING (city) "
    "WHERE minutes > 0 GROUP BY region",
]
JOINED = [statement for statement in STATEMENTS if "JOIN" in statement]
#: A public lookup table, unique by city; c matches no row of it.
LOOKUP = {"city": ["a", "b", "z"], "region": ["r1", "r2", "r1"], "weight": [2.0, 0.5, 40.0]}


@st.composite
def tables(draw: st.DrawFn) -> Any:
    rows = draw(st.integers(1, 25))
    user = draw(st.lists(st.integers(0, 5), min_size=rows, max_size=rows))
    city = draw(st.lists(st.sampled_from(["a", "b", "c"]), min_size=rows, max_size=rows))
    value = st.one_of(
        st.floats(-100, 1000, allow_nan=False), st.just(float("nan")), st.sampled_from([0.0, 49.5])
    )
    minutes = draw(st.lists(value, min_size=rows, max_size=rows))
    if draw(st.booleans()):  # an object column: each id spelled any way, one person still
        spelled = np.empty(rows, dtype=object)
        for index, person in enumerate(user):
            spelled[index] = draw(st.sampled_from(_spellings(person)))
        return pd.DataFrame({"user": spelled, "city": city, "minutes": minutes})
    return pd.DataFrame({"user": user, "city": city, "minutes": minutes})


def _spellings(person: int) -> list[Any]:
    """The Python values an object column's cell may hold for ``person``, all one text
    (:func:`dpkit.testing.tables.text_of`: one person to dpkit)."""
    return [
        person,
        np.int64(person),
        Fraction(person),
        Decimal(person),
        str(person),
        b"%d" % person,
    ]


def _as(kind: str, frame: Any) -> Any:
    if kind == "polars":
        return pl.from_pandas(frame)
    if kind == "arrow":
        return pa.Table.from_pandas(frame, preserve_index=False)
    if kind == "duckdb":
        return duckdb.connect().from_df(frame)
    return frame


@settings(max_examples=30, **SETTINGS)
@given(
    frame=tables(),
    statement=st.sampled_from(STATEMENTS),
    kind=st.sampled_from(["pandas", "polars", "arrow", "duckdb"]),
    public=st.booleans(),
    rows=st.integers(1, 3),
    groups=st.integers(1, 2),
    seed=st.integers(0, 2**32 - 1),
)
def test_removing_a_person_moves_each_answer_within_its_sensitivity(
    frame: Any, statement: str, kind: str, public: bool, rows: int, groups: int, seed: int
) -> None:
    _check(frame, statement, kind, public, rows, groups, seed)


@settings(max_examples=20, **SETTINGS)
@given(
    frame=tables(),
    statement=st.sampled_from(JOINED),
    kind=st.sampled_from(["pandas", "polars", "arrow", "duckdb"]),
    public=st.booleans(),
    rows=st.integers(1, 3),
    groups=st.integers(1, 2),
    seed=st.integers(0, 2**32 - 1),
    per_row=st.booleans(),
)
def test_a_join_with_a_public_table_moves_each_answer_within_its_sensitivity(
    frame: Any,
    statement: str,
    kind: str,
    public: bool,
    rows: int,
    groups: int,
    seed: int,
    per_row: bool,
) -> None:
    """A lookup table's key is unique: each row joins to at most one row, so the bounding and
    the sensitivities are those of the private table alone — also where each row is a person
    (no privacy_unit_column, no per-person cap to hide a row that joins twice)."""
    if per_row:
        frame = frame.assign(user=np.arange(len(frame)))
    _check(frame, statement, kind, public, rows, groups, seed, per_row=per_row)


def _check(
    frame: Any,
    statement: str,
    kind: str,
    public: bool,
    rows: int,
    groups: int,
    seed: int,
    *,
    per_row: bool = False,
) -> None:
    if kind != "pandas" and frame.user.dtype == object:  # spelled ids: read by dpkit (pandas)
        frame = frame.assign(user=frame.user.map(text_of))  # not by another library's guess
    options: dict[str, Any] = {"epsilon": 1.0, "delta": 1e-6}
    if not per_row:
        options.update(
            privacy_unit_column="user", max_rows_contributed=rows, max_groups_contributed=groups
        )
    grouped = "GROUP BY" in statement
    keys: Any = None
    if public and grouped:
        keys = (
            ["a", "b", "c", "z"] if "long" not in statement and "UPPER" not in statement else None
        )
        if "UPPER" in statement:
            keys = ["A", "B", "C"]
        if "lookup" in statement:
            keys = ["r1", "r2", "r3"]
    query = dpkit.sql(
        statement,
        tables={"t": _as(kind, frame)},
        public={"lookup": pd.DataFrame(LOOKUP)},
        options=options,
        keys=keys,
    )
    full = query.aggregates(rng=np.random.default_rng(seed))
    people = frame.user.map(text_of)  # an object column's person is its text
    for user in sorted(set(people)):
        neighbour = frame[people != user].reset_index(drop=True)
        fewer = query.aggregates({"t": _as(kind, neighbour)}, rng=np.random.default_rng(seed))
        for (_, table_query), a, b in zip(query.queries, full, fewer, strict=True):
            calibrated = calibration(table_query)
            for name, (coordinates, other) in {
                n: (answers(table_query, a)[n], answers(table_query, b)[n]) for n in calibrated
            }.items():
                sensitivity, norm = calibrated[name]
                move = distance(coordinates, other, norm)
                assert within(move, sensitivity, norm), (statement, user, name, move)
                if name != "lattice":
                    assert len(changed_groups(coordinates, other)) <= changeable(table_query)


#: Join keys of two types of one family, and their values as SQL literals (cast with TRY_CAST:
#: a value a type cannot hold is missing) in pairs that a cast merges — integers one DOUBLE,
#: decimals finer than a DOUBLE, instants one DATE — or cannot hold (beyond the nanosecond
#: timestamps' range, or TIMESTAMP's).
KEY_FAMILIES = {
    "number": (
        ("BIGINT", "DOUBLE", "FLOAT", "HUGEINT", "UBIGINT", "DECIMAL(38,19)", "DECIMAL(38,10)"),
        ((str(2**53), str(2**53 + 1)), ("0.1", "0.1000000000000000001"),
         ("12345678", "12345678.0000000001"), ("1", "1.5"), ("-0", "1e38")),
    ),
    "time": (
        ("DATE", "TIMESTAMP_S", "TIMESTAMP", "TIMESTAMP_NS"),
        (("'2020-01-01'", "'2020-01-01 00:00:00.000000001'"),
         ("'2020-01-01 01:00:00'", "'2020-01-01 00:00:01'"),
         ("'3000-01-01'", "'5000000-01-01'")),
    ),
}  # fmt: skip
JOINED_BY_KEY = [
    "SELECT COUNT(*), COUNT(p.w) FROM t LEFT JOIN p ON t.k = p.k",
    "SELECT COUNT(*), COUNT(p.w) FROM t LEFT JOIN p USING (k)",
]


def _keyed(kind: str, values: list[str]) -> Any:
    """A table of a key column ``k`` of DuckDB type ``kind`` (and a column ``w``)."""
    rows = ", ".join(f"({value}, {i})" for i, value in enumerate(values or ["NULL"]))
    limit = "" if values else " LIMIT 0"
    return (
        duckdb.connect()
        .sql(f"SELECT TRY_CAST(k AS {kind}) AS k, w FROM (VALUES {rows}) AS t(k, w){limit}")
        .to_arrow_table()
    )


@settings(max_examples=20, **SETTINGS)
@given(data=st.data(), statement=st.sampled_from(JOINED_BY_KEY))
def test_a_join_on_keys_of_two_types_keeps_each_private_row_once(
    data: st.DataObject, statement: str
) -> None:
    """The join is a per-row map (what the sensitivities above rest on): a LEFT JOIN gives
    each private row exactly once, joined to one public row at most — were a row joined to
    two, each row being a person, one person would count twice — and nothing fails."""
    types, pairs = KEY_FAMILIES[data.draw(st.sampled_from(sorted(KEY_FAMILIES)))]
    values = [value for pair in pairs for value in pair]
    private, public = (data.draw(st.sampled_from(types)) for _ in range(2))
    mine = data.draw(st.lists(st.sampled_from(values), min_size=1, max_size=6))
    near = data.draw(st.sampled_from(pairs))  # both values of a pair: merged by a cast?
    theirs = list(dict.fromkeys([*near, *data.draw(st.lists(st.sampled_from(values), max_size=2))]))
    query = dpkit.sql(
        statement,
        tables={"t": _keyed(private, mine)},
        public={"p": _keyed(public, theirs)},
        options={"epsilon": 1.0},
    )
    try:
        query.check_input(None)
    except dpkit.SqlError as error:  # refused in the public phase: no row read
        assert error.clause == "JOIN", str(error)
        return
    rows, matched = query.aggregates(rng=np.random.default_rng(0))
    assert rows.values["count"].tolist() == [len(mine)], (private, public, mine, theirs)
    assert matched.values["count"][0] <= len(mine)
