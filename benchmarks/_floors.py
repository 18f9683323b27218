"""The plain-numpy floors the benchmarks compare dpkit with.

A floor is the fastest plain-numpy code a user would write for a task, with no validation and
no exactness: chunked where that is faster (2¹⁵ values, or blocks of 2²⁰ for the selection
mechanisms, so that temporaries stay in cache and fresh large arrays do not cost page
faults), in the narrowest dtype, and with the cheapest equivalent algorithm (report-noisy-max
with exponential noise for permute-and-flip, Ding et al. 2021; inverse CDF rather than
Gumbel-max for the exponential mechanism).
"""

from __future__ import annotations

import numpy as np

CHUNK = 1 << 15
BLOCK = 1 << 20


def floor_rr(bits: np.ndarray, flip: float, rng: np.random.Generator) -> np.ndarray:
    """Binary randomized response: ``bits ^ (rng.random(c) < q)``, chunked."""
    out = np.empty_like(bits)
    for start in range(0, bits.size, CHUNK):
        part = bits[start : start + CHUNK]
        np.bitwise_xor(part, rng.random(part.size) < flip, out=out[start : start + CHUNK])
    return out


def floor_krr(x: np.ndarray, k: int, lie: float, rng: np.random.Generator) -> np.ndarray:
    """k-RR: one uniform for the lie and one integer for the other value, chunked, in uint8."""
    out = np.empty_like(x)
    for start in range(0, x.size, CHUNK):
        truth = x[start : start + CHUNK].astype(np.uint8)
        lies = rng.random(truth.size) < lie
        other = rng.integers(0, k - 1, truth.size, dtype=np.uint8)
        other += other >= truth
        out[start : start + CHUNK] = np.where(lies, other, truth)
    return out


def floor_hr(x: np.ndarray, size: int, outside: float, rng: np.random.Generator) -> np.ndarray:
    """Hadamard response: a uniform index moved to the drawn half (popcount parity), chunked."""
    out = np.empty(x.size, dtype=np.int64)
    for start in range(0, x.size, CHUNK):
        rows = x[start : start + CHUNK].astype(np.uint64) + np.uint64(1)
        away = rng.random(rows.size) < outside
        y = rng.integers(0, size, rows.size, dtype=np.uint64)
        wrong = (np.bitwise_count(rows & y) & 1).astype(bool) != away
        y ^= np.where(wrong, rows & (~rows + np.uint64(1)), np.uint64(0))
        out[start : start + CHUNK] = y
    return out


def floor_exponential(u: np.ndarray, rate: float, rng: np.random.Generator) -> np.ndarray | int:
    """Inverse CDF on float weights in blocks of 2²⁰ utilities: one row (m,) → one selection
    (block totals, then the block holding the target is searched); rows (R, m) → one each."""
    if u.ndim == 1:
        top = u.max()
        sums = np.array(
            [np.exp(rate * (u[s : s + BLOCK] - top)).sum() for s in range(0, u.size, BLOCK)]
        )
        ends = np.cumsum(sums)
        target = rng.random() * ends[-1]
        b = min(int(np.searchsorted(ends, target, side="right")), sums.size - 1)
        w = np.cumsum(np.exp(rate * (u[b * BLOCK : (b + 1) * BLOCK] - top)))
        before = ends[b - 1] if b else 0.0
        return b * BLOCK + min(int(np.searchsorted(w, target - before, side="right")), w.size - 1)
    rows = max(1, BLOCK // u.shape[-1])
    out = np.empty(u.shape[0], dtype=np.int64)
    for s in range(0, u.shape[0], rows):
        part = u[s : s + rows]
        w = np.exp(rate * (part - part.max(axis=-1, keepdims=True)))
        np.cumsum(w, axis=-1, out=w)
        target = rng.random(w.shape[0]) * w[:, -1]
        out[s : s + rows] = np.count_nonzero(w <= target[:, None], axis=-1)
    return out


def floor_noisy_max(u: np.ndarray, scale: float, rng: np.random.Generator) -> np.ndarray:
    """Report-noisy-max: ``argmax(u + rng.laplace(0, b, shape))``."""
    return np.argmax(u + rng.laplace(0.0, scale, u.shape), axis=-1)


def floor_permute_and_flip(u: np.ndarray, rate: float, rng: np.random.Generator) -> np.ndarray:
    """Permute-and-flip as report-noisy-max with exponential noise (the same law; Ding et al.
    2021), one draw per candidate."""
    return np.argmax(u + rng.exponential(1.0 / rate, u.shape), axis=-1)
