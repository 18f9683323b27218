"""Secure report-noisy-max: discrete Laplace noise on a power-of-two lattice, lowest index on ties.

The privacy checks compute the mechanism's pmf by brute force, independently of the code
under test: the lattice scores with ``fractions`` (Python's ``round``, ties to even), the
discrete Laplace pmf on a truncated support [−T, T] whose left-out mass 2q^(T+1)/(1 + q) is
below 1e-28 (so every probability is off by less than m·1e-28, and the tests assert every
probability they compare exceeds 1e-9), and the arg-max law as Σ_z P[Z_i = z] ∏_j P[Z_j ≤ ·]
from cumulative sums of that pmf. Every statistical test is a χ² goodness-of-fit test at
α = 1e-6 (false-positive rate ≤ 1e-6 per test) with a fixed test key, against the exact
secure pmf (``secure_report_noisy_max_log_pmf``, itself checked against the brute force).
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from dpkit_central import noisy_max
from dpkit_central.noisy_max import (
    RNM_LATTICE_BITS,
    ReportNoisyMax,
    lattice_scores,
    noisy_max_lattice,
    secure_report_noisy_max_log_pmf,
)
from scipy import stats

import dpkit
from dpkit.randomness import SecureRandom

ALPHA = 1e-6
TOL = 1e-12
COARSE = 2  # lattice bits for the brute-force checks: g = Δu/4 when Δu is a power of two


def secure(tag: bytes) -> SecureRandom:
    return SecureRandom.from_key(tag.ljust(32, b"\0"))  # fixed key: reproducible, tests only


def chi2_pvalue(samples: np.ndarray, probabilities: np.ndarray) -> float:
    observed = np.bincount(samples.ravel(), minlength=probabilities.size)
    expected = probabilities * samples.size
    keep = expected > 0
    assert observed[~keep].sum() == 0, "a zero-probability candidate was drawn"
    return float(stats.chisquare(observed[keep], expected[keep]).pvalue)


# --- independent references ----------------------------------------------------------------------


def reference_lattice(
    eps: float, delta: float, monotone: bool, bits: int
) -> tuple[Fraction, int, Fraction]:
    """(g, D, t) from the definitions, in rationals: g = 2^(⌈log₂ Δu⌉ − bits), D = ⌊Δu/g⌋ + 1,
    t = c·D/ε rounded up to a multiple of 2⁻¹⁶."""
    exponent = 0
    while Fraction(2) ** exponent < Fraction(delta):
        exponent += 1
    while Fraction(2) ** (exponent - 1) >= Fraction(delta):
        exponent -= 1
    g = Fraction(2) ** (exponent - bits)
    steps = math.floor(Fraction(delta) / g) + 1
    t = Fraction((1 if monotone else 2) * steps) / Fraction(eps)
    return g, steps, Fraction(math.ceil(t * 2**16), 2**16)


def reference_scores(u: list[float], g: Fraction) -> list[int | None]:
    return [round(Fraction(x) / g) if math.isfinite(x) else None for x in u]


def brute_pmf(scores: np.ndarray, t: float) -> np.ndarray:
    """Pr[i] of argmax (k + Z), lowest index on ties, for rows of integer scores (S, m).

    Truncated support [−T, T] with T = ⌈70t⌉ (left-out mass < 2e^(−70) < 1e-28).
    """
    q = math.exp(-1.0 / t)
    big_t = math.ceil(70 * t)
    z = np.arange(-big_t, big_t + 1)
    pmf = (1 - q) / (1 + q) * q ** np.abs(z)
    cdf = np.concatenate([[0.0], np.cumsum(pmf)])  # cdf[x + T + 1] = P[−T ≤ Z ≤ x]
    scores = np.asarray(scores, dtype=np.int64)
    rows, m = scores.shape
    out = np.empty((rows, m))
    for i in range(m):
        prod = np.broadcast_to(pmf, (rows, z.size)).copy()
        for j in range(m):
            if j == i:
                continue
            c = scores[:, i] - scores[:, j] - (1 if j < i else 0)  # Z_j ≤ z + c
            index = np.clip(z[None, :] + c[:, None] + big_t + 1, 0, cdf.size - 1)
            prod *= cdf[index]
        out[:, i] = prod.sum(axis=1)
    return out


def max_log_ratio(p: np.ndarray, p_neighbours: np.ndarray) -> float:
    """max over neighbour rows and candidates of |ln p − ln p′| (p is one row)."""
    assert p.min() > 1e-9 and p_neighbours.min() > 1e-9
    return float(np.abs(np.log(p_neighbours) - np.log(p)).max())


# --- 1. privacy, checked exactly -----------------------------------------------------------------

SCORE_ROWS = [[0, 0], [0, 3], [0, 0, 0], [2, 0, -1], [1, 4, 0, 2], [0, 0, 0, 0]]


def shifts(m: int, low: int, high: int) -> np.ndarray:
    return np.array(list(itertools.product(range(low, high + 1), repeat=m)))


@pytest.mark.parametrize("steps", [1, 2])
@pytest.mark.parametrize("eps", [0.5, 1.0, 3.0])
@pytest.mark.parametrize("k", SCORE_ROWS)
def test_lattice_mechanism_is_epsilon_dp_over_every_integer_neighbour(
    k: list[int], eps: float, steps: int
) -> None:
    """Every k′ with |k − k′|∞ ≤ D, at t = 2D/ε: max |ln Pr[i|k] − ln Pr[i|k′]| ≤ ε.

    Monotone neighbours (k′ − k ∈ [0, D]^m or [−D, 0]^m) at t = D/ε: also ≤ ε.
    """
    base = np.array([k])
    d = shifts(len(k), -steps, steps)
    p = brute_pmf(base, 2 * steps / eps)[0]
    assert max_log_ratio(p, brute_pmf(base + d, 2 * steps / eps)) <= eps + TOL
    up, down = shifts(len(k), 0, steps), shifts(len(k), -steps, 0)
    p = brute_pmf(base, steps / eps)[0]
    assert (
        max_log_ratio(p, brute_pmf(np.vstack([base + up, base + down]), steps / eps)) <= eps + TOL
    )


@pytest.mark.parametrize("eps", [0.5, 1.0, 3.0])
def test_the_check_fails_with_the_monotone_scale_on_general_neighbours(eps: float) -> None:
    """t = D/ε (the monotone scale) on neighbours moving in both directions exceeds ε: the
    brute-force check above can fail."""
    worst = 0.0
    for k in SCORE_ROWS[:3]:
        base = np.array([k])
        p = brute_pmf(base, 1 / eps)[0]
        worst = max(worst, max_log_ratio(p, brute_pmf(base + shifts(len(k), -1, 1), 1 / eps)))
    assert worst > 1.3 * eps


def test_the_check_fails_when_rounding_is_not_charged() -> None:
    """D = Δu/g without the + 1 for rounding: Δu = 0.75 on g = 1/4 gives Δu/g = 3, but with
    ties to even 1.125 → 4 and 1.875 → 8, 0.375 → 2 and −0.375 → −2, so neighbouring scores
    move by 4 > 3 and t = 2·3/ε is not ε-DP; the mechanism's D = 4 is."""
    eps = 1.0
    g, steps, t = reference_lattice(eps, 0.75, False, COARSE)
    assert (g, steps) == (Fraction(1, 4), 4)
    u, v = [1.125, 1.125, 0.375], [1.875, 1.875, -0.375]  # neighbours: each moves by 0.75
    k, k2 = np.array([reference_scores(u, g)]), np.array([reference_scores(v, g)])
    assert k.tolist() == [[4, 4, 2]] and k2.tolist() == [[8, 8, -2]]
    assert max_log_ratio(brute_pmf(k, 6 / eps)[0], brute_pmf(k2, 6 / eps)) > 1.2 * eps
    assert max_log_ratio(brute_pmf(k, float(t))[0], brute_pmf(k2, float(t))) <= eps + TOL


