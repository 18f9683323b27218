"""A SQL release after its spend: it completes on every input kind, and what the ledger records
of it is the statement and its parameters, never the tables' values.

Deterministic (fixed tables and seeds): no false positives.
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
pl = pytest.importorskip("polars")
duckdb = pytest.importorskip("duckdb")
pytest.importorskip("sqlglot")

SECRET = "a-value-only-the-table-holds"


def _frame() -> Any:
    return pd.DataFrame(
        {"user": [1, 2, 3, 3], "minutes": [1.0, 2.0, None, 4.0], "note": [SECRET] * 4}
    )


def _inputs(tmp_path: Path) -> dict[str, Any]:
    frame = _frame()
    parquet = tmp_path / "t.parquet"
    frame.to_parquet(parquet)
    con = duckdb.connect()
    return {
        "pandas": frame,
        "polars": pl.from_pandas(frame),
        "arrow": pa.Table.from_pandas(frame),
        "duckdb": con.from_df(frame),
        "parquet": str(parquet),
    }


@pytest.mark.parametrize("bounding", ["numpy", "duckdb"])
@pytest.mark.parametrize("kind", ["pandas", "polars", "arrow", "duckdb", "parquet"])
@pytest.mark.parametrize(
    "statement",
    ["SELECT COUNT(minutes) FROM t", "SELECT COUNT(*) FROM t", "SELECT COUNT(note) FROM t"],
)
def test_a_count_of_one_column_releases_on_every_input(
    statement: str, kind: str, bounding: str, tmp_path: Path
) -> None:
    """A count reads no value, so the row-level table can be left with no column but the
    counted one; a DuckDB relation must still have one after it is set aside."""
    table = _inputs(tmp_path)[kind]
    query = dpkit.sql(statement, tables={"t": table}, options={"epsilon": 1.0}, bounding=bounding)
    with dpkit.Session(budget=(1.0, 0.0)) as session:
        release = session.release(query, None, rng=np.random.default_rng(0))
    assert len(release.values.rows) == 1


def test_the_ledger_records_the_statement_not_the_tables(tmp_path: Path) -> None:
    ledger = tmp_path / "l.sqlite"
    query = dpkit.sql("SELECT COUNT(*) FROM t", tables={"t": _frame()}, options={"epsilon": 1.0})
    with dpkit.Session(budget=(1.0, 0.0), ledger=ledger) as session:
        release = session.release(query, None, rng=np.random.default_rng(0))
    recorded = json.dumps(release.entry.parameters, default=str)
    assert "SELECT COUNT(*) FROM t" in recorded
    assert SECRET not in recorded
    assert SECRET not in ledger.read_bytes().decode("utf-8", "replace")


@pytest.mark.parametrize(
    "rows",
    [
        b'1,"two\nlines",5\n2,b,7\n',  # a quoted line break: a multi-line text field
        b"1,a,5\n2,b,7\r3,c,1\n",  # a line ending of another kind
    ],
)
def test_a_csv_file_of_any_rows_releases_after_the_public_phase(
    rows: bytes, tmp_path: Path
) -> None:
    """A CSV file's rows are read only after the spend: the reader must not fail on any of
    them (DuckDB's, as it is by default, raised on each of these)."""
    path = tmp_path / "t.csv"
    path.write_bytes(b"user,city,minutes\n" + rows)
    query = dpkit.sql(
        "SELECT city, SUM(TRY_CAST(minutes AS DOUBLE), contribution_bounds_per_group => (0, 9)) "
        "FROM t GROUP BY city",
        tables={"t": str(path)},
        options={"epsilon": 1.0, "delta": 1e-6, "privacy_unit_column": "user"}
        | {"max_groups_contributed": 1},
    )
    with dpkit.Session(budget=(1.0, 1e-6)) as session:
        session.release(query, None, rng=np.random.default_rng(0))


def _invalid_text(kind: str) -> Any:
    """A table whose id and key columns hold, in one row, a text that is not valid UTF-8: an
    Arrow array built from buffers (nothing checks them), a lone surrogate in pandas (in an
    object column, or a text column of Python strings)."""
    if kind.startswith("pandas"):
        dtype = object if kind == "pandas" else pd.StringDtype("python")
        spelled = pd.Series(["a", "\udcff", "b"], dtype=dtype)
        return pd.DataFrame({"user": spelled, "city": spelled, "minutes": [1.0, 2.0, 3.0]})
    raw = pa.array([b"a", b"\xff\xfe", b"b"], pa.binary())
    text = pa.Array.from_buffers(pa.string(), len(raw), raw.buffers())
    return pa.table({"user": text, "city": text, "minutes": [1.0, 2.0, 3.0]})


@pytest.mark.parametrize("kind", ["arrow", "pandas", "pandas-string"])
def test_text_that_is_not_utf8_is_missing_and_the_release_completes(kind: str) -> None:
    query = dpkit.sql(
        "SELECT lower(city) AS c, COUNT(*) FROM t GROUP BY c",
        tables={"t": _invalid_text(kind)},
        options={"epsilon": 1.0, "privacy_unit_column": "user", "max_groups_contributed": 1},
        keys=["a", "b"],
    )
    with dpkit.Session(budget=(1.0, 0.0)) as session:
        session.release(query, None, rng=np.random.default_rng(0))
    (found,) = query.aggregates(rng=np.random.default_rng(0))
    assert found.values["count"].tolist() == [1, 1]


def test_a_parquet_file_of_text_that_is_not_utf8_releases_as_the_arrow_table(
    tmp_path: Path,
) -> None:
    """DuckDB's Parquet reader refuses text that is not valid UTF-8 as it reads the rows,
    after the spend: the release is made again with such values missing, and its aggregates
    are those of the same rows as an Arrow table (where they are missing too)."""
    import pyarrow.parquet as pq

    table = _invalid_text("arrow").append_column("day", pa.array([1, 2, 3], pa.date32()))
    path = tmp_path / "t.parquet"
    pq.write_table(table, path)
    statement = (
        "SELECT lower(city) AS c, COUNT(*), SUM(minutes, contribution_bounds_per_group => "
        "(0, 5)) FROM t WHERE day > DATE '1970-01-01' GROUP BY c"
    )
    options = {"epsilon": 1.0, "privacy_unit_column": "user", "max_groups_contributed": 1}
    on_file, on_table = (
        dpkit.sql(statement, tables={"t": t}, options=options, keys=["a", "b"])
        for t in (str(path), table)
    )
    with pytest.raises(duckdb.Error, match="Invalid string encoding"):
        duckdb.read_parquet(str(path)).fetchall()  # the reader's refusal, shown
    with dpkit.Session(budget=(1.0, 0.0)) as session:
        session.release(on_file, None, rng=np.random.default_rng(0))
    found = on_file.aggregates(rng=np.random.default_rng(1))
    expected = on_table.aggregates(rng=np.random.default_rng(1))
    assert [a.values["count"].tolist() for a in found] == [[1, 1], [1, 1]]
    for a, b in zip(found, expected, strict=True):
        assert a.identical(b), (a.values, b.values)


def test_a_parquet_group_key_of_dictionary_text_that_is_not_utf8_is_missing(
    tmp_path: Path,
) -> None:
    """Dictionary-encoded text is read again as bytes too: a group key that is not valid
    UTF-8, shared by enough people to pass the partition selection, failed its conversion
    to Python after the spend."""
    import pyarrow.parquet as pq

    n = 2000
    raw = pa.array([b"\xff"] * n, pa.binary())
    city = pa.Array.from_buffers(pa.string(), n, raw.buffers()).dictionary_encode()
    users = pa.array([f"u{i}" for i in range(n)])
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"user": users, "city": city, "minutes": [1] * n}), path)
    query = dpkit.sql(
        "SELECT city, COUNT(*) FROM t GROUP BY city",
        tables={"t": str(path)},
        options={"epsilon": 1.0, "delta": 1e-6, "privacy_unit_column": "user"}
        | {"max_groups_contributed": 1},
    )
    with dpkit.Session(budget=(1.0, 1e-6)) as session:
        released = session.release(query, None, rng=np.random.default_rng(0))
    assert released.values.groups == ()  # the missing key is not released
