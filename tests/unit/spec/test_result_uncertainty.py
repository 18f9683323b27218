"""A spec's result document states its uncertainty as computed: the interval's method, the
exact variance model of a frequency oracle, and the variance of central noise.

The expected values are derived here from the mechanisms' definitions (k-RR: Wang et al. 2017,
"Locally differentially private protocols for frequency estimation", Section 4; Laplace:
Var[Lap(b)] = 2b²), not read back from dpkit.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from statistics import NormalDist
from typing import Any

import jsonschema

from dpkit.spec import run_spec

ROOT = Path(__file__).resolve().parents[3]
SCHEMA = json.loads((ROOT / "schemas" / "result.schema.json").read_text(encoding="utf-8"))


def _run(spec: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    document = run_spec(spec, base_dir=tmp_path, ledger=tmp_path / "ledger.sqlite")
    jsonschema.validate(document, SCHEMA)
    result: dict[str, Any] = document["results"][0]
    return result


def test_frequency_result_states_the_exact_variance_model_and_the_score_interval(
    tmp_path: Path,
) -> None:
    # n = 500: n·min(p(1 − p), q(1 − q)) = 58 ≥ 50, so the default is the score interval.
    k, epsilon, values = 4, 1.5, [0, 1, 1, 2, 3, 3, 3, 0, 1, 2] * 50
    spec = {
        "dpkit": "1",
        "dataset": "survey",
        "session_budget": {"epsilon": epsilon},
        "statistic": "frequency",
        "mechanism": {"name": "krr", "params": {"k": k}},
        "input": {"source": "inline", "values": values},
        "budget": {"epsilon": epsilon},
        "output": {"confidence": 0.9},
        "rng": {"mode": "fast", "seed": 11},
    }
    result = _run(spec, tmp_path)
    n = len(values)
    p = math.exp(epsilon) / (math.exp(epsilon) + k - 1)
    q = 1.0 / (math.exp(epsilon) + k - 1)
    # Var[ĉ] = [x·p(1−p) + (n−x)·q(1−q)]/(p−q)² = a + b·x
    a = n * q * (1 - q) / (p - q) ** 2
    b = (p * (1 - p) - q * (1 - q)) / (p - q) ** 2
    assert math.isclose(result["variance_model"]["a"], a, rel_tol=1e-12)
    assert math.isclose(result["variance_model"]["b"], b, rel_tol=1e-12)
    interval = result["confidence_interval"]
    assert interval["method"].startswith("score interval")
    z = NormalDist().inv_cdf(0.95)
    for estimate, low, high in zip(
        result["estimate"], interval["lower"], interval["upper"], strict=True
    ):
        # the score interval's ends are the roots of (ĉ − x)² = z²·(a + b·x)
        for end in (low, high):
            assert math.isclose((estimate - end) ** 2, z * z * (a + b * end), rel_tol=1e-9)
        assert low < estimate < high


def test_too_few_reports_get_the_exact_interval_and_say_so(tmp_path: Path) -> None:
    """n = 50 (n·min(p(1 − p), q(1 − q)) = 5.8 < 50): the exact interval, named, with integer
    ends around each estimate."""
    spec = {
        "dpkit": "1",
        "dataset": "survey",
        "session_budget": {"epsilon": 1.5},
        "statistic": "frequency",
        "mechanism": {"name": "krr", "params": {"k": 4}},
        "input": {"source": "inline", "values": [0, 1, 1, 2, 3, 3, 3, 0, 1, 2] * 5},
        "budget": {"epsilon": 1.5},
        "rng": {"mode": "fast", "seed": 11},
    }
    result = _run(spec, tmp_path)
    interval = result["confidence_interval"]
    assert interval["method"].startswith("exact interval")
    for estimate, low, high in zip(
        result["estimate"], interval["lower"], interval["upper"], strict=True
    ):
        assert low == round(low) and high == round(high) and 0 <= low <= high <= 50
        assert low - 1 < estimate < high + 1


def test_central_result_states_its_noise_variance(tmp_path: Path) -> None:
    epsilon, upper = 0.5, 10.0
    spec = {
        "dpkit": "1",
        "dataset": "visits",
        "session_budget": {"epsilon": 1.0},
        "statistic": "sum",
        "params": {"lower": 0, "upper": upper, "noise": "laplace"},
        "input": {"source": "inline", "values": [1, 2, 3, 9.5]},
        "budget": {"epsilon": epsilon},
        "rng": {"mode": "fast", "seed": 5},
    }
    noise = _run(spec, tmp_path)["noise"]
    scale = upper / epsilon  # one record changes a clamped sum by at most 10
    assert noise["distribution"] == "laplace"
    assert math.isclose(noise["scale"], scale, rel_tol=1e-12)
    assert math.isclose(noise["variance"], 2 * scale * scale, rel_tol=1e-12)
