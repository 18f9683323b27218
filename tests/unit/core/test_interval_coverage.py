"""Coverage of the reported 95 % intervals: exactly where the law is known, else by simulation.

**LDP frequency oracles, exactly.** A category's support count, given its true count x of n,
has the law C | x ~ Bin(x, p) + Bin(n − x, q), and its default interval depends on its own
count (and n) only. So the coverage of the interval at x is Σ_c P(C = c | x)·[x in the
interval of c], computed without simulation (scipy's binomial pmfs, convolved over their
windows of mass, outside which less than 10⁻¹² of the mass lies). For every cell (protocol × k
× ε × n, a Zipf(1.1) truth) ``test_default_interval_covers_exactly`` requires the mean over the
categories — the expected fraction of categories covered, what a simulation estimates — to lie
in the band [0.935, 0.965], and every category's coverage to be at least 0.94: the average
hides the worst category (krr, k = 256, ε = 4, n = 500 covered 0.971 on average with the score
interval, but 0.939 for a category of 3 users). Where the support count is too discrete for a
normal approximation (n·min(p(1 − p), q(1 − q)) < 50) the default is the exact interval,
conservative by construction: there the mean must be at least the band's lower end. It is
deterministic: no false-alarm rate.

**The same, by simulation, end to end.** In one cell of each protocol (and for the randomized
and the post-processed intervals, whose law is not tabulated here) ``REPS`` repetitions of the
support counts are drawn with :func:`dpkit_ldp.simulate_counts` (count level, O(k) per
repetition, fixed seeds) and estimated through the registered estimator, as a user would; the
statistic is the fraction of (repetition, category) pairs whose interval covers the true count.
It is the mean over repetitions of the per-repetition coverage fraction X_r ∈ [0, 1]; the X_r
are independent whatever the dependence between the categories of one repetition, and
Var X_r ≤ (mean_v √(p_v(1 − p_v)))² ≤ p̄(1 − p̄) = 0.0475 when the average coverage p̄ is exactly
0.95. Bernstein's inequality then bounds the chance that a cell leaves the band [0.935, 0.965]
by 2·exp(−N t²/(2σ² + 2t/3)) with t = 0.015, σ² = 0.0475: N = 7000 gives 6.1·10⁻⁷ per cell
(< 10⁻⁶), so a false alarm over the 15 simulated cells has probability < 10⁻⁵ (and with the
fixed seeds the outcome is deterministic).

hr runs at k ∈ {2, 16} only: its count-level simulation draws a multinomial over the K = 2k
outputs per category (about 0.1 s per repetition at k = 256), and its estimator is the code
path of sue/oue/olh (:class:`dpkit_ldp._oracle.PureProtocolEstimator`), which k = 256 covers.

**Central secure mode.** A histogram-sized vector of d = 10⁶ zero answers is released once per
mode at ε = 0.1; its d coordinates are independent, so the coverage fraction has standard error
≈ 2.2·10⁻⁴ and the empirical variance is within 1 % with overwhelming probability (the band
checked is [0.95, 1.05]).
"""

from __future__ import annotations

import numpy as np
import pytest
from dpkit_central import Histogram
from dpkit_central.gaussian import Gaussian
from dpkit_central.laplace import Laplace
from dpkit_ldp.hadamard import HadamardResponse
from dpkit_ldp.kary_rr import KaryRandomizedResponse
from dpkit_ldp.local_hashing import OptimalLocalHashing
from dpkit_ldp.randomized_response import RandomizedResponse
from dpkit_ldp.simulate import simulate_counts
from dpkit_ldp.unary_encoding import OptimizedUnaryEncoding, SymmetricUnaryEncoding
from scipy import stats

import dpkit

REPS = 7000
LOW, HIGH = 0.935, 0.965


def _mechanism(protocol: str, k: int, epsilon: float) -> dpkit.plugin.Mechanism:
    if protocol == "rr":
        return RandomizedResponse(epsilon=epsilon)
    if protocol == "krr":
        return KaryRandomizedResponse(epsilon=epsilon, k=k)
    if protocol == "oue":
        return OptimizedUnaryEncoding(epsilon=epsilon, k=k)
    if protocol == "sue":
        return SymmetricUnaryEncoding(epsilon=epsilon, k=k)
    if protocol == "hr":
        return HadamardResponse(epsilon=epsilon, k=k)
    return OptimalLocalHashing(epsilon=epsilon, k=k)


