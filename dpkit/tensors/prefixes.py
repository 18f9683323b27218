"""The prefix extending method's reports on an accelerator's arrays: the CPU's hash and law.

The law is the CPU path's (Wang, Li & Jha 2021, "Locally Differentially Private Heavy Hitter
Identification", IEEE TDSC 18(2), §5; the plugin ``pem``): a device holding an L-bit item x
joins round t uniform on [g] (:func:`~dpkit.tensors.device_random.uniform_below`), draws a₁,
a₂, b uniform on 2⁶⁴ and hashes the s_t-bit prefix p = x >> (L − s_t) with the vector
multiply-shift of Thorup 2015 ("High Speed Hashing for Integers and Strings"),

    H(p) = ((((a₁·p_lo + a₂·p_hi + b) mod 2⁶⁴) >> 32)·g′) >> 32,

then reports y = H(p) unless a 64-bit word is below the mechanism's lie threshold T
(:func:`~dpkit.tensors.duchi.below_64`: the CPU's T/2⁶⁴, exactly), in which case y is uniform
over the g′ − 1 other values (``uniform_below``, shifted past H(p)). The hash is computed on
32-bit halves with :func:`~dpkit.tensors.hashing.multiply_wide` in ``int64`` (every
intermediate below 2³⁴: exact), so H is the CPU's bit for bit and the CPU's estimator reads the
reports (t, a₁, a₂, b, y), ``uint64`` as on the CPU.

**Words.** For n items: n words draw the rounds (block 0 on); the next 6n are the seeds, report
i taking words 6i … 6i + 5 as (a₁ high, a₁ low, a₂ high, a₂ low, b high, b low); the next 2n
are the lie words (high, low); then the other values (each draw from a fresh block).

**Items** are integers in [0, 2ᴸ) (the CPU's integer items; text and bytes stay on the host):
a signed integer array, or an unsigned one (uint64 holds L = 64). One pass refuses the others
before any word is drawn, without quoting a value.

**Scoring** (:func:`prefix_log_probability`): the mechanism's ``log_probability`` of reports
and items on the device hashes the report's round's prefix of each item with the report's
seeds, the same H bit for bit, and selects between the host's two constants (y = H or not):
the host's numbers to the bit. :func:`scored_items` reads the operands (TreeHist's too).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpkit.errors import InvalidData
from dpkit.tensors.device_random import device_words, require_64_bit, uniform_below
from dpkit.tensors.duchi import below_64
from dpkit.tensors.hashing import _join, _split, multiply_wide
from dpkit.tensors.libraries import ArrayLibrary
from dpkit.tensors.sketch import _index, _words64

__all__ = ["prefix_log_probability", "prefix_reports", "vector_multiply_shift_words"]

_MASK = (1 << 32) - 1


def _check_item_dtype(
    library: ArrayLibrary, values: Any, bits: int, *, owner: str, field: str
) -> None:
    """Refuse anything but integers as L-bit items (decided by the dtype alone)."""
    if not library.xp.isdtype(values.dtype, "integral"):
        raise InvalidData(
            f"{owner}: {field} on a device must be integer {bits}-bit items, got a "
            f"{library.name} array of {values.dtype}; encode text or bytes on the host",
            field=field,
        )


def _halves(library: ArrayLibrary, values: Any, bits: int, *, owner: str, field: str) -> Any:
    """(high, low) ``int64`` halves of L-bit integer items, or an :class:`InvalidData`."""
    xp = library.xp
    _check_item_dtype(library, values, bits, owner=owner, field=field)
    flat = xp.reshape(values, (-1,))
    signed = xp.isdtype(values.dtype, "signed integer")
    negative = flat < 0 if signed else xp.zeros(flat.shape, dtype=xp.bool, device=library.device)
    wide = flat if values.dtype in (xp.int64, xp.uint64) else xp.astype(flat, xp.int64)
    high, low = (xp.astype(half, xp.int64) for half in _split(library, wide))
    if bits >= 64:
        outside = negative
    elif bits >= 32:
        outside = negative | ((high >> (bits - 32)) != 0)
    else:
        outside = negative | (high != 0) | ((low >> bits) != 0)
    if bool(xp.any(outside)):
        raise InvalidData(
            f"{owner}: {field} contain values outside the {bits}-bit items 0..{(1 << bits) - 1}",
            field=field,
        )
    return high, low


def _shift_right(xp: Any, high: Any, low: Any, shift: Any) -> tuple[Any, Any]:
    """(high, low) of the 64-bit value shifted right by ``shift`` ∈ [0, 63] (per element)."""
    big = shift >= 32
    small = xp.where(big, xp.zeros_like(shift), shift)
    spill = high & ((xp.ones_like(shift) << small) - 1)  # the bits moving into the low half
    low_small = (low >> small) | (spill << (32 - small))
    high_small = high >> small
    low_big = high >> xp.where(big, shift - 32, xp.zeros_like(shift))
    return (
        xp.where(big, xp.zeros_like(high), high_small),
        xp.where(big, low_big, low_small & _MASK),
    )


def _product_low64(a_high: Any, a_low: Any, x: Any) -> tuple[Any, Any]:
    """(high, low) of (a·x) mod 2⁶⁴ for a 64-bit a (halves) and x < 2³²."""
    carry, low = multiply_wide(a_low, x)
    _, cross = multiply_wide(a_high, x)
    return (carry + cross) & _MASK, low


def vector_multiply_shift_words(
    a1_high: Any,
    a1_low: Any,
    a2_high: Any,
    a2_low: Any,
    b_high: Any,
    b_low: Any,
    x_high: Any,
    x_low: Any,
    g: int,
) -> Any:
    """H(x) = ((((a₁·x_lo + a₂·x_hi + b) mod 2⁶⁴) >> 32)·g) >> 32 from 32-bit halves in
    ``int64`` (g < 2³²): the top half of the sum is the products' top halves, b's and the
    carry of the low halves' sum (below 3·2³²)."""
    h1, l1 = _product_low64(a1_high, a1_low, x_low)
    h2, l2 = _product_low64(a2_high, a2_low, x_high)
    total_low = l1 + l2 + b_low
    top = (h1 + h2 + b_high + (total_low >> 32)) & _MASK
    hashed, _ = multiply_wide(top, g)
    return hashed


