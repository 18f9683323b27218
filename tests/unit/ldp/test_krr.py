"""k-ary randomized response: declared distribution, sampler, estimator, labels, bad input."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

import dpkit


@given(
    epsilon=st.floats(min_value=1e-3, max_value=30.0),
    k=st.integers(min_value=2, max_value=40),
)
def test_declared_pmf_sums_to_one_and_is_tight(epsilon: float, k: int) -> None:
    krr = dpkit.mechanism("krr", epsilon=epsilon, k=k)
    outputs = krr.output_space()
    for x in range(k):
        assert np.exp(krr.log_probability(outputs, x)).sum() == pytest.approx(1.0)
    worst = max(
        float(np.max(krr.log_probability(outputs, x) - krr.log_probability(outputs, x2)))
        for x, x2 in itertools.permutations(range(k), 2)
    )
    assert worst == pytest.approx(epsilon, rel=1e-9, abs=1e-12)


@given(
    epsilon=st.floats(min_value=1e-3, max_value=20.0), k=st.integers(min_value=2, max_value=1000)
)
def test_probabilities_match_wang_et_al(epsilon: float, k: int) -> None:
    krr = dpkit.mechanism("krr", epsilon=epsilon, k=k)
    e = math.exp(epsilon)
    assert krr.keep_probability == pytest.approx(e / (e + k - 1))
    assert krr.other_probability == pytest.approx(1 / (e + k - 1))
    assert krr.keep_probability + (k - 1) * krr.other_probability == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("epsilon", "k", "value"), [(0.5, 3, 0), (1.0, 16, 7), (3.0, 5, 4), (1.0, 2, 1)]
)
def test_sampler_matches_declared_pmf(epsilon: float, k: int, value: int) -> None:
    """Chi-square goodness of fit of the real sampler; false-positive rate 1e-6 per case."""
    krr = dpkit.mechanism("krr", epsilon=epsilon, k=k)
    n = 300_000
    reports = krr.randomize(np.full(n, value), rng=np.random.default_rng(17))
    observed = np.bincount(reports, minlength=k)
    expected = n * np.exp(krr.log_probability(np.arange(k), value))
    assert stats.chisquare(observed, expected).pvalue > 1e-6


def test_estimator_is_unbiased_with_the_exact_variance() -> None:
    """3000 surveys of 600 users; per-category mean and variance checks, ~1e-6 each."""
    krr = dpkit.mechanism("krr", epsilon=1.0, k=4)
    truth = np.repeat(np.arange(4), [300, 150, 100, 50])
    trials = 3000
    reports = krr.randomize(
        np.broadcast_to(truth, (trials, truth.size)), rng=np.random.default_rng(23)
    )
    counts = np.stack([np.bincount(row, minlength=4) for row in reports])
    p, q = krr.keep_probability, krr.other_probability
    estimates = (counts - 600 * q) / (p - q)
    true_counts = np.array([300, 150, 100, 50])
    # Independent computation of the exact variance: Var(C_v) = n_v p(1−p) + (n − n_v) q(1−q).
    exact = (true_counts * p * (1 - p) + (600 - true_counts) * q * (1 - q)) / (p - q) ** 2
    stats_ = dpkit.plugin.FrequencyCounts("krr", counts[0], 600)
    est = dpkit.estimate(krr, stats_)
    assert est.estimates == pytest.approx(estimates[0])
    from_formula = dpkit.estimate(
        krr,
        dpkit.plugin.FrequencyCounts(
            "krr", np.round(true_counts * (p - q) + 600 * q).astype(int), 600
        ),
    )
    assert from_formula.variance == pytest.approx(exact, rel=1e-2)
    z = (estimates.mean(axis=0) - true_counts) / np.sqrt(exact / trials)
    assert np.all(np.abs(z) < 5.3)  # 4 two-sided tests at 1e-7 each
    assert estimates.var(axis=0, ddof=1) / exact == pytest.approx(np.ones(4), abs=0.18)


def test_confidence_intervals_cover(rng: np.random.Generator) -> None:
    """95% intervals over 400 surveys cover each true count 95% of the time (binomial, 1e-6)."""
    krr = dpkit.mechanism("krr", epsilon=1.0, k=3)
    truth = np.repeat(np.arange(3), [5000, 3000, 2000])
    hits = np.zeros(3)
    for _ in range(400):
        low, high = dpkit.estimate(krr, krr.randomize(truth, rng=rng)).confidence_interval(0.95)
        hits += (low <= [5000, 3000, 2000]) & (high >= [5000, 3000, 2000])
    for h in hits:
        assert stats.binomtest(int(h), 400, 0.95).pvalue > 1e-6


def test_counts_merge_chunk_by_chunk(rng: np.random.Generator) -> None:
    krr = dpkit.mechanism("krr", epsilon=1.0, k=5)
    reports = krr.randomize(rng.integers(0, 5, 10_000), rng=rng)
    estimator = dpkit.get_registry().estimator(krr)
    merged = estimator.accumulate(reports[:3000]) + estimator.accumulate(reports[3000:])
    whole = estimator.accumulate(reports)
    assert merged.n == whole.n and np.array_equal(merged.counts, whole.counts)
    assert dpkit.estimate(krr, merged).estimates == pytest.approx(
        dpkit.estimate(krr, reports).estimates
    )


def test_labels_round_trip(rng: np.random.Generator) -> None:
    krr = dpkit.mechanism("krr", epsilon=2.0, categories=["red", "green", "blue"])
    assert krr.k == 3
    values = np.array(["blue", "red", "red", "green"] * 500)
    reports = krr.randomize(values, rng=rng)
    assert set(np.unique(reports).tolist()) <= {"red", "green", "blue"}
    assert krr.decode(krr.encode(values)).tolist() == values.tolist()
    est = dpkit.estimate(krr, reports)
    assert est.categories == ("red", "green", "blue")
    with pytest.raises(dpkit.InvalidData, match="purple"):
        krr.randomize(["red", "purple"], rng=rng)


def test_integer_labels(rng: np.random.Generator) -> None:
    krr = dpkit.mechanism("krr", epsilon=2.0, categories=[10, 20, 30])
    assert set(krr.randomize(np.array([10, 30] * 100), rng=rng).tolist()) <= {10, 20, 30}
    with pytest.raises(dpkit.InvalidData):
        krr.randomize([15], rng=rng)


@pytest.mark.parametrize(
    ("params", "parameter"),
    [
        ({"epsilon": 1.0, "k": 1}, "k"),
        ({"epsilon": 1.0, "k": 2.5}, "k"),
        ({"epsilon": 1.0, "k": True}, "k"),
        ({"epsilon": 1.0, "k": "4"}, "k"),
        ({"epsilon": 1.0}, "k"),
        ({"epsilon": 0.0, "k": 4}, "epsilon"),
        ({"epsilon": float("nan"), "k": 4}, "epsilon"),
        ({"epsilon": 1.0, "k": 3, "categories": ["a", "b"]}, "k"),
        ({"epsilon": 1.0, "categories": ["a", "a"]}, "categories"),
        ({"epsilon": 1.0, "categories": ["a", 1]}, "categories"),
        ({"epsilon": 1.0, "k": 4, "colour": "red"}, "colour"),
    ],
)
def test_bad_parameters_name_the_parameter(params: dict[str, object], parameter: str) -> None:
    with pytest.raises(dpkit.InvalidParameter) as info:
        dpkit.mechanism("krr", **params)
    assert info.value.parameter == parameter


def test_integral_float_k_is_accepted() -> None:
    assert dpkit.mechanism("krr", epsilon=1.0, k=4.0).k == 4


@pytest.mark.parametrize("values", [[0, 4], [-1], [0.0, 1.0], [True, False]])
def test_values_outside_the_domain_are_refused(
    values: list[object], rng: np.random.Generator
) -> None:
    with pytest.raises(dpkit.InvalidData) as info:
        dpkit.mechanism("krr", epsilon=1.0, k=4).randomize(values, rng=rng)
    assert "krr" in str(info.value)


def test_reports_of_the_wrong_domain_are_refused() -> None:
    krr = dpkit.mechanism("krr", epsilon=1.0, k=4)
    with pytest.raises(dpkit.InvalidData):
        dpkit.estimate(krr, [0, 9])
    with pytest.raises(dpkit.InvalidData, match="categories"):
        dpkit.estimate(krr, dpkit.plugin.FrequencyCounts("krr", [1, 2, 3], 6))
    with pytest.raises(dpkit.InvalidParameter, match="method"):
        dpkit.estimate(krr, [0, 1], method="magic")


def test_empty_input(rng: np.random.Generator) -> None:
    krr = dpkit.mechanism("krr", epsilon=1.0, k=3)
    assert krr.randomize(np.array([], dtype=float), rng=rng).size == 0
    est = dpkit.estimate(krr, [])
    assert est.n == 0 and not est.estimates.any()


def test_preserves_a_small_integer_dtype(rng: np.random.Generator) -> None:
    krr = dpkit.mechanism("krr", epsilon=1.0, k=200)
    out = krr.randomize(rng.integers(0, 200, 1000).astype(np.uint8), rng=rng)
    assert out.dtype == np.uint8 and out.max() < 200