def _truth(k: int, n: int) -> np.ndarray:
    weights = 1.0 / np.arange(1, k + 1) ** 1.1
    counts = np.floor(weights / weights.sum() * n).astype(np.int64)
    counts[0] += n - counts.sum()
    return counts


def _cells() -> list[object]:
    cells = []
    for protocol in ("rr", "krr", "sue", "oue", "olh", "hr"):
        for k in (2,) if protocol == "rr" else (2, 16) if protocol == "hr" else (2, 16, 256):
            for epsilon in (0.5, 1.0, 4.0):
                for n in (500, 100_000):
                    cells.append(pytest.param(protocol, k, epsilon, n))
    return cells


def _coverage(
    protocol: str,
    k: int,
    epsilon: float,
    n: int,
    method: str = "unbiased",
    interval: str = "auto",
) -> float:
    mech = _mechanism(protocol, k, epsilon)
    truth = _truth(k, n)
    rng = np.random.default_rng([k, int(epsilon * 10), n, len(protocol)])
    estimator = dpkit.get_registry().estimator(mech)
    covered = 0.0
    for _ in range(REPS):
        counts = simulate_counts(mech, truth, rng=rng)
        est = estimator.estimate(counts, method=method)
        low, high = est.confidence_interval(0.95, method=interval, rng=rng)
        covered += float(np.mean((low <= truth) & (truth <= high)))
    return covered / REPS


def _support_probabilities(mech: dpkit.plugin.Mechanism) -> tuple[float, float]:
    if isinstance(mech, RandomizedResponse):
        return mech.keep_probability, mech.flip_probability
    p, q = mech.support_probabilities  # type: ignore[attr-defined]
    return float(p), float(q)


def _default_is_exact(protocol: str, k: int, epsilon: float, n: int) -> bool:
    p, q = _support_probabilities(_mechanism(protocol, k, epsilon))
    return n * min(p * (1 - p), q * (1 - q)) < 50


#: The cells simulated end to end: one per protocol, with the normal default interval and (krr
#: at k = 256, ε = 4, n = 500 and hr at k = 16, ε = 4, n = 500: too discrete for the normal
#: one) the exact one.
SIMULATED_CELLS = [
    ("rr", 2, 1.0, 100_000),
    ("krr", 256, 4.0, 500),
    ("sue", 16, 1.0, 500),
    ("oue", 16, 0.5, 500),
    ("olh", 16, 4.0, 100_000),
    ("hr", 16, 4.0, 500),
]


@pytest.mark.parametrize(("protocol", "k", "epsilon", "n"), SIMULATED_CELLS)
def test_ldp_interval_coverage_by_simulation(protocol: str, k: int, epsilon: float, n: int) -> None:
    coverage = _coverage(protocol, k, epsilon, n)
    high = 1.0 if _default_is_exact(protocol, k, epsilon, n) else HIGH
    assert LOW <= coverage <= high, f"{protocol} k={k} ε={epsilon} n={n}: coverage {coverage:.4f}"


def _window(m: int, r: float) -> tuple[int, np.ndarray]:
    """Start and pmf of Binomial(m, r) where it has mass (±12 sd + 40: tails < 10⁻¹²)."""
    sd = (m * r * (1 - r)) ** 0.5
    start = max(0, int(m * r - 12 * sd) - 40)
    stop = min(m, int(m * r + 12 * sd) + 40)
    return start, stats.binom.pmf(np.arange(start, stop + 1), m, r)


