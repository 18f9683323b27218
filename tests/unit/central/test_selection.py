"""Selection mechanisms: exponential, report_noisy_max, permute_and_flip.

Statistical tests use fixed seeds and reject at p < 1e-6 (false-positive rate ≤ 1e-6 each).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from dpkit_central import (
    Exponential,
    PermuteAndFlip,
    ReportNoisyMax,
    permute_and_flip_log_pmf,
    report_noisy_max_log_pmf,
    report_one_sided_noisy_argmax,
    utility_guarantee,
)
from scipy import integrate, stats
from scipy.special import logsumexp

import dpkit

ALPHA = 1e-6


def chi2_pvalue(samples: np.ndarray, probabilities: np.ndarray) -> float:
    observed = np.bincount(samples, minlength=len(probabilities))
    expected = probabilities * len(samples)
    keep = expected > 0
    assert observed[~keep].sum() == 0, "a zero-probability candidate was drawn"
    return float(stats.chisquare(observed[keep], expected[keep]).pvalue)


# --- exponential mechanism -----------------------------------------------------------------------


def test_extreme_utilities_are_stable() -> None:
    """PipelineDP returns NaN here; subtracting the maximum keeps every weight in [0, 1]."""
    mech = Exponential(epsilon=1.0)
    u = np.array([0.0, 1000.0, 2000.0])
    assert mech.randomize(u, rng=np.random.default_rng(0)) == 2
    logp = mech.log_probability(np.arange(3), u)
    assert np.all(np.isfinite(logp))
    assert logp[2] == pytest.approx(0.0, abs=1e-200)
    assert logp[1] == pytest.approx(-500.0, rel=1e-12)


def test_minus_infinity_is_never_chosen() -> None:
    mech = Exponential(epsilon=0.01)
    u = np.tile([-np.inf, 0.0, -np.inf, 0.0], (20_000, 1))
    out = mech.randomize(u, rng=np.random.default_rng(1))
    assert set(np.unique(out)) == {1, 3}
    assert mech.log_probability(0, u[0]) == -np.inf
    draws = mech.randomize(u[0], rng=np.random.default_rng(2), size=20_000)
    assert set(np.unique(draws)) == {1, 3}


@pytest.mark.parametrize(
    "bad,match",
    [
        ([0.0, math.nan], "NaN"),
        ([0.0, math.inf], r"\+inf"),
        ([], "at least one candidate"),
        (np.zeros((3, 0)), "at least one candidate"),
        ([-math.inf, -math.inf], "nothing to choose"),
        (["a", "b"], "real numbers"),
        (5.0, "at least one candidate"),
    ],
)
@pytest.mark.parametrize("name", ["exponential", "report_noisy_max", "permute_and_flip"])
def test_bad_utilities_are_refused(name: str, bad: object, match: str) -> None:
    mech = dpkit.mechanism(name, epsilon=1.0)
    with pytest.raises(dpkit.InvalidData, match=match) as info:
        mech.randomize(bad, rng=np.random.default_rng(0))
    assert info.value.field == "utilities"


def test_exponential_pmf_matches_definition() -> None:
    """Independent computation: Pr[r] = exp(λu_r) / Σ exp(λu), λ = ε/(2Δ) or ε/Δ (monotone)."""
    u = np.array([[1.0, 4.0, -2.0, 4.0], [0.0, 0.0, 3.0, -1.0]])
    for monotone, lam in ((False, 0.7 / (2 * 3.0)), (True, 0.7 / 3.0)):
        mech = Exponential(epsilon=0.7, sensitivity=3.0, monotone=monotone)
        expected = lam * u - logsumexp(lam * u, axis=-1, keepdims=True)
        got = mech.log_probability(np.arange(4)[:, None], u)
        assert got.shape == (4, 2)
        np.testing.assert_allclose(got.T, expected, rtol=1e-12)
    assert mech.log_probability(7, u[0]) == -np.inf


def test_exponential_pmf_takes_no_rounding_from_a_common_offset() -> None:
    """The pmf depends on differences only: the same rows at offsets of ±10¹⁵ (where the
    shifted utilities are exact doubles) score as at 0, tied candidates ½ each (λu first
    rounded 2.5·10¹⁴ + ln 2 to its last place: probabilities summing to 1.0057)."""
    mech = Exponential(epsilon=0.5, sensitivity=1.0)
    rows = np.array([[0.0, 0.0], [0.0, 3.0], [-2.0, 5.0], [1.0, -np.inf]])
    at_zero = mech.log_probability(np.arange(2)[:, None], rows)
    for offset in (1e15, -1e15):
        shifted = mech.log_probability(np.arange(2)[:, None], rows + offset)
        np.testing.assert_allclose(shifted, at_zero, rtol=1e-15, atol=0)
    assert at_zero[0, 0] == at_zero[1, 0] == pytest.approx(math.log(0.5), rel=1e-15)


@pytest.mark.parametrize("monotone", [False, True])
def test_exponential_is_epsilon_dp_on_its_declared_domain(monotone: bool) -> None:
    """Max log-ratio over neighbouring utility vectors of the declared domain ≤ ε."""
    eps, delta_u = 0.9, 2.0
    mech = Exponential(epsilon=eps, sensitivity=delta_u, monotone=monotone)
    assert mech.domain.monotone is monotone and mech.domain.norm == math.inf
    rng = np.random.default_rng(3)
    u = rng.normal(scale=5.0, size=(2000, 6))
    if monotone:
        d = rng.uniform(0, delta_u, size=u.shape) * rng.choice([-1, 1], size=(2000, 1))
        d[:10] = delta_u * np.where(np.arange(6) == 0, 0.0, 1.0)  # worst case: all but r move
    else:
        d = rng.choice([-delta_u, delta_u], size=u.shape)
    r = np.arange(6)[:, None]
    ratio = mech.log_probability(r, u) - mech.log_probability(r, u + d)
    assert np.max(np.abs(ratio)) <= eps + 1e-9
    assert np.max(np.abs(ratio)) > 0.8 * eps  # the bound is nearly attained


def test_dropping_the_factor_two_breaks_privacy_for_non_monotone_utilities() -> None:
    """Power check: the exact check above detects the classic bug (no 2 on a general utility)."""
    eps = 1.0
    wrong = Exponential(epsilon=eps, monotone=True)  # rate ε/Δ
    u = np.zeros(10)
    d = np.where(np.arange(10) == 0, 1.0, -1.0)  # a non-monotone neighbour
    ratio = wrong.log_probability(0, u + d) - wrong.log_probability(0, u)
    assert ratio > eps * 1.5


def test_exponential_batch_sampler_matches_pmf() -> None:
    mech = Exponential(epsilon=2.0, sensitivity=1.0)
    u = np.array([0.0, 1.0, 2.0, 2.0, -1.0])
    p = np.exp(mech.log_probability(np.arange(5), u))
    batch = mech.randomize(np.tile(u, (100_000, 1)), rng=np.random.default_rng(4))
    assert batch.shape == (100_000,)
    assert chi2_pvalue(batch, p) > ALPHA
    repeated = mech.randomize(u, rng=np.random.default_rng(5), size=100_000)
    assert chi2_pvalue(repeated, p) > ALPHA
    # power: the pmf without the factor 2 is rejected
    wrong = np.exp(Exponential(epsilon=2.0, monotone=True).log_probability(np.arange(5), u))
    assert chi2_pvalue(batch, wrong) < ALPHA


def test_gumbel_max_is_the_exponential_mechanism() -> None:
    """arg-max(λu + Gumbel) has the exponential mechanism's law (Yellott 1977)."""
    mech = Exponential(epsilon=1.0)
    u = np.array([0.0, 1.5, 3.0, 0.5])
    rng = np.random.default_rng(6)
    gumbel = np.argmax(mech.rate * u + rng.gumbel(size=(100_000, 4)), axis=1)
    assert chi2_pvalue(gumbel, np.exp(mech.log_probability(np.arange(4), u))) > ALPHA


