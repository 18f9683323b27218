"""``dpkit graph``: a graph's statistics from an edge list, charged per edge to a ledger, with
the edges read only after the spend and every non-edge line dropped (total)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import dpkit
from dpkit.cli import main


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def _json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> dict:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_junk_lines_are_dropped_and_change_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clean = _write(tmp_path / "clean.csv", "i,j\n0,1\n1,2\n2,0\n2,3\n3,4\n")
    junk = _write(
        tmp_path / "junk.csv", "i,j\n0,1\nx,y\n1,2\n5,5\n2,0\n\n2,3\n99,1\n3,4\n1,0\n4\n-1,2\n"
    )
    argv = ["graph", "--nodes", "5", "--mechanism", "graph_rr", "--epsilon", "2", "--seed", "3"]
    a = _json(capsys, [*argv, str(clean), "--json"])
    b = _json(capsys, [*argv, str(junk), "--json"])
    a.pop("release_id"), b.pop("release_id")
    assert a == b
    assert set(a["estimates"]) == {"edges", "degrees", "triangles"}


def test_charged_per_edge_and_refused_before_reading(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    edges = _write(tmp_path / "edges.csv", "i,j\n0,1\n1,2\n")
    ledger = str(tmp_path / "ledger.db")
    base = ["graph", str(edges), "--nodes", "3", "--epsilon", "1", "--ledger", ledger]
    payload = _json(
        capsys,
        [*base, "--mechanism", "graph_rr", "--param", 'pairs="both"', "--budget", "3", "--json"],
    )
    assert payload["epsilon_per_node"] == 1 and payload["epsilon_per_edge"] == 2
    assert main([*base, "--mechanism", "graph_degree"]) == 3  # 2ε more does not fit
    assert main([*base, "--mechanism", "graph_rr", "--param", "mu=0.3"]) == 2
    assert main([*base, "--mechanism", "graph_rr", "--statistic", "kstars"]) == 2
    missing = ["graph", str(tmp_path / "none.csv"), "--nodes", "3", "--epsilon", "1"]
    assert main([*missing, "--ledger", ledger, "--mechanism", "graph_rr"]) == 2
    capsys.readouterr()
    with dpkit.Session(ledger=ledger) as session:
        assert session.spent.epsilon == 2  # only the first release was charged
    assert main([*base, "--mechanism", "graph_rr"]) == 0  # ε once more: fits exactly
    assert "per edge" in capsys.readouterr().out
