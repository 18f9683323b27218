"""TreeHist's reports on an accelerator's arrays: the CPU's law, exactly.

The law is the CPU path's (Bassily, Nissim, Stemmer & Thakurta 2017, "Practical Locally Private
Heavy Hitters", NeurIPS, §3; the plugin ``treehist``): a device holding an L-bit item x joins
level t uniform on [levels] (:func:`~dpkit.tensors.device_random.uniform_below`) and reports
its s_t-bit prefix v = x >> (L − s_t) by the Hadamard response: r uniform on [2^{s_t}] (a
uniform 64-bit word masked to s_t bits, as on the CPU) and y = 1{H[r, v] = +1} flipped when a
64-bit word is below T_tree = ``lie_threshold(ε_tree, 2)``; then its whole item the same way
(r′ on [2ᴸ], flipped below T_final). H[r, v] = (−1)^{popcount(r & v)}: the parity of the 64-bit
AND is the parity of its two 32-bit halves' ANDs, each folded in ``int64`` (exact). The flips
are compared with the CPU's thresholds on 32-bit halves (:func:`~dpkit.tensors.duchi.below_64`),
so each part's flip probability is T/2⁶⁴ as on the CPU, and the mechanism's ``log_probability``,
privacy statement and estimator hold for these reports unchanged.

**Words.** For n items: n words draw the levels (block 0 on); then four runs of 2n words, each
starting on a fresh block, report i taking words 2i (high half) and 2i + 1 (low half) of each:
r, the tree flip word, r′, the final flip word.

**Items** are integers in [0, 2ᴸ) (the CPU's integer items; text and bytes stay on the host),
refused otherwise in one pass before any word is drawn, without quoting a value. **Reports**
are the CPU's rows (t, r, y, r′, y′), ``uint64`` (torch: a ``torch.uint64`` tensor).

**Scoring** (:func:`tree_log_probability`): the mechanism's ``log_probability`` of reports and
items on the device takes the same parities of the same prefixes and adds the host's constants
in the host's order (the level's base, then the tree part's, then the final part's): the host's
numbers to the bit.
"""

from __future__ import annotations

from typing import Any

from dpkit.tensors.device_random import DeviceWords, device_words, require_64_bit, uniform_below
from dpkit.tensors.duchi import below_64
from dpkit.tensors.hadamard import odd_parity
from dpkit.tensors.hashing import _join, _split
from dpkit.tensors.libraries import ArrayLibrary
from dpkit.tensors.prefixes import _halves, _shift_right, scored_items
from dpkit.tensors.sketch import _index

__all__ = ["tree_log_probability", "tree_reports"]


def _masks(xp: Any, lengths: Any) -> tuple[Any, Any]:
    """(high, low) halves of 2^s − 1 for s = ``lengths`` ∈ [1, 64] (``int64``, per element)."""
    one = xp.ones_like(lengths)
    high = xp.clip(lengths - 32, min=0, max=32)
    low = xp.clip(lengths, min=0, max=32)
    return (one << high) - 1, (one << low) - 1


def _respond(
    library: ArrayLibrary,
    words: DeviceWords,
    value: tuple[Any, Any],
    lengths: Any,
    threshold64: int,
) -> tuple[Any, Any]:
    """(r, y) as 64-bit words: r uniform on [2^s], y = 1{H[r, v] = +1} flipped below T."""
    xp = library.xp
    n = int(lengths.shape[0])
    r = xp.reshape(xp.astype(words.take(2 * n), xp.int64), (n, 2))
    flips = xp.reshape(xp.astype(words.take(2 * n), xp.int64), (n, 2))
    mask_high, mask_low = _masks(xp, lengths)
    r_high, r_low = r[:, 0] & mask_high, r[:, 1] & mask_low
    odd = odd_parity(r_high & value[0]) != odd_parity(r_low & value[1])
    flip = below_64(xp, flips[:, 0], flips[:, 1], threshold64)
    y = xp.astype(xp.logical_not(odd) != flip, xp.int64)
    return _join(library, r_high, r_low), _join(library, xp.zeros_like(y), y)


