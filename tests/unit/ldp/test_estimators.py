"""Frequency estimators of every oracle: unbiasedness, variance against the formula, CI coverage.

The variance is recomputed here in an independent form, Var[ĉ_v] = (n_v p*(1 − p*) +
(n − n_v) q*(1 − q*))/(p* − q*)² (a sum of independent Bernoulli supports), with p*, q* from the
papers' formulas. Count-level simulation gives many trials cheaply; report-level trials run the
real randomizers and estimators. Every statistical assertion is Bonferroni-corrected so that each
test's false-positive rate is at most 1e-6 (normal approximations, n ≥ 2000 per trial).
"""

from __future__ import annotations

import math

import dpkit_ldp
import numpy as np
import pytest
from dpkit_ldp.datasets import distribution_probabilities
from scipy import stats

import dpkit

PROTOCOLS = ("krr", "sue", "oue", "olh", "hr")
E = math.e


def paper_support_probabilities(mech: dpkit.plugin.Mechanism) -> tuple[float, float]:
    """(p*, q*) from Wang et al. 2017 / Acharya et al. 2019, not from the module under test."""
    eps, k = mech.epsilon, mech.size  # type: ignore[attr-defined]
    if mech.name == "krr":
        return math.exp(eps) / (math.exp(eps) + k - 1), 1 / (math.exp(eps) + k - 1)
    if mech.name == "sue":
        h = math.exp(eps / 2)
        return h / (h + 1), 1 / (h + 1)
    if mech.name == "oue":
        return 0.5, 1 / (math.exp(eps) + 1)
    if mech.name == "olh":
        g = mech.range  # type: ignore[attr-defined]
        return math.exp(eps) / (math.exp(eps) + g - 1), 1 / g
    assert mech.name == "hr"
    return math.exp(eps) / (math.exp(eps) + 1), 0.5


def exact_variance(mech: dpkit.plugin.Mechanism, true_counts: np.ndarray) -> np.ndarray:
    p, q = paper_support_probabilities(mech)
    n = true_counts.sum()
    return (true_counts * p * (1 - p) + (n - true_counts) * q * (1 - q)) / (p - q) ** 2


def truth(k: int, n: int) -> np.ndarray:
    probs = distribution_probabilities("zipf", k)
    counts = np.floor(probs * n).astype(np.int64)
    counts[0] += n - counts.sum()
    return counts


@pytest.mark.parametrize("name", PROTOCOLS)
def test_unbiased_with_exact_variance_count_level(name: str) -> None:
    """3000 simulated surveys of 50,000 users (k = 8): per-category mean z-test and variance ratio.

    16 two-sided checks at 6.25e-8 each (|z| < 5.41): 1e-6 in total. The variance ratio has
    standard error sqrt(2/2999) = 0.026 (normal counts), so its bound is 1 ± 0.14.
    """
    mech = dpkit.mechanism(name, epsilon=1.0, k=8)
    counts = truth(8, 50_000)
    rng = np.random.default_rng(20261122)
    trials = 3000
    estimates = np.empty((trials, 8))
    reported = np.empty((trials, 8))
    for t in range(trials):
        est = dpkit.estimate(mech, dpkit_ldp.simulate_counts(mech, counts, rng=rng))
        estimates[t], reported[t] = est.estimates, est.variance
    exact = exact_variance(mech, counts)
    limit = stats.norm.isf(1e-6 / 32)
    z = (estimates.mean(axis=0) - counts) / np.sqrt(exact / trials)
    assert np.all(np.abs(z) < limit), z
    ratio = estimates.var(axis=0, ddof=1) / exact
    assert np.all(np.abs(ratio - 1) < limit * math.sqrt(2 / (trials - 1))), ratio
    # The reported (plug-in) variance is the exact one up to the plug-in error.
    np.testing.assert_allclose(reported.mean(axis=0), exact, rtol=0.01)


@pytest.mark.parametrize("name", PROTOCOLS)
def test_unbiased_with_exact_variance_report_level(name: str) -> None:
    """400 real surveys of 2000 users (k = 6) through randomize + accumulate + estimate.

    12 two-sided checks at 8.3e-8 each (|z| < 5.36): 1e-6 in total; the variance-ratio bound is
    1 ± 5.36·sqrt(2/399) = 1 ± 0.38 (catches a wrong p or q, e.g. the seed's SUE bug, by far).
    """
    k, n, trials = 6, 2000, 400
    mech = dpkit.mechanism(name, epsilon=1.0, k=k)
    counts = truth(k, n)
    values = np.repeat(np.arange(k), counts)
    rng = np.random.default_rng(99)
    reports = mech.randomize(np.tile(values, trials), rng=rng)
    reports = reports.reshape((trials, n, *reports.shape[1:]))
    estimator = dpkit.get_registry().estimator(mech)
    estimates = np.stack([estimator.estimate(estimator.accumulate(r)).estimates for r in reports])
    exact = exact_variance(mech, counts)
    limit = stats.norm.isf(1e-6 / 24)
    z = (estimates.mean(axis=0) - counts) / np.sqrt(exact / trials)
    assert np.all(np.abs(z) < limit), z
    ratio = estimates.var(axis=0, ddof=1) / exact
    assert np.all(np.abs(ratio - 1) < limit * math.sqrt(2 / (trials - 1))), ratio


