"""Gaussian, RDP and PLD accounting against independent references (scipy, enumeration)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, optimize, special, stats

from dpkit.accounting import (
    account,
    compose_pld,
    compose_rdp,
    compose_zcdp,
    event_rdp,
    gaussian_noise_multiplier,
    kov_optimal_epsilon,
)
from dpkit.privacy import GaussianDP, LaplaceDP, PureDP, RandomizedResponseDP, SubsampledDP


def exact_gaussian_epsilon(mu: float, delta: float) -> float:
    """Balle & Wang 2018 Thm 8 for μ-GDP, solved with scipy in log space."""

    def excess(eps: float) -> float:
        a = stats.norm.cdf(mu / 2 - eps / mu)
        return a - math.exp(eps + stats.norm.logcdf(-mu / 2 - eps / mu)) - delta

    hi = 1.0
    while excess(hi) > 0:
        hi *= 2
    return optimize.brentq(excess, 0.0, hi, xtol=1e-13, rtol=1e-13)


@pytest.mark.parametrize("sigma", [0.5, 1.0, 2.0, 5.0])
@pytest.mark.parametrize("k", [1, 10, 100, 1000])
def test_k_fold_gaussian_best_within_one_percent_of_exact(sigma: float, k: int) -> None:
    reference = exact_gaussian_epsilon(math.sqrt(k) / sigma, 1e-5)
    best = account([(GaussianDP(sigma, 1e-5), k)], delta=1e-5)
    assert best.epsilon == pytest.approx(reference, rel=1e-6)
    assert best.epsilon <= reference * 1.01
    for method in ("zcdp", "rdp"):  # looser, but valid: never below the exact value
        assert account(
            [(GaussianDP(sigma, 1e-5), k)], delta=1e-5, method=method
        ).epsilon >= reference * (1 - 1e-9)


def test_pld_discretised_gaussian_close_to_exact() -> None:
    mixed = compose_pld([(GaussianDP(2.0, 1e-5), 50), (PureDP(1e-9), 1)], delta=1e-5)
    reference = exact_gaussian_epsilon(math.sqrt(50) / 2.0, 1e-5)
    assert reference * (1 - 1e-9) <= mixed.epsilon <= reference + 0.01


def test_gaussian_noise_multiplier_inverts_the_exact_curve() -> None:
    sigma = gaussian_noise_multiplier(1.0, delta=1e-5, steps=100)
    assert exact_gaussian_epsilon(math.sqrt(100) / sigma, 1e-5) == pytest.approx(1.0, rel=1e-9)


def test_subsampled_noise_multiplier_reaches_target() -> None:
    sigma = gaussian_noise_multiplier(2.0, delta=1e-5, steps=1000, sampling_rate=0.01, method="rdp")
    event = SubsampledDP(GaussianDP(sigma, 1e-5), 0.01)
    assert compose_rdp([(event, 1000)], delta=1e-5).epsilon <= 2.0
    smaller = SubsampledDP(GaussianDP(sigma * 0.999, 1e-5), 0.01)
    assert compose_rdp([(smaller, 1000)], delta=1e-5).epsilon > 2.0


@pytest.mark.parametrize("alpha", [2, 3, 8, 32])
def test_subsampled_gaussian_rdp_matches_quadrature(alpha: int) -> None:
    sigma, q = 1.0, 0.01

    def integrand(z: float) -> float:
        log_ratio = np.logaddexp(math.log1p(-q), math.log(q) + (2 * z - 1) / (2 * sigma**2))
        return math.exp(stats.norm.logpdf(z, scale=sigma) + alpha * log_ratio)

    value, _ = integrate.quad(
        integrand, -60, 60, points=[0, 1, alpha / sigma], epsabs=0, epsrel=1e-13, limit=400
    )
    expected = math.log(value) / (alpha - 1)
    got = event_rdp(SubsampledDP(GaussianDP(sigma, 1e-5), q), np.array([float(alpha)]))[0]
    assert got == pytest.approx(expected, rel=1e-8)


@pytest.mark.parametrize("alpha", [1.5, 2.0, 7.3])
def test_laplace_rdp_matches_quadrature(alpha: float) -> None:
    eps = 0.8
    p = stats.laplace(loc=0, scale=1 / eps)
    q = stats.laplace(loc=1, scale=1 / eps)
    value = sum(
        integrate.quad(
            lambda x: math.exp(alpha * p.logpdf(x) + (1 - alpha) * q.logpdf(x)), a, b, epsrel=1e-12
        )[0]
        for a, b in [(-80.0, 0.0), (0.0, 1.0), (1.0, 80.0)]
    )
    got = event_rdp(LaplaceDP(eps), np.array([alpha]))[0]
    assert got == pytest.approx(math.log(value) / (alpha - 1), rel=1e-8)


def test_pure_rdp_is_randomized_response() -> None:
    eps, alpha = 1.3, 4.5
    p = math.exp(eps) / (1 + math.exp(eps))
    direct = math.log(p**alpha * (1 - p) ** (1 - alpha) + (1 - p) ** alpha * p ** (1 - alpha)) / (
        alpha - 1
    )
    assert event_rdp(PureDP(eps), np.array([alpha]))[0] == pytest.approx(direct, rel=1e-12)


def test_dp_sgd_standard_case() -> None:
    """q = 0.01, σ = 1, 1000 steps, δ = 1e-5: RDP on integer orders vs the reference note's
    RDP (2.101, fractional orders too) and PLD (1.828) values."""
    bound = account([(SubsampledDP(GaussianDP(1.0, 1e-5), 0.01), 1000)], delta=1e-5, method="rdp")
    assert 1.828 < bound.epsilon < 2.101 * 1.01


def test_zcdp_conversion_reference_values() -> None:
    # accounting.md: ρ = 0.5, δ = 1e-5 → CKS20 4.728 (BS16 would be 5.299)
    bound = compose_zcdp([(GaussianDP(1.0, 1e-5), 1)], delta=1e-5)
    assert bound.epsilon == pytest.approx(4.728, abs=5e-4)


def _laplace_lower_bound(eps0: float, k: int, delta: float, h: float) -> float:
    """Independent optimistic PLD: losses rounded *down*, so δ and ε are under-estimated."""
    n = round(eps0 / h)
    grid = np.arange(-n, n + 1) * h
    pmf = np.zeros(2 * n + 1)
    pmf[-1] += 0.5  # L = ε0
    pmf[0] += 0.5 * math.exp(-eps0)  # L = −ε0
    cdf = 0.5 * (np.exp(-(eps0 - grid) / 2) - math.exp(-eps0))  # P[L ≤ l] for the density part
    pmf[:-1] += np.diff(cdf)  # mass of (g_j, g_{j+1}] goes down to g_j
    size = k * (len(pmf) - 1) + 1
    nfft = 1 << (size - 1).bit_length()
    composed = np.fft.irfft(np.fft.rfft(pmf, nfft) ** k, nfft)[:size]
    composed = np.maximum(composed, 0)
    losses = -k * n * h + np.arange(size) * h

    def delta_at(eps: float) -> float:
        above = losses > eps
        return float(np.sum(composed[above] * -np.expm1(eps - losses[above])))

    return optimize.brentq(lambda e: delta_at(e) - delta, 0, k * eps0, xtol=1e-9)


def test_hundred_laplace_within_one_percent_of_pld() -> None:
    ours = account([(LaplaceDP(1.0), 100)], delta=1e-6)
    assert ours.method == "pld"
    lower = _laplace_lower_bound(1.0, 100, 1e-6, h=1e-3)
    assert lower <= ours.epsilon <= 71.5 * 1.01
    assert ours.epsilon - lower < 0.15  # tight: within the lower bound's own rounding (k·h)


def test_randomized_response_count_is_not_ignored() -> None:
    """dp_accounting 0.6.0's PLD accountant reports ε ≈ 1 for compose(RR, 100); the exact
    value is KOV's optimal 83.53 (accounting.md §6.1)."""
    bound = compose_pld([(RandomizedResponseDP(1.0), 100)], delta=1e-6)
    assert bound.epsilon == pytest.approx(kov_optimal_epsilon(1.0, 100, 1e-6), rel=1e-7)
    assert bound.epsilon == pytest.approx(83.53, abs=0.005)


def test_kary_rr_pld_matches_enumeration() -> None:
    eps, k, n, delta = 1.0, 4, 30, 1e-6
    z = math.exp(eps) + k - 1
    pa, pb, p0 = math.exp(eps) / z, 1 / z, (k - 2) / z

    def delta_at(e: float) -> float:
        total = 0.0
        for a in range(n + 1):
            for b in range(n - a + 1):
                loss = (a - b) * eps
                if loss > e:
                    log_m = (
                        special.gammaln(n + 1)
                        - special.gammaln(a + 1)
                        - special.gammaln(b + 1)
                        - special.gammaln(n - a - b + 1)
                    )
                    total += math.exp(
                        log_m + a * math.log(pa) + b * math.log(pb) + (n - a - b) * math.log(p0)
                    ) * -math.expm1(e - loss)
        return total

    expected = optimize.brentq(lambda e: delta_at(e) - delta, 0, n * eps, xtol=1e-12)
    got = compose_pld([(RandomizedResponseDP(eps, k=k), n)], delta=delta).epsilon
    assert got == pytest.approx(expected, rel=1e-7)
