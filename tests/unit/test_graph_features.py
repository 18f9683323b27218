"""The multi-bit mechanism for node features: exactly unbiased with its declared variance,
ε-LDP by the exact tier, Sajadmanesh & Gatica-Perez's m*."""

from __future__ import annotations

import numpy as np
import pytest
from dpkit_ldp.graph_features import optimal_m

import dpkit
from dpkit.testing import exact_check


@pytest.mark.parametrize(("epsilon", "m"), [(0.5, 1), (3.0, 2), (6.0, 3)])
def test_rectified_features_are_exactly_unbiased(epsilon: float, m: int) -> None:
    mechanism = dpkit.mechanism(
        "multibit", epsilon=epsilon, lower=-1.0, upper=3.0, dimension=4, k=m
    )
    space = mechanism.output_space()
    for x in (np.array([-1.0, 3.0, 0.2, 1.0]), np.array([2.5, 2.5, -0.5, 0.0])):
        p = np.exp(mechanism.log_probability(space, np.tile(x, (len(space), 1))))
        assert p.sum() == pytest.approx(1.0, abs=1e-12)
        np.testing.assert_allclose(p @ space, x, atol=1e-12)
        variance = p @ (space - x) ** 2
        np.testing.assert_allclose(variance, mechanism.variance_at(x[None, :])[0], rtol=1e-10)
    result = exact_check(mechanism)
    assert result.checked and not result.violation
    assert result.epsilon == pytest.approx(epsilon, abs=1e-9)  # the bound is attained


def test_default_m_is_sajadmanesh_gatica_perez() -> None:
    assert optimal_m(1.0, 10) == 1
    assert optimal_m(8.0, 10) == 3
    assert optimal_m(100.0, 10) == 10
    assert dpkit.mechanism("multibit", epsilon=8.0, dimension=10).sampled == 3


def test_mean_estimate_through_the_real_sampler() -> None:
    """The mean of 200,000 rectified reports is within 5.3 standard errors of the true mean
    in each of 3 coordinates (false-positive rate ≤ 3·1.2e-7), in secure mode."""
    mechanism = dpkit.mechanism("multibit", epsilon=4.0, lower=0.0, upper=1.0, dimension=3)
    x = np.array([0.1, 0.5, 0.95])
    reports = mechanism.randomize(np.tile(x, (200_000, 1)))  # rng=None: secure
    estimate = dpkit.estimate(mechanism, reports)
    assert np.all(np.abs(estimate.estimates - x) <= 5.3 * np.sqrt(estimate.variance))
