"""Binary randomized response: declared distribution, sampler, estimator, bad input."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

import dpkit

EPSILONS = st.floats(min_value=1e-3, max_value=30.0, allow_nan=False)


def max_log_ratio(mech: dpkit.plugin.Mechanism) -> float:
    outputs = mech.output_space()
    return max(
        float(np.max(mech.log_probability(outputs, x) - mech.log_probability(outputs, x2)))
        for x, x2 in itertools.permutations(mech.domain.elements(), 2)
    )


@given(epsilon=EPSILONS)
def test_declared_pmf_is_tight_at_epsilon(epsilon: float) -> None:
    rr = dpkit.mechanism("rr", epsilon=epsilon)
    assert max_log_ratio(rr) == pytest.approx(epsilon, rel=1e-9, abs=1e-12)
    for x in (0, 1):
        assert np.exp(rr.log_probability(rr.output_space(), x)).sum() == pytest.approx(1.0)


@given(epsilon=st.floats(min_value=1e-3, max_value=20.0))
def test_keep_probability_matches_the_formula(epsilon: float) -> None:
    rr = dpkit.mechanism("rr", epsilon=epsilon)
    # Independent form of p = e^ε / (1 + e^ε).
    assert rr.keep_probability == pytest.approx(math.exp(epsilon) / (1 + math.exp(epsilon)))
    assert rr.keep_probability + rr.flip_probability == pytest.approx(1.0)


def test_warner_two_coin_design_is_ln3() -> None:
    warner = dpkit.mechanism("rr", keep=0.75)
    assert warner.privacy.epsilon == pytest.approx(math.log(3))
    assert warner.flip_probability == 0.25


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 4.0])
@pytest.mark.parametrize("value", [0, 1])
def test_sampler_matches_declared_pmf(epsilon: float, value: int) -> None:
    """Binomial test of the real sampler; false-positive rate 1e-6 per case."""
    rr = dpkit.mechanism("rr", epsilon=epsilon)
    n = 400_000
    reports = rr.randomize(np.full(n, value), rng=np.random.default_rng(11))
    same = int(np.count_nonzero(reports == value))
    p_value = stats.binomtest(same, n, rr.keep_probability).pvalue
    assert p_value > 1e-6


def test_estimator_is_unbiased_with_the_stated_variance() -> None:
    """4000 surveys of 500 people; mean and variance checked at false-positive rate ~1e-6."""
    rr = dpkit.mechanism("rr", epsilon=0.8)
    truth = np.zeros(500, dtype=np.int8)
    truth[:140] = 1
    trials = 4000
    reports = rr.randomize(
        np.broadcast_to(truth, (trials, truth.size)), rng=np.random.default_rng(5)
    )
    ones = reports.sum(axis=1)
    est = np.array(
        [
            dpkit.estimate(rr, dpkit.plugin.FrequencyCounts("rr", [500 - s, s], 500)).estimates[1]
            for s in ones
        ]
    )
    variance = dpkit.estimate(rr, reports[0]).variance[1]
    p, q = rr.keep_probability, rr.flip_probability
    assert variance == pytest.approx(
        500 * p * q / (2 * p - 1) ** 2
    )  # Warner 1965, eq. (5) scaled to counts
    z = (est.mean() - 140) / math.sqrt(variance / trials)
    assert abs(z) < 4.9  # two-sided 1e-6
    assert est.var(ddof=1) / variance == pytest.approx(1.0, abs=0.16)  # ≈ 4.9 standard errors


def test_mle_is_a_named_option_clipping_to_the_range() -> None:
    rr = dpkit.mechanism("rr", epsilon=0.5)
    stats_ = dpkit.plugin.FrequencyCounts("rr", [100, 0], 100)  # no ones reported at all
    assert dpkit.estimate(rr, stats_).estimates[1] < 0  # the unbiased estimate is never clipped
    mle = dpkit.estimate(rr, stats_, method="mle")
    assert mle.estimates[1] == 0.0 and mle.method == "mle"


def test_works_on_any_shape_and_dtype(rng: np.random.Generator) -> None:
    rr = dpkit.mechanism("rr", epsilon=1.0)
    for values in (np.zeros((3, 4, 5), dtype=bool), np.ones((7, 2), dtype=np.uint8), np.zeros(9)):
        out = rr.randomize(values, rng=rng)
        assert out.shape == values.shape and out.dtype == values.dtype
        assert set(np.unique(out).tolist()) <= {0, 1}


def test_empty_input_gives_empty_reports_and_n_zero(rng: np.random.Generator) -> None:
    rr = dpkit.mechanism("rr", epsilon=1.0)
    assert rr.randomize([], rng=rng).size == 0
    est = dpkit.estimate(rr, [])
    assert est.n == 0 and est.estimates.tolist() == [0.0, 0.0]
    assert np.isnan(est.frequencies).all()


def test_undirected_graph_is_symmetric_and_each_pair_flips_once() -> None:
    """Each unordered pair flips with probability 1 − p; binomial test, rate 1e-6."""
    rr = dpkit.mechanism("rr", epsilon=1.0)
    n = 600
    adjacency = np.zeros((n, n), dtype=np.uint8)
    adjacency[0, 1:] = adjacency[1:, 0] = 1
    noisy = rr.randomize_graph(adjacency, rng=np.random.default_rng(3))
    assert np.array_equal(noisy, noisy.T)
    assert not noisy.diagonal().any()
    upper = np.triu_indices(n, 1)
    flips = int(np.count_nonzero(noisy[upper] != adjacency[upper]))
    assert stats.binomtest(flips, upper[0].size, rr.flip_probability).pvalue > 1e-6


def test_directed_graph_and_asymmetric_input(rng: np.random.Generator) -> None:
    rr = dpkit.mechanism("rr", epsilon=1.0)
    directed = np.triu(np.ones((5, 5), dtype=int), 1)
    with pytest.raises(dpkit.InvalidData, match="not symmetric"):
        rr.randomize_graph(directed, rng=rng)
    assert rr.randomize_graph(directed, rng=rng, undirected=False).shape == (5, 5)
    with pytest.raises(dpkit.InvalidData, match="square"):
        rr.randomize_graph(np.zeros((2, 3)), rng=rng)


@pytest.mark.parametrize(
    ("params", "parameter"),
    [
        ({"epsilon": 0}, "epsilon"),
        ({"epsilon": -1.0}, "epsilon"),
        ({"epsilon": float("nan")}, "epsilon"),
        ({"epsilon": float("inf")}, "epsilon"),
        ({"epsilon": "1"}, "epsilon"),
        ({"keep": 0.5}, "keep"),
        ({"keep": 1.0}, "keep"),
        ({}, "epsilon"),
        ({"epsilon": 1.0, "keep": 0.7}, "epsilon"),
    ],
)
def test_bad_parameters_name_the_parameter(params: dict[str, object], parameter: str) -> None:
    with pytest.raises(dpkit.InvalidParameter) as info:
        dpkit.mechanism("rr", **params)
    assert info.value.parameter == parameter
    assert "rr" in str(info.value) and "must be" in str(info.value)


@pytest.mark.parametrize("values", [[0, 2], [-1, 0], [0.5, 1.0], [np.nan], ["a"]])
def test_values_outside_zero_one_are_refused(
    values: list[object], rng: np.random.Generator
) -> None:
    with pytest.raises(dpkit.InvalidData):
        dpkit.mechanism("rr", epsilon=1.0).randomize(values, rng=rng)


@pytest.mark.parametrize("bad", [np.random.PCG64(0), 42, np.random.RandomState(0), "seed"])
def test_rng_must_be_a_generator(bad: object) -> None:
    with pytest.raises(dpkit.InvalidParameter, match="rng"):
        dpkit.mechanism("rr", epsilon=1.0).randomize([0, 1], rng=bad)  # type: ignore[arg-type]


def test_same_seed_same_reports() -> None:
    rr = dpkit.mechanism("rr", epsilon=1.0)
    values = np.arange(1000) % 2
    first = rr.randomize(values, rng=np.random.default_rng(9))
    assert np.array_equal(first, rr.randomize(values, rng=np.random.default_rng(9)))


def test_huge_epsilon_never_claims_more_than_it_delivers(rng: np.random.Generator) -> None:
    """At ε = 50 the flip probability underflows the 2⁻⁵³ grid; it must round up, not to 0."""
    rr = dpkit.mechanism("rr", epsilon=50.0)
    assert rr.flip_probability > 0.0
    assert np.isfinite(max_log_ratio(rr))
