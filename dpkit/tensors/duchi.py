"""Duchi et al.'s one-value mean mechanism on an accelerator's arrays: the CPU's law, to the bit.

The law is the CPU path's (Duchi, Jordan & Wainwright 2018, "Minimax Optimal Procedures for
Locally Private Estimation", JASA 113(521), §4.2; the plugin ``duchi``): a value x of
[lower, upper], in standard units t = clip((x − centre)/scale, −1, 1), is reported as
centre + scale·B with probability 1/2 + t/(2B) and as centre − scale·B otherwise,
B = (e^ε + 1)/(e^ε − 1).

**Secure mode** draws it as the CPU does: t is rounded to +1 when u < (1 + t)/2, u uniform on
the 2⁻⁵³ grid, and the rounded sign is then flipped (binary randomized response) when a uniform
64-bit word is below T = :func:`~dpkit.randomness.secure_rng.lie_threshold` (ε, 2). Both
comparisons are exact, as on the CPU:

* u = m·2⁻⁵³ with m the top 53 bits of the 64-bit word high·2³² + low, i.e.
  m = high·2²¹ + ⌊low/2¹¹⌋ (:func:`uniform_53`): below 2⁵³, so m is an exact ``int64`` and an
  exact double, and the power-of-two scaling is exact. (1 + t)/2 is computed in float64 by the
  operations numpy performs, each rounded by IEEE 754 alike on any device, so ``u < (1 + t)/2``
  decides every word as the CPU would: P[up] = ⌈(1 + t)/2·2⁵³⌉/2⁵³.
* No array library offers portable 64-bit unsigned arithmetic (torch has none for ``uint64``),
  and a 64-bit word is not a double; the word is compared with T on its 32-bit halves
  (:func:`below_64`): high < T_hi, or high = T_hi and low < T_lo, with T = T_hi·2³² + T_lo.
  The lie probability is T/2⁶⁴ ≥ 1/(e^ε + 1), the CPU's, not rounded to the 2⁻³² grid as the
  lies of :mod:`dpkit.tensors.categories` are.

So P[+ | t] = P[up]·(1 − T/2⁶⁴) + (1 − P[up])·T/2⁶⁴ on both paths, and the same words give the
same reports.

**Fast mode** (a ``torch.Generator`` or a numpy ``Generator``): one uniform u as above against
the float P[+ | t] = ((1 + t) + (1 − t)e^{−ε})/(2(1 + e^{−ε})), as the CPU's fast mode.

**Words.** For n values: words 2i and 2i + 1 of the call's stream are the (high, low) halves of
value i's uniform; in secure mode words 2n + 2i and 2n + 2i + 1 are those of its lie word.

**Values and reports.** As the CPU's ``randomize``: real numbers (booleans, integers or
floats, read as float64), each in [lower, upper]; NaN or a value outside is an
:class:`~dpkit.errors.InvalidData` (one pass on the device; the message quotes no value). The
exact law needs float64 and int64 arrays, which JAX enables only with x64: that is decided from
the library, before any value is read. The reports are float64 whatever the input's dtype, as
the CPU path returns them (a host tensor gets float64 reports too), and their two values are
computed on the host by the CPU's own arithmetic, so they are the CPU's to the bit.
"""

from __future__ import annotations

import math
from typing import Any

from dpkit.tensors.device_random import below, device_words, require_64_bit
from dpkit.tensors.libraries import ArrayLibrary, StandardUnits, reals_within

__all__ = ["below_64", "duchi_reports", "uniform_53"]

_TWO_32 = 1 << 32
_UNIT = 2.0**-53


def uniform_53(xp: Any, high: Any, low: Any) -> Any:
    """m·2⁻⁵³ in float64, m = ⌊(high·2³² + low)/2¹¹⌋ the top 53 bits of the 64-bit word whose
    32-bit halves are ``high`` and ``low`` (exact: m < 2⁵³)."""
    m = xp.astype(high, xp.int64) * (1 << 21) + xp.astype(low >> 11, xp.int64)
    return xp.astype(m, xp.float64) * _UNIT


def below_64(xp: Any, high: Any, low: Any, threshold: int) -> Any:
    """high·2³² + low < ``threshold`` for 32-bit words ``high`` and ``low`` and an integer
    threshold in [0, 2⁶⁴], compared exactly on the halves."""
    import array_api_compat

    threshold_high, threshold_low = divmod(int(threshold), _TWO_32)
    smaller = below(xp, high, threshold_high)
    if threshold_high >= _TWO_32:  # threshold 2⁶⁴: every word (and no uint32 equals 2³²)
        return smaller
    device = array_api_compat.device(high)
    tied = high == xp.asarray(threshold_high, dtype=high.dtype, device=device)
    return smaller | (tied & below(xp, low, threshold_low))


def duchi_reports(
    library: ArrayLibrary,
    values: Any,
    *,
    units: StandardUnits,
    reports: tuple[float, float],
    epsilon: float,
    lie_threshold64: int,
    rng: Any,
    owner: str,
    field: str = "values",
) -> Any:
    """Duchi et al.'s reports of ``values`` (any shape, on their device): ``reports[1]``
    (centre + scale·B) with probability 1/2 + t/(2B), else ``reports[0]``; float64, same
    shape. Secure mode: the CPU's rounding and its lie threshold ``lie_threshold64``, exactly."""
    xp, device = library.xp, library.device
    require_64_bit(
        library, owner=owner, field=field, needs="the exact law needs float64 and 64-bit integers"
    )  # decided by the library, before values
    words = device_words(library, rng, owner=owner)
    x = reals_within(library, values, units.lower, units.upper, owner=owner, field=field)
    t = xp.clip((x - units.centre) / units.scale, -1.0, 1.0)  # the CPU's standard units, op for op
    n = int(x.shape[0])
    if words.secure:
        drawn = xp.reshape(words.take(4 * n), (2, n, 2))
        up = uniform_53(xp, drawn[0, :, 0], drawn[0, :, 1]) < (1.0 + t) / 2.0
        plus = up != below_64(xp, drawn[1, :, 0], drawn[1, :, 1], lie_threshold64)
    else:
        drawn = xp.reshape(words.take(2 * n), (n, 2))
        tail = math.exp(-epsilon)
        probability = ((1.0 + t) + (1.0 - t) * tail) / (2.0 * (1.0 + tail))
        plus = uniform_53(xp, drawn[:, 0], drawn[:, 1]) < probability
    minus_report, plus_report = (
        xp.asarray(report, dtype=xp.float64, device=device) for report in reports
    )
    return xp.reshape(xp.where(plus, plus_report, minus_report), tuple(values.shape))
