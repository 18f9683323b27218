"""Experiment helpers: count-level simulation, stochastic discretization + LDP mean, synthetic data.

Statistical tests use fixed seeds; each states its false-positive rate (≤ 1e-6 per test).
"""

from __future__ import annotations

import math

import dpkit_ldp
import numpy as np
import pytest
from dpkit_ldp.datasets import DISTRIBUTIONS, distribution_probabilities
from scipy import stats

import dpkit

# --- count-level simulation ------------------------------------------------------------------


@pytest.mark.parametrize("name", ["krr", "sue", "oue", "olh", "hr"])
def test_simulated_counts_have_the_report_level_law(name: str) -> None:
    """Mean of C_v over 2000 simulations vs the same mean from real reports' law:
    E[C_v] = n_v p* + (n − n_v) q* (z-test, 8 checks at 6.25e-8 each: 1e-6 in total)."""
    mech = dpkit.mechanism(name, epsilon=0.7, k=8)
    counts = np.array([500, 300, 0, 100, 50, 25, 20, 5])
    p, q = mech.support_probabilities  # type: ignore[attr-defined]
    n = counts.sum()
    rng = np.random.default_rng(77)
    sims = np.stack([dpkit_ldp.simulate_counts(mech, counts, rng=rng).counts for _ in range(2000)])
    mean = counts * p + (n - counts) * q
    var = counts * p * (1 - p) + (n - counts) * q * (1 - q)
    z = (sims.mean(axis=0) - mean) / np.sqrt(var / 2000)
    assert np.all(np.abs(z) < stats.norm.isf(1e-6 / 16)), z
    if name == "krr":  # every report supports exactly one value
        assert np.all(sims.sum(axis=1) == n)


def test_billion_users_and_the_same_estimator() -> None:
    oue = dpkit.mechanism("oue", epsilon=1.0, k=64)
    counts = dpkit_ldp.synthetic("zipf", n=0, k=64, rng=np.random.default_rng(0)).probabilities
    true_counts = np.round(counts * 1e9).astype(np.int64)
    stats_ = dpkit_ldp.simulate_counts(oue, true_counts, rng=np.random.default_rng(1))
    assert isinstance(stats_, dpkit.plugin.FrequencyCounts) and stats_.n == true_counts.sum()
    est = dpkit.estimate(oue, stats_)
    z = (est.estimates - true_counts) / np.sqrt(est.variance)
    assert np.all(np.abs(z) < stats.norm.isf(1e-6 / 128))  # 64 checks, 1e-6 in total


def test_simulation_bad_input() -> None:
    krr = dpkit.mechanism("krr", epsilon=1.0, k=4)
    rng = np.random.default_rng(0)
    with pytest.raises(dpkit.InvalidData, match="4 non-negative integer counts"):
        dpkit_ldp.simulate_counts(krr, [1, 2, 3], rng=rng)
    with pytest.raises(dpkit.InvalidData, match="non-negative"):
        dpkit_ldp.simulate_counts(krr, [1, 2, 3, -1], rng=rng)
    with pytest.raises(dpkit.InvalidData, match="integer"):
        dpkit_ldp.simulate_counts(krr, [1.5, 2, 3, 1], rng=rng)
    with pytest.raises(dpkit.InvalidParameter, match="rng"):
        dpkit_ldp.simulate_counts(krr, [1, 2, 3, 1], rng=1)  # type: ignore[arg-type]
    rr = dpkit.mechanism("rr", epsilon=1.0)
    assert dpkit_ldp.simulate_counts(rr, [10, 0], rng=rng).n == 10


# --- stochastic discretization and the LDP mean ----------------------------------------------


def test_discretization_is_unbiased() -> None:
    """Each of 5 values discretized 200,000 times: binomial z-tests, 1e-6 in total."""
    values = np.array([-2.0, -1.5, 0.0, 2.9, 3.0])
    bits = dpkit_ldp.stochastic_discretize(
        np.broadcast_to(values, (200_000, 5)), lower=-2, upper=3, rng=np.random.default_rng(9)
    )
    t = (values + 2) / 5
    ones = bits.sum(axis=0)
    assert ones[0] == 0 and ones[-1] == 200_000
    inner = slice(1, 4)
    z = (ones[inner] - 200_000 * t[inner]) / np.sqrt(200_000 * t[inner] * (1 - t[inner]))
    assert np.all(np.abs(z) < stats.norm.isf(1e-6 / 6))


