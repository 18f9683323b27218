"""SQL statements audited whole on id neighbours, in both randomness modes, and the leaks the
audit must catch.

``dpkit.sql(...)`` (both boundings: numpy after DuckDB's per-record steps, and inside DuckDB)
and a spec's ``sql`` query, on D and D′ = D plus one person x with eight rows in every city
(:mod:`support.replica_audit`: many replicas of D or D′ in one table, each released
independently; the events chosen on one batch, certified on a fresh one). A correct statement
passes in fast and in secure mode; a statement whose per-person cap is lost — in the DuckDB
pushdown of the bounding, or by declaring no privacy unit — is caught; and a statement that
leaks in secure mode only is caught there, so secure mode is what the secure audit sampled.

False positives: each certificate exceeds a correct query's ε with probability ≤ α = 1e-7 per
direction (:mod:`support.replica_audit`), so an audit of both modes falsely alarms with
probability ≤ 4e-7. The leaks move every cell by 8 rows (24 for x's sum) against noise
calibrated to one row: their certified bounds are far above 2ε.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest
from support.replica_audit import (
    REPLICAS,
    audit_modes,
    by_replica,
    replica_keys,
    replicated,
)

import dpkit
import dpkit.tables._duckdb as duckdb_engine

pytest.importorskip("duckdb")
pytest.importorskip("sqlglot")
pq = pytest.importorskip("pyarrow.parquet")

EPSILON = 1.0
STATEMENT = (
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, privacy_unit_column = user, "
    "max_groups_contributed = 1) city, COUNT(*) AS n, "
    "SUM(minutes, contribution_bounds_per_group => (0, 10)) AS total FROM visits GROUP BY city"
)
#: The same statement with no privacy unit: every row is its own unit, none is capped.
UNCAPPED = STATEMENT.replace(", privacy_unit_column = user, max_groups_contributed = 1", "")
#: Private keys: the groups are found in the data by partition selection (δ = 1e-6).
SELECTED = STATEMENT.replace("epsilon = 1,", "epsilon = 1, delta = 1e-6,")
TABLES = {with_x: replicated(with_x) for with_x in (False, True)}


def _release(query: Any) -> Any:
    """One release of ``query`` on the replicated D or D′, as (replicas, cells)."""

    def release(with_x: bool, rng: Any) -> np.ndarray:
        result = query.run({"visits": TABLES[with_x]}, rng=rng)
        columns = [[row[i] for row in result.rows] for i in (1, 2)]
        return by_replica([row[0] for row in result.rows], columns, REPLICAS)

    return release


def _sql(statement: str, **options: Any) -> Any:
    return dpkit.sql(statement, tables={"visits": TABLES[False]}, keys=replica_keys(), **options)


@pytest.mark.parametrize("bounding", ["numpy", "duckdb"])
def test_a_statement_passes_in_both_modes(bounding: str) -> None:
    found = audit_modes(_release(_sql(STATEMENT, bounding=bounding)), seed=1)
    assert set(found) == {"fast", "secure"}
    assert all(bound <= EPSILON for bound in found.values()), found


def test_a_statement_with_private_keys_passes_in_both_modes() -> None:
    """Partition selection decides which groups are released (a group left out is −∞): 36
    people per city, so that a city is released about half the time (its threshold is near
    there) and x's presence could show in whether it is."""
    replicas, tables = 1_000, {x: replicated(x, 1_000, per_city=36) for x in (False, True)}

    def release(with_x: bool, rng: Any) -> np.ndarray:
        result = dpkit.sql(SELECTED, tables={"visits": tables[with_x]}).run(rng=rng)
        columns = [[row[i] for row in result.rows] for i in (1, 2)]
        return by_replica([row[0] for row in result.rows], columns, replicas)

    found = audit_modes(release, delta=1e-6, seed=2)
    assert all(bound <= EPSILON for bound in found.values()), found


def test_a_statement_without_a_privacy_unit_is_caught() -> None:
    found = audit_modes(_release(_sql(UNCAPPED)), seed=3)
    assert all(bound > 2 * EPSILON for bound in found.values()), found


def test_the_duckdb_bounding_without_its_cap_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bounding pushed into DuckDB, keeping every row of every person: the statement still
    declares its unit and its noise is calibrated to it, so only the audit can see the leak."""
    statement = duckdb_engine.bounding_statement

    def uncapped(bounding: Any, *args: Any) -> str:
        wide = attrs.evolve(bounding, max_rows=10**6, max_groups=10**6)
        return statement(wide, *args)

    monkeypatch.setattr(duckdb_engine, "bounding_statement", uncapped)
    found = audit_modes(_release(_sql(STATEMENT, bounding="duckdb")), seed=4)
    assert all(bound > 2 * EPSILON for bound in found.values()), found


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
    found = audit_modes(_release(query), seed=5)
    assert found["fast"] <= EPSILON and found["secure"] > 2 * EPSILON, found


def test_a_spec_sql_query_passes_in_both_modes(tmp_path: Path) -> None:
    """A spec's ``sql`` query, bound to its Parquet files as ``dpkit run`` binds it; the
    replicas' keys beside the statement."""
    from dpkit.spec.data import DataPolicy
    from dpkit.spec.sql import bind_sql

    paths = {}
    for with_x, table in TABLES.items():
        paths[with_x] = tmp_path / f"visits_{int(with_x)}.parquet"
        pq.write_table(table, paths[with_x])
    spec: dict[str, Any] = {
        "id": "visits",
        "statistic": "sql",
        "sql": {
            "statement": "SELECT city, COUNT(*) AS n, "
            "SUM(minutes, contribution_bounds_per_group => (0, 10)) AS total "
            "FROM visits GROUP BY city",
            "tables": {"visits": {"source": "parquet", "path": paths[False].name}},
            "options": {"privacy_unit_column": "user", "max_groups_contributed": 1},
            "keys": replica_keys(),
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

    def release(with_x: bool, rng: Any) -> np.ndarray:
        result = bound[with_x].run(rng=rng)
        columns = [[row[i] for row in result.rows] for i in (1, 2)]
        return by_replica([row[0] for row in result.rows], columns, REPLICAS)

    found = audit_modes(release, seed=6)
    assert all(value <= EPSILON for value in found.values()), found
