"""Count-level simulation of 1BitMean with α-point rounding: the simulated statistic has the
law of the statistic of real reports, and the rounding law is the device's, to the 2⁻⁵³ grid.

Statistical tests use fixed seeds and state their false-positive rates (≤ 1e-6 per test).
"""

from __future__ import annotations

from typing import Any

import dpkit_ldp
import numpy as np
import pytest
from scipy import stats

import dpkit
from dpkit.plugin import MeanSums

VALUES = np.array([-1.0, -0.3, 0.2, 0.55, 1.0])
HELD = np.array([3, 2, 4, 2, 3])  # 14 devices


def _ones(mech: Any, sums: MeanSums) -> np.ndarray:
    """The number of ones B behind the statistic (Σ x̂ = B·x̂(1) + (n − B)·x̂(0))."""
    zero, one = mech.from_bits(np.array([0, 1]))
    return np.rint((sums.sums[0] - sums.n * zero) / (one - zero)).astype(np.int64)


def _exact_pmf(mech: Any) -> np.ndarray:
    """The pmf of B over 0..n: the convolution of every device's Bernoulli, its probability
    the mechanism's own closed form over α (``log_probability``; the 2⁻⁵³ grid of α moves it
    by at most 2⁻⁵³, invisible at these sample sizes)."""
    pmf = np.array([1.0])
    for value in np.repeat(VALUES, HELD):
        p = float(np.exp(mech.log_probability(np.array([1]), np.array([value]))[0]))
        pmf = np.convolve(pmf, [1.0 - p, p])
    return pmf


def _fit(pmf: np.ndarray, ones: np.ndarray) -> float:
    """χ² goodness of fit over the values expected ≥ 5 (the rest pooled)."""
    observed = np.bincount(ones, minlength=pmf.size)[: pmf.size]
    expected = ones.size * pmf
    big = expected >= 5
    observed = np.append(observed[big], ones.size - observed[big].sum())
    expected = np.append(expected[big], expected[~big].sum())
    return float(stats.chisquare(observed, expected).pvalue)


def test_the_law_is_the_exact_law_of_real_reports() -> None:
    """14 devices over 5 values (s = 3 rounding intervals, ε = 3): 20,000 simulated numbers of
    ones against their exact pmf: χ² goodness of fit at false positive 1e-6."""
    mech = dpkit.mechanism("one_bit_mean", epsilon=3.0, intervals=3)
    rng = np.random.default_rng(41)
    ones = np.array([_ones(mech, mech.simulate(VALUES, HELD, rng=rng)) for _ in range(20_000)])
    assert np.all((ones >= 0) & (ones <= HELD.sum()))
    assert _fit(_exact_pmf(mech), ones) > 1e-6


def test_the_exact_law_test_rejects_a_pooled_binomial_and_a_normal_approximation() -> None:
    """The test above, on two plausible wrong simulations: B ~ Binomial(n, mean probability)
    (the devices pooled, which overstates the variance when values differ) and B the rounded
    normal with the right mean and variance. Both fail the χ² fit (deterministic given the
    seed: it guards the power of the test, ≈ 1 against the pooled binomial and 0.94 against
    the normal, a noncentral χ² with λ ≈ 61 on 10 degrees of freedom)."""
    mech = dpkit.mechanism("one_bit_mean", epsilon=3.0, intervals=3)
    pmf = _exact_pmf(mech)
    n = int(HELD.sum())
    per_device = np.array(
        [np.exp(mech.log_probability(np.array([1]), np.array([v]))[0]) for v in VALUES]
    )
    mean = float(HELD @ per_device)
    variance = float(HELD @ (per_device * (1 - per_device)))
    rng = np.random.default_rng(42)
    pooled = rng.binomial(n, mean / n, size=20_000)
    normal = np.clip(np.rint(rng.normal(mean, np.sqrt(variance), size=20_000)), 0, n)
    assert _fit(pmf, pooled) < 1e-6
    assert _fit(pmf, normal.astype(np.int64)) < 1e-6


