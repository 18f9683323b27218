"""Optimal local hashing on an accelerator's arrays: the CPU's hash family, reports and counts.

The law is the CPU path's (Wang et al. 2017, "Locally Differentially Private Protocols for
Frequency Estimation", §4.4–4.5; the plugin ``olh``): a user holding x draws a, b uniform on
2⁶⁴, hashes x with Dietzfelbinger's multiply-add-shift family mapped to [g] (Dietzfelbinger
1996; Lemire 2019),

    H_{a,b}(x) = ((((a·x + b) mod 2⁶⁴) >> 32) · g) >> 32,

and reports (a, b, y) with y = H(x) kept with probability 1 − λ, λ = (g − 1)/(e^ε + g − 1),
and otherwise uniform over the g − 1 other values. The hash is the CPU's bit for bit, so the
reports of either path are estimated by the other. On the device λ is decided by a 32-bit word
below ⌈λ·2³²⌉ (rounded up, as :mod:`dpkit.tensors.categories` rounds a k-RR lie: the realised
ε never exceeds the declared one) and the other value by
:func:`~dpkit.tensors.device_random.uniform_below` (g − 1) shifted past H(x), exactly uniform.

**Words.** For n values: words 4i … 4i + 3 of the call's stream are (a_hi, a_lo, b_hi, b_lo) of
report i (a = a_hi·2³² + a_lo), word 4n + i decides its lie, and the other values take the
words from the next whole block on, ⌈5n/16⌉ (each draw of a call starts a fresh block). At
small ε, where ⌈λ·2³²⌉/2³² would pass (g − 1)/g (:func:`~dpkit.tensors.device_random.lie_words`),
words 4n + i and 5n + i decide it against λ's 64-bit threshold and the others start at ⌈6n/16⌉.

**Arithmetic.** No array library offers 64-bit unsigned products portably (torch has no
``uint64`` arithmetic, JAX without x64 no 64-bit types). The hash is computed on 32-bit words
split into 16-bit halves (:func:`multiply_wide`), so that every intermediate stays below 2³²:
exact in ``uint32`` and in ``int64`` alike. Only the report itself needs 64-bit integers:
``uint64`` as on the CPU (a torch tensor of ``torch.uint64``, as its host path returns), so
JAX without x64 is refused.

:func:`hashed_log_probability` scores reports there: log P[(a, b, y) | x] is one of two
constants, chosen by whether y = H_{a,b}(x), the CPU's hash, so the CPU's choice.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpkit.errors import InvalidData
from dpkit.tensors.categories import check_categories
from dpkit.tensors.chacha import word_dtype
from dpkit.tensors.device_random import (
    device_words,
    index_dtype,
    lie_below,
    lie_words,
    require_64_bit,
    uniform_below,
)
from dpkit.tensors.libraries import ArrayLibrary
from dpkit.tensors.log_probability import index_inputs

__all__ = [
    "hashed_log_probability",
    "hashed_reports",
    "hashed_support_counts",
    "multiply_add_shift_words",
    "multiply_wide",
]

_HALF = 0xFFFF
_CELLS = 1 << 22  # (report, category) cells per counting pass: bounds the device temporaries


def multiply_wide(x: Any, y: Any) -> tuple[Any, Any]:
    """(high, low) 32-bit words of x·y for x, y < 2³² (arrays of 32-bit values or ints).

    Schoolbook multiplication on 16-bit halves: x·y = x₁y₁·2³² + (x₁y₀ + x₀y₁)·2¹⁶ + x₀y₀, with
    each partial product below 2³² and the middle column summed from 16-bit pieces, so no
    intermediate reaches 2³² (exact in ``uint32`` and ``int64``).
    """
    x0, x1 = x & _HALF, x >> 16
    y0, y1 = y & _HALF, y >> 16
    p00, p01, p10, p11 = x0 * y0, x0 * y1, x1 * y0, x1 * y1
    middle = (p00 >> 16) + (p01 & _HALF) + (p10 & _HALF)  # < 3·2¹⁶
    low = ((middle & _HALF) << 16) | (p00 & _HALF)
    high = p11 + (p01 >> 16) + (p10 >> 16) + (middle >> 16)  # = ⌊xy/2³²⌋ < 2³²
    return high, low


def multiply_add_shift_words(
    a_hi: Any, a_lo: Any, b_hi: Any, b_lo: Any, x: Any, g: int, *, wide: bool
) -> Any:
    """H_{a,b}(x) = ((((a·x + b) mod 2⁶⁴) >> 32)·g) >> 32 from 32-bit halves (broadcasting).

    ((a·x + b) mod 2⁶⁴) >> 32 = (⌊a_lo·x/2³²⌋ + (a_hi·x mod 2³²) + b_hi + carry) mod 2³², the
    carry being that of (a_lo·x mod 2³²) + b_lo; ``wide``: the words are ``int64`` (torch),
    masked back to 32 bits, else ``uint32``, which wraps.
    """
    carry_high, product_low = multiply_wide(a_lo, x)
    _, cross = multiply_wide(a_hi, x)
    # The carry of product_low + b_lo, without forming a 33-bit sum.
    carry = ((product_low >> 1) + (b_lo >> 1) + (product_low & b_lo & 1)) >> 31
    h = carry_high + cross
    h = h + b_hi
    h = h + carry
    if wide:
        h = h & 0xFFFFFFFF
    hashed, _ = multiply_wide(h, g)
    return hashed


def _wide(xp: Any) -> bool:
    return bool(word_dtype(xp) == xp.int64)


def _join(library: ArrayLibrary, high: Any, low: Any) -> Any:
    """high·2³² + low as 64-bit words: ``uint64``, or torch's ``int64`` holding the same bits."""
    xp = library.xp
    if library.name == "torch":  # no uint64 arithmetic: the two's-complement int64, exactly
        signed = high - (high >> 31) * (1 << 32)
        return signed * (1 << 32) + low
    return (xp.astype(high, xp.uint64) << 32) | xp.astype(low, xp.uint64)


