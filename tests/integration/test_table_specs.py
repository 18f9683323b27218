"""Grouped and per-id specs through ``dpkit run``: the result document, the readable table,
``--plan`` (nothing spent, no ledger, no data read), and plan-time refusals that point at the
field."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import dpkit
from dpkit.spec import DataPolicy, SpecInvalid, plan_spec, run_spec

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "schemas" / "examples"
VISITS = EXAMPLES / "valid" / "visits_by_city.json"
SCRIPT = Path(sys.executable).with_name("dpkit")
#: The example specs read data/*.csv beside them: their data root is their own directory.
ROOTED = DataPolicy(root=VISITS.parent)


def dpkit_cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *map(str, args)], capture_output=True, text=True, check=False
    )


def test_grouped_id_level_session(tmp_path: Path) -> None:
    spec = json.loads(VISITS.read_text())
    document = run_spec(spec, base_dir=VISITS.parent, ledger=tmp_path / "l.sqlite", policy=ROOTED)
    results = {r["query_id"]: r for r in document["results"]}
    visits = results["visits"]
    assert visits["group_by"] == ["city"]
    assert [k[0] for k in visits["keys"]] == ["Lyon", "Paris", "Lille", "Nantes", "Rennes", "Nice"]
    assert len(visits["estimate"]) == 6 and len(visits["confidence_interval"]["lower"]) == 6
    assert visits["privacy_unit"] == {
        "kind": "id", "column": "user", "max_rows": 3, "max_groups": 2
    }  # fmt: skip
    devices = results["devices"]
    assert devices["categories"] == ["phone", "laptop", "tablet"]
    assert all(len(row) == 3 for row in devices["estimate"])
    # Brest is held by one person (3 rows): released with probability ≤ δ/G = 2.5e-7 (the
    # false-positive rate of this assertion); the big cities have hundreds of ids.
    cities = {k[0] for k in devices["keys"]}
    assert "Brest" not in cities and {"Lyon", "Paris"} <= cities
    assert devices["spent"]["epsilon_exact"] == "3/2"  # statistic 1 + selection 1/2
    median = results["median-minutes"]
    assert "keys" not in median and isinstance(median["estimate"], float)
    entries = dpkit.Ledger(str(tmp_path / "l.sqlite")).entries()
    recorded = entries[0].parameters
    assert recorded["unit"] == {"kind": "id", "column": "user", "max_rows": 3, "max_groups": 2}
    assert recorded["by"] == ["city"]


def test_the_readable_table_and_the_plan(tmp_path: Path) -> None:
    ledger = tmp_path / "l.sqlite"
    plan = dpkit_cli("run", VISITS, "--ledger", ledger, "--plan")
    assert plan.returncode == 0, plan.stderr
    assert not ledger.exists()  # --plan opens no ledger, spends nothing
    lines = plan.stdout.splitlines()
    assert lines[0].split()[:5] == ["query", "statistic", "cost", "noise", "±"]
    assert any(line.startswith("devices") and "a key needs" in line for line in lines)
    assert "nothing was spent" in lines[-1]
    planned = json.loads(dpkit_cli("run", VISITS, "--plan", "--json").stdout)
    assert planned["spent"] is False and planned["total"]["epsilon_exact"] == "11/2"
    visits = planned["queries"][0]
    assert visits["accuracy"]["half_width"] > 0 and visits["accuracy"]["noise"]["distribution"]

    run = dpkit_cli("run", VISITS, "--ledger", ledger)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[0].split()[:4] == ["query", "statistic", "group", "value"]
    assert "Lyon" in run.stdout and "Brest" not in run.stdout
    assert run.stderr == ""
    refused = dpkit_cli("run", VISITS, "--ledger", ledger)
    assert refused.returncode == 3 and refused.stdout == ""
    assert refused.stderr.startswith("dpkit: error: 1 problem; nothing was spent")


def _spec(query: dict[str, Any]) -> dict[str, Any]:
    base = {
        "dpkit": "1",
        "session_budget": {"epsilon": 10},
        "statistic": "count",
        "input": {"source": "csv", "path": "data/visits.csv", "column": "minutes"},
        "budget": {"epsilon": 0.5},
    }
    base.update(query)
    return base


@pytest.mark.parametrize(
    ("change", "pointer", "code"),
    [
        (
            {"statistic": "frequency", "mechanism": {"name": "krr", "params": {"k": 2}},
             "group_by": {"columns": ["city"], "keys": ["Lyon"]}},
            "/group_by",
            "invalid_parameter",
        ),
        (
            {"input": {"source": "inline", "values": [1, 2]},
             "group_by": {"columns": ["city"], "keys": ["Lyon"]}},
            "/input/source",
            "invalid_parameter",
        ),
        (
            {"group_by": {"columns": ["city"], "keys": "private",
                          "selection": {"epsilon": 1e-7, "delta": 1e-9}}},
            "/group_by/selection/epsilon",
            "invalid_parameter",
        ),
        (
            {"group_by": {"columns": ["city", "device"], "keys": ["Lyon"]}},
            "/group_by/keys",
            "invalid_parameter",
        ),
        ({"privacy_unit": {"kind": "id", "column": "user"}}, "/privacy_unit", "schema"),
        (
            {"privacy_unit": {"kind": "id", "column": "minutes", "max_rows": 1}},
            "/privacy_unit/column",
            "invalid_parameter",
        ),
        ({"group_by": {"columns": ["city"], "keys": "all"}}, "/group_by/keys", "schema"),
    ],
)  # fmt: skip
def test_refused_before_anything_is_read(change: dict[str, Any], pointer: str, code: str) -> None:
    with pytest.raises(SpecInvalid) as info:
        plan_spec(
            _spec(change), registry=dpkit.get_registry(), base_dir=VISITS.parent, policy=ROOTED
        )
    found = [(i.pointer, i.code) for i in info.value.issues]
    assert (pointer, code) in found, found


def test_progress_is_off_when_stderr_is_not_a_terminal(tmp_path: Path) -> None:
    env = dict(os.environ)
    result = subprocess.run(
        [str(SCRIPT), "run", str(VISITS), "--ledger",
         str(tmp_path / "l.sqlite"), "--json"],
        capture_output=True, text=True, check=False, env=env,
    )  # fmt: skip
    assert result.returncode == 0 and result.stderr == ""
