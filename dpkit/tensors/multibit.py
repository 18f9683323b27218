"""The multi-bit mechanism for node features on an accelerator's arrays: the CPU's law, to the bit.

The law is the CPU path's (Sajadmanesh & Gatica-Perez 2021, "Locally Private Graph Neural
Networks", CCS, §4.1, Algorithm 1 and its rectifier, Eq. 3; the plugin ``multibit``): a node
with features x ∈ [α, β]^d draws m of its d features uniformly without replacement and reports
each drawn feature by Duchi et al.'s one-bit mechanism at ε/m (Duchi, Jordan & Wainwright 2018,
JASA 113(521), §4.2; :mod:`dpkit.tensors.duchi`), rectified: the report of a drawn feature is
centre + scale·(d/m)·(±B), B = (e^{ε/m} + 1)/(e^{ε/m} − 1), and that of the others the centre.

**The draw of the features** is the CPU's partial Fisher–Yates shuffle
(:func:`dpkit_ldp.sampled.choose_attributes`), the device's
:func:`~dpkit.tensors.sampled.draw_attributes` (shared with ``pm_multi`` and ``hm_multi``): in round i = 0 … m − 1 every node swaps position
i of its order of the d features with position i + J, J uniform on [0, d − i), and the feature
it swaps into position i is its i-th drawn feature. J is the CPU's exact uniform integer
(:func:`dpkit.randomness._words.uniform_below`): a 64-bit word w, rejected when
w < 2⁶⁴ mod (d − i) (then drawn again), gives J = w mod (d − i). On the device w is two 32-bit
words (high, low): w mod m = ((high mod m)·(2³² mod m) + low mod m) mod m in ``int64`` (every
factor is below m ≤ 2¹², so nothing overflows), and as 2⁶⁴ mod m < m < 2³², w is rejected
exactly when high = 0 and low < 2⁶⁴ mod m.

**Secure mode** then draws each drawn feature's bit as the CPU does: t rounded up when a
uniform on the 2⁻⁵³ grid is below (1 + t)/2, and the result flipped when a 64-bit word is below
the CPU's lie threshold at ε/m, both compared exactly (:func:`~dpkit.tensors.duchi.uniform_53`,
:func:`~dpkit.tensors.duchi.below_64`). **Fast mode** (a ``torch.Generator`` or a numpy
``Generator``): the features drawn as above on the fast words, and one uniform against the
float P[+ | t] = ((1 + t) + (1 − t)e^{−ε/m})/(2(1 + e^{−ε/m})), as the CPU's fast mode.

**Words.** A 64-bit word is two consecutive 32-bit words of the call's stream, (high, low). For
n nodes, 64-bit words r + i·n decide node r's J in round i (i·n … (i + 1)·n − 1: the CPU's
``integers(0, d − i, size=n)``); then, for the node's c-th drawn feature, word
mn + rm + c its uniform and (secure mode) word 2mn + rm + c its lie. A rejected word (probability
(2⁶⁴ mod (d − i))/2⁶⁴ < 2⁻⁵², not expected in any run) is drawn again as on the CPU: its
replacement is the next word after its round's, and the later rounds' and the bits' words move
on by as many; the stream then continues on words taken after the call's first ones (one more
block range of the keystream), read in order. So the CPU's sampler fed the same 64-bit words,
in order, gives the same reports. Whether a word was rejected depends on the random words only,
never on the features.

**Values and reports.** As the CPU's ``randomize``: an array whose last axis holds the d
features of a node (any leading shape), of real numbers (booleans, integers, floats, read as
float64), each in [α, β]. A wrong last axis is an :class:`~dpkit.errors.InvalidData` decided
from the shape, a non-real dtype one decided from the dtype, and NaN or a value outside
[α, β] one decided on the device (the message quotes no value), all before any word is drawn.
The exact law needs float64 and int64 arrays (JAX only with x64: decided from the library
first). The reports are float64, the input's shape, and their three values (the centre and the
two rectified levels) are computed on the host by the CPU's own arithmetic, so they are the
CPU's to the bit. The work is m rounds of a few operations on an (n, d) array.
"""

from __future__ import annotations

import math
from typing import Any

