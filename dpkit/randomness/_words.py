"""Exact integer primitives on a stream of uniform 64-bit words (vectorised, no floats).

Every function takes ``words``: a callable ``n -> uint64 array of n independent uniform words``
(a :class:`~dpkit.randomness.SecureWordSource`'s ``words``, or a numpy ``Generator``'s raw
words in fast mode).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "U64",
    "WordReader",
    "bernoulli_ratio",
    "uniform_below",
]

WordReader = Callable[[int], NDArray[np.uint64]]
U64 = 1 << 64
_U64_MAX = np.uint64(U64 - 1)


def uniform_below(
    words: WordReader, modulus: int | NDArray[np.uint64], n: int
) -> NDArray[np.uint64]:
    """``n`` exactly uniform integers in [0, m), m a Python int in [1, 2⁶⁴] or a uint64 array.

    Rejection sampling (the classical method of OpenBSD ``arc4random_uniform``; see Lemire 2019,
    "Fast Random Integer Generation in an Interval", ACM TOMACS 29(1)): reject words
    w < 2⁶⁴ mod m; the accepted range [2⁶⁴ mod m, 2⁶⁴) holds ⌊2⁶⁴/m⌋ full periods of
    w mod m, so w mod m is exactly uniform. A word is rejected with probability
    (2⁶⁴ mod m)/2⁶⁴ < m/2⁶⁴; rejected entries are redrawn together, round by round.
    """
    if isinstance(modulus, np.ndarray):
        m = modulus.astype(np.uint64, copy=False)
        threshold = (np.uint64(0) - m) % m  # (2⁶⁴ − m) mod m = 2⁶⁴ mod m, in wrapping uint64
        w = words(n)
        bad = np.flatnonzero(w < threshold)
        while bad.size:
            fresh = words(bad.size)
            w[bad] = fresh
            bad = bad[fresh < threshold[bad]]
        return w % m
    m_int = int(modulus)
    if not 1 <= m_int <= U64:
        msg = f"modulus {m_int} outside [1, 2**64]"
        raise OverflowError(msg)
    w = words(n)
    if m_int & (m_int - 1) == 0:  # a power of two: no rejection needed
        return w & np.uint64(m_int - 1) if m_int < U64 else w
    limit = np.uint64(U64 % m_int)
    bad = np.flatnonzero(w < limit)
    while bad.size:
        fresh = words(bad.size)
        w[bad] = fresh
        bad = bad[fresh < limit]
    result: NDArray[np.uint64] = w % np.uint64(m_int)
    return result


def bernoulli_ratio(
    words: WordReader, numerator: NDArray[Any], denominator: int | NDArray[Any], n: int
) -> NDArray[np.bool_]:
    """Exact Bernoulli(r/d) for integers 0 ≤ r ≤ d (arrays of length ``n``, or d a scalar).

    * uint64 r and d < 2⁶⁴: ``uniform_below(d) < r`` (exact, see :func:`uniform_below`);
    * Python-int (object) arrays, any size: compare one uniform word W with the first 64
      binary digits P = ⌊r·2⁶⁴/d⌋ of r/d. W < P ⇒ 1, W > P ⇒ 0, and on a tie (probability
      2⁻⁶⁴) continue with the next 64 digits. This is U < r/d for U uniform on [0, 1) read
      64 bits at a time, so P[1] = r/d exactly.
    """
    if numerator.dtype != object and not _is_big(denominator):
        if isinstance(denominator, np.ndarray):
            return uniform_below(words, denominator.astype(np.uint64), n) < numerator
        return uniform_below(words, int(denominator), n) < numerator
    r = np.asarray(numerator, dtype=object)
    d = denominator if not isinstance(denominator, np.ndarray) else denominator.astype(object)
    digits = np.asarray((r * U64) // d, dtype=object)
    result = np.empty(n, dtype=np.bool_)
    top = digits >= U64  # r == d: probability one
    first = np.where(top, 0, digits).astype(np.uint64)
    w = words(n)
    result[:] = (w < first) | top
    for i in np.flatnonzero((w == first) & ~top):  # ties: probability 2⁻⁶⁴ each
        d_i = int(d[i]) if isinstance(d, np.ndarray) else int(d)
        remainder = (int(r[i]) * U64) % d_i
        while True:
            remainder *= U64
            digit, remainder = divmod(remainder, d_i)
            word = int(words(1)[0])
            if word != digit:
                result[i] = word < digit
                break
    return result


def _is_big(value: int | NDArray[Any]) -> bool:
    if isinstance(value, np.ndarray):
        return value.dtype == object
    return int(value) >= U64
