"""Analytic and classic Gaussian calibration against an independent computation (scipy)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dpkit_central import Gaussian, analytic_gaussian_sigma, classic_gaussian_sigma
from scipy import optimize, stats

import dpkit


def independent_analytic_sigma(epsilon: float, delta: float) -> float:
    """Balle & Wang 2018, Theorem 8, solved with scipy's normal CDF and Brent's method.

    δ(σ) = Φ(1/(2σ) − εσ) − e^ε Φ(−1/(2σ) − εσ) for Δ = 1; the second term is formed in log
    space (logcdf) so that e^ε never overflows.
    """

    def excess(log_sigma: float) -> float:
        s = math.exp(log_sigma)
        a = stats.norm.cdf(1 / (2 * s) - epsilon * s)
        b = math.exp(epsilon + stats.norm.logcdf(-1 / (2 * s) - epsilon * s))
        return (a - b) / delta - 1.0

    root = optimize.brentq(excess, math.log(1e-3), math.log(1e3), xtol=1e-15, rtol=1e-15)
    return math.exp(root)


@pytest.mark.parametrize("epsilon,delta", [(0.5, 1e-5), (1.0, 1e-5), (2.0, 1e-6), (5.0, 1e-9)])
def test_analytic_sigma_matches_independent_computation(epsilon: float, delta: float) -> None:
    ours = analytic_gaussian_sigma(epsilon, delta)
    assert ours == pytest.approx(independent_analytic_sigma(epsilon, delta), rel=1e-6)
    assert Gaussian(epsilon=epsilon, delta=delta, sensitivity=2.5).sigma == pytest.approx(
        2.5 * ours, rel=1e-12
    )


def test_analytic_sigma_matches_published_peer_value() -> None:
    """diffprivlib's GaussianAnalytic gives σ ≈ 4.225 at ε = 1, δ = 1e-6 (central-peers note)."""
    assert analytic_gaussian_sigma(1.0, 1e-6) == pytest.approx(4.225, abs=5e-4)


@pytest.mark.parametrize("epsilon,delta", [(0.01, 1e-12), (0.5, 0.3), (20.0, 1e-10), (3.0, 1e-3)])
def test_analytic_sigma_never_exceeds_delta_and_is_tight(epsilon: float, delta: float) -> None:
    sigma = analytic_gaussian_sigma(epsilon, delta)
    a = stats.norm.cdf(1 / (2 * sigma) - epsilon * sigma)
    b = math.exp(epsilon + stats.norm.logcdf(-1 / (2 * sigma) - epsilon * sigma))
    assert a - b <= delta * (1 + 1e-9)
    smaller = sigma * (1 - 1e-6)
    a = stats.norm.cdf(1 / (2 * smaller) - epsilon * smaller)
    b = math.exp(epsilon + stats.norm.logcdf(-1 / (2 * smaller) - epsilon * smaller))
    assert a - b > delta


@pytest.mark.parametrize("epsilon,delta", [(0.1, 1e-5), (0.5, 1e-6), (0.9, 1e-3)])
def test_classic_sigma_formula_and_it_is_never_below_analytic(epsilon: float, delta: float) -> None:
    classic = Gaussian(epsilon=epsilon, delta=delta, calibration="classic").sigma
    assert classic == pytest.approx(math.sqrt(2 * math.log(1.25 / delta)) / epsilon, rel=1e-12)
    assert classic == classic_gaussian_sigma(epsilon, delta)
    assert classic >= analytic_gaussian_sigma(epsilon, delta)


@pytest.mark.parametrize("epsilon", [1.0, 2.0, 10.0])
def test_classic_refuses_epsilon_at_least_one_and_points_to_analytic(epsilon: float) -> None:
    with pytest.raises(dpkit.InvalidParameter) as info:
        dpkit.mechanism("gaussian", epsilon=epsilon, delta=1e-5, calibration="classic")
    assert info.value.parameter == "epsilon"
    assert "analytic" in str(info.value)
    with pytest.raises(dpkit.InvalidParameter, match="analytic"):
        classic_gaussian_sigma(epsilon, 1e-5)


def test_unknown_calibration_is_refused() -> None:
    with pytest.raises(dpkit.InvalidParameter) as info:
        dpkit.mechanism("gaussian", epsilon=1.0, delta=1e-5, calibration="tight")
    assert info.value.parameter == "calibration"
    assert "'analytic'" in str(info.value)


@pytest.mark.parametrize("bad", [(0.0, 1e-5), (1.0, 0.0), (1.0, 1.0), (math.inf, 1e-5)])
def test_calibration_functions_validate(bad: tuple[float, float]) -> None:
    with pytest.raises(dpkit.InvalidParameter):
        analytic_gaussian_sigma(*bad)


def test_sigma_is_exposed_and_is_not_a_parameter() -> None:
    mech = dpkit.mechanism("gaussian", epsilon=1.0, delta=1e-5)
    assert "sigma" not in type(mech).parameters()
    assert mech.sigma == mech.scale == math.sqrt(mech.variance)
    assert np.isfinite(mech.sigma)
