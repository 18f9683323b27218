"""Unary encoding (sue, oue): declared distribution, exact ε, the real sampler, packed reports, bad input.

Statistical tests use fixed seeds; each states its false-positive rate (≤ 1e-6 per test).
"""

from __future__ import annotations

import decimal
import itertools
import math

import numpy as np
import pytest
from dpkit_ldp.unary_encoding import PRECISION_BITS, bernoulli_words
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

import dpkit

UE = ("sue", "oue")


def wang_probabilities(name: str, epsilon: float) -> tuple[float, float]:
    """p, q straight from Wang et al. 2017, Sections 4.2-4.3 (independent of the module)."""
    if name == "sue":
        h = math.exp(epsilon / 2)
        return h / (h + 1), 1 / (h + 1)
    return 0.5, 1 / (math.exp(epsilon) + 1)


@pytest.mark.parametrize("name", UE)
@given(epsilon=st.floats(min_value=0.01, max_value=12.0))
def test_realised_probabilities_are_the_papers_rounded_safely(name: str, epsilon: float) -> None:
    mech = dpkit.mechanism(name, epsilon=epsilon, k=10)
    p, q = wang_probabilities(name, epsilon)
    grid = 2.0**-PRECISION_BITS
    assert p - grid <= mech.keep_probability <= p + 1e-15
    assert q - 1e-15 <= mech.other_probability <= q + grid
    assert mech.realised_epsilon <= epsilon + 1e-12
    # Moving p and q by at most one grid step moves ln(p(1-q)/((1-p)q)) by at most this much.
    slack = 2 * grid * (1 / (p * (1 - p)) + 1 / (q * (1 - q)))
    assert mech.realised_epsilon >= epsilon - slack


@pytest.mark.parametrize("name", UE)
@given(epsilon=st.floats(min_value=0.01, max_value=10.0), k=st.integers(min_value=2, max_value=6))
def test_whole_vector_distribution_is_exact_and_tight(name: str, epsilon: float, k: int) -> None:
    """Enumerate all 2^k reports: the pmf sums to 1 and the worst log-ratio is the realised ε."""
    mech = dpkit.mechanism(name, epsilon=epsilon, k=k)
    outputs = mech.output_space()
    assert outputs.shape == (2**k, 1)
    table = np.stack([mech.log_probability(outputs, x) for x in range(k)])  # (k, 2^k)
    # Independent computation: product over bits of p/q Bernoulli probabilities.
    p, q = mech.keep_probability, mech.other_probability
    bits = np.unpackbits(outputs, axis=1, count=k)
    for x in range(k):
        probs = np.where(
            np.arange(k) == x, np.where(bits == 1, p, 1 - p), np.where(bits == 1, q, 1 - q)
        )
        np.testing.assert_allclose(np.exp(table[x]), probs.prod(axis=1), rtol=1e-9)
    assert np.exp(table).sum(axis=1) == pytest.approx(np.ones(k))
    worst = max(float(np.max(table[a] - table[b])) for a, b in itertools.permutations(range(k), 2))
    assert worst == pytest.approx(mech.realised_epsilon, rel=1e-9, abs=1e-12)
    assert worst <= epsilon + 1e-9


@pytest.mark.parametrize("name", UE)
@given(epsilon=st.floats(min_value=0.01, max_value=10.0))
def test_per_bit_ratios(name: str, epsilon: float) -> None:
    """Per bit, moving the true value changes two bits; the two bit ratios multiply to e^ε."""
    mech = dpkit.mechanism(name, epsilon=epsilon, k=8)
    up = float(
        np.max(mech.log_probability_bit([0, 1], True) - mech.log_probability_bit([0, 1], False))
    )
    down = float(
        np.max(mech.log_probability_bit([0, 1], False) - mech.log_probability_bit([0, 1], True))
    )
    assert up + down == pytest.approx(mech.realised_epsilon, rel=1e-9)
    if name == "sue":  # symmetric: each bit carries exactly ε/2
        assert up == pytest.approx(down, rel=1e-6)


def test_the_seed_bug_would_fail() -> None:
    """The seed divides e^{ε/2}/(e^{ε/2}+1) by itself + 1 again: that channel is not what we declare."""
    mech = dpkit.mechanism("sue", epsilon=1.0, k=4)
    e = math.exp(0.5) / (math.exp(0.5) + 1)
    seed_p = e / (e + 1)
    assert abs(mech.keep_probability - seed_p) > 0.1


