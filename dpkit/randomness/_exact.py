"""Exact comparisons of uniform words with real numbers given by their binary digits.

A uniform U ∈ [0, 1) is the binary fraction of an endless stream of uniform words. Comparing
U with a real p ∈ [0, 1] needs only as many words as it takes for a word to differ from the
corresponding 64 binary digits of p: the first word decides unless it equals ⌊2⁶⁴·p⌋
(probability 2⁻⁶⁴), the second unless it equals the next 64 digits, and so on. So
P[U < p] = p exactly, with about one word per comparison, provided the digits of p can be
computed exactly — which :class:`ExactReal` does for numbers that are evaluated to any
precision with a known error bound (the digits of an irrational p are decided once the
error interval no longer straddles a multiple of 2^−bits; the precision doubles until then).
"""

from __future__ import annotations

import decimal
import functools
import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

from dpkit.randomness._words import WordReader

__all__ = ["ExactReal", "bernoulli_bracketed_real", "bernoulli_real", "exp_neg", "laplace_nonzero"]

Evaluator = Callable[[decimal.Context], decimal.Decimal]


class ExactReal:
    """A real number p ∈ [0, 1] with exact binary digits, from a high-precision evaluator.

    ``evaluate(context)`` returns p computed in ``context`` with a relative error of at most
    ``slack`` units of ``context``'s precision (10^(1 − prec)·slack, relative). p must not be a
    dyadic rational other than 0 or 1 (otherwise a digit on the boundary could never be decided);
    the numbers used here are transcendental. ``upper`` is a rational upper bound on p used to
    answer "these digits are all zero" without evaluating (tiny p, e.g. e^(−10⁹)).
    """

    __slots__ = ("_cache", "_evaluate", "slack", "upper")

    def __init__(self, evaluate: Evaluator, *, slack: int = 64, upper: Fraction | None = None):
        self._evaluate = evaluate
        self.slack = slack
        self.upper = upper
        self._cache: dict[int, int] = {}

    def floor_scaled(self, bits: int) -> int:
        """⌊2^bits·p⌋, exactly."""
        if bits in self._cache:
            return self._cache[bits]
        if self.upper is not None and self.upper * (1 << bits) < 1:
            return 0
        digits = int(bits * 0.30103) + 30
        while True:
            context = decimal.Context(prec=digits, Emin=-999_999_999, Emax=999_999_999)
            value = self._evaluate(context)
            scaled = context.multiply(value, decimal.Decimal(1 << bits))
            # Relative error ≤ (slack + 1) units of 10^(1 − P); doubled for safety. The default
            # (28-digit) context must not be used here: it would round the bounds.
            error = context.multiply(
                abs(scaled), decimal.Decimal(2 * (self.slack + 1)).scaleb(1 - digits)
            )
            low = context.subtract(scaled, error).to_integral_value(decimal.ROUND_FLOOR)
            high = context.add(scaled, error).to_integral_value(decimal.ROUND_FLOOR)
            if low == high:
                result = int(low)
                self._cache[bits] = result
                return result
            digits *= 2

    def digits(self, start: int, width: int = 64) -> int:
        """Binary digits [start, start + width) of p (digit 1 is worth 1/2)."""
        return self.floor_scaled(start + width) & ((1 << width) - 1)

    def less_than(self, known: int, words: WordReader, *, word_bits: int = 64) -> bool:
        """U < p, given that the first ``known`` binary digits of U equal those of p (a tie);
        U's next digits come from fresh words of ``word_bits`` bits (64 except in tests)."""
        start = known
        while True:
            word = int(words(1)[0])
            digit = self.digits(start, word_bits)
            if word != digit:
                return word < digit
            start += word_bits


