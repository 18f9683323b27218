"""Secure-mode quantile: the exponential mechanism over a fixed power-of-two lattice in [L, U].

Exact lattice counts and probabilities are computed here independently, in rationals
(Fraction) and by direct rank counting. Statistical tests use fixed keys and reject at
p < 1e-6, so each has a false-positive rate of at most 1e-6.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from dpkit_central import Quantile
from dpkit_central._selection import nearest_rank_secure
from dpkit_central.exponential import sample_by_weight
from scipy import stats
from support.probe_words import first_word

import dpkit

ALPHA = 1e-6
KEY = bytes(range(32))  # fixed key: deterministic statistical tests (from_key is test-only)


def secure() -> dpkit.SecureRandom:
    return dpkit.SecureRandom.from_key(KEY)


def independent_step(lower: float, upper: float) -> Fraction:
    """2^(⌈log₂(U − L)⌉ − 30), from the exact rational span."""
    span = Fraction(upper) - Fraction(lower)
    k = 0
    while Fraction(2) ** k < span:
        k += 1
    while Fraction(2) ** (k - 1) >= span:
        k -= 1
    return Fraction(2) ** (k - 30)


def rank_counts(data: np.ndarray, lower: float, upper: float) -> list[int]:
    """c_i = #{m ∈ ℤ : L ≤ m·h ≤ U and #{x < m·h} = i}, in exact rationals.

    The points of rank i are those above exactly i of the (clamped) values: (z_i, z_{i+1}]
    with z₀ = −∞ and z_{n+1} = +∞, intersected with [L, U]."""
    h = independent_step(lower, upper)
    z = sorted(Fraction(float(min(max(x, lower), upper))) for x in data)
    first, last = math.ceil(Fraction(lower) / h), math.floor(Fraction(upper) / h)
    cuts = [first - 1] + [math.floor(v / h) for v in z] + [last]
    return [b - a for a, b in itertools.pairwise(cuts)]


def rank_probabilities(data: np.ndarray, query: Quantile) -> np.ndarray:
    counts = np.array(rank_counts(data, query.lower, query.upper), dtype=np.float64)
    n = len(data)
    utility = -np.abs(np.arange(n + 1) - query.q * n)
    weights = counts * np.exp(query.epsilon * (utility - utility.max()) / 2)
    return weights / weights.sum()


def ranks_of(values: np.ndarray, data: np.ndarray, lower: float, upper: float) -> np.ndarray:
    """#{x < v} for each released v (clamped data)."""
    return np.searchsorted(np.sort(np.clip(data, lower, upper)), values, side="left")


@pytest.mark.parametrize(
    "lower,upper", [(0.0, 10.0), (-3.7, 1e-3), (1e20, 1e20 + 1e6), (-1e100, 1e100), (0.0, 1e-99)]
)
def test_secure_outputs_lie_on_the_lattice_inside_the_bounds(lower: float, upper: float) -> None:
    query = Quantile(q=0.3, lower=lower, upper=upper, epsilon=2.0)
    assert Fraction(query.lattice_step()) == independent_step(lower, upper)
    h = query.lattice_step()
    rng = secure()
    data = np.linspace(lower, upper, 9)[1:-1]
    values = np.array([query.run(data, rng=rng).value for _ in range(300)])
    assert np.all((values >= lower) & (values <= upper))
    assert all(Fraction(v) / Fraction(h) == round(Fraction(v) / Fraction(h)) for v in values)
    if math.ulp(max(abs(lower), abs(upper))) < (upper - lower) * 1e-6:  # doubles there are dense
        assert np.unique(values).size > 250  # a uniform point of the chosen run, not an endpoint


def test_rank_distribution_matches_the_exact_probabilities() -> None:
    """Chi-square over ranks of 20,000 secure releases against c_i·exp(−ε|i − qn|/2), with the
    lattice counts c_i computed independently in rationals (duplicates, values outside the
    bounds and a run shorter than one lattice step included)."""
    data = np.array([1.0, 2.0, 2.0, 2.0 + 1e-12, 3.5, 7.0, 9.0, 15.0, -4.0])
    query = Quantile(q=0.4, lower=0.0, upper=10.0, epsilon=0.8)
    expected = rank_probabilities(data, query)
    # sorted clamped data 0, 1, 2, 2, 2 + 1e-12, 3.5, 7, 9, 10: rank 0 is {0} (one point); ranks
    # 3, 4 and 9 are (2, 2], (2, 2 + 1e-12] and (10, 10], which hold no multiple of 2⁻²⁶
    assert np.flatnonzero(expected == 0.0).tolist() == [3, 4, 9]
    assert rank_counts(data, 0.0, 10.0)[0] == 1
    rng = secure()
    values = np.array([query.run(data, rng=rng).value for _ in range(20_000)])
    observed = np.bincount(ranks_of(values, data, 0.0, 10.0), minlength=expected.size)
    assert np.all(observed[expected == 0.0] == 0)
    keep = expected > 0
    assert stats.chisquare(observed[keep], expected[keep] * values.size).pvalue > ALPHA


def test_the_best_rank_with_no_lattice_point_is_never_released() -> None:
    """The only rank with utility 0 is the interval (0.3, 0.3 + 1e-12], which holds no multiple
    of h = 2⁻³⁰ (checked in rationals): it has weight 0, so it is never drawn."""
    data = np.array([0.3, 0.3 + 1e-12])
    query = Quantile(q=0.5, lower=0.0, upper=1.0, epsilon=20.0)
    assert rank_counts(data, 0.0, 1.0)[1] == 0
    _, bounds, log_w = query.lattice_log_weights(data)
    assert log_w[1] == -np.inf and np.diff(bounds).tolist() == rank_counts(data, 0.0, 1.0)
    rng = secure()
    values = np.array([query.run(data, rng=rng).value for _ in range(2_000)])
    assert not np.any((values > 0.3) & (values <= 0.3 + 1e-12))


