"""Exact coins Bernoulli(e^(−γ)·s) on an accelerator's arrays, γ = λ(u* − u) for float utilities.

The secure exponential mechanism and permute-and-flip (:mod:`dpkit.tensors.selection`) flip, for
each candidate, a coin of probability p = e^(−γ)·s, with γ = λ(u* − u) ≥ 0 the exact rational
gap of a double utility u below its row's largest u* (λ = ε/(2Δu) or ε/Δu at ε's smaller
reading and Δu's larger, as on the host: ``dpkit_central._selection.exact_rate``) and s = 1, or
s = 2^b/V for an integer proposal weight V ≥ e^(−γ)·2^b (so that p ≤ 1). A coin is the event
U < p for a uniform U = 0.w₁w₂… whose binary digits are the 64-bit words w₁, w₂, … of the
call's stream; then P[heads] = p exactly (the host's
:mod:`dpkit.randomness._exact`), whatever way the comparison is decided:

* **A float bracket** lo ≤ p ≤ hi is formed on the device from the utilities with float64
  additions and multiplications only (:func:`brackets`, each error bounded below), and the first
  word decides: w₁ < ⌊lo·2⁶⁴⌋ means U < (w₁ + 1)·2⁻⁶⁴ ≤ lo ≤ p (heads), w₁ ≥ ⌈hi·2⁶⁴⌉ means
  U ≥ w₁·2⁻⁶⁴ ≥ hi ≥ p (tails): exact integer comparisons of the word's halves
  (:func:`~dpkit.tensors.exact.compare_64`; ⌊x·2⁶⁴⌋ and ⌈x·2⁶⁴⌉ are formed exactly from
  the double x in two 32-bit halves, every step a power-of-two scaling, a floor or a ceiling,
  or a subtraction of a double's integer part).
* **The undecided coins** (w₁ between the two, probability hi − lo + 2⁻⁶⁴, below about
  2⁻⁴²·p + 2⁻⁶³ with the margins below) are settled on the host, as the host's
  :func:`~dpkit.randomness._exact.bernoulli_bracketed_real` settles its own: their utilities
  and first words are copied there, γ and p are formed exactly (γ a Fraction of the doubles, p's
  binary digits from :class:`~dpkit.randomness._exact.ExactReal`), and U < p is decided by w₁
  against p's first 64 digits, then, on equality, by fresh words of the stream against the next
  64 digits each (:meth:`~dpkit.randomness._exact.ExactReal.less_than`). This is the same event
  U < p: the bracket only chose which coins need p's digits, and U's later digits are fresh
  words, never read before. p is transcendental for γ > 0 (Lindemann 1882), so its digits are
  decided; for γ = 0, p = 1.

The host sees the undecided elements' utilities only (the host path reads them all), and how
many coins are undecided depends on the utilities and the words; nothing is raised after the
values are read.

**The bracket** (:func:`brackets`). Each source of error is bounded, and the final margin
(relative 2⁻⁴⁴, :data:`MARGIN`) exceeds their sum (below 2⁻⁴⁶):

1. γ's bracket is the host's (``dpkit_central._selection.gap_brackets``): γ̃ = fl(fl(u* − u)·λ̃),
   λ̃ the double nearest λ, is within a relative 3·2⁻⁵³ of γ whenever it is a normal double
   (each of the three roundings is relative 2⁻⁵³, IEEE 754 §4.3; a subnormal difference is
   exact), so [γ̃(1 − 2⁻⁵⁰), γ̃(1 + 2⁻⁵⁰)] ∋ γ; γ̃ ≥ 10³⁰⁰ (or an overflow) gives [10²⁹⁹, ∞], γ̃
   below 10⁻²⁹⁰ gives [0, 10⁻²⁹⁰]. λ̃ not a normal double (beyond the parameters' ranges): [0, ∞].
2. With k = min(⌊64·γ_lo⌋, 64·512): e^(−γ) = e^(−k/64)·e^(−(γ − k/64)), and f_a = γ_lo − k/64 is
   exact (64·γ_lo is exact; for k ≥ 1, k/64 ≤ γ_lo < 2k/64, Sterbenz's lemma), in [0, 1/64);
   f_b = fl(γ_hi − k/64) is below 1/32 unless γ_lo ≥ 512 or γ_hi = ∞, and one rounding below
   γ_hi − k/64 (costing a relative u·f_b < 2⁻⁵⁸ in e^(−f_b)). Then
   e^(−k/64)·e^(−f_b) ≤ e^(−γ) ≤ e^(−k/64)·e^(−f_a).
3. e^(−k/64) is bracketed by the table of :func:`dpkit.randomness.exp_table.exp_table` (the
   host's bucket weights: 40-digit powers of e^(−1/64), two doubles outward), copied to the
   device.
4. e^(−f) for 0 ≤ f ≤ 1/32 is the degree-8 Taylor polynomial T(f) = Σ (−f)^j/j!, in Horner's
   form: the alternating series' truncation error is below f⁹/9! < 2⁻⁶³ (Leibniz), and the
   rounding of the coefficients and of Horner's 16 operations is below (16 + 1)·u·Σ|c_j|f^j
   (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., §5.1, (5.3), γ₁₆ ≤ 16.01u)
   < 18·2⁻⁵³·e^(1/32) < 2⁻⁴⁸·⁷ absolute, relative 2⁻⁴⁸·⁶ as T(f) > 0.96 (a fused multiply-add
   only lowers the bound). The device's ``exp`` is not used.
5. The products e^(−k/64)·T(f)·s, the float s = 2^b/V (V converted to a double, then a
   division) and the widening by 1 ± 2⁻⁴⁴ add five roundings of 2⁻⁵³ each (2⁻⁵⁰·⁷ in all).

Where f_b > 1/32 the lower bound is 0, where f_a > 1/32 (γ ≥ 512) the upper one is e^(−512)'s
table value; hi is capped at 1; u = u* gives p = 1 exactly (lo = hi = 1) and u = −inf p = 0.
"""

