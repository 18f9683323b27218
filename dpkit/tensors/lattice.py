"""The banded mechanisms' secure lattice release on an accelerator's arrays: the CPU's, word for word.

The piecewise mechanism (Wang et al. 2019, "Collecting and Analyzing Multidimensional Data with
Local Differential Privacy", ICDE, §III-B) and the square wave (Li et al. 2020, "Estimating
Numerical Distributions under Local Differential Privacy", SIGMOD, §4) release, in secure mode,
a point of a lattice of N cells drawn exactly (the plugin's ``dpkit_ldp._lattice``): the band's
first cell s is the stochastic rounding of a position c = offset + t·stretch (⌊c⌋ + 1 when a
uniform on the 2⁻⁵³ grid is below c − ⌊c⌋, clamped to [0, N − H]); one 64-bit word below the
band threshold T puts the report in the band, at cell s + (uniform on [0, H)), otherwise at a
uniform one of the N − H cells outside it; the report is (m − shift + ½ − half)·2^e for
cell m. :class:`LatticeLaw` holds these public numbers, as the CPU computes them.

**The same draws, exactly.** Everything is decided on 64-bit words (w[2k]·2³² + w[2k + 1] for
the call's 32-bit words w, :class:`~dpkit.tensors.exact.WordPairs`) with int64 and float64
array operations, as the CPU decides it:

* the uniform is the word's top 53 bits times 2⁻⁵³ and the band coin compares the word with T
  on its 32-bit halves (:func:`~dpkit.tensors.duchi.uniform_53`,
  :func:`~dpkit.tensors.duchi.below_64`); c, ⌊c⌋ and c − ⌊c⌋ are the float64 operations numpy
  performs (each rounded by IEEE 754 alike on any device);
* the uniform integers are the CPU's rejection (:func:`~dpkit.randomness._words.uniform_below`:
  a word below 2⁶⁴ mod m is drawn again, round by round, the rejected elements in index order;
  then w mod m), with w mod m computed exactly on the halves (:func:`mod_64`, no 64-bit
  unsigned type needed);
* the words are read in the CPU's order: the n uniforms of the rounding, the n band coins, the
  uniforms of the band's elements (in index order, then their redraws), then those of the
  others. Drawing for some elements only (a *mask*: the hybrid mechanism's piecewise branch)
  hands them the next words in index order (a prefix sum and a gather), as the CPU's sampler
  called on those elements alone.

So the CPU's sampler fed the same 64-bit words returns the same cells, and the same reports to
the bit. The loops read back only how many elements a round redraws (a function of the words).
"""

from __future__ import annotations

from typing import Any

import attrs

from dpkit.tensors.device_random import device_words, require_64_bit
from dpkit.tensors.duchi import below_64, uniform_53
from dpkit.tensors.exact import WordPairs, _count, _spread
from dpkit.tensors.libraries import ArrayLibrary, StandardUnits, reals_within

__all__ = [
    "LatticeLaw",
    "bernoulli_64",
    "lattice_release",
    "mod_64",
    "standard_values",
    "uniform_below_64",
]

_TWO_64 = 1 << 64
#: The largest modulus :func:`mod_64` takes: m·2 and m + 2³² stay below 2⁶³.
MAX_MODULUS = 1 << 62


def _cells(instance: Any, attribute: Any, value: int) -> None:
    if not 2 <= value <= MAX_MODULUS:
        raise ValueError(f"{attribute.name} {value} outside [2, 2**62]")


@attrs.frozen
class LatticeLaw:
    """A banded mechanism's secure lattice, in standard units (the module docstring): the band's
    start is the stochastic rounding of ``offset + t·stretch`` clamped to [0, cells − band]; the
    band coin is a 64-bit word below ``threshold``; cell m is reported as
    ((m − shift) + ½ − half)·2^exponent, in this order of float64 operations (the CPU's)."""

    offset: float
    stretch: float
    cells: int = attrs.field(validator=_cells)
    band: int
    threshold: int
    exponent: int
    shift: int = 0
    half: float = 0.0

    def __attrs_post_init__(self) -> None:
        if not 1 <= self.band < self.cells:
            raise ValueError(f"band {self.band} must be in [1, {self.cells})")
        if not 0 <= self.threshold < _TWO_64:
            raise ValueError(f"threshold {self.threshold} outside [0, 2**64)")
        if not -1000 <= self.exponent <= 1000:  # 2^e a normal double: the scaling is exact
            raise ValueError(f"exponent {self.exponent} outside [-1000, 1000]")


