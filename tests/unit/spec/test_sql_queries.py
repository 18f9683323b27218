"""A spec's ``sql`` query: a statement over the files its ``tables`` name, run by ``dpkit run``;
everything wrong with it is refused at its JSON Pointer before the ledger is opened."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dpkit.spec import run_spec
from dpkit.spec.issues import SpecInvalid

pd = pytest.importorskip("pandas")
pytest.importorskip("pyarrow")
pytest.importorskip("sqlglot")
pytest.importorskip("duckdb")

STATEMENT = (
    "SELECT city, COUNT(*) AS visits, AVG(minutes) AS mean_minutes FROM visits GROUP BY city"
)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    rng = np.random.default_rng(3)
    pd.DataFrame(
        {
            "user": rng.integers(0, 200, 2000),
            "city": rng.choice(["a", "b"], 2000),
            "minutes": rng.uniform(0, 90, 2000),
        }
    ).to_parquet(tmp_path / "visits.parquet")
    return tmp_path


def spec(**sql: Any) -> dict[str, Any]:
    own: dict[str, Any] = {
        "statement": STATEMENT,
        "tables": {"visits": {"source": "parquet", "path": "visits.parquet"}},
        "options": {"privacy_unit_column": "user", "max_groups_contributed": 1},
        "bounds": {"minutes": [0, 60]},
        "keys": ["a", "b"],
    }
    own.update(sql)
    return {
        "dpkit": "1",
        "statistic": "sql",
        "sql": {k: v for k, v in own.items() if v is not None},
        "budget": {"epsilon": 1.0},
        "session_budget": {"epsilon": 2.0},
        "rng": {"mode": "fast", "seed": 5},
    }


def refusal(document: dict[str, Any], folder: Path) -> list[tuple[str, str]]:
    with pytest.raises(SpecInvalid) as caught:
        run_spec(document, base_dir=folder, ledger=folder / "ledger.sqlite")
    assert not (folder / "ledger.sqlite").exists()  # refused before the ledger: nothing spent
    return [(issue.pointer, issue.code) for issue in caught.value.issues]


def test_a_sql_query_runs_and_spends_its_budget(folder: Path) -> None:
    document = run_spec(spec(), base_dir=folder, ledger=folder / "ledger.sqlite")
    (result,) = document["results"]
    assert result["statistic"] == "sql" and result["columns"] == ["city", "visits", "mean_minutes"]
    assert [row["city"] for row in result["estimate"]] == ["a", "b"]  # the public keys
    assert len(result["aggregates"]) == 2  # COUNT(*) and AVG(minutes), each with its noise
    assert document["session"]["spent"]["epsilon_exact"] == "1"
    assert all(0 <= row["mean_minutes"] <= 60 for row in result["estimate"])  # clamped mean


def test_the_same_seed_reproduces_the_release(folder: Path) -> None:
    first = run_spec(spec(), base_dir=folder, ledger=folder / "a.sqlite")
    again = run_spec(spec(), base_dir=folder, ledger=folder / "b.sqlite")
    assert first["results"][0]["rows"] == again["results"][0]["rows"]


@pytest.mark.parametrize(
    ("sql", "where", "code"),
    [
        (
            {
                "statement": "SELECT city, COUNT(*) FROM visits v JOIN visits w USING (user) GROUP BY city"
            },
            "/sql/statement",
            "invalid_sql",
        ),
        (
            {"statement": "SELECT city, COUNT(*) FROM visits GROUP BY"},
            "/sql/statement",
            "invalid_sql",
        ),
        ({"statement": "SELECT COUNT(*) FROM elsewhere"}, "/sql/statement", "invalid_sql"),
        (  # a type error of the row-level part, found on the table's empty relation
            {
                "statement": "SELECT city, COUNT(*) FROM visits WHERE lower(minutes) = 'x' GROUP BY city"
            },
            "/sql/statement",
            "invalid_sql",
        ),
        (
            {"options": {"privacy_unit_column": "user", "epsilon": 1}},
            "/sql/options/epsilon",
            "invalid_parameter",
        ),
        ({"bounds": {"minutes": [60, 0]}}, "/sql/bounds/minutes", "invalid_parameter"),
        (
            {"tables": {"visits": {"source": "parquet", "path": "../visits.parquet"}}},
            "/sql/tables/visits/path",
            "path_not_allowed",
        ),
        (
            {"tables": {"visits": {"source": "csv", "path": "visits.parquet"}}},
            "/sql/tables/visits/path",
            "invalid_parameter",
        ),
        (
            {"tables": {"visits": {"source": "parquet", "path": "none.parquet"}}},
            "/sql/tables/visits/path",
            "data_missing",
        ),
    ],
)
def test_a_bad_sql_query_is_refused_at_its_field(
    folder: Path, sql: dict[str, Any], where: str, code: str
) -> None:
    found = refusal(spec(**sql), folder)
    assert (where, code) in found, found


def test_a_refused_statement_reads_no_row(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The public phase opens the tables only as empty relations (footer or header)."""
    from dpkit.sql_statements import sources

    opened: list[bool] = []
    read = sources._file

    def watched(con: Any, path: str, empty: bool, *options: Any) -> Any:
        opened.append(empty)
        return read(con, path, empty, *options)

    monkeypatch.setattr(sources, "_file", watched)
    statement = "SELECT city, COUNT(*) FROM visits WHERE lower(minutes) = 'x' GROUP BY city"
    refusal(spec(statement=statement), folder)
    assert opened and all(opened)


