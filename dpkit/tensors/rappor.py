"""RAPPOR on an accelerator's arrays: the CPU's law and report format, one collection.

The law is the CPU path's (Erlingsson, Pihur & Korolova 2014, "RAPPOR: Randomized Aggregatable
Privacy-Preserving Ordinal Response", CCS, §3; the plugin ``rappor``): a device draws its cohort
c uniform on [m] (:func:`~dpkit.tensors.device_random.uniform_below`), sets the Bloom bits
h_{c·h + i}(x) for i < h (the host's keyed hash of an integer item, bit for bit:
:func:`~dpkit.tensors.siphash.keyed_buckets`), replaces each bit by a fair coin with probability
f (the permanent randomized response, PRR) and reports, T times, each bit of the PRR as 1 with
probability q where it is 1 and p where it is 0 (the instantaneous randomized response, IRR).
f, p and q are the mechanism's realised values, multiples of 2⁻³² (F, P, Q)/2³², so 32-bit words
decide them exactly: the coin replaces the bit when w < F and is w′ < 2³¹; the report bit is
w″ < Q or w″ < P. The CPU draws the on and off bits of the IRR both and keeps one; here one word
decides the one kept: the same law. The mechanism's ``log_probability``, ε statements and
estimator hold unchanged.

**Words.** For n items and k bits: n words draw the cohorts (block 0 on); then bit u of item i
takes word i·k + u of the next n·k for its replacement and of the n·k after for its coin, and
report t takes the n·k after those (t = 0, 1, …), each draw from a fresh block.

**Reports** are the CPU's: a ``uint64`` row of the cohort and the k bits packed little-endian
into ⌈k/64⌉ words, shape ``values.shape + (1 + ⌈k/64⌉,)`` or, with T > 1 reports built from one
PRR, ``values.shape + (T, 1 + ⌈k/64⌉)``. The PRR itself is not kept: a device that reports again
later keeps its memo on the host (``RapporClient``).

**Scoring** (:func:`rappor_log_operands`). The mechanism's ``log_probability`` of reports on the
device counts there the reports with each bit set and builds the item's Bloom filter in the
reports' cohort (the same keyed hash), and marks where the host scores −inf (a cohort ≥ m, T
reports naming two cohorts, bits set beyond k); the plugin applies the host's own
namespace-generic formula to them (a ``logaddexp`` per bit, then a sum), so the device's value
is the host's up to its ``logaddexp`` and its summation order: within the bound of
docs/tensors.md.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpkit.errors import InvalidData
from dpkit.tensors.device_random import below, device_words, require_64_bit, uniform_below
from dpkit.tensors.hashing import _join, _split
from dpkit.tensors.libraries import ArrayLibrary
from dpkit.tensors.siphash import keyed_buckets
from dpkit.tensors.sketch import _index, _words64, check_integer_items, pack_bits

__all__ = ["rappor_log_operands", "rappor_reports"]

_HALF = 1 << 31


def rappor_reports(
    library: ArrayLibrary,
    values: Any,
    *,
    key: bytes,
    cohorts: int,
    hashes: int,
    bits: int,
    grid: tuple[int, int, int],
    repeats: int,
    rng: Any,
    owner: str,
    field: str = "values",
) -> Any:
    """RAPPOR reports of integer items ``values``, ``uint64``, on their device; ``grid`` =
    (F, P, Q), the realised f, p and q times 2³²."""
    require_64_bit(library, owner=owner, field=field)  # decided by the library, before values
    check_integer_items(library, values, owner=owner, field=field)
    words = device_words(library, rng, owner=owner)
    xp, device = library.xp, library.device
    x = xp.reshape(xp.astype(values, xp.int64), (-1,))
    n = int(x.shape[0])
    cohort = xp.astype(uniform_below(words, n, cohorts), xp.int64)
    positions = xp.reshape(xp.arange(bits, dtype=xp.int64, device=device), (1, bits))
    bloom = xp.zeros((n, bits), dtype=xp.bool, device=device)
    for i in range(hashes):
        position = keyed_buckets(library, key, cohort * hashes + i, x, bits)
        bloom = bloom | (positions == xp.reshape(position, (n, 1)))
    f, p, q = grid
    replace = below(xp, xp.reshape(words.take(n * bits), (n, bits)), f)
    coin = below(xp, xp.reshape(words.take(n * bits), (n, bits)), _HALF)
    permanent = xp.where(replace, coin, bloom)
    head = xp.reshape(_join(library, xp.zeros_like(cohort), cohort), (n, 1))
    reports = []
    for _ in range(repeats):
        drawn = xp.reshape(words.take(n * bits), (n, bits))
        sent = xp.where(permanent, below(xp, drawn, q), below(xp, drawn, p))
        reports.append(xp.concat([head, pack_bits(library, sent)], axis=1))
    out = reports[0] if repeats == 1 else xp.stack(reports, axis=1)
    if library.name == "torch":
        out = out.view(xp.uint64)
    width = 1 + -(-bits // 64)
    shape = (width,) if repeats == 1 else (repeats, width)
    return xp.reshape(out, (*tuple(values.shape), *shape))


def _unpacked(library: ArrayLibrary, words: Any, count: int) -> Any:
    """Rows of ``count`` 64-bit words → their 64·count bits (``int64`` 0/1), little-endian."""
    xp, device = library.xp, library.device
    shifts = xp.reshape(xp.arange(32, dtype=xp.int64, device=device), (1, 32))
    pieces = []
    for w in range(count):
        high, low = _split(library, words[:, w])
        for half in (low, high):
            pieces.append((xp.reshape(xp.astype(half, xp.int64), (-1, 1)) >> shifts) & 1)
    return xp.concat(pieces, axis=1)


def rappor_log_operands(
    library: ArrayLibrary,
    outputs: Any,
    items: Any,
    *,
    key: bytes,
    cohorts: int,
    hashes: int,
    bits: int,
    repeats: int,
    owner: str,
) -> tuple[Any, Any, Any, tuple[int, ...]]:
    """What RAPPOR's log P[reports | x] is computed from, on the device of the reports (…, 1 +
    ⌈k/64⌉) (T = ``repeats`` = 1) or (…, T, 1 + ⌈k/64⌉) and the integer items x (broadcasting
    over …): (c, B, valid, shape) with c (n, k) ``int64`` the reports with each bit set, B (n, k)
    the item's Bloom filter in the reports' cohort (the host's keyed hash,
    :func:`~dpkit.tensors.siphash.keyed_buckets`), as booleans, and valid (n,) false where the
    host scores −inf: a cohort ≥ m, T reports not naming one cohort, bits set beyond k.

    Refused before any value is read, naming the field: reports not integers or booleans, or
    of another last axis (or, for T > 1, another last but one) (``outputs``); items not
    integer items (``inputs``: :func:`~dpkit.tensors.sketch.check_integer_items`; an empty
    array of any dtype is accepted, as on the host); shapes that do not broadcast (numpy's
    error)."""
    xp, device = library.xp, library.device
    count = -(-bits // 64)
    layout = "the cohort and the ⌈k/64⌉ words of the bits"
    words = _words64(library, outputs, 1 + count, layout, owner=owner)
    if repeats > 1 and (len(tuple(outputs.shape)) < 2 or int(outputs.shape[-2]) != repeats):
        raise InvalidData(
            f"{owner}: outputs must have shape (..., {repeats}, {1 + count}): the {repeats} "
            f"reports of one item, each {layout}; got shape {tuple(outputs.shape)}",
            field="outputs",
        )
    if 0 not in tuple(items.shape):  # an empty array of any dtype, as on the host
        check_integer_items(library, items, owner=owner, field="inputs")
    if repeats == 1:
        words = xp.reshape(words, (*tuple(outputs.shape[:-1]), 1, 1 + count))
    head = tuple(words.shape[:-2])
    shape = tuple(np.broadcast_shapes(head, tuple(items.shape)))
    rows = xp.reshape(
        xp.broadcast_to(words, (*shape, repeats, 1 + count)), (-1, repeats, 1 + count)
    )
    x = xp.reshape(xp.broadcast_to(xp.astype(items, xp.int64), shape), (-1,))
    n = int(x.shape[0])
    valid, cohort = _index(library, rows[:, 0, 0], cohorts)
    for t in range(1, repeats):
        valid = valid & (rows[:, t, 0] == rows[:, 0, 0])
    cohort = xp.where(valid, cohort, xp.zeros_like(cohort))
    positions = xp.reshape(xp.arange(bits, dtype=xp.int64, device=device), (1, bits))
    bloom = xp.zeros((n, bits), dtype=xp.bool, device=device)
    for i in range(hashes):
        position = keyed_buckets(library, key, cohort * hashes + i, x, bits)
        bloom = bloom | (positions == xp.reshape(position, (n, 1)))
    ones = xp.zeros((n, bits), dtype=xp.int64, device=device)
    for t in range(repeats):
        unpacked = _unpacked(library, rows[:, t, 1:], count)
        if bits % 64:
            valid = valid & xp.logical_not(xp.any(unpacked[:, bits:] != 0, axis=1))
        ones = ones + unpacked[:, :bits]
    return ones, bloom, valid, shape