@pytest.mark.parametrize("name", PROTOCOLS)
def test_confidence_intervals_cover(name: str) -> None:
    """95% intervals over 2000 simulated surveys of 10^5 users: each category's coverage count is
    Binomial(2000, 0.95); 8 two-sided checks at 6.25e-8 each, |hits − 1900| < 5.41·sd."""
    mech = dpkit.mechanism(name, epsilon=1.0, k=8)
    counts = truth(8, 100_000)
    rng = np.random.default_rng(5)
    trials = 2000
    hits = np.zeros(8)
    for _ in range(trials):
        low, high = dpkit.estimate(
            mech, dpkit_ldp.simulate_counts(mech, counts, rng=rng)
        ).confidence_interval(0.95)
        hits += (low <= counts) & (counts <= high)
    sd = math.sqrt(trials * 0.95 * 0.05)
    assert np.all(np.abs(hits - 0.95 * trials) < stats.norm.isf(1e-6 / 16) * sd), hits / trials


@pytest.mark.parametrize("name", PROTOCOLS)
def test_frequency_variance_is_the_formula_without_the_f_term(name: str) -> None:
    mech = dpkit.mechanism(name, epsilon=1.0, k=16)
    p, q = paper_support_probabilities(mech)
    cls = type(mech)
    assert cls.frequency_variance(k=16, epsilon=1.0, n=1000) == pytest.approx(  # type: ignore[attr-defined]
        q * (1 - q) / (1000 * (p - q) ** 2), rel=1e-6
    )


@pytest.mark.parametrize(
    ("name", "k", "value"),
    [
        ("krr", 16, 5.6624),
        ("oue", 64, 3.6827),
        ("sue", 64, 3.9177),
        ("olh", 64, 3.6917),
        ("hr", 64, 4.6827),
    ],
)
def test_frequency_variance_reference_values(name: str, k: int, value: float) -> None:
    """Reference numbers at ε = 1 (Var*·n) from Wang et al. 2017's formulas (peer notes, §5)."""
    cls = dpkit.get_registry().info(name).cls
    assert cls.frequency_variance(k=k, epsilon=1.0) == pytest.approx(value, abs=1e-4)  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", PROTOCOLS)
@pytest.mark.parametrize("method", ["clip", "norm_sub", "simplex"])
def test_post_processing_methods_are_named_and_consistent(name: str, method: str) -> None:
    mech = dpkit.mechanism(name, epsilon=0.5, k=12)
    counts = truth(12, 3000)
    stats_ = dpkit_ldp.simulate_counts(mech, counts, rng=np.random.default_rng(8))
    raw = dpkit.estimate(mech, stats_)
    post = dpkit.estimate(mech, stats_, method=method)
    assert raw.method == "unbiased" and post.method == method
    assert post.estimates.min() >= 0 and post.estimates.sum() == pytest.approx(3000)
    np.testing.assert_array_equal(post.variance, raw.variance)
    with pytest.raises(dpkit.InvalidParameter, match="method"):
        dpkit.estimate(mech, stats_, method="renormalise")


def test_statistics_of_another_mechanism_are_refused() -> None:
    sue = dpkit.mechanism("sue", epsilon=1.0, k=8)
    oue = dpkit.mechanism("oue", epsilon=1.0, k=8)
    counts = dpkit_ldp.simulate_counts(sue, truth(8, 100), rng=np.random.default_rng(0))
    with pytest.raises(dpkit.InvalidData, match="do not fit"):
        dpkit.estimate(oue, counts)
    with pytest.raises(dpkit.InvalidData, match="cannot merge"):
        _ = counts + dpkit_ldp.simulate_counts(oue, truth(8, 100), rng=np.random.default_rng(0))


def test_empty_reports() -> None:
    for name in PROTOCOLS:
        mech = dpkit.mechanism(name, epsilon=1.0, k=8)
        empty = mech.randomize(np.array([], dtype=np.int64), rng=np.random.default_rng(0))
        est = dpkit.estimate(mech, empty)
        assert est.n == 0 and np.all(est.estimates == 0)


@pytest.mark.parametrize("name", PROTOCOLS)
def test_secure_mode_is_the_default_and_estimates_correctly(name: str) -> None:
    """Reports drawn from a keyed SecureRandom (reproducible) and from the default secure source:
    each category's estimate within 5.33 sd of the truth (12 two-sided checks: 1e-6 in total)."""
    k, n = 6, 30_000
    mech = dpkit.mechanism(name, epsilon=1.0, k=k)
    counts = truth(k, n)
    values = np.repeat(np.arange(k), counts)
    exact = exact_variance(mech, counts)
    for rng in (dpkit.SecureRandom.from_key(bytes(range(32))), None):
        est = dpkit.estimate(mech, mech.randomize(values, rng=rng))
        z = (est.estimates - counts) / np.sqrt(exact)
        assert np.all(np.abs(z) < stats.norm.isf(1e-6 / 24)), z