UTILITY_ROWS = [[0.0, 1.0], [0.3, 1.1, 0.0], [0.125, 0.375, -0.625], [0.0, 1.0, 2.0, 0.5]]


@pytest.mark.parametrize("monotone", [False, True])
@pytest.mark.parametrize("eps", [0.5, 1.0])
@pytest.mark.parametrize("u", UTILITY_ROWS)
def test_secure_pmf_is_epsilon_dp_on_a_coarse_lattice(
    u: list[float], eps: float, monotone: bool
) -> None:
    """End to end on utilities (Δu = 1, g = 1/4, D = 5): all shifts in {−Δ, 0, Δ}^m and
    (for m ≤ 3) in {−Δ, −5/8, −3/8, 0, 3/8, 5/8, Δ}^m, which round half-steps both ways; the
    monotone mechanism on shifts of one sign. The implementation's lattice and pmf agree with
    the references."""
    g, steps, t = reference_lattice(eps, 1.0, monotone, COARSE)
    lattice = noisy_max_lattice(eps, 1.0, monotone, bits=COARSE)
    assert (Fraction(2) ** lattice.exponent, lattice.steps, lattice.scale) == (g, steps, t)
    assert lattice.epsilon <= Fraction(eps)
    m = len(u)
    values = [-1.0, 0.0, 1.0] if m > 3 else [-1.0, -0.625, -0.375, 0.0, 0.375, 0.625, 1.0]
    delta = np.array(list(itertools.product(values, repeat=m)))
    if monotone:
        delta = delta[np.all(delta >= 0, axis=1) | np.all(delta <= 0, axis=1)]
    neighbours = np.array(u) + delta
    k = np.array([reference_scores(u, g)])
    k2 = np.array([reference_scores(list(row), g) for row in neighbours])
    assert np.abs(k2 - k).max() <= steps
    p = brute_pmf(k, float(t))[0]
    assert max_log_ratio(p, brute_pmf(k2, float(t))) <= eps + TOL
    exact = np.exp(
        secure_report_noisy_max_log_pmf(u, epsilon=eps, monotone=monotone, lattice_bits=COARSE)
    )
    np.testing.assert_allclose(exact, p, rtol=1e-12)


