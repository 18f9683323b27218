"""Joins of the private table with public lookup tables.

A join on a key that is unique in the public table is a per-record map of the private table
(1-stable): its aggregates are those of the join done by hand before ``.on(...)``, bit for
bit. Anything else — a join of private tables, a condition that is not an equality of
columns, a key the public table repeats, columns of types that do not compare — is refused in
the public phase, naming the JOIN where it is written, before any private row is read.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dpkit

pd = pytest.importorskip("pandas")
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
B = "contribution_bounds_per_group => (0, 100)"


def _visits(rows: int = 2000) -> Any:
    rng = np.random.default_rng(4)
    return pd.DataFrame(
        {
            "user": rng.integers(0, 200, rows),
            "city": rng.choice(["Lyon", "Paris", "Nice", "Brest"], rows),
            "year": rng.choice([2023, 2024], rows),
            "minutes": rng.uniform(-20, 140, rows).round(2),
        }
    )


#: Brest is in no region: an INNER join drops its rows, a LEFT join keeps them with NULLs.
REGIONS = pd.DataFrame(
    {
        "city": ["Lyon", "Paris", "Nice", "Rome"],
        "region": ["ARA", "IDF", "PACA", "LAZ"],
        "weight": [1.5, 0.5, 2.0, 9.0],
    }
)
#: A two-column key, unique as a pair (each city twice).
RATES = pd.DataFrame(
    {
        "city": ["Lyon", "Lyon", "Paris", "Paris", "Nice", "Nice"],
        "year": [2023, 2024, 2023, 2024, 2023, 2024],
        "rate": [1.0, 1.1, 2.0, 2.2, 3.0, 3.3],
    }
)
PUBLIC = {"regions": REGIONS, "rates": RATES}


def _sql(statement: str, private: Any = None, **given: Any) -> Any:
    return dpkit.sql(
        statement,
        tables={"visits": _visits() if private is None else private},
        public=given.pop("public", PUBLIC),
        options=OPTIONS,
        **given,
    )


@pytest.mark.parametrize("kind", ["pandas", "arrow", "duckdb"])
@pytest.mark.parametrize("bounding", ["numpy", "duckdb"])
@pytest.mark.parametrize(
    ("statement", "how"),
    [
        (f"SELECT r.region, SUM(v.minutes * r.weight, {B}) FROM visits v JOIN regions r "
         "ON v.city = r.city GROUP BY r.region", "inner"),
        (f"SELECT region, SUM(minutes * weight, {B}) FROM visits LEFT JOIN regions "
         "USING (city) GROUP BY region", "left"),
    ],
)  # fmt: skip
def test_a_join_is_the_join_done_by_hand_first(
    statement: str, how: str, kind: str, bounding: str
) -> None:
    frame = _visits()
    private = {
        "pandas": frame,
        "arrow": pa.Table.from_pandas(frame, preserve_index=False),
        "duckdb": duckdb.connect().from_df(frame),
    }[kind]
    keys = ["ARA", "IDF", "PACA", "LAZ"]
    query = _sql(statement, private, keys=keys, bounding=bounding)
    joined = frame.merge(REGIONS, on="city", how=how)
    joined = joined.assign(value=joined.minutes * joined.weight)
    reference = dpkit.get_registry().query("sum", epsilon=1.0, lower=0, upper=100)
    summed = reference.on("value", by="region", keys=keys, unit=UNIT)
    expected = summed.bound_with([], joined, rng=np.random.default_rng(3)).aggregate(summed)
    (found,) = query.aggregates(rng=np.random.default_rng(3))
    assert found.identical(expected), (found.values, expected.values)


def test_a_key_of_several_columns_and_a_public_column_in_where() -> None:
    frame = _visits()
    query = _sql(
        "SELECT v.city, COUNT(*) FROM visits AS v INNER JOIN rates AS x "
        "ON v.city = x.city AND x.year = v.year WHERE x.rate > 1.5 GROUP BY v.city",
        frame,
        keys=["Lyon", "Paris", "Nice"],
    )
    joined = frame.merge(RATES, on=["city", "year"], how="inner")
    kept = joined[joined.rate > 1.5]
    counter = dpkit.get_registry().query("count", epsilon=1.0)
    expected = counter.on(None, by="city", keys=["Lyon", "Paris", "Nice"], unit=UNIT).aggregate(
        kept, rng=np.random.default_rng(9)
    )
    (found,) = query.aggregates(rng=np.random.default_rng(9))
    assert found.identical(expected), (found.values, expected.values)


def test_the_groups_of_a_public_column_are_selected_privately() -> None:
    query = _sql(
        "SELECT r.region, COUNT(*) AS n FROM visits v JOIN regions r USING (city) GROUP BY r.region"
    )
    assert query.selector is not None
    with dpkit.Session(budget=(2.0, 1e-5)) as session:
        table = session.release(query, None, rng=np.random.default_rng(1)).values.table()
    assert set(table.region) <= {"ARA", "IDF", "PACA"}  # never a region no row joins


DUPLICATED = pd.concat([REGIONS, REGIONS.iloc[:1]], ignore_index=True)


@pytest.mark.parametrize(
    ("statement", "public", "at", "words"),
    [
        ("SELECT COUNT(*) FROM visits JOIN dup USING (city)", {"dup": DUPLICATED}, "dup USING",
         "repeats a value of its join key"),
        ("SELECT COUNT(*) FROM visits v JOIN regions r ON v.year = r.city", PUBLIC, "r.city",
         "do not compare"),
        ("SELECT COUNT(*) FROM visits v JOIN regions r ON v.city < r.city", PUBLIC, "v.city <",
         "not an equality of columns"),
        ("SELECT COUNT(*) FROM visits v JOIN regions r ON lower(v.city) = r.city", PUBLIC,
         "lower(", "is not a column"),
        ("SELECT COUNT(*) FROM visits v JOIN regions r ON v.city = r.city OR v.year = 1",
         PUBLIC, "v.city =", "not an equality of columns"),
        ("SELECT COUNT(*) FROM visits v JOIN regions r ON v.city = r.town", PUBLIC, "r.town",
         "not in 'regions'"),
        ("SELECT COUNT(*) FROM visits v JOIN regions r ON v.city = v.city", PUBLIC, "v.city =",
         "equates a private column"),
        ("SELECT COUNT(*) FROM visits v JOIN regions r ON city = city", PUBLIC, "city =",
         "in both"),
        ("SELECT COUNT(*) FROM visits v FULL JOIN regions r USING (city)", PUBLIC, "regions",
         "FULL join is not released"),
        ("SELECT COUNT(*) FROM visits v RIGHT JOIN regions r USING (city)", PUBLIC, "regions",
         "RIGHT join is not released"),
        ("SELECT COUNT(*) FROM visits v CROSS JOIN regions r", PUBLIC, "regions",
         "CROSS join is not released"),
        ("SELECT COUNT(*) FROM visits v NATURAL JOIN regions r", PUBLIC, "regions",
         "NATURAL join is not released"),
        ("SELECT COUNT(*) FROM visits v, regions r", PUBLIC, "regions", "without ON or USING"),
        ("SELECT COUNT(*) FROM visits v JOIN visits w USING (user)", PUBLIC, "visits w",
         "two private tables"),
        ("SELECT COUNT(*) FROM visits v JOIN towns t USING (city)", PUBLIC, "towns",
         "not a public table"),
        ("SELECT COUNT(*) FROM visits v JOIN regions v USING (city)", PUBLIC, "regions",
         "alias 'v' is repeated"),
    ],
)  # fmt: skip
def test_a_join_that_is_not_a_lookup_is_refused_before_any_private_row(
    statement: str,
    public: dict[str, Any],
    at: str,
    words: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dpkit.sql_statements import query as module

    opened: list[tuple[str, bool]] = []
    relation = module.relation

    def watched(con: Any, data: Any, *, name: str, empty: bool, **options: Any) -> Any:
        opened.append((name, empty))
        return relation(con, data, name=name, empty=empty, **options)

    monkeypatch.setattr(module, "relation", watched)
    with dpkit.Session(budget=(5.0, 1e-5)) as session, pytest.raises(dpkit.SqlError) as raised:
        session.release(_sql(statement, public=public), None, rng=np.random.default_rng(1))
    assert raised.value.clause == "JOIN" and words in str(raised.value), str(raised.value)
    where = (1, statement.index(at) + 1)  # where the refused part is written
    assert (raised.value.line, raised.value.column) == where, str(raised.value)
    assert all(empty for name, empty in opened if name == "visits"), opened
    assert session.spent.epsilon == 0 and not session.history()


def test_a_column_of_no_table_read_is_refused_where_written() -> None:
    statement = "SELECT COUNT(*) FROM visits v JOIN regions r USING (city) WHERE r.area > 2"
    with pytest.raises(dpkit.SqlError) as raised:
        _sql(statement).check_input(None)
    assert raised.value.clause == "column" and "r.area" in str(raised.value)
    assert (raised.value.line, raised.value.column) == (1, statement.index("r.area") + 1)


def test_a_column_of_two_tables_read_unqualified_is_refused_where_written() -> None:
    statement = "SELECT COUNT(*) FROM visits v JOIN regions r ON v.city = r.city WHERE city <> 'x'"
    with pytest.raises(dpkit.SqlError) as raised:
        _sql(statement).check_input(None)
    assert raised.value.clause == "column" and "qualify it" in str(raised.value)
    assert (raised.value.line, raised.value.column) == (1, statement.index("city <>") + 1)
    _sql(statement.replace("ON v.city = r.city", "USING (city)")).check_input(None)


def test_the_private_phase_joins_only_keys_unique_in_the_public_table(tmp_path: Path) -> None:
    """Were the public file to change after the check, a repeated key joins nothing: each
    private row still matches at most one public row."""
    path = tmp_path / "regions.parquet"
    REGIONS.to_parquet(path)
    frame = _visits()
    query = _sql(
        "SELECT city, COUNT(*) FROM visits JOIN regions USING (city) GROUP BY city",
        frame,
        public={"regions": str(path)},
        keys=["Lyon", "Paris", "Nice", "Brest"],
    )
    query.check_input(None)
    DUPLICATED.to_parquet(path)  # Lyon twice
    (found,) = query.aggregates(rng=np.random.default_rng(2))
    kept = frame[frame.city.isin(["Paris", "Nice"])]
    counter = dpkit.get_registry().query("count", epsilon=1.0)
    expected = counter.on(
        None, by="city", keys=["Lyon", "Paris", "Nice", "Brest"], unit=UNIT
    ).aggregate(kept, rng=np.random.default_rng(2))
    assert found.identical(expected), (found.values, expected.values)


def test_dpkit_sql_reads_a_public_table_given_on_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from dpkit.cli import main

    _visits().to_parquet(tmp_path / "visits.parquet")
    REGIONS.to_csv(tmp_path / "regions.csv", index=False)
    statement = (
        "SELECT r.region, COUNT(*) AS n FROM visits v JOIN regions r USING (city) GROUP BY r.region"
    )
    argv = ["sql", statement, "--table", f"visits={tmp_path / 'visits.parquet'}"]
    argv += ["--public", f"regions={tmp_path / 'regions.csv'}", "--keys", "ARA,IDF,PACA,LAZ"]
    argv += [f"--option={k}={v}" for k, v in OPTIONS.items()]
    argv += ["--ledger", str(tmp_path / "l.sqlite"), "--budget", "5,1e-5", "--seed", "3", "--json"]
    assert main(argv) == 0
    document = json.loads(capsys.readouterr().out)
    assert [row[0] for row in document["rows"]] == ["ARA", "IDF", "PACA", "LAZ"]
    assert main(argv[:4] + argv[6:]) == 2  # without --public the join is refused
    refused = capsys.readouterr()
    assert "JOIN" in refused.out + refused.err


def test_a_key_column_of_only_missing_values_joins_nothing() -> None:
    """A private key column of the NULL type (every value missing: an Arrow null column, or a
    pandas column of only missing values on Spark, typed ``void``) compares with any key
    without a cast that could fail: it is joined, and matches no public row."""
    frame = _visits(200)
    table = pa.Table.from_pandas(frame, preserve_index=False)
    table = table.set_column(1, "city", pa.nulls(len(frame)))
    query = _sql("SELECT COUNT(*), COUNT(r.region) FROM visits v LEFT JOIN regions r USING (city)",
                 table)  # fmt: skip
    rows, joined = query.aggregates(rng=np.random.default_rng(1))
    assert rows.values["count"][0] > 0 and joined.values["count"][0] == 0


def _typed(kind: str, values: list[str]) -> Any:
    """One key column ``k`` of DuckDB type ``kind``, from SQL literals."""
    listed = ", ".join(f"({value}::{kind})" for value in values)
    return duckdb.connect().sql(f"SELECT * FROM (VALUES {listed}) AS t(k)").to_arrow_table()


@pytest.mark.parametrize(
    ("private", "value", "public", "values", "matched"),
    [
        # Distinct public keys one DOUBLE: refused, not joined twice.
        ("DOUBLE", str(2**53), "BIGINT", [str(2**53), str(2**53 + 1)], None),
        ("DOUBLE", "0.1", "DECIMAL(38,19)", ["0.1", "0.1000000000000000001"], None),
        # The integer part of a decimal is not the decimal.
        ("HUGEINT", "12345678", "DECIMAL(38,10)",
         ["12345678.0000000001", "12345678.0000000002"], 0),
        # A cast that fails on a private value: nothing matches it, nothing fails.
        ("DATE", "'5000000-01-01'", "TIMESTAMP", ["'2020-01-01'"], 0),
        ("TIMESTAMP", "'3000-01-01'", "TIMESTAMP_NS", ["'2020-01-01'"], 0),
        # Equal values of two types still match; 1.5 is not the integer 2.
        ("DATE", "'2020-01-01'", "TIMESTAMP", ["'2020-01-01'", "'2020-01-01 01:00'"], 1),
        ("BIGINT", "2", "DOUBLE", ["1.5", "2"], 1),
    ],
)  # fmt: skip
def test_a_key_of_another_type_matches_a_private_row_at_most_once_and_never_fails(
    private: str, value: str, public: str, values: list[str], matched: int | None
) -> None:
    """DuckDB compares keys of two types after an implicit cast that can merge distinct public
    keys (a row would count twice: each row is a person here) or fail on a private value after
    the spend: the public keys are cast to the private type first, where the uniqueness is
    checked."""
    query = dpkit.sql(
        "SELECT COUNT(*) FROM t JOIN p ON t.k = p.k",
        tables={"t": _typed(private, [value])},
        public={"p": _typed(public, values)},
        options={"epsilon": 1.0},
    )
    if matched is None:
        with pytest.raises(dpkit.SqlError) as raised:
            query.check_input(None)
        assert raised.value.clause == "JOIN" and "repeats a value" in str(raised.value)
        return
    query.check_input(None)
    (found,) = query.aggregates(rng=np.random.default_rng(1))
    assert found.values["count"].tolist() == [matched]