def _split(library: ArrayLibrary, words64: Any) -> tuple[Any, Any]:
    """(high, low) 32-bit halves, in the words' dtype, of 64-bit integers (int64 or uint64)."""
    xp = library.xp
    dtype = word_dtype(xp)
    if library.name == "torch" and words64.dtype != xp.int64:
        words64 = words64.view(xp.int64)  # torch.uint64: the same bits, with arithmetic
    low = words64 & 0xFFFFFFFF
    high = (words64 >> 32) & 0xFFFFFFFF  # an int64's sign extension masked off
    return xp.astype(high, dtype), xp.astype(low, dtype)


def hashed_reports(
    library: ArrayLibrary,
    values: Any,
    *,
    k: int,
    g: int,
    lie_threshold64: int,
    rng: Any,
    owner: str,
    field: str = "values",
) -> Any:
    """OLH reports (a, b, y) of category indices ``values`` (shape s → s + (3,), 64-bit
    unsigned), on their device: the CPU's hash, y kept with probability 1 − ⌈λ·2³²⌉/2³²."""
    require_64_bit(
        library, owner=owner, field=field, needs="local hashing reports hold 64-bit hash seeds"
    )  # decided by the library, before values
    check_categories(library, values, k, owner=owner, field=field)
    xp = library.xp
    dtype = word_dtype(xp)
    words = device_words(library, rng, owner=owner)
    x = xp.reshape(xp.astype(values, dtype), (-1,))
    n = int(x.shape[0])
    per_lie = lie_words(lie_threshold64, g)
    drawn = words.take((4 + per_lie) * n)
    seeds = xp.reshape(drawn[: 4 * n], (n, 4))
    a_hi, a_lo, b_hi, b_lo = seeds[:, 0], seeds[:, 1], seeds[:, 2], seeds[:, 3]
    hashed = multiply_add_shift_words(a_hi, a_lo, b_hi, b_lo, x, g, wide=_wide(xp))
    lie = lie_below(xp, drawn[4 * n :], n, lie_threshold64, g)
    other = uniform_below(words, n, g - 1)
    other = other + xp.astype(other >= hashed, dtype)  # the g − 1 values other than H(x)
    y = xp.where(lie, other, hashed)
    zero = xp.zeros_like(y)
    reports = xp.stack(
        [_join(library, a_hi, a_lo), _join(library, b_hi, b_lo), _join(library, zero, y)], axis=1
    )
    if library.name == "torch":
        reports = reports.view(xp.uint64)
    return xp.reshape(reports, (*tuple(values.shape), 3))


