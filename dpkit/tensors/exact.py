"""The host's exact discrete samplers on an accelerator's arrays: the same law, word for word.

:func:`discrete_gaussian` is CKS20's rejection from :func:`discrete_laplace`, its acceptance
test decided as the host decides it (:func:`_exceeds`; see there).

:func:`discrete_laplace` (and :func:`geometric`) run the algorithm of
:mod:`dpkit.randomness.geometric` with array operations on the device: the discrete Laplace
Z = S·N·(1 + G) (Canonne, Kamath & Steinke 2020, Definition 4; S a uniform sign, N ~
Bernoulli(2q/(1 + q)), q = e^(−rate)), G geometric drawn from its independent base-2^b digits,
each digit one 64-bit word through an exact alias table (:mod:`dpkit.randomness._alias`: the
word's low b bits pick a cell i, its high k = 64 − b bits u are compared with T_i = ⌊2^k·θ_i⌋;
u < T_i keeps i, u > T_i takes the alias a_i).

**The same law, exactly.** The tables are the host's own (public: they depend on the rate only),
built on the host once and copied to the device. What the host decides with a Python loop over
the rare elements, the device decides with a *masked loop*: a round draws fresh words for the
elements still undecided only, in index order, and compares them with the next 64 binary digits
of the real number concerned:

* an alias tie u = T_i (probability 2⁻ᵏ per draw): the digits of θ_i after the first k, for
  every cell at once (computed on the host only when some tie needs them);
* the top digit's tail cell ("≥ 2^b − 1", mass ≤ 2⁻⁶⁴): a fresh draw of the same digit law is
  added (the geometric law is memoryless);
* N's comparison of 63 bits with ⌊2⁶³·2q/(1 + q)⌋, tied with probability 2⁻⁶³;
* a rate ≥ 64·ln 2 (no tables): G counts Bernoulli(e^(−rate)) successes, a round per success.

The loops end when no element is undecided; the number of rounds depends on the random words
alone, never on the data, and no value is read back to the host (only the count of undecided
elements, itself a function of the words).

**Words.** The 64-bit words are w[2i]·2³² + w[2i + 1] for the call's 32-bit words w, read
in stream order (:class:`WordPairs`). For n ≤ 2¹⁵ values (one chunk of the host's sampler), the device
reads its words in the host's order: each digit table's n words (then its ties, then its
tail's words), lowest digit first, then the n words of the signs and N (then their ties). So
the host's :func:`~dpkit.randomness.geometric.discrete_laplace_digits` fed the same 64-bit
words returns the same values, bit for bit (the tests check it, ties and tails included).

**Arithmetic.** int64 only (u = w >> b < 2⁶³ as b ≥ 1; halves are compared as pairs), so
JAX needs x64 (the callers refuse it otherwise, before any word is drawn). A draw that would
overflow int64 (probability below e^(−2⁴⁰)) wraps instead of raising as on the host: a raise
would depend on the noise.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpkit.randomness._alias import AliasTable
from dpkit.randomness._exact import ExactReal, exp_neg, laplace_nonzero
from dpkit.randomness.geometric import geometric_plan
from dpkit.tensors.device_random import DeviceWords

__all__ = ["WordPairs", "compare_64", "discrete_gaussian", "discrete_laplace", "geometric"]

_TWO_32 = 1 << 32
_HALF_MASK = _TWO_32 - 1
#: Values per pass: bounds the device temporaries (a few int64 arrays of this length).
CHUNK = 1 << 24
#: 32-bit words read ahead at least, per keystream computation (256 ChaCha20 blocks).
REFILL = 1 << 12


class WordPairs:
    """A call's device words as 64-bit words: word i is (high, low) = (w[2i], w[2i + 1]) of the
    call's stream, two ``int64`` arrays of values in [0, 2³²).

    The stream is read ahead in pieces of at least :data:`REFILL` words, so that the masked
    rounds, which often need a handful of words, do not each start a keystream computation;
    the words are handed out in stream order all the same (``used`` counts the 64-bit words
    handed out).
    """

    def __init__(self, words: DeviceWords) -> None:
        self.words = words
        self.xp = words.library.xp
        self.device = words.library.device
        self.used = 0
        self._buffer = self.xp.zeros((0,), dtype=self.xp.int64, device=self.device)
        self._start = 0

    def take(self, count: int) -> tuple[Any, Any]:
        xp = self.xp
        need = 2 * count
        have = int(self._buffer.shape[0]) - self._start
        if have < need:
            fresh = xp.astype(self.words.take(max(need - have, REFILL)), xp.int64)
            self._buffer = xp.concat([self._buffer[self._start :], fresh])
            self._start = 0
        drawn = xp.reshape(self._buffer[self._start : self._start + need], (count, 2))
        self._start += need
        self.used += count
        return drawn[:, 0], drawn[:, 1]


def compare_64(
    xp: Any, high: Any, low: Any, threshold_high: Any, threshold_low: Any
) -> tuple[Any, Any]:
    """(word < T, word = T) for 64-bit words and thresholds given by their 32-bit halves
    (int64 arrays or ints in [0, 2³²), broadcasting): lexicographic on (high, low)."""
    same_high = high == threshold_high
    less = (high < threshold_high) | (same_high & (low < threshold_low))
    return less, same_high & (low == threshold_low)


def _spread(xp: Any, mask: Any, compact: Any, fill: Any) -> Any:
    """``compact``'s values, in order, where ``mask`` holds, ``fill`` elsewhere (the scatter
    of a masked round's results, with array-API operations only)."""
    if int(compact.shape[0]) == 0:
        return fill
    position = xp.clip(xp.cumulative_sum(xp.astype(mask, xp.int64)) - 1, min=0)
    return xp.where(mask, xp.take(compact, position, axis=0), fill)


