"""Vectors by sampled attributes (``pm_multi``, ``hm_multi``) on an accelerator's arrays: the
CPU's law, to the bit; and the draw of k of d attributes they share with ``multibit``.

The laws are the CPU path's (the plugins ``pm_multi`` and ``hm_multi``; Wang, Xiao, Yang, Zhao,
Hu, Chen, Lin, Shen & Li 2019, "Collecting and Analyzing Multidimensional Data with Local
Differential Privacy", ICDE, arXiv:1907.00782, §IV, Algorithm 4): a user with t ∈ [−1, 1]^d
draws k of the d attributes uniformly without replacement and reports, for each drawn
attribute j, (d/k)·y_j with y_j the one-dimensional piecewise or hybrid mechanism at ε/k
(:mod:`dpkit.tensors.piecewise`), and 0 for the others; on the data's scale, centre + scale·
(that).

**The draw of the attributes** (:func:`draw_attributes`, also the multi-bit mechanism's,
:mod:`dpkit.tensors.multibit`) is the CPU's partial Fisher–Yates shuffle
(:func:`dpkit_ldp.sampled.choose_attributes`): in round i = 0 … k − 1 every row swaps position
i of its order of the d attributes with position i + J, J uniform on [0, d − i), and the
attribute it swaps into position i is its i-th drawn one. J is the CPU's exact uniform integer
(:func:`dpkit.randomness._words.uniform_below`): a 64-bit word w, rejected when
w < 2⁶⁴ mod (d − i) (then drawn again), gives J = w mod (d − i). On the device w is two 32-bit
words (high, low): w mod m = ((high mod m)·(2³² mod m) + low mod m) mod m in ``int64`` (every
factor is below m ≤ 2¹², so nothing overflows), and as 2⁶⁴ mod m < m < 2³², w is rejected
exactly when high = 0 and low < 2⁶⁴ mod m. For n rows the k rounds read 64-bit words 0 … kn − 1
(row r's J in round i: word i·n + r, the CPU's ``integers(0, d − i, size=n)``), checked at
once; when a word is rejected (probability (2⁶⁴ mod (d − i))/2⁶⁴ < 2⁻⁵² a word, not expected in
any run) the rounds are replayed in the CPU's order: round i's n words, then fresh words for its
rejected ones, in index order, round by round, then round i + 1's n words. Whether a word was
rejected depends on the random words only, never on the values. The draw takes exactly the
words the CPU takes, so the next draw starts where the CPU's does.

**The reports.** After the draw, the drawn values (row r's c-th drawn attribute at r·k + c, the
CPU's order) are released by the one-dimensional mechanism at ε/k from the next words, as the
CPU's ``piecewise_sample`` / ``hybrid_sample`` called on them: secure mode, the CPU's lattice
release and (hybrid) branch and Duchi et al.'s report, word for word
(:func:`~dpkit.tensors.piecewise.piecewise_release`,
:func:`~dpkit.tensors.piecewise.hybrid_release`); so the CPU's sampler fed the same 64-bit
words, in order, gives the same reports, bit for bit. Fast mode (a ``torch.Generator`` or a
numpy ``Generator``): the same draw on the fast words (an exactly uniform k-subset in uniform
order, the CPU's fast law, not its numpy bits) and the one-dimensional fast laws. A report is
centre + scale·((d/k)·y) for a drawn attribute and centre + scale·0 for the others, the CPU's
float64 operations in its order.

**Values.** As the CPU's ``randomize``: an array whose last axis holds the d values of a user
(any leading shape), of real numbers (booleans, integers, floats, read as float64), each in
[lower, upper]. A wrong last axis is an :class:`~dpkit.errors.InvalidData` decided from the
shape, a non-real dtype one decided from the dtype, and NaN or a value outside the interval one
decided on the device (the message quotes no value), all before any word is drawn. The exact law
needs float64 and int64 arrays (JAX only with x64: decided from the library first). The work is
k rounds of a few operations on an (n, d) array, then the one-dimensional release of nk values.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from dpkit.errors import InvalidData
from dpkit.tensors.device_random import require_64_bit
from dpkit.tensors.exact import WordPairs
from dpkit.tensors.lattice import LatticeLaw, standard_values
from dpkit.tensors.libraries import ArrayLibrary, StandardUnits
from dpkit.tensors.piecewise import hybrid_release, piecewise_release

__all__ = ["draw_attributes", "hybrid_multi_reports", "piecewise_multi_reports"]

_TWO_32 = 1 << 32
_TWO_64 = 1 << 64

#: The next ``count`` 64-bit words of a call, in order, as (high, low) ``int64`` halves.
Take = Callable[[int], tuple[Any, Any]]


class _Read:
    """The 64-bit words a draw has taken, by position from its first, extended from ``take``."""

    def __init__(self, xp: Any, high: Any, low: Any, take: Take) -> None:
        self._xp, self._take = xp, take
        self.high, self.low = high, low

    def halves(self, start: int, count: int) -> tuple[Any, Any]:
        short = start + count - int(self.high.shape[0])
        if short > 0:
            high, low = self._take(short)
            self.high = self._xp.concat([self.high, high])
            self.low = self._xp.concat([self.low, low])
        return self.high[start : start + count], self.low[start : start + count]


def _modulo(high: Any, low: Any, modulus: Any) -> Any:
    """(high·2³² + low) mod m for 32-bit halves and moduli m ≤ 2¹² (int64 arrays, broadcast)."""
    return ((high % modulus) * (_TWO_32 % modulus) + low % modulus) % modulus


def _rejected(high: Any, low: Any, limit: Any) -> Any:
    """high·2³² + low < limit, for limits 2⁶⁴ mod m < 2³²: the CPU's rejected words."""
    return (high == 0) & (low < limit)


