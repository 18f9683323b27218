"""The spec's local ``mean`` statistic: a mean protocol named as such.

``{"statistic": "mean", "mechanism": {"name": "hm", "params": {"lower": 18, "upper": 90}}}`` runs
a local mean protocol (one report per record, the estimator's mean, variance and interval);
without ``mechanism`` the same statistic is the central query, unchanged.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dpkit
from dpkit.spec import SpecInvalid, compose_schema, run_spec
from dpkit.spec.schema import frequency_mechanisms, mean_mechanisms

ROOT = Path(__file__).resolve().parents[3]


def _spec(**changes: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "dpkit": "1",
        "dataset": "ages",
        "session_budget": {"epsilon": 10.0},
        "statistic": "mean",
        "mechanism": {"name": "pm", "params": {"lower": 18, "upper": 90}},
        "input": {"source": "inline", "values": [23, 35, 41, 67, 52, 88, 19, 45]},
        "budget": {"epsilon": 1.0},
        "rng": {"mode": "fast", "seed": 3},
    }
    spec.update(changes)
    return spec


def _run(spec: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    return run_spec(spec, base_dir=tmp_path, ledger=tmp_path / "ledger.sqlite")


def _issues(spec: dict[str, Any], tmp_path: Path) -> list[tuple[str, str]]:
    with pytest.raises(SpecInvalid) as info:
        _run(spec, tmp_path)
    assert not (tmp_path / "ledger.sqlite").exists() or _spent(tmp_path) == 0
    return [(issue.pointer, issue.code) for issue in info.value.issues]


def _spent(tmp_path: Path) -> float:
    ledger = dpkit.Ledger(str(tmp_path / "ledger.sqlite"))
    try:
        return float(ledger.spent().epsilon)
    finally:
        ledger.close()


@pytest.mark.parametrize("name", ["duchi", "pm", "hm"])
def test_local_mean_runs(name: str, tmp_path: Path) -> None:
    spec = _spec(mechanism={"name": name, "params": {"lower": 18, "upper": 90}})
    result = _run(spec, tmp_path)["results"][0]
    assert result["statistic"] == "mean" and result["mechanism"]["name"] == name
    assert result["n"] == 8 and result["categories"] is None
    assert isinstance(result["estimate"], float) and result["variance"] > 0
    assert result["worst_case_variance"] > 0
    interval = result["confidence_interval"]
    assert interval["lower"] < result["estimate"] < interval["upper"]
    assert "sample variance of the reports" in interval["method"]
    assert result["spent"]["epsilon_exact"] == "1"
    (tmp_path / "again").mkdir()
    again = _run(spec, tmp_path / "again")["results"][0]
    assert again["estimate"] == result["estimate"]  # seeded: the same stream


def test_the_value_is_the_estimators(tmp_path: Path) -> None:
    """The result is dpkit.estimate of the mechanism's reports (same seed stream as the run)."""
    document = _run(_spec(rng={"mode": "secure"}), tmp_path)
    result = document["results"][0]
    assert result["randomness"] == {"mode": "secure", "seed": None}
    assert 18 - 200 < result["estimate"] < 90 + 200  # a noisy mean of 8 reports


def test_bad_values_are_coerced_not_refused(tmp_path: Path) -> None:
    """Out of range, missing or non-numeric cells are records too (clamped, or the midpoint)."""
    values = [23, None, "x", 500, -40, 1e308, 41]
    result = _run(_spec(input={"source": "inline", "values": values}), tmp_path)["results"][0]
    assert result["n"] == len(values)


def test_empty_input_has_no_mean(tmp_path: Path) -> None:
    result = _run(_spec(input={"source": "inline", "values": []}), tmp_path)["results"][0]
    assert result["n"] == 0 and result["estimate"] is None and result["confidence_interval"] is None
    assert _spent(tmp_path) == 1.0  # spent: the number of records (public) was 0


def test_csv_column(tmp_path: Path) -> None:
    (tmp_path / "people.csv").write_text("age,x\n30,a\n40,b\nNA,c\n50,d\n", encoding="utf-8")
    spec = _spec(input={"source": "csv", "path": "people.csv", "column": "age"})
    assert _run(spec, tmp_path)["results"][0]["n"] == 4


def test_public_checks(tmp_path: Path) -> None:
    inverted = _spec(mechanism={"name": "hm", "params": {"lower": 90, "upper": 18}})
    assert _issues(inverted, tmp_path) == [("/mechanism/params/upper", "invalid_parameter")]
    with_params = _spec(params={"lower": 18, "upper": 90})
    assert ("/params", "schema") in _issues(with_params, tmp_path)
    for name in ("krr", "sw", "pm_multi", "laplace"):
        wrong = _spec(mechanism={"name": name})
        assert ("/mechanism/name", "unknown_mechanism") in _issues(wrong, tmp_path), name
    numeric_as_frequency = _spec(statistic="frequency")
    assert ("/mechanism/name", "unknown_mechanism") in _issues(numeric_as_frequency, tmp_path)
    unknown_param = _spec(mechanism={"name": "pm", "params": {"lower": 18, "upper": 90, "k": 3}})
    assert _issues(unknown_param, tmp_path)[0][0].startswith("/mechanism/params")


def test_central_mean_is_unchanged(tmp_path: Path) -> None:
    spec = _spec(params={"lower": 18, "upper": 90})
    del spec["mechanism"]
    result = _run(spec, tmp_path)["results"][0]
    assert result["mechanism"]["name"] == "mean" and result["n"] is None


def test_session_mixes_local_and_central_queries(tmp_path: Path) -> None:
    spec = {
        "dpkit": "1",
        "dataset": "ages",
        "budget": {"epsilon": 2.0},
        "defaults": {
            "input": {"source": "inline", "values": [23, 35, 41, 67]},
            "rng": {"mode": "fast", "seed": 1},
        },
        "queries": [
            {
                "id": "local",
                "statistic": "mean",
                "mechanism": {"name": "duchi", "params": {"lower": 0, "upper": 100}},
                "budget": {"epsilon": 1},
            },
            {
                "id": "central",
                "statistic": "mean",
                "params": {"lower": 0, "upper": 100},
                "budget": {"epsilon": 1},
            },
        ],
    }
    results = _run(spec, tmp_path)["results"]
    assert [r["mechanism"]["name"] for r in results] == ["duchi", "mean"]
    assert _spent(tmp_path) == 2.0


def test_schema_lists_mean_mechanisms_apart() -> None:
    registry = dpkit.get_registry()
    assert mean_mechanisms(registry) == ["duchi", "hm", "pm"]
    assert not set(mean_mechanisms(registry)) & set(frequency_mechanisms(registry))
    schema = json.dumps(compose_schema("query", registry))
    assert '"pm"' in schema and '"duchi"' in schema


def test_dry_run_reads_no_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Planning a local mean runs the mechanism on a public stand-in only."""
    from dpkit.spec import plan_spec

    seen: list[np.ndarray] = []
    original = dpkit.get_registry().info("pm").cls.randomize

    def spy(self: Any, values: Any, /, **kwargs: Any) -> Any:
        seen.append(np.asarray(values))
        return original(self, values, **kwargs)

    monkeypatch.setattr(dpkit.get_registry().info("pm").cls, "randomize", spy)
    plan_spec(_spec(), registry=dpkit.get_registry(), base_dir=tmp_path)
    assert len(seen) == 1 and seen[0].tolist() == [18.0]  # a stand-in 0, clamped into [18, 90]