def _count(xp: Any, mask: Any) -> int:
    """How many elements a mask flags (a function of the words only)."""
    return int(xp.sum(xp.astype(mask, xp.int64)))


def _false(xp: Any, like: Any) -> Any:
    import array_api_compat

    return xp.zeros(like.shape, dtype=xp.bool, device=array_api_compat.device(like))


def _real_ties(pairs: WordPairs, tie: Any, real: ExactReal, start: int, result: Any) -> Any:
    """``result`` with U < p decided where ``tie`` holds, U's first ``start`` binary digits
    being equal to p's: fresh words against p's next 64 digits, round by round (the host's
    :meth:`~dpkit.randomness._exact.ExactReal.less_than`)."""
    xp = pairs.xp
    while count := _count(xp, tie):
        high, low = pairs.take(count)
        digits = real.digits(start, 64)
        less, equal = compare_64(xp, high, low, digits >> 32, digits & _HALF_MASK)
        decided = _spread(xp, tie, ~equal, _false(xp, tie))
        result = xp.where(decided, _spread(xp, tie, less, _false(xp, tie)), result)
        tie = _spread(xp, tie, equal, _false(xp, tie))
        start += 64
    return result


class _HostAlias:
    """An alias table's public arrays on the host: thresholds T_i, aliases a_i, and the later
    64-bit digit groups of every θ_i (built the first time a tie needs them)."""

    def __init__(self, table: AliasTable) -> None:
        self.table = table
        packed = table.packed
        bits = np.uint64(table.bits)
        self.thresholds = (packed >> bits).astype(np.int64)  # < 2⁶³: k ≤ 63 bits
        self.aliases = (packed & np.uint64(table.size - 1)).astype(np.int64)
        self._digits: dict[int, tuple[NDArray[np.int64], NDArray[np.int64]]] = {}

    def digits(self, depth: int) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """(high, low) halves of binary digits [k + 64(depth − 1), k + 64·depth) of each θ_i
        (0 for the cells whose θ is 1: their ties keep the cell either way)."""
        if depth not in self._digits:
            table = self.table
            start = table.word_bits - table.bits + 64 * (depth - 1)
            values = [
                table.theta_digits(i, start, 64) if alias != i else 0
                for i, alias in enumerate(self.aliases.tolist())
            ]
            words = np.array(values, dtype=np.uint64)
            self._digits[depth] = (
                (words >> np.uint64(32)).astype(np.int64),
                (words & np.uint64(_HALF_MASK)).astype(np.int64),
            )
        return self._digits[depth]


