"""The piecewise and hybrid mechanisms on an accelerator's arrays: the CPU's laws, to the bit.

The laws are the CPU path's (the plugins ``pm`` and ``hm``). **Piecewise** (Wang, Xiao, Yang,
Zhao, Hu, Chen, Lin, Shen & Li 2019, "Collecting and Analyzing Multidimensional Data with Local
Differential Privacy", ICDE, arXiv:1907.00782, §III-B, Algorithm 2): for t ∈ [−1, 1], with
C = 1/tanh(ε/4), the report y ∈ [−C, C] is uniform on the band [l(t), l(t) + C − 1],
l(t) = (C + 1)/2·t − (C − 1)/2, with probability e^{ε/2}/(e^{ε/2} + 1), and uniform on the rest
of [−C, C] otherwise. **Hybrid** (ibid., §III-C): the piecewise report with probability α, else
Duchi et al.'s ±B (:mod:`dpkit.tensors.duchi`), B = 1/tanh(ε/2), α given by the plugin.

**Secure mode** draws as the CPU does, from the device's ChaCha20 words read as 64-bit words in
the CPU's order (:mod:`dpkit.tensors.lattice`): the piecewise report is the lattice release of
:class:`~dpkit.tensors.lattice.LatticeLaw` (the plugin's ``PiecewiseLattice``, in public
numbers), exactly as on the CPU. The hybrid branch is one 64-bit word per value below
⌈α·2⁶⁴⌉ (:func:`~dpkit.randomness.secure_rng.probability_threshold`, rounded up, as the CPU's
``bernoulli``); then the piecewise branch's values draw their lattice release, in index order,
and the others Duchi et al.'s report: t rounded up when u < (1 + t)/2 (u the top 53 bits of a
word times 2⁻⁵³), flipped when a word is below the CPU's 64-bit lie threshold. The CPU's
sampler fed the same 64-bit words gives the same reports, bit for bit.

**Fast mode** (a ``torch.Generator`` or a numpy ``Generator``): the continuous laws with
uniforms on the 2⁻⁵³ grid, by the CPU's fast formulas (band or not against e^{ε/2}/(e^{ε/2} + 1),
then a point of the band, or of the rest of [−C, C] taken as one interval of length C + 1; the
hybrid's branch against α and Duchi et al.'s report against its float P[+B | t]).

**Words.** 64-bit word k is w[2k]·2³² + w[2k + 1] for the call's 32-bit words w. Secure,
piecewise: the lattice's (:mod:`dpkit.tensors.lattice`); hybrid: n branch words, then the
lattice's words of the piecewise branch's values, then the rounding words of the others, then
their lie words. Fast, for n values: piecewise, words 0 … n − 1 the band coins and n … 2n − 1
the points; hybrid, word i the branch, then the piecewise words of all values (2n), then
the Duchi words of all values (n), each value keeping its branch's.

**Values and reports.** As duchi's device path: real numbers in [lower, upper] checked on the
device before any word is used (:class:`~dpkit.errors.InvalidData` quoting no value), float64
and int64 required (refused from the library alone, for JAX without x64), reports float64 of
the input's shape, centre + scale·y computed by the CPU's operations.
"""

from __future__ import annotations

import math
from typing import Any

from dpkit.randomness.secure_rng import probability_threshold
from dpkit.tensors.duchi import uniform_53
from dpkit.tensors.exact import WordPairs, _count
from dpkit.tensors.lattice import (
    LatticeLaw,
    _draw,
    bernoulli_64,
    everything,
    lattice_release,
    standard_values,
)
from dpkit.tensors.libraries import ArrayLibrary, StandardUnits

__all__ = ["hybrid_release", "hybrid_reports", "piecewise_release", "piecewise_reports"]


def _uniforms(pairs: WordPairs, count: int) -> Any:
    high, low = pairs.take(count)
    return uniform_53(pairs.xp, high, low)


def _piecewise_fast(pairs: WordPairs, t: Any, epsilon: float) -> Any:
    """The continuous law, by the CPU's fast formulas (``dpkit_ldp.piecewise``)."""
    n = int(t.shape[0])
    c = 1.0 / math.tanh(epsilon / 4.0)
    width = 2.0 / math.expm1(epsilon / 2.0)  # C − 1, without the cancellation
    in_band = _uniforms(pairs, n) < 1.0 / (1.0 + math.exp(-epsilon / 2.0))
    u = _uniforms(pairs, n)
    left = (1.0 + width / 2.0) * t - width / 2.0
    band = left + width * u
    w = (2.0 + width) * u  # a point of [−C, l) ∪ (r, C], of total length C + 1
    below = left + c
    outside = pairs.xp.where(w < below, w - c, w - below + left + width)
    return pairs.xp.where(in_band, band, outside)


