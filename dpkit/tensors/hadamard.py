"""Hadamard response on an accelerator's arrays: the CPU's law, reports as indices of [K].

The law is the CPU path's (Acharya, Sun & Zhang 2019, "Hadamard Response", AISTATS; the plugin
``hr``): with K = 2^⌈log₂(k + 1)⌉ and C_x = {y ∈ [K] : popcount((x + 1) & y) even}, a user
holding x reports y uniform on C_x with probability e^ε/(e^ε + 1), uniform on its complement
otherwise. Here "outside" is a 32-bit word below ⌈λ·2³²⌉, λ = 1/(e^ε + 1) rounded up (as
:mod:`dpkit.tensors.categories` rounds a k-RR lie: the realised ε never exceeds the declared
one); a uniform y ∈ [K] is the low bits of a word (K divides 2³²: exactly uniform), moved to the
drawn half, when it is in the other one, by flipping the lowest set bit of x + 1 (a bijection
between the halves, as on the CPU).

**Words.** For n values: word i of the call's stream decides whether report i is outside, word
n + i gives its uniform index.

:func:`hadamard_log_probability` scores reports there: log P[y | x] is one of two constants,
chosen by the parity of (x + 1) & y, as on the CPU.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpkit.errors import InvalidData
from dpkit.tensors.categories import check_categories
from dpkit.tensors.chacha import word_dtype
from dpkit.tensors.device_random import below, device_words, index_dtype, threshold32
from dpkit.tensors.libraries import ArrayLibrary

__all__ = ["hadamard_log_probability", "hadamard_reports", "odd_parity"]


def odd_parity(words: Any) -> Any:
    """popcount(w) is odd, for words below 2³² (XOR folding: w ^= w >> s for s = 16, …, 1
    leaves the parity of all 32 bits in the lowest one)."""
    for shift in (16, 8, 4, 2, 1):
        words = words ^ (words >> shift)
    return (words & 1) == 1


def hadamard_reports(
    library: ArrayLibrary,
    values: Any,
    *,
    k: int,
    outside_threshold64: int,
    rng: Any,
    owner: str,
    field: str = "values",
) -> Any:
    """Hadamard-response indices y ∈ [K] of category indices ``values`` (same shape, the
    library's default integer dtype), on their device."""
    check_categories(library, values, k, owner=owner, field=field)
    xp = library.xp
    dtype = word_dtype(xp)
    size = 1 << k.bit_length()  # K ≤ 2²⁵
    words = device_words(library, rng, owner=owner)
    rows = xp.reshape(xp.astype(values, dtype), (-1,)) + 1  # row x + 1 of the Hadamard matrix
    n = int(rows.shape[0])
    drawn = words.take(2 * n)
    outside = below(xp, drawn[:n], threshold32(outside_threshold64))
    y = drawn[n:] & (size - 1)
    wrong = odd_parity(rows & y) != outside  # y's half is not the one drawn (even = inside)
    lowest = rows & (~rows + 1)  # the lowest set bit of x + 1
    y = y ^ xp.where(wrong, lowest, xp.zeros_like(lowest))
    return xp.reshape(xp.astype(y, index_dtype(xp)), values.shape)


def hadamard_log_probability(
    library: ArrayLibrary,
    reports: Any,
    indices: Any,
    *,
    k: int,
    log_terms: tuple[float, float],
    owner: str,
) -> Any:
    """log P[y | x] of reports y ∈ [K] and category indices x (broadcasting), float64 on their
    device: ``log_terms`` = (inside, outside), inside where popcount((x + 1) & y) is even (y
    in C_x), as the CPU chooses between the same two numbers.

    Refused as on the CPU (the same fields): reports not integers in 0 … K − 1
    (``outputs``), indices not integers (booleans for k = 2) in 0 … k − 1 (``inputs``); an
    empty array of any dtype is accepted. Both dtypes and the broadcast shape are checked
    before any value is read, and a refusal of a value quotes none."""
    xp, device = library.xp, library.device
    size = 1 << k.bit_length()  # K ≤ 2²⁵: (x + 1) & y is a word below 2³²
    checked = ((reports, size, "outputs"), (indices, k, "inputs"))
    empty = [0 in tuple(values.shape) for values, _, _ in checked]
    for (values, bound, field), nothing in zip(checked, empty, strict=True):
        if not nothing and not (
            xp.isdtype(values.dtype, "integral") or (values.dtype == xp.bool and bound == 2)
        ):
            raise InvalidData(
                f"{owner}: {field} must be integer indices 0..{bound - 1}, got a "
                f"{library.name} array of {values.dtype}",
                field=field,
            )
    _ = np.broadcast_shapes(tuple(reports.shape), tuple(indices.shape))
    for (values, bound, field), nothing in zip(checked, empty, strict=True):
        wide = xp.astype(values, xp.int64)  # uint64 above 2⁶³ wraps negative: refused too
        if not nothing and bool(xp.any((wide < 0) | (wide >= bound))):
            raise InvalidData(
                f"{owner}: {field} contain indices outside 0..{bound - 1}", field=field
            )
    y = xp.astype(reports, xp.int64)
    rows = xp.astype(indices, xp.int64) + 1  # row x + 1 of the Hadamard matrix
    inside, outside = (xp.asarray(term, dtype=xp.float64, device=device) for term in log_terms)
    return xp.where(odd_parity(rows & y), outside, inside)
