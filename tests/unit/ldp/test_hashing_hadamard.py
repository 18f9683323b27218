"""Local hashing (olh) and Hadamard response (hr): hash family, exact ε, the real sampler, bad input.

Statistical tests use fixed seeds; each states its false-positive rate (≤ 1e-6 per test).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from dpkit_ldp.hadamard import parity, walsh_hadamard
from dpkit_ldp.local_hashing import collision_sum, multiply_add_shift
from hypothesis import given
from hypothesis import strategies as st
from scipy import linalg, stats

import dpkit

# --- the hash family -------------------------------------------------------------------------


@pytest.mark.parametrize("g", [16, 5, 3])
def test_multiply_add_shift_is_strongly_universal_by_enumeration(g: int) -> None:
    """w = 8: over all 2^16 seeds (a, b), every pair x ≠ x' < 16 hashes to a pair with the law π⊗π.

    With g = 16 this is the exact 2-independence of the 4-bit hash; for other g it checks that the
    pair (H(x), H(x')) has the product law of the marginal π (what the q* formula assumes).
    """
    a, b = (
        v.ravel()
        for v in np.meshgrid(np.arange(256, dtype=np.uint64), np.arange(256, dtype=np.uint64))
    )
    pi = np.bincount((np.arange(16) * g) >> 4, minlength=g) / 16
    for x, x2 in itertools.combinations(range(16), 2):
        h1 = multiply_add_shift(a, b, np.uint64(x), g, word_bits=8).astype(int)
        h2 = multiply_add_shift(a, b, np.uint64(x2), g, word_bits=8).astype(int)
        joint = np.bincount(h1 * g + h2, minlength=g * g).reshape(g, g) / a.size
        np.testing.assert_allclose(joint, np.outer(pi, pi), atol=1e-15)


@pytest.mark.parametrize("g", [2, 3, 4, 5, 7, 21, 255])
def test_collision_sum_by_enumeration(g: int) -> None:
    pi = np.bincount((np.arange(256) * g) >> 8, minlength=g) / 256
    assert collision_sum(g, half_bits=8) == pytest.approx(float((pi**2).sum()), rel=1e-12)
    assert collision_sum(g) == pytest.approx(1 / g, rel=1e-8)


@given(epsilon=st.floats(min_value=0.05, max_value=8.0))
def test_olh_range_and_support_probabilities(epsilon: float) -> None:
    olh = dpkit.mechanism("olh", epsilon=epsilon, k=100)
    assert olh.range == max(2, round(math.exp(epsilon)) + 1)
    p, q = olh.support_probabilities
    assert p == pytest.approx(math.exp(epsilon) / (math.exp(epsilon) + olh.range - 1))
    assert q == pytest.approx(1 / olh.range, rel=1e-8)
    assert dpkit.mechanism("olh", epsilon=epsilon, k=100, g=7).range == 7


@given(epsilon=st.floats(min_value=0.05, max_value=8.0), seed=st.integers(0, 2**32))
def test_olh_declared_distribution_is_tight(epsilon: float, seed: int) -> None:
    """For 50 seeds, all g outputs, all pairs of 6 inputs: worst log-ratio is exactly ε."""
    olh = dpkit.mechanism("olh", epsilon=epsilon, k=6)
    rng = np.random.default_rng(seed)
    seeds = rng.integers(0, 2**63, size=(50, 2), dtype=np.uint64)
    y = np.arange(olh.range, dtype=np.uint64)
    outputs = np.concatenate([np.repeat(seeds, olh.range, axis=0), np.tile(y, 50)[:, None]], axis=1)
    table = np.stack([olh.log_probability(outputs, x) for x in range(6)])
    # Given the seed, the y-distribution sums to one.
    sums = np.exp(table + 128 * math.log(2)).reshape(6, 50, olh.range).sum(axis=2)
    np.testing.assert_allclose(sums, 1.0, rtol=1e-9)
    worst = max(float(np.max(table[a] - table[b])) for a, b in itertools.permutations(range(6), 2))
    assert worst <= epsilon + 1e-9
    # Some seed separates some pair (all 50 hashing the 6 inputs alike has probability < 1e-70).
    assert worst == pytest.approx(epsilon, rel=1e-9)


def test_olh_sampler_matches_declared_probabilities() -> None:
    """(y − H(x)) mod g is p' at 0 and uniform elsewhere (chi-square), and a fixed other value v
    is supported with probability q* (z-test); 5e-7 each, 1e-6 in total."""
    olh = dpkit.mechanism("olh", epsilon=1.5, k=50)
    n = 300_000
    reports = olh.randomize(np.full(n, 17), rng=np.random.default_rng(11))
    assert reports.shape == (n, 3) and reports.dtype == np.uint64
    hashed = olh.hash(reports[:, :2], 17)
    offset = ((reports[:, 2] + np.uint64(olh.range) - hashed) % np.uint64(olh.range)).astype(int)
    expected = np.full(olh.range, (1 - olh.keep_probability) / (olh.range - 1))
    expected[0] = olh.keep_probability
    assert stats.chisquare(np.bincount(offset, minlength=olh.range), n * expected).pvalue > 5e-7
    _, q = olh.support_probabilities
    supported = np.count_nonzero(olh.hash(reports[:, :2], 3) == reports[:, 2])
    assert abs(supported - n * q) / math.sqrt(n * q * (1 - q)) < stats.norm.isf(2.5e-7)


def test_olh_estimator_counts_match_brute_force() -> None:
    olh = dpkit.mechanism("olh", epsilon=1.0, k=37)
    rng = np.random.default_rng(2)
    reports = olh.randomize(rng.integers(0, 37, 3000), rng=rng)
    counts = dpkit.get_registry().estimator(olh).accumulate(reports).counts
    brute = [sum(int(olh.hash(r[:2], v)) == int(r[2]) for r in reports[:500]) for v in range(37)]
    head = dpkit.get_registry().estimator(olh).accumulate(reports[:500]).counts
    assert head.tolist() == brute
    assert counts.sum() > head.sum()
    # int64 storage of the same bits is accepted.
    same = dpkit.get_registry().estimator(olh).accumulate(reports.view(np.int64)).counts
    np.testing.assert_array_equal(same, counts)


def test_olh_bad_input() -> None:
    olh = dpkit.mechanism("olh", epsilon=1.0, k=10)
    estimator = dpkit.get_registry().estimator(olh)
    with pytest.raises(dpkit.InvalidData, match="seeds missing"):
        estimator.accumulate(np.array([1, 2, 3, 0], dtype=np.uint64))
    with pytest.raises(dpkit.InvalidData, match=r"outside 0\.\.3"):
        estimator.accumulate(np.array([[1, 2, 9]], dtype=np.uint64))
    with pytest.raises(dpkit.InvalidData, match="integers"):
        estimator.accumulate(np.zeros((2, 3)))
    with pytest.raises(dpkit.InvalidData, match="outside the domain"):
        olh.randomize([10], rng=np.random.default_rng(0))
    with pytest.raises(dpkit.InvalidParameter, match="g"):
        dpkit.mechanism("olh", epsilon=1.0, k=10, g=1)


# --- Hadamard response -----------------------------------------------------------------------


@pytest.mark.parametrize("k", [2, 3, 7, 8, 20])
def test_hadamard_sets_match_scipy(k: int) -> None:
    hr = dpkit.mechanism("hr", epsilon=1.0, k=k)
    size = hr.output_size
    assert size > k and size & (size - 1) == 0 and size // 2 <= k
    matrix = linalg.hadamard(size)
    member = hr.in_support(np.arange(size)[None, :], np.arange(k)[:, None])
    np.testing.assert_array_equal(member, matrix[1 : k + 1] == 1)
    vector = np.random.default_rng(k).integers(0, 50, size)
    np.testing.assert_array_equal(walsh_hadamard(vector), matrix @ vector)
    assert parity(np.array([0, 1, 3, 7, 2**63 + 1], dtype=np.uint64)).tolist() == [0, 1, 0, 1, 0]


@pytest.mark.parametrize("popcount", [True, False], ids=["bitwise_count", "xor-fold"])
def test_parity_paths_agree_with_python(popcount: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """np.bitwise_count (numpy ≥ 2) and the XOR-folding fallback against int.bit_count, and
    hr's sets through either path against scipy's Hadamard matrix."""
    import dpkit_ldp.hadamard as module

    if not popcount:
        monkeypatch.setattr(module, "_BITWISE_COUNT", None)
    values = np.random.default_rng(9).integers(0, 2**64 - 1, 2_000, dtype=np.uint64)
    values[:3] = [0, 2**64 - 1, 2**63]
    want = [int(v).bit_count() % 2 for v in values.tolist()]
    assert module.parity(values).tolist() == want
    hr = dpkit.mechanism("hr", epsilon=1.0, k=20)
    member = hr.in_support(np.arange(32)[None, :], np.arange(20)[:, None])
    np.testing.assert_array_equal(member, linalg.hadamard(32)[1:21] == 1)


@given(epsilon=st.floats(min_value=0.01, max_value=20.0), k=st.integers(min_value=2, max_value=12))
def test_hr_declared_distribution_is_tight(epsilon: float, k: int) -> None:
    hr = dpkit.mechanism("hr", epsilon=epsilon, k=k)
    outputs = hr.output_space()
    table = np.stack([hr.log_probability(outputs, x) for x in range(k)])
    assert np.exp(table).sum(axis=1) == pytest.approx(np.ones(k))
    worst = max(float(np.max(table[a] - table[b])) for a, b in itertools.permutations(range(k), 2))
    assert worst == pytest.approx(epsilon, rel=1e-9)
    # Support probabilities by enumeration: p* on the own set, exactly 1/2 on any other.
    member = hr.in_support(outputs[None, :], np.arange(k)[:, None])
    mass = np.exp(table) @ member.T.astype(float)  # [x, v] = P[y ∈ C_v | x]
    p, q = hr.support_probabilities
    np.testing.assert_allclose(np.diag(mass), p, rtol=1e-9)
    np.testing.assert_allclose(mass[~np.eye(k, dtype=bool)], q, rtol=1e-9)


@pytest.mark.parametrize(("epsilon", "k", "value"), [(1.0, 6, 0), (0.3, 12, 11), (3.0, 16, 5)])
def test_hr_sampler_matches_declared_pmf(epsilon: float, k: int, value: int) -> None:
    """Chi-square of the real sampler against the declared pmf; 1e-6 per case."""
    hr = dpkit.mechanism("hr", epsilon=epsilon, k=k)
    n = 200_000
    reports = hr.randomize(np.full(n, value), rng=np.random.default_rng(31))
    expected = n * np.exp(hr.log_probability(hr.output_space(), value))
    observed = np.bincount(reports, minlength=hr.output_size)
    assert stats.chisquare(observed, expected).pvalue > 1e-6


def test_hr_estimator_counts_match_brute_force() -> None:
    hr = dpkit.mechanism("hr", epsilon=1.0, k=10)
    rng = np.random.default_rng(4)
    reports = hr.randomize(rng.integers(0, 10, 5000), rng=rng)
    counts = dpkit.get_registry().estimator(hr).accumulate(reports).counts
    matrix = linalg.hadamard(hr.output_size)
    brute = (matrix[1:11][:, reports] == 1).sum(axis=1)
    np.testing.assert_array_equal(counts, brute)


def test_hr_bad_input() -> None:
    hr = dpkit.mechanism("hr", epsilon=1.0, k=10)
    estimator = dpkit.get_registry().estimator(hr)
    with pytest.raises(dpkit.InvalidData, match=r"outside the domain 0\.\.15"):
        estimator.accumulate(np.array([3, 16]))
    with pytest.raises(dpkit.InvalidData, match="integer"):
        estimator.accumulate(np.array([0.5]))
    with pytest.raises(dpkit.InvalidData, match=r"outside the domain 0\.\.9"):
        hr.randomize([-1], rng=np.random.default_rng(0))
