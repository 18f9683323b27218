"""olh and hr in secure mode lie with a probability at or above the exact one (realised ε ≤ ε).

A float lie probability (g − 1)/(e^ε + g − 1) can land below the exact value; the float
comparison then realises an ε slightly above the claim (found for 724 of 2000 ε values in
0.0025..5 for olh). The check is exact: the threshold used is compared with the lie
probability computed in 60-digit decimal arithmetic from the double ε, at the smaller of its
two readings (its binary value and its shortest decimal, which the ledger charges).

Rounding up guards one ratio only: past the uniform point (k − 1)/k the truth becomes the least
likely report and the other ratio exceeds 1. rr and krr are probed word by word for the lie
probability their secure sampler realises, whatever grid it rounds to, and both ratios are
checked exactly.
"""

from __future__ import annotations

import decimal
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from dpkit_ldp._lattice import BandLattice
from dpkit_ldp.graph_arr import AsymmetricRandomizedResponse
from dpkit_ldp.graph_rr import GraphRandomizedResponse
from hypothesis import example, given, settings
from hypothesis import strategies as st
from support.probe_words import first_word

import dpkit

EPSILONS = [0.0025 * i for i in range(1, 2001, 37)]


def exact_lie(epsilon: float, g: int) -> decimal.Decimal:
    """The lie probability at the smaller of ε's two readings (binary value, shortest decimal:
    the ledger charges the decimal), where the thresholds are computed."""
    context = decimal.Context(prec=60)
    odds = context.exp(min(decimal.Decimal(epsilon), decimal.Decimal(repr(epsilon))))
    return context.divide(decimal.Decimal(g - 1), context.add(odds, decimal.Decimal(g - 1)))