def test_secure_quantile_is_epsilon_dp_under_add_remove() -> None:
    """For D and D ∪ {x}, |ln P_D(v) − ln P_D′(v)| ≤ ε at every lattice point v, computed
    exactly from the definition (P(v) = exp(ε·u(v)/2)/Σ_i c_i exp(ε·u_i/2)) at one point of each
    run where both ranks are constant; and the mechanism's log weights are those."""
    rng = np.random.default_rng(10)
    eps, lo, hi = 0.7, 0.0, 10.0
    h = independent_step(lo, hi)
    for q in (0.0, 0.25, 0.5, 0.9, 1.0):
        for _ in range(10):
            data = np.round(rng.uniform(-2, 12, size=rng.integers(0, 15)), 1)
            extra = np.append(data, np.round(rng.uniform(-2, 12), 1))
            query = Quantile(q=q, lower=lo, upper=hi, epsilon=eps)

            def log_p(points: np.ndarray, d: np.ndarray, query: Quantile = query) -> np.ndarray:
                n = len(d)
                util = -np.abs(np.arange(n + 1) - query.q * n)
                counts = np.array(rank_counts(d, lo, hi), dtype=np.float64)
                log_norm = np.log(np.sum(counts * np.exp(eps * util / 2)))
                return eps * util[ranks_of(points, d, lo, hi)] / 2 - log_norm

            # one lattice point per run: the first multiple of h above each clamped value, and L
            marks = np.unique(np.clip(extra, lo, hi))
            points = np.array(
                [float(lo)] + [float((math.floor(Fraction(v) / h) + 1) * h) for v in marks]
            )
            points = points[points <= hi]
            ratio = log_p(points, data) - log_p(points, extra)
            assert np.max(np.abs(ratio)) <= eps + 1e-9
            _, bounds, log_w = query.lattice_log_weights(data)
            assert np.diff(bounds).tolist() == rank_counts(data, lo, hi)
            util = -np.abs(np.arange(len(data) + 1) - q * len(data))
            with np.errstate(divide="ignore"):
                np.testing.assert_allclose(log_w, np.log(np.diff(bounds)) + eps * util / 2)


def test_fast_mode_is_unchanged() -> None:
    """A Generator still gets the continuous sampler: uniform float inside the chosen interval."""
    data = np.array([1.0, 2.0, 3.5, 7.0])
    query = Quantile(q=0.5, lower=0.0, upper=10.0, epsilon=1.0)
    value = query.run(data, rng=np.random.default_rng(3)).value
    replay = np.random.default_rng(3)
    edges, log_w = query.log_weights(data)
    i = int(sample_by_weight(log_w, replay))
    assert value == float(edges[i] + replay.random() * (edges[i + 1] - edges[i]))


def test_session_records_a_secure_quantile() -> None:
    session = dpkit.Session(budget=(2.0, 0.0))
    query = Quantile(q=0.5, lower=0.0, upper=100.0, epsilon=1.0)
    release = session.release(query, np.linspace(40.0, 60.0, 50))
    assert release.entry.randomness == "secure"
    value = release.values.value
    assert 0.0 <= value <= 100.0 and value / query.lattice_step() == round(
        value / query.lattice_step()
    )


def test_a_rank_of_negligible_probability_is_not_drawn_by_a_zero_uniform() -> None:
    """q = 1 over 372 values of 0.5: the outputs in (0, 0.5] (rank 0) have probability about
    e^(−744) (4·10⁻³²³, a subnormal double), and with one value more exactly e^(−746), which
    no double holds. Inverse-CDF sampling on floats gave rank 0 whenever its uniform was 0 —
    probability 2⁻⁵³ against 0 for the neighbour: no ε bounds that. The exact sampler, given a
    first word of 0 (each later word 2⁶⁴ − 1), still releases a point of rank 372."""
    query = Quantile(q=1.0, lower=0.0, upper=1.0, epsilon=4.0)
    for first in (0, 1, 2**63):
        assert query.run(np.full(372, 0.5), rng=first_word(first)).value > 0.5


def test_the_exact_rank_sampler_has_the_law_with_multiplicities() -> None:
    """nearest_rank_secure draws i with probability ∝ c_i·exp(−λ|r_i − t|), at a rational t
    and λ, empty candidates never (chi-square at p < 1e-6 against the law computed here)."""
    ranks = np.array([0, 1, 2, 5, 6, 9], dtype=np.int64)
    counts = np.array([3, 0, 1, 7, 2, 40], dtype=np.int64)
    target, rate = Fraction(13, 3), Fraction(3, 4)
    law = np.array(
        [
            c * math.exp(-float(rate) * abs(r - float(target)))
            for r, c in zip(ranks, counts, strict=True)
        ]
    )
    law /= law.sum()
    rng = secure()
    drawn = [nearest_rank_secure(ranks, counts, target, rate, rng) for _ in range(6_000)]
    observed = np.bincount(drawn, minlength=ranks.size)
    assert observed[1] == 0
    keep = law > 0
    assert stats.chisquare(observed[keep], law[keep] * len(drawn)).pvalue > ALPHA
