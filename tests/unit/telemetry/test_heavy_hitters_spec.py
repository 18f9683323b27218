"""The spec's ``heavy_hitters`` statistic: a heavy-hitter protocol over a column of items.

``{"statistic": "heavy_hitters", "mechanism": {"name": "pem", "params": {"bits": 32, "top": 5}}}``
randomizes each record's item on the client side of the protocol, decodes the reports with its
estimator and releases the items found with their counts; its parameters are checked before
anything is read or spent.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest

import dpkit
from dpkit.spec import SpecInvalid, compose_schema, plan_spec, run_spec
from dpkit.spec.columnar import FileTable
from dpkit.spec.plan import heavy_hitter_items
from dpkit.spec.schema import frequency_mechanisms, heavy_hitter_mechanisms, mean_mechanisms

ROOT = Path(__file__).resolve().parents[3]

#: Three frequent languages and 1500 rare two-letter items (uppercase: their prefixes share
#: none with the frequent ones beyond 3 bits) in 30,000 records. With bits=16 and step=4 both
#: protocols have 4 rounds of N = 7500 devices, where zh counts ≈ 1125; the noise of a round's
#: count has sd ≈ 8 (pem) or c·√N ≈ 114 (treehist's tree at ε = 2), the sampling sd ≈ 29, so
#: zh beats every other candidate (≤ 64 a round, each with a count below 100) by more than 7
#: sd: P(missed) < 1e-9 by the union bound. Their order: treehist's counts (all n at ε = 2,
#: sd ≈ 227) differ by ≥ 4500, pem's last round's (sd < 40) by ≥ 1125 — over 13 sd each. The
#: order assertions fail with probability < 1e-6.
RARE = [chr(65 + i // 26) + chr(65 + i % 26) for i in range(676)]
LANGUAGES = ["en"] * 15000 + ["es"] * 9000 + ["zh"] * 4500 + [RARE[i % 676] for i in range(1500)]


def _csv(tmp_path: Path) -> None:
    order = np.random.default_rng(0).permutation(len(LANGUAGES))
    rows = "\n".join(f"{LANGUAGES[i]},{'ab'[i % 2]}" for i in order)
    (tmp_path / "languages.csv").write_text(f"language,device\n{rows}\n", encoding="utf-8")


def _spec(**changes: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "dpkit": "1",
        "dataset": "app-languages",
        "session_budget": {"epsilon": 10.0},
        "statistic": "heavy_hitters",
        "mechanism": {"name": "pem", "params": {"bits": 16, "top": 3, "step": 4}},
        "input": {"source": "csv", "path": "languages.csv", "column": "language"},
        "budget": {"epsilon": 4.0},
        "rng": {"mode": "fast", "seed": 5},
    }
    spec.update(changes)
    return spec


def _run(spec: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    return run_spec(spec, base_dir=tmp_path, ledger=tmp_path / "ledger.sqlite")


def _spent(tmp_path: Path) -> float:
    ledger = dpkit.Ledger(str(tmp_path / "ledger.sqlite"))
    try:
        return float(ledger.spent().epsilon)
    finally:
        ledger.close()


@pytest.mark.parametrize(
    "mechanism",
    [
        {"name": "pem", "params": {"bits": 16, "top": 3, "step": 4}},
        {"name": "treehist", "params": {"bits": 16, "top": 3, "step": 4}},
    ],
)
def test_heavy_hitters_run(mechanism: dict[str, Any], tmp_path: Path) -> None:
    _csv(tmp_path)
    document = _run(_spec(mechanism=mechanism), tmp_path)
    jsonschema.validate(document, compose_schema("result", dpkit.get_registry()))
    result = document["results"][0]
    assert result["statistic"] == "heavy_hitters"
    assert result["mechanism"]["name"] == mechanism["name"]
    assert result["n"] == len(LANGUAGES)
    # the three frequent items, most frequent first (LANGUAGES: fails with P < 1e-6)
    assert result["categories"] == ["en", "es", "zh"]
    assert result["items"] == [int.from_bytes(b.encode(), "big") for b in ("en", "es", "zh")]
    interval = result["confidence_interval"]
    assert interval["level"] == 0.95 and len(interval["lower"]) == 3
    assert all(v > 0 for v in result["variance"])
    assert result["unbiased"] is (mechanism["name"] == "treehist")
    assert result["spent"]["epsilon_exact"] == "4"
    assert _spent(tmp_path) == 4.0
    (tmp_path / "again").mkdir()
    _csv(tmp_path / "again")
    again = _run(_spec(mechanism=mechanism), tmp_path / "again")["results"][0]
    assert again["estimate"] == result["estimate"]  # seeded: the same stream


def test_dpkit_run_on_a_csv(tmp_path: Path) -> None:
    """The command line, end to end: the release table names the items found."""
    _csv(tmp_path)
    (tmp_path / "spec.json").write_text(json.dumps(_spec()), encoding="utf-8")
    run = subprocess.run(
        [sys.executable, "-m", "dpkit", "run", "spec.json", "--ledger", "l.sqlite", "--json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=os.environ,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)["results"][0]
    assert result["categories"] == ["en", "es", "zh"]


def test_bad_parameters_are_refused_before_anything_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pem's k = 100 heavy hitters need ⌈log2 100⌉ = 7 < bits: refused by the schema (the
    constructor's check, stated as a rule) at the parameter's pointer with what is allowed,
    nothing read, nothing spent."""
    _csv(tmp_path)
    read: list[str] = []
    original = FileTable.converted

    def spy(self: FileTable, column: str, *args: Any, **kwargs: Any) -> Any:
        read.append(column)
        return original(self, column, *args, **kwargs)

    monkeypatch.setattr(FileTable, "converted", spy)
    bad = _spec(mechanism={"name": "pem", "params": {"bits": 6, "top": 100}})
    with pytest.raises(SpecInvalid) as info:
        _run(bad, tmp_path)
    [issue] = info.value.issues
    assert issue.pointer == "/mechanism/params/top"
    assert "at most 32 for bits=6" in issue.message
    assert read == [] and (not (tmp_path / "ledger.sqlite").exists() or _spent(tmp_path) == 0)
    _run(_spec(), tmp_path)  # the spy sees a valid spec's reading (the test can fail)
    assert read == ["language"]


