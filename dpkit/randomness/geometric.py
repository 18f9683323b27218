"""Exact geometric and discrete Laplace samplers with a fixed amount of work per draw.

**Geometric.** G with P[G = g] = (1 − e^(−x))·e^(−x·g), g ≥ 0, for a rational rate x > 0.
Write G in mixed radix: G = D₀ + 2^(b₀)·D₁ + … + 2^(b₀+…+b_(L−2))·D_(L−1). The pmf factorises,
e^(−x·g) = ∏_i e^(−x·2^(s_i)·D_i) (s_i the shift of digit i), and the digits range over a
product set (every digit but the last over [0, 2^(b_i)), the last over ℕ), so **the digits are
independent**: D_i (i < L − 1) has the truncated law P ∝ e^(−x·2^(s_i)·d) on [0, 2^(b_i)) and
the top digit the geometric law of rate x·2^(s_(L−1)). This is the digit decomposition of
prototype B in the secure-sampling notes (there with 1-bit digits: the binary digits of a
geometric variable are independent Bernoullis), with digits of up to 14 bits so that a
scale of 10⁹ takes three draws instead of 72. Each digit is one draw from an exact alias table
(:mod:`dpkit.randomness._alias`): one 64-bit word, a table lookup and a comparison, exactly
the digit's law. The top digit's table ends in a tail cell for "≥ 2^(b) − 1", whose mass is
at most 2⁻⁶⁴; a draw there continues with a fresh top digit (memoryless). When the rate
itself is ≥ 64·ln 2 (P[G ≥ 1] ≤ 2⁻⁶⁴), G counts the successes of exact Bernoulli(e^(−x))
draws before the first failure instead.

**Discrete Laplace** (P[Z = z] = (1 − q)/(1 + q)·q^|z|, q = e^(−x); Canonne, Kamath & Steinke
2020, Definition 4). Z = S·N·(1 + G), with S a uniform sign, N ~ Bernoulli(2q/(1 + q)) (Z ≠ 0)
and G geometric of rate x, all independent: P[Z = 0] = 1 − 2q/(1 + q) = (1 − q)/(1 + q), and for
m ≥ 1, P[Z = ±m] = ½·2q/(1 + q)·(1 − q)q^(m−1) = (1 − q)q^m/(1 + q). N is an exact comparison
of a uniform with the digits of 2q/(1 + q) (:func:`dpkit.randomness._exact.bernoulli_real`).

**Fixed work.** Every draw reads the same number of words and runs the same array operations
whatever value it produces. The only exceptions are events of probability at most 2⁻⁴⁸ per
draw: a 64-bit word equal to a threshold (the comparison continues with more words) and a top
digit in the tail cell. So the run time does not reveal the noise, closing the timing channel
that Jin et al. 2022 ("Are We There Yet? Timing and Floating-Point Attacks on Differential
Privacy Systems", IEEE S&P) exploit in rejection samplers, whose number of rounds grows with
|Z| (``benchmarks/bench_secure.py`` measures it). This is a property of the numpy-level
algorithm, not a hardened constant-time implementation: numpy itself is not constant-time at
the instruction level.

Values are int64: a geometric draw beyond 2⁶² (probability e^(−x·2⁶²), below e^(−2⁴⁰) for every
rate this module accepts) raises :class:`OverflowError` rather than wrap.
"""

from __future__ import annotations

import functools
from fractions import Fraction

import attrs
import numpy as np
from numpy.typing import NDArray

from dpkit.randomness._alias import TAIL_NATS, AliasTable, alias_table, cutoff_bits
from dpkit.randomness._exact import bernoulli_real, exp_neg, laplace_nonzero
from dpkit.randomness._words import WordReader

__all__ = [
    "GeometricPlan",
    "discrete_laplace_digits",
    "geometric_digits",
    "geometric_plan",
]

#: Largest digit below the top one, and largest top digit table (2^12 cells = 32 KiB).
LOW_BITS = 14
TOP_BITS = 12
#: Samples per pass over the arrays: the temporaries stay in the CPU cache.
CHUNK = 1 << 15
_INT62 = 1 << 62


@attrs.frozen
class GeometricPlan:
    """How :func:`geometric_digits` draws a geometric variable of rate ``rate``.

    ``tables[i]`` is digit i's alias table (lowest digit first; the last one has the tail),
    ``shifts[i]`` its bit offset. No tables: the rate is so large that G ≥ 1 has probability
    at most 2⁻⁶⁴, and G is drawn as a run of Bernoulli(e^(−rate)) successes.
    """

    rate: Fraction
    tables: tuple[AliasTable, ...]
    shifts: tuple[int, ...]

    @property
    def words_per_draw(self) -> int:
        """Words one geometric draw reads (ties and tails aside)."""
        return max(1, len(self.tables))