def hashed_support_counts(
    library: ArrayLibrary, reports: Any, *, k: int, g: int, owner: str, field: str = "reports"
) -> tuple[NDArray[np.int64], int]:
    """(C_v = #{reports with H_{a,b}(v) = y} for every v < k, number of reports), counted on the
    device in passes of at most 2²² (report, category) cells; only the k counts come back."""
    xp, device = library.xp, library.device
    shape = tuple(reports.shape)
    if not shape or shape[-1] != 3:
        raise InvalidData(
            f"{owner}: {field} must have shape (..., 3): the hash seeds a, b and the perturbed "
            f"hash y of each user; got shape {shape}",
            field=field,
        )
    if reports.dtype not in (xp.int64, xp.uint64):
        raise InvalidData(
            f"{owner}: {field} must be 64-bit integers (uint64 seeds and hash values), as "
            "olh.randomize gives them",
            field=field,
        )
    rows = xp.reshape(reports, (-1, 3))
    a_hi, a_lo = _split(library, rows[:, 0])
    b_hi, b_lo = _split(library, rows[:, 1])
    y_hi, y = _split(library, rows[:, 2])
    if bool(xp.any((y_hi != 0) | (y >= g))):
        raise InvalidData(
            f"{owner}: {field} contain hash values outside 0..{g - 1} (g={g}); were they "
            "produced with another epsilon or g?",
            field=field,
        )
    n = int(rows.shape[0])
    dtype = word_dtype(xp)
    integers = index_dtype(xp)
    columns = min(k, 1024)
    per_pass = max(1, _CELLS // columns)
    pieces = []
    for first in range(0, k, columns):
        v = xp.reshape(
            xp.arange(first, min(k, first + columns), dtype=dtype, device=device), (1, -1)
        )
        total = xp.zeros((int(v.shape[1]),), dtype=integers, device=device)
        for start in range(0, n, per_pass):
            a1, a0, b1, b0, y0 = (
                xp.reshape(word[start : min(n, start + per_pass)], (-1, 1))
                for word in (a_hi, a_lo, b_hi, b_lo, y)
            )
            hashed = multiply_add_shift_words(a1, a0, b1, b0, v, g, wide=_wide(xp))
            total = total + xp.sum(xp.astype(hashed == y0, integers), axis=0)
        pieces.append(total)
    counts = xp.concat(pieces)  # k ≥ 2: at least one piece
    return np.asarray(library.small_to_host(counts), dtype=np.int64), n


def hashed_log_probability(
    library: ArrayLibrary,
    reports: Any,
    indices: Any,
    *,
    k: int,
    g: int,
    log_terms: tuple[float, float, float],
    owner: str,
) -> Any:
    """log P[(a, b, y) | x] of reports (…, 3) and category indices x (broadcasting over …),
    float64 on their device: with ``log_terms`` = (kept, lied, seeds), kept − seeds where
    y = H_{a,b}(x) (the CPU's hash, bit for bit), lied − seeds elsewhere, as the CPU chooses
    between the same numbers (a y outside [g] never equals the hash).

    Refused as on the CPU (the same fields): indices not integers (booleans for k = 2) in
    0 … k − 1 (``inputs``; an empty array of any dtype is accepted); shapes that the CPU's
    indexing and broadcasting refuse, with numpy's error. Reports must be integers or booleans
    (``outputs``: the CPU casts a float to uint64, truncating, and a NaN as the platform does,
    which the device does not copy); other integers are read as the CPU casts them to uint64
    (a negative one in two's complement). The dtypes and shapes are checked before any value
    is read, and a refused value is not quoted."""
    xp, device = library.xp, library.device
    if not xp.isdtype(reports.dtype, ("bool", "integral")):
        raise InvalidData(
            f"{owner}: outputs must be integer reports (a, b, y), got a {library.name} array "
            f"of {reports.dtype}",
            field="outputs",
        )
    empty = index_inputs(library, indices, k=k, owner=owner)
    # The CPU's indexing and broadcasting, on a view of no memory: its errors, before any value.
    layout = np.broadcast_to(np.zeros((), dtype=np.int8), tuple(reports.shape))
    seeds = layout[..., :2]
    np.broadcast_shapes(seeds[..., 0].shape, seeds[..., 1].shape, tuple(indices.shape))
    _ = layout[..., 2]
    if not (reports.dtype == xp.uint64 or reports.dtype == xp.int64):
        reports = xp.astype(reports, xp.int64)  # sign-extended: the CPU's cast to uint64
    wide = xp.astype(indices, xp.int64)  # uint64 above 2⁶³ wraps negative: refused too
    if not empty and bool(xp.any((wide < 0) | (wide >= k))):
        raise InvalidData(f"{owner}: inputs contain indices outside 0..{k - 1}", field="inputs")
    x = xp.astype(wide, word_dtype(xp))  # below k ≤ 2³²: a 32-bit word
    a_hi, a_lo = _split(library, reports[..., 0])
    b_hi, b_lo = _split(library, reports[..., 1])
    y_hi, y = _split(library, reports[..., 2])
    hashed = multiply_add_shift_words(a_hi, a_lo, b_hi, b_lo, x, g, wide=_wide(xp))
    same = (y_hi == 0) & (y == hashed)
    kept, lied, seeds_term = (
        xp.asarray(term, dtype=xp.float64, device=device) for term in log_terms
    )
    return xp.where(same, kept, lied) - seeds_term
