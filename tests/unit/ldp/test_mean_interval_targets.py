"""A local mean's interval is for a stated target: the population's mean or the users' own.

Each coverage check counts R independent repetitions whose interval covers its target; with
true coverage ≥ 0.95 the count falls below the threshold ``_floor(R)`` with probability < 10⁻⁶
(the exact binomial tail, computed here with scipy), so each check falsely fails with
probability below 10⁻⁶. The seeds are fixed and never changed to make a check pass.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import dpkit
from dpkit.errors import InvalidParameter

R = 2_000
N = 1_000


def _floor(repetitions: int, level: float = 0.95, false_positive: float = 1e-6) -> int:
    """The largest count k with P[Binomial(R, level) < k] < ``false_positive``."""
    k = int(stats.binom.ppf(false_positive, repetitions, level))
    while stats.binom.cdf(k - 1, repetitions, level) >= false_positive:
        k -= 1
    return k


def _intervals(
    mechanism: dpkit.Mechanism, data: np.ndarray, rng: np.random.Generator, target: str
) -> tuple[float, float, float]:
    reports = mechanism.randomize(data, rng=rng)
    estimate = dpkit.estimate(mechanism, reports)
    low, high = estimate.confidence_interval(0.95, target=target)
    return float(estimate.mean), float(low[0]), float(high[0])


@pytest.mark.parametrize("epsilon", [1.0, 4.0])
def test_the_sample_interval_covers_the_users_own_mean(epsilon: float) -> None:
    """Fixed data (the users' own values): the ``"sample"`` interval covers their mean x̄ at
    least at the nominal rate, and at ε = 4 it is much narrower than the population interval,
    which there covers x̄ almost always (its width carries the spread of the values)."""
    rng = np.random.default_rng(20261127)
    data = rng.uniform(-1.0, 1.0, N)
    own = float(data.mean())
    mechanism = dpkit.mechanism("pm", epsilon=epsilon)
    covered = {"sample": 0, "population": 0}
    widths: dict[str, list[float]] = {"sample": [], "population": []}
    for _ in range(R):
        reports = mechanism.randomize(data, rng=rng)
        estimate = dpkit.estimate(mechanism, reports)
        for target in covered:
            low, high = estimate.confidence_interval(0.95, target=target)
            covered[target] += int(low[0] <= own <= high[0])
            widths[target].append(float(high[0] - low[0]))
    assert covered["sample"] >= _floor(R), covered
    assert covered["population"] >= _floor(R), covered
    ratio = np.mean(widths["sample"]) / np.mean(widths["population"])
    if epsilon == 4.0:
        assert ratio < 0.8  # worst case 0.24 against s² ≈ 0.47: a ratio near 0.72
    assert ratio <= 1.0  # never wider: min(s²/n, worst case/n)


def test_the_population_interval_covers_the_population_mean() -> None:
    """Fresh users each repetition, from a population on [−1, 1] with mean 0.25 (a Beta(5, 3)
    mapped there: mean −1 + 2·5/8): the default interval covers the population mean."""
    rng = np.random.default_rng(7)
    mechanism = dpkit.mechanism("pm", epsilon=4.0)
    covered = 0
    for _ in range(R):
        data = -1.0 + 2.0 * rng.beta(5.0, 3.0, N)
        _, low, high = _intervals(mechanism, data, rng, "population")
        covered += int(low <= 0.25 <= high)
    assert covered >= _floor(R)


def test_the_target_is_checked_and_the_default_is_the_population() -> None:
    mechanism = dpkit.mechanism("pm", epsilon=2.0)
    reports = mechanism.randomize(np.zeros(50), rng=np.random.default_rng(1))
    estimate = dpkit.estimate(mechanism, reports)
    default = estimate.confidence_interval(0.9)
    population = estimate.confidence_interval(0.9, target="population")
    assert np.array_equal(default[0], population[0]) and np.array_equal(default[1], population[1])
    assert np.array_equal(
        estimate.interval(0.9, target="sample")[0],
        estimate.confidence_interval(0.9, target="sample")[0],
    )
    with pytest.raises(InvalidParameter, match="target"):
        estimate.confidence_interval(0.9, target="mean")
    assert "population mean" in estimate.to_document()["confidence_interval"]["method"]