def _default_intervals(
    mech: dpkit.plugin.Mechanism, n: int, counts: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The default interval for each support count in ``counts``: a category's interval depends
    on its own count only, so the counts are estimated k at a time, as if of k categories."""
    k = 2 if isinstance(mech, RandomizedResponse) else mech.size  # type: ignore[attr-defined]
    estimator = dpkit.get_registry().estimator(mech)
    padded = np.resize(counts, -(-counts.size // k) * k).reshape(-1, k)
    lows, highs = [], []
    for row in padded:
        statistics = dpkit.plugin.FrequencyCounts(mech.name, row, n)
        low, high = estimator.estimate(statistics).confidence_interval(0.95)
        lows.append(low)
        highs.append(high)
    return np.concatenate(lows)[: counts.size], np.concatenate(highs)[: counts.size]


@pytest.mark.parametrize(("protocol", "k", "epsilon", "n"), _cells())
def test_default_interval_covers_exactly(protocol: str, k: int, epsilon: float, n: int) -> None:
    """Exact coverage (module docstring): the mean over the categories of the cell's truth in
    the band (at least its lower end where the default is the exact interval), and every
    category's at least 0.94."""
    mech = _mechanism(protocol, k, epsilon)
    p, q = _support_probabilities(mech)
    truth = _truth(k, n)
    coverage_at = {}
    for x in np.unique(truth):
        a0, pmf_a = _window(int(x), p)
        b0, pmf_b = _window(n - int(x), q)
        law = np.convolve(pmf_a, pmf_b)
        low, high = _default_intervals(mech, n, a0 + b0 + np.arange(law.size))
        coverage_at[int(x)] = float(law @ ((low <= x) & (x <= high)))
    cell = f"{protocol} k={k} ε={epsilon} n={n}"
    worst = min(coverage_at, key=coverage_at.__getitem__)
    assert coverage_at[worst] >= 0.94, f"{cell}, x={worst}: {coverage_at[worst]:.4f}"
    mean = float(np.mean([coverage_at[int(x)] for x in truth]))
    high = 1.0 if _default_is_exact(protocol, k, epsilon, n) else HIGH
    assert LOW <= mean <= high, f"{cell}: mean coverage {mean:.4f}"


@pytest.mark.parametrize(
    ("protocol", "k", "epsilon"),
    [
        ("krr", 256, 4.0),
        ("rr", 2, 1.0),
        ("oue", 16, 0.5),
        ("olh", 16, 4.0),
        ("hr", 16, 1.0),
        ("sue", 2, 4.0),
    ],
)
def test_randomized_interval_covers_exactly(protocol: str, k: int, epsilon: float) -> None:
    """The exact-coverage interval (``method="randomized"``, :mod:`dpkit.support_count`) is in
    the band in the most discrete cell too, and in a cell of every other protocol (n = 500, where
    the exact law is tabulated). Same false-alarm bound as the grid (module docstring)."""
    coverage = _coverage(protocol, k, epsilon, 500, interval="randomized")
    assert LOW <= coverage <= HIGH, f"{protocol} k={k} ε={epsilon}: coverage {coverage:.4f}"


@pytest.mark.parametrize("method", ["clip", "norm_sub", "simplex"])
def test_post_processed_interval_coverage(method: str) -> None:
    """Post-processed estimates report the unbiased interval clipped to [0, n]: same coverage."""
    coverage = _coverage("krr", 16, 1.0, 500, method)
    assert LOW <= coverage <= HIGH, f"{method}: coverage {coverage:.4f}"


D = 10**6


@pytest.mark.parametrize("secure", [True, False], ids=["secure", "fast"])
@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_central_noise_reported_honestly(noise: str, secure: bool) -> None:
    """Large-d vector release: interval coverage in the band, empirical/reported variance ≈ 1."""
    mech = (
        Laplace(epsilon=0.1, sensitivity=1.0)
        if noise == "laplace"
        else Gaussian(epsilon=0.1, delta=1e-6, sensitivity=1.0)
    )
    rng = dpkit.SecureRandom() if secure else np.random.default_rng(20)
    released = mech.randomize(np.zeros(D), rng=rng)
    reported = mech.noise_for(rng, D)
    assert reported.kind == ("discrete_" + noise if secure else noise)
    assert 0.95 <= float(np.var(released)) / reported.variance <= 1.05
    coverage = float(np.mean(np.abs(released) <= reported.half_width(0.95)))
    assert LOW <= coverage <= HIGH


def test_secure_histogram_result_reports_the_lattice_noise() -> None:
    """The QueryResult of a secure histogram carries the discrete noise actually added."""
    d = 10**6
    query = Histogram(categories=tuple(range(d)), epsilon=0.1, noise="laplace")
    result = query.run(np.zeros(0), rng=None)
    b = 1.0 / 0.1
    assert result.noise is not None and result.noise.kind == "discrete_laplace"
    assert result.noise_scale > b  # 1 + d·g/Δ₁ > 1
    assert result.variance == result.noise.variance
    low, high = result.confidence_interval(0.95)
    covered = float(np.mean((low <= 0.0) & (high >= 0.0)))
    assert LOW <= covered <= HIGH
    fast = query.run(np.zeros(0), rng=np.random.default_rng(1))
    assert fast.noise is not None and fast.noise.kind == "laplace" and fast.noise_scale == b
