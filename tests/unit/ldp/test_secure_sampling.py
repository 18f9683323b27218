"""rr and krr in secure mode: the declared distribution, ε never exceeded, rng=None works.

Statistical tests use ``SecureRandom.from_key`` (fixed key: deterministic); each assertion's
threshold gives a false-positive rate of at most 1e-6 for a correct sampler and a random key.
"""

from __future__ import annotations

import decimal
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

import dpkit
from dpkit.randomness import SecureRandom, lie_threshold

ALPHA = 1e-6


def keyed(label: int) -> SecureRandom:
    return SecureRandom.from_key(bytes([label, 0x1D]) * 16)


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 4.0])
@pytest.mark.parametrize("value", [0, 1])
def test_secure_rr_matches_the_declared_pmf(epsilon: float, value: int) -> None:
    """Binomial test of the keep rate; false-positive rate 1e-6 per case."""
    rr = dpkit.mechanism("rr", epsilon=epsilon)
    n = 400_000
    reports = rr.randomize(np.full(n, value, dtype=np.uint8), rng=keyed(1))
    same = int(np.count_nonzero(reports == value))
    assert stats.binomtest(same, n, rr.keep_probability).pvalue > ALPHA


@pytest.mark.parametrize("epsilon", [1e-3, 0.1, 1.0, 4.0, 20.0, 60.0])
@pytest.mark.parametrize("k", [2, 6, 100])
def test_secure_thresholds_never_exceed_the_declared_epsilon(epsilon: float, k: int) -> None:
    """λ′ = T/2⁶⁴ with T = lie_threshold(ε, k) satisfies λ ≤ λ′ < λ + 2⁻⁶³, so the realised
    p′/q′ = (1 − λ′)(k − 1)/λ′ ≤ e^ε, ε at the smaller of its readings (binary value, shortest
    decimal: the ledger charges the decimal). Checked with exact rationals against e^ε bracketed
    in 80-digit decimal arithmetic (independent of the float λ the mechanisms report)."""
    threshold = lie_threshold(epsilon, k)
    if k > 2:
        assert threshold == lie_threshold(dpkit.mechanism("krr", epsilon=epsilon, k=k).epsilon, k)
    context = decimal.Context(prec=80)
    exp_eps = context.exp(min(decimal.Decimal(epsilon), decimal.Decimal(repr(epsilon))))
    low, high = (
        Fraction(exp_eps) * (1 - Fraction(1, 10**70)),
        Fraction(exp_eps) * (1 + Fraction(1, 10**70)),
    )
    lam_low, lam_high = Fraction(k - 1) / (high + k - 1), Fraction(k - 1) / (low + k - 1)
    realised = Fraction(threshold, 2**64)
    assert lam_high <= realised < lam_low + Fraction(2, 2**64)
    assert (1 - realised) * (k - 1) / realised <= low


def test_rr_with_keep_uses_the_exact_flip_probability() -> None:
    """keep = 3/4 (Warner): flip 1/4 is exactly representable, so T = 2⁶²."""
    rr = dpkit.mechanism("rr", keep=0.75)
    draws = rr.randomize(np.zeros(200_000, dtype=np.uint8), rng=keyed(3))
    assert stats.binomtest(int(draws.sum()), draws.size, 0.25).pvalue > ALPHA


@pytest.mark.parametrize("truth", [0, 3])
def test_secure_krr_matches_the_declared_pmf(truth: int) -> None:
    """k = 6 (k − 1 = 5, not a power of two): chi-square over the 6 outputs, rate 1e-6."""
    krr = dpkit.mechanism("krr", epsilon=1.0, k=6)
    n = 300_000
    reports = krr.randomize(np.full(n, truth), rng=keyed(2))
    counts = np.bincount(reports, minlength=6)
    expected = n * np.exp(krr.log_probability(np.arange(6), truth))
    assert stats.chisquare(counts, expected).pvalue > ALPHA


def test_rng_none_is_secure_mode_and_works() -> None:
    rr = dpkit.mechanism("rr", epsilon=1.0)
    bits = rr.randomize(np.array([[0, 1], [1, 0]]))
    assert bits.shape == (2, 2) and set(np.unique(bits).tolist()) <= {0, 1}
    krr = dpkit.mechanism("krr", epsilon=1.0, categories=["a", "b", "c"])
    labels = krr.randomize(["a", "c", "b"])
    assert set(labels.tolist()) <= {"a", "b", "c"}
    graph = rr.randomize_graph(np.zeros((4, 4), dtype=np.uint8))
    assert np.array_equal(graph, graph.T)
    assert dpkit.plugin.resolve_rng(None)[1] == "secure"


def test_fast_mode_is_unchanged_and_reproducible() -> None:
    rr = dpkit.mechanism("rr", epsilon=1.0)
    values = np.arange(1000) % 2
    first = rr.randomize(values, rng=np.random.default_rng(9))
    # The fast path is exactly u < 1 − p with numpy's doubles, as before.
    flips = np.random.default_rng(9).random(1000) < rr.flip_probability
    assert np.array_equal(first, values ^ flips)


def test_secure_reports_differ_between_calls() -> None:
    rr = dpkit.mechanism("rr", epsilon=0.5)
    values = np.zeros(256, dtype=np.uint8)
    assert not np.array_equal(rr.randomize(values), rr.randomize(values))


@pytest.mark.parametrize("bad", [42, "seed", np.random.RandomState(0)])
def test_other_rng_values_are_refused(bad: object) -> None:
    with pytest.raises(dpkit.InvalidParameter, match="rng"):
        dpkit.mechanism("krr", epsilon=1.0, k=3).randomize([0, 1], rng=bad)  # type: ignore[arg-type]


def test_secure_krr_one_word_path_with_frequent_rejections() -> None:
    """k = 3001: one word per value, the low 16 bits choose among the k − 1 = 3000 others by
    Lemire's multiply-shift, rejecting 2536 of every 65536 values (3.9%). The lie rate against
    the realised λ′ = ⌈T/2¹⁶⌉/2⁴⁸ (binomial) and the others against uniform (χ², 3000 cells),
    each at false-positive rate 1e-6/2."""
    krr = dpkit.mechanism("krr", epsilon=2.0, k=3001)
    n = 900_000
    reports = krr.randomize(np.full(n, 5), rng=keyed(7))
    lies = reports[reports != 5]
    realised = Fraction(-(-lie_threshold(2.0, 3001) >> 16), 2**48)
    assert stats.binomtest(lies.size, n, float(realised)).pvalue > ALPHA / 2
    counts = np.bincount(lies, minlength=3001)
    assert counts[5] == 0
    assert stats.chisquare(np.delete(counts, 5)).pvalue > ALPHA / 2