def _host_indices(library: ArrayLibrary, mask: Any) -> Any:
    (found,) = library.xp.nonzero(mask)
    return np.asarray(library.small_to_host(found), dtype=np.int64)


def _offsets(library: ArrayLibrary, take: Take, n: int, d: int, k: int) -> Any:
    """(k, n) ``int64`` offsets J (round i: uniform on [0, d − i)) from the CPU's words, taking
    exactly the words the CPU takes. One check on the device in the common case; the CPU's
    redraws, round by round, when a word is rejected."""
    xp, device = library.xp, library.device
    moduli = [d - i for i in range(k)]
    modulus = xp.reshape(xp.asarray(moduli, dtype=xp.int64, device=device), (k, 1))
    limit = xp.reshape(
        xp.asarray([_TWO_64 % q for q in moduli], dtype=xp.int64, device=device), (k, 1)
    )
    first_high, first_low = take(k * n)
    high, low = (xp.reshape(half, (k, n)) for half in (first_high, first_low))
    if not bool(xp.any(_rejected(high, low, limit))):
        return _modulo(high, low, modulus)
    # The CPU's order: round i's n words, then fresh words for its rejected ones, in rounds.
    read = _Read(xp, first_high, first_low, take)
    positions = np.empty((k, n), dtype=np.int64)
    cursor = 0
    for i, q in enumerate(moduli):
        row = np.arange(cursor, cursor + n, dtype=np.int64)
        cursor += n
        high, low = read.halves(int(row[0]), n)
        bad = _host_indices(library, _rejected(high, low, _TWO_64 % q))
        while bad.size:
            fresh = np.arange(cursor, cursor + bad.size, dtype=np.int64)
            cursor += bad.size
            row[bad] = fresh
            high, low = read.halves(int(fresh[0]), int(bad.size))
            bad = bad[_host_indices(library, _rejected(high, low, _TWO_64 % q))]
        positions[i] = row
    index = xp.asarray(positions.reshape(-1), device=device)
    high, low = (xp.reshape(xp.take(half, index), (k, n)) for half in (read.high, read.low))
    return _modulo(high, low, modulus)


def draw_attributes(library: ArrayLibrary, take: Take, n: int, d: int, k: int) -> tuple[Any, Any]:
    """The CPU's partial Fisher–Yates draw of ``k`` of ``d`` attributes for each of ``n`` rows
    (module docstring), from the 64-bit words ``take`` hands out in order (exactly as many as
    the CPU's ``choose_attributes`` reads): the (n, k) ``int64`` drawn attributes in draw order
    and the (n, d) slot of each attribute (its draw number, or −1)."""
    xp, device = library.xp, library.device
    offsets = _offsets(library, take, n, d, k)
    columns = xp.reshape(xp.arange(d, dtype=xp.int64, device=device), (1, d))
    rows = xp.reshape(xp.arange(n, dtype=xp.int64, device=device) * d, (n, 1))
    order = xp.broadcast_to(columns, (n, d))
    slot = xp.full((n, d), -1, dtype=xp.int64, device=device)
    drawn = []
    for i in range(k):
        j = xp.reshape(offsets[i, :], (n, 1)) + i  # the position swapped with position i
        picked = xp.take(xp.reshape(order, (-1,)), xp.reshape(rows + j, (-1,)))
        here = xp.reshape(order[:, i], (n, 1))
        # Position j takes position i's attribute; position i (never read again) is dropped.
        order = xp.where(columns == j, here, order)
        picked = xp.reshape(picked, (n, 1))
        slot = xp.where(columns == picked, xp.asarray(i, dtype=xp.int64, device=device), slot)
        drawn.append(picked)
    return xp.concat(drawn, axis=1), slot


