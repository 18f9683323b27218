"""Unary encoding (SUE, OUE) on an accelerator's arrays: packed one-hot reports and their counts.

Wang et al. 2017 ("Locally Differentially Private Protocols for Frequency Estimation", §4.3):
a category v becomes k bits, bit v set with probability p and every other bit with probability
q, independently. The CPU path realises p and q as multiples of 2⁻³² (the mechanism's grid
probabilities); here bit j of a report is ``word < P_j`` with a uniform 32-bit word and
P_j = p·2³² for the true category, q·2³² otherwise — the same law, exactly. Report i, bit j
takes word i·k + j of the call's stream. Reports are packed as numpy's ``packbits`` packs them
(bit j in byte j div 8, at bit 7 − j mod 8), ⌈k/8⌉ bytes each, ``uint8``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpkit.errors import InvalidData
from dpkit.tensors.categories import check_categories
from dpkit.tensors.chacha import word_dtype
from dpkit.tensors.device_random import device_words, index_dtype
from dpkit.tensors.libraries import ArrayLibrary
from dpkit.tensors.log_probability import index_inputs

__all__ = ["unary_counts", "unary_log_probability", "unary_reports"]

_ROWS_WORDS = 1 << 24  # words per pass: bounds the device temporaries (~128 MiB of int64)


def _bit_weights(xp: Any, device: Any) -> Any:
    return xp.asarray([128, 64, 32, 16, 8, 4, 2, 1], dtype=xp.int32, device=device)


def unary_reports(
    library: ArrayLibrary,
    values: Any,
    *,
    k: int,
    keep: int,
    other: int,
    rng: Any,
    owner: str,
    field: str = "values",
) -> Any:
    """Packed unary-encoding reports of category indices ``values`` (shape s → s + (⌈k/8⌉,)),
    bit v set with probability ``keep``/2³² for the true v and ``other``/2³² elsewhere."""
    check_categories(library, values, k, owner=owner, field=field)
    xp, device = library.xp, library.device
    words = device_words(library, rng, owner=owner)
    integers = index_dtype(xp)
    flat = xp.reshape(xp.astype(values, integers), (-1,))
    n = int(flat.shape[0])
    width = -(-k // 8)
    positions = xp.reshape(xp.arange(k, dtype=integers, device=device), (1, k))
    dtype = word_dtype(xp)
    keep_word = xp.asarray(keep, dtype=dtype, device=device)  # < 2³²: p < 1
    other_word = xp.asarray(other, dtype=dtype, device=device)
    weights = _bit_weights(xp, device)
    pieces = []
    rows_per_pass = max(1, _ROWS_WORDS // k)
    for start in range(0, n, rows_per_pass):
        rows = flat[start : min(start + rows_per_pass, n)]  # the standard has no slice past the end
        count = int(rows.shape[0])
        drawn = xp.reshape(words.take(count * k), (count, k))
        threshold = xp.where(positions == xp.reshape(rows, (count, 1)), keep_word, other_word)
        bits = xp.astype(drawn < threshold, xp.int32)
        padding = xp.zeros((count, width * 8 - k), dtype=xp.int32, device=device)
        grouped = xp.reshape(xp.concat([bits, padding], axis=1), (count, width, 8))
        pieces.append(xp.astype(xp.sum(grouped * weights, axis=2), xp.uint8))
    packed = (
        xp.concat(pieces, axis=0) if pieces else xp.zeros((0, width), dtype=xp.uint8, device=device)
    )
    return xp.reshape(packed, (*tuple(values.shape), width))


def unary_counts(
    library: ArrayLibrary, reports: Any, *, k: int, owner: str, field: str = "reports"
) -> tuple[NDArray[np.int64], int]:
    """(C_v for every v, number of reports): how many packed reports have bit v set, counted on
    the device (only the k counts come back)."""
    xp, device = library.xp, library.device
    width = -(-k // 8)
    shape = tuple(reports.shape)
    if reports.dtype != xp.uint8 or not shape or shape[-1] != width:
        raise InvalidData(
            f"{owner}: {field} must be packed reports, uint8 arrays of {width} bytes per report",
            field=field,
        )
    rows = xp.reshape(xp.astype(reports, xp.int32), (-1, width))
    weights = _bit_weights(xp, device)
    bits = xp.reshape((xp.reshape(rows, (-1, width, 1)) // weights) % 2, (-1, width * 8))
    counts = library.small_to_host(xp.sum(bits, axis=0, dtype=index_dtype(xp)))
    return np.asarray(counts[:k], dtype=np.int64), int(rows.shape[0])


def unary_log_probability(
    library: ArrayLibrary,
    reports: Any,
    indices: Any,
    *,
    k: int,
    log_terms: tuple[float, float, float, float],
    owner: str,
) -> Any:
    """log P[report | v] of packed reports (last axis) and category indices ``indices``
    (broadcasting), float64 on their device: with o the other bits set and b the true bit,
    o·log q + (k − 1 − o)·log(1 − q) + (log p if b else log(1 − p)), ``log_terms`` being
    (log q, log(1 − q), log p, log(1 − p)) — the CPU path's operations in its order, so the
    same float64 numbers.

    Refused as on the CPU (the same fields): reports not ``uint8``, or not ⌈k/8⌉ bytes on the
    last axis, or with padding bits set (``reports``); indices not integers (booleans for
    k = 2), or outside 0 … k − 1 (``inputs``; an empty array of any dtype is accepted). The
    dtypes and shapes are checked before any value is read."""
    xp, device = library.xp, library.device
    width = -(-k // 8)
    shape = tuple(reports.shape)
    if reports.dtype != xp.uint8:
        raise InvalidData(
            f"{owner}: reports must be packed bits (unsigned bytes, uint8, ⌈k/8⌉ = {width} "
            f"bytes per report), got a {library.name} array of {reports.dtype}",
            field="reports",
        )
    if not shape or shape[-1] != width:
        raise InvalidData(
            f"{owner}: reports must have shape (..., {width}) for k={k} (⌈k/8⌉ bytes per "
            f"report), got shape {shape}",
            field="reports",
        )
    empty_indices = index_inputs(library, indices, k=k, owner=owner)
    out_shape = tuple(np.broadcast_shapes(shape[:-1], tuple(indices.shape)))
    rows = xp.astype(reports, xp.int64)
    if k % 8 and bool(xp.any((rows[..., -1] % (1 << (8 - k % 8))) != 0)):
        raise InvalidData(
            f"{owner}: reports set padding bits beyond bit {k - 1}; they were not produced "
            f"for k={k}",
            field="reports",
        )
    x = xp.astype(indices, xp.int64)
    if not empty_indices and bool(xp.any((x < 0) | (x >= k))):
        raise InvalidData(f"{owner}: inputs contain indices outside 0..{k - 1}", field="inputs")
    weights = xp.astype(_bit_weights(xp, device), xp.int64)
    bits = (xp.expand_dims(rows, axis=-1) // weights) % 2  # (..., width, 8), high bit first
    bits = xp.reshape(bits, (*shape[:-1], width * 8))[..., :k]
    ones = xp.broadcast_to(xp.sum(bits, axis=-1), out_shape)
    positions = xp.arange(k, dtype=xp.int64, device=device)
    mine = xp.astype(xp.expand_dims(x, axis=-1) == positions, xp.int64)
    own = xp.broadcast_to(xp.sum(bits * mine, axis=-1), out_shape)
    others = xp.astype(ones - own, xp.float64)
    log_q, log_not_q, log_p, log_not_p = (
        xp.asarray(term, dtype=xp.float64, device=device) for term in log_terms
    )
    return others * log_q + ((k - 1) - others) * log_not_q + xp.where(own == 1, log_p, log_not_p)
