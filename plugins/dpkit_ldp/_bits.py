"""Uniform 64-bit words from either kind of generator dpkit's mechanisms accept."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["random_words"]


def random_words(generator: Any, size: int) -> NDArray[np.uint64]:
    """``size`` independent uniform ``uint64`` words.

    A ``numpy.random.Generator`` (fast mode) gives its bit generator's raw output, which is the
    same stream its other methods consume; a :class:`dpkit.SecureRandom` (secure mode) gives its
    keystream words.
    """
    if isinstance(generator, np.random.Generator):
        words: NDArray[np.uint64] = generator.bit_generator.random_raw(size)
        return words
    secure: NDArray[np.uint64] = generator.words(size)
    return secure