@pytest.mark.parametrize(
    ("change", "where"),
    [
        ({"input": {"source": "inline", "values": [1]}}, "/input"),
        ({"privacy_unit": {"kind": "record"}}, "/privacy_unit"),
        ({"sql": None}, ""),
        ({"statistic": "count", "input": {"source": "inline", "values": [1]}}, "/sql"),
    ],
)
def test_the_schema_keeps_sql_fields_to_sql_queries(
    folder: Path, change: dict[str, Any], where: str
) -> None:
    document = {**spec(), **change}
    document = {k: v for k, v in document.items() if v is not None}
    assert any(pointer == where for pointer, _code in refusal(document, folder))


def test_dpkit_run_runs_a_sql_spec(folder: Path) -> None:
    path = folder / "spec.json"
    path.write_text(json.dumps(spec()), encoding="utf-8")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "dpkit",
            "run",
            str(path),
            "--ledger",
            str(folder / "l.sqlite"),
            "--json",
        ],
        capture_output=True,
        text=True,
        env=os.environ,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["results"][0]["statistic"] == "sql"
    shown = subprocess.run(
        [sys.executable, "-m", "dpkit", "run", str(path), "--ledger", str(folder / "l.sqlite")],
        capture_output=True,
        text=True,
        env=os.environ,
    )
    assert shown.returncode == 0, shown.stderr
    lines = {line.split("/")[-1].split()[0]: line for line in shown.stdout.splitlines()}
    assert "±" in lines["visits"] and "(95%)" in lines["visits"]  # each value, its interval
    assert "[" in lines["mean_minutes"] and "(95%)" in lines["mean_minutes"]


JOINED = (
    "SELECT region, COUNT(*) AS visits FROM visits "
    "JOIN regions ON visits.city = regions.city GROUP BY region"
)


def test_a_sql_query_joins_its_public_tables(folder: Path) -> None:
    """``public`` names the lookup tables a JOIN reads (read whole before the spend, each join
    key unique there); the released groups come from the public table's column."""
    pd.DataFrame({"city": ["a", "b"], "region": ["north", "south"]}).to_csv(
        folder / "regions.csv", index=False
    )
    public = {"regions": {"source": "csv", "path": "regions.csv"}}
    document = run_spec(
        spec(statement=JOINED, public=public, bounds=None, keys=["north", "south"]),
        base_dir=folder,
        ledger=folder / "joined.sqlite",
    )
    (result,) = document["results"]
    assert [row["region"] for row in result["estimate"]] == ["north", "south"]
    # without the public table the JOIN is refused at the statement, nothing spent
    assert refusal(spec(statement=JOINED, bounds=None, keys=["north"]), folder) == [
        ("/sql/statement", "invalid_sql")
    ]
    # a repeated key would let one private row match twice: refused before the spend
    pd.DataFrame({"city": ["a", "a"], "region": ["north", "south"]}).to_csv(
        folder / "regions.csv", index=False
    )
    assert refusal(spec(statement=JOINED, public=public, bounds=None, keys=["north"]), folder) == [
        ("/sql/statement", "invalid_sql")
    ]
    missing = {"regions": {"source": "csv", "path": "nowhere.csv"}}
    assert refusal(spec(statement=JOINED, public=missing, bounds=None), folder)[0][0] == (
        "/sql/public/regions/path"
    )
