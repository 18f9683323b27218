"""Rigorous enclosures in decimal arithmetic: a real number known to lie in [lo, hi].

Floats answer most accounting questions to within a few units in the last place, but a few
answers are differences of nearly equal numbers — the Gaussian privacy profile
δ(ε) = Φ(a) − e^ε Φ(b) at a large noise multiplier, or 1 − (1 − δ)/(1 − δ₀)^k — where float
rounding can land on either side of the truth by far more than an ulp. A bound that is reported
as an upper bound is therefore *checked* here: every operation rounds its lower end down and
its upper end up (``+ − × ÷`` in directed rounding; ``exp``, ``ln`` and ``sqrt`` are correctly
rounded by :mod:`decimal`, so one unit in the last place either way encloses them), and a
comparison is decided only when the enclosures do not overlap — otherwise the precision is
raised.

The standard normal CDF is enclosed from two expansions with rigorous remainders:

* small |x| (below 4, or 1.2·√precision): Φ(x) = ½ + φ(x)·Σ_{n≥0} x^{2n+1}/(1·3···(2n+1)) (Marsaglia 2004, "Evaluating the
  Normal Distribution", J. Stat. Softw. 11(4)); the term ratio x²/(2n+3) falls, so once it is
  at most ½ the remainder after a term is at most twice the next term;
* larger |x|: Φ(−t) = φ(t)·R(t) with Laplace's continued fraction for the Mills ratio,
  R(t) = 1/(t + 1/(t + 2/(t + 3/(t + ···)))) (Abramowitz & Stegun 26.2.14). Its elements
  are positive, so two consecutive approximants enclose R(t) (the even approximants increase
  and the odd ones decrease towards it; Jones & Thron 1980, "Continued Fractions", Thm 4.35).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from decimal import (
    MAX_EMAX,
    MIN_EMIN,
    ROUND_CEILING,
    ROUND_FLOOR,
    ROUND_HALF_EVEN,
    Context,
    Decimal,
)
from fractions import Fraction
from functools import cache

__all__ = [
    "Arithmetic",
    "Enclosure",
    "decimal_high",
    "decimal_low",
    "float_above",
    "float_below",
    "rounded",
    "settle",
]

#: An enclosure: the real number lies in [lo, hi].
Enclosure = tuple[Decimal, Decimal]


def decimal_low(value: float | int | Fraction) -> Decimal:
    """The smaller of the two readings of a float: its exact binary value and the shortest
    decimal that prints it (``0.1`` is 1/10 to a reader, 0.1000000000000000055… in binary).

    dpkit reads floats the second way (:func:`dpkit.accounting.exact`); a bound that must
    hold under either reading is checked at the less favourable one.
    """
    if isinstance(value, Fraction):
        raise TypeError("decimal_low takes a float or an int; enclose a Fraction by division")
    if isinstance(value, int):
        return Decimal(value)
    return min(Decimal(value), Decimal(repr(value)))


def decimal_high(value: float | int) -> Decimal:
    """The larger of the two readings of a float (:func:`decimal_low`)."""
    if isinstance(value, int):
        return Decimal(value)
    return max(Decimal(value), Decimal(repr(value)))


def _outside_floats(value: Decimal | Fraction) -> int:
    """+1 above the float range, −1 for a nonzero value below the smallest float's magnitude,
    0 otherwise — decided without building the exact rational of a decimal such as 1E−10⁹."""
    if isinstance(value, Decimal) and value and value.is_finite():
        if value.adjusted() > 400:
            return 1
        if value.adjusted() < -400:
            return -1
    return 0


def float_above(value: Decimal | Fraction, *, binary: bool = True) -> float:
    """The smallest float whose readings are ≥ ``value`` (+inf beyond the float range): both
    readings, or with ``binary=False`` only the shortest decimal (dpkit's reading of a float:
    an exact sum of decimals such as 3/10 is then reported as 0.3, not 0.30000000000000004)."""
    outside = _outside_floats(value)
    if outside:
        tiny = math.ulp(0.0)
        return math.inf if outside > 0 else (tiny if value > 0 else -0.0)
    exact = Fraction(value)
    try:
        x = float(exact)
    except OverflowError:
        return math.inf
    while (binary and Fraction(x) < exact) or Fraction(repr(x)) < exact:
        x = math.nextafter(x, math.inf)
    return x


def float_below(value: Decimal | Fraction, *, binary: bool = True) -> float:
    """The largest float whose readings are ≤ ``value`` (:func:`float_above`, downwards)."""
    outside = _outside_floats(value)
    if outside:
        if outside > 0:
            return sys.float_info.max if value > 0 else -math.inf
        return 0.0 if value > 0 else -math.ulp(0.0)
    exact = Fraction(value)
    try:
        x = float(exact)
    except OverflowError:
        return math.inf if exact > 0 else -math.inf
    while (binary and Fraction(x) > exact) or Fraction(repr(x)) > exact:
        x = math.nextafter(x, -math.inf)
    return x


def rounded(value: float | Fraction, digits: int = 6, *, up: bool = True) -> str:
    """``value`` to ``digits`` significant digits like ``format(value, ".6g")``, but rounded up
    (or down, ``up=False``) instead of to nearest: an upper bound such as an ε, a δ or a
    calibrated noise is printed as one, a lower bound (the largest per-query ε that fits) as
    one. A float is read as its shortest decimal (``repr``), as dpkit reads floats; the
    accountants round their floats so that this reading is on the safe side."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"{value:g}"
    exact = value if isinstance(value, Fraction) else Fraction(repr(float(value)))
    if exact == 0:
        return "0"
    magnitude = abs(exact)
    exponent = len(str(magnitude.numerator)) - len(str(magnitude.denominator))
    if Fraction(10) ** exponent > magnitude:
        exponent -= 1  # now 10^exponent ≤ |value| < 10^(exponent + 1)
    scale = Fraction(10) ** (exponent - digits + 1)
    steps = math.ceil(exact / scale) if up else math.floor(exact / scale)
    return f"{float(steps * scale):.{digits}g}"