@pytest.mark.parametrize(
    ("change", "where"),
    [
        ({"params": {"top": 3}}, "/params"),
        ({"mechanism": {"name": "krr", "params": {"k": 3}}}, "/mechanism/name"),
        ({"mechanism": {"name": "pem", "params": {"bits": 65}}}, "/mechanism/params/bits"),
        ({"mechanism": {"name": "pem", "params": {"colour": 1}}}, "/mechanism/params"),
        ({"budget": {"epsilon": 1.0, "delta": 1e-6}}, "/budget/delta"),
        ({"group_by": {"columns": ["device"], "keys": ["a"]}}, "/group_by"),
    ],
)
def test_public_checks(change: dict[str, Any], where: str, tmp_path: Path) -> None:
    _csv(tmp_path)
    with pytest.raises(SpecInvalid) as info:
        _run(_spec(**change), tmp_path)
    assert where in [issue.pointer for issue in info.value.issues], info.value.as_dict()


def test_frequency_oracles_are_not_heavy_hitter_protocols(tmp_path: Path) -> None:
    spec = _spec(statistic="frequency")
    with pytest.raises(SpecInvalid) as info:
        _run(spec, tmp_path)
    assert "/mechanism/name" in [issue.pointer for issue in info.value.issues]


def test_the_constructor_refuses_what_the_schema_would() -> None:
    """Without the schema's rule the constructor's own check answers, at the same pointer."""
    from unittest.mock import patch

    from dpkit.spec import plan as spec_plan

    bad = _spec(
        mechanism={"name": "pem", "params": {"bits": 6, "top": 100}},
        input={"source": "inline", "values": ["en"]},
    )
    unchecked = patch.object(spec_plan, "_schema_issues", lambda *args: [])
    with unchecked, pytest.raises(SpecInvalid) as info:
        plan_spec(bad, registry=dpkit.get_registry(), base_dir=ROOT)
    [issue] = info.value.issues
    assert (issue.pointer, issue.code) == ("/mechanism/params/top", "invalid_parameter")
    assert issue.detail["allowed"] == "at most 2^5 for bits=6"