@pytest.mark.parametrize(
    ("name", "epsilon", "k", "value"),
    [("sue", 1.0, 13, 12), ("oue", 0.5, 16, 3), ("oue", 4.0, 64, 63), ("sue", 2.0, 5, 0)],
)
def test_sampler_bits_match_declared_probabilities(
    name: str, epsilon: float, k: int, value: int
) -> None:
    """Each of the k bit frequencies is a binomial z-test; Bonferroni over k at total rate 1e-6."""
    mech = dpkit.mechanism(name, epsilon=epsilon, k=k)
    n = 200_000
    reports = mech.randomize(np.full(n, value), rng=np.random.default_rng(101))
    assert reports.shape == (n, (k + 7) // 8) and reports.dtype == np.uint8
    bits = np.unpackbits(reports, axis=1)
    assert not bits[:, k:].any()  # padding stays zero
    ones = bits[:, :k].sum(axis=0)
    prob = np.where(np.arange(k) == value, mech.keep_probability, mech.other_probability)
    z = (ones - n * prob) / np.sqrt(n * prob * (1 - prob))
    limit = stats.norm.isf(1e-6 / (2 * k))
    assert np.all(np.abs(z) < limit), z


@pytest.mark.parametrize("name", UE)
def test_sampler_joint_distribution_matches_declared_pmf(name: str) -> None:
    """Chi-square of all 2^5 report vectors for each input of k = 5 (Bonferroni: 1e-6 in total)."""
    k = 5
    mech = dpkit.mechanism(name, epsilon=1.3, k=k)
    outputs = mech.output_space()
    rng = np.random.default_rng(7)
    for x in range(k):
        reports = mech.randomize(np.full(100_000, x), rng=rng)
        observed = np.bincount(reports[:, 0] >> 3, minlength=32)  # top 5 bits index the vector
        expected = 100_000 * np.exp(mech.log_probability(outputs, x))
        order = outputs[:, 0] >> 3
        assert stats.chisquare(observed[order], expected).pvalue > 1e-6 / k


def test_bernoulli_words_exact_probability_and_independence() -> None:
    """numerator/2^precision = 5/16: bit frequency z-test and pairwise chi-square (1e-6 in total)."""
    rng = np.random.default_rng(3)
    words = bernoulli_words(rng, 200_000, 5, precision=4)
    bits = np.unpackbits(words.view(np.uint8)).reshape(-1, 64)
    p = 5 / 16
    ones = bits.sum(axis=0)
    n = bits.shape[0]
    z = (ones - n * p) / math.sqrt(n * p * (1 - p))
    assert np.all(np.abs(z) < stats.norm.isf(0.5e-6 / (2 * 64)))
    pair = bits[:, 10] * 2 + bits[:, 11]
    expected = n * np.array([(1 - p) ** 2, (1 - p) * p, p * (1 - p), p * p])
    assert stats.chisquare(np.bincount(pair, minlength=4), expected).pvalue > 0.5e-6
    assert not bernoulli_words(rng, 10, 0).any()
    assert (bernoulli_words(rng, 10, 1 << PRECISION_BITS) == np.iinfo(np.uint64).max).all()


@pytest.mark.parametrize("k", [2, 7, 8, 9, 64, 100])
def test_estimator_counts_packed_bits_exactly(k: int) -> None:
    mech = dpkit.mechanism("oue", epsilon=1.0, k=k)
    rng = np.random.default_rng(k)
    reports = mech.randomize(rng.integers(0, k, 40_000), rng=rng)
    stats_ = dpkit.get_registry().estimator(mech).accumulate(reports)
    assert stats_.n == 40_000
    np.testing.assert_array_equal(
        stats_.counts, np.unpackbits(reports, axis=1, count=k).sum(axis=0)
    )
    # Counts merge: two halves add up to the whole.
    estimator = dpkit.get_registry().estimator(mech)
    merged = estimator.accumulate(reports[:15_000]) + estimator.accumulate(reports[15_000:])
    np.testing.assert_array_equal(merged.counts, stats_.counts)


def test_any_shape_and_reproducible() -> None:
    mech = dpkit.mechanism("sue", epsilon=1.0, k=12)
    values = np.arange(12).reshape(3, 4)
    a = mech.randomize(values, rng=np.random.default_rng(5))
    b = mech.randomize(values, rng=np.random.default_rng(5))
    assert a.shape == (3, 4, 2)
    np.testing.assert_array_equal(a, b)
    assert mech.randomize(np.array([], dtype=np.int64), rng=np.random.default_rng(1)).shape == (
        0,
        2,
    )
    assert mech.log_probability(a, values).shape == (3, 4)


@pytest.mark.parametrize("name", UE)
def test_bad_input(name: str) -> None:
    mech = dpkit.mechanism(name, epsilon=1.0, k=12)
    rng = np.random.default_rng(0)
    estimator = dpkit.get_registry().estimator(mech)
    with pytest.raises(dpkit.InvalidData, match="outside the domain"):
        mech.randomize([0, 12], rng=rng)
    with pytest.raises(dpkit.InvalidData, match="integer category"):
        mech.randomize([0.5], rng=rng)
    with pytest.raises(dpkit.InvalidParameter, match="rng"):
        mech.randomize([0], rng=7)  # type: ignore[arg-type]
    unpacked = np.zeros((4, 12), dtype=bool)
    with pytest.raises(dpkit.InvalidData, match="packbits"):
        estimator.accumulate(unpacked)
    with pytest.raises(dpkit.InvalidData, match=r"shape \(\.\.\., 2\)"):
        estimator.accumulate(np.zeros((4, 3), dtype=np.uint8))  # reports of k = 24
    with pytest.raises(dpkit.InvalidData, match="padding"):
        estimator.accumulate(np.full((4, 2), 0xFF, dtype=np.uint8))  # bits 12..15 set: not k = 12
    with pytest.raises(dpkit.InvalidData, match="do not fit"):  # counts of a k = 13 survey
        estimator.estimate(dpkit.plugin.FrequencyCounts(name, np.zeros(13, dtype=int), 0))
    with pytest.raises(dpkit.InvalidParameter, match="k"):
        dpkit.mechanism(name, epsilon=1.0, k=1)
    with pytest.raises(dpkit.InvalidParameter, match="epsilon"):
        dpkit.mechanism(name, epsilon=0.0, k=4)
    # below the resolution of the 2^-32 probability grid: refused by the declared domain, whose
    # lower end is the first round number at which p > q on the grid (so the schema says it)
    low = dpkit.get_registry().mechanisms[name].cls.parameters()["epsilon"].domain.low
    with pytest.raises(dpkit.InvalidParameter, match=f">= {low:g}"):
        dpkit.mechanism(name, epsilon=math.nextafter(low, 0.0), k=4)
    dpkit.mechanism(name, epsilon=low, k=4)
    dpkit.mechanism(name, epsilon=700.0, k=4)
    with pytest.raises(NotImplementedError):
        dpkit.mechanism(name, epsilon=1.0, k=20).output_space()


def test_ragged_tail_has_the_same_law() -> None:
    """n·⌈k/8⌉ not a multiple of 8 bytes: the tail path. 1500 calls of 5 users, k = 8, value 2;
    binomial z-tests on the 8 bit frequencies (Bonferroni: 1e-6 in total)."""
    mech = dpkit.mechanism("oue", epsilon=1.0, k=8)
    rng = np.random.default_rng(44)
    reports = np.concatenate([mech.randomize([2] * 5, rng=rng) for _ in range(1500)])
    bits = np.unpackbits(reports, axis=1)
    prob = np.where(np.arange(8) == 2, mech.keep_probability, mech.other_probability)
    n = bits.shape[0]
    z = (bits.sum(axis=0) - n * prob) / np.sqrt(n * prob * (1 - prob))
    assert np.all(np.abs(z) < stats.norm.isf(1e-6 / 16)), z
    ragged = dpkit.mechanism("sue", epsilon=1.0, k=13).randomize([12, 0, 5], rng=rng)
    assert ragged.shape == (3, 2) and not np.any(ragged[:, 1] & 0x07)


def _realised_within(mechanism: dpkit.plugin.Mechanism) -> bool:
    """p′(1 − q′)/((1 − p′)q′) ≤ e^ε for the grid's p′, q′, decided in 60-digit decimals."""
    context = decimal.Context(prec=60)
    p, q = mechanism._grid_probabilities()
    scale = 1 << PRECISION_BITS
    ratio = context.divide(p * (scale - q), (scale - p) * q)
    return ratio <= context.exp(decimal.Decimal(mechanism.epsilon))


def _epsilon_on_the_grid(name: str, n: int) -> float:
    """The double nearest the ε whose q is exactly n/2³²: q·2³² sits next to an integer there,
    where a float q rounded up can still fall below the exact q."""
    base = math.log(((1 << PRECISION_BITS) - n) / n)
    return 2.0 * base if name == "sue" else base


@pytest.mark.parametrize(
    ("name", "epsilon"),
    [("oue", 0.31370386456168875), ("oue", 0.4938917521935349), ("oue", 1.4330580346995554)],
)
def test_realised_epsilon_is_at_most_the_declared_one(name: str, epsilon: float) -> None:
    """The float q = t/(1 + t) rounded up fell below the exact q at these ε (realised ε above
    ε by ~5·10⁻¹⁷); q's numerator comes from its exact value now."""
    assert _realised_within(dpkit.mechanism(name, epsilon=epsilon, k=4))


@settings(max_examples=60, derandomize=True, deadline=None, database=None)
@given(
    name=st.sampled_from(["oue", "sue"]),
    n=st.integers(1 << 10, (1 << 31) - 1),
    step=st.sampled_from([-1, 0, 1]),
)
def test_realised_epsilon_near_grid_points(name: str, n: int, step: int) -> None:
    """The class above, searched at the ε where q is (next to) a grid point."""
    epsilon = _epsilon_on_the_grid(name, n)
    for _ in range(abs(step)):
        epsilon = math.nextafter(epsilon, math.inf * step)
    lowest = 2e-9 if name == "sue" else 1e-9
    if lowest <= epsilon <= 700.0:
        assert _realised_within(dpkit.mechanism(name, epsilon=epsilon, k=4)), (name, epsilon)
