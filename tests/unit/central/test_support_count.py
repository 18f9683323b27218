"""The exact support-count law and the exact-coverage randomized interval (dpkit.support_count)."""

from __future__ import annotations

import numpy as np
import pytest
from dpkit_ldp.kary_rr import KaryRandomizedResponse
from scipy import stats

import dpkit
from dpkit import support_count as sc


@pytest.mark.parametrize("x", [0, 1, 17, 150, 300])
def test_the_law_is_the_convolution_of_two_binomials(x: int) -> None:
    """Independent reference: scipy's binomial pmfs convolved."""
    n, p, q = 300, 0.3, 0.05
    reference = np.convolve(
        stats.binom.pmf(np.arange(x + 1), x, p), stats.binom.pmf(np.arange(n - x + 1), n - x, q)
    )
    np.testing.assert_allclose(sc.support_count_pmf(n, p, q, x), reference, atol=1e-13)


def test_table_and_bisection_give_the_same_intervals() -> None:
    """The two exact evaluations (whole table; windowed law with bisection) agree exactly."""
    rng = np.random.default_rng(11)
    for n, p, q in [(300, 0.3, 0.05), (200, 0.9, 0.01), (257, 0.55, 0.5), (1500, 0.5, 0.12)]:
        # Counts near where the law has mass (x from 0 to n), and anywhere in 0..n.
        x = rng.integers(0, n + 1, size=150)
        near = rng.binomial(x, p) + rng.binomial(n - x, q)
        counts = np.concatenate([near, rng.integers(0, n + 1, size=150)])
        uniforms = rng.random(300)
        zeros, ones = np.zeros(300), np.ones(300)
        for low, high in [(uniforms, uniforms), (zeros, ones)]:  # randomized; exact
            table = sc._by_table(counts, low, high, n=n, p=p, q=q, level=0.9)
            bisection = sc._by_bisection(counts, low, high, n=n, p=p, q=q, level=0.9)
            for a, b in zip(table, bisection, strict=True):
                np.testing.assert_array_equal(a, b)


def test_the_exact_interval_is_the_tables_for_each_count_whatever_the_others() -> None:
    """``exact_interval`` looks each count up among every count's ends (computed once per
    (n, p, q, level)): the same as evaluating the table for the observed counts alone, counts
    outside 0..n and any array shape included."""
    rng = np.random.default_rng(12)
    for n, p, q in [(300, 0.3, 0.05), (0, 0.7, 0.2), (1000, 0.51, 0.49)]:
        counts = rng.integers(-3, n + 4, size=(3, 40))
        flat = counts.ravel()
        expected = sc._by_table(
            flat, np.zeros(flat.size), np.ones(flat.size), n=n, p=p, q=q, level=0.9
        )
        found = sc.exact_interval(counts, n=n, p=p, q=q, level=0.9)
        for a, b in zip(found, expected, strict=True):
            assert a.shape == counts.shape
            np.testing.assert_array_equal(a.ravel(), b)


@pytest.mark.parametrize(
    ("n", "p", "q", "x"),
    [
        (500, 0.176, 0.00323, 0),
        (500, 0.176, 0.00323, 6),
        (60, 0.75, 0.25, 20),
        (900, 0.5, 0.12, 40),
    ],
)
def test_coverage_is_exactly_the_level(n: int, p: float, q: float, x: int) -> None:
    """Coverage computed exactly, not by simulation: Σ_c P(C = c | x) · P_U(x in the interval),
    the law from scipy and the U-probability by the midpoint rule on 2000 cells (T is linear in
    U, so the accepted U form an interval and the rule is exact up to 1/2000 per count). The
    bisection path (n > TABLE_LIMIT) is held to this one by the test above."""
    law = np.convolve(
        stats.binom.pmf(np.arange(x + 1), x, p), stats.binom.pmf(np.arange(n - x + 1), n - x, q)
    )
    support = np.flatnonzero(law > 1e-15)
    grid = (np.arange(2000) + 0.5) / 2000
    counts = np.repeat(support, grid.size)
    uniforms = np.tile(grid, support.size)
    low, high = sc.randomized_interval(counts, uniforms, n=n, p=p, q=q, level=0.95)
    covered = ((low <= x) & (x <= high)).reshape(support.size, grid.size).mean(axis=1)
    coverage = float(law[support] @ covered)
    assert abs(coverage - 0.95) <= 1.0 / 2000 + 1e-9


@pytest.mark.parametrize(
    ("n", "p", "q"), [(500, 0.176, 0.00323), (60, 0.75, 0.25), (1500, 0.982, 0.018)]
)
def test_the_exact_interval_covers_at_least_the_level_for_every_count(
    n: int, p: float, q: float
) -> None:
    """Coverage computed exactly (the law from scipy), for every true count x in 0..n (in steps
    for n = 1500, the bisection path): Σ_c P(C = c | x) · [x in the interval of c] ≥ 0.95."""
    lows, highs = sc.exact_interval(np.arange(n + 1), n=n, p=p, q=q, level=0.95)
    for x in range(0, n + 1, 1 if n <= sc.TABLE_LIMIT else 37):
        law = np.convolve(
            stats.binom.pmf(np.arange(x + 1), x, p),
            stats.binom.pmf(np.arange(n - x + 1), n - x, q),
        )
        assert float(law @ ((lows <= x) & (x <= highs))) >= 0.95 - 1e-9, x


def test_the_score_interval_cannot_reach_the_level_where_the_randomized_one_does() -> None:
    """krr k = 256, ε = 4, n = 500, a category nobody holds: C ~ Bin(500, q), q ≈ 0.0032."""
    mech = KaryRandomizedResponse(epsilon=4.0, k=256)
    q = mech.other_probability
    law = stats.binom.pmf(np.arange(501), 500, q)
    assert law[:5].sum() > 0.97 and law[:4].sum() < 0.93  # no deterministic cut-off fits


def test_estimate_offers_the_randomized_interval() -> None:
    mech = KaryRandomizedResponse(epsilon=1.0, k=4)
    counts = dpkit.plugin.FrequencyCounts("krr", [40, 30, 20, 10], 100)
    estimate = dpkit.estimate(mech, counts)
    low, high = estimate.confidence_interval(method="randomized", rng=np.random.default_rng(1))
    assert np.all(low <= high) and np.all(low == np.rint(low))
    assert np.all((low >= 0) & (high <= 100))
    shares = estimate.confidence_interval(
        method="randomized", rng=np.random.default_rng(1), scale="frequency"
    )
    np.testing.assert_allclose(shares[0], low / 100)
    np.testing.assert_allclose(shares[1], high / 100)
    # Secure uniforms by default; a post-processed estimate keeps the unbiased one's interval.
    assert len(estimate.confidence_interval(method="randomized")[0]) == 4
    clipped = dpkit.estimate(mech, counts, method="clip")
    again = clipped.confidence_interval(method="randomized", rng=np.random.default_rng(1))
    np.testing.assert_array_equal(again[0], low)


def test_randomized_interval_is_refused_without_a_count_law() -> None:
    estimate = dpkit.plugin.Estimate("x", "unbiased", 10, [1.0, 2.0], [1.0, 1.0])
    with pytest.raises(dpkit.InvalidParameter, match="support probabilities"):
        estimate.confidence_interval(method="randomized")
    with pytest.raises(dpkit.InvalidParameter, match="method"):
        estimate.confidence_interval(method="exactish")
