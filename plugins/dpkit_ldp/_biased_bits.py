"""Random 64-bit words whose bits are independent Bernoulli(a/2ᵇ): the flips of the sketches.

The AND/OR construction of :func:`dpkit_ldp.unary_encoding.bernoulli_words` (exact: each bit of
the result is 1 with probability exactly a/2ᵇ), fed by the cheapest uniform words of each
mode: the ChaCha20 keystream in secure mode, ``Generator.integers`` over the full 64-bit range
in fast mode (about three times faster than the bit generator's ``random_raw``, which the unary
encodings keep so that their seeded reports do not change).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

import dpkit

__all__ = ["biased_words", "uniform_words"]


def uniform_words(generator: Any, size: int) -> NDArray[np.uint64]:
    """``size`` independent uniform ``uint64`` words from a SecureRandom or a Generator."""
    if isinstance(generator, dpkit.SecureRandom):
        return generator.words(size)
    words: NDArray[np.uint64] = generator.integers(
        0, np.iinfo(np.uint64).max, size=size, dtype=np.uint64, endpoint=True
    )
    return words


def biased_words(generator: Any, size: int, numerator: int, bits: int) -> NDArray[np.uint64]:
    """``size`` words whose bits are independent Bernoulli(numerator/2^bits), exactly.

    Start from x = 0; for j = 0 .. bits − 1 replace x by x | r if bit j of the numerator is 1,
    else by x & r, r a fresh uniform word: each bit of x is then 1 with probability
    P_j = (c_j + P_{j−1})/2, which unrolls to the numerator's binary expansion. Zero bits below
    the lowest set bit only AND into zeros and are skipped.
    """
    if not 0 <= numerator <= 1 << bits:
        raise ValueError(f"numerator {numerator} outside [0, 2^{bits}]")
    if numerator == 1 << bits:
        return np.full(size, np.iinfo(np.uint64).max, dtype=np.uint64)
    if numerator == 0 or size == 0:
        return np.zeros(size, dtype=np.uint64)
    lowest = (numerator & -numerator).bit_length() - 1
    words = uniform_words(generator, size)
    for j in range(lowest + 1, bits):
        if (numerator >> j) & 1:
            np.bitwise_or(words, uniform_words(generator, size), out=words)
        else:
            np.bitwise_and(words, uniform_words(generator, size), out=words)
    return words