def piecewise_reports(
    library: ArrayLibrary,
    values: Any,
    *,
    units: StandardUnits,
    epsilon: float,
    lattice: LatticeLaw,
    rng: Any,
    owner: str,
    field: str = "values",
) -> Any:
    """The piecewise mechanism's reports of ``values`` (any shape, on their device), float64 of
    the same shape, on the data's scale (centre + scale·y). Secure mode: the release on
    ``lattice``, as the CPU's."""
    pairs, secure, t = standard_values(
        library,
        values,
        rng,
        units=units,
        standard=(-1.0, 1.0),
        owner=owner,
        field=field,
    )
    y = piecewise_release(pairs, secure, t, epsilon=epsilon, lattice=lattice)
    return library.xp.reshape(units.centre + units.scale * y, tuple(values.shape))


def piecewise_release(
    pairs: WordPairs, secure: bool, t: Any, *, epsilon: float, lattice: LatticeLaw
) -> Any:
    """The piecewise mechanism's reports (float64, standard units) of ``t`` (a flat float64
    array in [−1, 1]) from the next words of ``pairs``, in the order the module docstring
    states. Secure mode: the release on ``lattice``, as the CPU's."""
    if secure:
        return lattice_release(pairs, t, lattice, everything(pairs.xp, t))
    return _piecewise_fast(pairs, t, epsilon)


def hybrid_reports(
    library: ArrayLibrary,
    values: Any,
    *,
    units: StandardUnits,
    epsilon: float,
    alpha: float,
    bound: float,
    lattice: LatticeLaw,
    lie_threshold64: int,
    rng: Any,
    owner: str,
    field: str = "values",
) -> Any:
    """The hybrid mechanism's reports of ``values``: the piecewise report with probability
    ``alpha``, else ±``bound`` (Duchi et al.'s B); float64 of the same shape, on the data's
    scale. Secure mode: the CPU's draws, in its order (module docstring)."""
    pairs, secure, t = standard_values(
        library,
        values,
        rng,
        units=units,
        standard=(-1.0, 1.0),
        owner=owner,
        field=field,
    )
    y = hybrid_release(
        pairs,
        secure,
        t,
        epsilon=epsilon,
        alpha=alpha,
        bound=bound,
        lattice=lattice,
        lie_threshold64=lie_threshold64,
    )
    return library.xp.reshape(units.centre + units.scale * y, tuple(values.shape))


def hybrid_release(
    pairs: WordPairs,
    secure: bool,
    t: Any,
    *,
    epsilon: float,
    alpha: float,
    bound: float,
    lattice: LatticeLaw,
    lie_threshold64: int,
) -> Any:
    """The hybrid mechanism's reports (float64, standard units) of ``t`` (a flat float64 array
    in [−1, 1]) from the next words of ``pairs``: the piecewise report with probability
    ``alpha``, else ±``bound``. Secure mode: the CPU's draws, in its order (module docstring)."""
    xp = pairs.xp
    n = int(t.shape[0])
    if secure:
        everyone = everything(xp, t)
        chosen = bernoulli_64(pairs, everyone, n, probability_threshold(alpha))
        piecewise = lattice_release(pairs, t, lattice, chosen)
        others = ~chosen
        count = n - _count(xp, chosen)
        high, low = _draw(pairs, others, count)
        up = uniform_53(xp, high, low) < (1.0 + t) / 2.0
        plus = up != bernoulli_64(pairs, others, count, lie_threshold64)
    else:
        chosen = _uniforms(pairs, n) < alpha
        piecewise = _piecewise_fast(pairs, t, epsilon)
        tail = math.exp(-epsilon)
        probability = ((1.0 + t) + (1.0 - t) * tail) / (2.0 * (1.0 + tail))
        plus = _uniforms(pairs, n) < probability
    import array_api_compat  # an extra: here only with an array of another library

    plus_report = xp.asarray(bound, dtype=xp.float64, device=array_api_compat.device(t))
    return xp.where(chosen, piecewise, xp.where(plus, plus_report, -plus_report))
