"""The square wave mechanism on an accelerator's arrays: the CPU's law, to the bit.

The law is the CPU path's (the plugin ``sw``; Li, Wang, Lopuhaä-Zwakenberg, Škorić & Li 2020,
"Estimating Numerical Distributions under Local Differential Privacy", SIGMOD,
arXiv:1912.01051, §4): for v ∈ [0, 1] (the value in standard units, (x − lower)/(upper −
lower)), the report is uniform on the band [v − b, v + b] with probability 2bp,
p = e^ε/(2b e^ε + 1), and uniform on the rest of [−b, 1 + b] (of total length 1) otherwise; b
is the plugin's half-width.

**Secure mode** draws as the CPU does, from the device's ChaCha20 words read as 64-bit words in
the CPU's order: the lattice release of :class:`~dpkit.tensors.lattice.LatticeLaw` (the plugin's
``SquareWaveLattice`` in public numbers: cells of width 2^e, the band's start the stochastic
rounding of v·2^−e, cell m reported as (m + ½ − H/2)·2^e), exactly as on the CPU
(:mod:`dpkit.tensors.lattice`): the CPU's sampler fed the same 64-bit words gives the same
reports, bit for bit.

**Fast mode** (a ``torch.Generator`` or a numpy ``Generator``): the continuous law with
uniforms on the 2⁻⁵³ grid, by the CPU's fast formulas (band or not against 2bp, then
v − b + 2b·u in the band, or u − b when u < v and u + b otherwise).

**Words.** 64-bit word k is w[2k]·2³² + w[2k + 1] for the call's 32-bit words w. Secure: the
lattice's (:mod:`dpkit.tensors.lattice`); fast, for n values: words 0 … n − 1 the band coins,
n … 2n − 1 the points.

**Values and reports.** As duchi's device path: real numbers in [lower, upper] checked on the
device before any word is used (:class:`~dpkit.errors.InvalidData` quoting no value), float64
and int64 required (refused from the library alone, for JAX without x64), reports float64 of
the input's shape, centre + scale·y computed by the CPU's operations.
"""

from __future__ import annotations

import math
from typing import Any

from dpkit.tensors.duchi import uniform_53
from dpkit.tensors.lattice import LatticeLaw, everything, lattice_release, standard_values
from dpkit.tensors.libraries import ArrayLibrary, StandardUnits

__all__ = ["square_wave_reports"]


def square_wave_reports(
    library: ArrayLibrary,
    values: Any,
    *,
    units: StandardUnits,
    epsilon: float,
    half_width: float,
    lattice: LatticeLaw,
    rng: Any,
    owner: str,
    field: str = "values",
) -> Any:
    """The square wave's reports of ``values`` (any shape, on their device), float64 of the
    same shape, on the data's scale (centre + scale·y). Secure mode: the release on
    ``lattice``, as the CPU's; fast mode: the continuous law with half-width ``half_width``."""
    pairs, secure, v = standard_values(
        library,
        values,
        rng,
        units=units,
        standard=(0.0, 1.0),
        owner=owner,
        field=field,
    )
    xp = library.xp
    if secure:
        y = lattice_release(pairs, v, lattice, everything(xp, v))
    else:
        n = int(v.shape[0])
        b = half_width
        p = 1.0 / (2.0 * b + math.exp(-epsilon))  # e^ε/(2b e^ε + 1), without overflow
        coin_high, coin_low = pairs.take(n)
        in_band = uniform_53(xp, coin_high, coin_low) < 2.0 * b * p
        u = uniform_53(xp, *pairs.take(n))
        band = v - b + 2.0 * b * u
        outside = xp.where(u < v, u - b, u + b)  # [−b, v − b) ∪ (v + b, 1 + b]
        y = xp.where(in_band, band, outside)
    return xp.reshape(units.centre + units.scale * y, tuple(values.shape))
