"""Count-level simulation of dBitFlip: the statistic drawn from the true counts has the law of
the statistic of real reports, jointly over the buckets.

Statistical tests use fixed seeds and state their false-positive rates (≤ 1e-6 per test).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

import dpkit


def _key(sampled: np.ndarray, ones: np.ndarray, n: int) -> np.ndarray:
    """One integer per statistic (N, B): the digits of base n + 1, N's then B's."""
    digits = np.concatenate([sampled, ones], axis=-1)
    return (digits * (n + 1) ** np.arange(digits.shape[-1])).sum(axis=-1)


def test_the_law_is_the_exact_law_of_real_reports() -> None:
    """Three devices holding 1, 3, 3 (k = 4, d = 2): the exact pmf of (N, B), from every
    combination of the devices' reports weighted by the mechanism's per-report pmf, against
    6000 simulated statistics: χ² goodness of fit over the cells expected ≥ 5 (the rest
    pooled), false positive 1e-6. A wrong joint law (the buckets' counts drawn independently)
    puts mass off the support (Σ N ≠ n·d) and fails."""
    mech = dpkit.mechanism("dbitflip", epsilon=2.0, k=4, d=2)
    values = [1, 3, 3]
    space = mech.output_space()  # (48, d, 2): every report
    log_p = [mech.log_probability(space, np.full(len(space), v)) for v in values]
    combos = np.array(list(itertools.product(range(len(space)), repeat=len(values))))
    weight = np.exp(sum(log_p[i][combos[:, i]] for i in range(len(values))))
    reports = space[combos]  # (combos, devices, d, 2)
    buckets = reports[..., 0].reshape(len(combos), -1).astype(np.int64)
    bits = reports[..., 1].reshape(len(combos), -1).astype(np.int64)
    sampled = np.stack([(buckets == j).sum(1) for j in range(mech.k)], axis=1)
    ones = np.stack([((buckets == j) * bits).sum(1) for j in range(mech.k)], axis=1)
    keys, where = np.unique(_key(sampled, ones, len(values)), return_inverse=True)
    exact = np.bincount(where.ravel(), weights=weight, minlength=keys.size)
    assert exact.sum() == pytest.approx(1.0, abs=1e-12)

    rng = np.random.default_rng(11)
    true = np.bincount(values, minlength=mech.k)
    draws = 6000
    simulated = [mech.simulate(true, rng=rng) for _ in range(draws)]
    drawn = _key(np.array([s.sampled for s in simulated]), np.array([s.ones for s in simulated]), 3)
    assert all(s.n == 3 for s in simulated)
    position = np.searchsorted(keys, drawn)
    assert np.all(keys[np.minimum(position, keys.size - 1)] == drawn)  # on the support
    observed = np.bincount(position, minlength=keys.size)
    expected = draws * exact
    big = expected >= 5
    observed = np.append(observed[big], observed[~big].sum())
    expected = np.append(expected[big], expected[~big].sum())
    assert stats.chisquare(observed, expected).pvalue > 1e-6


def test_simulated_and_per_device_statistics_agree() -> None:
    """40 devices over k = 6 buckets (d = 3): 1500 statistics from per-device reports
    (``randomize`` + the estimator's ``accumulate``) against 1500 simulated ones. Two-sample
    χ² tests of homogeneity, each at 1e-7: N_j and B_j for every bucket and the joint pair
    (N_0, N_1) — 13 tests, false positive ≤ 1.3e-6 … rounded to the 1e-6 budget by testing
    each at 0.75e-7 (≤ 0.98e-6 in all)."""
    mech = dpkit.mechanism("dbitflip", epsilon=1.0, k=6, d=3)
    estimator = dpkit.get_registry().estimator(mech)
    true = np.array([15, 0, 10, 8, 5, 2])
    population = np.repeat(np.arange(6), true)
    rng = np.random.default_rng(23)
    runs = 1500
    real = [estimator.accumulate(mech.randomize(population, rng=rng)) for _ in range(runs)]
    fake = [mech.simulate(true, rng=rng) for _ in range(runs)]
    assert all(np.sum(s.sampled) == 40 * 3 for s in fake)

    def homogeneous(a: np.ndarray, b: np.ndarray) -> float:
        values, where = np.unique(np.concatenate([a, b]), return_inverse=True)
        table = np.stack(
            [
                np.bincount(where[:runs], minlength=values.size),
                np.bincount(where[runs:], minlength=values.size),
            ]
        )
        keep = table.sum(0) >= 10  # sparse cells pooled
        table = np.column_stack([table[:, keep], table[:, ~keep].sum(1)])
        table = table[:, table.sum(0) > 0]
        return float(stats.chi2_contingency(table).pvalue)

    projections = []
    for j in range(mech.k):
        projections.append(
            (np.array([s.sampled[j] for s in real]), np.array([s.sampled[j] for s in fake]))
        )
        projections.append(
            (np.array([s.ones[j] for s in real]), np.array([s.ones[j] for s in fake]))
        )
    pair = [np.array([s.sampled[0] * 41 + s.sampled[1] for s in group]) for group in (real, fake)]
    projections.append((pair[0], pair[1]))
    for a, b in projections:
        assert homogeneous(a, b) > 0.75e-7


def test_simulation_refuses_what_it_cannot_draw() -> None:
    mech = dpkit.mechanism("dbitflip", epsilon=1.0, k=3)
    rng = np.random.default_rng(0)
    with pytest.raises(dpkit.InvalidData, match="3 integers"):
        mech.simulate(np.array([1, 2]), rng=rng)
    with pytest.raises(dpkit.InvalidData, match="3 integers"):
        mech.simulate(np.array([1, -1, 0]), rng=rng)
    with pytest.raises(dpkit.InvalidParameter, match="fewer than 10\\^9"):
        mech.simulate(np.array([10**9, 0, 0]), rng=rng)
    with pytest.raises(dpkit.InvalidParameter, match="Generator"):
        mech.simulate(np.array([1, 0, 0]), rng=dpkit.SecureRandom())  # type: ignore[arg-type]
    big = mech.simulate(np.array([600_000_000, 300_000_000, 99_999_999]), rng=rng)
    assert big.n == 999_999_999 and big.sampled.sum() == big.n  # d = 1: one bucket each
