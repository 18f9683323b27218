"""Secure-mode Gaussian: releases on a power-of-two lattice with exact discrete Gaussian noise.

The privacy claim (the declared GaussianDP(z, δ) holds for the discrete release, with the
rounding charged to the sensitivity) is checked against an independent brute-force
hockey-stick divergence of the two shifted discrete Gaussians, on lattices coarse enough to
enumerate (the ``bits`` argument). Statistical tests use fixed keys and reject at p < 1e-6,
so each has a false-positive rate of at most 1e-6.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from dpkit_central import Count, Gaussian, Histogram, Mean, Sum
from dpkit_central.gaussian import SMOOTHING, LatticeGaussian, lattice_gaussian_release
from scipy import stats

import dpkit

ALPHA = 1e-6
KEY = bytes(range(32))  # fixed key: deterministic statistical tests (from_key is test-only)


def secure() -> dpkit.SecureRandom:
    return dpkit.SecureRandom.from_key(KEY)


def declared_delta(epsilon: float, z: float) -> float:
    """Balle & Wang 2018, Theorem 8, with scipy's normal CDF (independent of dpkit)."""
    a = stats.norm.cdf(1 / (2 * z) - epsilon * z)
    b = math.exp(epsilon + stats.norm.logcdf(-1 / (2 * z) - epsilon * z))
    return float(a - b)


def lattice_sensitivity(sensitivity: float, step: float, d: int) -> float:
    """Δ₂/g + √d: the rounding moves each of the d coordinates by at most half a step."""
    return sensitivity / step + math.sqrt(d)


def brute_force_delta(sigma2: int, shift: tuple[int, ...], epsilon: float) -> float:
    """sup_S P(S) − e^ε Q(S) = Σ_y p(y)·max(0, 1 − e^ε q(y)/p(y)) for P = N_ℤ(0, σ²)^d and
    Q = N_ℤ(μ, σ²)^d, summed over a box holding all but ~e^-98 of the mass. q/p is formed from
    the exact exponent (‖y‖² − ‖y − μ‖²)/(2σ²) (the normalisers cancel for integer μ)."""
    sigma = math.sqrt(sigma2)
    reach = int(max(abs(m) for m in shift) + 14 * sigma) + 1
    grid = np.arange(-reach, reach + 1, dtype=np.float64)
    weights = np.exp(-(grid**2) / (2 * sigma2))
    pmf = weights / weights.sum()
    if len(shift) == 1:
        (mu,) = shift
        p = pmf
        log_ratio = (2 * grid * mu - mu * mu) / (2 * sigma2)
    else:
        mu1, mu2 = shift
        p = np.outer(pmf, pmf)
        dot = mu1 * grid[:, None] + mu2 * grid[None, :]
        log_ratio = (2 * dot - (mu1 * mu1 + mu2 * mu2)) / (2 * sigma2)
    excess = -np.expm1(np.minimum(epsilon + log_ratio, 0.0))
    return float(np.sum(p * excess))


def integer_shifts(radius: float, d: int) -> list[tuple[int, ...]]:
    """Integer vectors with 0 < ‖μ‖₂ ≤ radius (up to sign and order: the pmf is symmetric)."""
    top = math.floor(radius)
    if d == 1:
        return [(m,) for m in range(1, top + 1)]
    return [
        (a, b)
        for a in range(0, top + 1)
        for b in range(0, a + 1)
        if 0 < a * a + b * b <= radius * radius
    ]


# --- the lattice --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "epsilon,delta,sensitivity", [(1.0, 1e-5, 1.0), (0.3, 1e-7, 3.0), (4.0, 1e-3, 0.01)]
)
def test_secure_outputs_lie_on_the_lattice_whatever_the_input(
    epsilon: float, delta: float, sensitivity: float
) -> None:
    gaussian = Gaussian(epsilon=epsilon, delta=delta, sensitivity=sensitivity)
    g = gaussian.lattice_step()
    assert g == 2.0 ** round(math.log2(g))  # a power of two
    assert 2.0**27 < gaussian.sigma / g <= 2.0**28
    rng = secure()
    for x in (0.0, 1 / 3, math.pi, -1e5 + 1e-9, 123456.789):
        out = gaussian.randomize(np.full(500, x), rng=rng)
        steps = out / g
        assert np.array_equal(steps, np.round(steps)), x
    vector = gaussian.randomize(np.array([[0.1, 0.2], [1e-300, -7.7]]))  # rng=None: secure
    assert vector.shape == (2, 2) and np.array_equal(vector / g, np.round(vector / g))