@pytest.mark.parametrize("monotone", [False, True])
def test_lattice_rounding_moves_scores_by_at_most_d(monotone: bool) -> None:
    """|round(u/g) − round(u′/g)| ≤ D for |u − u′| ≤ Δu, checked on a grid of awkward Δu
    (the implementation's exact scores against the fractions reference)."""
    rng = np.random.default_rng(5)
    for delta in [1.0, 0.75, 0.3, 3.0, 1e-9, 12345.678]:
        lattice = noisy_max_lattice(1.0, delta, monotone)
        g = Fraction(2) ** lattice.exponent
        u = rng.normal(0, 50 * delta, 400)
        v = u + rng.uniform(-delta, delta, 400) * (rng.random(400) < 0.5)
        v = np.where(rng.random(400) < 0.2, u + delta, v)  # shifts of exactly Δu
        k, _ = lattice_scores(np.vstack([u, v]), lattice.exponent)
        assert [int(x) for x in k[0]] == reference_scores(list(u), g)
        assert [int(x) for x in k[1]] == reference_scores(list(v), g)
        assert int(np.abs(k[0].astype(np.int64) - k[1].astype(np.int64)).max()) <= lattice.steps


def test_lattice_scores_are_exact_for_extreme_values() -> None:
    lattice = noisy_max_lattice(1.0, 1.0, False)
    g = Fraction(2) ** lattice.exponent
    row = [1e300, -1e300, 5e-324, -2.5e-320, 0.5**21, 3 * 0.5**21, 2.0**60, -(2.0**45) - 0.5, 0.0]
    k, finite = lattice_scores(np.array([row]), lattice.exponent)
    assert k.dtype == object and bool(finite.all())
    assert [int(x) for x in k[0]] == reference_scores(row, g)
    # The float fast path (every |u/g| < 2⁵²): ties to even, subnormals, the edge of the path.
    half = 0.5**21  # g/2 at Δu = 1
    row = [half, 3 * half, 5 * half, -half, -3 * half, 5e-324, 2.0**30, -(2.0**30) + half, 0.0]
    k, _ = lattice_scores(np.array([row]), lattice.exponent)
    assert k.dtype == np.int64
    assert [int(x) for x in k[0]] == reference_scores(row, g)


# --- 2. the secure sampler's distribution ----------------------------------------------------------


