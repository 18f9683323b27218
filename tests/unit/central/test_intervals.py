"""A mean's and a quantile's interval, from public quantities and the released values only.

The coverage tests are statistical with fixed seeds: each rejects only when a one-sided
binomial test gives p < 1e-6 that the coverage is at least the nominal level (false-positive
rate ≤ 1e-6 each, since the union-bound interval covers with probability ≥ the level).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from dpkit_central import Mean, Quantile
from dpkit_central.intervals import MEAN_INTERVAL, MeanInterval
from scipy import stats

import dpkit

ALPHA = 1e-6
LEVEL = 0.95


def _covers(hits: int, trials: int, level: float = LEVEL) -> bool:
    """False only if coverage ≥ ``level`` is rejected at p < ALPHA (one-sided)."""
    return bool(stats.binomtest(hits, trials, level, alternative="less").pvalue > ALPHA)


@pytest.mark.parametrize(
    ("noise", "size", "epsilon"),
    [("laplace", 5, 1.0), ("laplace", 300, 0.5), ("gaussian", 40, 1.0), ("laplace", 2000, 4.0)],
)
def test_mean_interval_covers_the_exact_mean(noise: str, size: int, epsilon: float) -> None:
    """Skewed data near a bound, where the ratio's bias is largest."""
    query = Mean(
        lower=0.0,
        upper=100.0,
        epsilon=epsilon,
        noise=noise,
        delta=1e-6 if noise == "gaussian" else None,
    )
    data = np.random.default_rng(3).exponential(8.0, size)
    exact = float(np.clip(data, 0.0, 100.0).mean())
    rng = np.random.default_rng(11)
    trials, hits = 3000, 0
    for _ in range(trials):
        result = query.run(data, rng=rng)
        low, high = result.confidence_interval(LEVEL)
        assert low <= result.value <= high
        hits += low <= exact <= high
    assert _covers(hits, trials)


def test_mean_interval_per_group_covers_and_is_named_everywhere() -> None:
    """The table face: per group, in the release's rows, table() and document."""
    gen = np.random.default_rng(5)
    frame = pd.DataFrame(
        {
            "city": np.repeat(["a", "b", "c"], [20, 200, 2000]),
            "x": np.concatenate(
                [gen.uniform(0, 30, 20), gen.normal(50, 5, 200), gen.gamma(2, 3, 2000)]
            ),
        }
    )
    exact = frame.assign(x=frame.x.clip(0, 100)).groupby("city").x.mean().to_numpy()
    query = Mean(lower=0, upper=100, epsilon=1.0).on("x", by="city", keys=["a", "b", "c"])
    rng = np.random.default_rng(8)
    trials, hits = 300, 0
    for _ in range(trials):
        release = query.run(frame, rng=rng)
        low, high = release.confidence_interval(LEVEL)
        assert np.all(low <= release.values) and np.all(release.values <= high)
        hits += int(np.sum((low <= exact) & (exact <= high)))
    assert _covers(hits, 3 * trials)
    table = release.table(LEVEL)
    assert list(table.columns)[-3:] == ["ci_lower", "ci_upper", "ci_method"]
    assert np.allclose(table["ci_lower"], low) and np.allclose(table["ci_upper"], high)
    assert set(table["ci_method"]) == {MEAN_INTERVAL}
    document = json.loads(json.dumps(release.to_document(confidence=LEVEL)))
    interval = document["confidence_interval"]
    assert interval["method"] == MEAN_INTERVAL
    assert np.allclose(interval["lower"], low) and np.allclose(interval["upper"], high)


def test_mean_interval_is_the_ratio_over_the_box() -> None:
    """The corner ratios, the g/2 rounding, the clamp to [L, U], and the whole range when the
    box holds no count ≥ 1."""
    noise = dpkit_noise = (
        Mean(lower=0.0, upper=10.0, epsilon=1.0).parts()[1].noise_for(np.random.default_rng(0))
    )
    rule = MeanInterval(0.0, 10.0, 0.5, noise, dpkit_noise)
    h = noise.half_width(1.0 - 0.05 / 2.0)  # Laplace(2): 2·ln 40
    low, high = rule.bounds(np.array([100.0, 0.0]), np.array([50.0, 0.5]), LEVEL)
    assert math.isclose(low[0], 5.0 + (100.0 - h) / (50.0 + h) - 0.25)
    assert math.isclose(high[0], 5.0 + (100.0 + h) / (50.0 - h) + 0.25)
    assert (low[1], high[1]) == (0.0, 10.0)  # C̃ + h_C ≥ 1 but the ratio spans [L, U]
    low, high = rule.bounds(np.array([0.0]), np.array([-20.0]), LEVEL)
    assert (low[0], high[0]) == (0.0, 10.0)  # no count ≥ 1 in the box


def test_quantile_gives_its_rank_guarantee_and_no_value_bounds() -> None:
    frame = pd.DataFrame({"x": np.arange(1000.0)})
    release = (
        Quantile(q=0.5, lower=0, upper=1000, epsilon=1.0)
        .on("x")
        .run(frame, rng=np.random.default_rng(1))
    )
    t = release.rank_half_width(LEVEL)
    expected = Quantile(q=0.5, lower=0, upper=1000, epsilon=1.0).accuracy(0.05).half_width
    assert t is not None and math.isclose(t, expected)
    interval = release.to_document(confidence=LEVEL)["confidence_interval"]
    assert interval["unit"] == "ranks" and math.isclose(interval["half_width"], t)
    assert interval["lower"] is None and "rank" in interval["method"]
    row = release.rows(LEVEL)[0]
    assert row["ci_lower"] is None and "rank" in row["ci_method"]
    secure = Quantile(q=0.5, lower=0, upper=1000, epsilon=1.0).run(np.arange(1000.0), rng=None)
    assert secure.rank_half_width(LEVEL) is not None


def test_session_releases_carry_intervals() -> None:
    """Through a session, as dpkit run releases them."""
    frame = pd.DataFrame({"x": np.random.default_rng(2).uniform(0, 10, 500)})
    with dpkit.Session(budget=(2.0, 0.0), ledger=":memory:") as session:
        mean = session.release(Mean(lower=0, upper=10, epsilon=1.0).on("x"), frame)
        median = session.release(Quantile(q=0.5, lower=0, upper=10, epsilon=1.0).on("x"), frame)
    low, high = mean.values.confidence_interval(LEVEL)
    assert 0.0 <= low <= mean.values.value <= high <= 10.0
    assert median.values.rank_half_width(LEVEL) > 0
