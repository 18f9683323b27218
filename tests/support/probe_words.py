"""A secure generator whose words are chosen: its first word given, every later one 2⁶⁴ − 1.

Probes what a secure sampler does on one word (a threshold located by bisection, a uniform
of exactly 0) without any statistics; 2⁶⁴ − 1 is a word no rejection sampler rejects.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import dpkit


class _ProbeSource:
    keyed = True

    def __init__(self, first: int) -> None:
        self.first: int | None = first

    def words(self, size: Any = None) -> Any:
        out = np.full(int(np.prod(size if size is not None else ())), 2**64 - 1, np.uint64)
        if self.first is not None and out.size:
            out[0], self.first = self.first, None
        return out if size is not None else out[0]


def first_word(first: int) -> dpkit.SecureRandom:
    """A SecureRandom whose first word is ``first`` and every later word 2⁶⁴ − 1."""
    rng = dpkit.SecureRandom.__new__(dpkit.SecureRandom)
    rng._source = _ProbeSource(first)  # type: ignore[assignment]
    return rng