def test_size_requires_one_row() -> None:
    with pytest.raises(dpkit.InvalidParameter, match="size"):
        Exponential(epsilon=1.0).randomize(np.zeros((2, 3)), rng=np.random.default_rng(0), size=4)


def test_output_space() -> None:
    np.testing.assert_array_equal(Exponential(epsilon=1.0).output_space(4), np.arange(4))
    with pytest.raises(dpkit.InvalidParameter, match="candidates"):
        Exponential(epsilon=1.0).output_space()


# --- utility guarantee (Dwork & Roth Theorem 3.11) ----------------------------------------------


def test_utility_guarantee_formula() -> None:
    gap = utility_guarantee(epsilon=0.5, sensitivity=2.0, candidates=100, t=3.0, optimal=4)
    assert gap == pytest.approx(2 * 2.0 / 0.5 * (math.log(100 / 4) + 3.0))
    mono = utility_guarantee(epsilon=0.5, sensitivity=2.0, candidates=100, t=3.0, monotone=True)
    assert mono == pytest.approx(2.0 / 0.5 * (math.log(100) + 3.0))
    assert Exponential(epsilon=0.5, sensitivity=2.0).utility_guarantee(100, 3.0, optimal=4) == gap


@pytest.mark.parametrize("monotone", [False, True])
def test_utility_guarantee_holds_exactly(monotone: bool) -> None:
    """Pr[u ≤ OPT − gap] computed from the exact pmf is ≤ e^−t for random utilities."""
    rng = np.random.default_rng(7)
    mech = Exponential(epsilon=0.8, sensitivity=1.5, monotone=monotone)
    for _ in range(50):
        u = np.round(rng.normal(scale=10, size=30))
        opt = u.max()
        for t in (0.0, 0.5, 2.0, 5.0):
            gap = mech.utility_guarantee(30, t, optimal=int(np.sum(u == opt)))
            p = np.exp(mech.log_probability(np.arange(30), u))
            assert p[u <= opt - gap].sum() <= math.exp(-t) + 1e-12