def tree_reports(
    library: ArrayLibrary,
    values: Any,
    *,
    bits: int,
    prefix_bits: tuple[int, ...],
    tree_threshold64: int,
    final_threshold64: int,
    rng: Any,
    owner: str,
    field: str = "values",
) -> Any:
    """TreeHist reports (t, r, y, r′, y′) of L-bit integer items ``values`` (shape s → s +
    (5,)), ``uint64``, on their device; ``prefix_bits`` = (s_0, s_1, …)."""
    require_64_bit(library, owner=owner, field=field)  # decided by the library, before values
    words = device_words(library, rng, owner=owner)  # the rng checked; no word drawn yet
    high, low = _halves(library, values, bits, owner=owner, field=field)
    xp, device = library.xp, library.device
    n = int(high.shape[0])
    level = xp.astype(uniform_below(words, n, len(prefix_bits)), xp.int64)
    lengths = xp.take(xp.asarray(list(prefix_bits), dtype=xp.int64, device=device), level)
    prefix = _shift_right(xp, high, low, bits - lengths)
    r, y = _respond(library, words, prefix, lengths, tree_threshold64)
    full = xp.full((n,), bits, dtype=xp.int64, device=device)
    r_final, y_final = _respond(library, words, (high, low), full, final_threshold64)
    reports = xp.stack(
        [_join(library, xp.zeros_like(level), level), r, y, r_final, y_final], axis=1
    )
    if library.name == "torch":
        reports = reports.view(xp.uint64)
    return xp.reshape(reports, (*tuple(values.shape), 5))


def _agrees(library: ArrayLibrary, r: Any, y: Any, value: tuple[Any, Any], lengths: Any) -> Any:
    """(whether r lies in [2^s] and y is a bit, whether y is 1{H[r, v] = +1}) of 64-bit words
    r and y against v's ``int64`` halves, s = ``lengths``."""
    xp = library.xp
    r_high, r_low = (xp.astype(half, xp.int64) for half in _split(library, r))
    valid, bit = _index(library, y, 2)
    mask_high, mask_low = _masks(xp, lengths)
    valid = valid & ((r_high & ~mask_high) == 0) & ((r_low & ~mask_low) == 0)
    odd = odd_parity(r_high & value[0]) != odd_parity(r_low & value[1])
    return valid, xp.logical_not(odd) == (bit == 1)


def tree_log_probability(
    library: ArrayLibrary,
    outputs: Any,
    items: Any,
    *,
    bits: int,
    prefix_bits: tuple[int, ...],
    bases: tuple[float, ...],
    log_terms: tuple[tuple[float, float], tuple[float, float]],
    owner: str,
) -> Any:
    """TreeHist's log P[(t, r, y, r′, y′) | x] of reports (…, 5) and L-bit integer items x
    (broadcasting over …), float64 on their device, by the host's operations in its order:
    ``bases[t]`` (the host's −ln(levels) − (s_t + L)·ln 2), plus the tree part's
    ``log_terms[0]`` = (ln(1 − φ), ln φ), the first where y = 1{H[r, v_t] = +1} for the prefix
    v_t = x >> (L − s_t), then the final part's ``log_terms[1]`` the same way for r′, y′ and x;
    −inf for a t ≥ levels, a y or y′ ≥ 2, an r ≥ 2^{s_t} or an r′ ≥ 2ᴸ. Refused as
    :func:`~dpkit.tensors.prefixes.scored_items` says."""
    xp, device = library.xp, library.device
    rows, high, low, shape = scored_items(
        library, outputs, items, bits=bits, layout="t, r, y, r′ and y′", owner=owner
    )
    valid, level = _index(library, rows[:, 0], len(prefix_bits))
    level = xp.where(valid, level, xp.zeros_like(level))
    lengths = xp.take(xp.asarray(list(prefix_bits), dtype=xp.int64, device=device), level)
    total = xp.take(xp.asarray(list(bases), dtype=xp.float64, device=device), level)
    full = xp.full(lengths.shape, bits, dtype=xp.int64, device=device)
    prefix = _shift_right(xp, high, low, bits - lengths)
    for (r, y), value, width, (agree_term, other_term) in zip(
        ((rows[:, 1], rows[:, 2]), (rows[:, 3], rows[:, 4])),
        (prefix, (high, low)),
        (lengths, full),
        log_terms,
        strict=True,
    ):
        fits, agree = _agrees(library, r, y, value, width)
        valid = valid & fits
        on, off = (
            xp.asarray(term, dtype=xp.float64, device=device) for term in (agree_term, other_term)
        )
        total = total + xp.where(agree, on, off)
    minus = xp.asarray(-float("inf"), dtype=xp.float64, device=device)
    return xp.reshape(xp.where(valid, total, minus), shape)