class RecordingRandom(dpkit.SecureRandom):
    """A secure generator that records the Bernoulli thresholds it is asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.thresholds: list[int] = []

    def bernoulli_threshold(self, threshold: int, size: Any = None) -> Any:
        self.thresholds.append(threshold)
        return super().bernoulli_threshold(threshold, size)


@pytest.mark.parametrize("epsilon", EPSILONS)
@pytest.mark.parametrize("name", ["olh", "hr"])
def test_secure_lie_probability_is_rounded_up(name: str, epsilon: float) -> None:
    mechanism = dpkit.mechanism(name, epsilon=epsilon, k=8)
    g = mechanism.range if name == "olh" else 2
    rng = RecordingRandom()
    mechanism.randomize(np.arange(8), rng=rng)
    assert rng.thresholds, "the secure path drew no thresholded Bernoulli"
    lie = decimal.Decimal(rng.thresholds[-1]) / decimal.Decimal(2**64)
    assert lie >= exact_lie(epsilon, g)
    assert lie - exact_lie(epsilon, g) < decimal.Decimal(2) / decimal.Decimal(2**64)


def realised_lie_threshold(mechanism: Any) -> int:
    """The T with ``randomize`` lying on value 0 exactly when its first word is below T, found
    by bisection over that word (the lie is monotone in it on every secure path): the realised
    lie probability is T/2⁶⁴ exactly, whatever grid the sampler rounds it to."""
    low, high = 0, 2**64
    while low < high:
        middle = (low + high) // 2
        report = np.asarray(mechanism.randomize(np.zeros(1, np.int64), rng=first_word(middle)))
        if int(report.reshape(-1)[0]) != 0:
            low = middle + 1
        else:
            high = middle
    return low


def realised_ratio_within(threshold: int, k: int, epsilon: float | Decimal) -> bool:
    """max(p′/q′, q′/p′) ≤ e^ε for the realised p′ = 1 − T/2⁶⁴, q′ = T/(2⁶⁴(k − 1)), decided
    in 60-digit decimal arithmetic (the ratio's error ~1e-59, far below any margin here)."""
    context = decimal.Context(prec=60)
    lie = decimal.Decimal(threshold) / decimal.Decimal(2**64)
    p, q = context.subtract(1, lie), context.divide(lie, k - 1)
    ratio = max(context.divide(p, q), context.divide(q, p))
    return ratio <= context.exp(decimal.Decimal(epsilon))


# Small ε (within 2⁻⁴⁸ of the uniform point (k − 1)/k), ordinary and large ε, binary and k-ary
# (one-word path k − 1 ≤ 2¹⁶ and the 2⁻⁶⁴ path beyond). The first two cases realised 2.3e-12
# and 3.8e-11 when the one-word path rounded λ up past (k − 1)/k.
RATIO_CASES = [
    (1000, 1e-12),
    (20000, 1.2925458728188358e-12),
    (20000, 1.7663006231117236e-11),
    (5000, 1.0331072001102208e-12),
    (3, 1e-12),
    (2, 1e-12),
    (65537, 1e-12),
    (70000, 1e-12),
    (1 << 24, 1e-12),
    (3, 1.0),
    (3001, 2.0),
    (2, 50.0),
    (1000, 700.0),
]


@pytest.mark.parametrize(("k", "epsilon"), RATIO_CASES)
def test_secure_krr_realised_ratio_is_within_epsilon_both_ways(k: int, epsilon: float) -> None:
    """The secure sampler's realised law, probed word by word, keeps both ratios within e^ε:
    rounding λ up guards p′/q′, and must not pass (k − 1)/k, where q′/p′ exceeds 1."""
    mechanism = dpkit.mechanism(
        "rr" if k == 2 else "krr", epsilon=epsilon, **({"k": k} if k > 2 else {})
    )
    threshold = realised_lie_threshold(mechanism)
    assert realised_ratio_within(threshold, k, epsilon), (k, epsilon, threshold)


@settings(max_examples=25, derandomize=True, deadline=None, database=None)
@given(
    k=st.integers(2, 70000),
    log10_epsilon=st.floats(-12.0, -9.0),
)
def test_secure_krr_small_epsilon_realised_ratio(k: int, log10_epsilon: float) -> None:
    """The class above, searched: at ε ≤ 10⁻⁹ λ lies within the one-word path's 2⁻⁴⁸ grid
    (and, for large k, the 2⁻⁶⁴ grid) of the uniform point (k − 1)/k. Deterministic examples."""
    epsilon = 10.0**log10_epsilon
    mechanism = dpkit.mechanism(
        "rr" if k == 2 else "krr", epsilon=epsilon, **({"k": k} if k > 2 else {})
    )
    assert realised_ratio_within(realised_lie_threshold(mechanism), k, epsilon), (k, epsilon)


def _rounded_up_lie(epsilon: float, k: int) -> int:
    """⌈λ·2⁶⁴⌉ for the exact λ (60 digits): the threshold rounding up alone would give."""
    context = decimal.Context(prec=60)
    scaled = context.multiply(exact_lie(epsilon, k), decimal.Decimal(2**64))
    return int(scaled.to_integral_value(decimal.ROUND_CEILING))


@settings(max_examples=40, derandomize=True, deadline=None, database=None)
@given(
    k=st.one_of(st.integers(2, 2**31), st.integers(2**24, 2**31)),
    log10_epsilon=st.floats(-12.0, -10.0),
)
def test_lie_threshold_keeps_both_ratios_or_refuses(k: int, log10_epsilon: float) -> None:
    """At ε ≲ k·2⁻⁶⁴ (olh's g reaches 2³¹) λ lies within 2⁻⁶⁴ of (k − 1)/k, and rounding it
    up can pass that point far enough that q′/p′ > e^ε (found: k = 2.8·10⁸, ε = 5.5·10⁻¹²
    realised 9.5·10⁻¹²). A threshold returned keeps both ratios; a refusal happens only where
    the rounded-up λ would not."""
    epsilon = 10.0**log10_epsilon
    try:
        threshold = dpkit.plugin.lie_threshold(epsilon, k)
    except dpkit.InvalidParameter:
        assert not realised_ratio_within(_rounded_up_lie(epsilon, k), k, epsilon), (k, epsilon)
        return
    assert realised_ratio_within(threshold, k, epsilon), (k, epsilon, threshold)


def test_olh_refuses_a_range_its_grid_cannot_realise() -> None:
    """From the parameters alone, at construction (before any value is read)."""
    with pytest.raises(dpkit.InvalidParameter, match="epsilon"):
        dpkit.mechanism("olh", epsilon=5.494274242416769e-12, k=4, g=281129396)
    dpkit.mechanism("olh", epsilon=5.494274242416769e-12, k=4, g=281129397)  # a grid point fits


@settings(max_examples=12, derandomize=True, deadline=None, database=None)
@example(keep=0.8943608868444055)
@given(
    keep=st.one_of(
        st.sampled_from([0.5000022649765015, 0.75, 0.5 + 2**-40]),
        st.floats(0.5, 1.0, exclude_min=True, exclude_max=True),
    )
)
def test_rr_by_keep_declares_at_least_the_epsilon_it_realises(keep: float) -> None:
    """``rr`` given ``keep`` flips with probability exactly 1 − keep, so its declared ε must be
    at least ln(keep/(1 − keep)) exactly; the float log(keep) − log1p(−keep) fell below it
    (keep = 0.5000022649765015: by a relative 6.8·10⁻¹²)."""
    mechanism = dpkit.mechanism("rr", keep=keep)
    epsilon = mechanism.privacy.epsilon
    threshold = realised_lie_threshold(mechanism)
    assert threshold == (1 - Fraction(keep)) * 2**64  # the flip probability, exactly
    assert realised_ratio_within(threshold, 2, epsilon), (keep, epsilon)
    # and as the ledger reads the declared ε, its shortest decimal, which can lie below the
    # double (keep = 0.8943608868444055: the double above ln(keep/(1 − keep)) printed as
    # 2.1360806778519636, below it)
    assert realised_ratio_within(threshold, 2, Decimal(repr(epsilon))), (keep, epsilon)


# The ledger charges a float ε at its shortest decimal (0.1 is 1/10), which can lie below its
# binary value (0.1000000000000000055…, and 1.1 by 8.9·10⁻¹⁷): every exact threshold realises at
# most that charge. Exact checks (60 digits); Hypothesis draws the floats.
CHARGED = [0.1, 1.1, 2.0**-25, 4.0]


def _charged(epsilon: float) -> Decimal:
    return Decimal(repr(epsilon))


def _ratios_within(one: Fraction, zero: Fraction, epsilon: float) -> bool:
    """p₁/p₀ and (1 − p₀)/(1 − p₁) ≤ e^ε at ε's charged reading, in 60 digits."""
    context = decimal.Context(prec=60)
    bound = context.exp(_charged(epsilon))
    ratios = (one / zero, (1 - zero) / (1 - one))
    return all(
        context.divide(Decimal(r.numerator), Decimal(r.denominator)) <= bound for r in ratios
    )


@settings(max_examples=60, deadline=None, database=None)
@given(st.floats(min_value=1e-6, max_value=30.0), st.sampled_from([2, 3, 1000]))
@example(0.1, 2)
@example(1.1, 2)
@example(0.1, 7)
def test_lie_thresholds_realise_at_most_the_charged_epsilon(epsilon: float, k: int) -> None:
    threshold = dpkit.plugin.lie_threshold(epsilon, k)
    assert realised_ratio_within(threshold, k, _charged(epsilon)), (epsilon, k)


@pytest.mark.parametrize("epsilon", CHARGED)
def test_band_and_neighbour_list_thresholds_realise_at_most_the_charged_epsilon(
    epsilon: float,
) -> None:
    """The band lattices (pm, sw, duchi_multi's heads) and graph_rr's and graph_arr's (T₁, T₀)."""
    for cells, band in ((2, 1), (1 << 20, 1 << 10), (3, 1)):
        lattice = BandLattice.build(epsilon, cells, band)
        ratio = lattice.high / lattice.low  # a cell in the band against one outside
        context = decimal.Context(prec=60)
        realised = context.divide(Decimal(ratio.numerator), Decimal(ratio.denominator))
        assert realised <= context.exp(_charged(epsilon)), (epsilon, cells, band)
    for mechanism in (
        GraphRandomizedResponse(epsilon=epsilon, nodes=3),
        AsymmetricRandomizedResponse(epsilon=epsilon, nodes=3, mu=0.05),
    ):
        t1, t0 = mechanism._thresholds()
        assert _ratios_within(Fraction(t1, 2**64), Fraction(t0, 2**64), epsilon), mechanism