def test_two_disease_example_bound() -> None:
    """Dwork & Roth Example 3.6: Pr[report the disease with count 0] ≤ 2e^(−cε/2)."""
    for c in (1, 5, 20):
        for eps in (0.1, 1.0):
            p_wrong = math.exp(Exponential(epsilon=eps).log_probability(0, [0.0, float(c)]))
            assert p_wrong == pytest.approx(1 / (1 + math.exp(c * eps / 2)), rel=1e-12)
            assert p_wrong <= 2 * math.exp(-c * eps / 2)


@pytest.mark.parametrize("bad", [{"candidates": 0}, {"t": -1.0}, {"optimal": 11}, {"epsilon": 0.0}])
def test_utility_guarantee_validates(bad: dict[str, float]) -> None:
    args = {"epsilon": 1.0, "sensitivity": 1.0, "candidates": 10, "t": 1.0, "optimal": 1} | bad
    with pytest.raises(dpkit.InvalidParameter, match=next(iter(bad))):
        utility_guarantee(**args)  # type: ignore[arg-type]


# --- permute-and-flip -----------------------------------------------------------------------------


def brute_force_pf(u: np.ndarray, rate: float) -> np.ndarray:
    """Enumerate every order and every coin outcome of McKenna & Sheldon's Algorithm 1."""
    p = np.exp(rate * (u - u.max()))
    m = len(u)
    out = np.zeros(m)
    perms = list(itertools.permutations(range(m)))
    for order in perms:
        reach = 1.0
        for r in order:
            out[r] += reach * p[r] / len(perms)
            reach *= 1 - p[r]
    return out


@pytest.mark.parametrize("u", [[0.0, 1.0], [0.0, 1.0, 3.0, 3.0, -2.0], [5.0, -np.inf, 1.0, 2.5]])
@pytest.mark.parametrize("rate", [0.3, 1.7])
def test_permute_and_flip_pmf_matches_brute_force(u: list[float], rate: float) -> None:
    arr = np.array(u)
    exact = np.exp(permute_and_flip_log_pmf(arr, rate))
    np.testing.assert_allclose(exact, brute_force_pf(arr, rate), rtol=1e-10, atol=1e-300)
    assert exact.sum() == pytest.approx(1.0, abs=1e-12)


def test_permute_and_flip_pmf_large_m_is_normalised() -> None:
    u = np.random.default_rng(8).normal(scale=3, size=(3, 301))
    assert np.exp(permute_and_flip_log_pmf(u, 0.5)).sum(axis=1) == pytest.approx(1.0, abs=1e-10)


@pytest.mark.parametrize("monotone", [False, True])
def test_permute_and_flip_is_epsilon_dp(monotone: bool) -> None:
    eps = 1.0
    mech = PermuteAndFlip(epsilon=eps, monotone=monotone)
    rng = np.random.default_rng(9)
    u = rng.normal(scale=2.0, size=(500, 5))
    if monotone:
        d = rng.uniform(0, 1, size=u.shape) * rng.choice([-1, 1], size=(500, 1))
    else:
        d = rng.choice([-1.0, 1.0], size=u.shape)
    r = np.arange(5)[:, None]
    ratio = mech.log_probability(r, u) - mech.log_probability(r, u + d)
    assert np.max(np.abs(ratio)) <= eps + 1e-9


def test_permute_and_flip_sampler_matches_pmf() -> None:
    mech = PermuteAndFlip(epsilon=1.5, sensitivity=0.5)
    u = np.array([0.0, 0.3, 1.0, 1.0, -0.4, -np.inf])
    p = np.exp(mech.log_probability(np.arange(6), u))
    out = mech.randomize(np.tile(u, (100_000, 1)), rng=np.random.default_rng(10))
    assert chi2_pvalue(out, p) > ALPHA