def mod_64(xp: Any, high: Any, low: Any, modulus: int) -> Any:
    """(high·2³² + low) mod m, exactly, for int64 halves in [0, 2³²) and 1 ≤ m ≤ 2⁶²:
    r = high mod m is shifted up 32 bits a few bits at a time (r·2^s < 2⁶³ for r < m), reduced
    after each shift, and low is added last."""
    if not 1 <= modulus <= MAX_MODULUS:
        raise ValueError(f"modulus {modulus} outside [1, 2**62]")
    step = min(32, 63 - (modulus - 1).bit_length())  # r < 2^bits: r·2^step < 2⁶³
    r = high % modulus
    done = 0
    while done < 32:
        shift = min(step, 32 - done)
        r = (r * (1 << shift)) % modulus
        done += shift
    return (r + low) % modulus


def _draw(pairs: WordPairs, mask: Any, count: int) -> tuple[Any, Any]:
    """The next ``count`` 64-bit words, handed to the elements ``mask`` flags in index order
    (their halves; 0 elsewhere)."""
    xp = pairs.xp
    high, low = pairs.take(count)
    zeros = xp.zeros(mask.shape, dtype=xp.int64, device=pairs.device)
    return _spread(xp, mask, high, zeros), _spread(xp, mask, low, zeros)


def bernoulli_64(pairs: WordPairs, mask: Any, count: int, threshold: int) -> Any:
    """Where ``mask`` holds (``count`` elements), a word below ``threshold`` ∈ [0, 2⁶⁴]
    (:meth:`~dpkit.randomness.SecureRandom.bernoulli_threshold`: no word drawn for 2⁶⁴);
    false elsewhere."""
    if threshold >= _TWO_64:
        return mask
    high, low = _draw(pairs, mask, count)
    return mask & below_64(pairs.xp, high, low, threshold)


def uniform_below_64(pairs: WordPairs, mask: Any, count: int, modulus: int) -> Any:
    """Where ``mask`` holds (``count`` elements), an integer exactly uniform on [0, m) (int64),
    drawn as the CPU's :func:`~dpkit.randomness._words.uniform_below` draws it from the same
    words; 0 elsewhere."""
    xp = pairs.xp
    high, low = _draw(pairs, mask, count)
    limit = _TWO_64 % modulus
    if limit:  # a word below 2⁶⁴ mod m is drawn again (probability < m/2⁶⁴ a round)
        bad = mask & below_64(xp, high, low, limit)
        while redrawn := _count(xp, bad):
            fresh_high, fresh_low = pairs.take(redrawn)
            high = _spread(xp, bad, fresh_high, high)
            low = _spread(xp, bad, fresh_low, low)
            bad = bad & below_64(xp, high, low, limit)
    return mod_64(xp, high, low, modulus)


def lattice_release(pairs: WordPairs, t: Any, law: LatticeLaw, mask: Any) -> Any:
    """The lattice reports (float64, standard units) of ``t`` where ``mask`` holds, drawn as the
    CPU draws them for those elements alone (module docstring); meaningless elsewhere."""
    xp = pairs.xp
    count = _count(xp, mask)
    high, low = _draw(pairs, mask, count)
    position = law.offset + t * law.stretch
    floor = xp.floor(position)
    up = uniform_53(xp, high, low) < position - floor
    free = law.cells - law.band
    starts = xp.clip(xp.astype(floor, xp.int64) + xp.astype(up, xp.int64), min=0, max=free)
    inside = bernoulli_64(pairs, mask, count, law.threshold)
    banded = _count(xp, inside)
    within = uniform_below_64(pairs, inside, banded, law.band)
    other = uniform_below_64(pairs, mask & ~inside, count - banded, free)
    skipped = other + law.band * xp.astype(other >= starts, xp.int64)  # skip the band
    cells = xp.where(inside, starts + within, skipped)
    offset = xp.astype(cells - law.shift, xp.float64) + 0.5 - law.half
    return offset * 2.0**law.exponent


def standard_values(
    library: ArrayLibrary,
    values: Any,
    rng: Any,
    *,
    units: StandardUnits,
    standard: tuple[float, float],
    owner: str,
    field: str,
) -> tuple[WordPairs, bool, Any]:
    """(the call's 64-bit words, whether they are secure, ``values`` in standard units): the
    library's 64-bit types required first (decided by the library alone), then the values
    checked on the device (:func:`~dpkit.tensors.libraries.reals_within`, before any word is
    used), flattened and mapped as the CPU maps them: clip((x − centre)/scale, low, high), the
    ``standard`` interval being (low, high)."""
    xp = library.xp
    require_64_bit(
        library, owner=owner, field=field, needs="the exact law needs float64 and 64-bit integers"
    )
    words = device_words(library, rng, owner=owner)
    x = reals_within(library, values, units.lower, units.upper, owner=owner, field=field)
    low, high = standard
    return WordPairs(words), words.secure, xp.clip((x - units.centre) / units.scale, low, high)


def everything(xp: Any, like: Any) -> Any:
    """A mask of every element of ``like``."""
    import array_api_compat

    return xp.ones(like.shape, dtype=xp.bool, device=array_api_compat.device(like))
