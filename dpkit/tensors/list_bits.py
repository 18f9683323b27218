"""The per-user neighbour-list bits on an accelerator's arrays: ``graph_rr``'s and ``graph_arr``'s
binary channel.

The law is the CPU path's (the plugins ``graph_rr`` and ``graph_arr``,
:mod:`dpkit_ldp._adjacency`; Qin et al. 2017, Section 4, and Imola, Murakami & Chaudhuri 2021
and 2022, Section 4.1): every bit a of a neighbour list is reported 1 with probability p₁ if
a = 1 and p₀ if a = 0, independently. Exactly as on the CPU, a bit takes one uniform 64-bit
word w and is reported 1 iff w < T₁ (a = 1) or w < T₀ (a = 0), with the mechanism's integer
thresholds T₁ = ⌊p₁·2⁶⁴⌋ and T₀ = ⌈p₀·2⁶⁴⌉ — not rounded to the 2⁻³² grid: the word is
compared with T on its 32-bit halves (:func:`~dpkit.tensors.duchi.below_64`), so the realised
probabilities are the CPU's, T₁/2⁶⁴ and T₀/2⁶⁴.

**Words.** Bit i of the flattened array (row-major) takes the 64-bit word of words 2i (high
half) and 2i + 1 (low half) of the call's stream (:func:`~dpkit.tensors.device_random.device_words`:
ChaCha20 on the device in secure mode, the framework's generator in fast mode). The CPU's
secure sampler fed the same 64-bit words, in that order, gives the same bits. The words are
drawn a pass of :data:`_PASS` bits at a time, in order — a pass is a whole number of ChaCha20
blocks (16 words, 8 bits), so the passes take the words of one draw — and the temporaries stay
bounded whatever the number of bits.

**Output**: booleans of the input's shape, on its device (the CPU's reports). Only this dense
form: the other encodings of the mechanisms' ``output`` parameter are ``randomize_graph``'s,
which stays on the host. The channel itself (:func:`channel_bits`) also reports the graphs'
pairs of the mechanisms' views on whole graphs (:mod:`dpkit.tensors.graph_views`).

**Checks**, as the CPU's, quoting no value: a boolean, integer or real floating dtype (decided
by the dtype alone), then every entry 0 or 1, before any word is drawn.
"""

from __future__ import annotations

from typing import Any

from dpkit.errors import InvalidData
from dpkit.tensors.device_random import DeviceWords, device_words
from dpkit.tensors.duchi import below_64
from dpkit.tensors.libraries import ArrayLibrary

__all__ = ["channel_bits", "noisy_list_bits"]

#: Bits per pass: two 32-bit words each, so at most 2²³ words (64 MiB as int64) at a time; a
#: multiple of 8, so each pass starts a block (a draw starts one) where the last ended.
_PASS = 1 << 22


def noisy_list_bits(
    library: ArrayLibrary,
    values: Any,
    *,
    one_threshold64: int,
    zero_threshold64: int,
    rng: Any,
    owner: str,
    field: str = "values",
) -> Any:
    """Every bit of ``values`` (0/1 of any shape; booleans, integers or reals) reported 1 when
    its 64-bit word is below ``one_threshold64`` (a 1) or ``zero_threshold64`` (a 0): booleans
    of the same shape, type and device."""
    xp = library.xp
    if not xp.isdtype(values.dtype, ("bool", "integral", "real floating")):
        raise InvalidData(f"{owner}: neighbour lists must hold 0/1", field=field)
    words = device_words(library, rng, owner=owner)  # the rng checked; no word drawn yet
    ones = values
    if values.dtype != xp.bool:
        if bool(xp.any((values != 0) & (values != 1))):
            raise InvalidData(f"{owner}: neighbour lists must hold 0 or 1", field=field)
        ones = values != 0
    reported = channel_bits(words, xp.reshape(ones, (-1,)), one_threshold64, zero_threshold64)
    return xp.reshape(reported, tuple(values.shape))


def channel_bits(words: DeviceWords, ones: Any, one_threshold64: int, zero_threshold64: int) -> Any:
    """The reports of the flat booleans ``ones``: bit i reported 1 when the 64-bit word of the
    next words 2i (high half) and 2i + 1 (low half) of ``words`` is below ``one_threshold64``
    (a 1) or ``zero_threshold64`` (a 0); drawn a pass of :data:`_PASS` bits at a time, in
    order. Flat booleans on the words' device."""
    library = words.library
    xp = library.xp
    n = int(ones.shape[0])
    pieces = []
    for start in range(0, n, _PASS):
        bits = ones[start : min(start + _PASS, n)]  # the standard has no slice past the end
        count = int(bits.shape[0])
        halves = xp.reshape(words.take(2 * count), (count, 2))
        high, low = halves[:, 0], halves[:, 1]
        pieces.append(
            xp.where(
                bits,
                below_64(xp, high, low, one_threshold64),
                below_64(xp, high, low, zero_threshold64),
            )
        )
    if not pieces:
        return xp.zeros((0,), dtype=xp.bool, device=library.device)
    return pieces[0] if len(pieces) == 1 else xp.concat(pieces)