def test_one_sided_exponential_argmax_is_permute_and_flip_not_the_exponential_mechanism() -> None:
    """Seed 003 Theorem 3.13 claims equality with the exponential mechanism; it is PF instead.

    Exact: with utilities (0, c), Pr[0] = e^(−λc)/2 under exponential noise vs 1/(1 + e^(λc)).
    Sampled: χ² accepts the PF pmf and rejects the exponential-mechanism pmf (α = 1e-6 each).
    """
    rate, c = 0.5, 2.0
    assert math.exp(permute_and_flip_log_pmf(np.array([0.0, c]), rate)[0]) == pytest.approx(
        math.exp(-rate * c) / 2, rel=1e-12
    )
    em = Exponential(epsilon=1.0)  # rate ε/2 = 0.5
    assert math.exp(em.log_probability(0, [0.0, c])) == pytest.approx(1 / (1 + math.exp(rate * c)))
    u = np.array([0.0, 1.0, 2.0, 2.5])
    draws = report_one_sided_noisy_argmax(
        np.tile(u, (200_000, 1)), rate=rate, rng=np.random.default_rng(11)
    )
    assert chi2_pvalue(draws, np.exp(permute_and_flip_log_pmf(u, rate))) > ALPHA
    assert chi2_pvalue(draws, np.exp(em.log_probability(np.arange(4), u))) < ALPHA


# --- report-noisy-max ----------------------------------------------------------------------------


def rnm_pmf(u: np.ndarray, scale: float) -> np.ndarray:
    """Pr[r] = ∫ f(x − u_r) ∏_{j≠r} F(x − u_j) dx for Laplace noise, by adaptive quadrature."""
    lap = stats.laplace(scale=scale)
    out = []
    for r in range(len(u)):

        def integrand(x: float, r: int = r) -> float:
            others = np.delete(u, r)
            return float(lap.pdf(x - u[r]) * np.prod(lap.cdf(x - others)))

        points = sorted(set(u.tolist()))
        value, _ = integrate.quad(
            integrand,
            -60 * scale + u.min(),
            60 * scale + u.max(),
            points=points,
            epsabs=1e-13,
            epsrel=1e-11,
            limit=400,
        )
        out.append(value)
    return np.array(out)


def test_report_noisy_max_scales() -> None:
    assert ReportNoisyMax(epsilon=0.5, sensitivity=2.0).scale == 8.0
    assert ReportNoisyMax(epsilon=0.5, sensitivity=2.0, monotone=True).scale == 4.0
    assert ReportNoisyMax(epsilon=1.0).has_exact_distribution


def test_report_noisy_max_sampler_matches_integral() -> None:
    mech = ReportNoisyMax(epsilon=1.0)
    u = np.array([0.0, 1.0, 2.0, -np.inf])
    p = rnm_pmf(u[:3], mech.scale)
    assert p.sum() == pytest.approx(1.0, abs=1e-8)
    out = mech.randomize(np.tile(u, (100_000, 1)), rng=np.random.default_rng(12))
    assert chi2_pvalue(out, np.append(p, 0.0)) > ALPHA


@pytest.mark.parametrize(
    "u,scale",
    [
        ([0.0, 0.5, 1.0], 2.0),
        ([0.0, 0.0, 3.0, -1.0], 1.0),
        ([0.0, 1.0], 1.0),
        ([2.0, -1.0, 0.3, 0.3, 4.0], 0.7),
    ],
)
def test_report_noisy_max_exact_pmf_matches_quadrature(u: list[float], scale: float) -> None:
    arr = np.array(u)
    exact = np.exp(report_noisy_max_log_pmf(arr, scale))
    np.testing.assert_allclose(exact, rnm_pmf(arr, scale), rtol=1e-8)
    assert exact.sum() == pytest.approx(1.0, abs=1e-12)


def test_report_noisy_max_two_candidates_closed_form() -> None:
    """Pr[X₀ − X₁ > d] = ½e^(−d/b)(1 + d/(2b)) for iid Lap(b) noise (difference of Laplaces)."""
    for d, b in ((1.0, 1.0), (3.0, 0.5), (0.2, 4.0)):
        p0 = math.exp(report_noisy_max_log_pmf(np.array([0.0, d]), b)[0])
        assert p0 == pytest.approx(0.5 * math.exp(-d / b) * (1 + d / (2 * b)), rel=1e-12)