@pytest.mark.parametrize("d", [1, 2, 7, 1000])
def test_plan_charges_the_rounding_and_keeps_the_declared_noise_multiplier(d: int) -> None:
    """σ_L² ≥ z²(Δ₂/g + √d)² + τ², computed here in exact rationals; the zCDP ρ on the lattice
    is below the declared 1/(2z²); the extra noise is at most √d·z·2⁻²⁷ relative."""
    gaussian = Gaussian(epsilon=0.8, delta=1e-6, sensitivity=2.5)
    plan = gaussian.lattice(d)
    z = gaussian.privacy.noise_multiplier
    sqrt_d = Fraction(math.isqrt(d)) if math.isqrt(d) ** 2 == d else Fraction(math.sqrt(d))
    needed = (Fraction(z) * (Fraction(2.5) / Fraction(plan.step) + sqrt_d)) ** 2 + SMOOTHING**2
    assert plan.sigma2_steps >= needed * (1 - Fraction(1, 2**40))  # √d float: 1 ulp slack
    assert plan.sigma2_steps < needed + 2
    rho_lattice = plan.sensitivity_steps**2 / (2 * plan.sigma2_steps)
    assert rho_lattice <= 1 / (2 * Fraction(z) ** 2)  # CKS20 Theorem 14: zCDP as declared
    assert plan.noise_std / gaussian.sigma - 1 <= math.sqrt(d) * z * 2.0**-27 + 2.0**-44
    assert gaussian.privacy == dpkit.GaussianDP(noise_multiplier=z, delta=1e-6)


# --- privacy of the discrete release -------------------------------------------------------------


@pytest.mark.parametrize("sensitivity", [1.0, 1.3])
def test_declared_delta_holds_for_the_discrete_gaussian_one_coordinate(sensitivity: float) -> None:
    """Brute-force hockey stick of N_ℤ(0, σ_L²) vs N_ℤ(μ, σ_L²) for every integer shift μ up
    to the lattice sensitivity, against the declared continuous curve δ_z(ε) (scipy)."""
    gaussian = Gaussian(epsilon=1.0, delta=1e-5, sensitivity=sensitivity)
    z = gaussian.privacy.noise_multiplier
    plan = LatticeGaussian.plan(gaussian.sigma, sensitivity, 1, bits=8)
    radius = lattice_sensitivity(sensitivity, plan.step, 1)
    for epsilon in (0.0, 0.25, 0.5, 1.0, 2.0, 3.0):
        bound = declared_delta(epsilon, z)
        worst = max(
            brute_force_delta(plan.sigma2_steps, mu, epsilon) for mu in integer_shifts(radius, 1)
        )
        assert worst <= bound * (1 + 1e-9) + 1e-15, (epsilon, worst, bound)
    assert declared_delta(1.0, z) == pytest.approx(1e-5, rel=1e-6)


def test_declared_delta_holds_for_the_discrete_gaussian_two_coordinates() -> None:
    """As above for d = 2 (σ_L² ≈ 4500 steps², summed over the whole plane), for the eight
    longest integer shift vectors with ‖μ‖₂ ≤ Δ₂/g + √2 (the rounding of both coordinates)."""
    gaussian = Gaussian(epsilon=1.0, delta=1e-5, sensitivity=1.0)
    z = gaussian.privacy.noise_multiplier
    plan = LatticeGaussian.plan(gaussian.sigma, 1.0, 2, bits=6)
    radius = lattice_sensitivity(1.0, plan.step, 2)
    assert radius > 1.0 / plan.step + 1.4
    shifts = sorted(integer_shifts(radius, 2), key=lambda mu: -math.hypot(*mu))[:8]
    assert math.hypot(*shifts[0]) > 1.0 / plan.step  # beyond what Δ₂/g alone would cover
    for epsilon in (0.0, 0.5, 1.0, 2.0):
        bound = declared_delta(epsilon, z)
        worst = max(brute_force_delta(plan.sigma2_steps, mu, epsilon) for mu in shifts)
        assert worst <= bound * (1 + 1e-9) + 1e-15, (epsilon, worst, bound)


def test_without_the_rounding_allowance_the_declared_delta_fails() -> None:
    """The same check is not vacuous: σ_L calibrated to Δ₂/g alone (no √d, no τ) misses the
    declared δ for the shift that rounding can produce (Δ₂/g = 41.6 steps, μ = 42)."""
    gaussian = Gaussian(epsilon=1.0, delta=1e-5, sensitivity=1.3)
    z = gaussian.privacy.noise_multiplier
    step = LatticeGaussian.plan(gaussian.sigma, 1.3, 1, bits=8).step
    naive = math.ceil((Fraction(z) * Fraction(1.3) / Fraction(step)) ** 2)
    realised = round(0.49 + 1.3 / step) - round(0.49)  # x/g = 0.49, x′/g = 0.49 + Δ₂/g
    assert realised == 42 > 1.3 / step
    assert brute_force_delta(naive, (realised,), 1.0) > 1.01 * declared_delta(1.0, z)


# --- the distribution ----------------------------------------------------------------------------