from __future__ import annotations

import decimal
import math
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpkit.randomness._exact import ExactReal
from dpkit.randomness.exp_table import EXP_TABLE_CAP, exp_table
from dpkit.tensors.exact import WordPairs, _count, _spread, compare_64

__all__ = ["MARGIN", "brackets", "exp_coins", "rate_double"]

#: e^(−k/64) is tabulated for k = 0 … 64·512 (the host's bucket range).
CAP = EXP_TABLE_CAP
#: The final relative widening of every bracket: above the sum of the errors (module docstring).
MARGIN = 2.0**-44
_GAP_MARGIN = 2.0**-50
_HUGE = 1e300
_TINY = 1e-290
#: The Taylor coefficients (−1)^j/j!, j = 0 … 8, each the double nearest it.
_TAYLOR = tuple(float(Fraction((-1) ** j, math.factorial(j))) for j in range(9))
_HALF = 2.0**32
#: An upper bound 2^(−n) of a tiny p is used with n at most this (deeper digits are evaluated).
_UPPER_BITS = 1 << 16


def rate_double(rate: Fraction) -> float | None:
    """λ's nearest double when it is a normal one well inside the range (as the host's
    ``gap_brackets`` takes it), else None."""
    try:
        scale = float(rate)
    except OverflowError:
        return None
    return scale if 1e-300 < scale < _HUGE else None


def _device(array: Any) -> Any:
    import array_api_compat

    return array_api_compat.device(array)


def _taylor(xp: Any, f: Any) -> Any:
    """T(f) = Σ_{j ≤ 8} (−f)^j/j! by Horner's rule (+ and × only)."""
    p = xp.full_like(f, _TAYLOR[8])
    for c in reversed(_TAYLOR[:8]):
        p = p * f + c
    return p


def brackets(
    xp: Any, u: Any, top: Any, rate: Fraction, weights: Any = None, bits: int = 0
) -> tuple[Any, Any]:
    """(lo, hi), float64 arrays with lo ≤ p ≤ hi for p = e^(−λ(u* − u))·s elementwise
    (``top`` = u*, same shape as ``u``; s = 1, or 2^``bits``/``weights`` (int64 V, with
    V = 2^bits where u = u*)); the bounds of the module docstring."""
    device = _device(u)
    upper_table, lower_table = (xp.asarray(t, device=device) for t in exp_table())
    finite = u > -xp.inf
    same = u == top
    scale = rate_double(rate)
    if scale is None:
        gap_lo = xp.zeros_like(u)
        gap_hi = xp.full_like(u, xp.inf)
    else:
        with np.errstate(over="ignore", invalid="ignore"):
            approx = (top - u) * scale
        gap_lo = approx * (1.0 - _GAP_MARGIN)
        gap_hi = approx * (1.0 + _GAP_MARGIN)
        wide = ~(approx < _HUGE)
        gap_lo = xp.where(wide, _HUGE / 10, gap_lo)
        gap_hi = xp.where(wide, xp.inf, gap_hi)
        tiny = approx < _TINY
        gap_lo = xp.where(tiny, 0.0, gap_lo)
        gap_hi = xp.where(tiny, _TINY, gap_hi)
    bucket = xp.minimum(xp.floor(gap_lo * 64.0), float(CAP))
    start = bucket / 64.0
    f_a = gap_lo - start
    f_b = gap_hi - start
    small_a = f_a <= 1 / 32
    small_b = f_b <= 1 / 32
    e_a = xp.where(small_a, _taylor(xp, xp.where(small_a, f_a, 0.0)), 1.0)
    e_b = xp.where(small_b, _taylor(xp, xp.where(small_b, f_b, 0.0)), 0.0)
    k = xp.astype(bucket, xp.int64)
    p_hi = xp.take(upper_table, k, axis=0) * e_a
    p_lo = xp.take(lower_table, k, axis=0) * e_b
    if weights is not None:
        s = float(1 << bits) / xp.astype(xp.where(finite, weights, 1), xp.float64)
        p_hi = p_hi * s
        p_lo = p_lo * s
    lo = p_lo * (1.0 - MARGIN)
    hi = xp.minimum(p_hi * (1.0 + MARGIN), 1.0)
    lo = xp.where(same, 1.0, xp.where(finite, lo, 0.0))
    hi = xp.where(same, 1.0, xp.where(finite, hi, 0.0))
    return lo, hi


