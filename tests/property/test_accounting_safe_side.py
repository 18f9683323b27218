"""Every ε the accountant reports is on the safe side of the exact value, for inputs Hypothesis
draws towards where float arithmetic cancels: large noise multipliers at tiny δ (the Gaussian
curve's two terms nearly cancel) and (ε, δ) compositions read at a δ a hair above their own.

The truth is checked the other way round, so that no root has to be found: at the reported ε,
the exact δ(ε) of the event — computed in decimal arithmetic at high precision by routes dpkit
does not use (``support.high_precision``) — must not exceed the δ asked for (its smaller
reading, binary or shortest decimal). Deterministic: no false positives.
"""

from __future__ import annotations

from decimal import Decimal, localcontext
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st
from support import high_precision as hp

from dpkit.accounting import account
from dpkit.privacy import ApproximateDP, GaussianDP

#: Noise multipliers from moderate to very large (where δ(ε) is a difference of two nearly
#: equal terms), δ from 1e-2 down to 1e-250.
NOISE_MULTIPLIERS = st.floats(0.5, 20_000.0, allow_nan=False, allow_infinity=False)
TINY_DELTAS = st.integers(2, 250).map(lambda k: 10.0**-k)


def _decimal(value: Fraction) -> Decimal:
    return Decimal(value.numerator) / Decimal(value.denominator)


@settings(max_examples=40, deadline=None)
@given(noise_multiplier=NOISE_MULTIPLIERS, delta=TINY_DELTAS)
def test_the_gaussian_epsilon_is_never_below_the_truth(
    noise_multiplier: float, delta: float
) -> None:
    event = GaussianDP(noise_multiplier=noise_multiplier, delta=0.5)
    reported = account([(event, 1)], delta=delta).epsilon
    low_nm = hp.readings(noise_multiplier)[0]  # the larger μ: the larger δ(ε)
    with localcontext() as ctx:
        ctx.prec = 80
        mu = (1 / _decimal(low_nm) ** 2).sqrt()
        smaller = min(Decimal(reported), Decimal(repr(reported)))  # the larger δ(ε)
        exact_delta = hp.gaussian_delta(smaller, mu)
        assert exact_delta <= _decimal(hp.readings(delta)[0]), (reported, exact_delta)


@settings(max_examples=30, deadline=None)
@given(
    epsilon=st.sampled_from([0.05, 0.1, 0.5, 1.0]),
    k=st.integers(2, 200),
    delta0=st.integers(5, 12).map(lambda j: 10.0**-j),
    slack=st.integers(1, 1000).map(lambda m: m * 1e-16),
)
def test_a_composition_read_just_above_its_own_delta_is_never_below_the_truth(
    epsilon: float, k: int, delta0: float, slack: float
) -> None:
    """k uses of (ε, δ₀) at δ = 1 − (1 − δ₀)^k + slack: the optimal composition's slack term
    cancels there. The reported ε must be ≥ the exact optimal ε (Kairouz, Oh & Viswanath 2015,
    Theorem 3.3) at that δ."""
    spent = 1 - (1 - Fraction(repr(delta0))) ** k
    delta = float(spent + Fraction(slack))
    if hp.readings(delta)[0] <= spent:  # the float rounded the slack away: no ε is reported
        return
    reported = account([(ApproximateDP(epsilon=epsilon, delta=delta0), k)], delta=delta).epsilon
    # The event's ε and δ₀ as dpkit reads a declared float: its shortest decimal
    # (dpkit.accounting.exact, so that ten charges of 0.1 are 1); the δ asked for at the
    # smaller of its two readings.
    truth = hp.kov_epsilon(
        Fraction(repr(epsilon)), k, hp.readings(delta)[0], Fraction(repr(delta0))
    )
    assert Decimal(reported) >= truth and Decimal(repr(reported)) >= truth, (reported, truth)
