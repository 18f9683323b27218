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
"""

from __future__ import annotations

from typing import Any

from dpkit.tensors.device_random import below, device_words, require_64_bit, uniform_below
from dpkit.tensors.hashing import _join
from dpkit.tensors.libraries import ArrayLibrary
from dpkit.tensors.siphash import keyed_buckets
from dpkit.tensors.sketch import check_integer_items, pack_bits

__all__ = ["rappor_reports"]

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
