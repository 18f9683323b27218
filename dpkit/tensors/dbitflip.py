"""dBitFlip on an accelerator's arrays: the CPU's law exactly, reports and counts on the device.

The law is the CPU path's (Ding, Kulkarni & Yekhanin 2017, "Collecting Telemetry Data
Privately", NeurIPS, §2.2; the plugin ``dbitflip``): a device holding bucket v ∈ [k] draws d
distinct buckets j_1..j_d uniformly, r_p uniform on [k − p] raised past the buckets already
drawn (:func:`~dpkit.tensors.device_random.uniform_below`, exactly uniform, then the CPU's
raising), and reports b_p = 1{v = j_p} flipped when a uniform 64-bit word is below the
mechanism's threshold T (:func:`~dpkit.tensors.duchi.below_64`, compared exactly on 32-bit
halves). The flip probability is T/2⁶⁴, the CPU's, not rounded to the 2⁻³² grid: the
mechanism's ``flip_probability``, ``log_probability`` and estimator hold for either path's
reports unchanged, and the same 64-bit flip words give the same bits.

**Words.** For n values: draw p of the buckets takes the next n words (fresh ones for the rare
rejected word), each draw starting on a fresh block; then bit p of report i is decided by the
64-bit word of words 2(i·d + p) (high half) and 2(i·d + p) + 1 (low half) of the next 2nd.

**Reports** are the CPU's: shape ``values.shape + (d, 2)``, rows (j_p, b_p), 64-bit unsigned
(torch: a ``torch.uint64`` tensor, as its host path returns), so 64-bit integers are needed
(JAX without x64 is refused before any value is read). The counts are (N_v, B_v): the reports
whose buckets hold v, and the sum of their bits at v, counted on the device as the 2k cells
2·j + b; only those come back. :func:`dbitflip_log_probability` scores reports there as the CPU
does: the number of bits flipped, times log φ, plus the others', times log(1 − φ).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpkit.errors import InvalidData
from dpkit.tensors.categories import category_counts, check_categories
from dpkit.tensors.device_random import device_words, require_64_bit, uniform_below
from dpkit.tensors.duchi import below_64
from dpkit.tensors.libraries import ArrayLibrary
from dpkit.tensors.log_probability import index_inputs

__all__ = ["dbitflip_counts", "dbitflip_log_probability", "dbitflip_reports"]


def _as_uint64(library: ArrayLibrary, array: Any) -> Any:
    xp = library.xp
    if library.name == "torch":  # few uint64 operations: int64 built, the same bits viewed
        return array.view(xp.uint64)
    return xp.astype(array, xp.uint64)


def dbitflip_reports(
    library: ArrayLibrary,
    values: Any,
    *,
    k: int,
    d: int,
    flip_threshold64: int,
    repeats: int,
    rng: Any,
    owner: str,
    field: str = "values",
) -> Any:
    """dBitFlip reports of bucket indices ``values`` (shape s → s + (d, 2), or s + (T, d, 2)
    with ``repeats`` = T > 1 identical copies), 64-bit unsigned, on their device."""
    require_64_bit(library, owner=owner, field=field)  # decided by the library, before values
    words = device_words(library, rng, owner=owner)  # the rng checked; no word drawn yet
    check_categories(library, values, k, owner=owner, field=field)
    xp = library.xp
    flat = xp.reshape(xp.astype(values, xp.int64), (-1,))
    n = int(flat.shape[0])
    drawn: list[Any] = []
    for p in range(d):
        r = xp.astype(uniform_below(words, n, k - p), xp.int64)
        if p:
            earlier = xp.sort(xp.stack(drawn, axis=1), axis=1)
            for q in range(p):  # in increasing order: r becomes the r-th bucket not yet drawn
                r = r + xp.astype(r >= earlier[:, q], xp.int64)
        drawn.append(r)
    buckets = xp.stack(drawn, axis=1)
    halves = xp.reshape(words.take(2 * n * d), (n * d, 2))
    flips = xp.reshape(below_64(xp, halves[:, 0], halves[:, 1], flip_threshold64), (n, d))
    bits = xp.astype(xp.not_equal(buckets == xp.reshape(flat, (n, 1)), flips), xp.int64)
    reports = xp.stack([buckets, bits], axis=2)
    if repeats > 1:  # the memoized copies: one draw, repeated
        reports = xp.broadcast_to(xp.reshape(reports, (n, 1, d, 2)), (n, repeats, d, 2))
        reports = xp.astype(reports, xp.int64, copy=True)
        shape: tuple[int, ...] = (*tuple(values.shape), repeats, d, 2)
    else:
        shape = (*tuple(values.shape), d, 2)
    return _as_uint64(library, xp.reshape(reports, shape))


def dbitflip_counts(
    library: ArrayLibrary, reports: Any, *, k: int, d: int, owner: str, field: str = "reports"
) -> tuple[NDArray[np.int64], NDArray[np.int64], int]:
    """(N_v, B_v for every v < k, number of reports) of reports of shape (n, d, 2), counted on
    the device."""
    xp = library.xp
    shape = tuple(reports.shape)
    if len(shape) != 3 or shape[1:] != (d, 2):
        raise InvalidData(
            f"{owner}: {field} must have shape (n, {d}, 2): (bucket, bit) per sampled bucket, "
            f"one report per device (reports[:, t] of memoized ones); got shape {shape}",
            field=field,
        )
    if not xp.isdtype(reports.dtype, "integral"):
        raise InvalidData(
            f"{owner}: {field} must be integers, got a {library.name} array of {reports.dtype}",
            field=field,
        )
    require_64_bit(library, owner=owner, field=field)
    if library.name == "torch" and reports.dtype == xp.uint64:
        reports = reports.view(xp.int64)  # the same bits, with arithmetic
    rows = xp.astype(reports, xp.int64)
    buckets, bits = rows[..., 0], rows[..., 1]
    if bool(xp.any((buckets < 0) | (buckets >= k) | (bits < 0) | (bits > 1))):
        raise InvalidData(
            f"{owner}: {field} hold a bucket outside 0..{k - 1} or a bit other than 0/1; were "
            "they produced with another k?",
            field=field,
        )
    cells = category_counts(library, 2 * buckets + bits, 2 * k, owner=owner, field=field)
    ones = cells[1::2]
    return cells[0::2] + ones, ones, shape[0]


def dbitflip_log_probability(
    library: ArrayLibrary,
    reports: Any,
    indices: Any,
    *,
    k: int,
    d: int,
    repeats: int,
    log_terms: tuple[float, float, float],
    owner: str,
) -> Any:
    """log P[report | x] of reports (…, d, 2), or (…, T, d, 2) for ``repeats`` = T > 1, and
    bucket indices x (broadcasting over …), float64 on their device, by the CPU's operations:
    with f the bits flipped (a one off x's bucket or a zero on it) and ``log_terms`` =
    (log φ, log(1 − φ), ln(k!/(k − d)!)), f·log φ + (d − f)·log(1 − φ) − ln(k!/(k − d)!);
    −inf unless the d buckets are distinct and in 0 … k − 1, the bits 0/1 and the T reports
    identical.

    Refused as on the CPU (the same fields): indices not integers (booleans for k = 2) in
    0 … k − 1 (``inputs``; an empty array of any dtype is accepted); shapes that the CPU's
    indexing and broadcasting refuse, with numpy's error. Reports must be integers or booleans
    (``outputs``: the CPU casts a float to uint64, truncating, and a NaN as the platform does,
    which the device does not copy). The dtypes and shapes are checked before any value is
    read, and a refused value is not quoted."""
    xp, device = library.xp, library.device
    if not xp.isdtype(reports.dtype, ("bool", "integral")):
        raise InvalidData(
            f"{owner}: outputs must be integer reports (bucket, bit), got a {library.name} "
            f"array of {reports.dtype}",
            field="outputs",
        )
    empty = index_inputs(library, indices, k=k, owner=owner)
    # The CPU's indexing and broadcasting, on a view of no memory: its errors, before any value.
    layout = np.broadcast_to(np.zeros((), dtype=np.int8), tuple(reports.shape))
    if repeats > 1:
        layout = layout[..., 0, :, :]
    shape = np.broadcast_shapes(layout.shape[:-2], tuple(indices.shape))
    np.broadcast_to(layout, (*shape, d, 2))
    if library.name == "torch" and reports.dtype == xp.uint64:
        reports = reports.view(xp.int64)  # the same bits, with arithmetic (≥ 2⁶³: negative)
    out = xp.astype(reports, xp.int64)
    if repeats > 1:
        same = xp.all(out == out[..., :1, :, :], axis=(-3, -2, -1))
        out = out[..., 0, :, :]
    else:
        same = xp.ones(tuple(out.shape[:-2]), dtype=xp.bool, device=device)
    x = xp.astype(indices, xp.int64)
    if not empty and bool(xp.any((x < 0) | (x >= k))):
        raise InvalidData(f"{owner}: inputs contain indices outside 0..{k - 1}", field="inputs")
    out = xp.broadcast_to(out, (*shape, d, 2))
    same = xp.broadcast_to(same, shape)
    buckets, bits = out[..., 0], out[..., 1]
    ordered = xp.sort(buckets, axis=-1)
    valid = (
        same
        & xp.all((buckets >= 0) & (buckets < k), axis=-1)
        & xp.all((bits >= 0) & (bits < 2), axis=-1)
        & xp.all(ordered[..., 1:] != ordered[..., :-1], axis=-1)
    )
    hit = buckets == xp.expand_dims(xp.broadcast_to(x, shape), axis=-1)
    flips = xp.sum(xp.astype((bits == 1) != hit, xp.int64), axis=-1)
    log_flip, log_keep, draws = log_terms
    total = (
        xp.astype(flips, xp.float64) * log_flip
        + xp.astype(d - flips, xp.float64) * log_keep
        - draws
    )
    return xp.where(valid, total, xp.asarray(-math.inf, dtype=xp.float64, device=device))
