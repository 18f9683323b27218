"""SecureRandom (random, integers, bernoulli), probability_threshold, modes and check_rng.

Statistical tests draw from ``SecureRandom.from_key`` with a fixed key, so they are
deterministic; their thresholds are set so that a correct sampler with a uniformly random key
would fail each assertion with probability at most 1e-6.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

import dpkit
from dpkit.randomness import SecureRandom, probability_threshold, resolve_rng

ALPHA = 1e-6


def keyed(label: int) -> SecureRandom:
    return SecureRandom.from_key(bytes([label]) * 32)


def chi_square_uniform_p(values: np.ndarray, m: int) -> float:
    counts = np.bincount(values.astype(np.int64), minlength=m)
    assert counts.size == m
    return float(stats.chisquare(counts).pvalue)


def test_random_is_the_top_53_bits_of_each_word() -> None:
    words = keyed(1).words(1000)
    values = keyed(1).random(1000)
    expected = [Fraction(int(w) >> 11, 2**53) for w in words]  # independent: exact rationals
    assert [Fraction(v) for v in values] == expected


def test_random_is_on_the_grid_and_in_range() -> None:
    values = keyed(2).random((100, 100))
    assert values.shape == (100, 100) and values.dtype == np.float64
    assert np.all((values >= 0) & (values < 1))
    assert np.all(values * 2.0**53 == np.floor(values * 2.0**53))
    assert isinstance(keyed(2).random(), float)
    single = keyed(2).random(1000, dtype=np.float32)
    assert single.dtype == np.float32 and np.all(single * 2.0**24 == np.floor(single * 2.0**24))


def test_random_is_uniform() -> None:
    """64 equal bins, chi-square; false-positive rate 1e-6."""
    values = keyed(3).random(400_000)
    assert chi_square_uniform_p(np.floor(values * 64), 64) > ALPHA


def test_random_out_and_bad_dtype() -> None:
    out = np.empty(5)
    assert keyed(4).random(out=out) is out
    with pytest.raises(dpkit.InvalidParameter, match="dtype"):
        keyed(4).random(3, dtype=np.int64)


@pytest.mark.parametrize("m", [3, 7, 10, 1000])
def test_integers_are_uniform_for_moduli_that_are_not_powers_of_two(m: int) -> None:
    """Chi-square over the m values; false-positive rate 1e-6 per modulus."""
    values = keyed(5).integers(0, m, size=300_000)
    assert values.min() >= 0 and values.max() < m
    assert chi_square_uniform_p(values, m) > ALPHA


def test_integers_reject_rather_than_reduce_modulo() -> None:
    """m = 3·2⁶²: ``word % m`` would put half the mass below 2⁶², exact uniformity one third.

    Binomial test of P[value < 2⁶²] = 1/3 (false-positive rate 1e-6); the biased reduction
    (probability 1/2) fails it by over 100 standard deviations.
    """
    m = 3 * 2**62
    values = keyed(6).integers(0, m, size=20_000, dtype=np.uint64)
    assert int(values.max()) < m
    low = int(np.count_nonzero(values < np.uint64(2**62)))
    assert stats.binomtest(low, values.size, 1 / 3).pvalue > ALPHA


def test_integers_signature_like_numpy() -> None:
    rng = keyed(7)
    assert 0 <= rng.integers(5) < 5
    assert rng.integers(5, 6) == 5
    assert rng.integers(5, 5, endpoint=True) == 5
    small = rng.integers(-3, 3, size=(4, 5), dtype=np.int8)
    assert small.shape == (4, 5) and small.dtype == np.int8
    assert small.min() >= -3 and small.max() <= 2
    full = rng.integers(-(2**63), 2**63, size=10_000, dtype=np.int64)
    assert full.min() < -(2**61) and full.max() > 2**61
    unsigned = rng.integers(0, 2**64, size=10, dtype=np.uint64)
    assert unsigned.dtype == np.uint64


def test_integers_endpoint_reaches_high() -> None:
    values = keyed(8).integers(1, 3, size=10_000, endpoint=True)
    assert set(np.unique(values).tolist()) == {1, 2, 3}


@pytest.mark.parametrize(
    ("args", "kwargs", "name"),
    [
        ((5, 5), {}, "high"),
        ((0, 300), {"dtype": np.uint8}, "high"),
        ((-1, 3), {"dtype": np.uint8}, "low"),
        ((0, 3), {"dtype": np.float64}, "dtype"),
        ((0.5, 3), {}, "low"),
    ],
)
def test_integers_errors_name_the_argument(args: tuple, kwargs: dict, name: str) -> None:
    with pytest.raises(dpkit.InvalidParameter, match=name):
        keyed(9).integers(*args, **kwargs)


def test_probability_threshold_is_exact() -> None:
    assert probability_threshold(0.5) == 2**63
    assert probability_threshold(Fraction(1, 3)) == -(-(2**64) // 3)
    assert probability_threshold(Fraction(1, 3), rounding="down") == 2**64 // 3
    assert probability_threshold(0.1) == math.ceil(Fraction(0.1) * 2**64)
    assert probability_threshold(1) == 2**64 and probability_threshold(0) == 0
    with pytest.raises(dpkit.InvalidParameter, match="probability"):
        probability_threshold(1.5)


@pytest.mark.parametrize("p", [0.01, 0.3, Fraction(2, 3)])
def test_bernoulli_has_the_threshold_probability(p: float) -> None:
    """Binomial test against T/2⁶⁴; false-positive rate 1e-6 per case."""
    draws = keyed(10).bernoulli(p, size=200_000)
    realised = Fraction(probability_threshold(p), 2**64)
    assert Fraction(p) <= realised < Fraction(p) + Fraction(1, 2**64)
    assert stats.binomtest(int(draws.sum()), draws.size, float(realised)).pvalue > ALPHA


def test_bernoulli_threshold_edges() -> None:
    rng = keyed(11)
    assert not rng.bernoulli_threshold(0, 1000).any()
    assert rng.bernoulli_threshold(2**64, 1000).all()
    assert isinstance(rng.bernoulli_threshold(2**63), bool)
    with pytest.raises(dpkit.InvalidParameter, match="threshold"):
        rng.bernoulli_threshold(2**64 + 1, 3)


def test_float_samplers_are_absent_with_an_explanation() -> None:
    with pytest.raises(dpkit.errors.UnsupportedRandomness, match="Mironov"):
        keyed(12).laplace(0.0, 1.0)  # type: ignore[attr-defined]
    assert not hasattr(keyed(12), "normal")  # still an AttributeError
    with pytest.raises(AttributeError, match="no attribute"):
        keyed(12).not_a_method  # type: ignore[attr-defined]  # noqa: B018


def test_resolve_rng_modes() -> None:
    secure, mode = resolve_rng(None)
    assert isinstance(secure, SecureRandom) and mode == "secure"
    assert resolve_rng(None)[0] is secure  # one process-wide instance
    mine = keyed(13)
    assert resolve_rng(mine) == (mine, "keyed") and mine.keyed  # reproducible, not secret
    fresh = SecureRandom()
    assert resolve_rng(fresh) == (fresh, "secure") and not fresh.keyed
    generator = np.random.default_rng(1)
    assert resolve_rng(generator) == (generator, "fast")


@pytest.mark.parametrize("bad", [42, "seed", np.random.RandomState(0), np.random.PCG64(0)])
def test_resolve_rng_refuses_other_things(bad: object) -> None:
    with pytest.raises(dpkit.InvalidParameter, match="rng") as info:
        resolve_rng(bad, owner="demo")
    assert "demo" in str(info.value)


def test_check_rng_accepts_both_kinds_and_refuses_the_rest() -> None:
    secure, generator = keyed(14), np.random.default_rng(2)
    assert dpkit.check_rng(secure, owner="m") is secure
    assert dpkit.check_rng(generator, owner="m") is generator
    for bad in (None, 1, np.random.RandomState(0)):
        with pytest.raises(dpkit.InvalidParameter, match="rng"):
            dpkit.check_rng(bad, owner="m")


def test_secure_random_needs_a_secure_source() -> None:
    with pytest.raises(dpkit.InvalidParameter, match="source"):
        SecureRandom(np.random.default_rng(0))  # type: ignore[arg-type]


def test_integers_with_an_array_of_bounds() -> None:
    """One bound per draw (as numpy's Generator.integers allows): uniform on each range, χ² per
    bound at false-positive rate 1e-6/4; bad bounds are typed errors naming ``high``."""
    bounds = np.tile(np.array([3, 5, 1, 7]), 50_000)
    values = keyed(11).integers(0, bounds)
    assert values.shape == bounds.shape and values.dtype == np.int64
    for m in (3, 5, 1, 7):
        counts = np.bincount(values[bounds == m], minlength=m)
        assert counts.size == m
        if m > 1:
            assert stats.chisquare(counts).pvalue > 1e-6 / 4
    shifted = keyed(11).integers(-5, np.array([0, -4]), size=(1000, 2))
    assert shifted.shape == (1000, 2) and shifted[:, 1].max() == -5 and shifted[:, 0].max() < 0
    with pytest.raises(dpkit.InvalidParameter, match="high"):
        keyed(11).integers(3, np.array([3, 4]))
    with pytest.raises(dpkit.InvalidParameter, match="high"):
        keyed(11).integers(0, np.array([1.5]))