def settle(value: float, holds: Callable[[float], bool], *, up: bool = True) -> float:
    """The value nearest ``value`` in the direction ``up`` (or down) at which ``holds`` is True,
    for a monotone ``holds`` checked on enclosures: ``value`` itself if it holds; else steps
    of 2⁻⁴⁰·|value| (at least the smallest float), doubling, until one holds, and then eight
    bisections between the last step that failed and the first that held. +inf (or 0 going
    down) when no finite step holds, so a bound is never reported on the wrong side of the
    truth."""
    if holds(value):
        return value
    sign = 1.0 if up else -1.0
    step = max(abs(value) * 2.0**-40, math.ulp(0.0))
    failed = value
    while True:  # at most ~2100 doublings span the floats
        candidate = value + sign * step
        if not up and candidate <= 0:
            return 0.0
        if not math.isfinite(candidate):
            return math.inf
        if holds(candidate):
            for _ in range(8):
                middle = 0.5 * (failed + candidate)
                if middle in (failed, candidate):
                    break
                if holds(middle):
                    candidate = middle
                else:
                    failed = middle
            return candidate
        failed, step = candidate, step * 2.0


@cache
def _pi(digits: int) -> Enclosure:
    """π to ``digits`` decimal places by Machin's formula π = 16·atan(1/5) − 4·atan(1/239),
    summed in integers scaled by 10^(digits + 10); each floor division is off by less than
    one unit, so the error is at most a few units per term of the two alternating series."""
    scale = 10 ** (digits + 10)
    total, terms = 0, 0
    for factor, n in ((16, 5), (-4, 239)):
        power, k, series = scale // n, 0, 0
        while power:
            series += (power // (2 * k + 1)) * (-1 if k % 2 else 1)
            power //= n * n
            k += 1
            terms += 1
        total += factor * series
    # per term: the scaled power is off by < 2 units and its division by < 3; the first
    # omitted term of each alternating series is < 1; times the factors 16 and 4
    slack = 64 * (terms + 2)
    exponent = -(digits + 10)  # built from strings: exact, whatever the current context
    return Decimal(f"{total - slack}E{exponent}"), Decimal(f"{total + slack}E{exponent}")


class Arithmetic:
    """Outward-rounded enclosure arithmetic at ``precision`` significant digits."""

    def __init__(self, precision: int):
        self.precision = precision
        self.down = Context(prec=precision, rounding=ROUND_FLOOR, Emax=MAX_EMAX, Emin=MIN_EMIN)
        self.up = Context(prec=precision, rounding=ROUND_CEILING, Emax=MAX_EMAX, Emin=MIN_EMIN)
        self.near = Context(prec=precision, rounding=ROUND_HALF_EVEN, Emax=MAX_EMAX, Emin=MIN_EMIN)

    # -- construction -----------------------------------------------------------------------

    def point(self, value: Decimal | int) -> Enclosure:
        return self.down.plus(Decimal(value)), self.up.plus(Decimal(value))

    def fraction(self, value: Fraction) -> Enclosure:
        """An exact rational, enclosed by one outward-rounded division."""
        n, d = Decimal(value.numerator), Decimal(value.denominator)
        return self.down.divide(n, d), self.up.divide(n, d)

    # -- the four operations ------------------------------------------------------------------

    def add(self, x: Enclosure, y: Enclosure) -> Enclosure:
        return self.down.add(x[0], y[0]), self.up.add(x[1], y[1])

    def sub(self, x: Enclosure, y: Enclosure) -> Enclosure:
        return self.down.subtract(x[0], y[1]), self.up.subtract(x[1], y[0])

    def neg(self, x: Enclosure) -> Enclosure:
        return -x[1], -x[0]

    def mul(self, x: Enclosure, y: Enclosure) -> Enclosure:
        if x[0] >= 0 and y[0] >= 0:
            return self.down.multiply(x[0], y[0]), self.up.multiply(x[1], y[1])
        lows = [self.down.multiply(a, b) for a in x for b in y]
        highs = [self.up.multiply(a, b) for a in x for b in y]
        return min(lows), max(highs)

    def div(self, x: Enclosure, y: Enclosure) -> Enclosure:
        if y[0] <= 0 <= y[1]:
            raise ZeroDivisionError("enclosure of the divisor contains 0")
        if x[0] >= 0 and y[0] > 0:
            return self.down.divide(x[0], y[1]), self.up.divide(x[1], y[0])
        lows = [self.down.divide(a, b) for a in x for b in y]
        highs = [self.up.divide(a, b) for a in x for b in y]
        return min(lows), max(highs)

    def scale(self, x: Enclosure, factor: Decimal) -> Enclosure:
        """x·factor for an exact factor ≥ 0."""
        return self.down.multiply(x[0], factor), self.up.multiply(x[1], factor)

    # -- correctly rounded functions: one unit in the last place either way ------------------

    def exp(self, x: Enclosure) -> Enclosure:
        return self.near.exp(x[0]).next_minus(self.near), self.near.exp(x[1]).next_plus(self.near)

    def ln(self, x: Enclosure) -> Enclosure:
        if x[0] <= 0:
            raise ValueError("ln of an enclosure that reaches 0")
        return self._outward(self.near.ln, x, exact=Decimal(1))

    def sqrt(self, x: Enclosure) -> Enclosure:
        return self._outward(self.near.sqrt, (max(x[0], Decimal(0)), x[1]), exact=Decimal(0))

    def _outward(
        self, function: Callable[[Decimal], Decimal], x: Enclosure, *, exact: Decimal
    ) -> Enclosure:
        """A correctly rounded increasing function at both ends, widened by one unit in the
        last place each way — except at ``exact``, where its value is exact (ln 1 = 0,
        √0 = 0: widening 0 would give the smallest decimal, 1E−10¹⁸, which nothing needs)."""
        low, high = function(x[0]), function(x[1])
        if x[0] != exact:
            low = low.next_minus(self.near)
        if x[1] != exact:
            high = high.next_plus(self.near)
        return low, high

    def power(self, x: Enclosure, n: int) -> Enclosure:
        """x^n for x ≥ 0 and an integer n ≥ 0, by repeated squaring."""
        result, base = self.point(Decimal(1)), x
        while n:
            if n & 1:
                result = self.mul(result, base)
            n >>= 1
            if n:
                base = self.mul(base, base)
        return result

    def log_factorial(self, n: int) -> Enclosure:
        """ln n!: exactly from n! below 4·precision; above, Stirling's series
        ln Γ(z) = (z − ½) ln z − z + ½ ln 2π + Σ_{j=1}^{m} B_{2j}/(2j(2j−1) z^{2j−1}) + R_m at
        z = n + 1, whose remainder R_m is bounded by the first omitted term and has its sign
        (DLMF 5.11.1 and §5.11(ii)): the sum stops at a term below 10^−(precision+5)."""
        if n < 4 * self.precision:
            return self.ln(self.point(Decimal(math.factorial(n))))
        z = self.point(Decimal(n + 1))
        ln_z = self.ln(z)
        main = self.sub(self.mul(self.sub(z, self.point(Decimal("0.5"))), ln_z), z)
        total = self.add(main, self.log_sqrt_two_pi())
        tiny = Decimal(10) ** -(self.precision + 5)
        inverse_square = self.div(self.point(Decimal(1)), self.mul(z, z))
        power = self.div(self.point(Decimal(1)), z)  # z^−(2j−1)
        j = 1
        while True:
            coefficient = _bernoulli(2 * j) / (2 * j * (2 * j - 1))
            term = self.mul(self.fraction(coefficient), power)
            if max(abs(term[0]), abs(term[1])) <= tiny:
                return self.down.subtract(total[0], tiny), self.up.add(total[1], tiny)
            total = self.add(total, term)
            power = self.mul(power, inverse_square)
            j += 1

    def pi(self) -> Enclosure:
        low, high = _pi(self.precision + 5)
        return self.down.plus(low), self.up.plus(high)

    # -- the standard normal distribution ----------------------------------------------------

    def log_sqrt_two_pi(self) -> Enclosure:
        """ln √(2π)."""
        two_pi = self.scale(self.pi(), Decimal(2))
        half = self.ln(two_pi)
        return self.down.multiply(half[0], Decimal("0.5")), self.up.multiply(
            half[1], Decimal("0.5")
        )

    def normal_cdf(self, x: Enclosure) -> Enclosure:
        """Φ(x) (module docstring). Φ increases, so an enclosure that crosses 0 or the switch
        between the two expansions is the pair Φ(lo), Φ(hi), each enclosed on its own."""
        low, high = x
        same_side = (low >= 0) == (high >= 0)
        same_rule = (abs(low) < self._series_limit()) == (abs(high) < self._series_limit())
        if same_side and same_rule:
            return self._cdf(x)
        return self._cdf(self.point(low))[0], self._cdf(self.point(high))[1]

    def _series_limit(self) -> Decimal:
        """Below it the series is summed (with 0.22·t² more digits: Φ(−t) cancels out of
        ½ − φ(t)S(t)); above it the continued fraction, whose length grows as (precision/t)²."""
        return Decimal(max(4, int(math.isqrt(self.precision) * 1.2)))

    def _density(self, t: Enclosure) -> Enclosure:
        """φ(t) = e^{−t²/2}/√(2π)."""
        half = self.scale(self.mul(t, t), Decimal("0.5"))
        return self.exp(self.sub(self.neg(half), self.log_sqrt_two_pi()))

    def _cdf(self, x: Enclosure) -> Enclosure:
        negative = x[1] < 0
        t = self.neg(x) if negative else x  # |x|, an enclosure of non-negative numbers
        if t[1] < self._series_limit():
            extra = int(Decimal("0.22") * t[1] * t[1]) + 4
            wide = _arithmetic(self.precision + extra)
            part = wide.mul(wide._density(t), wide._series(t))  # φ(t)·S(t) ∈ [0, ½)
            half = wide.point(Decimal("0.5"))
            found = wide.sub(half, part) if negative else wide.add(half, part)
            return self.down.plus(found[0]), self.up.plus(found[1])
        tail = self.mul(self._density(t), self._mills(t))  # Φ(−t)
        return tail if negative else self.sub(self.point(Decimal(1)), tail)

    def _series(self, t: Enclosure) -> Enclosure:
        """S(t) = Σ_{n≥0} t^{2n+1}/(1·3···(2n+1)) for t ≥ 0, with its remainder."""
        if t[1] == 0:
            return self.point(Decimal(0))
        square = self.mul(t, t)
        term = total = t
        n = 0
        tiny = Decimal(10) ** -(self.precision + 2)
        while True:
            ratio = self.div(square, self.point(Decimal(2 * n + 3)))  # term_{n+1}/term_n
            term = self.mul(term, ratio)
            if ratio[1] <= Decimal("0.5") and term[1] <= tiny * total[0]:
                # the rest after term n is at most 2·term_{n+1} (ratios ≤ ½ and falling)
                return total[0], self.up.add(total[1], self.up.multiply(term[1], Decimal(2)))
            total = self.add(total, term)
            n += 1

    def _mills(self, t: Enclosure) -> Enclosure:
        """R(t) for t ≥ 4 (an enclosure) between two consecutive approximants of Laplace's fraction."""
        depth = 8 + int((self.precision * 2.31 / (2 * float(t[0]))) ** 2)
        while True:
            first, second = self._approximant(t, depth), self._approximant(t, depth + 1)
            low, high = min(first[0], second[0]), max(first[1], second[1])
            truncation = abs(self.up.subtract(first[0], second[0]))  # not the rounding width
            if truncation <= Decimal(10) ** -(self.precision - 6) * low:
                return low, high
            depth += depth // 2

    def _approximant(self, t: Enclosure, depth: int) -> Enclosure:
        """1/(t + 1/(t + 2/(t + ··· + depth/t))), evaluated from the inside out."""
        tail = t
        for n in range(depth, 0, -1):
            tail = self.add(t, self.div(self.point(Decimal(n)), tail))
        return self.div(self.point(Decimal(1)), tail)


@cache
def _bernoulli(n: int) -> Fraction:
    """The Bernoulli number B_n (B_1 = +½), by the Akiyama–Tanigawa algorithm (Kaneko 2000,
    "The Akiyama–Tanigawa algorithm for Bernoulli numbers", J. Integer Sequences 3)."""
    row = [Fraction(0)] * (n + 1)
    for m in range(n + 1):
        row[m] = Fraction(1, m + 1)
        for j in range(m, 0, -1):
            row[j - 1] = j * (row[j - 1] - row[j])
    return row[0]


@cache
def _arithmetic(precision: int) -> Arithmetic:
    return Arithmetic(precision)