@pytest.mark.parametrize(
    "u, eps, delta, monotone",
    [
        ([0.0, 1.0, 2.0, -np.inf, 1.5], 1.0, 1.0, False),
        ([12.0, 10.0, 14.0, 5.0], 1.0, 1.0, True),
        ([0.1, 0.35, -0.2], 2.0, 0.3, False),
    ],
)
def test_secure_samples_match_the_exact_secure_pmf(
    u: list[float], eps: float, delta: float, monotone: bool
) -> None:
    """χ² at α = 1e-6 (false-positive rate ≤ 1e-6) of 30,000 secure draws."""
    mech = ReportNoisyMax(epsilon=eps, sensitivity=delta, monotone=monotone)
    draws = mech.randomize(np.tile(u, (30_000, 1)), rng=secure(b"rnm-dist"))
    p = np.exp(mech.secure_log_probability(np.arange(len(u)), np.array(u)))
    assert abs(p.sum() - 1) < 1e-12
    assert chi2_pvalue(draws, p) > ALPHA
    # The lattice costs about 2⁻²⁰ relative: the secure law is within 1e-5 of fast mode's.
    np.testing.assert_allclose(
        p, np.exp(mech.log_probability(np.arange(len(u)), np.array(u))), atol=1e-5
    )


def test_secure_ties_go_to_the_lowest_index() -> None:
    """At ε = 2²⁰ the noise scale is t ≈ 2 lattice steps, so ties of k + Z are frequent: on
    four tied utilities the exact pmf favours lower indices, and 40,000 secure draws follow it
    (χ² at α = 1e-6); every candidate is still possible."""
    mech = ReportNoisyMax(epsilon=2.0**20)
    u = np.zeros(4)
    p = np.exp(mech.secure_log_probability(np.arange(4), u))
    assert float(mech.lattice.scale) < 2.01 and np.all(np.diff(p) < -0.01) and p.min() > 0.1
    draws = mech.randomize(np.tile(u, (40_000, 1)), rng=secure(b"rnm-ties"))
    assert chi2_pvalue(draws, p) > ALPHA
    assert set(np.unique(draws)) == {0, 1, 2, 3}


# --- 3. edge cases ----------------------------------------------------------------------------------


def test_minus_infinity_is_never_chosen_and_one_candidate_always_wins() -> None:
    mech = ReportNoisyMax(epsilon=0.1)
    rng = secure(b"rnm-edge")
    draws = mech.randomize(np.tile([-np.inf, 0.0, -np.inf, -3.0], (20_000, 1)), rng=rng)
    assert set(np.unique(draws)) == {1, 3}
    logp = mech.secure_log_probability(np.arange(4), np.array([-np.inf, 0.0, -np.inf, -3.0]))
    assert logp[0] == -np.inf and logp[2] == -np.inf
    single = mech.randomize(np.full((50, 1), 7.5), rng=rng)
    assert single.shape == (50,) and not single.any()
    assert mech.randomize(np.array([7.5]), rng=rng).shape == ()
    assert mech.secure_log_probability(0, np.array([7.5])) == 0.0
    assert mech.randomize(np.zeros((0, 3)), rng=rng).shape == (0,)
    assert int(mech.randomize(np.array([0.0, 1.0]))) in (0, 1)  # rng=None: the default source


def test_all_tied_utilities_make_every_candidate_possible() -> None:
    """χ² at α = 1e-6 of 30,000 draws on five tied utilities at the default lattice."""
    mech = ReportNoisyMax(epsilon=1.0)
    p = np.exp(mech.secure_log_probability(np.arange(5), np.full(5, 3.0)))
    assert np.all(np.diff(p) < 0) and np.allclose(p, 0.2, atol=1e-5)
    draws = mech.randomize(np.full((30_000, 5), 3.0), rng=secure(b"rnm-tied"))
    assert chi2_pvalue(draws, p) > ALPHA


def test_huge_utilities_are_compared_exactly() -> None:
    mech = ReportNoisyMax(epsilon=1.0)
    rng = secure(b"rnm-huge")
    far = mech.randomize(np.tile([0.0, 1e300, -1e300, -np.inf], (200, 1)), rng=rng)
    assert np.all(far == 1)
    ulp = np.nextafter(1e300, np.inf)  # 2⁹⁴⁴ more: about 2⁹⁶⁴ lattice steps
    assert np.all(mech.randomize(np.tile([1e300, ulp], (200, 1)), rng=rng) == 1)
    tied = mech.randomize(np.tile([1e300, 1e300], (4_000, 1)), rng=rng)
    p = np.exp(mech.secure_log_probability(np.arange(2), np.array([1e300, 1e300])))
    assert chi2_pvalue(tied, p) > ALPHA  # α = 1e-6
    with pytest.raises(dpkit.InvalidData, match="2\\^62"):
        mech.secure_log_probability(0, np.array([0.0, 1e300]))