def _halves(xp: Any, x: Any, *, ceiling: bool) -> tuple[Any, Any]:
    """(high, low) int64 with high·2³² + low = ⌊x·2⁶⁴⌋ (or ⌈x·2⁶⁴⌉) for doubles x ∈ [0, 1],
    exactly: x·2³² is exact, its integer part and the rest are exact, the rest times 2³² too."""
    a = x * _HALF
    high = xp.floor(a)
    rest = (a - high) * _HALF
    low = xp.ceil(rest) if ceiling else xp.floor(rest)
    return xp.astype(high, xp.int64), xp.astype(low, xp.int64)


def exp_coins(
    pairs: WordPairs, u: Any, top: Any, rate: Fraction, weights: Any = None, bits: int = 0
) -> Any:
    """Independent exact coins [U < p], p = e^(−λ(u* − u))·s, one per element of the flat
    float64 arrays ``u`` and ``top`` (u*; s as in :func:`brackets`): a bool array. One word
    each, decided against the float bracket; the undecided settled exactly on the host
    (module docstring)."""
    xp = pairs.xp
    lo, hi = brackets(xp, u, top, rate, weights, bits)
    high, low = pairs.take(int(u.shape[0]))
    heads, _ = compare_64(xp, high, low, *_halves(xp, lo, ceiling=False))
    below_hi, _ = compare_64(xp, high, low, *_halves(xp, hi, ceiling=True))
    undecided = ~heads & below_hi
    if not _count(xp, undecided):
        return heads
    settled = _settle(
        pairs,
        u[undecided],
        top[undecided],
        None if weights is None else weights[undecided],
        high[undecided],
        low[undecided],
        rate,
        bits,
    )
    return _spread(xp, undecided, settled, heads)


def exact_probability(gamma: Fraction, scale: Fraction) -> ExactReal:
    """p = e^(−γ)·``scale`` (≤ 1) as an :class:`~dpkit.randomness._exact.ExactReal`: decimal's
    correctly rounded divide, exp and multiply (relative error about γ units of the precision,
    hence the slack), with the upper bound p < 2^(−⌊1.44γ⌋)·scale (1/ln 2 > 1.44) for γ > 64."""
    numerator, denominator = decimal.Decimal(gamma.numerator), decimal.Decimal(gamma.denominator)

    def evaluate(context: decimal.Context) -> decimal.Decimal:
        e = context.exp(context.minus(context.divide(numerator, denominator)))
        product = context.multiply(e, decimal.Decimal(scale.numerator))
        return context.divide(product, decimal.Decimal(scale.denominator))

    upper = None
    if gamma > 64:
        upper = scale / (1 << min(math.floor(gamma * Fraction(144, 100)), _UPPER_BITS))
    return ExactReal(evaluate, slack=24 + 4 * math.ceil(gamma), upper=upper)


def _settle(
    pairs: WordPairs,
    u: Any,
    top: Any,
    weights: Any,
    high: Any,
    low: Any,
    rate: Fraction,
    bits: int,
) -> Any:
    """[U < p] for the undecided coins, on the host: U's first word (high, low) against p's
    first 64 binary digits, then fresh words of the stream against the next ones (ties only)."""
    library = pairs.words.library
    host = library.small_to_host

    def joined(high: Any, low: Any) -> NDArray[np.uint64]:
        words: NDArray[np.uint64] = (host(high).astype(np.uint64) << np.uint64(32)) | host(
            low
        ).astype(np.uint64)
        return words

    def words(count: int) -> NDArray[np.uint64]:
        return joined(*pairs.take(count))

    first = joined(high, low)
    utilities, tops = host(u).tolist(), host(top).tolist()
    scales = [Fraction(1)] * len(utilities)
    if weights is not None:
        scales = [Fraction(1 << bits, int(v)) for v in host(weights).tolist()]
    heads = []
    for utility, best, scale, word in zip(utilities, tops, scales, first.tolist(), strict=True):
        gamma = rate * (Fraction(best) - Fraction(utility))
        p = exact_probability(gamma, scale)
        threshold = p.floor_scaled(64)
        heads.append(word < threshold or (word == threshold and p.less_than(64, words)))
    return pairs.xp.asarray(np.array(heads, dtype=np.bool_), device=pairs.device)
