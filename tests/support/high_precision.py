"""High-precision references for the accounting tests, independent of dpkit's own arithmetic.

dpkit checks its bounds on outward-rounded enclosures (Marsaglia's series and Laplace's
continued fraction for Φ, Stirling's series for ln n!, π by Machin's formula). These references
use other routes, in plain :mod:`decimal` at ~100 significant digits more than the answer
needs: Φ from the Maclaurin series of erf (alternating, so summed at extra precision to absorb
its cancellation), π by the Gauss–Legendre iteration, exact integer binomials, and bisection.
They are references, not bounds: accurate to far below the differences the tests look at.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import Decimal, localcontext
from fractions import Fraction

DIGITS = 80


def _pi() -> Decimal:
    """Gauss–Legendre: quadratic convergence, ten rounds are plenty for 200 digits."""
    a, b, t, p = Decimal(1), Decimal(1) / Decimal(2).sqrt(), Decimal(1) / 4, Decimal(1)
    for _ in range(10):
        a, b, t, p = (a + b) / 2, (a * b).sqrt(), t - p * ((a - b) / 2) ** 2, 2 * p
    return (a + b) ** 2 / (4 * t)


def normal_cdf(x: Decimal) -> Decimal:
    """Φ(x) = ½(1 + erf(x/√2)), erf from its Maclaurin series Σ (−1)^n z^{2n+1}/(n!(2n+1))."""
    with localcontext() as outer:
        digits = outer.prec
    z2 = float(x) ** 2 / 2
    with localcontext() as ctx:
        # the series' terms reach e^{z²}, and 1 + erf(−z) = erfc(z) is about e^{−z²}
        ctx.prec = digits + 2 * int(z2 / math.log(10)) + 30
        z = x / Decimal(2).sqrt()
        term, total, n = z, z, 0
        square = z * z
        while True:
            n += 1
            term = -term * square / n
            piece = term / (2 * n + 1)
            total += piece
            if n > z2 and abs(piece) < Decimal(10) ** -(ctx.prec + 2):
                break
        erf = 2 / _pi().sqrt() * total
        value = (1 + erf) / 2
    return +value


def gaussian_delta(epsilon: Decimal, mu: Decimal) -> Decimal:
    """Balle & Wang's δ(ε) = Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ) for μ-GDP."""
    return normal_cdf(mu / 2 - epsilon / mu) - epsilon.exp() * normal_cdf(-mu / 2 - epsilon / mu)


def bisect(excess: Callable[[Decimal], bool], low: Decimal, high: Decimal) -> Decimal:
    """The boundary between ``excess`` True (below) and False (above), to 1e-40 relative."""
    assert excess(low) and not excess(high), "the bracket does not hold the boundary"
    while high - low > high * Decimal("1e-40"):
        middle = (low + high) / 2
        if excess(middle):
            low = middle
        else:
            high = middle
    return high


def _around(guess: float) -> tuple[Decimal, Decimal]:
    """A bracket of ±1e-6 around a float guess (the erf series costs e^{x²} digits, so the
    high-precision evaluations stay near the answer; :func:`bisect` checks the bracket)."""
    return Decimal(guess) * Decimal("0.999999"), Decimal(guess) * Decimal("1.000001")


def gaussian_epsilon(delta: Fraction, mu_squared: Fraction, guess: float) -> Decimal:
    """The exact ε at δ of μ-GDP (the smallest ε with δ_μ(ε) ≤ δ), near a float guess."""
    with localcontext() as ctx:
        ctx.prec = DIGITS + 40
        mu = (Decimal(mu_squared.numerator) / Decimal(mu_squared.denominator)).sqrt()
        target = Decimal(delta.numerator) / Decimal(delta.denominator)
        return bisect(lambda e: gaussian_delta(e, mu) > target, *_around(guess))


def gaussian_mu(epsilon: Fraction, delta: Fraction, guess: float) -> Decimal:
    """The largest μ with δ_μ(ε) ≤ δ, near a float guess."""
    with localcontext() as ctx:
        ctx.prec = DIGITS + 40
        eps = Decimal(epsilon.numerator) / Decimal(epsilon.denominator)
        target = Decimal(delta.numerator) / Decimal(delta.denominator)
        return bisect(lambda mu: gaussian_delta(eps, mu) <= target, *_around(guess))


def rr_delta(epsilon_prime: Decimal, epsilon: Decimal, k: int) -> Decimal:
    """δ_RR(ε') of k-fold ε-randomized response, term by term with exact binomials."""
    p = 1 / (1 + (-epsilon).exp())
    q = 1 - p
    total = Decimal(0)
    for flips in range(k + 1):
        loss = (k - 2 * flips) * epsilon
        if loss > epsilon_prime:
            total += (
                math.comb(k, flips)
                * p ** (k - flips)
                * q**flips
                * (1 - (epsilon_prime - loss).exp())
            )
    return total


def kov_epsilon(epsilon: Fraction, k: int, delta: Fraction, delta0: Fraction) -> Decimal:
    """The exact optimal ε' of k-fold (ε, δ0)-DP at δ (Kairouz, Oh & Viswanath 2015, Thm 3.3):
    the smallest ε' with δ_RR(ε') ≤ 1 − (1 − δ)/(1 − δ0)^k, the slack in exact rationals."""
    slack = 1 - (1 - delta) / (1 - delta0) ** k
    with localcontext() as ctx:
        ctx.prec = DIGITS + 40
        eps = Decimal(epsilon.numerator) / Decimal(epsilon.denominator)
        target = Decimal(slack.numerator) / Decimal(slack.denominator)
        return bisect(lambda e: rr_delta(e, eps, k) > target, Decimal(0), k * eps)


def readings(value: float) -> tuple[Fraction, Fraction]:
    """A float's two readings, the smaller first: its binary value and its shortest decimal."""
    binary, decimal = Fraction(value), Fraction(repr(value))
    return (binary, decimal) if binary <= decimal else (decimal, binary)