def test_lattice_noise_matches_the_exact_discrete_gaussian_pmf() -> None:
    """Chi-square of (output/g − round(x/g)) against the exact pmf of N_ℤ(0, σ_L²) on a coarse
    lattice (bits=8), 60 bins over ±3σ_L plus the two tails. The 10⁵ answers are one released
    vector, so σ_L covers d = 10⁵ coordinates (Δ_L = Δ₂/g + √d)."""
    gaussian = Gaussian(epsilon=1.0, delta=1e-5, sensitivity=1.0)
    x, n = 1 / 3, 100_000
    plan = LatticeGaussian.plan(gaussian.sigma, 1.0, n, bits=8)
    assert plan.sensitivity_steps > 1.0 / plan.step + 316  # √(10⁵) ≈ 316.2
    out = lattice_gaussian_release(
        np.full(n, x), sigma=gaussian.sigma, sensitivity=1.0, rng=secure(), bits=8
    )
    noise = out / plan.step - round(x / plan.step)
    assert np.array_equal(noise, np.round(noise))
    s = math.sqrt(plan.sigma2_steps)
    support = np.arange(-int(16 * s), int(16 * s) + 1)
    pmf = np.exp(-(support.astype(np.float64) ** 2) / (2 * plan.sigma2_steps))
    pmf /= pmf.sum()
    edges = np.round(np.linspace(-3 * s, 3 * s, 61)).astype(np.int64)
    cuts = np.concatenate(([support[0]], edges, [support[-1] + 1]))
    cdf = np.concatenate(([0.0], np.cumsum(pmf)))
    expected = np.diff(cdf[cuts - support[0]]) * noise.size
    observed = np.histogram(noise, bins=cuts)[0]
    assert observed.sum() == noise.size
    assert stats.chisquare(observed, expected).pvalue > ALPHA


def test_secure_noise_has_the_gaussian_distribution_at_full_resolution() -> None:
    """KS test against N(x, σ²): the 2⁻²⁸σ lattice and the 1 + 2⁻²⁷z variance change are far
    below what 20,000 draws can see."""
    gaussian = Gaussian(epsilon=0.5, delta=1e-6, sensitivity=2.0)
    out = gaussian.randomize(np.full(20_000, 10.0), rng=secure())
    assert stats.kstest(out, stats.norm(loc=10.0, scale=gaussian.sigma).cdf).pvalue > ALPHA


def test_fast_mode_is_unchanged() -> None:
    gaussian = Gaussian(epsilon=1.0, delta=1e-5, sensitivity=2.0)
    values = np.array([0.5, -3.0, 1e6])
    out = gaussian.randomize(values, rng=np.random.default_rng(7))
    expected = values + np.random.default_rng(7).normal(0.0, gaussian.sigma, size=3)
    np.testing.assert_array_equal(out, expected)


def test_too_large_answers_are_clamped_to_the_lattice_range() -> None:
    """No data-dependent error: the lattice index is clamped to 2^61 − 1 (1-Lipschitz)."""
    gaussian = Gaussian(epsilon=1.0, delta=1e-5)
    out = gaussian.randomize(np.array([1e30]))
    assert out[0] == pytest.approx(((1 << 61) - 1) * gaussian.lattice_step(), rel=1e-6)


# --- queries and sessions ------------------------------------------------------------------------


def on_lattice(value: float | np.ndarray, step: float) -> bool:
    scaled = np.asarray(value) / step
    return bool(np.array_equal(scaled, np.round(scaled)))


def test_gaussian_queries_run_in_secure_mode() -> None:
    data = np.array([1.0, 2.0, 3.5, 9.0])
    count = Count(epsilon=1.0, noise="gaussian", delta=1e-6)
    result = count.run(data)  # rng=None: secure
    assert on_lattice(result.value, count.mechanism.lattice_step())
    total = Sum(lower=0.0, upper=10.0, epsilon=1.0, noise="gaussian", delta=1e-6)
    assert on_lattice(total.run(data, rng=secure()).value, total.mechanism.lattice_step())
    histogram = Histogram(categories=("a", "b", "c"), epsilon=1.0, noise="gaussian", delta=1e-6)
    released = histogram.run(np.array(["a", "b", "a"]), rng=secure())
    assert on_lattice(released.value, histogram.mechanism.lattice(3).step)
    mean = Mean(lower=0.0, upper=10.0, epsilon=1.0, noise="gaussian", delta=1e-6)
    out = mean.run(data, rng=secure())
    assert 0.0 <= out.value <= 10.0
    for part, (sigma, sensitivity) in zip(
        out.parts, ((p.sigma, p.sensitivity) for p in mean.parts()), strict=True
    ):
        assert on_lattice(part.value, LatticeGaussian.plan(sigma, sensitivity, 1).step)


def test_session_records_secure_gaussian_releases() -> None:
    session = dpkit.Session(budget=(2.0, 1e-5))
    query = Sum(lower=0.0, upper=10.0, epsilon=1.0, noise="gaussian", delta=1e-6)
    release = session.release(query, np.array([1.0, 2.0, 3.0]))
    assert release.entry.randomness == "secure"
    assert on_lattice(release.values.value, query.mechanism.lattice_step())
