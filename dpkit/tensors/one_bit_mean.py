"""1BitMean with α-point rounding on an accelerator's arrays: the CPU's law, to the bit.

The law is the CPU path's (Ding, Kulkarni & Yekhanin 2017, "Collecting Telemetry Data
Privately", NeurIPS, §2.1 and §3; the plugin ``one_bit_mean``): a value x ∈ [lower, upper] is
rounded to the point t = min(s, ⌊u + α⌋), u = s·clip((x − centre)/scale, 0, 1) (centre = lower,
scale = upper − lower, as the mechanism gives them), with α
uniform on the 2⁻⁵³ grid (:func:`~dpkit.tensors.duchi.uniform_53`, as ``Generator.random`` and
:meth:`~dpkit.SecureRandom.random` draw it), and reported as the bit ``w < T_t`` for a uniform
64-bit word w and T_t = T_0 + t·D, the mechanism's integer thresholds. Both are computed as on
the CPU: u and ⌊u + α⌋ by the same IEEE 754 operations in float64, and the comparison of w with
T_t exactly, on 32-bit halves, T_t's halves formed in ``int64`` from those of T_0 and D
(t·D_lo < 2²⁰·2³²: no overflow). So P[b = 1 | t] = T_t/2⁶⁴ on both paths, the mechanism's
``bit_probability``, and the same words give the same bits. Fast and secure mode differ only in
where the words come from (:mod:`dpkit.tensors.device_random`).

**Words.** For n values: words 2i (high half) and 2i + 1 (low half) of the call's stream are
value i's offset α; words 2n + 2i and 2n + 2i + 1 its bit word.

**Values and reports.** Real numbers (booleans, integers or floats, read as float64), each in
[lower, upper]; NaN or a value outside is an :class:`~dpkit.errors.InvalidData` (the message
quotes no value). The reports are ``uint8`` bits of the values' shape (with T memoized copies
on a last axis of T). float64 and int64 are needed: JAX without x64 is refused before any value
is read.
"""

from __future__ import annotations

from typing import Any

from dpkit.errors import InvalidData
from dpkit.tensors.device_random import device_words, require_64_bit
from dpkit.tensors.duchi import uniform_53
from dpkit.tensors.libraries import ArrayLibrary, reals_within

__all__ = ["one_bit_counts", "one_bit_reports"]

_TWO_32 = 1 << 32
_MASK = _TWO_32 - 1


def one_bit_reports(
    library: ArrayLibrary,
    values: Any,
    *,
    lower: float,
    upper: float,
    centre: float,
    scale: float,
    intervals: int,
    thresholds: tuple[int, int],
    repeats: int,
    rng: Any,
    owner: str,
    field: str = "values",
) -> Any:
    """1BitMean bits of ``values`` (any shape, on their device): ``uint8``, 1 with probability
    (T_0 + t·D)/2⁶⁴ at the rounded point t, ``thresholds`` = (T_0, D)."""
    xp = library.xp
    require_64_bit(library, owner=owner, field=field)  # decided by the library, before values
    words = device_words(library, rng, owner=owner)  # the rng checked; no word drawn yet
    x = reals_within(library, values, lower, upper, owner=owner, field=field)
    n = int(x.shape[0])
    u = xp.clip((x - centre) / scale, 0.0, 1.0) * intervals  # the CPU's, op for op
    drawn = xp.astype(words.take(4 * n), xp.int64)
    offsets = uniform_53(xp, drawn[0 : 2 * n : 2], drawn[1 : 2 * n : 2])
    t = xp.astype(xp.clip(xp.floor(u + offsets), 0.0, float(intervals)), xp.int64)
    low, step = thresholds
    # T_t = T_0 + t·D on halves: T_lo = (T_0,lo + t·D_lo) mod 2³², T_hi = T_0,hi + t·D_hi + carry.
    partial = (low & _MASK) + t * (step & _MASK)
    threshold_low = partial & _MASK
    threshold_high = (low >> 32) + t * (step >> 32) + (partial >> 32)
    high, word_low = drawn[2 * n :: 2], drawn[2 * n + 1 :: 2]
    ones = (high < threshold_high) | ((high == threshold_high) & (word_low < threshold_low))
    bits = xp.reshape(xp.astype(ones, xp.uint8), tuple(values.shape))
    if repeats > 1:  # the memoized copies: one draw, repeated
        shape = (*tuple(values.shape), repeats)
        bits = xp.astype(xp.broadcast_to(bits[..., None], shape), xp.uint8, copy=True)
    return bits


def one_bit_counts(
    library: ArrayLibrary, reports: Any, *, owner: str, field: str = "reports"
) -> tuple[int, int]:
    """(number of ones, number of reports) of a 1-D array of 0/1 bits, counted on the device."""
    xp = library.xp
    if not xp.isdtype(reports.dtype, ("bool", "integral", "real floating")):
        raise InvalidData(
            f"{owner}: {field} must be bits 0/1, got a {library.name} array of {reports.dtype}",
            field=field,
        )
    if reports.ndim != 1:
        raise InvalidData(
            f"{owner}: {field} must be a 1-D array, one bit per device (reports[:, t] of "
            f"memoized ones); got shape {tuple(reports.shape)}",
            field=field,
        )
    if reports.dtype == xp.bool:
        reports = xp.astype(reports, xp.int64)
    if bool(xp.any((reports != 0) & (reports != 1))):
        raise InvalidData(f"{owner}: {field} must be bits 0/1, with no other values", field=field)
    ones = library.small_to_host(xp.sum(xp.astype(reports == 1, xp.int64)))
    return int(ones), int(reports.shape[0])