def test_astronomical_noise_falls_back_to_python_integers(monkeypatch: pytest.MonkeyPatch) -> None:
    """The clipped int64 path assumes |Z| < 2⁶¹; a larger draw (probability below e^(−2⁶¹/t))
    is compared exactly with Python integers. Injected noise makes that path run."""
    noise = np.array([[0, 1 << 62, 0, 5], [-(1 << 62), 0, 0, 0]], dtype=np.int64)
    monkeypatch.setattr(noisy_max, "discrete_laplace", lambda *a, **k: noise)
    mech = ReportNoisyMax(epsilon=1.0)
    u = np.array([[1e300, 0.0, 1e300, -np.inf], [1e300, 1e300, 0.0, -np.inf]])
    # Row 0: 2⁶² lattice steps do not bridge 1e300; ties of 0 and 2 go to 0. Row 1: 1 wins.
    np.testing.assert_array_equal(mech.randomize(u, rng=secure(b"rnm-fallback")), [0, 1])
    u = np.array([[0.0, 1.0, 0.5, -np.inf], [0.0, 2.0**-20, 0.0, -np.inf]])
    # Row 0: noise 2⁶² lifts candidate 1 above 0.5; row 1: −2⁶² sinks 0, and 1 beats 2.
    np.testing.assert_array_equal(mech.randomize(u, rng=secure(b"rnm-fallback")), [1, 1])


@pytest.mark.parametrize("bad", [[0.0, np.nan], [0.0, np.inf], [-np.inf, -np.inf], []])
def test_invalid_utilities_are_typed_errors_in_secure_mode(bad: list[float]) -> None:
    with pytest.raises(dpkit.InvalidData):
        ReportNoisyMax(epsilon=1.0).randomize(np.array(bad), rng=secure(b"rnm-bad"))


def test_tiny_epsilon_is_a_typed_error_naming_epsilon() -> None:
    with pytest.raises(dpkit.InvalidParameter, match="epsilon"):
        ReportNoisyMax(epsilon=1e-12).randomize(np.zeros(3), rng=secure(b"rnm-tiny"))
    assert ReportNoisyMax(epsilon=1e-6).randomize(np.zeros(3), rng=secure(b"rnm-tiny")).shape == ()


def test_secure_pmf_limits() -> None:
    with pytest.raises(dpkit.InvalidData, match="at most 16"):
        secure_report_noisy_max_log_pmf(np.zeros(17), epsilon=1.0)


def test_lattice_constants() -> None:
    """g = 2^(⌈log₂ Δu⌉ − 20); D·g ≤ Δu + g, so the noise grows by at most 2⁻¹⁹ relative."""
    for delta in [1.0, 0.75, 2.0, 3.0, 1e-9, 1e9]:
        lattice = ReportNoisyMax(epsilon=0.5, sensitivity=delta).lattice
        g, steps, t = reference_lattice(0.5, delta, False, RNM_LATTICE_BITS)
        assert (Fraction(2) ** lattice.exponent, lattice.steps, lattice.scale) == (g, steps, t)
        assert steps * g <= Fraction(delta) * (1 + Fraction(1, 2**19))
        assert Fraction(0.5) * (1 - Fraction(1, 2**30)) < lattice.epsilon <= Fraction(0.5)


# --- 4. sessions --------------------------------------------------------------------------------------


def test_session_releases_report_noisy_max_in_secure_mode() -> None:
    """Selection mechanisms are not reachable from JSON specs (only frequency mechanisms and
    queries are); a session releases one in secure mode and records the mode."""
    session = dpkit.Session(budget=(1.0, 0.0))
    mech = dpkit.mechanism("report_noisy_max", epsilon=0.5, monotone=True)
    release = session.release(mech, np.array([12.0, 10.0, 14.0, 5.0]))
    assert int(release.values) in range(4)
    assert release.entry.randomness == "secure"
    assert session.remaining.epsilon == Fraction(1, 2)


def test_fast_mode_is_unchanged() -> None:
    """With a numpy Generator the draws are numpy's float Laplace, draw for draw."""
    u = np.array([0.0, 1.5, 3.0, -np.inf, 2.0])
    mech = ReportNoisyMax(epsilon=2.0, sensitivity=1.5)
    got = mech.randomize(np.tile(u, (300, 1)), rng=np.random.default_rng(13))
    noise = np.random.default_rng(13).laplace(0.0, mech.scale, size=(300, 5))
    np.testing.assert_array_equal(got, np.argmax(noise + u, axis=-1))