def bernoulli_real(
    p: ExactReal, words: WordReader, n: int, *, word_bits: int = 64
) -> NDArray[np.bool_]:
    """n independent draws of [U < p]: exactly Bernoulli(p), one word each (ties: more)."""
    threshold = p.floor_scaled(word_bits)
    w = words(n)
    if threshold >= 1 << word_bits:  # p = 1
        return np.ones(n, dtype=np.bool_)
    t = np.uint64(threshold)
    out: NDArray[np.bool_] = w < t
    for i in np.flatnonzero(w == t):
        out[i] = p.less_than(word_bits, words, word_bits=word_bits)
    return out


def _exp_neg_decimal(rate: Fraction) -> Evaluator:
    def evaluate(context: decimal.Context) -> decimal.Decimal:
        x = context.divide(decimal.Decimal(rate.numerator), decimal.Decimal(rate.denominator))
        return context.exp(context.minus(x))

    return evaluate


def _slack(rate: Fraction) -> int:
    # exp(−x(1 + δ)) = e^(−x)·e^(−xδ): the rounding of x = n/d costs a factor ~x in the error.
    return 16 + 4 * math.ceil(rate)


@functools.lru_cache(maxsize=256)
def exp_neg(rate: Fraction) -> ExactReal:
    """e^(−rate) for a rational rate > 0 (transcendental: Lindemann 1882)."""
    upper = None
    if rate > 64:  # e^(−rate) < 2^(−⌊rate/ln 2⌋) ≤ 2^(−⌊1.44·rate⌋)
        upper = Fraction(1, 1 << math.floor(rate * Fraction(144, 100)))
    return ExactReal(_exp_neg_decimal(rate), slack=_slack(rate), upper=upper)


@functools.lru_cache(maxsize=256)
def laplace_nonzero(rate: Fraction) -> ExactReal:
    """2q/(1 + q), q = e^(−rate): the probability that a discrete Laplace draw is not 0.

    (P[Z = 0] = (1 − q)/(1 + q); Canonne, Kamath & Steinke 2020, Definition 4.) Transcendental,
    as q is (2q/(1 + q) = r would make q = r/(2 − r) rational).
    """
    exp = _exp_neg_decimal(rate)

    def evaluate(context: decimal.Context) -> decimal.Decimal:
        q = exp(context)
        return context.divide(context.multiply(2, q), context.add(1, q))

    upper = None
    if rate > 64:
        upper = 2 * Fraction(1, 1 << math.floor(rate * Fraction(144, 100)))
    return ExactReal(evaluate, slack=_slack(rate) + 8, upper=upper)


def bernoulli_bracketed_real(
    lo: NDArray[np.float64],
    hi: NDArray[np.float64],
    exact: Callable[[NDArray[np.intp]], list[ExactReal]],
    words: WordReader,
) -> NDArray[np.bool_]:
    """[U_i < p_i] for probabilities known to lie in floats lo_i ≤ p_i ≤ hi_i (⊂ [0, 1]).

    With w the word giving U's first 64 digits, U ∈ [w·2⁻⁶⁴, (w + 1)·2⁻⁶⁴): w + 1 ≤ lo·2⁶⁴
    decides U < p, w ≥ hi·2⁶⁴ decides U ≥ p (both exact integer comparisons with the floors and
    ceilings of the floats scaled by 2⁶⁴); the others (about 2·2⁻⁵⁰ of the draws when the
    brackets are tight) compare w with the exact digits of p (``exact``).
    """
    n = lo.size
    w = words(n)
    # Floats near 2⁶⁴ are multiples of 2¹¹; a smaller P_lo only leaves more draws undecided.
    below = np.minimum(np.floor(lo * 2.0**64), 2.0**64 - 2048.0).astype(np.uint64)
    result: NDArray[np.bool_] = w < below
    capped = hi < 1.0
    above = np.ceil(np.where(capped, hi, 0.0) * 2.0**64).astype(np.uint64)
    decided = result | (capped & (w >= above))
    undecided = np.flatnonzero(~decided)
    if undecided.size:
        for i, p in zip(undecided.tolist(), exact(undecided), strict=True):
            threshold = p.floor_scaled(64)
            word = int(w[i])
            result[i] = word < threshold or (word == threshold and p.less_than(64, words))
    return result