@functools.lru_cache(maxsize=128)
def geometric_plan(rate: Fraction) -> GeometricPlan:
    """The digit layout for rate x: the fewest digits, a top table of at most 2^12 cells."""
    if rate >= Fraction(TAIL_NATS):
        return GeometricPlan(rate, (), ())
    top = cutoff_bits(rate, TOP_BITS)
    if top is not None:
        return GeometricPlan(rate, (alias_table(rate, top, False),), (0,))
    low_total = 1
    while cutoff_bits(rate * (1 << low_total), TOP_BITS) is None:
        low_total += 1
    count = -(-low_total // LOW_BITS)
    widths = [LOW_BITS] * (count - 1) + [low_total - LOW_BITS * (count - 1)]
    tables: list[AliasTable] = []
    shifts: list[int] = []
    shift = 0
    for width in widths:
        tables.append(alias_table(rate * (1 << shift), width, True))
        shifts.append(shift)
        shift += width
    top_rate = rate * (1 << shift)
    top_bits = cutoff_bits(top_rate, TOP_BITS)
    assert top_bits is not None
    tables.append(alias_table(top_rate, top_bits, False))
    shifts.append(shift)
    return GeometricPlan(rate, tuple(tables), tuple(shifts))


def _bernoulli_run(rate: Fraction, words: WordReader, n: int) -> NDArray[np.int64]:
    """G = the number of Bernoulli(e^(−rate)) successes before the first failure."""
    p = exp_neg(rate)
    out = np.zeros(n, dtype=np.int64)
    alive = np.arange(n)
    while alive.size:
        alive = alive[bernoulli_real(p, words, alive.size)]
        out[alive] += 1
    return out


def _geometric_chunk(plan: GeometricPlan, words: WordReader, n: int) -> NDArray[np.int64]:
    if not plan.tables:
        return _bernoulli_run(plan.rate, words, n)
    out = plan.tables[0].sample(words, n)
    for table, shift in zip(plan.tables[1:], plan.shifts[1:], strict=True):
        digit = table.sample(words, n)
        if not table.truncated and n and int(digit.max()) >= _INT62 >> shift:
            msg = "a geometric draw does not fit in int64 (probability below e^(-2^40))"
            raise OverflowError(msg)
        digit <<= shift
        out |= digit
    return out


def geometric_digits(rate: Fraction, words: WordReader, n: int) -> NDArray[np.int64]:
    """n iid geometric draws, P[G = g] = (1 − e^(−rate))·e^(−rate·g), exactly (int64)."""
    plan = geometric_plan(rate)
    out = np.empty(n, dtype=np.int64)
    for start in range(0, n, CHUNK):
        stop = min(n, start + CHUNK)
        out[start:stop] = _geometric_chunk(plan, words, stop - start)
    return out


def discrete_laplace_digits(rate: Fraction, words: WordReader, n: int) -> NDArray[np.int64]:
    """n iid discrete Laplace draws, P[Z = z] ∝ e^(−rate·|z|), exactly, with fixed work (int64).

    Z = S·N·(1 + G) (see the module docstring): one word gives the sign S (its top bit) and,
    through its other 63 bits, N ~ Bernoulli(2q/(1 + q)); G takes its digits' words.
    """
    plan = geometric_plan(rate)
    nonzero = laplace_nonzero(rate)
    threshold = nonzero.floor_scaled(63)
    t63 = np.uint64(threshold)
    low_mask = np.uint64((1 << 63) - 1)
    out = np.empty(n, dtype=np.int64)
    for start in range(0, n, CHUNK):
        stop = min(n, start + CHUNK)
        magnitude = _geometric_chunk(plan, words, stop - start)
        if magnitude.size and int(magnitude.max()) >= _INT62:
            msg = "a discrete Laplace draw does not fit in int64 (probability below e^(-2^40))"
            raise OverflowError(msg)
        magnitude += 1
        w = words(stop - start)
        low = w & low_mask
        keep = low < t63
        for i in np.flatnonzero(low == t63):
            keep[i] = nonzero.less_than(63, words)
        magnitude *= keep
        sign = w.view(np.int64) >> 63  # −1 where the top bit is set, else 0
        magnitude ^= sign
        np.subtract(magnitude, sign, out=out[start:stop])  # (m ^ s) − s = −m where s = −1
    return out
