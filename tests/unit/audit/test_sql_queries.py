"""SQL statements audited whole on id neighbours (:func:`dpkit.testing.audit_sql`), in both
randomness modes, the leaks the audit must catch, and what it refuses before running.

D has four people with one row each in every city; D′ adds x with eight rows in every city
(:mod:`support.replica_audit`). ``dpkit.sql(...)`` (both boundings: numpy after DuckDB's
per-record steps, and inside DuckDB) and a spec's ``sql`` query pass in fast and in secure
mode; a statement whose per-person cap is lost — in the DuckDB pushdown of the bounding, or by
declaring no privacy unit — is caught; and a statement that leaks in secure mode only is caught
there, so secure mode is what the secure audit sampled.

False positives: each audit runs at α = 2e-7 over its two modes, so a correct statement is
reported as a violation with probability ≤ 2e-7 (:mod:`dpkit.testing.table_audit`; the rate
holds for any number of replicas). The leaks move every cell by 8 rows (80 for x's clamped
sum) against noise calibrated to one row: their certified bounds are far above 2ε even with
1,000 replicas.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest
from support.replica_audit import CITIES, cells, person, replica_keys, replicated, visits

import dpkit
import dpkit.tables._duckdb as duckdb_engine
from dpkit.testing import audit_sql
from dpkit.testing.table_audit import audit_releases

pytest.importorskip("duckdb")
pytest.importorskip("sqlglot")
pq = pytest.importorskip("pyarrow.parquet")

EPSILON = 1.0
ALPHA = 2e-7
REPLICAS = 1_000
STATEMENT = (
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, privacy_unit_column = user, "
    "max_groups_contributed = 1) city, COUNT(*) AS n, "
    "SUM(minutes, contribution_bounds_per_group => (0, 10)) AS total FROM visits GROUP BY city"
)
#: The same statement with no privacy unit: every row is its own unit, none is capped.
UNCAPPED = STATEMENT.replace(", privacy_unit_column = user, max_groups_contributed = 1", "")
#: Private keys: the groups are found in the data by partition selection (δ = 1e-6).
SELECTED = STATEMENT.replace("epsilon = 1,", "epsilon = 1, delta = 1e-6,")


def _audit(statement: str, **options: Any) -> Any:
    options.setdefault("keys", list(CITIES))
    options.setdefault("replicas", REPLICAS)
    return audit_sql(statement, table=visits(), person=person(), alpha=ALPHA, seed=1, **options)


@pytest.mark.parametrize("bounding", ["numpy", "duckdb"])
def test_a_statement_passes_in_both_modes(bounding: str) -> None:
    report = _audit(STATEMENT, bounding=bounding)
    assert report.verdicts == {"fast": "pass", "secure": "pass"}, report.format_text()
    assert report.claimed_epsilon == EPSILON and report.subject == "query"


def test_a_statement_with_private_keys_passes_in_both_modes() -> None:
    """Partition selection decides which groups are released (a group left out is −∞): 36
    people per city, so that a city is released about half the time (its threshold is near
    there) and x's presence could show in whether it is."""
    report = audit_sql(
        SELECTED, table=visits(per_city=36), person=person(), alpha=ALPHA, seed=2, replicas=1_000
    )
    assert report.claimed_delta == 1e-6
    assert report.verdicts == {"fast": "pass", "secure": "pass"}, report.format_text()


def _caught(report: Any, *, above: float = 2 * EPSILON) -> None:
    """A violation in both modes, each certifying an ε above ``above``."""
    assert report.verdict == "violation", report.format_text()
    bounds = [report.mode(mode).epsilon_lower_bound for mode in ("fast", "secure")]
    assert all(bound > above for bound in bounds), report.format_text()


def test_a_statement_without_a_privacy_unit_is_caught() -> None:
    _caught(_audit(UNCAPPED, privacy_unit="user"))