from dpkit.errors import InvalidData
from dpkit.tensors.device_random import DeviceWords, device_words, require_64_bit
from dpkit.tensors.duchi import below_64, uniform_53
from dpkit.tensors.libraries import ArrayLibrary, StandardUnits, reals_within
from dpkit.tensors.sampled import draw_attributes

__all__ = ["multibit_reports"]


class _Stream:
    """The call's 64-bit words as (high, low) ``int64`` halves on the device, handed out in
    order by ``take``; ``ensure`` reads ahead (one keystream computation for the common case)."""

    def __init__(self, library: ArrayLibrary, words: DeviceWords) -> None:
        self._xp = library.xp
        self._words = words
        empty = self._xp.zeros((0,), dtype=self._xp.int64, device=library.device)
        self.high, self.low = empty, empty
        self.position = 0

    def ensure(self, count: int) -> None:
        """At least ``count`` 64-bit words."""
        short = count - int(self.high.shape[0])
        if short <= 0:
            return
        xp = self._xp
        pairs = xp.reshape(xp.astype(self._words.take(2 * short), xp.int64), (short, 2))
        self.high = xp.concat([self.high, pairs[:, 0]])
        self.low = xp.concat([self.low, pairs[:, 1]])

    def take(self, count: int) -> tuple[Any, Any]:
        """The next ``count`` 64-bit words, in order."""
        start = self.position
        self.ensure(start + count)
        self.position += count
        return self.high[start : start + count], self.low[start : start + count]


def multibit_reports(
    library: ArrayLibrary,
    values: Any,
    *,
    dimension: int,
    sampled: int,
    units: StandardUnits,
    reports: tuple[float, float, float],
    epsilon: float,
    lie_threshold64: int,
    rng: Any,
    owner: str,
    field: str = "values",
) -> Any:
    """The multi-bit mechanism's rectified reports of ``values`` (last axis: the ``dimension``
    features of a node; on their device): ``sampled`` features per node drawn uniformly without
    replacement and reported at ``reports[2]`` (plus) or ``reports[0]`` (minus) by Duchi et
    al.'s mechanism at ``epsilon`` (the per-feature ε/m) with the lie threshold
    ``lie_threshold64``, the others at ``reports[1]`` (the centre); float64, the same shape."""
    xp, device = library.xp, library.device
    require_64_bit(
        library, owner=owner, field=field, needs="the exact law needs float64 and 64-bit integers"
    )  # decided by the library, before values
    shape = tuple(int(size) for size in values.shape)
    d, m = dimension, sampled
    if not shape or shape[-1] != d:
        raise InvalidData(
            f"{owner}: {field} must have {d} columns (one row per user), got shape {shape}",
            field=field,
        )
    x = reals_within(library, values, units.lower, units.upper, owner=owner, field=field)
    words = device_words(library, rng, owner=owner)
    n = math.prod(shape[:-1])
    if n == 0:
        return xp.zeros(shape, dtype=xp.float64, device=device)
    t = xp.reshape(
        xp.clip((x - units.centre) / units.scale, -1.0, 1.0), (-1,)
    )  # the CPU's units, op for op
    stream = _Stream(library, words)
    stream.ensure((3 if words.secure else 2) * m * n)
    drawn, slot = draw_attributes(library, stream.take, n, d, m)
    rows = xp.reshape(xp.arange(n, dtype=xp.int64, device=device), (n, 1))
    chosen_t = xp.take(t, xp.reshape(rows * d + drawn, (-1,)))  # node r's c-th: r·m + c
    up_high, up_low = stream.take(m * n)
    uniform = uniform_53(xp, up_high, up_low)
    if words.secure:
        lie_high, lie_low = stream.take(m * n)
        plus = (uniform < (1.0 + chosen_t) / 2.0) != below_64(
            xp, lie_high, lie_low, lie_threshold64
        )
    else:
        tail = math.exp(-epsilon)
        plus = uniform < ((1.0 + chosen_t) + (1.0 - chosen_t) * tail) / (2.0 * (1.0 + tail))
    minus_report, centre_report, plus_report = (
        xp.asarray(report, dtype=xp.float64, device=device) for report in reports
    )
    levels = xp.where(plus, plus_report, minus_report)
    spread = xp.take(levels, xp.reshape(rows * m + xp.maximum(slot, 0), (-1,)))
    out = xp.where(xp.reshape(slot, (-1,)) >= 0, spread, centre_report)
    return xp.reshape(out, shape)