def test_report_noisy_max_is_accurate_at_any_spread_and_offset() -> None:
    """Two candidates d scales apart, d from 1 to 10³⁰⁰: the closed form's logarithms,
    log P with P = e^(−d)(2 + d)/4 to a relative 10⁻¹³ and log(1 − P) within 10⁻¹⁵ (a log-sum-
    exp of terms near 1: a few ulps of 1), never above 0 (the winner's log-probability was
    1.6·10⁻⁵ at d = 10¹² and log 1.5 at 10²⁰ when the expansion took in the whole spread); the
    same at an offset of 10¹⁵ scales; a far third candidate leaves two tied ones at ½ each."""
    for d in (1.0, 10.0, 49.0, 51.0, 60.0, 1e3, 1e6, 1e12, 1e20, 1e300):
        loser = -d + math.log(2.0 + d) - math.log(4.0)
        winner = math.log1p(-math.exp(loser))
        for offset in (0.0, 1e15):
            got = report_noisy_max_log_pmf(np.array([offset + d, offset]), 1.0)
            if offset + d == offset:
                continue  # d is lost in the offset's double
            assert got[0] <= 0.0 and abs(got[0] - winner) <= 1e-15
            assert got[1] == pytest.approx(loser, rel=1e-13)
    tied = report_noisy_max_log_pmf(np.array([1e20, 0.0, 1e20]), 1.0)
    assert tied[[0, 2]] == pytest.approx([math.log(0.5)] * 2, rel=1e-15)
    assert tied[1] < -1e19


@pytest.mark.parametrize("monotone", [False, True])
def test_report_noisy_max_is_epsilon_dp(monotone: bool) -> None:
    """Exact log-ratios over random and extreme neighbours of the declared domain ≤ ε."""
    eps = 1.0
    mech = ReportNoisyMax(epsilon=eps, monotone=monotone)
    rng = np.random.default_rng(13)
    u = rng.normal(scale=2.0, size=(60, 5))
    if monotone:
        d = rng.uniform(0, 1, size=u.shape) * rng.choice([-1, 1], size=(60, 1))
        d[:5] = np.where(np.arange(5) == 0, 0.0, 1.0)
    else:
        d = rng.choice([-1.0, 1.0], size=u.shape)
    r = np.arange(5)[:, None]
    ratio = mech.log_probability(r, u) - mech.log_probability(r, u + d)
    assert np.max(np.abs(ratio)) <= eps + 1e-9
    # power: the same check flags the monotone scale used on non-monotone neighbours
    if not monotone:
        wrong = ReportNoisyMax(epsilon=eps, monotone=True)
        u0 = np.zeros(5)
        d0 = np.where(np.arange(5) == 0, -1.0, 1.0)
        assert wrong.log_probability(0, u0) - wrong.log_probability(0, u0 + d0) > eps


def test_report_noisy_max_exact_pmf_limits() -> None:
    with pytest.raises(dpkit.InvalidData, match="at most 16"):
        report_noisy_max_log_pmf(np.zeros(17), 1.0)
    logp = report_noisy_max_log_pmf(np.array([0.0, -np.inf, 1000.0, 2000.0]), 2.0)
    assert logp[1] == -np.inf and np.all(np.isfinite(logp[[0, 2, 3]]))


def test_selection_runs_on_the_secure_generator() -> None:
    """exponential and permute_and_flip run exactly in secure mode (exact Bernoulli(exp(−γ)),
    see test_central_secure_selection.py); report_noisy_max runs on an integer lattice with
    exact discrete Laplace noise (test_central_secure_noisy_max.py)."""
    from dpkit.randomness import SecureRandom

    rng = SecureRandom.from_key(b"central-selection".ljust(32, b"\0"))  # tests only
    u = np.array([0.0, 1.0, 2.0, -np.inf])
    em = Exponential(epsilon=1.0)
    draws = em.randomize(np.tile(u, (40_000, 1)), rng=rng)  # type: ignore[arg-type]
    assert chi2_pvalue(draws, np.exp(em.log_probability(np.arange(4), u))) > ALPHA
    pf = PermuteAndFlip(epsilon=1.0)
    draws = pf.randomize(np.tile(u, (40_000, 1)), rng=rng)  # type: ignore[arg-type]
    assert chi2_pvalue(draws, np.exp(pf.log_probability(np.arange(4), u))) > ALPHA
    rnm = ReportNoisyMax(epsilon=1.0)
    draws = rnm.randomize(np.tile(u, (40_000, 1)), rng=rng)  # type: ignore[arg-type]
    assert chi2_pvalue(draws, np.exp(rnm.secure_log_probability(np.arange(4), u))) > ALPHA