def test_the_duckdb_bounding_without_its_cap_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bounding pushed into DuckDB, keeping every row of every person: the statement still
    declares its unit and its noise is calibrated to it, so only the audit can see the leak.
    The statement allows two rows per person and city (an aggregate allowing one reads only
    the first kept row of each person and city, which would cap the rows again)."""
    statement = duckdb_engine.bounding_statement

    def uncapped(bounding: Any, *args: Any) -> str:
        wide = attrs.evolve(bounding, max_rows=10**6, max_groups=10**6)
        return statement(wide, *args)

    monkeypatch.setattr(duckdb_engine, "bounding_statement", uncapped)
    two_rows = STATEMENT.replace("= 1) city", "= 1, max_rows_contributed = 2) city")
    assert two_rows != STATEMENT
    # Its noise is calibrated to two rows per person and city, against which x's 8 rows in
    # each of 3 cities are a smaller leak: certified above ε in both modes (not above 2ε).
    _caught(_audit(two_rows, bounding="duckdb"), above=EPSILON)


TABLES = {with_x: replicated(with_x, REPLICAS) for with_x in (False, True)}


def _sql(statement: str) -> Any:
    return dpkit.sql(statement, tables={"visits": TABLES[False]}, keys=replica_keys(REPLICAS))


def _releases(query: Any, tables: Any = None) -> Any:
    def release(with_x: bool, rng: Any) -> np.ndarray:
        data = {"visits": TABLES[with_x]} if tables is None else None
        run = query.run(data, rng=rng) if tables is None else tables[with_x].run(rng=rng)
        return cells(run, REPLICAS)

    return release


@attrs.frozen
class SecureOnlyLeak:
    """The statement in fast mode, its uncapped variant in secure mode (a keyed SecureRandom):
    a leak that an audit of fast mode alone would miss."""

    good: Any
    leaky: Any

    def run(self, data: Any, /, *, rng: Any) -> Any:
        fast = isinstance(rng, np.random.Generator)
        return (self.good if fast else self.leaky).run(data, rng=rng)


def test_a_leak_in_secure_mode_only_is_caught_there() -> None:
    query = SecureOnlyLeak(_sql(STATEMENT), _sql(UNCAPPED))
    report = audit_releases(_releases(query), epsilon=EPSILON, alpha=ALPHA, seed=5)
    assert report.verdicts == {"fast": "pass", "secure": "violation"}, report.format_text()
    assert report.mode("secure").epsilon_lower_bound > 2 * EPSILON


def test_a_spec_sql_query_passes_in_both_modes(tmp_path: Path) -> None:
    """A spec's ``sql`` query, bound to its Parquet files as ``dpkit run`` binds it; the
    replicas' keys beside the statement."""
    from dpkit.spec.data import DataPolicy
    from dpkit.spec.sql import bind_sql

    paths = {}
    for with_x, found in TABLES.items():
        paths[with_x] = tmp_path / f"visits_{int(with_x)}.parquet"
        pq.write_table(found, paths[with_x])
    spec: dict[str, Any] = {
        "id": "visits",
        "statistic": "sql",
        "sql": {
            "statement": "SELECT city, COUNT(*) AS n, "
            "SUM(minutes, contribution_bounds_per_group => (0, 10)) AS total "
            "FROM visits GROUP BY city",
            "tables": {"visits": {"source": "parquet", "path": paths[False].name}},
            "options": {"privacy_unit_column": "user", "max_groups_contributed": 1},
            "keys": replica_keys(REPLICAS),
        },
        "budget": {"epsilon": EPSILON},
    }
    bound = {}
    for with_x, path in paths.items():
        spec["sql"]["tables"]["visits"]["path"] = path.name
        query, issues = bind_sql(
            json.loads(json.dumps(spec)),
            "/queries/0",
            base_dir=tmp_path,
            policy=DataPolicy(),
            registry=dpkit.get_registry(),
        )
        assert not issues, issues
        bound[with_x] = query

    report = audit_releases(_releases(None, bound), epsilon=EPSILON, alpha=ALPHA, seed=6)
    assert report.verdicts == {"fast": "pass", "secure": "pass"}, report.format_text()


# -- refused before anything runs ------------------------------------------------------------

GROUPED = "SELECT city, COUNT(*) AS n FROM visits GROUP BY city"
BY_USER = {"epsilon": 1, "privacy_unit_column": "user", "max_groups_contributed": 1}


