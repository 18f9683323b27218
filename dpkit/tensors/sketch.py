"""Apple's count mean sketches (cms, hcms) on an accelerator's arrays: the CPU's laws and report
formats.

The law is the CPU path's (Apple Differential Privacy Team 2017, "Learning with Privacy at
Scale", Algorithm 1; the plugin ``cms``): a device holding item x draws j uniform on [k]
(:func:`~dpkit.tensors.device_random.uniform_below`, exactly uniform), hashes x with the
host's keyed family (:func:`~dpkit.tensors.siphash.keyed_buckets`: an integer item hashes as
its decimal text, as on the host), and reports j and m bits, bit u = 1{u = h_j(x)} flipped
with probability φ = a/2ᵇ, the mechanism's realised φ (b ≤ 32), decided by a 32-bit word
below a·2³²⁻ᵇ: exactly φ, as on the CPU (whose bits come from another construction of the
same Bernoulli law), so the mechanism's ``log_probability`` and estimator hold unchanged.

**Words.** For n items: words 0 … n − 1 of the call's stream (with fresh ones for the rare
rejected word) draw the rows j; bit u of report i takes word i·m + u of the next n·m, from a
fresh block.

**hcms** (Algorithm 3; the plugin ``hcms``): j as above, l uniform on [K] from the low bits of
a word (K a power of two divides 2³²: exactly uniform), y = 1 when the Hadamard entry
(−1)^{popcount(h_j(x) & l)} is +1, flipped when a 64-bit word is below the mechanism's
threshold T (:func:`~dpkit.tensors.duchi.below_64`, on 32-bit halves): φ = T/2⁶⁴, the CPU's.
Words: n for j (from block 0), n for l, then 2n for the flips (each draw from a fresh block);
reports (j, l, y), ``uint64``.

**Reports** are the CPU's rows of ``uint64`` (torch: a ``torch.uint64`` tensor): j, then the
m bits packed little-endian into ⌈m/64⌉ words (bit u in word u div 64 at bit u mod 64), so
either path's estimator reads the other's. The counts (per row j, the reports with bit u set;
the reports of each row) are made on the device in passes; only those k·(m + 1) numbers come
back.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpkit.errors import InvalidData
from dpkit.tensors.categories import category_counts
from dpkit.tensors.device_random import below, device_words, require_64_bit, uniform_below
from dpkit.tensors.duchi import below_64
from dpkit.tensors.hadamard import odd_parity
from dpkit.tensors.hashing import _join, _split
from dpkit.tensors.libraries import ArrayLibrary
from dpkit.tensors.siphash import keyed_buckets

__all__ = [
    "check_integer_items",
    "hadamard_sketch_counts",
    "hadamard_sketch_log_probability",
    "hadamard_sketch_reports",
    "pack_bits",
    "sketch_counts",
    "sketch_log_probability",
    "sketch_reports",
]

_CELLS = 1 << 22  # (report, bit) cells per pass: bounds the device temporaries


def check_integer_items(library: ArrayLibrary, values: Any, *, owner: str, field: str) -> None:
    """Refuse anything but signed integers or unsigned ones below 2³² (decided by the dtype:
    text and bytes cannot live on a device, and a uint64 above 2⁶³ has no int64 spelling)."""
    xp = library.xp
    allowed = xp.isdtype(values.dtype, "signed integer") or values.dtype in (
        xp.uint8,
        xp.uint16,
        xp.uint32,
    )
    if not allowed:
        raise InvalidData(
            f"{owner}: {field} on a device must be integer items (int8 to int64, or uint8 to "
            f"uint32; an integer is the item of its decimal text), got a {library.name} array "
            f"of {values.dtype}; hash text or bytes on the host",
            field=field,
        )


def pack_bits(library: ArrayLibrary, bits: Any) -> Any:
    """Rows of k booleans packed little-endian into ⌈k/64⌉ 64-bit words (bit u in word u div
    64 at bit u mod 64): ``uint64``, or torch's ``int64`` holding the same bits."""
    xp, device = library.xp, library.device
    n, k = (int(size) for size in bits.shape)
    count = -(-k // 64)
    padding = xp.zeros((n, 64 * count - k), dtype=xp.int64, device=device)
    padded = xp.concat([xp.astype(bits, xp.int64), padding], axis=1)
    positions = xp.arange(64 * count, dtype=xp.int64, device=device) % 32
    weights = xp.reshape(xp.asarray(1, dtype=xp.int64, device=device) << positions, (1, -1))
    halves = xp.sum(xp.reshape(padded * weights, (n, 2 * count, 32)), axis=2)
    return _join(library, halves[:, 1::2], halves[:, 0::2])


def sketch_reports(
    library: ArrayLibrary,
    values: Any,
    *,
    key: bytes,
    hashes: int,
    width: int,
    flip: tuple[int, int],
    rng: Any,
    owner: str,
    field: str = "values",
) -> Any:
    """cms reports of integer items ``values`` (shape s → s + (1 + ⌈m/64⌉,)), ``uint64``, on
    their device; ``flip`` = (a, b), φ = a/2ᵇ with b ≤ 32."""
    require_64_bit(library, owner=owner, field=field)  # decided by the library, before values
    check_integer_items(library, values, owner=owner, field=field)
    words = device_words(library, rng, owner=owner)
    xp, device = library.xp, library.device
    x = xp.reshape(xp.astype(values, xp.int64), (-1,))
    n = int(x.shape[0])
    row = xp.astype(uniform_below(words, n, hashes), xp.int64)
    hashed = keyed_buckets(library, key, row, x, width)
    numerator, bits = flip
    threshold = numerator << (32 - bits)
    count = -(-width // 64)
    positions = xp.reshape(xp.arange(width, dtype=xp.int64, device=device), (1, width))
    pieces = []
    per_pass = max(1, _CELLS // width)
    for start in range(0, n, per_pass):
        stop = min(n, start + per_pass)
        drawn = xp.reshape(words.take((stop - start) * width), (stop - start, width))
        flips = below(xp, drawn, threshold)
        truth = positions == xp.reshape(hashed[start:stop], (-1, 1))
        pieces.append(pack_bits(library, xp.not_equal(truth, flips)))
    zero = xp.zeros_like(row)
    head = xp.reshape(_join(library, zero, row), (-1, 1))
    if pieces:
        body = xp.concat(pieces, axis=0)
    else:
        body = xp.zeros((0, count), dtype=head.dtype, device=device)
    reports = xp.concat([head, body], axis=1)
    if library.name == "torch":
        reports = reports.view(xp.uint64)
    return xp.reshape(reports, (*tuple(values.shape), 1 + count))


def sketch_counts(
    library: ArrayLibrary,
    reports: Any,
    *,
    hashes: int,
    width: int,
    owner: str,
    field: str = "reports",
    row_name: str = "hash function",
    layout: str = "j and the ⌈m/64⌉ words of ṽ",
) -> tuple[NDArray[np.int64], NDArray[np.int64], int]:
    """(cells[j, u] = reports of row j with bit u set, reports per row, n) of reports of shape
    (..., 1 + ⌈m/64⌉): a row index, then m packed bits (cms; rappor's cohort and bits, with
    ``row_name`` and ``layout`` naming them in refusals), counted on the device."""
    xp, device = library.xp, library.device
    count = -(-width // 64)
    rows = _report_rows(library, reports, 1 + count, layout, owner=owner, field=field)
    row_high, row = _split(library, rows[:, 0])
    row_high, row = xp.astype(row_high, xp.int64), xp.astype(row, xp.int64)
    if bool(xp.any((row_high != 0) | (row >= hashes))):
        raise InvalidData(
            f"{owner}: {field} name a {row_name} outside 0..{hashes - 1}; were they produced "
            "with other parameters?",
            field=field,
        )
    n = int(rows.shape[0])
    halves = []
    for w in range(count):
        high, low = _split(library, rows[:, 1 + w])
        halves += [xp.astype(low, xp.int64), xp.astype(high, xp.int64)]
    packed = xp.stack(halves, axis=1)  # (n, 2·count): 32 bits each, bit u in half u div 32
    shifts = xp.reshape(xp.arange(32, dtype=xp.int64, device=device), (1, 1, 32))
    cells = np.zeros(hashes * width, dtype=np.int64)
    per_pass = max(1, _CELLS // (64 * count))
    outside = hashes * width  # where the unset bits are counted, and dropped
    for start in range(0, n, per_pass):
        stop = min(n, start + per_pass)
        bits = xp.reshape(
            (xp.reshape(packed[start:stop, ...], (-1, 2 * count, 1)) >> shifts) & 1,
            (stop - start, 64 * count),
        )
        if width % 64 and bool(xp.any(bits[:, width:] != 0)):
            raise InvalidData(
                f"{owner}: {field} set bits beyond bit {width - 1}; they were not produced "
                f"for m={width}",
                field=field,
            )
        u = xp.reshape(xp.arange(width, dtype=xp.int64, device=device), (1, width))
        cell = xp.reshape(row[start:stop], (-1, 1)) * width + u
        cell = xp.where(bits[:, :width] == 1, cell, xp.full_like(cell, outside))
        cells += category_counts(library, xp.reshape(cell, (-1,)), outside + 1, owner=owner)[:-1]
    per_row = category_counts(library, row, hashes, owner=owner)
    return cells.reshape(hashes, width), per_row, n


def hadamard_sketch_reports(
    library: ArrayLibrary,
    values: Any,
    *,
    key: bytes,
    hashes: int,
    width: int,
    columns: int,
    flip_threshold64: int,
    rng: Any,
    owner: str,
    field: str = "values",
) -> Any:
    """hcms reports (j, l, y) of integer items ``values`` (shape s → s + (3,)), ``uint64``, on
    their device: y = 1 when H[h_j(x), l] = +1, flipped when a 64-bit word is below
    ``flip_threshold64``."""
    require_64_bit(library, owner=owner, field=field)  # decided by the library, before values
    check_integer_items(library, values, owner=owner, field=field)
    words = device_words(library, rng, owner=owner)
    xp = library.xp
    x = xp.reshape(xp.astype(values, xp.int64), (-1,))
    n = int(x.shape[0])
    row = xp.astype(uniform_below(words, n, hashes), xp.int64)
    column = xp.astype(words.take(n), xp.int64) & (columns - 1)  # K divides 2³²: uniform
    halves = xp.reshape(xp.astype(words.take(2 * n), xp.int64), (n, 2))
    flips = below_64(xp, halves[:, 0], halves[:, 1], flip_threshold64)
    hashed = keyed_buckets(library, key, row, x, width)
    plus = xp.logical_not(odd_parity(hashed & column))  # H[h, l] = +1
    y = xp.astype(xp.not_equal(plus, flips), xp.int64)
    zero = xp.zeros_like(row)
    reports = xp.stack([_join(library, zero, part) for part in (row, column, y)], axis=1)
    if library.name == "torch":
        reports = reports.view(xp.uint64)
    return xp.reshape(reports, (*tuple(values.shape), 3))


def hadamard_sketch_counts(
    library: ArrayLibrary,
    reports: Any,
    *,
    hashes: int,
    columns: int,
    owner: str,
    field: str = "reports",
) -> tuple[NDArray[np.int64], NDArray[np.int64], int]:
    """(cells[j, l] = Σ ±1 of the reports of row j at column l, reports per row, n) of hcms
    reports of shape (..., 3), counted on the device as the 2kK cells 2(jK + l) + y."""
    xp = library.xp
    rows = _report_rows(library, reports, 3, "j, l and the bit y", owner=owner, field=field)
    parts = []
    for index, (limit, name) in enumerate(((hashes, "j"), (columns, "l"), (2, "y"))):
        high, low = _split(library, rows[:, index])
        high, low = xp.astype(high, xp.int64), xp.astype(low, xp.int64)
        if bool(xp.any((high != 0) | (low >= limit))):
            raise InvalidData(
                f"{owner}: {field} hold a {name} outside 0..{limit - 1}; were they produced "
                "with another k or m?",
                field=field,
            )
        parts.append(low)
    row, column, y = parts
    cells = category_counts(
        library, 2 * (row * columns + column) + y, 2 * hashes * columns, owner=owner
    )
    plus, total = cells[1::2], cells[0::2] + cells[1::2]
    per_row = category_counts(library, row, hashes, owner=owner)
    return (2 * plus - total).reshape(hashes, columns), per_row, int(rows.shape[0])


def _report_rows(
    library: ArrayLibrary, reports: Any, columns: int, layout: str, *, owner: str, field: str
) -> Any:
    """``reports`` as rows of ``columns`` 64-bit integers (uint64 kept, other integers as int64),
    refused (typed, naming ``field``) for another shape or dtype, before any value is read."""
    xp = library.xp
    shape = tuple(reports.shape)
    if not shape or shape[-1] != columns:
        raise InvalidData(
            f"{owner}: {field} must have shape (..., {columns}): {layout}; got shape {shape}",
            field=field,
        )
    if not xp.isdtype(reports.dtype, "integral"):
        raise InvalidData(
            f"{owner}: {field} must be 64-bit integers, got a {library.name} array of "
            f"{reports.dtype}",
            field=field,
        )
    require_64_bit(library, owner=owner, field=field)
    return xp.reshape(
        xp.astype(reports, xp.int64) if reports.dtype != xp.uint64 else reports, (-1, columns)
    )


def _words64(library: ArrayLibrary, outputs: Any, columns: int, layout: str, *, owner: str) -> Any:
    """``outputs`` as rows of ``columns`` 64-bit words, for scoring: integers or booleans only
    and the report's last axis, refused (field ``outputs``) from the dtype and shape alone."""
    xp = library.xp
    shape = tuple(outputs.shape)
    if not xp.isdtype(outputs.dtype, ("bool", "integral")):
        raise InvalidData(
            f"{owner}: outputs must be integer reports ({layout}), got a {library.name} array "
            f"of {outputs.dtype}",
            field="outputs",
        )
    if not shape or shape[-1] != columns:
        raise InvalidData(
            f"{owner}: outputs must have shape (..., {columns}): {layout}; got shape {shape}",
            field="outputs",
        )
    if library.name == "torch" and outputs.dtype == xp.uint64:
        return outputs.view(xp.int64)  # the same bits, with arithmetic
    return outputs if outputs.dtype == xp.uint64 else xp.astype(outputs, xp.int64)


def _score_operands(
    library: ArrayLibrary, outputs: Any, items: Any, columns: int, layout: str, *, owner: str
) -> tuple[Any, Any, tuple[int, ...]]:
    """(report rows, int64 items, shape): the host's checks in its order (outputs' dtype and
    shape, then the items' dtype, then numpy's broadcast), before any value is read."""
    xp = library.xp
    words = _words64(library, outputs, columns, layout, owner=owner)
    if 0 not in tuple(items.shape):  # an empty array of any dtype, as on the host
        check_integer_items(library, items, owner=owner, field="inputs")
    shape = tuple(np.broadcast_shapes(tuple(outputs.shape[:-1]), tuple(items.shape)))
    rows = xp.reshape(xp.broadcast_to(words, (*shape, columns)), (-1, columns))
    x = xp.reshape(xp.broadcast_to(xp.astype(items, xp.int64), shape), (-1,))
    return rows, x, shape


def _index(library: ArrayLibrary, words64: Any, limit: int) -> tuple[Any, Any]:
    """(whether each 64-bit word is below ``limit``, its low half as int64)."""
    xp = library.xp
    high, low = _split(library, words64)
    high, low = xp.astype(high, xp.int64), xp.astype(low, xp.int64)
    return (high == 0) & (low < limit), low


def _popcount32(words: Any) -> Any:
    """The set bits of int64 words below 2³² (SWAR: pairs, nibbles, bytes, then a multiply
    that sums the four bytes into the top one; every step exact in int64)."""
    words = words - ((words >> 1) & 0x55555555)
    words = (words & 0x33333333) + ((words >> 2) & 0x33333333)
    words = (words + (words >> 4)) & 0x0F0F0F0F
    return ((words * 0x01010101) & 0xFFFFFFFF) >> 24


def sketch_log_probability(
    library: ArrayLibrary,
    outputs: Any,
    items: Any,
    *,
    key: bytes,
    hashes: int,
    width: int,
    log_terms: tuple[float, float, float],
    owner: str,
) -> Any:
    """cms's log P[(j, ṽ) | x] of reports (…, 1 + ⌈m/64⌉) and integer items x (broadcasting
    over …), float64 on their device, by the CPU's operations: with D the bits of ṽ differing
    from the one-hot vector of h_j(x) (the host's keyed hash, :func:`keyed_buckets`) and
    ``log_terms`` = (ln k, ln φ, ln(1 − φ)), (−ln k + D·ln φ) + (m − D)·ln(1 − φ); −inf for
    a j ≥ k or bits beyond m. Refused before any value is read: reports not integers or
    booleans or of another last axis (``outputs``), items not integers (``inputs``)."""
    xp, device = library.xp, library.device
    count = -(-width // 64)
    rows, x, shape = _score_operands(
        library, outputs, items, 1 + count, "j and the ⌈m/64⌉ words of ṽ", owner=owner
    )
    valid, row = _index(library, rows[:, 0], hashes)
    hashed = keyed_buckets(library, key, xp.where(valid, row, xp.zeros_like(row)), x, width)
    half, bit = hashed >> 5, hashed & 31  # the one-hot bit: half u div 32, bit u mod 32
    one = xp.asarray(1, dtype=xp.int64, device=device)
    differ = xp.zeros_like(row)
    for w in range(count):
        high, low = _split(library, rows[:, 1 + w])
        for offset, part in ((0, low), (1, high)):
            part = xp.astype(part, xp.int64)
            hot = xp.where(half == 2 * w + offset, one << bit, xp.zeros_like(bit))
            differ = differ + _popcount32(part ^ hot)
            kept = width - 32 * (2 * w + offset)  # this half's bits below m
            if kept < 32:
                spare = 0xFFFFFFFF & ~((1 << max(kept, 0)) - 1)
                valid = valid & ((part & spare) == 0)
    log_k, log_flip, log_keep = log_terms
    log_p = (-log_k + xp.astype(differ, xp.float64) * log_flip) + xp.astype(
        width - differ, xp.float64
    ) * log_keep
    minus = xp.asarray(-float("inf"), dtype=xp.float64, device=device)
    return xp.reshape(xp.where(valid, log_p, minus), shape)


def hadamard_sketch_log_probability(
    library: ArrayLibrary,
    outputs: Any,
    items: Any,
    *,
    key: bytes,
    hashes: int,
    width: int,
    columns: int,
    log_terms: tuple[float, float],
    owner: str,
) -> Any:
    """hcms's log P[(j, l, y) | x] of reports (…, 3) and integer items x, float64 on their
    device: ``log_terms`` = (base + ln(1 − φ), base + ln φ), base = −ln k − ln K, the first
    where y is H[h_j(x), l] (the host's keyed hash), the second elsewhere; −inf for a j ≥ k,
    l ≥ K or y ≥ 2. Refused as :func:`sketch_log_probability` is."""
    xp, device = library.xp, library.device
    rows, x, shape = _score_operands(library, outputs, items, 3, "j, l and the bit y", owner=owner)
    valid_j, row = _index(library, rows[:, 0], hashes)
    valid_l, column = _index(library, rows[:, 1], columns)
    valid_y, y = _index(library, rows[:, 2], 2)
    hashed = keyed_buckets(library, key, xp.where(valid_j, row, xp.zeros_like(row)), x, width)
    agree = xp.logical_not(odd_parity(hashed & column)) == (y == 1)
    keep, flip = (xp.asarray(term, dtype=xp.float64, device=device) for term in log_terms)
    minus = xp.asarray(-float("inf"), dtype=xp.float64, device=device)
    log_p = xp.where(agree, keep, flip)
    return xp.reshape(xp.where(valid_j & valid_l & valid_y, log_p, minus), shape)