def test_simulated_and_per_device_statistics_agree() -> None:
    """The same devices, 3,000 statistics from per-device reports (``randomize`` + the
    estimator's ``accumulate``) against 3,000 simulated ones: a two-sample χ² test of
    homogeneity of B at false positive 1e-6; and the simulated sums are the ones ``accumulate``
    computes from B ones (to rounding)."""
    mech = dpkit.mechanism("one_bit_mean", epsilon=1.0, intervals=4, lower=0.0, upper=10.0)
    values, held = np.array([0.0, 1.3, 5.0, 9.99, 10.0]), np.array([4, 6, 3, 5, 2])
    estimator = dpkit.get_registry().estimator(mech)
    population = np.repeat(values, held)
    rng = np.random.default_rng(43)
    runs = 3000
    real = np.array(
        [
            _ones(mech, estimator.accumulate(mech.randomize(population, rng=rng)))
            for _ in range(runs)
        ]
    )
    simulated = [mech.simulate(values, held, rng=rng) for _ in range(runs)]
    fake = np.array([_ones(mech, s) for s in simulated])
    table = np.stack([np.bincount(real, minlength=21), np.bincount(fake, minlength=21)])
    keep = table.sum(0) >= 10  # sparse cells pooled
    table = np.column_stack([table[:, keep], table[:, ~keep].sum(1)])
    table = table[:, table.sum(0) > 0]
    assert stats.chi2_contingency(table).pvalue > 1e-6

    first = simulated[0]
    bits = (np.arange(20) < _ones(mech, first)).astype(np.uint8)
    direct = estimator.accumulate(bits)
    assert first.n == direct.n == 20
    assert first.sums == pytest.approx(direct.sums, rel=1e-12, abs=1e-9)
    assert first.squares == pytest.approx(direct.squares, rel=1e-12)


def test_the_rounding_law_is_the_devices_to_the_last_grid_point() -> None:
    """For each value, the first grid offset k·2⁻⁵³ at which the rounded point reaches t₀ + 1
    is found exactly (the one before does not reach it), P[t ≥ t₀ + 1] is frac(u) to within
    2⁻⁵⁰ (a few ulps of u), and a point that cannot be reached has no offset. x = 0 (s = 3 on
    [−1, 1]) is u = 3/2, where 3/2 + (2⁵² − 1)·2⁻⁵³ = 2 − 2⁻⁵³ rounds (to even) up to 2: the
    law there is not frac(u) exactly, and the simulation draws the device's."""
    mech = dpkit.mechanism("one_bit_mean", epsilon=1.0, intervals=3)
    values = np.array([-1.0, -0.77, 0.0, 0.3, 0.999, 1.0])
    start, first = mech.rounding_law(values)
    grid = 2.0**53
    u = (values + 1.0) / 2.0 * 3
    assert np.array_equal(start, np.floor(u).astype(np.int64).clip(0, 3))
    for i, x in enumerate(values):
        k = int(first[i, 0])
        if k < 2**53:
            assert mech.rounded(np.array([x]), np.array([k / grid]))[0] == start[i] + 1
            assert mech.rounded(np.array([x]), np.array([(k - 1) / grid]))[0] == start[i]
        assert abs((2**53 - k) / grid - (u[i] - np.floor(u[i]))) <= 2.0**-50
    assert first[-1, 0] == 2**53  # the upper bound never rounds beyond it
    assert np.all(first[:, 1] == 2**53)
    assert first[2, 0] == 2**52 - 1


def test_one_bit_mean_simulates_a_billion_devices() -> None:
    """10⁹ devices over 101 values: the simulation completes (its time is the benchmark's), and
    through ``simulate_numeric`` too; the estimated mean lies within 5.3 standard deviations of
    the true mean (false positive ≤ 1.2e-7: B is a sum of 10⁹ independent bits)."""
    mech = dpkit.mechanism("one_bit_mean", epsilon=1.0, intervals=2, lower=0.0, upper=100.0)
    values = np.arange(101, dtype=np.float64)
    held = np.full(101, 10**9 // 101, dtype=np.int64)
    held[:10] += 7
    sums = mech.simulate(values, held, rng=np.random.default_rng(44))
    assert sums.n == held.sum()
    estimate = dpkit.estimate(mech, sums)
    truth = float(held @ values / held.sum())
    assert abs(estimate.estimates[0] - truth) <= 5.3 * float(np.sqrt(estimate.variance[0]))
    again = dpkit_ldp.simulate_numeric(mech, values, counts=held, rng=np.random.default_rng(45))
    assert isinstance(again, MeanSums) and again.n == held.sum()


def test_simulation_refuses_what_it_cannot_draw() -> None:
    mech = dpkit.mechanism("one_bit_mean", epsilon=1.0)
    rng = np.random.default_rng(0)
    with pytest.raises(dpkit.InvalidData, match="2 integers"):
        mech.simulate(np.array([0.1, 0.2]), np.array([1]), rng=rng)
    with pytest.raises(dpkit.InvalidData, match="2 integers"):
        mech.simulate(np.array([0.1, 0.2]), np.array([1, -1]), rng=rng)
    with pytest.raises(dpkit.InvalidData, match="outside"):
        mech.simulate(np.array([0.1, 2.0]), np.array([1, 1]), rng=rng)
    with pytest.raises(dpkit.InvalidParameter, match="Generator"):
        mech.simulate(np.array([0.1]), np.array([1]), rng=dpkit.SecureRandom())  # type: ignore[arg-type]
    empty = mech.simulate(np.array([]), np.array([], dtype=np.int64), rng=rng)
    assert empty.n == 0