@pytest.mark.parametrize(
    ("statement", "options", "field"),
    [
        (
            "SELECT COUNT(*) AS n FROM visits",
            {"epsilon": 1, "privacy_unit_column": "user"},
            "GROUP BY",
        ),
        (
            "SELECT LOWER(city) AS c, COUNT(*) AS n FROM visits GROUP BY LOWER(city)",
            BY_USER,
            "GROUP BY",
        ),
        (GROUPED + " LIMIT 2", BY_USER, "LIMIT"),
        (
            "SELECT city, COUNT(*) AS n FROM visits WHERE city <> 'b' GROUP BY city",
            BY_USER,
            "column",
        ),
        ("SELECT COUNT(*) AS n FROM visits GROUP BY city", BY_USER, "SELECT"),
        (GROUPED, {"epsilon": 1}, "privacy_unit"),
        (GROUPED, {"epsilon": -1, "privacy_unit_column": "user"}, "OPTIONS"),
    ],
)
def test_what_the_audit_cannot_tell_apart_is_refused(
    statement: str, options: dict[str, Any], field: str
) -> None:
    with pytest.raises(dpkit.DPKitError) as caught:
        audit_sql(statement, table=visits(), options=options, keys=list(CITIES))
    error = caught.value
    assert getattr(error, "clause", getattr(error, "parameter", None)) == field, error


@pytest.mark.parametrize(
    ("arguments", "parameter"),
    [
        ({"replicas": 10}, "replicas"),
        ({"replicas": 10**6}, "replicas"),
        ({"privacy_unit": "city"}, "privacy_unit"),
        ({"table": visits().drop_columns(["user"])}, "table"),
        ({"table": {"visits": 1}}, "table"),
        ({"person": person().drop_columns(["minutes"])}, "person"),
        ({"alpha": 1.5}, "alpha"),
        ({"modes": ("slow",)}, "modes"),
    ],
)
def test_bad_arguments_are_refused_naming_them(arguments: dict[str, Any], parameter: str) -> None:
    arguments = {"table": visits(), **arguments}
    with pytest.raises(dpkit.errors.InvalidParameter) as caught:
        audit_sql(GROUPED, options=BY_USER, keys=list(CITIES), **arguments)
    assert caught.value.parameter == parameter


# -- dpkit audit --sql -------------------------------------------------------------------------

SCRIPT = Path(sys.executable).with_name("dpkit")


def test_the_command_audits_a_statement_and_exits_one_on_a_leak(tmp_path: Path) -> None:
    """The installed command on a small case: the uncapped statement audited per person (x:
    every row of D twice, 8 in each city), fast mode, 300 replicas, α = 1e-7."""
    pq.write_table(visits(), tmp_path / "visits.parquet")
    run = subprocess.run(
        [
            str(SCRIPT),
            "audit",
            "--sql",
            UNCAPPED,
            "--table",
            "visits=visits.parquet",
            "--privacy-unit",
            "user",
            "--keys",
            "a,b,c",
            "--samples",
            "300",
            "--mode",
            "fast",
            "--alpha",
            "1e-7",
            "--json",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert run.returncode == 1, run.stderr
    record = json.loads(run.stdout)
    assert record["verdicts"] == {"fast": "violation"} and record["subject"] == "query"
    assert record["epsilon_lower_bound"] > EPSILON
    assert "auditing the statement" in run.stderr


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["--sql", GROUPED], "--table"),
        (["count", "--sql", GROUPED, "--table", "v.parquet"], "--sql"),
        (["--sql", GROUPED, "--table", "missing.parquet"], "--table"),
        (["--sql", GROUPED, "--table", "v.parquet", "--table", "v.parquet"], "--table"),
        (["--sql", GROUPED, "--table", "v.parquet", "--person", "x.txt"], "--person"),
        (["--sql", GROUPED, "--table", "v.parquet", "--param", "epsilon=1"], "--param"),
        (["--sql", GROUPED, "--table", "v.parquet", "--option", "epsilon"], "--option"),
        (["--sql", GROUPED, "--table", "v.parquet", "--samples", "5"], "--samples"),
        (["--sql", GROUPED, "--table", "other=v.parquet", "--option", "epsilon=1"], "FROM"),
        (["count", "--keys", "a,b"], "--keys"),
    ],
)
def test_the_command_refuses_bad_flags_naming_them(
    argv: list[str], flag: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    from dpkit.cli import main

    pq.write_table(visits(), tmp_path / "v.parquet")
    monkeypatch.chdir(tmp_path)
    assert main(["audit", *argv, "--json"]) == 2
    out, err = capsys.readouterr()
    assert flag in out + err and "Traceback" not in err


def test_releases_that_never_hold_a_value_check_nothing() -> None:
    """Every group left out in every replica: nothing to compare is no pass."""

    def absent(with_x: bool, rng: Any) -> np.ndarray:
        return np.full((100, 3), -np.inf)

    report = audit_releases(absent, epsilon=EPSILON)
    assert report.verdict == "unchecked" and "left out" in report.reason