def test_ldp_mean_is_unbiased_with_its_variance() -> None:
    """2000 surveys of the same 1000 values through discretize + rr: mean z-test against the true
    mean using the exact conditional variance computed here (|z| < 4.89: 1e-6), and the reported
    variance is that variance up to the Jensen gap (it is an upper bound)."""
    rr = dpkit.mechanism("rr", epsilon=1.0)
    rng = np.random.default_rng(12)
    values = rng.uniform(10, 20, 1000)
    trials = 2000
    bits = dpkit_ldp.stochastic_discretize(
        np.broadcast_to(values, (trials, 1000)), lower=10, upper=20, rng=rng
    )
    reports = rr.randomize(bits, rng=rng)
    means = []
    reported = []
    for row in reports:
        est = dpkit_ldp.estimate_mean(row, mechanism=rr, lower=10, upper=20)
        means.append(est.mean)
        reported.append(est.variance)
    p = rr.keep_probability
    r = (1 - p) + (2 * p - 1) * (values - 10) / 10
    exact = 100 * np.sum(r * (1 - r)) / (1000**2 * (2 * p - 1) ** 2)
    z = (np.mean(means) - values.mean()) / math.sqrt(exact / trials)
    assert abs(z) < stats.norm.isf(0.5e-6)
    # The reported variance estimates the i.i.d.-sample variance r̄(1 − r̄)·width²/(n(2p − 1)²),
    # which exceeds the conditional one by the spread of the r_i (Jensen).
    iid = 100 * r.mean() * (1 - r.mean()) / (1000 * (2 * p - 1) ** 2)
    assert iid > exact
    assert np.mean(reported) == pytest.approx(iid, rel=0.01)
    # Counts are accepted too, and the interval is centred.
    merged = dpkit.get_registry().estimator(rr).accumulate(reports[0])
    same = dpkit_ldp.estimate_mean(merged, mechanism=rr, lower=10, upper=20)
    assert same.mean == pytest.approx(means[0])
    low, high = same.confidence_interval(0.9)
    assert low < same.mean < high


def test_discretization_bad_input() -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(dpkit.InvalidData, match="outside"):
        dpkit_ldp.stochastic_discretize([0.5, 1.5], lower=0, upper=1, rng=rng)
    with pytest.raises(dpkit.InvalidData, match="NaN"):
        dpkit_ldp.stochastic_discretize([np.nan], lower=0, upper=1, rng=rng)
    with pytest.raises(dpkit.InvalidParameter, match="upper"):
        dpkit_ldp.stochastic_discretize([0.5], lower=1, upper=1, rng=rng)
    with pytest.raises(dpkit.InvalidParameter, match="lower"):
        dpkit_ldp.stochastic_discretize([0.5], lower=-math.inf, upper=1, rng=rng)
    with pytest.raises(dpkit.InvalidData, match="real numbers"):
        dpkit_ldp.stochastic_discretize(["a"], lower=0, upper=1, rng=rng)
    with pytest.raises(dpkit.InvalidParameter, match="rr"):
        dpkit_ldp.estimate_mean(
            [0, 1], mechanism=dpkit.mechanism("krr", epsilon=1, k=2), lower=0, upper=1
        )  # type: ignore[arg-type]


# --- synthetic data --------------------------------------------------------------------------


@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
def test_synthetic_values_follow_the_distribution(distribution: str) -> None:
    """Chi-square of 100,000 values against the declared probabilities (1e-6)."""
    data = dpkit_ldp.synthetic(distribution, n=100_000, k=20, rng=np.random.default_rng(3))
    assert data.values.dtype == np.int64 and data.n == 100_000 and data.k == 20
    np.testing.assert_array_equal(np.bincount(data.values, minlength=20), data.histogram)
    assert data.probabilities.sum() == pytest.approx(1.0)
    assert stats.chisquare(data.histogram, 100_000 * data.probabilities).pvalue > 1e-6
    again = dpkit_ldp.synthetic(distribution, n=100_000, k=20, rng=np.random.default_rng(3))
    np.testing.assert_array_equal(again.values, data.values)


def test_distribution_shapes() -> None:
    zipf = distribution_probabilities("zipf", 10, s=2.0)
    assert zipf[0] / zipf[1] == pytest.approx(4.0)
    geometric = distribution_probabilities("geometric", 10, scale=2.0)
    assert geometric[1] / geometric[0] == pytest.approx(math.exp(-0.5))
    gauss = distribution_probabilities("gaussian", 11, mean=5, std=2)
    assert gauss[4] == pytest.approx(gauss[6]) and gauss.argmax() == 5
    assert gauss[5] / gauss[7] == pytest.approx(math.exp(4 / 8))
    np.testing.assert_allclose(distribution_probabilities("uniform", 4), 0.25)


def test_synthetic_bad_input() -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(dpkit.InvalidParameter, match="distribution"):
        dpkit_ldp.synthetic("pareto", n=10, k=4, rng=rng)
    with pytest.raises(dpkit.InvalidParameter, match="k"):
        dpkit_ldp.synthetic("zipf", n=10, k=1, rng=rng)
    with pytest.raises(dpkit.InvalidParameter, match="std"):
        dpkit_ldp.synthetic("gaussian", n=10, k=4, rng=rng, std=-1)
    with pytest.raises(dpkit.InvalidParameter, match="scale"):
        dpkit_ldp.synthetic("zipf", n=10, k=4, rng=rng, scale=1)
    with pytest.raises(dpkit.InvalidParameter, match="n"):
        dpkit_ldp.synthetic("zipf", n=-1, k=4, rng=rng)


def test_histogram_demo_runs(capsys: pytest.CaptureFixture[str]) -> None:
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[3] / "examples" / "ldp" / "histogram_demo.py"
    spec = importlib.util.spec_from_file_location("ldp_histogram_demo", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(n=5000, k=6, epsilon=2.0, seed=1)
    out = capsys.readouterr().out
    for name in ("krr", "oue", "olh", "hr", "LDP estimate"):
        assert name in out