#: The one-dimensional release of the drawn values: (words, secure, flat t) ↦ flat y.
Release = Callable[[WordPairs, bool, Any], Any]


def _sampled_reports(
    library: ArrayLibrary,
    values: Any,
    *,
    dimension: int,
    sampled: int,
    units: StandardUnits,
    release: Release,
    rng: Any,
    owner: str,
    field: str,
) -> Any:
    xp, device = library.xp, library.device
    require_64_bit(
        library, owner=owner, field=field, needs="the exact law needs float64 and 64-bit integers"
    )  # decided by the library, before values
    shape = tuple(int(size) for size in values.shape)
    d, k = dimension, sampled
    if not 1 <= k <= d:
        raise ValueError(f"sampled {k} outside [1, dimension={d}]")
    if not shape or shape[-1] != d:
        raise InvalidData(
            f"{owner}: {field} must have {d} columns (one row per user), got shape {shape}",
            field=field,
        )
    pairs, secure, t = standard_values(
        library,
        values,
        rng,
        units=units,
        standard=(-1.0, 1.0),
        owner=owner,
        field=field,
    )
    n = math.prod(shape[:-1])
    if n == 0:
        return xp.zeros(shape, dtype=xp.float64, device=device)
    drawn, slot = draw_attributes(library, pairs.take, n, d, k)
    rows = xp.reshape(xp.arange(n, dtype=xp.int64, device=device), (n, 1))
    chosen_t = xp.take(t, xp.reshape(rows * d + drawn, (-1,)))  # row r's c-th: r·k + c
    y = (d / k) * release(pairs, secure, chosen_t)  # the CPU's (d/k)·y
    spread = xp.take(y, xp.reshape(rows * k + xp.maximum(slot, 0), (-1,)))
    zero = xp.asarray(0.0, dtype=xp.float64, device=device)
    standard = xp.where(xp.reshape(slot, (-1,)) >= 0, spread, zero)
    return xp.reshape(units.centre + units.scale * standard, shape)


def piecewise_multi_reports(
    library: ArrayLibrary,
    values: Any,
    *,
    dimension: int,
    sampled: int,
    units: StandardUnits,
    epsilon: float,
    lattice: LatticeLaw,
    rng: Any,
    owner: str,
    field: str = "values",
) -> Any:
    """``pm_multi``'s reports of ``values`` (last axis: the ``dimension`` values of a user; on
    their device): ``sampled`` attributes per user drawn uniformly without replacement and
    reported by the piecewise mechanism at ``epsilon`` (the per-attribute ε/k; secure mode: the
    release on ``lattice``, the lattice at ε/k), scaled by d/k; float64, the same shape."""
    release = functools.partial(piecewise_release, epsilon=epsilon, lattice=lattice)
    return _sampled_reports(
        library,
        values,
        dimension=dimension,
        sampled=sampled,
        units=units,
        release=release,
        rng=rng,
        owner=owner,
        field=field,
    )


def hybrid_multi_reports(
    library: ArrayLibrary,
    values: Any,
    *,
    dimension: int,
    sampled: int,
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
    """``hm_multi``'s reports of ``values``: as :func:`piecewise_multi_reports` with the hybrid
    mechanism at ``epsilon`` (the per-attribute ε/k; its ``alpha``, Duchi et al.'s ``bound``
    and ``lie_threshold64`` at ε/k, as :func:`~dpkit.tensors.piecewise.hybrid_reports` takes
    them); float64, the same shape."""
    release = functools.partial(
        hybrid_release,
        epsilon=epsilon,
        alpha=alpha,
        bound=bound,
        lattice=lattice,
        lie_threshold64=lie_threshold64,
    )
    return _sampled_reports(
        library,
        values,
        dimension=dimension,
        sampled=sampled,
        units=units,
        release=release,
        rng=rng,
        owner=owner,
        field=field,
    )