def prefix_reports(
    library: ArrayLibrary,
    values: Any,
    *,
    bits: int,
    prefix_bits: tuple[int, ...],
    g: int,
    lie_threshold64: int,
    rng: Any,
    owner: str,
    field: str = "values",
) -> Any:
    """PEM reports (t, a₁, a₂, b, y) of L-bit integer items ``values`` (shape s → s + (5,)),
    ``uint64``, on their device; ``prefix_bits`` = (s_0, s_1, …), ``g`` = g′."""
    require_64_bit(library, owner=owner, field=field)  # decided by the library, before values
    words = device_words(library, rng, owner=owner)  # the rng checked; no word drawn yet
    high, low = _halves(library, values, bits, owner=owner, field=field)
    xp, device = library.xp, library.device
    n = int(high.shape[0])
    group = xp.astype(uniform_below(words, n, len(prefix_bits)), xp.int64)
    seeds = xp.reshape(xp.astype(words.take(6 * n), xp.int64), (n, 6))
    lie_words = xp.reshape(xp.astype(words.take(2 * n), xp.int64), (n, 2))
    lie = below_64(xp, lie_words[:, 0], lie_words[:, 1], lie_threshold64)
    lengths = xp.asarray(list(prefix_bits), dtype=xp.int64, device=device)
    shift = bits - xp.take(lengths, group)
    p_high, p_low = _shift_right(xp, high, low, shift)
    a1_high, a1_low, a2_high, a2_low, b_high, b_low = (seeds[:, c] for c in range(6))
    hashed = vector_multiply_shift_words(
        a1_high, a1_low, a2_high, a2_low, b_high, b_low, p_high, p_low, g
    )
    other = xp.astype(uniform_below(words, n, g - 1), xp.int64)
    other = other + xp.astype(other >= hashed, xp.int64)  # the g′ − 1 values other than H(p)
    y = xp.where(lie, other, hashed)
    zero = xp.zeros_like(y)
    columns = [
        _join(library, zero, group),
        _join(library, seeds[:, 0], seeds[:, 1]),
        _join(library, seeds[:, 2], seeds[:, 3]),
        _join(library, seeds[:, 4], seeds[:, 5]),
        _join(library, zero, y),
    ]
    reports = xp.stack(columns, axis=1)
    if library.name == "torch":
        reports = reports.view(xp.uint64)
    return xp.reshape(reports, (*tuple(values.shape), 5))