@functools.lru_cache(maxsize=256)
def _host_alias(table: AliasTable) -> _HostAlias:
    return _HostAlias(table)


def _on_device(pairs: WordPairs, array: NDArray[np.int64]) -> Any:
    return pairs.xp.asarray(array, device=pairs.device)


def select(pairs: WordPairs, table: AliasTable, count: int) -> Any:
    """``count`` cells of ``table`` (tail cell not continued), from ``count`` fresh words: the
    host's :meth:`~dpkit.randomness._alias.AliasTable.select`, ties decided by masked rounds."""
    xp = pairs.xp
    host = _host_alias(table)
    bits = table.bits
    high, low = pairs.take(count)
    cell = low & (table.size - 1)
    u = (high << (32 - bits)) | (low >> bits)  # the word's top k = 64 − b bits, < 2⁶³
    threshold = xp.take(_on_device(pairs, host.thresholds), cell, axis=0)
    alias = xp.take(_on_device(pairs, host.aliases), cell, axis=0)
    chosen = xp.where(u < threshold, cell, alias)
    tie = (u == threshold) & (alias != cell)  # θ_i = 1 has a_i = i: the cell either way
    depth = 1
    while tied := _count(xp, tie):
        fresh_high, fresh_low = pairs.take(tied)
        digit_high, digit_low = (_on_device(pairs, half) for half in host.digits(depth))
        tied_cells = cell[tie]
        less, equal = compare_64(
            xp,
            fresh_high,
            fresh_low,
            xp.take(digit_high, tied_cells, axis=0),
            xp.take(digit_low, tied_cells, axis=0),
        )
        keep = _spread(xp, tie, less, _false(xp, tie))
        chosen = xp.where(keep, cell, chosen)
        tie = _spread(xp, tie, equal, _false(xp, tie))
        depth += 1
    return chosen


def digit(pairs: WordPairs, table: AliasTable, count: int) -> Any:
    """``count`` draws of a digit law, the tail cell continued with fresh draws (memoryless)."""
    xp = pairs.xp
    out = select(pairs, table, count)
    if table.truncated:
        return out
    last = table.size - 1
    tail = out == last
    while more := _count(xp, tail):
        fresh = select(pairs, table, more)
        out = out + _spread(xp, tail, fresh, xp.zeros_like(out))
        tail = _spread(xp, tail, fresh == last, _false(xp, tail))
    return out


def _bernoulli_real(pairs: WordPairs, p: ExactReal, count: int) -> Any:
    """``count`` draws of [U < p], one word each (ties: more words), as the host's
    :func:`~dpkit.randomness._exact.bernoulli_real`."""
    xp = pairs.xp
    threshold = p.floor_scaled(64)
    high, low = pairs.take(count)
    if threshold >= 1 << 64:  # p = 1
        return xp.ones(high.shape, dtype=xp.bool, device=pairs.device)
    less, tie = compare_64(xp, high, low, threshold >> 32, threshold & _HALF_MASK)
    return _real_ties(pairs, tie, p, 64, less)


def geometric(pairs: WordPairs, rate: Fraction, count: int) -> Any:
    """``count`` iid geometric draws, P[G = g] = (1 − e^(−rate))e^(−rate·g), exactly (int64):
    the digits of :func:`~dpkit.randomness.geometric.geometric_plan` (rate), lowest first."""
    xp = pairs.xp
    plan = geometric_plan(rate)
    if not plan.tables:  # rate ≥ 64·ln 2: a run of Bernoulli(e^(−rate)) successes
        p = exp_neg(rate)
        out = xp.zeros((count,), dtype=xp.int64, device=pairs.device)
        alive = xp.ones((count,), dtype=xp.bool, device=pairs.device)
        while living := _count(xp, alive):
            alive = _spread(xp, alive, _bernoulli_real(pairs, p, living), _false(xp, alive))
            out = out + xp.astype(alive, xp.int64)
        return out
    out = digit(pairs, plan.tables[0], count)
    for table, shift in zip(plan.tables[1:], plan.shifts[1:], strict=True):
        out = out | (digit(pairs, table, count) << shift)
    return out


