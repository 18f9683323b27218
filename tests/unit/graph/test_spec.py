"""The ``graph`` statistic of a JSON spec: an edge list through ``dpkit run``, its cost per
edge, typed refusals at the field before any data is read, and total processing of the
records after the spend."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from dpkit_ldp.graph_query import GraphQuery

import dpkit
from dpkit.spec import run_spec
from dpkit.spec.issues import SpecInvalid

EDGES = "source,target\n0,1\n1,2\n2,0\n2,3\n3,4\n4,2\n5,6\n"


def _query(params: dict[str, Any], epsilon: float = 1.0, **extra: Any) -> dict[str, Any]:
    return {
        "statistic": "graph",
        "input": {"source": "csv", "path": "edges.csv", "column": "source"},
        "params": params,
        "budget": {"epsilon": epsilon},
        **extra,
    }


def _spec(*queries: dict[str, Any]) -> dict[str, Any]:
    return {
        "dpkit": "1",
        "dataset": "friends",
        "budget": {"epsilon": 10.0},
        "queries": list(queries),
    }


def test_a_graph_query_runs_through_dpkit_run(tmp_path: Path) -> None:
    (tmp_path / "edges.csv").write_text(EDGES)
    spec = _spec(
        _query({"protocol": "graph_rr", "estimate": "edges", "nodes": 8}),
        _query({"protocol": "graph_degree", "estimate": "degree_distribution", "nodes": 8}, 2.0),
        _query(
            {"protocol": "graph_triangles", "estimate": "triangles", "nodes": 8, "max_degree": 3},
            2.0,
        ),
    )
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    command = [sys.executable, "-m", "dpkit", "run", "spec.json", "--ledger", "l.sqlite"]
    done = subprocess.run(
        [*command, "--seed", "5", "--json"],
        cwd=tmp_path,
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)["results"]
    assert [r["spent"]["epsilon_exact"] for r in results] == ["1", "2", "2"]
    edges, distribution, triangles = results
    assert edges["variance_kind"] == "exact" and np.isfinite(edges["estimate"])
    assert len(distribution["estimate"]) == 8  # nodes of each degree 0 .. n − 1
    assert triangles["variance_kind"] == "unbiased" and "max_degree = 3" in triangles["note"]
    for result in (edges, triangles):  # the interval every result gives, about the estimate
        interval = result["confidence_interval"]
        half = 1.959963984540054 * np.sqrt(result["variance"])
        assert interval["level"] == 0.95 and interval["method"].startswith("normal")
        assert interval["lower"] == pytest.approx(result["estimate"] - half)
        assert interval["upper"] == pytest.approx(result["estimate"] + half)
    assert len(distribution["confidence_interval"]["lower"]) == 8
    shown = subprocess.run(
        [*command.copy()[:-2], "--ledger", "again.sqlite", "--seed", "5"],
        cwd=tmp_path,
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    table = lines[2 : lines.index("how each interval was computed:")]
    assert len(table) == 1 + 8 + 1, shown.stdout  # a row per degree 0 .. 7
    assert all("±" in line for line in table), shown.stdout


def test_the_query_is_charged_one_edge_of_its_protocol() -> None:
    for params, node_epsilon in (
        ({"protocol": "graph_rr"}, 1.2),
        ({"protocol": "graph_degree", "estimate": "degrees"}, 0.6),  # two degrees per edge
        ({"protocol": "graph_kstar", "estimate": "kstars", "max_degree": 3}, 0.6),
    ):
        query = GraphQuery(epsilon=1.2, nodes=5, **params)
        assert query.privacy.epsilon == pytest.approx(1.2)
        assert query.mechanism.epsilon == pytest.approx(node_epsilon)
    two = GraphQuery(epsilon=1.2, nodes=5, protocol="graph_one_round", estimate="kstars", split=0.5)
    assert (two.mechanism.epsilon1, two.mechanism.epsilon2) == pytest.approx((0.6, 0.3))
    assert two.privacy.epsilon == pytest.approx(1.2)


def test_bad_parameters_are_refused_at_their_field_before_any_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def never(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the data were read")

    monkeypatch.setattr(GraphQuery, "edges", never)
    (tmp_path / "edges.csv").write_text(EDGES)
    ledger = tmp_path / "l.sqlite"

    def refused(*queries: dict[str, Any]) -> dict[str, str]:
        with pytest.raises(SpecInvalid) as error:
            run_spec(_spec(*queries), base_dir=tmp_path, ledger=ledger)
        return {issue.pointer: issue.code for issue in error.value.issues}

    # What the schema decides (the query's own rule: estimate, bound, input, unit).
    assert refused(
        _query({"protocol": "graph_degree", "estimate": "triangles", "nodes": 8}),
        _query({"protocol": "graph_kstar", "estimate": "kstars", "nodes": 8}),
        _query({"protocol": "graph_rr", "nodes": 8, "max_degree": 3}),
        {**_query({"nodes": 8}), "input": {"source": "inline", "values": [1, 2]}},
        _query({"nodes": 8}, privacy_unit={"kind": "id", "column": "source", "max_rows": 1}),
        _query({"nodes": 1, "split": 1.0}),
    ) == {
        "/queries/0/params/estimate": "schema",
        "/queries/1/params": "schema",  # max_degree is required there
        "/queries/2/params/max_degree": "schema",
        "/queries/3/input/source": "schema",
        "/queries/4/privacy_unit/kind": "schema",
        "/queries/5/params/nodes": "schema",
        "/queries/5/params/split": "schema",
    }
    # What the file's header decides, still before any value is read.
    assert refused(_query({"nodes": 8, "target_column": "to"})) == {
        "/queries/0/params/target_column": "column_not_found"
    }
    assert not ledger.exists()  # nothing spent


def test_records_that_are_not_edges_are_dropped_without_an_exception() -> None:
    query = GraphQuery(epsilon=600.0, nodes=4, protocol="graph_degree", estimate="degrees")
    table = pa.table(
        {
            "source": [0.0, 1.0, 1.0, np.nan, 2.5, -1.0, 3.0, 9.0, 2.0],
            "target": [1.0, 0.0, 2.0, 1.0, 3.0, 2.0, 3.0, 1.0, 3.0],
        }
    )
    np.testing.assert_array_equal(query.edges(table), [[1, 0], [2, 1], [3, 2]])
    estimate = query.run(table, rng=np.random.default_rng(0))
    np.testing.assert_array_equal(np.round(estimate.estimates), [1, 2, 2, 1])
    empty = query.run(pa.table({"a": pa.array([], pa.float64())}), rng=np.random.default_rng(0))
    assert isinstance(empty, dpkit.graph.GraphEstimate)