def scored_items(
    library: ArrayLibrary, outputs: Any, items: Any, *, bits: int, layout: str, owner: str
) -> tuple[Any, Any, Any, tuple[int, ...]]:
    """(report rows (n, 5) of 64-bit words, the items' ``int64`` high and low halves (n,), the
    broadcast shape) of ``log_probability``'s operands: reports (…, 5) and L-bit integer items
    broadcasting over …. Decided before any value is read: the reports integers or booleans
    with the report's last axis (``outputs``), the items integers (``inputs``; an empty array
    of any dtype, as on the host), numpy's broadcast. Then the items are read, and refused
    outside [0, 2ᴸ) as the host refuses them (``inputs``, no value quoted)."""
    xp, device = library.xp, library.device
    words = _words64(library, outputs, 5, layout, owner=owner)
    if 0 not in tuple(items.shape):
        _check_item_dtype(library, items, bits, owner=owner, field="inputs")
    shape = tuple(np.broadcast_shapes(tuple(outputs.shape[:-1]), tuple(items.shape)))
    if 0 in tuple(items.shape):
        items = xp.zeros(tuple(items.shape), dtype=xp.int64, device=device)
    high, low = _halves(library, items, bits, owner=owner, field="inputs")
    rows = xp.reshape(xp.broadcast_to(words, (*shape, 5)), (-1, 5))
    high, low = (
        xp.reshape(xp.broadcast_to(xp.reshape(half, tuple(items.shape)), shape), (-1,))
        for half in (high, low)
    )
    return rows, high, low, shape


def prefix_log_probability(
    library: ArrayLibrary,
    outputs: Any,
    items: Any,
    *,
    bits: int,
    prefix_bits: tuple[int, ...],
    g: int,
    log_terms: tuple[float, float],
    owner: str,
) -> Any:
    """PEM's log P[(t, a₁, a₂, b, y) | x] of reports (…, 5) and L-bit integer items x
    (broadcasting over …), float64 on their device: ``log_terms`` = (base + ln p*,
    base + ln((1 − p*)/(g′ − 1))) as the host computes them, the first where y = H(prefix_t(x))
    (the vector multiply-shift of :func:`vector_multiply_shift_words`, the host's bit for bit),
    the second elsewhere; −inf for a round t ≥ g or a y ≥ g′ (any 64-bit word, a negative
    integer read in two's complement as the host's cast to ``uint64`` reads it). Refused as
    :func:`scored_items` says."""
    xp, device = library.xp, library.device
    rows, high, low, shape = scored_items(
        library, outputs, items, bits=bits, layout="t, a₁, a₂, b and y", owner=owner
    )
    valid_t, group = _index(library, rows[:, 0], len(prefix_bits))
    valid_y, y = _index(library, rows[:, 4], g)
    lengths = xp.asarray(list(prefix_bits), dtype=xp.int64, device=device)
    shift = bits - xp.take(lengths, xp.where(valid_t, group, xp.zeros_like(group)))
    p_high, p_low = _shift_right(xp, high, low, shift)
    (a1_high, a1_low), (a2_high, a2_low), (b_high, b_low) = (
        (xp.astype(half, xp.int64) for half in _split(library, rows[:, column]))
        for column in (1, 2, 3)
    )
    hashed = vector_multiply_shift_words(
        a1_high, a1_low, a2_high, a2_low, b_high, b_low, p_high, p_low, g
    )
    kept, other = (xp.asarray(term, dtype=xp.float64, device=device) for term in log_terms)
    minus = xp.asarray(-float("inf"), dtype=xp.float64, device=device)
    log_p = xp.where(hashed == y, kept, other)
    return xp.reshape(xp.where(valid_t & valid_y, log_p, minus), shape)