def _laplace_chunk(pairs: WordPairs, rate: Fraction, count: int) -> Any:
    xp = pairs.xp
    nonzero = laplace_nonzero(rate)
    magnitude = geometric(pairs, rate, count) + 1
    high, low = pairs.take(count)
    threshold = nonzero.floor_scaled(63)
    less, tie = compare_64(xp, high & 0x7FFFFFFF, low, threshold >> 32, threshold & _HALF_MASK)
    keep = _real_ties(pairs, tie, nonzero, 63, less)
    z = xp.where(keep, magnitude, xp.zeros_like(magnitude))
    return xp.where((high >> 31) == 1, -z, z)  # the word's top bit is the sign


def discrete_laplace(pairs: WordPairs, rate: Fraction, count: int) -> Any:
    """``count`` iid draws of the discrete Laplace P[Z = z] ∝ e^(−rate·|z|) on the device
    (int64, flat): the host's :func:`~dpkit.randomness.geometric.discrete_laplace_digits`,
    with its word order for every pass of up to :data:`CHUNK` values."""
    xp = pairs.xp
    if count <= CHUNK:
        return _laplace_chunk(pairs, rate, count)
    parts = [
        _laplace_chunk(pairs, rate, min(CHUNK, count - start)) for start in range(0, count, CHUNK)
    ]
    return xp.concat(parts)


def _square(xp: Any, c: Any, r: int) -> tuple[Any, Any]:
    """(K, R) = (⌊c²/2^r⌋ saturated at 2⁶², c² mod 2^r) for int64 |c| < 2⁶², 1 ≤ r ≤ 62.

    c² < 2¹²⁴ is formed in four 32-bit limbs from the 32-bit halves of |c| (the products by
    :func:`~dpkit.tensors.hashing.multiply_wide`, every partial sum below 2³⁶), so no
    intermediate leaves int64. A K of 2⁶² or more is reported as 2⁶²: a geometric J reaches
    it with probability below e^(−2⁵⁶), where the host's sampler raises instead.
    """
    from dpkit.tensors.hashing import multiply_wide

    magnitude = xp.abs(c)
    c0, c1 = magnitude & _HALF_MASK, magnitude >> 32
    h00, l00 = multiply_wide(c0, c0)
    h01, l01 = multiply_wide(c0, c1)
    h11, l11 = multiply_wide(c1, c1)
    s1 = h00 + 2 * l01
    s2 = 2 * h01 + l11 + (s1 >> 32)
    limbs = [l00, s1 & _HALF_MASK, s2 & _HALF_MASK, h11 + (s2 >> 32)]
    high = (limbs[3] << 32) | limbs[2]  # c² = high·2⁶⁴ + (limbs[1]·2³² + limbs[0]), high < 2⁶⁰
    if r >= 32:
        low_part = limbs[1] >> (r - 32)
        remainder = ((limbs[1] & ((1 << (r - 32)) - 1)) << 32) | limbs[0]
    else:
        low_part = (limbs[1] << (32 - r)) | (limbs[0] >> r)
        remainder = limbs[0] & ((1 << r) - 1)
    saturated = high >= (1 << (r - 2))  # then K ≥ 2⁶²
    shifted = xp.where(saturated, xp.zeros_like(high), high) << (64 - r)
    k = xp.where(saturated, xp.full_like(high, 1 << 62), shifted + low_part)
    return k, remainder


