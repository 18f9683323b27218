"""Exact discrete samplers against their exact pmfs (discrete Laplace, Gaussian, Bernoulli(e^−γ)).

Every statistical test uses ``SecureRandom.from_key`` with a fixed key (deterministic) and a
threshold at which a correct sampler with a uniformly random key fails with probability at
most 1e-6. Reference pmfs come from scipy (``dlaplace``) or from direct summation of
exp(−z²/(2σ²)) over the support — not from dpkit.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from scipy import stats

import dpkit
from dpkit.randomness import (
    SecureRandom,
    SecureWordSource,
    _words,
    bernoulli_exp,
    discrete_gaussian,
    discrete_laplace,
)

ALPHA = 1e-6


def keyed(label: int) -> SecureRandom:
    return SecureRandom.from_key(bytes([label, 0xD1]) * 16)


def g_test_p(samples: np.ndarray, support: np.ndarray, pmf: np.ndarray, bins: int = 40) -> float:
    """G-test of ``samples`` against ``pmf`` on ``support`` (sorted), in ~equal-mass bins.

    Mass outside the enumerated support goes to the two end bins (it is < 1e-12 in every use).
    """
    cdf = np.cumsum(pmf)
    cuts = np.unique(np.searchsorted(cdf, np.linspace(0, 1, bins + 1)[1:-1]))
    edges = support[cuts]  # bin i holds values in (edges[i-1], edges[i]]
    expected = np.diff(np.concatenate([[0.0], cdf[cuts], [1.0]])) * samples.size
    observed = np.bincount(np.searchsorted(edges, samples, side="left"), minlength=edges.size + 1)
    keep = observed > 0
    g = 2.0 * float(np.sum(observed[keep] * np.log(observed[keep] / expected[keep])))
    return float(stats.chi2.sf(g, df=edges.size))


def laplace_reference(scale: Fraction) -> tuple[np.ndarray, np.ndarray]:
    support = np.arange(-math.ceil(40 * scale) - 1, math.ceil(40 * scale) + 2)
    return support, stats.dlaplace(float(1 / scale)).pmf(support)


def gaussian_reference(sigma2: Fraction) -> tuple[np.ndarray, np.ndarray]:
    reach = math.ceil(12 * math.sqrt(sigma2)) + 2
    support = np.arange(-reach, reach + 1)
    weights = np.exp(-(support.astype(np.float64) ** 2) / (2 * float(sigma2)))
    return support, weights / weights.sum()


@pytest.mark.parametrize(
    "scale", [Fraction(1), Fraction(3, 2), Fraction(10), Fraction(1, 3), Fraction(1000)]
)
def test_discrete_laplace_matches_its_pmf(scale: Fraction) -> None:
    samples = discrete_laplace(scale, size=200_000, rng=keyed(1))
    assert samples.dtype == np.int64
    assert g_test_p(samples, *laplace_reference(scale)) > ALPHA


@pytest.mark.parametrize(
    "sigma2",
    [
        Fraction(1, 4),  # σ < 1: t = 1
        Fraction(2, 3),
        Fraction(1),
        Fraction(5),
        Fraction(1000, 7),
        Fraction(10**6),
        Fraction(2**64 + 1, 2**40),  # exponent denominator ≥ 2⁶⁴: the Python-int path
    ],
)
def test_discrete_gaussian_matches_its_pmf(sigma2: Fraction) -> None:
    samples = discrete_gaussian(sigma2, size=150_000, rng=keyed(2))
    assert g_test_p(samples, *gaussian_reference(sigma2)) > ALPHA


class CountingSource(SecureWordSource):
    """A keyed source that records how many words each request takes."""

    __slots__ = ("requests",)

    def words(self, size: Any = None) -> np.ndarray:
        if not hasattr(self, "requests"):
            self.requests: list[int] = []
        self.requests.append(int(np.prod(size)))
        return super().words(size)


@pytest.mark.parametrize("scale", [1, 10, 1000, Fraction(1, 5)])
def test_discrete_laplace_reads_a_fixed_number_of_words_per_draw(scale: Any) -> None:
    """One word per digit of the geometric plus one for sign and zero, whatever the noise
    (the timing claim of docs/security.md)."""
    from dpkit.randomness.geometric import geometric_plan

    per_draw = geometric_plan(1 / Fraction(scale)).words_per_draw + 1
    source = CountingSource.from_key(bytes(32))
    discrete_laplace(scale, size=1000, rng=SecureRandom(source))
    assert sum(source.requests) == per_draw * 1000


def test_discrete_laplace_far_tail_beyond_64_bit_intermediates() -> None:
    """t = 2⁶² − 1, s = 1025: U + t·V exceeds 2⁶⁴ whenever V ≥ 4 (probability e⁻⁴), so that
    path runs ~1800 times. Binomial test of P[|Z| ≥ c] = 2q^c/(1 + q), q = e^{−s/t}, c = ⌈4t/s⌉;
    false-positive rate 1e-6."""
    t, s = 2**62 - 1, 1025
    samples = discrete_laplace(Fraction(t, s), size=100_000, rng=keyed(5))
    c = -(-4 * t // s)
    q = math.exp(-s / t)
    p_tail = 2 * math.exp(-c * s / t) / (1 + q)
    hits = int(np.count_nonzero(np.abs(samples) >= c))
    assert stats.binomtest(hits, samples.size, p_tail).pvalue > ALPHA


@pytest.mark.parametrize(
    ("numerator", "denominator"),
    [(0, 1), (1, 3), (1, 1), (5, 2), (7, 1), (2**70, 2**69), (3 * 10**30 + 7, 2 * 10**30)],
)
def test_bernoulli_exp_has_probability_exp_minus_gamma(numerator: int, denominator: int) -> None:
    """Binomial test against exp(−γ) (math.exp); false-positive rate 1e-6 per case."""
    draws = bernoulli_exp(numerator, denominator, size=200_000, rng=keyed(6))
    p = math.exp(-numerator / denominator)
    assert stats.binomtest(int(draws.sum()), draws.size, p).pvalue > ALPHA


def test_bernoulli_exp_elementwise_and_large_gamma() -> None:
    """Per-element γ = j/2 (j = 0..5), binomial test per group (each false-positive rate
    1e-6/6); γ = 40 is never true in 100000 draws (would happen with probability 4e-13)."""
    groups, reps = 6, 50_000
    numerators = np.tile(np.arange(groups), reps)
    draws = bernoulli_exp(numerators, 2, rng=keyed(7))
    for j in range(groups):
        hits = int(draws[numerators == j].sum())
        assert stats.binomtest(hits, reps, math.exp(-j / 2)).pvalue > ALPHA / groups
    assert not bernoulli_exp(40, size=100_000, rng=keyed(7)).any()
    assert bernoulli_exp(0, rng=keyed(7)) is True


def test_exact_bernoulli_resolves_ties_with_further_digits() -> None:
    """P = r/d with big d: a first word equal to ⌊r·2⁶⁴/d⌋ must be decided by the next digit."""
    r, d = 10**25 + 3, 3 * 10**25 + 1
    first = (r * 2**64) // d
    second = ((r * 2**64) % d * 2**64) // d

    def reader(script: list[int]) -> Any:
        queue = list(script)
        return lambda n: np.array([queue.pop(0) for _ in range(n)], dtype=np.uint64)

    numerator = np.array([r], dtype=object)
    assert _words.bernoulli_ratio(reader([first, second - 1]), numerator, d, 1)[0]
    assert not _words.bernoulli_ratio(reader([first, second + 1]), numerator, d, 1)[0]
    assert _words.bernoulli_ratio(reader([first - 1]), numerator, d, 1)[0]
    assert not _words.bernoulli_ratio(reader([first + 1]), numerator, d, 1)[0]


def test_uniform_below_array_moduli() -> None:
    """Per-element moduli 3, 5, 6: chi-square per modulus, false-positive rate 1e-6/3 each."""
    moduli = np.tile(np.array([3, 5, 6], dtype=np.uint64), 60_000)
    values = _words.uniform_below(keyed(8).words, moduli, moduli.size)
    for m in (3, 5, 6):
        picked = values[moduli == m]
        assert int(picked.max()) < m
        counts = np.bincount(picked.astype(np.int64), minlength=m)
        assert stats.chisquare(counts).pvalue > ALPHA / 3


def test_fast_mode_is_reproducible_and_secure_is_default() -> None:
    first = discrete_laplace(2, size=100, rng=np.random.default_rng(5))
    assert np.array_equal(first, discrete_laplace(2, size=100, rng=np.random.default_rng(5)))
    assert discrete_gaussian(3, size=(2, 3)).shape == (2, 3)
    assert isinstance(discrete_laplace("1/2"), np.int64)


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), "abc", True, None, 2**63])
def test_bad_scales_are_refused(bad: Any) -> None:
    with pytest.raises(dpkit.InvalidParameter, match="scale"):
        discrete_laplace(bad, size=3, rng=keyed(9))


def test_bad_parameters_name_themselves() -> None:
    with pytest.raises(dpkit.InvalidParameter, match="sigma2"):
        discrete_gaussian(0, size=3)
    with pytest.raises(dpkit.InvalidParameter, match="numerator"):
        bernoulli_exp(-1)
    with pytest.raises(dpkit.InvalidParameter, match="denominator"):
        bernoulli_exp(1, 0)
    with pytest.raises(dpkit.InvalidParameter, match="numerator"):
        bernoulli_exp(0.5)
    with pytest.raises(dpkit.InvalidParameter, match="rng"):
        discrete_laplace(1, size=3, rng=42)


@pytest.mark.parametrize(
    "sigma2",
    [Fraction(2**54 + 12345), Fraction(3 * 2**50, 7), Fraction(2**70 + 1)],
    ids=["mechanism scale", "rational", "sigma beyond 2^32"],
)
def test_discrete_gaussian_at_large_sigma(sigma2: Fraction) -> None:
    """The integer acceptance path (σ ≈ 2²⁷, as the gaussian mechanism uses) and the
    Python-int one (σ > 2³²): G-test in 40 equal-mass bins against the normal CDF at half
    integers, P[Z ≤ z] = Φ((z + ½)/σ) up to e^(−2π²σ²) (Poisson summation; far below float
    precision for σ ≥ 1). False-positive rate 1e-6 each."""
    sigma = math.sqrt(float(sigma2))
    samples = discrete_gaussian(sigma2, size=60_000, rng=keyed(12))
    edges = np.unique(np.floor(stats.norm.ppf(np.linspace(0, 1, 41)[1:-1]) * sigma))
    cdf = stats.norm.cdf((edges + 0.5) / sigma)
    expected = np.diff(np.concatenate([[0.0], cdf, [1.0]])) * samples.size
    observed = np.bincount(np.searchsorted(edges, samples, side="left"), minlength=edges.size + 1)
    assert stats.chisquare(observed, expected).pvalue > ALPHA