def test_the_schema_lists_the_protocols_apart() -> None:
    registry = dpkit.get_registry()
    assert heavy_hitter_mechanisms(registry) == ["pem", "treehist"]
    others = set(frequency_mechanisms(registry)) | set(mean_mechanisms(registry))
    assert not set(heavy_hitter_mechanisms(registry)) & others


def test_the_plan_prices_the_protocol(tmp_path: Path) -> None:
    """treehist's two reports compose to ε: the plan (and so the ledger) charges ε."""
    from dpkit.spec.preview import preview_spec

    _csv(tmp_path)
    spec = _spec(mechanism={"name": "treehist", "params": {"bits": 16, "split": 0.25}})
    planned = preview_spec(spec, base_dir=tmp_path)
    assert planned["queries"][0]["cost"]["epsilon_exact"] == "4"
    assert planned["total"]["epsilon_exact"] == "4"


def test_items_are_read_record_by_record() -> None:
    """Whole bytes: each cell's text (inline numbers as their JSON text); otherwise whole
    numbers in range are themselves and anything else −1 (a random item, later)."""
    cells = np.array(["en", None, 7, 1.5, True], dtype=object)
    assert heavy_hitter_items(cells, 16).tolist() == ["en", None, "7", "1.5", "true"]
    numbers = np.array([3.0, 15.0, 16.0, -1.0, 2.5, np.nan, np.inf])
    assert heavy_hitter_items(numbers, 4).tolist() == [3, 15, -1, -1, -1, -1, -1]


def test_integer_items_of_odd_width(tmp_path: Path) -> None:
    """bits = 12 is not whole bytes: the column is read as integers, named by their values.

    treehist at ε = 4 over 3 levels of N = 2000: 9's level count ≈ 667 against the tree's
    noise sd c·√N ≈ 59 and ≤ 48 candidates with counts ≤ 100 (> 8 sd: P < 1e-9); the final
    counts (sd ≈ 101) of 5 and 9 differ by 1000 (7 sd). Fails with probability < 1e-6."""
    values = [5] * 3000 + [9] * 2000 + [100 + 3 * i for i in range(1000)]
    spec = _spec(
        mechanism={"name": "treehist", "params": {"bits": 12, "top": 2, "step": 4}},
        input={"source": "inline", "values": values},
    )
    result = _run(spec, tmp_path)["results"][0]
    assert result["categories"] == [5, 9] and result["items"] == [5, 9]


@pytest.mark.parametrize("name", ["pem", "treehist"])
def test_no_records(name: str, tmp_path: Path) -> None:
    """An empty column (n = 0, public) releases, with JSON numbers only: pem's rounds had no
    devices, so its variances and bounds are unbounded — null, not Infinity."""
    spec = _spec(
        mechanism={"name": name, "params": {"bits": 16, "top": 2}},
        input={"source": "inline", "values": []},
    )
    result = _run(spec, tmp_path)["results"][0]
    assert result["n"] == 0 and len(result["categories"]) == 2
    json.dumps(result, allow_nan=False)
    if name == "pem":
        assert result["variance"] == [None, None]
        assert result["confidence_interval"]["upper"] == [None, None]


def test_dry_run_reads_no_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Planning runs the protocol once on a public stand-in only."""
    seen: list[np.ndarray] = []
    cls = dpkit.get_registry().info("pem").cls
    original = cls.randomize

    def spy(self: Any, values: Any, /, **kwargs: Any) -> Any:
        seen.append(np.asarray(values))
        return original(self, values, **kwargs)

    monkeypatch.setattr(cls, "randomize", spy)
    _csv(tmp_path)
    plan_spec(_spec(), registry=dpkit.get_registry(), base_dir=tmp_path)
    assert len(seen) == 1 and seen[0].shape == (1,)