def _exceeds(pairs: WordPairs, rate: Fraction, c: Any, r: int) -> Any:
    """[X > c²/2^r] for X = J + F exponential of ``rate`` (P[X > x] = e^(−rate·x)), drawn as
    the host's ``_accept_integer`` draws it: J from the rate's one digit table (with its tail),
    and, where J = K = ⌊c²/2^r⌋, F's base-2¹² digits (independent, truncated laws; the host's
    :mod:`~dpkit.randomness._exponential`) compared with those of R/2^r, R = c² mod 2^r, one
    digit a round for the elements still tied. When R's digits are used up with all equal,
    X ≥ c²/2^r, which the host counts as "exceeds" too (X = c²/2^r has probability 0).

    The decisions are the host's function of the same digits. The words read are the host's
    too, except where the host's float brackets (a margin of 2⁻⁵⁰ around the target) ask for a
    digit that the exact comparison here no longer needs: a tie whose digits equal all of the
    target's, or come within 2⁻⁵⁰·c²/2^r of it (rare: below 2⁻¹² of the ties).
    """
    from dpkit.randomness._exponential import FRACTION_BITS, _fraction_table

    xp = pairs.xp
    (table,) = geometric_plan(rate).tables
    k, remainder = _square(xp, c, r)
    j = digit(pairs, table, int(c.shape[0]))
    result = j > k
    tie = j == k
    depth = 1
    while tied := _count(xp, tie):
        if FRACTION_BITS * (depth - 1) >= r:  # the target's digits are used up: X ≥ target
            return result | tie
        shift = r - FRACTION_BITS * depth
        tied_remainder = remainder[tie]
        wanted = ((tied_remainder >> shift) if shift >= 0 else (tied_remainder << -shift)) & (
            (1 << FRACTION_BITS) - 1
        )
        drawn = select(pairs, _fraction_table(rate, depth), tied)
        result = result | _spread(xp, tie, drawn > wanted, _false(xp, tie))
        tie = _spread(xp, tie, drawn == wanted, _false(xp, tie))
        depth += 1
    return result


def discrete_gaussian(pairs: WordPairs, sigma2: int, count: int) -> Any:
    """``count`` iid draws of N_ℤ(0, σ²), P[Z = z] ∝ e^(−z²/(2σ²)), σ² = ``sigma2`` an integer
    in [2⁸, 2⁶²) (int64, flat): Canonne, Kamath & Steinke 2020, Algorithm 3, as the host's
    :func:`~dpkit.randomness.discrete.discrete_gaussian` runs it for such σ².

    Propose Y discrete Laplace of scale t = σ²/m, m = ⌊σ⌋, and accept it with probability
    e^(−(|Y| − m)²/(2σ²)): the product is ∝ e^(−y²/(2σ²)) for every t > 0 (CKS20, Section 5).
    The test is X > c²/2^r for c = |Y| − m and X exponential of rate 2^r/(2σ²) ∈ (1/64, 1/32]
    (r = bitlength(2σ²) − 6), decided exactly by :func:`_exceeds`. Every element keeps
    proposing until one is accepted (a masked loop over the elements still empty: the
    first accepted proposal of each is an exact draw of the target, and the number of rounds
    depends on the words alone; each proposal is accepted with probability ≈ 0.76).
    """
    xp = pairs.xp
    m = math.isqrt(sigma2)
    laplace_rate = Fraction(m, sigma2)
    r = (2 * sigma2).bit_length() - 6
    rate = Fraction(1 << r, 2 * sigma2)
    out = xp.zeros((count,), dtype=xp.int64, device=pairs.device)
    empty = xp.ones((count,), dtype=xp.bool, device=pairs.device)
    while waiting := _count(xp, empty):
        y = discrete_laplace(pairs, laplace_rate, waiting)
        accepted = _exceeds(pairs, rate, xp.abs(y) - m, r)
        out = xp.where(
            _spread(xp, empty, accepted, _false(xp, empty)), _spread(xp, empty, y, out), out
        )
        empty = _spread(xp, empty, ~accepted, _false(xp, empty))
    return out
