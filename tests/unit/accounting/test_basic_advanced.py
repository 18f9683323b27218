"""Basic and advanced composition against independent computations (exact to 1e-9)."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import special

from dpkit.accounting import (
    NotApplicable,
    account,
    compose_advanced,
    compose_basic,
    compose_parallel,
    drv_epsilon,
    kov_epsilon,
    kov_optimal_delta,
    kov_optimal_epsilon,
)
from dpkit.errors import InvalidParameter
from dpkit.privacy import (
    ApproximateDP,
    GaussianDP,
    LaplaceDP,
    PureDP,
    RandomizedResponseDP,
    SubsampledDP,
)


def test_ten_tenths_are_exactly_one() -> None:
    bound = compose_basic([(PureDP(0.1), 10)])
    assert bound.exact_epsilon == 1
    assert bound.epsilon == 1.0
    assert sum([0.1] * 10) != 1.0  # the float sum is not, which is the point


def test_basic_sums_heterogeneous_events_exactly() -> None:
    events = [(PureDP(0.3), 3), (ApproximateDP(0.2, 1e-7), 5), (RandomizedResponseDP(0.7, k=4), 1)]
    bound = compose_basic(events)
    assert bound.exact_epsilon == Fraction(3, 10) * 3 + Fraction(2, 10) * 5 + Fraction(7, 10)
    assert bound.exact_delta == Fraction(5, 10**7)


def test_basic_subsampled_pure_is_amplified() -> None:
    bound = compose_basic([(SubsampledDP(PureDP(1.0), 0.1), 4)])
    assert bound.epsilon == pytest.approx(4 * math.log(1 + 0.1 * (math.e - 1)), rel=1e-12)


def test_basic_shares_delta_among_gaussians() -> None:
    from scipy.optimize import brentq
    from scipy.stats import norm

    bound = compose_basic([(GaussianDP(2.0, 1e-9), 4), (ApproximateDP(0.1, 2e-6), 1)], delta=1e-5)
    share = (1e-5 - 2e-6) / 4
    mu = 0.5

    def excess(eps: float) -> float:
        return norm.cdf(mu / 2 - eps / mu) - math.exp(eps) * norm.cdf(-mu / 2 - eps / mu) - share

    expected = 4 * brentq(excess, 0, 50, xtol=1e-14) + 0.1
    assert bound.epsilon == pytest.approx(expected, rel=1e-9)
    assert bound.delta == pytest.approx(1e-5, rel=1e-12)


def test_drv_formula() -> None:
    # Dwork & Roth Thm 3.20 evaluated independently with mpmath-free arithmetic
    for eps, k, dp in [(1.0, 100, 1e-6), (0.1, 100, 1e-6), (0.01, 1000, 1e-5)]:
        expected = eps * math.sqrt(2 * k * math.log(1 / dp)) + k * eps * (math.exp(eps) - 1)
        assert drv_epsilon(eps, k, dp) == pytest.approx(expected, rel=1e-12)
    assert drv_epsilon(1.0, 100, 1e-6) == pytest.approx(224.4, abs=0.05)  # reference table


def test_kov_closed_form_matches_reference_table() -> None:
    # accounting.md §1: k=100, δ=1e-6: 98.8 at ε0=1 and 5.76 at ε0=0.1
    assert kov_epsilon([(1.0, 100)], 1e-6) == pytest.approx(98.8, abs=0.05)
    assert kov_epsilon([(0.1, 100)], 1e-6) == pytest.approx(5.76, abs=0.005)


def _rr_product_delta(eps: float, k: int, eps_prime: float) -> float:
    """Brute force: the hockey-stick divergence of k-fold RR, enumerating all 2^k outputs."""
    p = math.exp(eps) / (1 + math.exp(eps))
    total = 0.0
    for outcome in itertools.product([0, 1], repeat=k):
        flips = sum(outcome)
        prob_p = p ** (k - flips) * (1 - p) ** flips
        prob_q = (1 - p) ** (k - flips) * p**flips
        total += max(prob_p - math.exp(eps_prime) * prob_q, 0.0)
    return total


@pytest.mark.parametrize("eps,k", [(0.5, 6), (1.0, 9), (0.2, 12)])
def test_kov_optimal_delta_equals_brute_force(eps: float, k: int) -> None:
    for eps_prime in np.linspace(0, k * eps, 13):
        assert kov_optimal_delta(float(eps_prime), eps, k) == pytest.approx(
            _rr_product_delta(eps, k, float(eps_prime)), rel=1e-9, abs=1e-15
        )


def test_kov_optimal_matches_theorem_3_3_grid_points() -> None:
    eps, k = 0.7, 30
    for i in range(k // 2 + 1):
        delta_i = (
            sum(
                special.comb(k, j, exact=True)
                * (math.exp((k - j) * eps) - math.exp((k - 2 * i + j) * eps))
                for j in range(i)
            )
            / (1 + math.exp(eps)) ** k
        )
        assert kov_optimal_delta((k - 2 * i) * eps, eps, k) == pytest.approx(
            delta_i, rel=1e-9, abs=1e-15
        )


def test_kov_optimal_epsilon_inverts_delta() -> None:
    eps = kov_optimal_epsilon(1.0, 100, 1e-6)
    assert eps == pytest.approx(83.53, abs=0.005)  # reference table
    assert kov_optimal_delta(eps, 1.0, 100) <= 1e-6
    assert kov_optimal_delta(eps * (1 - 1e-9), 1.0, 100) > 1e-6 * (1 - 1e-6)


def test_kov_optimal_with_per_step_delta() -> None:
    eps = kov_optimal_epsilon(0.5, 20, 1e-4, delta0=1e-6)
    left = 1e-4
    budget = 1 - (1 - left) / (1 - 1e-6) ** 20
    assert kov_optimal_delta(eps, 0.5, 20) <= budget * (1 + 1e-12)


def test_advanced_is_the_min_and_never_worse_than_basic() -> None:
    for eps in (0.01, 0.1, 1.0, 3.0):
        bound = compose_advanced([(LaplaceDP(eps), 50)], delta=1e-6)
        assert bound.epsilon <= 50 * eps + 1e-12
        assert bound.epsilon == min(bound.detail["bounds"].values())


def test_advanced_refuses_gaussians() -> None:
    with pytest.raises(NotApplicable):
        compose_advanced([(GaussianDP(1.0, 1e-5), 3)], delta=1e-5)


def test_advanced_delta_must_exceed_spent() -> None:
    with pytest.raises(InvalidParameter):
        compose_advanced([(ApproximateDP(1.0, 1e-5), 10)], delta=1e-5)


def test_best_reports_the_method_that_won() -> None:
    bound = account([(PureDP(0.1), 100)], delta=1e-6)
    numbers = {k: v for k, v in bound.candidates.items() if isinstance(v, float)}
    assert bound.epsilon == min(numbers.values())
    assert numbers[bound.method] == bound.epsilon


def test_parallel_is_the_worst_partition() -> None:
    bound = compose_parallel([[(PureDP(0.5), 2)], [(PureDP(0.2), 3)]], delta=1e-6, method="basic")
    assert bound.epsilon == 1.0
    assert bound.detail["partition"] == 0
